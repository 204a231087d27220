//! Brax's environment API (`brax/envs/base.py`, brax 0.14) on kiln's rigid pipelines.
//!
//! An environment is a pair of pure functions on pytrees, as in Brax:
//! [`Env::reset`]`(key) -> `[`EnvState`] and [`Env::step`]`(state, action) -> EnvState`, where one
//! env step is `n_frames` pipeline steps under the same action (Brax `PipelineEnv.pipeline_step`, a
//! `scan`). Both are written for **one** environment; batch them with `vmap` (or [`super::wrappers::
//! VmapWrapper`]) and compile with `jit`, e.g. `jit(vmap(|(s, a)| env.step(&s, &a), (0, 0), 0))`.
//!
//! The physics is a parameter: [`Pipeline`] (`Spring` today; `Positional` joins when its pipeline
//! lands). Every pipeline maps (`Model`, [`State`], controls) to the next `State`, so the
//! environments and wrappers do not change with it.
//!
//! Environments (one file each; rewards, observations, reset noise and termination are Brax's):
//! [`InvertedPendulum`], [`InvertedDoublePendulum`], [`Reacher`], [`Ant`].
//!
//! ```
//! use kiln::prelude::*;
//! use kiln_sims::rigid::envs::{Env, InvertedPendulum, Pipeline};
//! let env = InvertedPendulum::new(Pipeline::Spring, DType::F32)?;
//! let s0 = env.reset(&kiln::random::key(0u32));
//! let s1 = env.step(&s0, &Tensor::from_vec(&[1], vec![0.0f32]));
//! assert_eq!(s1.obs.shape().dims(), &[4]);
//! assert_eq!(s1.reward.item::<f32>(), 1.0); // Brax: a constant 1 per step
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod ant;
mod inverted_double_pendulum;
mod inverted_pendulum;
mod reacher;

pub use ant::Ant;
pub use inverted_double_pendulum::InvertedDoublePendulum;
pub use inverted_pendulum::InvertedPendulum;
pub use reacher::Reacher;

use super::model::{Model, ModelError};
use super::state::State;
use super::system::System;
use super::{positional, spring};
use kiln::prelude::*;

/// The physics pipeline an environment steps (Brax's `backend` argument).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Pipeline {
    /// Brax's `spring` pipeline ([`super::spring`]).
    Spring,
    /// Brax's `positional` pipeline ([`super::positional`]).
    Positional,
}

impl Pipeline {
    /// The pipeline's name, as Brax's `backend` string.
    pub fn name(self) -> &'static str {
        match self {
            Pipeline::Spring => "spring",
            Pipeline::Positional => "positional",
        }
    }

    /// Parses a Brax backend name (`spring`, `positional`). Errors: a message listing the supported names.
    pub fn parse(name: &str) -> Result<Pipeline, String> {
        match name {
            "spring" => Ok(Pipeline::Spring),
            "positional" => Ok(Pipeline::Positional),
            other => Err(format!("unknown pipeline `{other}`; kiln supports: spring, positional")),
        }
    }

    /// Brax `pipeline.init`: the state at joint positions `q: [nq]` and velocities `qd: [nv]`.
    pub fn init(self, model: &Model, q: &Tensor, qd: &Tensor) -> State {
        match self {
            Pipeline::Spring => spring::init(model, q, qd),
            Pipeline::Positional => positional::init(model, q, qd),
        }
    }

    /// `n_frames` pipeline steps under the controls `act: [nu]` (Brax `PipelineEnv.pipeline_step`).
    pub fn steps(self, model: &Model, state: &State, act: &Tensor, n_frames: usize) -> State {
        match self {
            Pipeline::Spring => spring::steps(model, state, act, n_frames),
            Pipeline::Positional => positional::steps(model, state, act, n_frames),
        }
    }
}

/// The part of an environment's state the wrappers add (Brax keeps these in `State.info`); `None`
/// until a wrapper sets them. Every present field is a scalar per environment, in the env's dtype.
#[derive(Tree, Clone, Debug, Default)]
pub struct Info {
    /// Env steps taken in the current episode ([`super::wrappers::EpisodeWrapper`]).
    pub steps: Option<Tensor>,
    /// 1 when the episode ended by reaching its length rather than by termination.
    pub truncation: Option<Tensor>,
    /// `done` of the previous step, kept because auto-reset clears `done` (Brax `episode_done`).
    pub episode_done: Option<Tensor>,
    /// Sum of rewards over the current episode (Brax `episode_metrics['sum_reward']`).
    pub sum_reward: Option<Tensor>,
    /// Length of the current episode (Brax `episode_metrics['length']`).
    pub length: Option<Tensor>,
    /// Each metric summed over the current episode, in [`Env::metric_names`] order.
    pub episode_metrics: Option<Vec<Tensor>>,
    /// The state right after reset, which [`super::wrappers::AutoResetWrapper`] restores.
    pub first: Option<FirstState>,
}

