//! The GradABM influenza (SIRS) agent model: the same day as COVID (gather of infectiousness over
//! the edges, `segment_sum`, `p = 1 − exp(−λ)`, straight-through draw, see
//! [`crate::epi::model`]) with flu's constants ([`crate::epi::disease::flu`]) and the S → I → R → S
//! progression; the target is ILI, `100 × newly infected / N` per day.
//!
//! Faithful to the published `SIRSProgression` (AdityaLab/GradABM `abm_model.py`), including how
//! its times behave: an agent infected on day `t` is due at `t + 1 + 3.5`; it is infectious on days
//! `t + 1 ..= t + 5`, recovered (R) after day `t + 5`, and — because the R → S delay of 2000 days is
//! only set where `next_time == day`, which `t + 4.5` never equals — susceptible again after day
//! `t + 6`, so it can be reinfected from day `t + 7`. Initial infections are I since day −1, due at
//! 3.5: R after day 4, S after day 5. (`anchor-gradabm.md` §1.4 reads the 2000 days as "effectively
//! SIR"; the code does not do that.)
//!
//! ILI comes straight from the draws, so R0 has a gradient in both update forms; the initial % has
//! none in either (new infections depend on the stage only through the detached susceptible mask
//! and infectiousness, as in the reference).
//!
//! ```
//! use kiln::prelude::*;
//! use kiln_sims::epi::{FluModel, FluParams, Population, UpdateForm};
//! let pop = Population::synthetic(500, 1);
//! let model = FluModel::new(&pop, 14, UpdateForm::Reference);
//! let params = FluParams::constant(14, 1.3, 5.0);
//! let daily = jit(|(m, p, k): (FluModel, FluParams, Tensor)| m.simulate(&p, &k))
//!     .call(&(model, params, kiln::random::key(0u32)))?;
//! assert_eq!(daily.ili.shape().dims(), &[14]);
//! # Ok::<(), kiln::Error>(())
//! ```

use super::disease::flu::{self, stage};
use super::model::{AgentState, Contacts, UpdateForm, bernoulli_straight_through, f32s, scalar};
use super::params::FluParams;
use super::population::Population;
use kiln::lax::stop_gradient;
use kiln::prelude::*;
use kiln::random;

/// The static inputs of a flu simulation, as tensors (a pytree, like [`crate::epi::CovidModel`]).
#[derive(Tree, Clone, Debug)]
pub struct FluModel {
    /// `f32[N]`: flu susceptibility of the agent's age group / its mean contacts `Ī`.
    pub scale: Tensor,
    /// `i32[E]`: source agent of each directed edge, sorted by destination.
    pub src: Tensor,
    /// `i32[E]`: destination agent of each directed edge, non-decreasing.
    pub dst: Tensor,
    /// `f32[days + 10]`: the discretized Gamma(mean 7.5, sd 2.14) infectiousness by days since
    /// infection.
    pub pmf: Tensor,
    /// Number of simulated days.
    #[tree(skip)]
    pub days: usize,
    /// How the stage update is written.
    #[tree(skip)]
    pub form: UpdateForm,
}

/// The simulated daily flu targets, each `f32[days]`.
#[derive(Tree, Clone, Debug)]
pub struct FluDaily {
    /// Newly infected agents per day.
    pub infections: Tensor,
    /// Influenza-like illness: `100 × infections / N`, percent.
    pub ili: Tensor,
}

impl FluDaily {
    /// Weekly ILI, `f32[days / 7]`: the daily ILI summed over each full week (days 0–6, 7–13, …), as
    /// the reference sums it for the weekly target; a trailing partial week is dropped.
    pub fn weekly_ili(&self) -> Tensor {
        let weeks = self.ili.shape().dims()[0] / 7;
        self.ili.slice_axis(0, Some(0), Some(weeks as i64 * 7), 1).reshape(&[weeks as i64, 7]).sum(1)
    }
}

