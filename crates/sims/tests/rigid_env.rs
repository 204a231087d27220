//! The Brax environments and wrappers (`kiln_sims::rigid::envs`, `wrappers`): observations, rewards
//! and `done` on hand-checked states, reset-noise ranges, auto-reset, and `jit(vmap(step))` against
//! single steps.

use kiln::prelude::*;
use kiln::random;
use kiln_sims::rigid::envs::{Ant, Env, EnvState, InvertedDoublePendulum, InvertedPendulum, Pipeline};
use kiln_sims::rigid::wrappers::{VmapWrapper, wrap};
use kiln_sims::rigid::{Model, ModelError, State, System};

fn v64(t: &Tensor) -> Vec<f64> {
    t.astype(DType::F64).to_vec::<f64>()
}

fn s64(t: &Tensor) -> f64 {
    t.astype(DType::F64).item::<f64>()
}

/// An env state at joint positions `q` and velocities `qd` (rewards and metrics zero), as reset
/// would make it without noise.
fn state_at<E: Env>(
    env: &E,
    base_init: impl Fn(&Tensor, &Tensor) -> State,
    q: &[f64],
    qd: &[f64],
) -> EnvState {
    let ps =
        base_init(&Tensor::from_vec(&[q.len()], q.to_vec()), &Tensor::from_vec(&[qd.len()], qd.to_vec()));
    let mut s = env.reset(&random::key(0u32));
    s.obs = s.obs.zeros_like();
    s.pipeline_state = ps;
    s
}

#[test]
fn inverted_pendulum_obs_reward_done_by_hand() {
    let env = InvertedPendulum::new(Pipeline::Spring, DType::F64).unwrap();
    assert_eq!((env.observation_size(), env.action_size()), (4, 1));
    assert!((env.dt() - 0.02).abs() < 1e-15, "Brax spring: 0.005 s × 4");
    let init = |q: &Tensor, qd: &Tensor| env.base.pipeline_init(q, qd);
    // Action −1 maps to the bottom of ctrlrange [−3, 3]; +1 to the top; 0 to the middle.
    for (a, ctrl) in [(-1.0, -3.0), (1.0, 3.0), (0.0, 0.0), (0.5, 1.5)] {
        assert_eq!(s64(&env.controls(&Tensor::from_vec(&[1], vec![a])).index(0)), ctrl);
    }
    // Pole at 0.3 rad at rest: one env step (0.02 s) cannot bring it below 0.2 → done.
    for (angle, done) in [(0.3, 1.0), (-0.3, 1.0), (0.05, 0.0), (-0.1, 0.0)] {
        let s = state_at(&env, init, &[0.0, angle], &[0.0, 0.0]);
        let next = env.step(&s, &Tensor::from_vec(&[1], vec![0.0]));
        let (q, qd) = (v64(&next.pipeline_state.q), v64(&next.pipeline_state.qd));
        assert_eq!(v64(&next.obs), [q.clone(), qd].concat(), "obs = (q, qd)");
        assert!((q[1] - angle).abs() < 0.01, "the pole moved {} rad in one step", q[1] - angle);
        assert_eq!(s64(&next.reward), 1.0);
        assert_eq!(s64(&next.done), done, "angle {angle}");
    }
}

#[test]
fn inverted_pendulum_reset_noise_ranges() {
    let env = InvertedPendulum::new(Pipeline::Spring, DType::F32).unwrap();
    let batch = VmapWrapper { env: env.clone(), batch_size: 512 };
    let s = jit(|k: Tensor| batch.reset(&k)).call(&random::key(7u32)).unwrap();
    let (q, qd) = (v64(&s.pipeline_state.q), v64(&s.pipeline_state.qd));
    assert_eq!(q.len(), 512 * 2);
    for (name, v) in [("q", &q), ("qd", &qd)] {
        let (lo, hi) = v.iter().fold((f64::MAX, f64::MIN), |(a, b), &x| (a.min(x), b.max(x)));
        // init_q = 0, U(−0.01, 0.01): within the range, and 512 draws per coordinate cover it.
        assert!(lo >= -0.01 && hi < 0.01, "{name} range [{lo}, {hi}]");
        assert!(lo < -0.0095 && hi > 0.0095, "{name} does not spread: [{lo}, {hi}]");
        let mean = v.iter().sum::<f64>() / v.len() as f64;
        // Std of a U(−0.01, 0.01) mean of 1024 draws: 0.01/√3/32 ≈ 1.8e-4.
        assert!(mean.abs() < 8e-4, "{name} mean {mean}");
    }
    // Different environments get different noise; rewards and done start at 0.
    assert_ne!(q[0], q[2]);
    assert!(v64(&s.reward).iter().chain(&v64(&s.done)).all(|&x| x == 0.0));
    // The observation is (q, qd) of the reset state.
    let obs = v64(&s.obs);
    assert_eq!(&obs[..4], &[q[0], q[1], qd[0], qd[1]]);
}