/// The pipeline state and observation right after reset (Brax `info['first_pipeline_state']`,
/// `info['first_obs']`).
#[derive(Tree, Clone, Debug)]
pub struct FirstState {
    /// Pipeline state after reset.
    pub pipeline_state: State,
    /// Observation after reset.
    pub obs: Tensor,
}

/// Brax's `envs.base.State` for one environment: the pipeline state, the observation `[obs]`, the
/// last `reward` and `done` (scalars of the env's float dtype; `done` is 0 or 1), named `metrics`
/// (scalars, in [`Env::metric_names`] order) and the wrappers' [`Info`].
#[derive(Tree, Clone, Debug)]
pub struct EnvState {
    /// The physics state.
    pub pipeline_state: State,
    /// Observation `[obs]`.
    pub obs: Tensor,
    /// Reward of the last step (0 after reset).
    pub reward: Tensor,
    /// 1 when the episode has ended, else 0.
    pub done: Tensor,
    /// Per-step metrics (scalars), named by [`Env::metric_names`].
    pub metrics: Vec<Tensor>,
    /// Wrapper bookkeeping.
    pub info: Info,
}

/// Brax's `Env`: pure `reset`/`step` on one environment's [`EnvState`] (batch with `vmap`).
///
/// A key or action of the wrong shape or dtype is a kiln error at the caller's line (recorded in
/// the trace, or a panic in eager code), naming the environment and the expected type.
pub trait Env {
    /// Brax `reset(rng)`: a fresh state from the `u32[2]` key (reset noise drawn with it).
    #[track_caller]
    fn reset(&self, key: &Tensor) -> EnvState;
    /// Brax `step(state, action)`: one env step under `action: [action_size]` of the env's dtype.
    #[track_caller]
    fn step(&self, state: &EnvState, action: &Tensor) -> EnvState;
    /// Length of the observation vector.
    fn observation_size(&self) -> usize;
    /// Length of the action vector.
    fn action_size(&self) -> usize;
    /// Names of the per-step metrics, in the order of [`EnvState::metrics`].
    fn metric_names(&self) -> Vec<&'static str>;
    /// Seconds of simulated time per env step (`timestep × n_frames`).
    fn dt(&self) -> f64;
    /// The float dtype of states, observations, rewards and actions.
    fn dtype(&self) -> DType;
    /// Pipeline steps per env step.
    fn n_frames(&self) -> usize;
}

/// Brax `PipelineEnv`: a model, its pipeline, `n_frames` and the initial joint positions; the
/// environments build on it. `model` is public so that a traced function can substitute a traced
/// model (gradients with respect to masses, stiffness, friction).
#[derive(Clone, Debug)]
pub struct PipelineEnv {
    /// The model (its timestep is the pipeline step).
    pub model: Model,
    /// The physics pipeline.
    pub pipeline: Pipeline,
    /// Pipeline steps per env step.
    pub n_frames: usize,
    /// Brax `sys.init_q`: `<numeric name="init_qpos">` or the MJCF's `qpos0`.
    pub init_q: Vec<f64>,
}

impl PipelineEnv {
    /// Loads `name`'s MJCF `text` and sets the pipeline timestep (s) and `n_frames`.
    /// Errors: the loader's or [`Model::new`]'s, as [`EnvError`].
    pub fn from_mjcf(
        name: &str,
        text: &str,
        pipeline: Pipeline,
        dtype: DType,
        timestep: f64,
        n_frames: usize,
    ) -> Result<PipelineEnv, EnvError> {
        let sys = System::from_mjcf_str(name, text).map_err(|e| EnvError::Mjcf(e.to_string()))?;
        let model = Model::new(&sys, dtype)?.with_timestep(timestep);
        Ok(PipelineEnv { model, pipeline, n_frames, init_q: sys.init_q })
    }

    /// `timestep × n_frames` (s).
    pub fn dt(&self) -> f64 {
        self.model.structure.timestep * self.n_frames as f64
    }

    /// Brax `pipeline_init(q, qd)`.
    pub fn pipeline_init(&self, q: &Tensor, qd: &Tensor) -> State {
        self.pipeline.init(&self.model, q, qd)
    }

    /// Brax `pipeline_step(state, act)`: `n_frames` pipeline steps.
    pub fn pipeline_step(&self, state: &State, act: &Tensor) -> State {
        self.pipeline.steps(&self.model, state, act, self.n_frames)
    }

