//! The GradABM COVID-19 (SEIRM) agent model as kiln array ops: one day is a gather of per-agent
//! infectiousness over the edges, a `segment_sum` into each destination, `p = 1 − exp(−λ)`, a
//! straight-through binary-concrete draw and the stage progression; [`CovidModel::simulate`] runs
//! `days` of them under `scan`.
//!
//! The published model (AdityaLab/GradABM `abm_model.py`, re-stated in
//! `shared/anchors/gradabm/gradabm_jax.py`) writes the stage progression as `mask × constant`,
//! which cuts the gradient path between days: deaths then have zero gradient in R0 and in the
//! initial infections. [`UpdateForm::KeepGrad`] writes it as `stage × mask × (target / current)`
//! instead (same forward values), so the gradient survives across days.

use super::disease::{self, stage};
use super::params::CovidParams;
use super::population::Population;
use kiln::lax::stop_gradient;
use kiln::prelude::*;
use kiln::random;

/// How the stage update is written; both give the same forward values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UpdateForm {
    /// As the published model: `mask × constant`, so deaths have no gradient in R0 or the initial %.
    Reference,
    /// `stage × mask × (target / current)`: gradients flow across days (the default for calibration).
    KeepGrad,
}

/// The static inputs of a simulation, as tensors (a pytree, so it can be a `jit` argument or an
/// unmapped `vmap` argument shared by an ensemble).
#[derive(Tree, Clone, Debug)]
pub struct CovidModel {
    /// `f32[N]`: susceptibility of the agent's age group / its mean contacts `Ī` (edge weight 1).
    pub scale: Tensor,
    /// `i32[E]`: source agent of each directed edge, sorted by destination.
    pub src: Tensor,
    /// `i32[E]`: destination agent of each directed edge, non-decreasing.
    pub dst: Tensor,
    /// `f32[days + 10]`: the discretized Gamma infectiousness by days since infection.
    pub pmf: Tensor,
    /// Number of simulated days.
    #[tree(skip)]
    pub days: usize,
    /// How the stage update is written.
    #[tree(skip)]
    pub form: UpdateForm,
}

/// The per-agent state carried from day to day (all `[N]`).
#[derive(Tree, Clone, Debug)]
pub struct AgentState {
    /// `f32`: SEIRM stage 0..=4 (see [`stage`]); a float so that it can carry a tangent.
    pub stage: Tensor,
    /// `bool`: the agent emits infection (set on exposure, cleared on leaving I).
    pub infected: Tensor,
    /// `f32`: day of infection (`-1` for the initial infections, `days + 1` for never).
    pub t_infected: Tensor,
    /// `f32`: day of the next stage transition (`days + 1` for never).
    pub t_next: Tensor,
}

/// The simulated daily targets, each `f32[days]`.
#[derive(Tree, Clone, Debug)]
pub struct Daily {
    /// Newly exposed agents per day.
    pub infections: Tensor,
    /// Expected deaths per day: mortality × agents leaving I that day.
    pub deaths: Tensor,
}

/// A straight-through binary-concrete (two-class Gumbel-softmax, τ = 1) draw of Bernoulli(`p`)
/// from uniforms `u ∈ (0, 1)`: the forward value is exactly the hard 0/1 sample
/// `[logit(p) + logistic(u) > 0]` (logits `log(p + 1e-9)`, `log(1 − p + 1e-9)` as the reference), the
/// gradient is that of `sigmoid(logit(p) + logistic(u))`. `p`, `u`: `f32[N]` → `f32[N]`.
pub fn bernoulli_straight_through(p: &Tensor, u: &Tensor) -> Tensor {
    let eps = 1e-9;
    let logit = (p + eps).log() - (&(1.0 - p) + eps).log() + u.log() - (1.0 - u).log();
    let hard = logit.gt(&Tensor::scalar(0.0f32)).astype(DType::F32);
    let soft = logit.sigmoid();
    // hard + (soft − soft) is exactly hard in the forward pass (hard − soft + soft need not be).
    &hard + &(&soft - &stop_gradient(&soft))
}

