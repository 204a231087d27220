//! Flu calibration pieces and several prediction weeks, on hand-computed values: epiweeks, weekly
//! series, the prediction windows, the mean of their scores, and the flu fit's contract.

use kiln_sims::epi::calibrate::flu::{FLU_R0_BOUNDS, FluFitConfig, FluRaw, fit_flu, simulate_flu_weekly};
use kiln_sims::epi::calibrate::{
    CalibrateError, Date, ForecastScores, Score, WeeklySeries, mean_scores, prediction_ends,
};
use kiln_sims::epi::data::FluWeekly;
use kiln_sims::epi::{FluModel, FluParams, Population, UpdateForm};
use std::path::Path;

fn d(s: &str) -> Date {
    Date::parse(s).unwrap()
}

#[test]
fn epiweeks_match_the_cdc_calendar() {
    // CDC MMWR weeks (Sunday–Saturday): 2017 week 1 began Sun 2017-01-01; 2018 week 1 began
    // Sun 2017-12-31; 2014 had 53 weeks, 2015 week 1 began Sun 2015-01-04; 2021 week 1 began
    // Sun 2021-01-03 (2020 had 53 weeks).
    let cases = [
        (201701, "2017-01-01"),
        (201740, "2017-10-01"),
        (201752, "2017-12-24"),
        (201801, "2017-12-31"),
        (201453, "2014-12-28"),
        (201501, "2015-01-04"),
        (202053, "2020-12-27"),
        (202101, "2021-01-03"),
    ];
    for (week, sunday) in cases {
        assert_eq!(Date::from_epiweek(week).unwrap(), d(sunday), "{week}");
        // Every day of the week maps back to it.
        for k in 0..7 {
            assert_eq!(d(sunday).add_days(k).epiweek(), week, "{sunday} + {k}");
        }
    }
    for bad in [201700, 201753, 201554, 202054, 5, 1000001] {
        let e = Date::from_epiweek(bad).unwrap_err();
        assert!(e.contains(&bad.to_string()), "{e}");
    }
}

#[test]
fn weekly_series_from_epiweeks() {
    let weekly =
        FluWeekly { region: "XX".into(), epiweeks: vec![201752, 201801, 201802], ili: vec![1.0, 2.0, 3.0] };
    let s = WeeklySeries::from_flu(&weekly, Path::new("f.csv")).unwrap();
    assert_eq!((s.start, s.end()), (d("2017-12-24"), d("2018-01-07")));
    let w = s.window(d("2017-12-31"), d("2018-01-07")).unwrap();
    assert_eq!((w.start, w.values), (d("2017-12-31"), vec![2.0, 3.0]));
    assert!(s.window(d("2017-12-31"), d("2018-01-14")).is_none(), "past the end");
    assert!(s.window(d("2018-01-01"), d("2018-01-07")).is_none(), "not a week start");

    let gap = FluWeekly { region: "XX".into(), epiweeks: vec![201751, 201801], ili: vec![1.0, 2.0] };
    let e = WeeklySeries::from_flu(&gap, Path::new("f.csv")).unwrap_err().to_string();
    assert!(e.contains("f.csv") && e.contains("epiweek 201801 is not the week after 201751"), "{e}");
}

#[test]
fn prediction_windows_end_seven_days_apart() {
    let ends = prediction_ends(d("2020-03-15"), d("2020-04-25"), 4).unwrap();
    assert_eq!(ends, [d("2020-04-04"), d("2020-04-11"), d("2020-04-18"), d("2020-04-25")]);
    assert_eq!(prediction_ends(d("2020-03-15"), d("2020-04-25"), 1).unwrap(), [d("2020-04-25")]);
    // The earliest window may be a single day, not empty.
    assert_eq!(prediction_ends(d("2020-03-15"), d("2020-03-22"), 2).unwrap()[0], d("2020-03-15"));
    let e = prediction_ends(d("2020-03-15"), d("2020-03-21"), 2).unwrap_err();
    assert!(e.contains("2020-03-14") && e.contains("2020-03-15"), "{e}");
    assert!(prediction_ends(d("2020-03-15"), d("2020-03-21"), 0).is_err());
}

