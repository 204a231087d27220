//! Calibration of the epidemic models to observed series by gradient descent through the simulator
//! (GradABM's "learnable-params" mode, `anchor-gradabm.md` §1.5–1.7 and §4.3): COVID here, flu in [`flu`].
//!
//! The free parameters are unbounded raw values ([`RawParams`]); the model sees
//! `min + (max − min) · sigmoid(raw)` within [`CovidBounds`] (the published bounds by default), so
//! raw 0 is the middle of the bounds. Each training epoch is one `jit(value_and_grad(loss))` call —
//! the simulation of an ensemble of K noise seeds (`vmap` over the keys, the model's arrays shared),
//! the loss on the ensemble-mean curves, and its gradient — followed by gradient clipping by global
//! norm and an Adam step ([`kiln::optim`]) on the host. A forecast simulates the training days plus
//! a horizon with the last training week's parameters carried forward.
//!
//! ```
//! use kiln_sims::epi::calibrate::{FitConfig, Objective, Targets, fit};
//! use kiln_sims::epi::{CovidModel, Population, UpdateForm};
//! let pop = Population::synthetic(300, 1);
//! let model = CovidModel::new(&pop, 14, UpdateForm::KeepGrad);
//! let targets = Targets::deaths(&[0.0; 14]);
//! let config = FitConfig { epochs: 2, ensemble: 2, ..FitConfig::default() };
//! let result = fit(&model, &targets, &config, |_, _| {})?;
//! assert_eq!(result.losses.len(), 2);
//! assert_eq!(result.params.r0.shape().dims(), &[2]); // two weeks
//! # Ok::<(), kiln_sims::epi::calibrate::CalibrateError>(())
//! ```

mod dates;
pub mod flu;
mod metrics;
pub mod plot;
mod series;
mod weeks;

pub use dates::Date;
pub use metrics::{ForecastScores, Score, nd, persistence, rmse};
pub use series::{DailySeries, WeeklySeries, trailing_mean};
pub use weeks::{MeanScores, mean_scores, prediction_ends};

use super::model::{CovidModel, Daily};
use super::params::CovidParams;
use kiln::ir::TensorType;
use kiln::optim::{Adam, clip_by_global_norm};
use kiln::prelude::*;
use kiln::random;

/// Why a calibration could not run.
#[derive(Debug, thiserror::Error)]
pub enum CalibrateError {
    /// A setting or target that cannot work (zero epochs, a target of the wrong length, ...).
    #[error("calibrate: {0}")]
    Config(String),
    /// An error from kiln (tracing, compiling or running the step).
    #[error(transparent)]
    Kiln(#[from] kiln::Error),
}

/// Lower and upper bound of each calibrated parameter (R0; mortality as a fraction; initial
/// infections in percent of the agents).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CovidBounds {
    /// R0 range.
    pub r0: (f32, f32),
    /// Mortality (fraction of agents leaving I who die) range.
    pub mortality: (f32, f32),
    /// Initial infected percentage range.
    pub initial_pct: (f32, f32),
}

/// The published COVID bounds (`train_abm.py` MIN/MAX_VAL_PARAMS): R0 ∈ [1, 8], mortality ∈
/// [0.001, 0.02], initial % ∈ [0.01, 1].
pub const COVID_BOUNDS: CovidBounds =
    CovidBounds { r0: (1.0, 8.0), mortality: (0.001, 0.02), initial_pct: (0.01, 1.0) };

/// The unbounded parameters the optimizer moves: `r0`, `mortality` are `f32[k]` with `1 ≤ k ≤ W`
/// (weeks past the `k`-th use the last value: `k = 1` shares one value across all weeks);
/// `initial_pct` is `f32[]`.
#[derive(Tree, Clone, Debug)]
pub struct RawParams {
    /// Raw R0, `f32[k]`.
    pub r0: Tensor,
    /// Raw mortality, `f32[k]`.
    pub mortality: Tensor,
    /// Raw initial %, `f32[]`.
    pub initial_pct: Tensor,
}

/// A concrete `f32[k]` resized to `f32[n]`: the last value repeated, or the tail dropped.
pub(crate) fn repeat_last(t: &Tensor, n: usize) -> Tensor {
    let mut v = t.to_vec::<f32>();
    let last = v.last().copied().unwrap_or(0.0);
    v.resize(n, last);
    Tensor::from_vec(&[n], v)
}

