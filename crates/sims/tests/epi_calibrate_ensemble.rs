//! The ensemble (`vmap` over K noise keys, one shared model) equals the mean of K separate runs, a
//! forecast's longer model starts with the same days as the training model, and draw counts the
//! simulation cannot hold are refused up front.

use kiln::prelude::*;
use kiln_sims::epi::calibrate::flu::{FluFitConfig, fit_flu, simulate_flu_weekly};
use kiln_sims::epi::calibrate::{
    CalibrateError, FitConfig, Targets, ensemble_mean, extend_weeks, fit, simulate_mean, with_days,
};
use kiln_sims::epi::{CovidModel, CovidParams, FluModel, FluParams, Population, UpdateForm};

#[test]
fn vmap_ensemble_is_the_mean_of_separate_runs() {
    let days = 21;
    let pop = Population::synthetic(3_000, 5);
    let model = CovidModel::new(&pop, days, UpdateForm::KeepGrad);
    let params = CovidParams::constant(days, 4.0, 0.015, 2.0);
    let keys = kiln::random::split(&kiln::random::key(11u32), 3);
    let mean = jit(|(m, p, k): (CovidModel, CovidParams, Tensor)| ensemble_mean(&m, &p, &k))
        .call(&(model.clone(), params.clone(), keys.clone()))
        .unwrap();
    let single = jit(|(m, p, k): (CovidModel, CovidParams, Tensor)| m.simulate(&p, &k));
    let runs: Vec<_> =
        (0..3).map(|k| single.call(&(model.clone(), params.clone(), keys.index(k))).unwrap()).collect();
    for (name, got, pick) in
        [("infections", mean.infections.to_vec::<f32>(), 0), ("deaths", mean.deaths.to_vec::<f32>(), 1)]
    {
        let per_run: Vec<Vec<f32>> = runs
            .iter()
            .map(|d| if pick == 0 { d.infections.to_vec::<f32>() } else { d.deaths.to_vec::<f32>() })
            .collect();
        assert!(per_run[0] != per_run[1], "{name}: different keys give different runs");
        for t in 0..days {
            let expected = per_run.iter().map(|r| f64::from(r[t])).sum::<f64>() / 3.0;
            let g = f64::from(got[t]);
            assert!(
                (g - expected).abs() <= 1e-5 * expected.abs().max(1.0),
                "{name} day {t}: {g} vs {expected}"
            );
        }
    }
    assert!(mean.infections.sum(All).item::<f32>() > 50.0, "an epidemic happens");
}

#[test]
fn forecast_model_repeats_the_training_days_and_carries_the_last_week() {
    let pop = Population::synthetic(2_000, 9);
    let model = CovidModel::new(&pop, 14, UpdateForm::KeepGrad);
    let params = CovidParams {
        r0: Tensor::from_vec(&[2], vec![5.0f32, 3.0]),
        mortality: Tensor::from_vec(&[2], vec![0.01f32, 0.02]),
        initial_pct: Tensor::scalar(1.0f32),
    };
    let long = extend_weeks(&params, 30);
    assert_eq!(long.r0.to_vec::<f32>(), vec![5.0, 3.0, 3.0, 3.0, 3.0]);
    assert_eq!(long.mortality.to_vec::<f32>(), vec![0.01, 0.02, 0.02, 0.02, 0.02]);
    let (i14, d14) = simulate_mean(&model, &params, 2, 3).unwrap();
    let (i30, d30) = simulate_mean(&with_days(&model, 30), &params, 2, 3).unwrap();
    assert_eq!((i30.len(), d30.len()), (30, 30));
    // The same keys draw the same noise for the shared days, so the first 14 days agree exactly.
    assert_eq!(&i30[..14], &i14[..]);
    assert_eq!(&d30[..14], &d14[..]);
}

/// Regression: a draw count the simulation cannot hold used to reach the eager `random::split` of
/// K keys and panic there (its 2^32-counter limit, or its `iota` when K keys could not be
/// allocated) or fail only once running; every entry point that makes the keys now refuses it
/// first with a `CalibrateError::Config`, as it does zero draws.
#[test]
fn draw_counts_that_cannot_be_simulated_are_errors_not_panics() {
    // Enough agents that 2^32 draws (625 TiB of state) exceed the usual 47- or 48-bit user address
    // space (128 / 256 TiB), so the allocation check refuses them even under overcommit.
    let pop = Population::synthetic(40_000, 2);
    let covid = CovidModel::new(&pop, 14, UpdateForm::KeepGrad);
    let flu = FluModel::new(&pop, 14, UpdateForm::KeepGrad);
    let covid_params = CovidParams::constant(14, 3.0, 0.01, 1.0);
    let flu_params = FluParams::constant(14, 1.5, 1.0);
    let zeros = [0.0; 14];
    let targets = Targets::infections_and_deaths(&zeros, &zeros);
    for (k, expected) in [
        (0, "ensemble must be positive"),
        (1 << 32, "4294967296 draws of 40000 agents: f32[4294967296,40000] needs 625.0 TiB"),
        ((1 << 32) + 1, "4294967297 draws: at most 2^32"),
        (usize::MAX / 2, "draws: at most 2^32"),
    ] {
        let refused = |what: &str, e: CalibrateError| {
            let m = e.to_string();
            assert!(matches!(e, CalibrateError::Config(_)) && m.contains(expected), "{what} K = {k}: {m}");
        };
        refused("simulate_mean", simulate_mean(&covid, &covid_params, k, 0).unwrap_err());
        refused("simulate_flu_weekly", simulate_flu_weekly(&flu, &flu_params, k, 0).unwrap_err());
        let config = FitConfig { epochs: 1, ensemble: k, ..FitConfig::default() };
        refused("fit", fit(&covid, &targets, &config, |_, _| {}).unwrap_err());
        let config = FluFitConfig { epochs: 1, ensemble: k, ..FluFitConfig::default() };
        refused("fit_flu", fit_flu(&flu, &[1.0, 1.0], &config, None, |_, _| {}).unwrap_err());
    }
}