#[test]
fn mean_scores_average_the_defined_weeks() {
    // Week 1: observed [2, 4] after a last training value 1; forecast [2, 6].
    //   model: |0| + |2| = 2 over 6 → ND 1/3; RMSE sqrt(4 / 2) = √2.
    //   persistence 1: |1| + |3| = 4 over 6 → ND 2/3; RMSE sqrt((1 + 9) / 2) = √5.
    // Week 2: observed [0, 0] (ND undefined), last value 3, forecast [1, 1].
    //   model RMSE 1; persistence RMSE 3.
    let w1 = ForecastScores::new(&[1.0], &[2.0, 4.0], &[2.0, 6.0]);
    let w2 = ForecastScores::new(&[3.0], &[0.0, 0.0], &[1.0, 1.0]);
    assert_eq!(w2.model.nd, None);
    let m = mean_scores(&[w1, w2]);
    assert_eq!(m.weeks, 2);
    let close = |a: Option<f64>, b: f64| (a.unwrap() - b).abs() < 1e-12;
    assert!(close(m.model.nd, 1.0 / 3.0), "only week 1 has an ND");
    assert!(close(m.persistence.nd, 2.0 / 3.0));
    assert!(close(m.model.rmse, (2f64.sqrt() + 1.0) / 2.0));
    assert!(close(m.persistence.rmse, (5f64.sqrt() + 3.0) / 2.0));
    let none = mean_scores(&[w2]);
    assert_eq!(none.model, Score { nd: None, rmse: Some(1.0) });
}

#[test]
fn flu_fit_checks_its_inputs_and_stays_in_bounds() {
    let pop = Population::synthetic(400, 3);
    let model = FluModel::new(&pop, 21, UpdateForm::KeepGrad);
    let config = FluFitConfig { epochs: 3, lr: 0.5, ..FluFitConfig::default() };
    let e = fit_flu(&model, &[1.0, 2.0], &config, None, |_, _| {}).unwrap_err();
    assert!(
        matches!(e, CalibrateError::Config(ref m) if m.contains("14 days") && m.contains("simulates 21")),
        "{e}"
    );
    let bad = FluFitConfig { initial_pct: 0.0, ..config.clone() };
    assert!(fit_flu(&model, &[1.0; 3], &bad, None, |_, _| {}).is_err());

    // Observed ILI far above anything the model reaches pulls every week's R0 up from the middle
    // (1.825); a warm start of 2 weeks is extended to 3 by repeating the last value.
    let warm = FluRaw { r0: kiln::prelude::Tensor::from_vec(&[2], vec![0.0f32, 1.0]) };
    assert_eq!(warm.resized(3).r0.to_vec::<f32>(), [0.0, 1.0, 1.0]);
    let mut calls = 0;
    let fitted = fit_flu(&model, &[60.0; 3], &config, None, |_, _| calls += 1).unwrap();
    assert_eq!((calls, fitted.losses.len()), (3, 3));
    let r0 = fitted.params.r0.to_vec::<f32>();
    let (lo, hi) = FLU_R0_BOUNDS;
    assert!(r0.iter().all(|&r| r > (lo + hi) / 2.0 && r <= hi), "{r0:?}");
    assert_eq!(fitted.params.initial_pct.item::<f32>(), 1.0);

    // The forecast run repeats the last week's R0: with R0 = 1.05 everywhere, a 4-week run is the
    // same whether given 1 or 4 weeks of R0.
    let long = FluModel::new(&pop, 28, UpdateForm::KeepGrad);
    let one = simulate_flu_weekly(&long, &FluParams::constant(7, 1.05, 1.0), 1, 5).unwrap();
    let four = simulate_flu_weekly(&long, &FluParams::constant(28, 1.05, 1.0), 1, 5).unwrap();
    assert_eq!(one.len(), 4);
    assert_eq!(one, four);
}