/// The part of a day shared by COVID and flu: the contact network and the per-agent constants.
pub(crate) struct Contacts<'a> {
    /// `f32[N]` susceptibility / mean contacts.
    pub(crate) scale: &'a Tensor,
    /// `i32[E]` sources, sorted by destination.
    pub(crate) src: &'a Tensor,
    /// `i32[E]` destinations, non-decreasing.
    pub(crate) dst: &'a Tensor,
    /// `f32[days + 10]` infectiousness by days since infection.
    pub(crate) pmf: &'a Tensor,
}

impl Contacts<'_> {
    /// The day's newly exposed agents (`f32[N]`, straight-through 0/1): susceptible agents (stage
    /// `susceptible`) drawn with `p = 1 − exp(−λ)`, `λ_i = R0 · scale_i · Σ_{j→i} A[stage_j] ·
    /// G[t − t_inf_j]` over infected `j`; `A` = `infectiousness` by stage, `t` = `tf` (`f32[]`).
    pub(crate) fn new_exposures(
        &self,
        s: &AgentState,
        tf: &Tensor,
        r0: &Tensor,
        u: &Tensor,
        infectiousness: &[f32],
        susceptible: f32,
    ) -> Tensor {
        let n = self.scale.shape().dims()[0];
        let last = self.pmf.shape().dims()[0] - 1;
        let sd = stop_gradient(&s.stage);
        let since = (tf - &s.t_infected).clip(0.0, last as f64).astype(DType::I32);
        let by_stage = Tensor::from_vec(&[infectiousness.len()], infectiousness.to_vec())
            .take(&sd.astype(DType::I32), 0);
        // Infectiousness is data (detached stage, constant table): stop_gradient tells kiln's AD so,
        // else the backward transposes the E-sized gather into a scatter every day (5x slower at 1 M).
        let factor =
            stop_gradient(&where_(&s.infected, &(&by_stage * &self.pmf.take(&since, 0)), &scalar(0.0)));
        let pressure = factor.take(self.src, 0).segment_sum(self.dst, n);
        let lambda = &(r0 * self.scale) * &pressure;
        let p = 1.0 - (-&lambda).exp();
        &f32s(&sd.eq(&scalar(susceptible))) * &bernoulli_straight_through(&p, u)
    }
}

/// Reports, as `op` at the caller's line, a population the models cannot simulate or zero days
/// (nothing to simulate: the scan over days would be empty). Inside a trace the error is recorded
/// and the caller goes on (ages clamped to 0..=7), its results unused.
#[track_caller]
pub(crate) fn check_inputs(op: &str, population: &Population, days: usize) {
    if let Err(e) = population.check() {
        kiln_trace::report_error(op, &[], e.to_string());
    }
    if days == 0 {
        kiln_trace::report_error(
            op,
            &[],
            "days must be at least 1 (a model of 0 days simulates nothing)".into(),
        );
    }
}

pub(crate) fn f32s(b: &Tensor) -> Tensor {
    b.astype(DType::F32)
}

pub(crate) fn scalar(v: f32) -> Tensor {
    Tensor::scalar(v)
}

impl CovidModel {
    /// The model of `population` for `days` days: per-agent transmission scale, the destination-sorted
    /// edge arrays and the Gamma(mean 5.5, sd 2.14) infectiousness table of `days + 10` entries.
    ///
    /// # Errors
    /// A population [`Population::check`] refuses (no agents, ages and network of different
    /// agents, an age group above 7) or zero days is reported as a kiln error at the caller's line
    /// (a panic outside a trace).
    #[track_caller]
    pub fn new(population: &Population, days: usize, form: UpdateForm) -> CovidModel {
        check_inputs("epi::CovidModel::new", population, days);
        let n = population.num_agents();
        let scale: Vec<f32> = population
            .ages
            .iter()
            .map(|&a| disease::SUSCEPTIBILITY[usize::from(a.min(7))] / disease::mean_contacts(a.min(7)))
            .collect();
        let net = &population.network;
        let (mean, sd) = disease::GAMMA_MEAN_SD;
        CovidModel {
            scale: Tensor::from_vec(&[n], scale),
            src: Tensor::from_vec(&[net.num_edges()], net.src().to_vec()),
            dst: Tensor::from_vec(&[net.num_edges()], net.dst().to_vec()),
            pmf: Tensor::from_vec(&[days + 10], disease::gamma_pmf(days + 10, mean, sd)),
            days,
            form,
        }
    }

