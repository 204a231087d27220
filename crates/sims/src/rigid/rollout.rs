//! Batched rollouts: `B` environments (Brax's training wrappers: episode length, auto-reset) driven by
//! a [`Policy`] for `T` env steps; the library side of `kiln-sims rollout --env ant --batch 1024
//! --steps 1000`.
//!
//! The program is `vmap(scan(per-env steps))` under [`kiln::chunked_vmap`] (policy broadcast,
//! `in_axes` None): the batch runs in chunks of [`RolloutArgs::env_chunk`] environments, chunks in
//! parallel on threads (`KILN_NUM_THREADS`), each chunk stepping its envs through a whole call's
//! steps while their states and intermediates stay in cache. Envs are independent, so this equals
//! stepping the whole batch at once.
//!
//! Timing follows the anchor's Brax measurements (`shared/research/anchor-brax.md` §3.1): the initial
//! states come from a separately jitted `vmap(reset)`; compile time is tracing plus Cranelift
//! compilation of the rollout program (`Jit::specialize`), measured before any step runs; throughput is
//! `B · T / run time` of the compiled calls only.
//!
//! ```
//! use kiln_sims::rigid::envs::EnvName;
//! use kiln_sims::rigid::rollout::{RolloutArgs, run};
//! let report = run(&RolloutArgs { env: EnvName::InvertedPendulum, batch: 4, steps: 20, ..RolloutArgs::default() })?;
//! assert_eq!(report.env_steps, 80);
//! assert!(report.mean_reward == 1.0); // the pendulum pays 1 per step, reset or not
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use super::envs::{Env, EnvError, EnvName, EnvState, Pipeline, make};
use super::policy::Policy;
use super::wrappers::{VmapWrapper, wrap};
use indicatif::{ProgressBar, ProgressStyle};
use kiln::prelude::*;
use kiln::random;
use kiln::{AxisSpec, chunked_vmap};
use std::time::Instant;

/// What to roll out (clap-free: the `kiln-sims rollout` command fills it).
#[derive(Debug, Clone)]
pub struct RolloutArgs {
    /// The environment.
    pub env: EnvName,
    /// The physics pipeline.
    pub pipeline: Pipeline,
    /// Number of environments.
    pub batch: usize,
    /// Env steps per environment.
    pub steps: usize,
    /// Seed of the reset keys and of the policy's weights.
    pub seed: u64,
    /// Float dtype (Brax's default is f32).
    pub dtype: DType,
    /// Episode length of the episode wrapper (Brax's default 1000).
    pub episode_length: usize,
    /// Env steps per compiled call (the progress bar advances per call); the last call takes the
    /// remainder (a second compiled program).
    pub chunk: usize,
    /// Environments per chunk of [`kiln::chunked_vmap`] (see the module docs); the default is
    /// [`DEFAULT_ENV_CHUNK`], or `KILN_ENV_CHUNK` from the environment when set to a positive number.
    pub env_chunk: usize,
    /// Hidden layer widths of the policy's MLP (empty: linear policy).
    pub hidden: Vec<usize>,
    /// Show a progress bar on stderr.
    pub progress: bool,
}

impl Default for RolloutArgs {
    fn default() -> Self {
        RolloutArgs {
            env: EnvName::Ant,
            pipeline: Pipeline::Spring,
            batch: 1024,
            steps: 1000,
            seed: 0,
            dtype: DType::F32,
            episode_length: 1000,
            chunk: 100,
            env_chunk: env_chunk_from_env().unwrap_or(DEFAULT_ENV_CHUNK),
            hidden: Vec::new(),
            progress: false,
        }
    }
}

/// Environments per chunk by default: of 32 and 128, 128 was faster on the ant (spring, f32, batch
/// 1024, 100 steps: 2409 vs 1944 env-steps/s, the unchunked program 2054) — one run each on 2 cores
/// shared at load average ~7, so a provisional choice (`KILN_ENV_CHUNK` overrides it).
pub const DEFAULT_ENV_CHUNK: usize = 128;

