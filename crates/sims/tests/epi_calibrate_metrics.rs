//! Forecast scores, smoothing, dates, series loading and the parameter squashing, on hand-computed
//! values.

mod common;

use kiln_sims::epi::calibrate::{
    COVID_BOUNDS, DailySeries, Date, ForecastScores, RawParams, nd, persistence, rmse, trailing_mean,
};

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-12 * b.abs().max(1.0)
}

#[test]
fn nd_and_rmse_of_hand_computed_series() {
    let y = [2.0, 4.0, 6.0];
    let p = [3.0, 4.0, 3.0];
    // |−1| + 0 + 3 = 4 over 2 + 4 + 6 = 12.
    assert!(close(nd(&y, &p).unwrap(), 1.0 / 3.0));
    // (1 + 0 + 9) / 3.
    assert!(close(rmse(&y, &p).unwrap(), (10.0f64 / 3.0).sqrt()));
    // Negative observations count by their absolute value: (1 + 1) / (1 + 3).
    assert!(close(nd(&[-1.0, 3.0], &[0.0, 2.0]).unwrap(), 0.5));
    assert_eq!(nd(&[0.0, 0.0], &[1.0, 1.0]), None, "ND is undefined when Σ|y| = 0");
    assert_eq!(nd(&[1.0], &[1.0, 2.0]), None);
    assert_eq!(rmse(&[], &[]), None);
    assert_eq!(rmse(&[1.0, 2.0], &[1.0, 2.0]), Some(0.0));
}

#[test]
fn persistence_baseline_and_forecast_scores() {
    let training = [1.0, 2.0, 5.0];
    assert_eq!(persistence(&training, 3), vec![5.0, 5.0, 5.0]);
    // Two observed days after training, a three-day forecast: scored on the two days only.
    let observed = [4.0, 8.0];
    let s = ForecastScores::new(&training, &observed, &[4.0, 6.0, 100.0]);
    assert_eq!(s.days_scored, 2);
    assert!(close(s.model.nd.unwrap(), 2.0 / 12.0)); // |0| + |2|
    assert!(close(s.model.rmse.unwrap(), 2.0f64.sqrt())); // sqrt((0 + 4) / 2)
    assert!(close(s.persistence.nd.unwrap(), 4.0 / 12.0)); // |4 − 5| + |8 − 5|
    assert!(close(s.persistence.rmse.unwrap(), 5.0f64.sqrt())); // sqrt((1 + 9) / 2)
    let none = ForecastScores::new(&training, &[], &[1.0]);
    assert_eq!((none.days_scored, none.model.nd, none.persistence.rmse), (0, None, None));
}

#[test]
fn seven_day_trailing_mean() {
    let x: Vec<f64> = (1..=9).map(f64::from).collect();
    let m = trailing_mean(&x, 7);
    // Partial windows at the start, then means of 7: (1..=7)/7 = 4, (2..=8)/7 = 5, (3..=9)/7 = 6.
    assert_eq!(m, vec![1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 5.0, 6.0]);
}

#[test]
fn dates_parse_print_and_count() {
    let d = Date::parse("2020-02-28").unwrap();
    assert_eq!(d.add_days(1).to_string(), "2020-02-29"); // leap year
    assert_eq!(d.add_days(2).to_string(), "2020-03-01");
    assert_eq!(Date::parse("2021-01-01").unwrap().days_since(Date::parse("2020-01-01").unwrap()), 366);
    assert_eq!(Date::parse("1970-01-01").unwrap().add_days(-1).to_string(), "1969-12-31");
    // Signs and year 0 too (the hunt: "+020-01-01" was year 20; year 0's epiweek wrapped to 4294967248).
    for bad in [
        "2021-02-29",
        "2020-13-01",
        "2020-4-01",
        "20200401",
        "",
        "2020-04-31",
        "+020-01-01",
        "0000-01-01",
        "2020-+1-01",
    ] {
        let e = Date::parse(bad).unwrap_err();
        assert!(e.contains(&format!("\"{bad}\"")), "{e}");
    }
}