    /// The same model with another update form.
    pub fn with_form(&self, form: UpdateForm) -> CovidModel {
        CovidModel { form, ..self.clone() }
    }

    /// Number of agents.
    pub fn num_agents(&self) -> usize {
        self.scale.shape().dims().first().copied().unwrap_or(0)
    }

    /// "Never" as a day: `days + 1`.
    fn never(&self) -> f32 {
        (self.days + 1) as f32
    }

    /// Runs `days` days drawing the noise from `key` (`u32[2]`, e.g. `kiln::random::key(seed)`):
    /// `split` gives the day-0 key and a key that is `fold_in`'d with each day, each drawing one
    /// uniform per agent.
    ///
    /// Shape errors in `params` (see [`CovidParams`]) and a model of 0 days are reported as kiln
    /// errors at the caller's line.
    #[track_caller]
    pub fn simulate(&self, params: &CovidParams, key: &Tensor) -> Daily {
        self.check(params, None);
        let n = self.num_agents();
        let [k_init, k_days] = random::split2(key);
        let uniform = |k: &Tensor| random::uniform(k, &[n], DType::F32, f32::MIN_POSITIVE, 1.0f32);
        let init = self.initial_state(params, &uniform(&k_init));
        let days = Tensor::arange(self.days, DType::I32);
        let (_, (infections, deaths)) = scan(
            |s: AgentState, t: Tensor| {
                let u = uniform(&random::fold_in_tensor(&k_days, &t));
                self.day(s, &t, &u, params)
            },
            init,
            days,
        );
        Daily { infections, deaths }
    }

    /// Runs `days` days with the noise given: `uniforms` is `f32[days + 1, N]` in `(0, 1)`, row 0 for
    /// the initial infections and row `t + 1` for day `t` (for comparisons with other
    /// implementations fed the same noise).
    #[track_caller]
    pub fn simulate_with_uniforms(&self, params: &CovidParams, uniforms: &Tensor) -> Daily {
        self.check(params, Some(uniforms));
        let init = self.initial_state(params, &uniforms.index(0));
        let days = Tensor::arange(self.days, DType::I32);
        let rest = uniforms.slice_axis(0, Some(1), None, 1);
        let (_, (infections, deaths)) =
            scan(|s: AgentState, (t, u): (Tensor, Tensor)| self.day(s, &t, &u, params), init, (days, rest));
        Daily { infections, deaths }
    }

    /// Reports parameter or noise shapes that do not fit the model.
    #[track_caller]
    fn check(&self, params: &CovidParams, uniforms: Option<&Tensor>) {
        if self.days == 0 {
            let msg = "the model has 0 days: days must be at least 1".to_string();
            kiln_trace::report_error("epi::simulate", &[], msg);
        }
        let weeks = self.days.div_ceil(7);
        let f32_of = |t: &Tensor, dims: &[usize]| t.dtype() == DType::F32 && t.shape().dims() == dims;
        let ok_params = f32_of(&params.r0, &[weeks])
            && f32_of(&params.mortality, &[weeks])
            && f32_of(&params.initial_pct, &[]);
        if !ok_params {
            let msg = format!(
                "parameters for {} days must be r0 f32[{weeks}], mortality f32[{weeks}], initial_pct f32[]; \
                 got {}, {}, {}",
                self.days,
                params.r0.ty(),
                params.mortality.ty(),
                params.initial_pct.ty()
            );
            kiln_trace::report_error(
                "epi::simulate",
                &[&params.r0, &params.mortality, &params.initial_pct],
                msg,
            );
        }
        if let Some(u) = uniforms
            && !f32_of(u, &[self.days + 1, self.num_agents()])
        {
            let msg =
                format!("uniforms must be f32[{}, {}], got {}", self.days + 1, self.num_agents(), u.ty());
            kiln_trace::report_error("epi::simulate_with_uniforms", &[u], msg);
        }
    }

