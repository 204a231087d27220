//! Brax's `ant` (`brax/envs/ant.py`): a four-legged body on a floor; run in +x.

use super::{Env, EnvError, EnvState, Info, Pipeline, PipelineEnv, where_scalar};
use kiln::prelude::*;
use kiln::random;

/// Brax's `ant.xml` (Apache-2.0; see `data/mjcf/README.md`).
const MJCF: &str = include_str!("../../../data/mjcf/ant.xml");

/// Brax's `Ant` with its default parameters, restated with kiln ops:
/// - pipeline: spring or positional at 0.005 s × 10 substeps (env dt 0.05 s); gear 150 from the
///   file for spring, 200 for positional (Brax's `ant.py` override);
/// - reset: `q = init_q + U(−0.1, 0.1)` on all 15 coordinates (the root quaternion too, not
///   renormalized, as Brax), `qd = 0.1 · N(0, 1)` (keys 1 and 2 of `split(key, 3)`);
/// - step: actions in `[−1, 1]` go to the motors unscaled;
/// - reward = `forward + healthy − ctrl`: `forward` = torso x velocity over the env step
///   (`Δx/dt`), `healthy` = 1 (Brax terminates when unhealthy, so the bonus is constant),
///   `ctrl = 0.5 Σ a²`; contact cost 0 (`use_contact_forces` is off in Brax);
/// - `done` = 1 when the torso height leaves `healthy_z_range` = `[0.2, 1.0]` m (strict
///   comparisons, so NaN counts as healthy, as in Brax);
/// - observation `[27]`: `q[2..]` (the root x, y excluded) and `qd`.
///
/// Metrics (Brax's names and order): see [`Ant::METRICS`].
#[derive(Clone, Debug)]
pub struct Ant {
    /// The pipeline environment.
    pub base: PipelineEnv,
    /// Weight of `Σ a²` in the reward (0.5).
    pub ctrl_cost_weight: f64,
    /// Bonus per step while healthy (1).
    pub healthy_reward: f64,
    /// Torso heights (m) outside which the ant is unhealthy (`[0.2, 1.0]`).
    pub healthy_z_range: (f64, f64),
    /// Half-width of the reset noise (0.1).
    pub reset_noise_scale: f64,
}

impl Ant {
    /// Brax's metric names, in the order of [`EnvState::metrics`].
    pub const METRICS: [&'static str; 10] = [
        "reward_forward",
        "reward_survive",
        "reward_ctrl",
        "reward_contact",
        "x_position",
        "y_position",
        "distance_from_origin",
        "x_velocity",
        "y_velocity",
        "forward_reward",
    ];

    /// Brax's default ant on `pipeline` in `dtype`. Errors: [`EnvError`].
    pub fn new(pipeline: Pipeline, dtype: DType) -> Result<Ant, EnvError> {
        let (timestep, n_frames) = match pipeline {
            // Brax sets the same substeps for spring and positional.
            Pipeline::Spring | Pipeline::Positional => (0.005, 10),
        };
        let mut base = PipelineEnv::from_mjcf("ant.xml", MJCF, pipeline, dtype, timestep, n_frames)?;
        if pipeline == Pipeline::Positional {
            let nu = base.model.gear.shape().dims()[0];
            base.model.gear = Tensor::full(&[nu], 200.0f64).astype(dtype);
        }
        Ok(Ant {
            base,
            ctrl_cost_weight: 0.5,
            healthy_reward: 1.0,
            healthy_z_range: (0.2, 1.0),
            reset_noise_scale: 0.1,
        })
    }

    /// Brax `_get_obs`: `concat(q[2..], qd)`.
    pub fn observe(state: &super::State) -> Tensor {
        Tensor::concatenate(&[state.q.slice_axis(0, Some(2), None, 1), state.qd.clone()], 0)
    }
}

impl Env for Ant {
    #[track_caller]
    fn reset(&self, key: &Tensor) -> EnvState {
        let key = &super::expect_key("Ant::reset", key);
        let keys = random::split(key, 3);
        let dtype = self.base.model.dtype();
        let (nq, nv) = (self.base.init_q.len(), self.base.nv());
        let s = self.reset_noise_scale;
        let q = &self.base.init_q() + &random::uniform(&keys.index(1), &[nq], dtype, -s, s);
        let qd = &random::normal(&keys.index(2), &[nv], dtype) * s;
        let pipeline_state = self.base.pipeline_init(&q, &qd);
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
        let action = &super::expect_action("Ant::step", self, action);
        let ps0 = &state.pipeline_state;
        let ps = self.base.pipeline_step(ps0, action);
        let torso = ps.x.pos.index(0);
        let velocity = &(&torso - &ps0.x.pos.index(0)) / self.base.dt();
        let forward = velocity.index(0);
        let z = torso.index(2);
        let (min_z, max_z) = self.healthy_z_range;
        let one = self.base.scalar(1.0);
        let healthy = where_scalar(&z.lt(&self.base.scalar(min_z)), 0.0, &one);
        let healthy = where_scalar(&z.gt(&self.base.scalar(max_z)), 0.0, &healthy);
        let survive = self.base.scalar(self.healthy_reward);
        let ctrl_cost = &action.square().sum(All) * self.ctrl_cost_weight;
        let contact_cost = self.base.scalar(0.0);
        let reward = &(&(&forward + &survive) - &ctrl_cost) - &contact_cost;
        let done = &one - &healthy;
        let metrics = vec![
            forward.clone(),
            survive,
            -&ctrl_cost,
            -&contact_cost,
            torso.index(0),
            torso.index(1),
            torso.square().sum(All).sqrt(),
            velocity.index(0),
            velocity.index(1),
            forward,
        ];
        EnvState {
            obs: Self::observe(&ps),
            pipeline_state: ps,
            reward,
            done,
            metrics,
            info: state.info.clone(),
        }
    }

    fn observation_size(&self) -> usize {
        self.base.init_q.len() - 2 + self.base.nv()
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
