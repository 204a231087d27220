//! Brax's `inverted_pendulum` (`brax/envs/inverted_pendulum.py`): a cart on a slide rail with a
//! hinged pole; balance the pole.

use super::{Env, EnvError, EnvState, Info, Pipeline, PipelineEnv, where_scalar};
use kiln::prelude::*;
use kiln::random;

/// Brax's `inverted_pendulum.xml` (Apache-2.0; see `data/mjcf/README.md`).
const MJCF: &str = include_str!("../../../data/mjcf/inverted_pendulum.xml");

/// The cart-pole of Brax's `InvertedPendulum`, restated with kiln ops:
/// - pipeline: spring (and, later, positional) at 0.005 s × 4 substeps (env dt 0.02 s);
/// - reset: `q = init_q + U(−0.01, 0.01)`, `qd = U(−0.01, 0.01)` (keys 1 and 2 of
///   `split(key, 3)`, as Brax);
/// - step: the action in `[−1, 1]` is mapped affinely onto the motor's `ctrlrange` (`[−3, 3]`):
///   `(a + 1)(max − min)/2 + min`;
/// - observation `[4]`: `(q, qd)` = cart position, pole angle, their velocities;
/// - reward: a constant 1 per step; `done` = 1 when `|pole angle| > 0.2` rad.
///
/// No metrics (Brax's `info['time_out']` is not kept: it equals `done`).
#[derive(Clone, Debug)]
pub struct InvertedPendulum {
    /// The pipeline environment (model, pipeline, `n_frames`, `init_q`).
    pub base: PipelineEnv,
}

impl InvertedPendulum {
    /// Brax's default inverted pendulum on `pipeline` in `dtype` (f32 or f64).
    /// Errors: [`EnvError`] when the model does not load.
    pub fn new(pipeline: Pipeline, dtype: DType) -> Result<InvertedPendulum, EnvError> {
        let (timestep, n_frames) = match pipeline {
            // Brax sets the same substeps for spring and positional.
            Pipeline::Spring | Pipeline::Positional => (0.005, 4),
        };
        let base =
            PipelineEnv::from_mjcf("inverted_pendulum.xml", MJCF, pipeline, dtype, timestep, n_frames)?;
        Ok(InvertedPendulum { base })
    }

    /// Brax `_get_obs`: `concat(q, qd)`.
    pub fn observe(state: &super::State) -> Tensor {
        Tensor::concatenate(&[state.q.clone(), state.qd.clone()], 0)
    }

    /// The initial pipeline state from `key` (Brax's reset noise).
    pub fn reset_pipeline(&self, key: &Tensor) -> super::State {
        let keys = random::split(key, 3);
        let dtype = self.base.model.dtype();
        let (nq, nv) = (self.base.init_q.len(), self.base.nv());
        let q = &self.base.init_q() + &random::uniform(&keys.index(1), &[nq], dtype, -0.01, 0.01);
        let qd = random::uniform(&keys.index(2), &[nv], dtype, -0.01, 0.01);
        self.base.pipeline_init(&q, &qd)
    }

    /// The action in `[−1, 1]` mapped onto the control range (Brax's rescaling in `step`).
    pub fn controls(&self, action: &Tensor) -> Tensor {
        let (lo, hi) = (&self.base.model.ctrl_lo, &self.base.model.ctrl_hi);
        &(&(action + 1.0) * &(hi - lo)) * 0.5 + lo
    }
}

impl Env for InvertedPendulum {
    #[track_caller]
    fn reset(&self, key: &Tensor) -> EnvState {
        let key = &super::expect_key("InvertedPendulum::reset", key);
        let pipeline_state = self.reset_pipeline(key);
        let obs = Self::observe(&pipeline_state);
        EnvState {
            pipeline_state,
            obs,
            reward: self.base.scalar(0.0),
            done: self.base.scalar(0.0),
            metrics: Vec::new(),
            info: Info::default(),
        }
    }

    #[track_caller]
    fn step(&self, state: &EnvState, action: &Tensor) -> EnvState {
        let action = &super::expect_action("InvertedPendulum::step", self, action);
        let pipeline_state = self.base.pipeline_step(&state.pipeline_state, &self.controls(action));
        let obs = Self::observe(&pipeline_state);
        let angle = obs.index(1).abs();
        let done = where_scalar(&angle.gt(&self.base.scalar(0.2)), 1.0, &self.base.scalar(0.0));
        EnvState {
            pipeline_state,
            obs,
            reward: self.base.scalar(1.0),
            done,
            metrics: state.metrics.clone(),
            info: state.info.clone(),
        }
    }

    fn observation_size(&self) -> usize {
        self.base.init_q.len() + self.base.nv()
    }

    fn action_size(&self) -> usize {
        self.base.nu()
    }

    fn metric_names(&self) -> Vec<&'static str> {
        Vec::new()
    }

    fn dt(&self) -> f64 {
        self.base.dt()
    }

    fn dtype(&self) -> DType {
        self.base.model.dtype()
    }

    fn n_frames(&self) -> usize {
        self.base.n_frames
    }
}