    /// Day 0: each agent is exposed with probability `initial_pct / 100` (straight-through, so the
    /// stage carries the gradient in `initial_pct`), infected since day −1, due to become I on day 3.
    fn initial_state(&self, params: &CovidParams, u: &Tensor) -> AgentState {
        let n = self.num_agents();
        let p = (&params.initial_pct / 100.0).broadcast_to(&[n]);
        let stage = bernoulli_straight_through(&p, u);
        let exposed = stop_gradient(&stage).eq(&scalar(stage::E));
        let never = scalar(self.never());
        AgentState {
            stage,
            infected: exposed.clone(),
            t_infected: where_(&exposed, &scalar(-1.0), &never),
            t_next: where_(&exposed, &scalar(disease::DAYS_EXPOSED), &never),
        }
    }

    /// One simulated day `t` (`i32[]`) with uniforms `u` (`f32[N]`): the new state and the day's
    /// (infections, deaths), both `f32[]`.
    fn day(
        &self,
        s: AgentState,
        t: &Tensor,
        u: &Tensor,
        params: &CovidParams,
    ) -> (AgentState, (Tensor, Tensor)) {
        let tf = t.astype(DType::F32);
        let week = t / 7;
        let (r0, mortality) = (params.r0.take(&week, 0), params.mortality.take(&week, 0));
        // The stage as data: infectiousness and the masks never carry a tangent (as the reference).
        let sd = stop_gradient(&s.stage);
        let is = |v: f32| sd.eq(&scalar(v));
        let contacts = Contacts { scale: &self.scale, src: &self.src, dst: &self.dst, pmf: &self.pmf };
        let newly_exposed = contacts.new_exposures(&s, &tf, &r0, u, &disease::INFECTIOUSNESS, stage::S);

        // Targets: agents leaving I today die with probability `mortality` (an expected value).
        let due = s.t_next.le(&tf);
        let leaving = is(stage::I).logical_and(&due);
        let removed = &(&s.stage * &f32s(&leaving)) / stage::I as f64;
        let outputs = (newly_exposed.sum(All), &mortality * &removed.sum(All));

        // Progression E → I → R on schedule (M is never entered; S handled by `newly_exposed`).
        let when_due = |to: f32, stay: f32| where_(&due, &scalar(to), &scalar(stay));
        let progressed = match self.form {
            UpdateForm::Reference => {
                &(&(&f32s(&is(stage::R)) * stage::R as f64) + &(&f32s(&is(stage::M)) * stage::M as f64))
                    + &(&(&f32s(&is(stage::E)) * &when_due(stage::I, stage::E))
                        + &(&f32s(&is(stage::I)) * &when_due(stage::R, stage::I)))
            }
            UpdateForm::KeepGrad => {
                let kept = &f32s(&is(stage::R)) + &f32s(&is(stage::M));
                let moved = &(&f32s(&is(stage::E)) * &when_due(stage::I / stage::E, 1.0))
                    + &(&f32s(&is(stage::I)) * &when_due(stage::R / stage::I, 1.0));
                &s.stage * &(&kept + &moved)
            }
        };
        let on_time = s.t_next.eq(&tf);
        let t_next = where_(&is(stage::I).logical_and(&on_time), &scalar(self.never()), &s.t_next);
        let t_next =
            where_(&is(stage::E).logical_and(&on_time), &(&tf + disease::DAYS_INFECTED as f64), &t_next);
        let t_next = &(&newly_exposed * &(&tf + (1.0 + disease::DAYS_EXPOSED as f64)))
            + &(&(1.0 - &newly_exposed) * &t_next);
        let stage = &(&newly_exposed * stage::E as f64) + &progressed;
        let exposed_now = stop_gradient(&newly_exposed).gt(&scalar(0.5));
        let state = AgentState {
            stage,
            infected: s.infected.logical_or(&exposed_now).logical_and(&leaving.logical_not()),
            t_infected: where_(&exposed_now, &tf, &s.t_infected),
            t_next,
        };
        (state, outputs)
    }
}
