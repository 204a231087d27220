//! Brax's training wrappers (`brax/envs/wrappers/training.py`), restated with kiln ops:
//! [`EpisodeWrapper`] (step count, truncation at the episode length, action repeat, episode sums),
//! [`AutoResetWrapper`] (branch-free reset to the episode's first state) and [`VmapWrapper`] (a batch
//! of environments). [`wrap`] composes them as Brax's `training.wrap` does for PPO/APG.
//!
//! The episode and auto-reset wrappers act on **one** environment, like the envs themselves; the
//! batch comes from `vmap` (so `done` is a scalar here and `where(done, first, state)` needs no
//! reshaping, where Brax's batched version reshapes `done` per leaf).

use super::envs::{Env, EnvState, FirstState, expect_key, expect_type};
use kiln::prelude::*;
use kiln::random;

/// Brax `EpisodeWrapper`: counts steps, ends the episode (`done = 1`) after `episode_length` env
/// steps, marking `info.truncation = 1` when it ended that way rather than by termination, repeats
/// each action `action_repeat` times (summing the rewards), and keeps the episode's reward sum,
/// length and metric sums in [`super::envs::Info`] (reset when the previous step was `done`).
#[derive(Clone, Debug)]
pub struct EpisodeWrapper<E> {
    /// The wrapped environment.
    pub env: E,
    /// Env steps per episode.
    pub episode_length: usize,
    /// Times each action is applied per wrapper step.
    pub action_repeat: usize,
}

impl<E: Env> EpisodeWrapper<E> {
    /// Wraps `env`. `action_repeat` must be ≥ 1 (0 is treated as 1).
    pub fn new(env: E, episode_length: usize, action_repeat: usize) -> EpisodeWrapper<E> {
        EpisodeWrapper { env, episode_length, action_repeat: action_repeat.max(1) }
    }
}

impl<E: Env> Env for EpisodeWrapper<E> {
    fn reset(&self, key: &Tensor) -> EnvState {
        let mut state = self.env.reset(key);
        let zero = state.reward.zeros_like();
        state.info.steps = Some(zero.clone());
        state.info.truncation = Some(zero.clone());
        state.info.episode_done = Some(zero.clone());
        state.info.sum_reward = Some(zero.clone());
        state.info.length = Some(zero.clone());
        state.info.episode_metrics = Some(vec![zero; state.metrics.len()]);
        state
    }

    fn step(&self, state: &EnvState, action: &Tensor) -> EnvState {
        // Brax scans `action_repeat` steps; a static unrolled loop is the same program.
        let mut next = self.env.step(state, action);
        let mut rewards = next.reward.clone();
        for _ in 1..self.action_repeat {
            next = self.env.step(&next, action);
            rewards = &rewards + &next.reward;
        }
        next.reward = rewards.clone();
        let zero = next.done.zeros_like();
        let one = &zero + 1.0;
        let info = &state.info;
        let missing = "EpisodeWrapper::step needs a state from EpisodeWrapper::reset";
        let steps = info.steps.as_ref().expect(missing) + self.action_repeat as f64;
        let ended = steps.ge(&Tensor::scalar_like(self.episode_length as f64, steps.dtype()));
        let done = where_(&ended, &one, &next.done);
        let truncation = where_(&ended, &(&one - &next.done), &zero);
        // Episode sums restart after a step that was `done`.
        let keep = &one - info.episode_done.as_ref().expect(missing);
        let sum_reward = &(info.sum_reward.as_ref().expect(missing) * &keep) + &rewards;
        let length = &(info.length.as_ref().expect(missing) * &keep) + self.action_repeat as f64;
        let episode_metrics = info
            .episode_metrics
            .as_ref()
            .expect(missing)
            .iter()
            .zip(&next.metrics)
            .map(|(sum, m)| &(sum * &keep) + m)
            .collect();
        next.info.steps = Some(steps);
        next.info.truncation = Some(truncation);
        next.info.episode_done = Some(done.clone());
        next.info.sum_reward = Some(sum_reward);
        next.info.length = Some(length);
        next.info.episode_metrics = Some(episode_metrics);
        next.done = done;
        next
    }

    fn observation_size(&self) -> usize {
        self.env.observation_size()
    }
    fn action_size(&self) -> usize {
        self.env.action_size()
    }
    fn metric_names(&self) -> Vec<&'static str> {
        self.env.metric_names()
    }
    fn dt(&self) -> f64 {
        self.env.dt() * self.action_repeat as f64
    }
    fn dtype(&self) -> DType {
        self.env.dtype()
    }
    fn n_frames(&self) -> usize {
        self.env.n_frames() * self.action_repeat
    }
}

/// Brax `AutoResetWrapper`: `reset` remembers the first pipeline state and observation; `step`
/// zeroes the step count of an episode that was `done`, clears `done`, steps, and where the new
/// `done` is 1 replaces the pipeline state and observation by the remembered ones (a `where` on
/// every leaf, no branch). Like Brax, it restores the env's *first* state, not a fresh random
/// one; `reward`, `done` and the episode sums of the finishing step are kept.
#[derive(Clone, Debug)]
pub struct AutoResetWrapper<E> {
    /// The wrapped environment.
    pub env: E,
}

impl<E: Env> Env for AutoResetWrapper<E> {
    fn reset(&self, key: &Tensor) -> EnvState {
        let mut state = self.env.reset(key);
        state.info.first =
            Some(FirstState { pipeline_state: state.pipeline_state.clone(), obs: state.obs.clone() });
        state
    }

