//! Calibration of the flu (SIRS) model to weekly ILI (GradABM's flu setting,
//! `anchor-gradabm.md` §1.5, §1.7): per-week R0 within the published bounds [1.05, 2.6]
//! (`min + (max − min) · sigmoid(raw)`), loss = MSE between the simulated weekly ILI (the daily
//! `100 × new infections / N` summed over each week) and the observed weekly ILI, Adam with
//! gradient clipping as for COVID.
//!
//! The initial infected % is **not** fitted: in this model (as published) the loss has no
//! gradient with respect to it in either update form (see [`crate::epi::flu`]), so Adam would leave
//! it at its starting value. It is held at [`FluFitConfig::initial_pct`], by default the published
//! expert value 1 %.
//!
//! Two deliberate differences from the published code: the observed ILI is used as reported (the
//! reference also applies a 7-point moving average, which on a weekly series is a 7-week window
//! that lags the season by three weeks), and R0 is free per training week (no neural network).
//!
//! ```
//! use kiln_sims::epi::calibrate::flu::{FluFitConfig, fit_flu};
//! use kiln_sims::epi::{FluModel, Population, UpdateForm};
//! let pop = Population::synthetic(300, 1);
//! let model = FluModel::new(&pop, 14, UpdateForm::KeepGrad);
//! let config = FluFitConfig { epochs: 2, ..FluFitConfig::default() };
//! let fitted = fit_flu(&model, &[1.0, 2.0], &config, None, |_, _| {})?;
//! assert_eq!(fitted.losses.len(), 2);
//! assert_eq!(fitted.params.r0.shape().dims(), &[2]); // two weeks
//! # Ok::<(), kiln_sims::epi::calibrate::CalibrateError>(())
//! ```

use super::{CalibrateError, Descent, repeat_last, squash};
use crate::epi::flu::{FluDaily, FluModel};
use crate::epi::params::FluParams;
use kiln::prelude::*;
use kiln::random;

/// The published flu R0 bounds (`train_abm.py`): [1.05, 2.6].
pub const FLU_R0_BOUNDS: (f32, f32) = (1.05, 2.6);

/// The published "ABM-expert" initial infected percentage for flu (1 %).
pub const FLU_EXPERT_INITIAL_PCT: f32 = 1.0;

/// Settings of [`fit_flu`].
#[derive(Clone, Debug)]
pub struct FluFitConfig {
    /// Optimizer steps.
    pub epochs: usize,
    /// Adam learning rate (on the raw, sigmoid-space R0).
    pub lr: f64,
    /// Gradients are clipped to this global L2 norm before the Adam step.
    pub clip_norm: f64,
    /// K: noise seeds simulated per step (`vmap` over their keys); the loss uses the mean curve.
    pub ensemble: usize,
    /// Seed of the simulation noise.
    pub seed: u32,
    /// R0 range.
    pub r0_bounds: (f32, f32),
    /// The initial infected percentage, held fixed (it has no gradient, see the module docs).
    pub initial_pct: f32,
}

impl Default for FluFitConfig {
    /// 200 epochs, Adam lr 1e-2, clip 10, K = 1, seed 0, published R0 bounds, initial 1 %.
    fn default() -> FluFitConfig {
        FluFitConfig {
            epochs: 200,
            lr: 1e-2,
            clip_norm: 10.0,
            ensemble: 1,
            seed: 0,
            r0_bounds: FLU_R0_BOUNDS,
            initial_pct: FLU_EXPERT_INITIAL_PCT,
        }
    }
}

/// The unbounded per-week R0 the optimizer moves, `f32[W]`.
#[derive(Tree, Clone, Debug)]
pub struct FluRaw {
    /// Raw R0, `f32[W]`.
    pub r0: Tensor,
}

impl FluRaw {
    /// Raw 0 (the middle of the bounds) for `weeks` weeks.
    pub fn middle(weeks: usize) -> FluRaw {
        FluRaw { r0: Tensor::zeros(DType::F32, &[weeks]) }
    }

    /// These (concrete) values for `weeks` weeks: the last repeated or the tail dropped.
    pub fn resized(&self, weeks: usize) -> FluRaw {
        FluRaw { r0: repeat_last(&self.r0, weeks) }
    }

    /// The model's parameters: R0 squashed into `r0_bounds`, the fixed `initial_pct`.
    pub fn bounded(&self, r0_bounds: (f32, f32), initial_pct: f32) -> FluParams {
        FluParams { r0: squash(&self.r0, r0_bounds), initial_pct: Tensor::scalar(initial_pct) }
    }
}

/// The result of [`fit_flu`].
#[derive(Clone, Debug)]
pub struct FluFitted {
    /// The final raw R0.
    pub raw: FluRaw,
    /// The final model parameters (bounded R0 per training week; the fixed initial %), concrete.
    pub params: FluParams,
    /// The loss of every epoch (before that epoch's update).
    pub losses: Vec<f32>,
}

/// The ensemble-mean daily flu curves over the keys `keys` (`u32[K, 2]`), as
/// [`super::ensemble_mean`] does for COVID.
pub fn flu_ensemble_mean(model: &FluModel, params: &FluParams, keys: &Tensor) -> FluDaily {
    super::mean_over_keys(model, params, keys, FluModel::simulate)
}

