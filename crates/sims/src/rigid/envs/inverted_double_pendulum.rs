//! Brax's `inverted_double_pendulum` (`brax/envs/inverted_double_pendulum.py`): a cart with two
//! stacked hinged poles; keep the tip of the second pole up.

use super::{Env, EnvError, EnvState, Info, Pipeline, PipelineEnv, where_scalar};
use crate::rigid::quat::rotate;
use kiln::prelude::*;
use kiln::random;

/// Brax's `inverted_double_pendulum.xml` (Apache-2.0; see `data/mjcf/README.md`).
const MJCF: &str = include_str!("../../../data/mjcf/inverted_double_pendulum.xml");

/// Brax's `InvertedDoublePendulum`, restated with kiln ops:
/// - pipeline: spring at 0.005 s × 4 substeps (env dt 0.02 s);
/// - reset: `q = init_q + U(−0.01, 0.01)`, `qd = 0.01 · N(0, 1)` (keys 1 and 2 of `split(key, 3)`);
/// - step: the action goes to the motor unscaled (Brax does not rescale here; `ctrlrange` clips);
/// - the tip is the point `(0, 0, 0.6)` of the second pole's frame (link 2); with `(x, _, y)` its
///   world position (Brax calls the height `y`): reward
///   `10 (1 − done) − (0.01 x² + (y − 2)²) − (10⁻³ ω₁² + 5·10⁻³ ω₂²)`, `ω = qd[1..3]`;
///   `done` = 1 when `y ≤ 1`;
/// - observation `[8]`: `q[0]`, `sin q[1..]`, `cos q[1..]`, `clip(qd, −10, 10)`.
#[derive(Clone, Debug)]
pub struct InvertedDoublePendulum {
    /// The pipeline environment.
    pub base: PipelineEnv,
}

impl InvertedDoublePendulum {
    /// Brax's default double pendulum on `pipeline` in `dtype`. Errors: [`EnvError`].
    pub fn new(pipeline: Pipeline, dtype: DType) -> Result<InvertedDoublePendulum, EnvError> {
        let (timestep, n_frames) = match pipeline {
            // Brax sets the same substeps for spring and positional.
            Pipeline::Spring | Pipeline::Positional => (0.005, 4),
        };
        let base = PipelineEnv::from_mjcf(
            "inverted_double_pendulum.xml",
            MJCF,
            pipeline,
            dtype,
            timestep,
            n_frames,
        )?;
        Ok(InvertedDoublePendulum { base })
    }

    /// Brax `_get_obs`.
    pub fn observe(state: &super::State) -> Tensor {
        let angles = state.q.slice_axis(0, Some(1), None, 1);
        Tensor::concatenate(
            &[
                state.q.slice_axis(0, Some(0), Some(1), 1),
                angles.sin(),
                angles.cos(),
                state.qd.clip(-10.0, 10.0),
            ],
            0,
        )
    }

    /// World position `[3]` of the second pole's tip.
    pub fn tip(state: &super::State) -> Tensor {
        let offset = Tensor::from_vec(&[3], vec![0.0, 0.0, 0.6]).astype(state.q.dtype());
        &state.x.pos.index(2) + &rotate(&offset, &state.x.rot.index(2))
    }
}

impl Env for InvertedDoublePendulum {
    #[track_caller]
    fn reset(&self, key: &Tensor) -> EnvState {
        let key = &super::expect_key("InvertedDoublePendulum::reset", key);
        let keys = random::split(key, 3);
        let dtype = self.base.model.dtype();
        let (nq, nv) = (self.base.init_q.len(), self.base.nv());
        let q = &self.base.init_q() + &random::uniform(&keys.index(1), &[nq], dtype, -0.01, 0.01);
        let qd = &random::normal(&keys.index(2), &[nv], dtype) * 0.01;
        let pipeline_state = self.base.pipeline_init(&q, &qd);
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
        let action = &super::expect_action("InvertedDoublePendulum::step", self, action);
        let ps = self.base.pipeline_step(&state.pipeline_state, action);
        let tip = Self::tip(&ps);
        let (x, y) = (tip.index(0), tip.index(2));
        let (v1, v2) = (ps.qd.index(1), ps.qd.index(2));
        let dist_penalty = &(&x.square() * 0.01) + &(&y - 2.0).square();
        let vel_penalty = &(&v1.square() * 1e-3) + &(&v2.square() * 5e-3);
        let done = where_scalar(&y.le(&self.base.scalar(1.0)), 1.0, &self.base.scalar(0.0));
        let reward = &(&(&(1.0 - &done) * 10.0) - &dist_penalty) - &vel_penalty;
        EnvState {
            obs: Self::observe(&ps),
            pipeline_state: ps,
            reward,
            done,
            metrics: state.metrics.clone(),
            info: state.info.clone(),
        }
    }

    fn observation_size(&self) -> usize {
        1 + 2 * (self.base.init_q.len() - 1) + self.base.nv()
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