    fn step(&self, state: &EnvState, action: &Tensor) -> EnvState {
        let was_done = state.done.ne(&state.done.zeros_like());
        let mut state = state.clone();
        if let Some(steps) = &state.info.steps {
            state.info.steps = Some(where_(&was_done, &steps.zeros_like(), steps));
        }
        state.done = state.done.zeros_like();
        let mut next = self.env.step(&state, action);
        let first = next.info.first.clone().expect("AutoResetWrapper::step needs a state from its reset");
        let done = next.done.ne(&next.done.zeros_like());
        let pick = |a: &Tensor, b: &Tensor| where_(&done, a, b);
        let leaves: Vec<Tensor> = first
            .pipeline_state
            .leaves()
            .iter()
            .zip(next.pipeline_state.leaves())
            .map(|(f, s)| pick(f, &s))
            .collect();
        next.pipeline_state = next.pipeline_state.rebuild(leaves);
        next.obs = pick(&first.obs, &next.obs);
        next
    }

    fn observation_size(&self) -> usize {
        self.env.observation_size()
    }
    fn action_size(&self) -> usize {
        self.env.action_size()
    }
    fn metric_names(&self) -> Vec<&'static str> {
        self.env.metric_names()
    }
    fn dt(&self) -> f64 {
        self.env.dt()
    }
    fn dtype(&self) -> DType {
        self.env.dtype()
    }
    fn n_frames(&self) -> usize {
        self.env.n_frames()
    }
}

/// Brax `VmapWrapper`: `batch_size` environments. `reset(key)` splits `key` into `batch_size` keys
/// (`random.split`) and resets each; `step(states, actions)` steps each (`vmap` over axis 0 of every
/// leaf of the state and of `actions: [batch, action_size]`). Its states are batched [`EnvState`]s
/// (every leaf has a leading batch axis).
#[derive(Clone, Debug)]
pub struct VmapWrapper<E> {
    /// The wrapped (single) environment.
    pub env: E,
    /// Number of environments.
    pub batch_size: usize,
}

impl<E: Env> VmapWrapper<E> {
    /// Resets the batch from `keys: u32[batch_size, 2]` (one key per environment); other key types
    /// are a kiln error at the caller's line.
    #[track_caller]
    pub fn reset_keys(&self, keys: &Tensor) -> EnvState {
        let keys =
            expect_type("VmapWrapper::reset_keys", "the keys", keys, DType::U32, &[self.batch_size, 2]);
        vmap(|k: Tensor| self.env.reset(&k), 0, 0)(keys)
    }
}

impl<E: Env> Env for VmapWrapper<E> {
    #[track_caller]
    fn reset(&self, key: &Tensor) -> EnvState {
        let key = expect_key("VmapWrapper::reset", key);
        self.reset_keys(&random::split(&key, self.batch_size))
    }

    /// Steps every environment: `action: [batch_size, action_size]`.
    #[track_caller]
    fn step(&self, state: &EnvState, action: &Tensor) -> EnvState {
        let dims = [self.batch_size, self.env.action_size()];
        let action = expect_type("VmapWrapper::step", "the actions", action, self.env.dtype(), &dims);
        vmap(|(s, a): (EnvState, Tensor)| self.env.step(&s, &a), (0, 0), 0)((state.clone(), action))
    }

    fn observation_size(&self) -> usize {
        self.env.observation_size()
    }
    fn action_size(&self) -> usize {
        self.env.action_size()
    }
    fn metric_names(&self) -> Vec<&'static str> {
        self.env.metric_names()
    }
    fn dt(&self) -> f64 {
        self.env.dt()
    }
    fn dtype(&self) -> DType {
        self.env.dtype()
    }
    fn n_frames(&self) -> usize {
        self.env.n_frames()
    }
}

/// Brax `training.wrap`: `AutoReset(Episode(env))`, for one environment (batch it with `vmap` or
/// [`VmapWrapper`]).
pub fn wrap<E: Env>(
    env: E,
    episode_length: usize,
    action_repeat: usize,
) -> AutoResetWrapper<EpisodeWrapper<E>> {
    AutoResetWrapper { env: EpisodeWrapper::new(env, episode_length, action_repeat) }
}

impl Env for Box<dyn Env> {
    fn reset(&self, key: &Tensor) -> EnvState {
        (**self).reset(key)
    }
    fn step(&self, state: &EnvState, action: &Tensor) -> EnvState {
        (**self).step(state, action)
    }
    fn observation_size(&self) -> usize {
        (**self).observation_size()
    }
    fn action_size(&self) -> usize {
        (**self).action_size()
    }
    fn metric_names(&self) -> Vec<&'static str> {
        (**self).metric_names()
    }
    fn dt(&self) -> f64 {
        (**self).dt()
    }
    fn dtype(&self) -> DType {
        (**self).dtype()
    }
    fn n_frames(&self) -> usize {
        (**self).n_frames()
    }
}

impl<E: Env + ?Sized> Env for &E {
    fn reset(&self, key: &Tensor) -> EnvState {
        (**self).reset(key)
    }
    fn step(&self, state: &EnvState, action: &Tensor) -> EnvState {
        (**self).step(state, action)
    }
    fn observation_size(&self) -> usize {
        (**self).observation_size()
    }
    fn action_size(&self) -> usize {
        (**self).action_size()
    }
    fn metric_names(&self) -> Vec<&'static str> {
        (**self).metric_names()
    }
    fn dt(&self) -> f64 {
        (**self).dt()
    }
    fn dtype(&self) -> DType {
        (**self).dtype()
    }
    fn n_frames(&self) -> usize {
        (**self).n_frames()
    }
}