#[test]
fn ant_reset_noise_ranges() {
    let env = Ant::new(Pipeline::Spring, DType::F32).unwrap();
    assert_eq!((env.observation_size(), env.action_size()), (27, 8));
    let init_q = env.base.init_q.clone();
    // ant.xml's `<numeric name="init_qpos">`: the torso at 0.55 m, upright.
    assert_eq!(init_q[..7], [0.0, 0.0, 0.55, 1.0, 0.0, 0.0, 0.0]);
    let batch = VmapWrapper { env: env.clone(), batch_size: 256 };
    let s = jit(|k: Tensor| batch.reset(&k)).call(&random::key(3u32)).unwrap();
    let (q, qd) = (v64(&s.pipeline_state.q), v64(&s.pipeline_state.qd));
    let mut lo = f64::MAX;
    let mut hi = f64::MIN;
    for b in 0..256 {
        for i in 0..15 {
            let d = q[b * 15 + i] - init_q[i];
            lo = lo.min(d);
            hi = hi.max(d);
        }
    }
    // U(−0.1, 0.1) on every coordinate (f32 rounding of init_q + noise: 1e-7).
    assert!(lo >= -0.1 - 1e-6 && hi <= 0.1 + 1e-6, "[{lo}, {hi}]");
    assert!(lo < -0.099 && hi > 0.099, "[{lo}, {hi}]");
    // qd = 0.1·N(0, 1): 3584 draws; the sample std is within ±0.01 of 0.1 with overwhelming odds.
    let n = qd.len() as f64;
    let mean = qd.iter().sum::<f64>() / n;
    let std = (qd.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n).sqrt();
    assert!(mean.abs() < 0.01 && (std - 0.1).abs() < 0.01, "mean {mean} std {std}");
    // obs = q[2..] ++ qd for the first env.
    let obs = v64(&s.obs);
    assert_eq!(&obs[..13], &q[2..15]);
    assert_eq!(&obs[13..27], &qd[..14]);
}

#[test]
fn ant_reward_terms_and_healthy_z_termination_by_hand() {
    let env = Ant::new(Pipeline::Spring, DType::F64).unwrap();
    let init = |q: &Tensor, qd: &Tensor| env.base.pipeline_init(q, qd);
    let mut q = env.base.init_q.clone();
    let action: Vec<f64> = vec![0.5, -0.5, 0.5, -0.5, 0.5, -0.5, 0.5, -0.5];
    // Σ a² = 2, so the control cost is 0.5 · 2 = 1.
    for (z, vx, done) in [(0.75, 0.4, 0.0), (0.1, 0.0, 1.0), (1.6, 0.0, 1.0), (0.5, -1.0, 0.0)] {
        q[2] = z;
        let mut qd = vec![0.0; 14];
        qd[0] = vx;
        let s = state_at(&env, init, &q, &qd);
        let next = env.step(&s, &Tensor::from_vec(&[8], action.clone()));
        let (p0, p1) = (v64(&s.pipeline_state.x.pos), v64(&next.pipeline_state.x.pos));
        let velocity = [(p1[0] - p0[0]) / 0.05, (p1[1] - p0[1]) / 0.05];
        // The torso moves a few cm in 0.05 s (at 0.1 m the feet are in the floor and push it up);
        // it keeps most of its x velocity.
        assert!((p1[2] - z).abs() < 0.1, "z {z} → {}", p1[2]);
        let unhealthy = p1[2] < 0.2 || p1[2] > 1.0;
        assert_eq!(unhealthy, done == 1.0, "z after the step {}", p1[2]);
        assert!((velocity[0] - vx).abs() < 0.3, "x velocity {vx} → {}", velocity[0]);
        let reward = velocity[0] + 1.0 - 1.0;
        assert!((s64(&next.reward) - reward).abs() < 1e-12, "reward {} vs {reward}", s64(&next.reward));
        assert_eq!(s64(&next.done), done, "torso z {z}");
        let m = v64(&Tensor::stack(&next.metrics, 0));
        let dist = (p1[0] * p1[0] + p1[1] * p1[1] + p1[2] * p1[2]).sqrt();
        let expected =
            [velocity[0], 1.0, -1.0, 0.0, p1[0], p1[1], dist, velocity[0], velocity[1], velocity[0]];
        for (k, name) in Ant::METRICS.iter().enumerate() {
            assert!((m[k] - expected[k]).abs() < 1e-12, "{name}: {} vs {}", m[k], expected[k]);
        }
        let (qn, qdn) = (v64(&next.pipeline_state.q), v64(&next.pipeline_state.qd));
        assert_eq!(v64(&next.obs), [qn[2..].to_vec(), qdn].concat());
    }
}