/// `KILN_ENV_CHUNK` when set to a positive number.
fn env_chunk_from_env() -> Option<usize> {
    std::env::var("KILN_ENV_CHUNK").ok()?.trim().parse().ok().filter(|&c| c > 0)
}

/// What a rollout measured.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Report {
    /// Brax's env name.
    pub env: String,
    /// The pipeline's name.
    pub pipeline: String,
    /// Number of environments.
    pub batch: usize,
    /// Env steps per environment.
    pub steps: usize,
    /// Pipeline steps per env step.
    pub n_frames: usize,
    /// `batch · steps`.
    pub env_steps: usize,
    /// Seconds to trace and compile the rollout program(s).
    pub compile_s: f64,
    /// Seconds to compile and run the batched reset.
    pub reset_s: f64,
    /// Seconds of compiled rollout calls.
    pub run_s: f64,
    /// `env_steps / run_s`.
    pub env_steps_per_s: f64,
    /// `env_steps_per_s · n_frames`.
    pub physics_steps_per_s: f64,
    /// Mean reward per env step over all environments and steps.
    pub mean_reward: f64,
    /// Episodes that ended (terminated or truncated) during the rollout.
    pub episodes_done: f64,
    /// Environments whose final joint state has a non-finite entry.
    pub nonfinite_envs: usize,
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} ({}), batch {} × {} steps: {:.0} env-steps/s ({:.0} physics steps/s), compile {:.2} s, \
             reset {:.2} s, run {:.2} s, mean reward {:.4}, {} episodes done, {} non-finite envs",
            self.env,
            self.pipeline,
            self.batch,
            self.steps,
            self.env_steps_per_s,
            self.physics_steps_per_s,
            self.compile_s,
            self.reset_s,
            self.run_s,
            self.mean_reward,
            self.episodes_done,
            self.nonfinite_envs
        )
    }
}

