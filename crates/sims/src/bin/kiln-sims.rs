//! `kiln-sims`: kiln's simulations on the command line.
//!
//! `kiln-sims calibrate` fits the GradABM COVID model's per-week R0 and mortality and its initial
//! infections to a county's 7-day-smoothed daily deaths by gradient descent through the jit-compiled
//! simulator, forecasts the following days, scores the forecast against the observed days and a
//! persistence baseline, and writes `params.json`, `series.csv` and `plot.png` into `--out`
//! (all or nothing: they are written to a temporary folder beside it and moved in at the end).

use clap::{Parser, Subcommand, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use kiln_sims::epi::calibrate::{
    self, DailySeries, Date, FitConfig, ForecastScores, Objective, Targets, persistence,
    plot::{PlotData, write_png},
};
use kiln_sims::epi::data::{self, DataError};
use kiln_sims::epi::{CovidModel, Population, UpdateForm};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

/// The bundled real population and network (Franklin County, MA).
const FRANKLIN: u32 = 25011;
/// Agents of the generated population (the county's age mix and fitted contact counts,
/// `Population::county_scaled`) used for a county without a bundled network.
const DEFAULT_SYNTHETIC_AGENTS: usize = 100_000;

#[derive(Parser)]
#[command(name = "kiln-sims", version, about = "kiln's simulations: GradABM-style epidemics")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Calibrate the epidemic model to daily deaths and forecast (defaults: bundled Franklin County,
    /// MA data, 2020-03-15..2020-04-25, 28-day forecast).
    Calibrate(CalibrateArgs),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
enum Disease {
    /// COVID-19 (SEIRM), fitted to daily deaths.
    Covid,
    /// Influenza (SIRS), fitted to weekly ILI (not available yet).
    Flu,
}

#[derive(clap::Args)]
struct CalibrateArgs {
    /// County FIPS code: its deaths in the bundled MA file (unless --data) and its population size.
    #[arg(long, default_value_t = FRANKLIN)]
    county: u32,
    /// Your own daily series: a CSV with `date,deaths` columns (YYYY-MM-DD, one row per day).
    #[arg(long, value_name = "FILE")]
    data: Option<PathBuf>,
    /// Disease model.
    #[arg(long, value_enum, default_value_t = Disease::Covid)]
    disease: Disease,
    /// Simulate a generated population of N agents with the county's age mix and contact counts
    /// [default: the real 25011 population, or 100000 for other counties].
    #[arg(long, value_name = "N", allow_hyphen_values = true)]
    agents: Option<i64>,
    /// Optimizer steps.
    #[arg(long, default_value_t = 100, allow_hyphen_values = true)]
    epochs: i64,
    /// Seed of the simulation noise (and of a synthetic population).
    #[arg(long, default_value_t = 0)]
    seed: u32,
    /// Output folder (created; a previous kiln-sims output there is replaced).
    #[arg(long, value_name = "DIR", default_value = "calibration")]
    out: PathBuf,
    /// First training day [default: 2020-03-15 for the bundled data, else the series' first day].
    #[arg(long, value_name = "YYYY-MM-DD")]
    start: Option<String>,
    /// Last training day [default: 2020-04-25 for the bundled data, else the horizon before the
    /// series' end].
    #[arg(long, value_name = "YYYY-MM-DD")]
    end: Option<String>,
    /// Days to forecast after the training window.
    #[arg(long, default_value_t = 28)]
    horizon: usize,
    /// Noise seeds simulated per step and in the forecast (their mean curve is used).
    #[arg(long, default_value_t = 1)]
    ensemble: usize,
    /// Adam learning rate.
    #[arg(long, default_value_t = 0.05)]
    lr: f64,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Calibrate(args) => run_calibrate(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("kiln-sims: error: {message}");
            ExitCode::FAILURE
        }
    }
}

fn data_err(e: DataError) -> String {
    e.to_string()
}

/// Everything checked and loaded before any simulation runs.
struct Inputs {
    source: String,
    observed: DailySeries,
    train_start: Date,
    train_end: Date,
    population_size: u64,
    population: Population,
    synthetic: bool,
    epochs: usize,
}