/// `min + (max − min) · sigmoid(raw)`.
pub(crate) fn squash(raw: &Tensor, (min, max): (f32, f32)) -> Tensor {
    &(raw.sigmoid() * f64::from(max - min)) + f64::from(min)
}

impl RawParams {
    /// The middle of the bounds (raw 0) with `r0_weeks` values of R0 and `mortality_weeks` of
    /// mortality (1: shared by every week).
    pub fn middle(r0_weeks: usize, mortality_weeks: usize) -> RawParams {
        RawParams {
            r0: Tensor::zeros(DType::F32, &[r0_weeks]),
            mortality: Tensor::zeros(DType::F32, &[mortality_weeks]),
            initial_pct: Tensor::scalar(0.0f32),
        }
    }

    /// These (concrete) values with `r0_weeks` values of R0 and `mortality_weeks` of mortality: the
    /// last value repeated for new weeks, or later weeks dropped (a warm start for a longer or
    /// shorter training window).
    pub fn resized(&self, r0_weeks: usize, mortality_weeks: usize) -> RawParams {
        RawParams {
            r0: repeat_last(&self.r0, r0_weeks),
            mortality: repeat_last(&self.mortality, mortality_weeks),
            initial_pct: self.initial_pct.clone(),
        }
    }

    /// The model's parameters for `weeks` weeks: squashed into `bounds`, the last value repeated
    /// for weeks past the given ones. Works on tracers (inside the training step) and concrete
    /// tensors.
    ///
    /// # Errors
    /// `r0` or `mortality` with no value (e.g. `RawParams::middle(0, 0)`) is reported as a kiln
    /// error at the caller's line.
    #[track_caller]
    pub fn bounded(&self, bounds: &CovidBounds, weeks: usize) -> CovidParams {
        // Checked here: the repetition below would fail inside this function, pointing into it.
        let empty = |t: &Tensor| t.shape().dims().first() == Some(&0);
        if empty(&self.r0) || empty(&self.mortality) {
            let msg = format!(
                "r0 and mortality need at least one value each to fill {weeks} weeks; got {}, {}",
                self.r0.ty(),
                self.mortality.ty()
            );
            kiln_trace::report_error("epi::RawParams::bounded", &[&self.r0, &self.mortality], msg);
        }
        let per_week = |raw: &Tensor, b| {
            let v = squash(raw, b);
            let given = v.shape().dims().first().copied().unwrap_or(1).max(1);
            if given == weeks {
                return v;
            }
            let index: Vec<i32> = (0..weeks).map(|w| w.min(given - 1) as i32).collect();
            v.take(&Tensor::from_vec(&[weeks], index), 0)
        };
        CovidParams {
            r0: per_week(&self.r0, bounds.r0),
            mortality: per_week(&self.mortality, bounds.mortality),
            initial_pct: squash(&self.initial_pct, bounds.initial_pct),
        }
    }
}

/// What the loss compares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Objective {
    /// `mean((scale · deaths − observed)²)`: the reference's loss on (7-day-smoothed) daily deaths.
    DeathsMse,
    /// `Σ_{infections, deaths} mean((scale · sim − obs)²) / mean(obs²)`: the parameter-recovery loss
    /// (`anchor-gradabm.md` §4.5), which needs observed infections.
    NormalizedInfectionsDeaths,
}

/// Observed daily targets, `f32[T]` each, `T` the model's days.
#[derive(Tree, Clone, Debug)]
pub struct Targets {
    /// Daily new infections (zeros when unobserved; only [`Objective::NormalizedInfectionsDeaths`]
    /// reads them).
    pub infections: Tensor,
    /// Daily deaths.
    pub deaths: Tensor,
}

impl Targets {
    /// Deaths only (infections unobserved).
    pub fn deaths(deaths: &[f64]) -> Targets {
        let t = deaths.len();
        Targets {
            infections: Tensor::zeros(DType::F32, &[t]),
            deaths: Tensor::from_vec(&[t], deaths.iter().map(|&d| d as f32).collect()),
        }
    }