/// Why a rollout could not run.
#[derive(Debug, thiserror::Error)]
pub enum RolloutError {
    /// The environment did not build.
    #[error(transparent)]
    Env(#[from] EnvError),
    /// Tracing, compiling or running failed.
    #[error(transparent)]
    Kiln(#[from] kiln::Error),
    /// The arguments make no rollout.
    #[error("rollout: {0}")]
    Args(String),
}

/// The per-chunk carry: batched env states, each env's reward sum and count of finished episodes.
type Carry = (EnvState, Tensor, Tensor);

/// `steps` env steps of the batched, wrapped env under `policy`, as one `scan` (`steps` static).
/// `carry`'s leaves have a leading batch axis.
pub fn scan_steps<E: Env>(env: &E, policy: &Policy, carry: Carry, steps: usize) -> Carry {
    let batched = |(s, a): (EnvState, Tensor)| env.step(&s, &a);
    let step = vmap(batched, (0, 0), 0);
    let opts = ScanOptions { length: Some(steps), reverse: false };
    let (out, ()) = scan_with(
        |(s, total, episodes): Carry, (): ()| {
            let action = policy.apply(&s.obs);
            let next = step((s, action));
            let total = &total + &next.reward;
            let episodes = &episodes + &next.done;
            ((next, total, episodes), ())
        },
        carry,
        (),
        opts,
    );
    out
}

/// `steps` env steps of ONE wrapped env under `policy`, as one `scan` (`steps` static): the per-env
/// program that [`run`] maps over the batch. `carry` is one env's state, reward sum and count of
/// finished episodes (scalars).
pub fn scan_env_steps<E: Env>(env: &E, policy: &Policy, carry: Carry, steps: usize) -> Carry {
    let opts = ScanOptions { length: Some(steps), reverse: false };
    let (out, ()) = scan_with(
        |(s, total, episodes): Carry, (): ()| {
            let action = policy.apply(&s.obs);
            let next = env.step(&s, &action);
            let total = &total + &next.reward;
            let episodes = &episodes + &next.done;
            ((next, total, episodes), ())
        },
        carry,
        (),
        opts,
    );
    out
}

/// Runs the rollout `args` describes and measures it. Errors: [`RolloutError`].
pub fn run(args: &RolloutArgs) -> Result<Report, RolloutError> {
    if args.batch == 0 || args.steps == 0 || args.chunk == 0 || args.env_chunk == 0 {
        return Err(RolloutError::Args(format!(
            "batch ({}), steps ({}), chunk ({}) and env_chunk ({}) must be positive",
            args.batch, args.steps, args.chunk, args.env_chunk
        )));
    }
    let env = wrap(make(args.env, args.pipeline, args.dtype)?, args.episode_length, 1);
    let key = random::key(args.seed);
    let [reset_key, policy_key] = random::split2(&key);
    let sizes: Vec<usize> =
        [vec![env.observation_size()], args.hidden.clone(), vec![env.action_size()]].concat();
    let policy = Policy::mlp(&policy_key, &sizes, args.dtype);

    let started = Instant::now();
    let batch_env = VmapWrapper { env: &env, batch_size: args.batch };
    let state = jit(|k: Tensor| batch_env.reset(&k)).call(&reset_key)?;
    let zeros = Tensor::zeros(args.dtype, &[args.batch]);
    let reset_s = started.elapsed().as_secs_f64();

    let chunk = args.chunk.min(args.steps);
    let rest = args.steps % chunk;
    // Policy shared (None), the carry mapped along axis 0.
    let env = &env;
    let over_envs = |steps: usize| {
        let per_env = move |(p, c): (Policy, Carry)| scan_env_steps(env, &p, c, steps);
        chunked_vmap(per_env, (AxisSpec::NONE, 0), 0).chunk(args.env_chunk)
    };
    let (full, tail) = (over_envs(chunk), over_envs(rest));
    let mut carry: Carry = (state, zeros.clone(), zeros);
    let started = Instant::now();
    let full = full.specialize(&(policy.clone(), carry.clone()))?;
    let tail = if rest > 0 { Some(tail.specialize(&(policy.clone(), carry.clone()))?) } else { None };
    let compile_s = started.elapsed().as_secs_f64();

    let bar = if args.progress { ProgressBar::new(args.steps as u64) } else { ProgressBar::hidden() };
    if let Ok(style) = ProgressStyle::with_template("{bar:40} {pos}/{len} env steps {per_sec} ({eta})") {
        bar.set_style(style);
    }
    let started = Instant::now();
    for _ in 0..args.steps / chunk {
        carry = full.call(&(policy.clone(), carry))?;
        bar.inc(chunk as u64);
    }
    if let Some(tail) = &tail {
        carry = tail.call(&(policy.clone(), carry))?;
        bar.inc(rest as u64);
    }
    let run_s = started.elapsed().as_secs_f64();
    bar.finish_and_clear();

    let (state, total, episodes) = carry;
    let env_steps = args.batch * args.steps;
    let total: f64 = total.astype(DType::F64).to_vec::<f64>().iter().sum();
    let episodes_done: f64 = episodes.astype(DType::F64).to_vec::<f64>().iter().sum();
    let q = state.pipeline_state.q.astype(DType::F64).to_vec::<f64>();
    let nq = q.len() / args.batch;
    let nonfinite_envs = q.chunks(nq).filter(|row| row.iter().any(|v| !v.is_finite())).count();
    let n_frames = env.n_frames();
    let env_steps_per_s = env_steps as f64 / run_s;
    Ok(Report {
        env: args.env.name().into(),
        pipeline: args.pipeline.name().into(),
        batch: args.batch,
        steps: args.steps,
        n_frames,
        env_steps,
        compile_s,
        reset_s,
        run_s,
        env_steps_per_s,
        physics_steps_per_s: env_steps_per_s * n_frames as f64,
        mean_reward: total / env_steps as f64,
        episodes_done,
        nonfinite_envs,
    })
}