impl FluModel {
    /// The flu model of `population` for `days` days.
    ///
    /// # Errors
    /// As [`crate::epi::CovidModel::new`]: a population [`Population::check`] refuses (no agents,
    /// whose ILI would be NaN; ages and network of different agents; an age group above 7) or zero
    /// days is reported as a kiln error at the caller's line.
    #[track_caller]
    pub fn new(population: &Population, days: usize, form: UpdateForm) -> FluModel {
        super::model::check_inputs("epi::FluModel::new", population, days);
        let n = population.num_agents();
        let sus = flu::susceptibility();
        let scale: Vec<f32> = (population.ages.iter().map(|&a| a.min(7)))
            .map(|a| sus[usize::from(a)] / super::disease::mean_contacts(a))
            .collect();
        let net = &population.network;
        let (mean, sd) = flu::GAMMA_MEAN_SD;
        FluModel {
            scale: Tensor::from_vec(&[n], scale),
            src: Tensor::from_vec(&[net.num_edges()], net.src().to_vec()),
            dst: Tensor::from_vec(&[net.num_edges()], net.dst().to_vec()),
            pmf: Tensor::from_vec(&[days + 10], super::disease::gamma_pmf(days + 10, mean, sd)),
            days,
            form,
        }
    }

    /// Number of agents.
    pub fn num_agents(&self) -> usize {
        self.scale.shape().dims().first().copied().unwrap_or(0)
    }

    fn never(&self) -> f32 {
        (self.days + 1) as f32
    }

    /// Runs `days` days drawing the noise from `key` (`u32[2]`), as
    /// [`crate::epi::CovidModel::simulate`] does.
    ///
    /// Shape errors in `params` and a model of 0 days are reported as kiln errors at the caller's
    /// line.
    #[track_caller]
    pub fn simulate(&self, params: &FluParams, key: &Tensor) -> FluDaily {
        self.check(params, None);
        let n = self.num_agents();
        let [k_init, k_days] = random::split2(key);
        let uniform = |k: &Tensor| random::uniform(k, &[n], DType::F32, f32::MIN_POSITIVE, 1.0f32);
        let init = self.initial_state(params, &uniform(&k_init));
        let days = Tensor::arange(self.days, DType::I32);
        let (_, (infections, ili)) = scan(
            |s: AgentState, t: Tensor| {
                let u = uniform(&random::fold_in_tensor(&k_days, &t));
                let (s, (inf, ili, _)) = self.day(s, &t, &u, params);
                (s, (inf, ili))
            },
            init,
            days,
        );
        FluDaily { infections, ili }
    }

    /// Runs `days` days with the noise given (`uniforms`: `f32[days + 1, N]`, row 0 for the initial
    /// infections, row `t + 1` for day `t`), returning the targets and every day's end state
    /// (each field `[days, N]`).
    #[track_caller]
    pub fn trajectory_with_uniforms(&self, params: &FluParams, uniforms: &Tensor) -> (FluDaily, AgentState) {
        self.check(params, Some(uniforms));
        let init = self.initial_state(params, &uniforms.index(0));
        let days = Tensor::arange(self.days, DType::I32);
        let rest = uniforms.slice_axis(0, Some(1), None, 1);
        let (_, (infections, ili, states)) =
            scan(|s: AgentState, (t, u): (Tensor, Tensor)| self.day(s, &t, &u, params), init, (days, rest));
        (FluDaily { infections, ili }, states)
    }

    /// As [`FluModel::trajectory_with_uniforms`], the targets only.
    #[track_caller]
    pub fn simulate_with_uniforms(&self, params: &FluParams, uniforms: &Tensor) -> FluDaily {
        self.trajectory_with_uniforms(params, uniforms).0
    }

    #[track_caller]
    fn check(&self, params: &FluParams, uniforms: Option<&Tensor>) {
        if self.days == 0 {
            let msg = "the model has 0 days: days must be at least 1".to_string();
            kiln_trace::report_error("epi::flu::simulate", &[], msg);
        }
        let weeks = self.days.div_ceil(7);
        let f32_of = |t: &Tensor, dims: &[usize]| t.dtype() == DType::F32 && t.shape().dims() == dims;
        if !(f32_of(&params.r0, &[weeks]) && f32_of(&params.initial_pct, &[])) {
            let msg = format!(
                "flu parameters for {} days must be r0 f32[{weeks}], initial_pct f32[]; got {}, {}",
                self.days,
                params.r0.ty(),
                params.initial_pct.ty()
            );
            kiln_trace::report_error("epi::flu::simulate", &[&params.r0, &params.initial_pct], msg);
        }
        if let Some(u) = uniforms
            && !f32_of(u, &[self.days + 1, self.num_agents()])
        {
            let msg =
                format!("uniforms must be f32[{}, {}], got {}", self.days + 1, self.num_agents(), u.ty());
            kiln_trace::report_error("epi::flu::simulate_with_uniforms", &[u], msg);
        }
    }

