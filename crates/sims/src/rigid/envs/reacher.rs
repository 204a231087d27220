//! Brax's `reacher` (`brax/envs/reacher.py`, brax 0.14.2): a two-link planar arm whose fingertip
//! should reach a target placed at random in a disk; the target body sits on two stacked slide
//! joints (Brax link type `2`, [`crate::rigid::SlideStack`]).

use super::{Env, EnvError, EnvState, Info, Pipeline, PipelineEnv};
use crate::rigid::quat::{rotate, safe_norm};
use crate::rigid::state::Motion;
use kiln::prelude::*;
use kiln::random;

/// Brax's `reacher.xml` (Apache-2.0; see `data/mjcf/README.md`).
const MJCF: &str = include_str!("../../../data/mjcf/reacher.xml");

/// Brax's `Reacher`, restated with kiln ops:
/// - pipeline: spring or positional at 0.005 s × 4 substeps (env dt 0.02 s), with the motors'
///   gear lowered from the file's 200 to 25, as Brax does for these backends;
/// - links: 0 the upper arm, 1 the forearm (the fingertip body is merged into it), 2 the target;
///   `q = [shoulder, elbow, target x, target y]`;
/// - reset (`key` split in 3 as Brax: `[k₀, k₁, k₂]`): `q = init_q + U(−0.1, 0.1)` (from `k₁`),
///   `qd = U(−0.005, 0.005)` (from `k₂`); then the target from `k₀` split again in 3:
///   radius `0.2·U(0, 1)` (key 1), angle `2π·U(0, 1)` (key 2), so it lies in the disk of radius
///   0.2 about the origin; the target's `qd` is zeroed;
/// - step: the action (`[2]`, ctrl units; `ctrlrange` `[−1, 1]` clips) drives the motors unscaled;
/// - observation `[11]`: `cos q[0..2]`, `sin q[0..2]`, `q[2..4]` (target), the fingertip velocity's
///   x, y (Brax: `Transform(pos=(0.11, 0, 0)).do(xd[1])`, the world-frame offset, as Brax writes
///   it), and `tip − target` (3), where the tip is the point `(0.11, 0, 0)` of the forearm's frame;
/// - reward `−|tip − target| − Σ action²` (metrics `reward_dist`, `reward_ctrl`); never done.
#[derive(Clone, Debug)]
pub struct Reacher {
    /// The pipeline environment.
    pub base: PipelineEnv,
}

impl Reacher {
    /// Brax's metric names, in the order of [`EnvState::metrics`].
    pub const METRICS: [&'static str; 2] = ["reward_dist", "reward_ctrl"];

    /// Brax's default reacher on `pipeline` in `dtype` (f32 or f64). Errors: [`EnvError`].
    pub fn new(pipeline: Pipeline, dtype: DType) -> Result<Reacher, EnvError> {
        let (timestep, n_frames, gear) = match pipeline {
            Pipeline::Spring | Pipeline::Positional => (0.005, 4, 25.0),
        };
        let mut base = PipelineEnv::from_mjcf("reacher.xml", MJCF, pipeline, dtype, timestep, n_frames)?;
        let nu = base.nu();
        base.model.gear = base.model.constant(&[nu], &vec![gear; nu]);
        Ok(Reacher { base })
    }

    /// The fingertip offset in the forearm's frame (m).
    fn tip_offset(dtype: DType) -> Tensor {
        Tensor::from_vec(&[3], vec![0.11, 0.0, 0.0]).astype(dtype)
    }

    /// World position `[3]` of the fingertip.
    pub fn tip(state: &super::State) -> Tensor {
        let offset = Self::tip_offset(state.q.dtype());
        &state.x.pos.index(1) + &rotate(&offset, &state.x.rot.index(1))
    }

    /// Brax `_get_obs` (`[11]`).
    pub fn observe(state: &super::State) -> Tensor {
        let theta = state.q.slice_axis(0, Some(0), Some(2), 1);
        let forearm = Motion { vel: state.xd.vel.index(1), ang: state.xd.ang.index(1) };
        let tip_vel = forearm.translate(&Self::tip_offset(state.q.dtype())).vel;
        let tip_to_target = &Self::tip(state) - &state.x.pos.index(2);
        Tensor::concatenate(
            &[
                theta.cos(),
                theta.sin(),
                state.q.slice_axis(0, Some(2), None, 1),
                tip_vel.slice_axis(0, Some(0), Some(2), 1),
                tip_to_target,
            ],
            0,
        )
    }

    /// Brax `_random_target`: a point `[2]` in the disk of radius 0.2 from `key`.
    pub fn random_target(key: &Tensor, dtype: DType) -> Tensor {
        let keys = random::split(key, 3);
        let dist = &random::uniform(&keys.index(1), &[], dtype, 0.0, 1.0) * 0.2;
        let angle = &random::uniform(&keys.index(2), &[], dtype, 0.0, 1.0) * (2.0 * std::f64::consts::PI);
        Tensor::stack(&[&dist * &angle.cos(), &dist * &angle.sin()], 0)
    }

    /// The initial pipeline state from `key` (Brax's reset noise and random target).
    pub fn reset_pipeline(&self, key: &Tensor) -> super::State {
        let keys = random::split(key, 3);
        let dtype = self.base.model.dtype();
        let (nq, nv) = (self.base.init_q.len(), self.base.nv());
        let q = &self.base.init_q() + &random::uniform(&keys.index(1), &[nq], dtype, -0.1, 0.1);
        let qd = random::uniform(&keys.index(2), &[nv], dtype, -0.005, 0.005);
        let target = Self::random_target(&keys.index(0), dtype);
        let q = Tensor::concatenate(&[q.slice_axis(0, Some(0), Some(2), 1), target], 0);
        let qd = Tensor::concatenate(
            &[qd.slice_axis(0, Some(0), Some(2), 1), self.base.model.constant(&[nv - 2], &vec![0.0; nv - 2])],
            0,
        );
        self.base.pipeline_init(&q, &qd)
    }
}

impl Env for Reacher {
    #[track_caller]
    fn reset(&self, key: &Tensor) -> EnvState {
        let key = &super::expect_key("Reacher::reset", key);
        let pipeline_state = self.reset_pipeline(key);
        let obs = Self::observe(&pipeline_state);
        EnvState {
            pipeline_state,
            obs,
            reward: self.base.scalar(0.0),
            done: self.base.scalar(0.0),
            metrics: vec![self.base.scalar(0.0); Self::METRICS.len()],
            info: Info::default(),
        }
    }

    #[track_caller]
    fn step(&self, state: &EnvState, action: &Tensor) -> EnvState {
        let action = &super::expect_action("Reacher::step", self, action);
        let ps = self.base.pipeline_step(&state.pipeline_state, action);
        let obs = Self::observe(&ps);
        let tip_to_target = obs.slice_axis(0, Some(8), None, 1);
        let reward_dist = -&safe_norm(&tip_to_target).reshape(&[]);
        let reward_ctrl = -&action.square().sum_all();
        let reward = &reward_dist + &reward_ctrl;
        EnvState {
            pipeline_state: ps,
            obs,
            reward,
            done: state.done.clone(),
            metrics: vec![reward_dist, reward_ctrl],
            info: state.info.clone(),
        }
    }

    fn observation_size(&self) -> usize {
        11
    }

    fn action_size(&self) -> usize {
        self.base.nu()
    }

    fn metric_names(&self) -> Vec<&'static str> {
        Self::METRICS.to_vec()
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
