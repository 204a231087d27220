//! Bad input to the epidemic library: each is a clear error naming the value (and where kiln
//! reports it, the caller's file:line), never a wrong result, an index panic inside the library
//! or an abort.

mod common;

use kiln::prelude::*;
use kiln_sims::epi::calibrate::flu::{FluFitConfig, fit_flu};
use kiln_sims::epi::calibrate::plot::{PlotData, y_range};
use kiln_sims::epi::calibrate::{
    COVID_BOUNDS, CovidBounds, DailySeries, Date, FitConfig, RawParams, Targets, WeeklySeries, fit,
    prediction_ends, with_days,
};
use kiln_sims::epi::data::{CovidDaily, FluWeekly, load_county_covid_daily, load_edges, load_flu_weekly};
use kiln_sims::epi::population::scaled_counts;
use kiln_sims::epi::{CovidModel, CovidParams, FluModel, Network, Population, PopulationError, UpdateForm};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;

fn scratch(name: &str, contents: &str) -> common::cli::ScratchFile {
    common::cli::scratch_file("epi-bad-input", name, contents)
}

/// The message of the panic `f` raises (it must raise one).
fn panic_message<T>(f: impl FnOnce() -> T) -> String {
    let payload = catch_unwind(AssertUnwindSafe(f)).err().expect("expected a panic");
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

/// `file:line` of the line after the caller's (where the call under test is written).
#[track_caller]
fn next_line() -> String {
    let at = std::panic::Location::caller();
    format!("{}:{}", at.file(), at.line() + 1)
}

#[test]
fn ages_and_network_of_different_agents_are_refused() {
    // 1000 ages, a 2000-agent network whose edges i -> i + 1000 reach past the ages: the gathers
    // clamped those indices and gave infections.
    let edges: Vec<(u32, u32)> = (0..1000).map(|i| (i, i + 1000)).collect();
    let pop = Population { ages: vec![2; 1000], network: Network::from_undirected(2000, &edges) };
    let e = pop.check().unwrap_err();
    assert!(matches!(e, PopulationError::AgentsMismatch { ages: 1000, network: 2000 }), "{e:?}");
    let want = "the population has 1000 ages but its network has 2000 agents";
    let at = next_line();
    let m = panic_message(|| CovidModel::new(&pop, 7, UpdateForm::KeepGrad));
    assert!(m.contains("epi::CovidModel::new") && m.contains(want) && m.contains(&at), "{m}");
    let at = next_line();
    let m = panic_message(|| FluModel::new(&pop, 7, UpdateForm::KeepGrad));
    assert!(m.contains("epi::FluModel::new") && m.contains(want) && m.contains(&at), "{m}");
}

#[test]
fn an_age_group_above_7_names_the_agent() {
    let pop = Population { ages: vec![0, 9], network: Network::from_undirected(2, &[(0, 1)]) };
    assert!(matches!(pop.check(), Err(PopulationError::BadAge { agent: 1, age: 9 })));
    let at = next_line();
    let m = panic_message(|| CovidModel::new(&pop, 7, UpdateForm::KeepGrad));
    assert!(m.contains("agent 1 has age group 9, not an age group 0..=7") && m.contains(&at), "{m}");
}

#[test]
fn age_counts_past_u64_are_too_many_agents() {
    let e = Population::from_age_counts("x", [u64::MAX, 2, 0, 0, 0, 0, 0, 0], 1).unwrap_err();
    assert!(matches!(e, PopulationError::TooManyAgents { agents: 18_446_744_073_709_551_617, .. }), "{e:?}");
    let file = scratch(
        "ages.csv",
        "fips,num_agents,AGE_0_19,AGE_20_29,AGE_30_39,AGE_40_49,AGE_50_59,AGE_60_69,AGE_70_79,AGE_80\n\
         25011,5,18446744073709551615,2,0,0,0,0,0,0\n",
    );
    let e = Population::county_from(&file, 25011, 1).unwrap_err().to_string();
    assert_eq!(
        e,
        "cannot generate a population of county 25011: 18446744073709551617 agents is more than the \
         200000000 supported"
    );
    // Scaling such counts to 10 agents: half each (the sum is taken without wrapping).
    assert_eq!(scaled_counts(&[u64::MAX, u64::MAX, 0, 0, 0, 0, 0, 0], 10), [5, 5, 0, 0, 0, 0, 0, 0]);
}

#[test]
fn non_finite_or_negative_ili_and_non_finite_deaths_are_refused_at_their_line() {
    for (name, value, why) in [
        ("nan.csv", "NaN", "finite non-negative"),
        ("inf.csv", "inf", "finite non-negative"),
        ("neg.csv", "-0.5", "finite non-negative"),
    ] {
        let f = scratch(name, &format!("region,epiweek,ili\nMA,201740,1.5\nMA,201741,{value}\n"));
        let e = load_flu_weekly(&f, "MA").unwrap_err().to_string();
        assert_eq!(e, format!("{}:3: ili \"{value}\" is not a {why} percentage", f.display()));
    }
    let f = scratch(
        "covid.csv",
        "geo_value,time_value,cases,deaths\n25011,2020-03-01,1,0\n25011,2020-03-02,1,NaN\n",
    );
    let e = load_county_covid_daily(&f, 25011).unwrap_err().to_string();
    assert_eq!(e, format!("{}:3: deaths \"NaN\" is not a finite number", f.display()));
    let f = scratch("covid-inf.csv", "geo_value,time_value,cases,deaths\n25011,2020-03-01,inf,0\n");
    let e = load_county_covid_daily(&f, 25011).unwrap_err().to_string();
    assert_eq!(e, format!("{}:2: cases \"inf\" is not a finite number", f.display()));

    // Built by hand, past the loaders.
    let weekly = FluWeekly { region: "MA".into(), epiweeks: vec![201740, 201741], ili: vec![1.0, f64::NAN] };
    let e = WeeklySeries::from_flu(&weekly, Path::new("f.csv")).unwrap_err().to_string();
    assert_eq!(e, "f.csv: region MA: ILI of epiweek 201741 is NaN, not a finite non-negative percentage");
    let daily = CovidDaily {
        fips: 25011,
        dates: vec!["2020-03-01".into(), "2020-03-02".into()],
        cases: vec![None, None],
        deaths: vec![Some(1.0), Some(f64::INFINITY)],
    };
    let e = DailySeries::from_county(&daily, Path::new("c.csv")).unwrap_err().to_string();
    assert_eq!(e, "c.csv: county 25011: deaths on 2020-03-02 are inf, not a finite number");
}

#[test]
fn huge_prediction_weeks_and_epochs_are_errors_not_aborts() {
    let d = |s| Date::parse(s).unwrap();
    let e = prediction_ends(d("2020-01-01"), d("2020-04-01"), 1 << 61).unwrap_err();
    assert_eq!(
        e,
        "2305843009213693952 prediction weeks: the earliest training window would end long before its \
         start 2020-01-01; choose an earlier start, a later end or at most 14 prediction weeks"
    );
    let e = prediction_ends(d("2020-03-15"), d("2020-03-28"), 3).unwrap_err();
    assert!(
        e.contains("would end on 2020-03-14, before its start 2020-03-15") && e.contains("at most 2"),
        "{e}"
    );
    assert_eq!(
        prediction_ends(d("2020-03-15"), d("2020-03-28"), 2).unwrap(),
        vec![d("2020-03-21"), d("2020-03-28")]
    );

    // 2^40 epochs used to reserve 4 TiB of losses up front and abort; the fit now starts, and this
    // target (inf as f32) stops it at its first loss.
    let model = CovidModel::new(&Population::synthetic(50, 1), 7, UpdateForm::KeepGrad);
    let config = FitConfig { epochs: 1 << 40, ..FitConfig::default() };
    let e = fit(&model, &Targets::deaths(&[1e300; 7]), &config, |_, _| {}).unwrap_err().to_string();
    assert_eq!(e, "calibrate: the loss became inf at epoch 0");
}

#[test]
fn csv_errors_cite_the_real_line_after_crlf_and_blank_lines() {
    let crlf = scratch("crlf.csv", "date,deaths\r\n2020-03-01,1\r\n2020-03-02,1\r\n2020-03-03,x\r\n");
    let e = DailySeries::load_csv(&crlf).unwrap_err().to_string();
    assert_eq!(e, format!("{}:4: deaths \"x\" is not a finite number", crlf.display()));
    let blank = scratch("blank.csv", "date,deaths\n2020-03-01,1\n\n\n2020-03-02,x\n");
    let e = DailySeries::load_csv(&blank).unwrap_err().to_string();
    assert_eq!(e, format!("{}:5: deaths \"x\" is not a finite number", blank.display()));
    let both = scratch("both.csv", "date,deaths\r\n\r\n2020-03-01,1\r\n\r\n\r\n2020-03-09,1\r\n");
    let e = DailySeries::load_csv(&both).unwrap_err().to_string();
    assert!(e.starts_with(&format!("{}:6: date 2020-03-09 is not the day after", both.display())), "{e}");

    // The shared loaders: a value error, and the csv crate's own field-count error.
    let flu = scratch("flu.csv", "region,epiweek,ili\r\nMA,201740,1\r\n\r\nMA,201741,-1\r\n");
    let e = load_flu_weekly(&flu, "MA").unwrap_err().to_string();
    assert_eq!(e, format!("{}:4: ili \"-1\" is not a finite non-negative percentage", flu.display()));
    let edges = scratch("edges.csv", "0,1\r\n\r\n1,2\r\n\r\n\r\n0,1,2\r\n");
    let e = load_edges(&edges, 3).unwrap_err().to_string();
    assert_eq!(
        e,
        format!("{}:6: found a record with 3 fields, but the previous record has 2 fields", edges.display())
    );
    let edges = scratch("edges-range.csv", "0,1\n\n\n1,7\n");
    let e = load_edges(&edges, 3).unwrap_err().to_string();
    assert_eq!(e, format!("{}:4: agent index 7 is out of range for 3 agents", edges.display()));
}

#[test]
fn an_lr_that_is_not_finite_as_f32_is_refused() {
    let model = CovidModel::new(&Population::synthetic(50, 1), 7, UpdateForm::KeepGrad);
    let config = FitConfig { epochs: 1, lr: 1e39, ..FitConfig::default() };
    let e = fit(&model, &Targets::deaths(&[0.0; 7]), &config, |_, _| {}).unwrap_err().to_string();
    assert!(e.contains("lr (1000000000000000000000000000000000000000)") && e.contains("lr as f32"), "{e}");
    let flu = FluModel::new(&Population::synthetic(50, 1), 7, UpdateForm::KeepGrad);
    let config = FluFitConfig { epochs: 1, lr: 1e-50, ..FluFitConfig::default() };
    let e = fit_flu(&flu, &[1.0], &config, None, |_, _| {}).unwrap_err().to_string();
    assert!(
        e.contains("lr (0.00000000000000000000000000000000000000000000000001)") && e.contains("lr as f32"),
        "{e}"
    );
}

#[test]
fn zero_days_zero_agents_and_empty_raw_params_are_reported_at_the_call() {
    let pop = Population::synthetic(50, 1);
    let at = next_line();
    let m = panic_message(|| CovidModel::new(&pop, 0, UpdateForm::KeepGrad));
    assert!(m.contains("days must be at least 1") && m.contains(&at), "{m}");

    // A 0-day model made another way fails at the simulate call, not inside the library.
    let model = with_days(&CovidModel::new(&pop, 7, UpdateForm::KeepGrad), 0);
    let params = CovidParams::constant(0, 2.5, 0.02, 5.0);
    let at = next_line();
    let run = jit(|(m, p, k): (CovidModel, CovidParams, Tensor)| m.simulate(&p, &k));
    let e = run.call(&(model, params, kiln::random::key(0u32))).unwrap_err().to_string();
    assert!(e.contains("the model has 0 days: days must be at least 1") && e.contains(&at), "{e}");

    let at = next_line();
    let m = panic_message(|| RawParams::middle(0, 0).bounded(&COVID_BOUNDS, 3));
    assert!(
        m.contains("r0 and mortality need at least one value each to fill 3 weeks") && m.contains(&at),
        "{m}"
    );

    // No agents: ILI (100 × infections / N) would be NaN.
    let at = next_line();
    let m = panic_message(|| FluModel::new(&Population::synthetic(0, 1), 7, UpdateForm::KeepGrad));
    assert!(m.contains("the population has no agents") && m.contains(&at), "{m}");
}

#[test]
fn reversed_or_nan_bounds_are_refused_naming_the_parameter() {
    let model = CovidModel::new(&Population::synthetic(50, 1), 7, UpdateForm::KeepGrad);
    let targets = Targets::deaths(&[0.0; 7]);
    let with = |bounds| FitConfig { epochs: 1, bounds, ..FitConfig::default() };
    let e = fit(&model, &targets, &with(CovidBounds { r0: (8.0, 1.0), ..COVID_BOUNDS }), |_, _| {});
    assert_eq!(
        e.unwrap_err().to_string(),
        "calibrate: bounds.r0 (8, 1): must be finite bounds (min, max) with min <= max, within [0, inf]"
    );
    let e =
        fit(&model, &targets, &with(CovidBounds { mortality: (f32::NAN, 0.02), ..COVID_BOUNDS }), |_, _| {});
    assert!(e.unwrap_err().to_string().contains("bounds.mortality (NaN, 0.02)"));
    let e =
        fit(&model, &targets, &with(CovidBounds { initial_pct: (-5.0, -1.0), ..COVID_BOUNDS }), |_, _| {});
    assert!(e.unwrap_err().to_string().contains("bounds.initial_pct (-5, -1)"));
    // (0, 0): no initial infections, so nothing to fit (review: flu already refused 0).
    let e = fit(&model, &targets, &with(CovidBounds { initial_pct: (0.0, 0.0), ..COVID_BOUNDS }), |_, _| {});
    assert!(e.unwrap_err().to_string().contains("bounds.initial_pct (0.0, 0.0): its max must be above 0"));

    let flu = FluModel::new(&Population::synthetic(50, 1), 7, UpdateForm::KeepGrad);
    let config = FluFitConfig { epochs: 1, r0_bounds: (3.0, -1.0), ..FluFitConfig::default() };
    let e = fit_flu(&flu, &[1.0], &config, None, |_, _| {}).unwrap_err().to_string();
    assert!(e.contains("r0_bounds (3, -1): must be finite bounds"), "{e}");
}

#[test]
fn the_plot_shows_negative_values() {
    let data = |observed: &'static [f64]| PlotData {
        title: "t",
        y_label: "y",
        start: Date::parse("2020-03-01").unwrap(),
        step_days: 1,
        observed,
        fitted: &[1.0, 2.0],
        forecast: &[],
        persistence: &[],
        earlier: &[],
    };
    let (bottom, top) = y_range(&data(&[-2.0, 4.0, f64::NAN]));
    assert!((bottom - -2.2).abs() < 1e-12 && (top - 4.4).abs() < 1e-12, "{bottom} {top}");
    assert_eq!(y_range(&data(&[0.5, 1.0])).0, 0.0);
}

#[test]
fn empty_series_ends_and_zero_width_means_are_clear_panics() {
    // Regression (bad-input hunt): `end()` of an empty series wrapped to the day before its start
    // (an overflow panic inside the library in debug builds); `trailing_mean(x, 0)` gave NaN.
    let start = Date::parse("2020-03-01").unwrap();
    let daily = DailySeries { start, values: vec![] };
    let m = panic_message(|| daily.end());
    assert!(m.contains("DailySeries::end: the series is empty"), "{m}");
    let weekly = WeeklySeries { start, values: vec![] };
    assert!(panic_message(|| weekly.end()).contains("WeeklySeries::end: the series is empty"));
    let m = panic_message(|| kiln_sims::epi::calibrate::trailing_mean(&[1.0, 2.0], 0));
    assert!(m.contains("trailing_mean: width 0"), "{m}");
    assert_eq!(DailySeries { start, values: vec![1.0, 2.0] }.end().to_string(), "2020-03-02");
}