    /// Day 0: each agent is infected (I) with probability `initial_pct / 100` (straight-through),
    /// infected since day −1 and due at 3.5 (the reference's `update_initial_times`).
    fn initial_state(&self, params: &FluParams, u: &Tensor) -> AgentState {
        let n = self.num_agents();
        let p = (&params.initial_pct / 100.0).broadcast_to(&[n]);
        let stage = bernoulli_straight_through(&p, u);
        let infected = stop_gradient(&stage).eq(&scalar(stage::I));
        let never = scalar(self.never());
        AgentState {
            stage,
            t_infected: where_(&infected, &scalar(-1.0), &never),
            t_next: where_(&infected, &scalar(flu::DAYS_INFECTED), &never),
            infected,
        }
    }

    /// One day `t` (`i32[]`) with uniforms `u` (`f32[N]`): the new state, and the day's (infections,
    /// ILI, new state) — the state again so that [`FluModel::trajectory_with_uniforms`] can stack it.
    fn day(
        &self,
        s: AgentState,
        t: &Tensor,
        u: &Tensor,
        params: &FluParams,
    ) -> (AgentState, (Tensor, Tensor, AgentState)) {
        let n = self.num_agents();
        let tf = t.astype(DType::F32);
        let r0 = params.r0.take(&(t / 7), 0);
        let sd = stop_gradient(&s.stage);
        let is = |v: f32| sd.eq(&scalar(v));
        let contacts = Contacts { scale: &self.scale, src: &self.src, dst: &self.dst, pmf: &self.pmf };
        let newly = contacts.new_exposures(&s, &tf, &r0, u, &flu::INFECTIOUSNESS, stage::S);
        let infections = newly.sum(All);
        let ili = &infections * (100.0 / n as f64);

        // Progression I → R → S when due (S stays S; newly infected handled below).
        let due = s.t_next.le(&tf);
        let leaving = is(stage::I).logical_and(&due);
        let when_due = |to: f32, stay: f32| where_(&due, &scalar(to), &scalar(stay));
        let progressed = match self.form {
            UpdateForm::Reference => {
                &(&f32s(&is(stage::I)) * &when_due(stage::R, stage::I))
                    + &(&f32s(&is(stage::R)) * &when_due(stage::S, stage::R))
            }
            UpdateForm::KeepGrad => {
                let moved = &(&f32s(&is(stage::I)) * &when_due(stage::R / stage::I, 1.0))
                    + &(&f32s(&is(stage::R)) * &when_due(stage::S / stage::R, 1.0));
                &s.stage * &moved
            }
        };
        // Times: only where `t_next == t` exactly (as the reference; see the module docs).
        let on_time = s.t_next.eq(&tf);
        let t_next =
            where_(&is(stage::I).logical_and(&on_time), &(&tf + flu::DAYS_RECOVERED as f64), &s.t_next);
        let t_next = where_(&is(stage::R).logical_and(&on_time), &scalar(self.never()), &t_next);
        let t_next = &(&newly * &(&tf + (1.0 + flu::DAYS_INFECTED as f64))) + &(&(1.0 - &newly) * &t_next);
        let infected_now = stop_gradient(&newly).gt(&scalar(0.5));
        let state = AgentState {
            stage: &(&newly * stage::I as f64) + &progressed,
            infected: s.infected.logical_or(&infected_now).logical_and(&leaving.logical_not()),
            t_infected: where_(&infected_now, &tf, &s.t_infected),
            t_next,
        };
        (state.clone(), (infections, ili, state))
    }
}