/// Rotates `v` by the unit quaternion `q` (w, x, y, z), by hand: `v + 2w (u × v) + 2 u × (u × v)`.
fn rotate(v: [f64; 3], q: &[f64]) -> [f64; 3] {
    let (w, u) = (q[0], [q[1], q[2], q[3]]);
    let cross = |a: [f64; 3], b: [f64; 3]| {
        [a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]]
    };
    let t = cross(u, v);
    let t2 = cross(u, t);
    [0, 1, 2].map(|i| v[i] + 2.0 * w * t[i] + 2.0 * t2[i])
}

#[test]
fn inverted_double_pendulum_obs_reward_done_by_hand() {
    let env = InvertedDoublePendulum::new(Pipeline::Spring, DType::F64).unwrap();
    assert_eq!((env.observation_size(), env.action_size()), (8, 1));
    let init = |q: &Tensor, qd: &Tensor| env.base.pipeline_init(q, qd);
    // Upright and at rest the tip is at 1.2 m: alive. Tipped 1 rad with the second pole folded
    // back, its tip is lower than 1 m: done.
    for (q, done) in [([0.0, 0.0, 0.0], 0.0), ([0.2, 0.1, -0.2], 0.0), ([0.0, 1.0, 1.0], 1.0)] {
        let s = state_at(&env, init, &q, &[0.0, 0.5, -12.0]);
        let next = env.step(&s, &Tensor::from_vec(&[1], vec![0.3]));
        let ps = &next.pipeline_state;
        let (pos, rot) = (v64(&ps.x.pos), v64(&ps.x.rot));
        let r = rotate([0.0, 0.0, 0.6], &rot[8..12]);
        let (x, y) = (pos[6] + r[0], pos[8] + r[2]);
        let (qn, qdn) = (v64(&ps.q), v64(&ps.qd));
        let expect_done = if y <= 1.0 { 1.0 } else { 0.0 };
        assert_eq!(expect_done, done, "tip height {y} for q {q:?}");
        let reward = 10.0 * (1.0 - done)
            - (0.01 * x * x + (y - 2.0).powi(2))
            - (1e-3 * qdn[1].powi(2) + 5e-3 * qdn[2].powi(2));
        assert_eq!(s64(&next.done), done);
        assert!((s64(&next.reward) - reward).abs() < 1e-10, "reward {} vs {reward}", s64(&next.reward));
        let clip = |v: f64| v.clamp(-10.0, 10.0);
        let obs = [
            qn[0],
            qn[1].sin(),
            qn[2].sin(),
            qn[1].cos(),
            qn[2].cos(),
            clip(qdn[0]),
            clip(qdn[1]),
            clip(qdn[2]),
        ];
        let got = v64(&next.obs);
        for k in 0..8 {
            assert!((got[k] - obs[k]).abs() < 1e-14, "obs[{k}] {} vs {}", got[k], obs[k]);
        }
        assert!(qdn[2] < -10.0 && got[7] == -10.0, "qd[2] {} is clipped to −10", qdn[2]);
    }
}