    /// Infections and deaths (same length).
    pub fn infections_and_deaths(infections: &[f64], deaths: &[f64]) -> Targets {
        let f = |x: &[f64]| Tensor::from_vec(&[x.len()], x.iter().map(|&v| v as f32).collect());
        Targets { infections: f(infections), deaths: f(deaths) }
    }

    fn days(&self) -> usize {
        self.deaths.shape().dims().first().copied().unwrap_or(0)
    }
}

/// Settings of [`fit`].
#[derive(Clone, Debug)]
pub struct FitConfig {
    /// Optimizer steps (one simulated ensemble, loss and gradient each).
    pub epochs: usize,
    /// Adam learning rate (on the raw, sigmoid-space parameters).
    pub lr: f64,
    /// Gradients are clipped to this global L2 norm before the Adam step.
    pub clip_norm: f64,
    /// K: noise seeds simulated per step (`vmap` over their keys); the loss uses the mean curves.
    pub ensemble: usize,
    /// Seed of the simulation noise.
    pub seed: u32,
    /// Draw fresh noise every epoch (else the same K keys every epoch).
    pub resample_noise: bool,
    /// Parameter bounds.
    pub bounds: CovidBounds,
    /// One mortality per week and one R0 per [`identifiable_r0_weeks`] week (else one shared value
    /// of each).
    pub weekly: bool,
    /// The loss.
    pub objective: Objective,
    /// Simulated counts are multiplied by this before comparison (population / agents when the
    /// simulated population is smaller than the observed one).
    pub scale: f32,
}

impl Default for FitConfig {
    /// 200 epochs, Adam lr 1e-2, clip 10 (`anchor-gradabm.md` §4.3), K = 1, seed 0, fresh noise,
    /// published bounds, weekly parameters, [`Objective::DeathsMse`], scale 1.
    fn default() -> FitConfig {
        FitConfig {
            epochs: 200,
            lr: 1e-2,
            clip_norm: 10.0,
            ensemble: 1,
            seed: 0,
            resample_noise: true,
            bounds: COVID_BOUNDS,
            weekly: true,
            objective: Objective::DeathsMse,
            scale: 1.0,
        }
    }
}

/// The result of [`fit`].
#[derive(Clone, Debug)]
pub struct Fitted {
    /// The final raw parameters.
    pub raw: RawParams,
    /// The final model parameters (bounded, one per training week), concrete.
    pub params: CovidParams,
    /// The loss of every epoch (before that epoch's update).
    pub losses: Vec<f32>,
}

/// The K noise keys (`u32[K, 2]`) of `epoch`.
fn ensemble_keys(config: &FitConfig, epoch: usize) -> Tensor {
    let round = if config.resample_noise { epoch as u32 } else { 0 };
    random::split(&random::fold_in(&random::key(config.seed), round), config.ensemble)
}

/// The ensemble-mean daily curves of `model` under `params` over the K keys `keys` (`u32[K, 2]`),
/// each `f32[days]`: `vmap` over the keys with the model's arrays and the parameters shared (K = 1
/// simulates the one key unbatched). The batched program keeps the batch axis first throughout
/// (the edge sums become one `scatter_add` into `[K, N]`): measured at 70,916 agents × 56 days,
/// 7.3 ms of CPU per seed-day at K = 1 and 8.3 ms at K = 4 (`examples/ensemble_timing.rs`).
pub fn ensemble_mean(model: &CovidModel, params: &CovidParams, keys: &Tensor) -> Daily {
    mean_over_keys(model, params, keys, CovidModel::simulate)
}

/// The mean over the K keys `keys` (`u32[K, 2]`) of `simulate(model, params, key)`, every leaf
/// averaged over the keys: `vmap` with the model and the parameters shared; K = 1 runs the one key
/// unbatched (a plain segment_sum, split over threads).
pub(crate) fn mean_over_keys<M: Tree + Clone, P: Tree + Clone, D: Tree>(
    model: &M,
    params: &P,
    keys: &Tensor,
    simulate: fn(&M, &P, &Tensor) -> D,
) -> D {
    if keys.shape().dims().first() == Some(&1) {
        return simulate(model, params, &keys.index(0));
    }
    let per_key =
        vmap(|(m, p, k): (M, P, Tensor)| simulate(&m, &p, &k), (AxisSpec::NONE, AxisSpec::NONE, 0), 0);
    per_key((model.clone(), params.clone(), keys.clone())).map(|t| t.mean(0))
}

