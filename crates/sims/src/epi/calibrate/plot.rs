//! The calibration plot: observed vs fitted vs forecast (daily deaths or weekly ILI), as a PNG (plotters' bitmap
//! backend with a bundled font, so no system font libraries are needed).

use super::dates::Date;
use plotters::prelude::*;
use std::path::Path;
use std::sync::Once;

/// DejaVu Sans (see `crates/sims/assets/README.md` for its licence).
static FONT: &[u8] = include_bytes!("../../../assets/DejaVuSans.ttf");

fn register_font() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // The bytes are a valid TrueType font (checked by the plot test); ignore a failure rather than
        // panic: text would then be missing, the curves still drawn.
        let _ = plotters::style::register_font("sans-serif", FontStyle::Normal, FONT);
    });
}

/// The curves of one calibration, all indexed by step (a day or a week) from `start`.
pub struct PlotData<'a> {
    /// Title line.
    pub title: &'a str,
    /// The y axis' label (what the values are, with units).
    pub y_label: &'a str,
    /// Date of step 0.
    pub start: Date,
    /// Days per step: 1 for daily series, 7 for weekly ones.
    pub step_days: i64,
    /// Observed (smoothed) values over training and forecast days (as many as exist).
    pub observed: &'a [f64],
    /// Fitted values over the training days.
    pub fitted: &'a [f64],
    /// Forecast values for the days after training.
    pub forecast: &'a [f64],
    /// The persistence baseline over the forecast days.
    pub persistence: &'a [f64],
    /// Forecasts of earlier prediction weeks: (first step, values), drawn thinner.
    pub earlier: &'a [(usize, Vec<f64>)],
}

/// Draws `data` into a 1000 × 560 PNG at `path`.
///
/// # Errors
/// A message naming `path` if drawing or writing fails.
pub fn write_png(path: &Path, data: &PlotData<'_>) -> Result<(), String> {
    register_font();
    draw(path, data).map_err(|e| format!("{}: cannot write the plot: {e}", path.display()))
}

/// The y axis' range `(bottom, top)` for `data`: from 0, or 1.1 × the least value when that is
/// negative (deaths may be, as reporting corrections), to 1.1 × the greatest (at least 1.1e-3);
/// non-finite values are ignored.
pub fn y_range(data: &PlotData<'_>) -> (f64, f64) {
    let values = || {
        [data.observed, data.fitted, data.forecast, data.persistence]
            .into_iter()
            .chain(data.earlier.iter().map(|(_, s)| s.as_slice()))
            .flat_map(|s| s.iter().copied())
            .filter(|v| v.is_finite())
    };
    let top = values().fold(0.0f64, f64::max).max(1e-3) * 1.1;
    (values().fold(0.0f64, f64::min) * 1.1, top)
}

fn draw(path: &Path, data: &PlotData<'_>) -> Result<(), Box<dyn std::error::Error>> {
    let root = BitMapBackend::new(path, (1000, 560)).into_drawing_area();
    root.fill(&WHITE)?;
    let train = data.fitted.len();
    let days = (train + data.forecast.len()).max(data.observed.len()).max(2);
    let (bottom, top) = y_range(data);
    let start = data.start;
    let mut chart = ChartBuilder::on(&root)
        .caption(data.title, ("sans-serif", 22))
        .margin(16)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..(days - 1).max(1) as f64, bottom..top)?;
    chart
        .configure_mesh()
        .x_desc("date")
        .y_desc(data.y_label)
        .x_label_formatter(&|x| start.add_days(x.round() as i64 * data.step_days).to_string())
        .x_labels(8)
        .draw()?;
    let points = |s: &[f64], from: usize| -> Vec<(f64, f64)> {
        s.iter().enumerate().map(|(i, &v)| ((i + from) as f64, v)).collect()
    };
    let curves: [(&str, &[f64], usize, RGBColor); 4] = [
        ("observed", data.observed, 0, BLACK),
        ("fitted", data.fitted, 0, BLUE),
        ("forecast", data.forecast, train, RED),
        ("persistence", data.persistence, train, RGBColor(150, 150, 150)),
    ];
    for (k, (from, series)) in data.earlier.iter().enumerate() {
        let color = RGBColor(240, 150, 60);
        let drawn = chart.draw_series(LineSeries::new(points(series, *from), color.stroke_width(1)))?;
        if k == 0 {
            drawn
                .label("earlier weeks' forecasts")
                .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], color.stroke_width(1)));
        }
    }
    for (label, series, from, color) in curves {
        chart
            .draw_series(LineSeries::new(points(series, from), color.stroke_width(2)))?
            .label(label)
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], color.stroke_width(2)));
    }
    if train > 0 {
        let x = (train as f64) - 0.5;
        chart.draw_series(LineSeries::new([(x, bottom), (x, top)], RGBColor(200, 200, 200)))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .border_style(BLACK)
        .background_style(WHITE.mix(0.8))
        .draw()?;
    root.present()?;
    Ok(())
}