#[test]
fn episode_wrapper_truncates_and_auto_reset_restores_the_first_state() {
    let env = InvertedPendulum::new(Pipeline::Spring, DType::F64).unwrap();
    let wrapped = wrap(env, 3, 1);
    let s0 = wrapped.reset(&random::key(11u32));
    let a = Tensor::from_vec(&[1], vec![0.2]);
    let s1 = wrapped.step(&s0, &a);
    let s2 = wrapped.step(&s1, &a);
    assert_eq!(s64(&s2.done), 0.0);
    assert_eq!(s64(s2.info.steps.as_ref().unwrap()), 2.0);
    assert_ne!(v64(&s2.pipeline_state.q), v64(&s0.pipeline_state.q));
    let s3 = wrapped.step(&s2, &a);
    // Step 3 reaches the episode length: done, truncated (not terminated), and the state is the
    // first one again, leaf for leaf.
    assert_eq!(s64(&s3.done), 1.0);
    assert_eq!(s64(s3.info.truncation.as_ref().unwrap()), 1.0);
    assert_eq!(s64(s3.info.sum_reward.as_ref().unwrap()), 3.0);
    assert_eq!(s64(s3.info.length.as_ref().unwrap()), 3.0);
    for (first, now) in s0.pipeline_state.leaves().iter().zip(s3.pipeline_state.leaves()) {
        assert_eq!(v64(first), v64(&now));
    }
    assert_eq!(v64(&s0.obs), v64(&s3.obs));
    // The next step starts a new episode: step count 1, episode sums restarted.
    let s4 = wrapped.step(&s3, &a);
    assert_eq!(s64(&s4.done), 0.0);
    assert_eq!(s64(s4.info.steps.as_ref().unwrap()), 1.0);
    assert_eq!(s64(s4.info.sum_reward.as_ref().unwrap()), 1.0);
    assert_eq!(s64(s4.info.length.as_ref().unwrap()), 1.0);
    let s1_again = wrapped.step(&s0, &a);
    assert_eq!(v64(&s4.pipeline_state.q), v64(&s1_again.pipeline_state.q), "same first state, same action");
}

#[test]
fn auto_reset_after_termination_is_not_truncation() {
    let env = InvertedPendulum::new(Pipeline::Spring, DType::F64).unwrap();
    let wrapped = wrap(env.clone(), 1000, 1);
    let s0 = wrapped.reset(&random::key(5u32));
    // Push the pole past 0.2 rad by hand: the next step terminates.
    let mut tipped = s0.clone();
    tipped.pipeline_state = env
        .base
        .pipeline_init(&Tensor::from_vec(&[2], vec![0.0, 0.5]), &Tensor::from_vec(&[2], vec![0.0, 0.0]));
    let s1 = wrapped.step(&tipped, &Tensor::from_vec(&[1], vec![0.0]));
    assert_eq!(s64(&s1.done), 1.0);
    assert_eq!(s64(s1.info.truncation.as_ref().unwrap()), 0.0);
    assert_eq!(v64(&s1.pipeline_state.q), v64(&s0.pipeline_state.q));
    assert_eq!(v64(&s1.obs), v64(&s0.obs));
}

#[test]
fn a_stack_of_hinges_is_rejected_by_the_model() {
    // Brax's rotational link types `2`/`3` (e.g. the humanoid's) are not implemented in kiln; stacks
    // of slides (reacher's target) are. This documents the limit.
    let xml = r#"<mujoco><worldbody><body name="wrist">
        <joint type="hinge" axis="1 0 0"/><joint type="hinge" axis="0 1 0"/>
        <geom type="sphere" size="0.1"/></body></worldbody></mujoco>"#;
    let sys = System::from_mjcf_str("two_hinges", xml).unwrap();
    match Model::new(&sys, DType::F32) {
        Err(ModelError::JointStack { link, joints }) => assert_eq!((link.as_str(), joints), ("wrist", 2)),
        other => panic!("expected JointStack, got {:?}", other.map(|_| ())),
    }
}

/// Stacked per-environment values of a batched state's leaf `k`.
fn leaf_rows(s: &EnvState, k: usize, b: usize) -> Vec<f64> {
    let leaf = &s.leaves()[k];
    v64(&leaf.index(b as i64))
}