/// The loss of `objective` between the scaled simulated curves and the targets (a scalar).
fn loss(objective: Objective, sim: &Daily, scale: f32, targets: &Targets) -> Tensor {
    let mse = |s: &Tensor, o: &Tensor| (&(s * f64::from(scale)) - o).square().mean_all();
    match objective {
        Objective::DeathsMse => mse(&sim.deaths, &targets.deaths),
        Objective::NormalizedInfectionsDeaths => {
            let nmse = |s: &Tensor, o: &Tensor| &mse(s, o) / &(&o.square().mean_all() + 1e-12);
            &nmse(&sim.infections, &targets.infections) + &nmse(&sim.deaths, &targets.deaths)
        }
    }
}

/// The weeks of a `days`-day run whose R0 can affect the simulated deaths (at least 1): an agent
/// infected on day `t` dies, if at all, on day `t + 9` (1 + 3 days exposed + 5 infected), so week `w`
/// matters only when `7w + 9 < days`. Later weeks share the last of these weeks' R0 in [`fit`] —
/// otherwise they would keep their starting value, with zero gradient, into the forecast.
///
/// ```
/// use kiln_sims::epi::calibrate::identifiable_r0_weeks;
/// assert_eq!(identifiable_r0_weeks(42), 5); // week 5 (days 35..41) cannot reach day 41's deaths
/// assert_eq!(identifiable_r0_weeks(10), 1);
/// assert_eq!(identifiable_r0_weeks(5), 1);
/// ```
pub fn identifiable_r0_weeks(days: usize) -> usize {
    days.checked_sub(10).map_or(1, |d| d / 7 + 1)
}

/// Fits the parameters of `model` (its days = the targets' length) to `targets` from the middle of
/// the bounds, calling `on_epoch(epoch, loss)` after each epoch (for progress display).
///
/// # Errors
/// [`CalibrateError::Config`] for zero epochs, an ensemble [`check_ensemble`] refuses, a
/// non-positive or non-finite learning rate (as f32), scale or clip norm, bounds that are not
/// finite, are reversed or leave the parameter's domain (R0 >= 0, mortality in [0, 1], initial %
/// in [0, 100]), targets whose length is not the model's days, or a loss that becomes non-finite;
/// [`CalibrateError::Kiln`] if tracing, compiling or running fails.
pub fn fit(
    model: &CovidModel,
    targets: &Targets,
    config: &FitConfig,
    on_epoch: impl FnMut(usize, f32),
) -> Result<Fitted, CalibrateError> {
    fit_from(model, targets, config, None, on_epoch)
}

/// As [`fit`], starting from `init` (resized with [`RawParams::resized`] to this window's weeks)
/// instead of the middle of the bounds when given: the warm start of a training window one week
/// longer than the previous one. The Adam moments start from zero either way.
///
/// # Errors
/// As [`fit`].
pub fn fit_from(
    model: &CovidModel,
    targets: &Targets,
    config: &FitConfig,
    init: Option<&RawParams>,
    on_epoch: impl FnMut(usize, f32),
) -> Result<Fitted, CalibrateError> {
    check_config(model, targets, config)?;
    let weeks = model.days.div_ceil(7);
    let (bounds, objective, scale) = (config.bounds, config.objective, config.scale);
    let step = jit(move |(m, raw, keys, obs): (CovidModel, RawParams, Tensor, Targets)| {
        value_and_grad(|(raw,): (RawParams,)| {
            let sim = ensemble_mean(&m, &raw.bounded(&bounds, weeks), &keys);
            loss(objective, &sim, scale, &obs)
        })((raw,))
    });
    let (r0_weeks, mortality_weeks) =
        if config.weekly { (identifiable_r0_weeks(model.days), weeks) } else { (1, 1) };
    let raw = match init {
        Some(init) => init.resized(r0_weeks, mortality_weeks),
        None => RawParams::middle(r0_weeks, mortality_weeks),
    };
    let descent = Descent { epochs: config.epochs, lr: config.lr, clip_norm: config.clip_norm };
    let (raw, losses) = descent.run(
        raw,
        |raw, epoch| {
            let args = (model.clone(), raw.clone(), ensemble_keys(config, epoch), targets.clone());
            let (value, (grads,)) = step.call(&args)?;
            Ok((value, grads))
        },
        on_epoch,
    )?;
    let params = raw.bounded(&config.bounds, weeks);
    Ok(Fitted { raw, params, losses })
}