fn check_inputs(args: &CalibrateArgs) -> Result<Inputs, String> {
    if args.disease == Disease::Flu {
        return Err("--disease flu: the flu (SIRS) model is not available yet in this build; \
                    use --disease covid"
            .into());
    }
    if let Some(n) = args.agents
        && n <= 0
    {
        return Err(format!("--agents {n}: the number of agents must be positive"));
    }
    let epochs = usize::try_from(args.epochs)
        .ok()
        .filter(|&e| e > 0)
        .ok_or_else(|| format!("--epochs {}: must be a positive number of steps", args.epochs))?;
    if args.ensemble == 0 || args.horizon == 0 {
        return Err("--ensemble and --horizon must be positive".into());
    }
    if !(args.lr > 0.0 && args.lr.is_finite()) {
        return Err(format!("--lr {}: must be positive", args.lr));
    }
    check_out(&args.out)?;

    let ages_file = data::bundled("gradabm_ma_county_age_groups.csv");
    let county = data::load_county_age_groups(&ages_file, args.county).map_err(data_err)?;
    let (source, raw) = match &args.data {
        Some(path) => (path.display().to_string(), DailySeries::load_csv(path).map_err(data_err)?),
        None => {
            let file = data::bundled("gradabm_ma_county_covid_daily.csv");
            let daily = data::load_county_covid_daily(&file, args.county).map_err(data_err)?;
            (file.display().to_string(), DailySeries::from_county(&daily, &file).map_err(data_err)?)
        }
    };
    let observed = raw.smoothed();
    let parse = |flag: &str, text: &str| Date::parse(text).map_err(|m| format!("{flag}: {m}"));
    let bundled = args.data.is_none();
    let train_start = match &args.start {
        Some(s) => parse("--start", s)?,
        None if bundled => parse("--start", "2020-03-15")?,
        None => observed.start,
    };
    let train_end = match &args.end {
        Some(s) => parse("--end", s)?,
        None if bundled => parse("--end", "2020-04-25")?,
        None => {
            let fits = observed.values.len() > args.horizon;
            if fits { observed.end().add_days(-(args.horizon as i64)) } else { observed.end() }
        }
    };
    if train_end < train_start {
        return Err(format!("empty date window: --start {train_start} is after --end {train_end}"));
    }
    if observed.window(train_start, train_end).is_none() {
        return Err(format!(
            "the date window {train_start}..{train_end} is not inside the series of {source} \
             ({}..{})",
            observed.start,
            observed.end()
        ));
    }
    let (population, synthetic) = match args.agents {
        None if args.county == FRANKLIN => (Population::franklin_county().map_err(data_err)?, false),
        None => {
            let n = usize::try_from(county.num_agents).unwrap_or(usize::MAX).min(DEFAULT_SYNTHETIC_AGENTS);
            let p = Population::county_scaled(args.county, n as u64, u64::from(args.seed));
            (p.map_err(|e| e.to_string())?, true)
        }
        Some(n) => {
            let p = Population::county_scaled(args.county, n as u64, u64::from(args.seed));
            (p.map_err(|e| e.to_string())?, true)
        }
    };
    Ok(Inputs {
        source,
        observed,
        train_start,
        train_end,
        population_size: county.num_agents,
        population,
        synthetic,
        epochs,
    })
}

/// The files a previous run leaves in `--out` (which may be replaced).
const OUTPUTS: [&str; 3] = ["params.json", "series.csv", "plot.png"];

/// `--out` must be absent, empty, or hold only a previous run's files (never replace anything else).
fn check_out(out: &Path) -> Result<(), String> {
    match std::fs::read_dir(out) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(format!("--out {}: {e}", out.display())),
        Ok(entries) => {
            for entry in entries {
                let name = entry.map_err(|e| format!("--out {}: {e}", out.display()))?.file_name();
                if !OUTPUTS.iter().any(|o| name == *o) {
                    return Err(format!(
                        "--out {}: the folder holds {:?}, which is not a kiln-sims output; \
                         choose a new or empty folder",
                        out.display(),
                        name
                    ));
                }
            }
            Ok(())
        }
    }
}

/// A temporary folder beside `--out`, removed on drop unless moved into place by [`Staging::commit`].
struct Staging {
    dir: PathBuf,
    done: bool,
}