/// A scratch file with `contents`, deleted when dropped.
fn temp_csv(name: &str, contents: &str) -> common::cli::ScratchFile {
    common::cli::scratch_file("epi-calibrate", name, contents)
}

#[test]
fn user_series_loads_and_windows() {
    let path = temp_csv("ok.csv", "date,deaths,note\n2020-04-29,1,a\n2020-04-30,2.5,b\n2020-05-01,0,\n");
    let s = DailySeries::load_csv(&path).unwrap();
    assert_eq!(s.start.to_string(), "2020-04-29");
    assert_eq!(s.values, vec![1.0, 2.5, 0.0]);
    assert_eq!(s.end().to_string(), "2020-05-01");
    let w = s.window(Date::parse("2020-04-30").unwrap(), Date::parse("2020-05-01").unwrap()).unwrap();
    assert_eq!((w.start.to_string(), w.values), ("2020-04-30".to_string(), vec![2.5, 0.0]));
    assert!(s.window(Date::parse("2020-05-01").unwrap(), Date::parse("2020-04-30").unwrap()).is_none());
    assert!(s.window(Date::parse("2020-04-28").unwrap(), Date::parse("2020-04-30").unwrap()).is_none());
}

#[test]
fn user_series_errors_name_file_line_and_value() {
    let cases = [
        ("gap.csv", "date,deaths\n2020-01-01,1\n2020-01-03,1\n", ":3: date 2020-01-03 is not the day after"),
        (
            "value.csv",
            "date,deaths\n2020-01-01,1\n2020-01-02,abc\n",
            ":3: deaths \"abc\" is not a finite number",
        ),
        ("nan.csv", "date,deaths\n2020-01-01,NaN\n", ":2: deaths \"NaN\""),
        ("date.csv", "date,deaths\n2020-1-1,1\n", ":2: \"2020-1-1\" is not a date"),
        ("column.csv", "day,deaths\n2020-01-01,1\n", "no column \"date\""),
        ("empty.csv", "date,deaths\n", "no data rows"),
    ];
    for (name, text, expected) in cases {
        let path = temp_csv(name, text);
        let e = DailySeries::load_csv(&path).unwrap_err().to_string();
        assert!(e.contains(name) && e.contains(expected), "{name}: {e}");
    }
    let missing = DailySeries::load_csv(std::path::Path::new("/nonexistent/deaths.csv")).unwrap_err();
    assert!(missing.to_string().contains("/nonexistent/deaths.csv: cannot read the file"), "{missing}");
}

#[test]
fn raw_zero_is_the_middle_of_the_bounds() {
    let p = RawParams::middle(1, 1).bounded(&COVID_BOUNDS, 3);
    assert_eq!(p.r0.to_vec::<f32>(), vec![4.5; 3]); // (1 + 8) / 2
    assert_eq!(p.mortality.to_vec::<f32>(), vec![0.0105; 3]); // (0.001 + 0.02) / 2
    assert_eq!(p.initial_pct.item::<f32>(), 0.505); // (0.01 + 1) / 2
    let weekly = RawParams {
        r0: kiln::prelude::Tensor::from_vec(&[2], vec![0.0f32, 2.0f32.ln()]),
        ..RawParams::middle(2, 3)
    };
    // sigmoid(ln 2) = 2/3: 1 + 7 · 2/3; the third week repeats the second's R0.
    let p = weekly.bounded(&COVID_BOUNDS, 3);
    let r0 = p.r0.to_vec::<f32>();
    assert_eq!(r0[0], 4.5);
    assert!((r0[1] - (1.0 + 7.0 * 2.0 / 3.0)).abs() < 1e-5, "{r0:?}");
    assert_eq!(r0[2], r0[1]);
    assert_eq!(p.mortality.to_vec::<f32>(), vec![0.0105; 3]);
}