#[test]
fn jit_vmap_step_equals_single_steps_ant_and_pendulum() {
    fn check<E: Env + Clone>(env: E, batch: usize, tol: f64) {
        let nu = env.action_size();
        let wrapped = wrap(env.clone(), 1000, 1);
        let states = jit(|k: Tensor| VmapWrapper { env: wrapped.clone(), batch_size: batch }.reset(&k))
            .call(&random::key(21u32))
            .unwrap();
        let actions = random::uniform(&random::key(4u32), &[batch, nu], env.dtype(), -1.0, 1.0);
        let w2 = wrapped.clone();
        let batched = jit(move |(s, a): (EnvState, Tensor)| {
            vmap(|(s, a): (EnvState, Tensor)| w2.step(&s, &a), (0, 0), 0)((s, a))
        });
        let next = batched.call(&(states.clone(), actions.clone())).unwrap();
        let single = jit(move |(s, a): (EnvState, Tensor)| wrapped.step(&s, &a));
        let n_leaves = next.leaves().len();
        for b in 0..batch {
            let one = states.map(|t| t.index(b as i64));
            let out = single.call(&(one, actions.index(b as i64))).unwrap();
            for (k, leaf) in out.leaves().iter().enumerate().take(n_leaves) {
                let (x, y) = (v64(leaf), leaf_rows(&next, k, b));
                let err = x.iter().zip(&y).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
                assert!(err <= tol, "env {b} leaf {k}: |Δ| {err:e}");
            }
        }
    }
    check(Ant::new(Pipeline::Spring, DType::F32).unwrap(), 6, 1e-5);
    check(InvertedPendulum::new(Pipeline::Spring, DType::F32).unwrap(), 5, 1e-6);
    check(Ant::new(Pipeline::Spring, DType::F64).unwrap(), 3, 1e-12);
}

#[test]
fn keys_and_actions_of_the_wrong_type_are_errors_at_the_callers_line() {
    // Regression (bad-input hunt): a `[2]` action for the one-actuator pendulum panicked in
    // `at_add` "at crates/sims/src/rigid/spring/mod.rs:57", an f64 action in `mul` inside the env,
    // a `u32[3]` key inside `reset`; none named the env or what it expected.
    let env = InvertedPendulum::new(Pipeline::Spring, DType::F32).unwrap();
    let s0 = env.reset(&random::key(0u32));
    let here = |line: u32| format!("rigid_env.rs:{line}:");
    let check = |err: kiln::Error, needles: &[&str]| {
        let msg = err.to_string();
        assert!(needles.iter().all(|n| msg.contains(n)), "{msg}");
    };
    let line = line!() + 1;
    let err = trace(|a: Tensor| env.step(&s0, &a).obs, &Tensor::zeros(DType::F32, &[2])).unwrap_err();
    check(err, &["InvertedPendulum::step", "the action must be f32[1]", &here(line)]);
    let err = trace(|a: Tensor| env.step(&s0, &a).obs, &Tensor::zeros(DType::F64, &[1])).unwrap_err();
    check(err, &["InvertedPendulum::step", "f32[1]"]);
    let line = line!() + 1;
    let err = trace(|k: Tensor| env.reset(&k).obs, &Tensor::zeros(DType::U32, &[3])).unwrap_err();
    check(err, &["InvertedPendulum::reset", "the key must be u32[2]", &here(line)]);
    // Batched: actions must be [batch_size, action_size] (a wrong batch was vmap's error, located
    // in kiln's own source).
    let batch = VmapWrapper { env: env.clone(), batch_size: 4 };
    let states = batch.reset(&random::key(1u32));
    let wrong = Tensor::zeros(DType::F32, &[3, 1]);
    let line = line!() + 1;
    let err = trace(|a: Tensor| batch.step(&states, &a).obs, &wrong).unwrap_err();
    check(err, &["VmapWrapper::step", "the actions must be f32[4,1]", &here(line)]);
    // Through a `dyn Env` too (the trait's methods track the caller), and in eager code as a panic
    // naming the env.
    let dynamic: &dyn Env = &env;
    let line = line!() + 1;
    let err = trace(|a: Tensor| dynamic.step(&s0, &a).obs, &Tensor::zeros(DType::F32, &[])).unwrap_err();
    check(err, &["InvertedPendulum::step", &here(line)]);
    let panic = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        env.step(&s0, &Tensor::zeros(DType::F32, &[2]));
    }))
    .unwrap_err();
    let msg = panic.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(msg.contains("InvertedPendulum::step") && msg.contains("rigid_env.rs"), "{msg}");
    // The right types still step.
    assert_eq!(env.step(&s0, &Tensor::zeros(DType::F32, &[1])).obs.shape().dims(), &[4]);
}