/// Adam with gradient clipping by global norm for a fixed number of epochs: the loop shared by the
/// COVID and flu fits.
pub(crate) struct Descent {
    pub epochs: usize,
    pub lr: f64,
    pub clip_norm: f64,
}

impl Descent {
    /// Runs `epochs` steps from `raw`; `value_and_grad(raw, epoch)` gives the loss (`f32[]`) and its
    /// gradient. Returns the final parameters and every epoch's loss.
    pub fn run<P: Tree + Clone>(
        &self,
        mut raw: P,
        mut value_and_grad: impl FnMut(&P, usize) -> Result<(Tensor, P), kiln::Error>,
        mut on_epoch: impl FnMut(usize, f32),
    ) -> Result<(P, Vec<f32>), CalibrateError> {
        let mut adam = Adam::new(self.lr);
        // Not `with_capacity(epochs)`: a huge epoch count would abort on allocation before any step.
        let mut losses = Vec::new();
        for epoch in 0..self.epochs {
            let (value, grads) = value_and_grad(&raw, epoch)?;
            let value = value.item::<f32>();
            if !value.is_finite() {
                return Err(CalibrateError::Config(format!("the loss became {value} at epoch {epoch}")));
            }
            let (clipped, _norm) = clip_by_global_norm(&grads, self.clip_norm)?;
            raw = adam.update(&raw, &clipped)?;
            losses.push(value);
            on_epoch(epoch, value);
        }
        Ok((raw, losses))
    }
}

/// Whether an ensemble of `ensemble` draws of `agents` agents can be simulated: at least one draw,
/// at most 2³² (one [`random::split`] key each; kiln's threefry counters are 32-bit), and a
/// batched agent state (`f32[ensemble, agents]`, one of several the simulation holds) that this
/// process can address and allocate. Checked before the noise keys are made, so an impossible count
/// is an error, not a panic in `random::split` or an allocation failure in the middle of a run.
///
/// # Errors
/// [`CalibrateError::Config`] for zero draws, more than 2³², or a state that cannot be allocated
/// (naming the draws, the agents and the state's size).
///
/// ```
/// use kiln_sims::epi::calibrate::check_ensemble;
/// assert!(check_ensemble(16, 70_916).is_ok());
/// assert!(check_ensemble(0, 70_916).is_err());
/// assert!(check_ensemble((1 << 32) + 1, 1).unwrap_err().to_string().contains("at most 2^32"));
/// let e = check_ensemble(1_000_000_000, 70_916).unwrap_err().to_string();
/// assert!(e.contains("1000000000 draws of 70916 agents: f32[1000000000,70916] needs 258.0 TiB"), "{e}");
/// ```
pub fn check_ensemble(ensemble: usize, agents: usize) -> Result<(), CalibrateError> {
    let bad = |m: String| Err(CalibrateError::Config(m));
    if ensemble == 0 {
        return bad("ensemble must be positive (at least one draw)".into());
    }
    if ensemble as u128 > 1u128 << 32 {
        return bad(format!("{ensemble} draws: at most 2^32 (one random::split key each)"));
    }
    let state = TensorType::new(DType::F32, vec![ensemble, agents]);
    match state.check_addressable().and_then(|()| state.check_allocatable()) {
        Ok(()) => Ok(()),
        Err(m) => bad(format!("{ensemble} draws of {agents} agents: {m}")),
    }
}