    /// `init_q` as a tensor `[nq]` of the model's dtype.
    pub fn init_q(&self) -> Tensor {
        self.model.constant(&[self.init_q.len()], &self.init_q)
    }

    /// A scalar of the model's dtype.
    pub fn scalar(&self, v: f64) -> Tensor {
        Tensor::scalar_like(v, self.model.dtype())
    }

    /// Number of DoFs.
    pub fn nv(&self) -> usize {
        self.model.structure.nv
    }

    /// Number of actuators.
    pub fn nu(&self) -> usize {
        self.model.structure.actuator_dofs.len()
    }
}

/// Why an environment cannot be built.
#[derive(Debug, thiserror::Error)]
pub enum EnvError {
    /// The bundled MJCF did not load (the loader's message, naming file, line and element).
    #[error("{0}")]
    Mjcf(String),
    /// The model is not one the pipeline can run.
    #[error(transparent)]
    Model(#[from] ModelError),
}

/// The environments [`make`] builds, by Brax name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EnvName {
    /// `inverted_pendulum`.
    InvertedPendulum,
    /// `inverted_double_pendulum`.
    InvertedDoublePendulum,
    /// `ant`.
    Ant,
    /// `reacher`.
    Reacher,
}

impl EnvName {
    /// Brax's name.
    pub fn name(self) -> &'static str {
        match self {
            EnvName::InvertedPendulum => "inverted_pendulum",
            EnvName::InvertedDoublePendulum => "inverted_double_pendulum",
            EnvName::Ant => "ant",
            EnvName::Reacher => "reacher",
        }
    }

    /// Parses a Brax env name (`ant`, `inverted_pendulum`, `inverted_double_pendulum`, `reacher`; `ip` and
    /// `idp` are accepted too). Errors: a message listing the names.
    pub fn parse(name: &str) -> Result<EnvName, String> {
        match name {
            "inverted_pendulum" | "ip" => Ok(EnvName::InvertedPendulum),
            "inverted_double_pendulum" | "idp" => Ok(EnvName::InvertedDoublePendulum),
            "ant" => Ok(EnvName::Ant),
            "reacher" => Ok(EnvName::Reacher),
            other => Err(format!(
                "unknown env `{other}`; kiln has: ant, inverted_pendulum, inverted_double_pendulum, reacher"
            )),
        }
    }
}

/// Builds a Brax environment by name with its default parameters.
/// Errors: [`EnvError`] if its model does not load for `pipeline`.
pub fn make(name: EnvName, pipeline: Pipeline, dtype: DType) -> Result<Box<dyn Env>, EnvError> {
    Ok(match name {
        EnvName::InvertedPendulum => Box::new(InvertedPendulum::new(pipeline, dtype)?),
        EnvName::InvertedDoublePendulum => Box::new(InvertedDoublePendulum::new(pipeline, dtype)?),
        EnvName::Ant => Box::new(Ant::new(pipeline, dtype)?),
        EnvName::Reacher => Box::new(Reacher::new(pipeline, dtype)?),
    })
}

/// `x` when it has `dtype` and `dims`; otherwise reports a kiln error of `op` at the caller's line
/// (a panic in eager code) and returns a stand-in of the expected type, so a trace can go on to its
/// end (its first error is the one reported).
#[track_caller]
pub(crate) fn expect_type(op: &str, what: &str, x: &Tensor, dtype: DType, dims: &[usize]) -> Tensor {
    if x.dtype() == dtype && x.shape().dims() == dims {
        return x.clone();
    }
    let expected = kiln::ir::TensorType::new(dtype, dims);
    kiln_trace::report_error(op, &[x], format!("{what} must be {expected}"));
    kiln_trace::stand_in(&expected)
}

/// [`expect_type`] for a reset key: `u32[2]`.
#[track_caller]
pub(crate) fn expect_key(op: &str, key: &Tensor) -> Tensor {
    expect_type(op, "the key", key, DType::U32, &[2])
}

/// [`expect_type`] for one environment's action: `[action_size]` of the env's dtype.
#[track_caller]
pub(crate) fn expect_action(op: &str, env: &impl Env, action: &Tensor) -> Tensor {
    expect_type(op, "the action", action, env.dtype(), &[env.action_size()])
}

/// `jnp.where(c, a, b)` for scalars of `like`'s dtype.
pub(crate) fn where_scalar(c: &Tensor, a: f64, b: &Tensor) -> Tensor {
    where_(c, &Tensor::scalar_like(a, b.dtype()), b)
}