/// Fits one R0 per week of `model` (its days must be `7 · weekly_ili.len()`) to the observed weekly
/// ILI (percent), from `init` (resized to the weeks; a warm start) or the middle of the bounds,
/// calling `on_epoch(epoch, loss)` after each epoch.
///
/// # Errors
/// [`CalibrateError::Config`] for zero epochs, an ensemble [`super::check_ensemble`] refuses, a
/// non-positive or non-finite learning rate (as f32) or clip norm, `r0_bounds` that are not
/// finite, reversed or negative, an initial % outside (0, 100], a model
/// whose days are not 7 per observed week, or a loss that becomes non-finite;
/// [`CalibrateError::Kiln`] if tracing, compiling or running fails.
pub fn fit_flu(
    model: &FluModel,
    weekly_ili: &[f64],
    config: &FluFitConfig,
    init: Option<&FluRaw>,
    on_epoch: impl FnMut(usize, f32),
) -> Result<FluFitted, CalibrateError> {
    check(model, weekly_ili, config)?;
    let weeks = weekly_ili.len();
    let observed = Tensor::from_vec(&[weeks], weekly_ili.iter().map(|&v| v as f32).collect());
    let (bounds, initial_pct) = (config.r0_bounds, config.initial_pct);
    let step = jit(move |(m, raw, keys, obs): (FluModel, FluRaw, Tensor, Tensor)| {
        value_and_grad(|(raw,): (FluRaw,)| {
            let sim = flu_ensemble_mean(&m, &raw.bounded(bounds, initial_pct), &keys);
            (&sim.weekly_ili() - &obs).square().mean_all()
        })((raw,))
    });
    let raw = init.map_or_else(|| FluRaw::middle(weeks), |r| r.resized(weeks));
    let descent = Descent { epochs: config.epochs, lr: config.lr, clip_norm: config.clip_norm };
    let (raw, losses) = descent.run(
        raw,
        |raw, epoch| {
            let keys =
                random::split(&random::fold_in(&random::key(config.seed), epoch as u32), config.ensemble);
            let (value, (grads,)) = step.call(&(model.clone(), raw.clone(), keys, observed.clone()))?;
            Ok((value, grads))
        },
        on_epoch,
    )?;
    let params = raw.bounded(bounds, initial_pct);
    Ok(FluFitted { raw, params, losses })
}

fn check(model: &FluModel, weekly_ili: &[f64], config: &FluFitConfig) -> Result<(), CalibrateError> {
    let bad = |m: String| Err(CalibrateError::Config(m));
    if config.epochs == 0 {
        return bad(format!("epochs ({}) must be positive", config.epochs));
    }
    super::check_ensemble(config.ensemble, model.num_agents())?;
    let positive = |x: f64| x > 0.0 && x.is_finite();
    if !super::positive_f32(config.lr) || !positive(config.clip_norm) {
        return bad(format!(
            "lr ({}) and clip_norm ({}) must be positive and finite (lr as f32)",
            config.lr, config.clip_norm
        ));
    }
    super::check_bounds("r0_bounds", config.r0_bounds, (0.0, f32::INFINITY))?;
    if !(config.initial_pct > 0.0 && config.initial_pct <= 100.0) {
        return bad(format!("initial_pct {} is not a percentage in (0, 100]", config.initial_pct));
    }
    if weekly_ili.is_empty() || model.days != 7 * weekly_ili.len() {
        return bad(format!(
            "{} observed weeks need a model of {} days, the model simulates {}",
            weekly_ili.len(),
            7 * weekly_ili.len(),
            model.days
        ));
    }
    Ok(())
}

/// The ensemble-mean weekly ILI of `model` (its days a multiple of 7) under `params`, R0 extended to
/// the model's weeks by repeating the last week (the forecast's assumption), over K = `ensemble`
/// keys from `seed`, through `jit`: one value per week.
///
/// # Errors
/// [`CalibrateError::Config`] for an ensemble [`super::check_ensemble`] refuses;
/// [`CalibrateError::Kiln`] if running fails.
pub fn simulate_flu_weekly(
    model: &FluModel,
    params: &FluParams,
    ensemble: usize,
    seed: u32,
) -> Result<Vec<f64>, CalibrateError> {
    super::check_ensemble(ensemble, model.num_agents())?;
    let keys = random::split(&random::key(seed), ensemble);
    let params = FluParams {
        r0: repeat_last(&params.r0, model.days.div_ceil(7)),
        initial_pct: params.initial_pct.clone(),
    };
    let run = jit(|(m, p, k): (FluModel, FluParams, Tensor)| flu_ensemble_mean(&m, &p, &k).weekly_ili());
    let weekly = run.call(&(model.clone(), params, keys))?;
    Ok(weekly.to_vec::<f32>().into_iter().map(f64::from).collect())
}

/// The same flu model for another number of days (the forecast's longer run).
pub fn flu_with_days(model: &FluModel, days: usize) -> FluModel {
    let (mean, sd) = crate::epi::disease::flu::GAMMA_MEAN_SD;
    FluModel {
        pmf: Tensor::from_vec(&[days + 10], crate::epi::disease::gamma_pmf(days + 10, mean, sd)),
        days,
        ..model.clone()
    }
}