fn check_config(model: &CovidModel, targets: &Targets, config: &FitConfig) -> Result<(), CalibrateError> {
    let bad = |m: String| Err(CalibrateError::Config(m));
    if config.epochs == 0 {
        return bad(format!("epochs ({}) must be positive", config.epochs));
    }
    check_ensemble(config.ensemble, model.num_agents())?;
    let positive = |x: f64| x > 0.0 && x.is_finite();
    if !positive_f32(config.lr) || !positive(config.clip_norm) || !positive(f64::from(config.scale)) {
        return bad(format!(
            "lr ({}), clip_norm ({}) and scale ({}) must be positive and finite (lr as f32)",
            config.lr, config.clip_norm, config.scale
        ));
    }
    let b = &config.bounds;
    check_bounds("bounds.r0", b.r0, (0.0, f32::INFINITY))?;
    check_bounds("bounds.mortality", b.mortality, (0.0, 1.0))?;
    check_bounds("bounds.initial_pct", b.initial_pct, (0.0, 100.0))?;
    if b.initial_pct.1 <= 0.0 {
        // No initial infections: the curves stay 0 and the gradient too (flu refuses 0 as well).
        return bad(format!("bounds.initial_pct {:?}: its max must be above 0", b.initial_pct));
    }
    let t = targets.days();
    if t != model.days || targets.infections.shape().dims() != [t] || t == 0 {
        return bad(format!(
            "targets are infections {} and deaths {} but the model simulates {} days",
            targets.infections.ty(),
            targets.deaths.ty(),
            model.days
        ));
    }
    Ok(())
}

/// Whether `x` is positive and finite once rounded to f32 (the parameters' dtype: an Adam learning
/// rate of 1e39 passes as f64 but is inf as f32, and 1e-50 is 0).
pub(crate) fn positive_f32(x: f64) -> bool {
    let x = x as f32;
    x > 0.0 && x.is_finite()
}

/// A parameter's bounds `(min, max)` must be finite, `min <= max` (equal bounds fix the value)
/// and inside the parameter's `domain`: reversed or NaN bounds would otherwise only show as a
/// NaN loss.
pub(crate) fn check_bounds(
    name: &str,
    (min, max): (f32, f32),
    domain: (f32, f32),
) -> Result<(), CalibrateError> {
    if min.is_finite() && max.is_finite() && min <= max && domain.0 <= min && max <= domain.1 {
        return Ok(());
    }
    Err(CalibrateError::Config(format!(
        "{name} ({min}, {max}): must be finite bounds (min, max) with min <= max, within [{}, {}]",
        domain.0, domain.1
    )))
}

/// `params` for `days` days: weeks past the given ones repeat the last given week (the forecast's
/// assumption that the fitted conditions persist).
pub fn extend_weeks(params: &CovidParams, days: usize) -> CovidParams {
    let weeks = days.div_ceil(7);
    CovidParams {
        r0: repeat_last(&params.r0, weeks),
        mortality: repeat_last(&params.mortality, weeks),
        initial_pct: params.initial_pct.clone(),
    }
}

/// The ensemble-mean curves of `model` (any number of days) under `params` (extended with
/// [`extend_weeks`]) over K = `ensemble` keys from `seed`, through `jit`: `(infections, deaths)`,
/// each `model.days` values, unscaled.
///
/// # Errors
/// [`CalibrateError::Config`] for an ensemble [`check_ensemble`] refuses; [`CalibrateError::Kiln`]
/// if running fails.
pub fn simulate_mean(
    model: &CovidModel,
    params: &CovidParams,
    ensemble: usize,
    seed: u32,
) -> Result<(Vec<f64>, Vec<f64>), CalibrateError> {
    check_ensemble(ensemble, model.num_agents())?;
    let keys = random::split(&random::key(seed), ensemble);
    let params = extend_weeks(params, model.days);
    let run = jit(|(m, p, k): (CovidModel, CovidParams, Tensor)| ensemble_mean(&m, &p, &k));
    let daily = run.call(&(model.clone(), params, keys))?;
    let f64s = |t: &Tensor| t.to_vec::<f32>().into_iter().map(f64::from).collect();
    Ok((f64s(&daily.infections), f64s(&daily.deaths)))
}

/// The same model for another number of days (the forecast's longer run).
pub fn with_days(model: &CovidModel, days: usize) -> CovidModel {
    // The infectiousness table has `days + 10` entries; extend it from the same Gamma.
    let (mean, sd) = super::disease::GAMMA_MEAN_SD;
    CovidModel {
        pmf: Tensor::from_vec(&[days + 10], super::disease::gamma_pmf(days + 10, mean, sd)),
        days,
        ..model.clone()
    }
}
