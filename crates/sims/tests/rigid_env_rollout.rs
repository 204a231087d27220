//! Batched rollouts (`kiln_sims::rigid::rollout`): the scanned rollout equals stepping the batch one
//! call at a time, and `rollout::run` reports consistent numbers.

use kiln::prelude::*;
use kiln::random;
use kiln_sims::rigid::envs::{Ant, Env, EnvName, EnvState, Pipeline};
use kiln_sims::rigid::policy::Policy;
use kiln_sims::rigid::rollout::{RolloutArgs, run, scan_env_steps, scan_steps};
use kiln_sims::rigid::wrappers::{VmapWrapper, wrap};

#[test]
fn scanned_rollout_equals_stepping_one_call_at_a_time() {
    let env = wrap(Ant::new(Pipeline::Spring, DType::F64).unwrap(), 1000, 1);
    let batch = 3;
    let policy = Policy::mlp(&random::key(1u32), &[27, 16, 8], DType::F64);
    let s0 = jit(|k: Tensor| VmapWrapper { env: &env, batch_size: batch }.reset(&k))
        .call(&random::key(2u32))
        .unwrap();
    let zeros = Tensor::zeros(DType::F64, &[batch]);
    let steps = 6;
    let scanned = jit(|(p, c): (Policy, (EnvState, Tensor, Tensor))| scan_steps(&env, &p, c, steps))
        .call(&(policy.clone(), (s0.clone(), zeros.clone(), zeros)))
        .unwrap();
    let one = jit(|(p, s): (Policy, EnvState)| {
        let a = p.apply(&s.obs);
        vmap(|(s, a): (EnvState, Tensor)| env.step(&s, &a), (0, 0), 0)((s, a))
    });
    let mut s = s0;
    let mut total = vec![0.0; batch];
    for _ in 0..steps {
        s = one.call(&(policy.clone(), s)).unwrap();
        for (t, r) in total.iter_mut().zip(s.reward.to_vec::<f64>()) {
            *t += r;
        }
    }
    for (a, b) in scanned.0.leaves().iter().zip(s.leaves()) {
        let (a, b) = (a.to_vec::<f64>(), b.to_vec::<f64>());
        let err = a.iter().zip(&b).map(|(x, y)| (x - y).abs()).fold(0.0, f64::max);
        assert!(err < 1e-10, "scan vs loop |Δ| {err:e}");
    }
    let got = scanned.1.to_vec::<f64>();
    for b in 0..batch {
        assert!((got[b] - total[b]).abs() < 1e-10, "reward sum {} vs {}", got[b], total[b]);
    }
}

#[test]
fn chunked_per_env_rollout_equals_the_whole_batch_scan() {
    // What `rollout::run` runs: vmap(scan(per-env steps)) in chunks of 2 envs on 2 threads, batch 5
    // (the last chunk is a second compiled size), against the whole batch's scan of the vmapped step.
    let env = wrap(Ant::new(Pipeline::Spring, DType::F64).unwrap(), 4, 1); // episodes of 4: auto-reset runs
    let batch = 5;
    let policy = Policy::mlp(&random::key(3u32), &[27, 8], DType::F64);
    let s0 = jit(|k: Tensor| VmapWrapper { env: &env, batch_size: batch }.reset(&k))
        .call(&random::key(4u32))
        .unwrap();
    let zeros = Tensor::zeros(DType::F64, &[batch]);
    let carry = (s0, zeros.clone(), zeros);
    let steps = 6;
    let whole = jit(|(p, c): (Policy, (EnvState, Tensor, Tensor))| scan_steps(&env, &p, c, steps))
        .call(&(policy.clone(), carry.clone()))
        .unwrap();
    let per_env = |(p, c): (Policy, (EnvState, Tensor, Tensor))| scan_env_steps(&env, &p, c, steps);
    let chunked = kiln::chunked_vmap(per_env, (kiln::AxisSpec::NONE, 0), 0)
        .chunk(2)
        .threads(2)
        .call(&(policy, carry))
        .unwrap();
    assert_eq!(chunked.2.to_vec::<f64>(), vec![1.0; batch]); // one episode of 4 ended in each env
    for (a, b) in chunked.leaves().iter().zip(whole.leaves()) {
        assert_eq!(a.shape(), b.shape());
        let (a, b) = (a.astype(DType::F64).to_vec::<f64>(), b.astype(DType::F64).to_vec::<f64>());
        let err = a.iter().zip(&b).map(|(x, y)| (x - y).abs()).fold(0.0, f64::max);
        assert!(err < 1e-10, "chunked vs whole |Δ| {err:e}");
    }
}

#[test]
fn rollout_run_reports_the_pendulum_and_the_ant() {
    // The pendulum pays exactly 1 per step, terminated or not (auto-reset keeps stepping).
    let args = RolloutArgs {
        env: EnvName::InvertedPendulum,
        batch: 8,
        steps: 50,
        chunk: 20,
        ..RolloutArgs::default()
    };
    let r = run(&args).unwrap();
    println!("{r}");
    assert_eq!((r.env_steps, r.n_frames), (400, 4));
    assert_eq!(r.mean_reward, 1.0);
    assert!(r.env_steps_per_s > 0.0 && r.compile_s > 0.0);
    assert_eq!(r.nonfinite_envs, 0);
    // A random linear policy topples the pole (|θ| > 0.2) within 50 steps of 0.02 s in some envs.
    assert!(r.episodes_done >= 1.0, "{}", r.episodes_done);
    let args = RolloutArgs {
        env: EnvName::Ant,
        batch: 4,
        steps: 30,
        chunk: 30,
        hidden: vec![32],
        ..RolloutArgs::default()
    };
    let r = run(&args).unwrap();
    println!("{r}");
    assert_eq!((r.env_steps, r.n_frames), (120, 10));
    // Reward per step = forward velocity + 1 − 0.5 Σa² with |a| < 1 on 8 actuators: below 1 + |v|,
    // above −3 + v; for an ant that does not fly, |v| < 2 m/s.
    assert!(r.mean_reward > -5.0 && r.mean_reward < 3.0, "{}", r.mean_reward);
    assert_eq!(r.nonfinite_envs, 0);
}

/// The `kiln-sims rollout --env ant --batch 1024 --steps 1000` measurement (run with `--ignored`).
#[test]
#[ignore]
fn measure_rollouts() {
    for (env, batch, steps) in [(EnvName::Ant, 1024, 1000), (EnvName::InvertedPendulum, 1024, 1000)] {
        let r = run(&RolloutArgs { env, batch, steps, ..RolloutArgs::default() }).unwrap();
        println!("{r}");
    }
}