impl Staging {
    fn new(out: &Path) -> Result<Staging, String> {
        let parent = match out.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        std::fs::create_dir_all(&parent).map_err(|e| format!("--out {}: {e}", out.display()))?;
        let name = out.file_name().map_or("out".into(), |n| n.to_string_lossy().into_owned());
        let dir = parent.join(format!(".{name}.kiln-sims-tmp-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        Ok(Staging { dir, done: false })
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// Moves the folder to `out`, replacing a previous output there (checked by [`check_out`]).
    fn commit(mut self, out: &Path) -> Result<(), String> {
        check_out(out)?;
        if out.exists() {
            let old = self.dir.with_extension("old");
            std::fs::rename(out, &old).map_err(|e| format!("{}: {e}", out.display()))?;
            std::fs::rename(&self.dir, out).map_err(|e| format!("{}: {e}", out.display()))?;
            let _ = std::fs::remove_dir_all(&old);
        } else {
            std::fs::rename(&self.dir, out).map_err(|e| format!("{}: {e}", out.display()))?;
        }
        self.done = true;
        Ok(())
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        if !self.done {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

#[derive(Serialize)]
struct WeekParams {
    start: String,
    r0: f32,
    mortality: f32,
}

#[derive(Serialize)]
struct ParamsFile<'a> {
    disease: Disease,
    county: u32,
    data: &'a str,
    target: &'static str,
    population: u64,
    agents: usize,
    synthetic_population: bool,
    scale: f32,
    train_start: String,
    train_end: String,
    horizon_days: usize,
    epochs: usize,
    lr: f64,
    clip_norm: f64,
    ensemble: usize,
    seed: u32,
    weeks: Vec<WeekParams>,
    initial_pct: f32,
    final_loss: f32,
    losses: &'a [f32],
    scores: ForecastScores,
    wall_seconds: f64,
}

fn run_calibrate(args: &CalibrateArgs) -> Result<(), String> {
    let t0 = Instant::now();
    let inputs = check_inputs(args)?;
    let train = inputs.observed.window(inputs.train_start, inputs.train_end).expect("checked");
    let days = train.values.len();
    let after_end = inputs.train_end.add_days(args.horizon as i64).min(inputs.observed.end());
    let truth_after =
        inputs.observed.window(inputs.train_end.add_days(1), after_end).map_or_else(Vec::new, |s| s.values);
    let agents = inputs.population.num_agents();
    let scale = (inputs.population_size as f64 / agents as f64) as f32;
    println!(
        "kiln-sims calibrate: county {}, {} agents{}, deaths from {}, training {}..{} ({days} days), \
         forecast {} days, {} epochs",
        args.county,
        agents,
        if inputs.synthetic {
            format!(" (synthetic, ×{scale:.3} to {})", inputs.population_size)
        } else {
            String::new()
        },
        inputs.source,
        inputs.train_start,
        inputs.train_end,
        args.horizon,
        inputs.epochs
    );

    let model = CovidModel::new(&inputs.population, days, UpdateForm::KeepGrad);
    let config = FitConfig {
        epochs: inputs.epochs,
        lr: args.lr,
        ensemble: args.ensemble,
        seed: args.seed,
        objective: Objective::DeathsMse,
        scale,
        ..FitConfig::default()
    };
    let bar = ProgressBar::new(inputs.epochs as u64);
    bar.set_style(
        ProgressStyle::with_template(
            "{spinner} epoch {pos}/{len} [{bar:30}] loss {msg} ({elapsed}, eta {eta})",
        )
        .map_err(|e| e.to_string())?
        .progress_chars("=> "),
    );
    let fitted = calibrate::fit(&model, &Targets::deaths(&train.values), &config, |_, loss| {
        bar.set_message(format!("{loss:.5}"));
        bar.inc(1);
    })
    .map_err(|e| e.to_string())?;
    bar.finish();

    let long = calibrate::with_days(&model, days + args.horizon);
    let (_, deaths) = calibrate::simulate_mean(&long, &fitted.params, args.ensemble, args.seed)
        .map_err(|e| e.to_string())?;
    let deaths: Vec<f64> = deaths.iter().map(|d| d * f64::from(scale)).collect();
    let (fit_curve, forecast) = deaths.split_at(days);
    let scores = ForecastScores::new(&train.values, &truth_after, forecast);
    let baseline = persistence(&train.values, args.horizon);

    let staging = Staging::new(&args.out)?;
    let weeks: Vec<WeekParams> = fitted
        .params
        .r0
        .to_vec::<f32>()
        .into_iter()
        .zip(fitted.params.mortality.to_vec::<f32>())
        .enumerate()
        .map(|(w, (r0, mortality))| WeekParams {
            start: inputs.train_start.add_days(7 * w as i64).to_string(),
            r0,
            mortality,
        })
        .collect();
    let file = ParamsFile {
        disease: args.disease,
        county: args.county,
        data: &inputs.source,
        target: "daily deaths, 7-day trailing mean",
        population: inputs.population_size,
        agents,
        synthetic_population: inputs.synthetic,
        scale,
        train_start: inputs.train_start.to_string(),
        train_end: inputs.train_end.to_string(),
        horizon_days: args.horizon,
        epochs: inputs.epochs,
        lr: args.lr,
        clip_norm: config.clip_norm,
        ensemble: args.ensemble,
        seed: args.seed,
        weeks,
        initial_pct: fitted.params.initial_pct.item::<f32>(),
        final_loss: *fitted.losses.last().expect("epochs > 0"),
        losses: &fitted.losses,
        scores,
        wall_seconds: t0.elapsed().as_secs_f64(),
    };
    let json = serde_json::to_string_pretty(&file).map_err(|e| e.to_string())?;
    let params_path = staging.path("params.json");
    std::fs::write(&params_path, json + "\n").map_err(|e| format!("{}: {e}", params_path.display()))?;
    write_series(&staging.path("series.csv"), &inputs, &train, fit_curve, forecast, &baseline, &truth_after)?;
    let observed: Vec<f64> = train.values.iter().chain(&truth_after).copied().collect();
    let title = format!(
        "County {}: deaths per day, fitted {}..{}, {}-day forecast",
        args.county, inputs.train_start, inputs.train_end, args.horizon
    );
    write_png(
        &staging.path("plot.png"),
        &PlotData {
            title: &title,
            start: inputs.train_start,
            observed: &observed,
            fitted: fit_curve,
            forecast,
            persistence: &baseline,
        },
    )?;
    staging.commit(&args.out)?;

    let show = |s: calibrate::Score| {
        let f = |v: Option<f64>| v.map_or("n/a".into(), |v| format!("{v:.3}"));
        format!("ND {}, RMSE {}", f(s.nd), f(s.rmse))
    };
    println!(
        "fitted: R0 by week {:?}, mortality by week {:?}, initial {:.3} %; final loss {:.5}",
        fitted.params.r0.to_vec::<f32>(),
        fitted.params.mortality.to_vec::<f32>(),
        fitted.params.initial_pct.item::<f32>(),
        file.final_loss
    );
    println!(
        "forecast over {} observed days: model {}; persistence {}",
        scores.days_scored,
        show(scores.model),
        show(scores.persistence)
    );
    println!(
        "wrote {}/{{params.json, series.csv, plot.png}} in {:.1} s",
        args.out.display(),
        t0.elapsed().as_secs_f64()
    );
    Ok(())
}

/// `date,observed,fitted,forecast,persistence`: observed (smoothed) where known, fitted over the
/// training days, forecast and persistence after them; empty cells where a series has no value.
fn write_series(
    path: &Path,
    inputs: &Inputs,
    train: &DailySeries,
    fitted: &[f64],
    forecast: &[f64],
    baseline: &[f64],
    truth_after: &[f64],
) -> Result<(), String> {
    let err = |e: &dyn std::fmt::Display| format!("{}: {e}", path.display());
    let mut w = csv::Writer::from_path(path).map_err(|e| err(&e))?;
    w.write_record(["date", "observed", "fitted", "forecast", "persistence"]).map_err(|e| err(&e))?;
    let cell = |v: Option<&f64>| v.map_or(String::new(), |v| format!("{v:.6}"));
    let days = train.values.len();
    for i in 0..days + forecast.len() {
        let observed = if i < days { train.values.get(i) } else { truth_after.get(i - days) };
        let after = i.checked_sub(days);
        w.write_record([
            inputs.train_start.add_days(i as i64).to_string(),
            cell(observed),
            cell(fitted.get(i)),
            cell(after.and_then(|j| forecast.get(j))),
            cell(after.and_then(|j| baseline.get(j))),
        ])
        .map_err(|e| err(&e))?;
    }
    w.flush().map_err(|e| err(&e))
}
