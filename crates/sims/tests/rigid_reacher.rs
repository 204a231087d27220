//! Brax's reacher (two hinges, and a target on two stacked slides: Brax link type `2`) against
//! Brax 0.14.2's own values (`tests/data/brax/reacher_*.npz`, made by `make_reacher.py` beside
//! them): the spring and positional pipelines' trajectories from `init_q` under closed-form actions
//! (one env step from the stored state, and free-running), the environment's observation and reward
//! from a hand-set state, reset-noise ranges, and a gradient through 20 env steps against central
//! differences. f32 tolerances are the README's (`shared/data/brax/README.md`; positional 10×
//! looser); f64 runs against the `_f64` files. Measured: f64 one step and 200 free-running steps
//! within 1e-12 of Brax for both pipelines.

use kiln::prelude::*;
use kiln::random;
use kiln_sims::rigid::envs::{Env, EnvState, Info, Pipeline, Reacher};
use kiln_sims::rigid::wrappers::VmapWrapper;
use kiln_sims::rigid::{LinkKind, SlideStack, State};
use ndarray::ArrayD;
use ndarray_npy::NpzReader;

mod common;
use common::brax::{as_f64, errors, max_abs_diff, reference};

fn file(pipeline: Pipeline, dtype: DType) -> String {
    let width = if dtype == DType::F64 { "f64" } else { "f32" };
    format!("reacher_{}_{width}.npz", pipeline.name())
}

/// An env-level array of the Brax file, widened to f64.
fn env_value(name: &str, pipeline: Pipeline, dtype: DType) -> Vec<f64> {
    let path = format!("{}/tests/data/brax/{}", env!("CARGO_MANIFEST_DIR"), file(pipeline, dtype));
    let mut npz = NpzReader::new(std::fs::File::open(&path).unwrap()).unwrap();
    let key = format!("{name}.npy");
    if dtype == DType::F64 {
        let a: ArrayD<f64> = npz.by_name(&key).unwrap_or_else(|e| panic!("{key}: {e}"));
        a.iter().copied().collect()
    } else {
        let a: ArrayD<f32> = npz.by_name(&key).unwrap_or_else(|e| panic!("{key}: {e}"));
        a.iter().map(|&v| f64::from(v)).collect()
    }
}

#[test]
fn the_target_is_a_stack_of_two_slides_with_its_own_limits() {
    let env = Reacher::new(Pipeline::Spring, DType::F64).unwrap();
    let s = &env.base.model.structure;
    assert_eq!((s.num_links(), s.nq, s.nv), (3, 4, 4));
    assert!(matches!(s.kinds[0], LinkKind::OneDof(_)) && matches!(s.kinds[1], LinkKind::OneDof(_)));
    let LinkKind::Slides(SlideStack { count, dofs, q_index, axes }) = s.kinds[2] else {
        panic!("the target is {:?}", s.kinds[2]);
    };
    assert_eq!((count, &dofs[..2], &q_index[..2]), (2, &[2, 3][..], &[2, 3][..]));
    assert_eq!(axes, [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0; 3]]);
    // reacher.xml: joint0 unlimited, joint1 ±3 rad, both target slides ±0.27 m.
    let lo = env.base.model.limit_lo.to_vec::<f64>();
    let hi = env.base.model.limit_hi.to_vec::<f64>();
    assert_eq!(lo, [f64::NEG_INFINITY, -3.0, -0.27, -0.27]);
    assert_eq!(hi, [f64::INFINITY, 3.0, 0.27, 0.27]);
    // Brax lowers the gear to 25 for spring and positional.
    assert_eq!(env.base.model.gear.to_vec::<f64>(), [25.0, 25.0]);
    assert_eq!((env.n_frames(), env.dt()), (4, 0.02));
}

/// One env step (`n_frames` substeps) from the stored state at several t, jitted.
fn one_step(pipeline: Pipeline, dtype: DType, tol: [f64; 6]) {
    let name = file(pipeline, dtype);
    let r = reference(&name);
    let env = Reacher::new(pipeline, dtype).unwrap();
    assert!((r.env_dt - env.dt()).abs() < 1e-12);
    let base = env.base.clone();
    let step = jit(move |(s, a): (State, Tensor)| base.pipeline_step(&s, &a));
    let mut worst = [0.0f64; 6];
    for t in [0usize, 1, 10, 50, 100, 150, 198] {
        let next = step.call(&(r.state(t, dtype), r.action(t + 1, dtype))).unwrap();
        let e = errors(&next, &r, t + 1);
        for k in 0..6 {
            worst[k] = worst[k].max(e[k]);
        }
    }
    println!(
        "{name}: one-step max |Δ| pos {:.2e} rot {:.2e} vel {:.2e} ang {:.2e} q {:.2e} qd {:.2e}",
        worst[0], worst[1], worst[2], worst[3], worst[4], worst[5]
    );
    let names = ["pos", "rot", "vel", "ang", "q", "qd"];
    for k in 0..6 {
        assert!(worst[k] <= tol[k], "{name}: one-step |Δ{}| = {:.3e} > {:.1e}", names[k], worst[k], tol[k]);
    }
}

// README (spring, f32): |Δpos| ≤ 5e-6 m, |Δquat| ≤ 1e-6, |Δvel| ≤ 2e-4 m/s, |Δω| ≤ 1e-4 rad/s;
// q and qd get the rot and ang gates (angles and rates of the same links).
const F32_SPRING: [f64; 6] = [5e-6, 1e-6, 2e-4, 1e-4, 1e-6, 1e-4];

#[test]
fn spring_one_step_matches_brax_f32() {
    one_step(Pipeline::Spring, DType::F32, F32_SPRING);
}

#[test]
fn positional_one_step_matches_brax_f32() {
    one_step(Pipeline::Positional, DType::F32, F32_SPRING.map(|t| 10.0 * t));
}

#[test]
fn spring_one_step_matches_brax_f64() {
    one_step(Pipeline::Spring, DType::F64, [1e-10; 6]);
}

#[test]
fn positional_one_step_matches_brax_f64() {
    one_step(Pipeline::Positional, DType::F64, [1e-10; 6]);
}

/// All stored env steps from `init_q`, qd = 0, under the stored actions (one jitted scan); the
/// largest |Δ| of link positions and of `q` over the run.
fn free_running(pipeline: Pipeline, dtype: DType) -> (f64, f64) {
    let name = file(pipeline, dtype);
    let r = reference(&name);
    let steps = r.q.len() / r.nq;
    let env = Reacher::new(pipeline, dtype).unwrap();
    let base = env.base.clone();
    let run = jit(move |(q0, acts): (Tensor, Tensor)| {
        let s0 = base.pipeline_init(&q0, &Tensor::zeros(q0.dtype(), &[4]));
        let (_, (pos, q)) = scan(
            |s: State, a: Tensor| {
                let next = base.pipeline_step(&s, &a);
                let out = (next.x.pos.clone(), next.q.clone());
                (next, out)
            },
            s0,
            acts,
        );
        (pos, q)
    });
    let q0 = Tensor::from_vec(&[r.nq], r.q0.clone()).astype(dtype);
    let acts = Tensor::from_vec(&[steps, r.nu], r.acts.clone()).astype(dtype);
    let (pos, q) = run.call(&(q0, acts)).unwrap();
    let (pos, q) = (as_f64(&pos), as_f64(&q));
    let e_pos = max_abs_diff(&pos, &r.pos);
    let e_q = max_abs_diff(&q, &r.q);
    println!("{name}: free-running {steps} env steps: max |Δpos| {e_pos:.2e} m, max |Δq| {e_q:.2e}");
    (e_pos, e_q)
}

#[test]
fn spring_free_running_matches_brax() {
    let (pos, q) = free_running(Pipeline::Spring, DType::F64);
    assert!(pos < 1e-10 && q < 1e-9, "f64: |Δpos| {pos:.2e}, |Δq| {q:.2e}");
    // README's free-running gate for the inverted pendulum (no contacts either): 1e-4 m.
    let (pos, q) = free_running(Pipeline::Spring, DType::F32);
    assert!(pos < 1e-4 && q < 1e-3, "f32: |Δpos| {pos:.2e}, |Δq| {q:.2e}");
}

#[test]
fn positional_free_running_matches_brax() {
    let (pos, q) = free_running(Pipeline::Positional, DType::F64);
    assert!(pos < 1e-10 && q < 1e-9, "f64: |Δpos| {pos:.2e}, |Δq| {q:.2e}");
    let (pos, q) = free_running(Pipeline::Positional, DType::F32);
    assert!(pos < 1e-3 && q < 1e-2, "f32: |Δpos| {pos:.2e}, |Δq| {q:.2e}");
}

/// Brax's `_get_obs` of the hand-set state, then `env.step` under the stored action: obs, reward,
/// metrics and the next `q`.
fn env_values(pipeline: Pipeline, dtype: DType, tol: f64) {
    let env = Reacher::new(pipeline, dtype).unwrap();
    let v = |name: &str| env_value(name, pipeline, dtype);
    let t = |data: Vec<f64>| Tensor::from_vec(&[data.len()], data).astype(dtype);
    let ps = env.base.pipeline_init(&t(v("env_q")), &t(v("env_qd")));
    let obs0 = Reacher::observe(&ps);
    let zero = env.base.scalar(0.0);
    let s0 = EnvState {
        pipeline_state: ps,
        obs: obs0.clone(),
        reward: zero.clone(),
        done: zero.clone(),
        metrics: vec![zero.clone(), zero],
        info: Info::default(),
    };
    let s1 = env.step(&s0, &t(v("env_action")));
    let checks = [
        ("obs before", as_f64(&obs0), v("env_obs0")),
        ("obs after", as_f64(&s1.obs), v("env_obs1")),
        ("reward", as_f64(&s1.reward), v("env_reward")),
        ("reward_dist", as_f64(&s1.metrics[0]), v("env_reward_dist")),
        ("reward_ctrl", as_f64(&s1.metrics[1]), v("env_reward_ctrl")),
        ("q after", as_f64(&s1.pipeline_state.q), v("env_q1")),
    ];
    for (what, got, want) in checks {
        let e = max_abs_diff(&got, &want);
        assert!(e <= tol, "{} {dtype}: {what} {got:?} vs Brax {want:?} (|Δ| {e:.2e})", pipeline.name());
    }
    // Hand-computed: reward_ctrl = −(0.3² + 0.7²) = −0.58.
    assert!((as_f64(&s1.metrics[1])[0] + 0.58).abs() < 1e-6);
    assert_eq!(s1.obs.shape().dims(), &[env.observation_size()]);
}

#[test]
fn observation_and_reward_match_brax_f64() {
    env_values(Pipeline::Spring, DType::F64, 1e-10);
    env_values(Pipeline::Positional, DType::F64, 1e-10);
}

#[test]
fn observation_and_reward_match_brax_f32() {
    env_values(Pipeline::Spring, DType::F32, 1e-5);
    env_values(Pipeline::Positional, DType::F32, 1e-5);
}

#[test]
fn reset_noise_ranges_and_target_disk() {
    let env = Reacher::new(Pipeline::Spring, DType::F64).unwrap();
    let b = 512;
    let batch = VmapWrapper { env: env.clone(), batch_size: b };
    let s = jit(|k: Tensor| batch.reset(&k)).call(&random::key(9u32)).unwrap();
    let (q, qd) = (as_f64(&s.pipeline_state.q), as_f64(&s.pipeline_state.qd));
    let obs = as_f64(&s.obs);
    let init_q = [0.0, 0.0];
    let (mut arm_lo, mut arm_hi, mut vel_lo, mut vel_hi) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    let (mut r_max, mut angles_pos, mut angles_neg) = (0.0f64, 0, 0);
    for e in 0..b {
        let (qe, qde) = (&q[e * 4..e * 4 + 4], &qd[e * 4..e * 4 + 4]);
        for i in 0..2 {
            arm_lo = arm_lo.min(qe[i] - init_q[i]);
            arm_hi = arm_hi.max(qe[i] - init_q[i]);
            vel_lo = vel_lo.min(qde[i]);
            vel_hi = vel_hi.max(qde[i]);
        }
        // Brax: the target in the disk of radius 0.2, at rest.
        let r = (qe[2] * qe[2] + qe[3] * qe[3]).sqrt();
        assert!(r <= 0.2 + 1e-12, "env {e}: target at radius {r}");
        r_max = r_max.max(r);
        if qe[3] > 0.0 {
            angles_pos += 1
        } else {
            angles_neg += 1
        }
        assert_eq!(&qde[2..], &[0.0, 0.0], "env {e}: the target starts at rest");
        // The observation holds the target and cos/sin of the arm angles.
        let oe = &obs[e * 11..e * 11 + 11];
        assert_eq!(&oe[4..6], &qe[2..4]);
        assert!((oe[0] - qe[0].cos()).abs() < 1e-12 && (oe[2] - qe[0].sin()).abs() < 1e-12);
    }
    // U(−0.1, 0.1) on the arm angles, U(−0.005, 0.005) on their rates; 1024 draws cover the ranges.
    assert!(arm_lo >= -0.1 && arm_hi <= 0.1 && arm_lo < -0.099 && arm_hi > 0.099, "[{arm_lo}, {arm_hi}]");
    assert!(
        vel_lo >= -0.005 && vel_hi <= 0.005 && vel_lo < -0.0049 && vel_hi > 0.0049,
        "[{vel_lo}, {vel_hi}]"
    );
    // Radius 0.2·U(0, 1), angle 2π·U(0, 1): the whole disk is reached, in every direction.
    assert!(r_max > 0.19, "largest target radius {r_max}");
    assert!(angles_pos > 200 && angles_neg > 200, "{angles_pos} above, {angles_neg} below the x axis");
    assert!(as_f64(&s.reward).iter().chain(&as_f64(&s.done)).all(|&x| x == 0.0));
}

/// The summed reward of 20 env steps from a fixed state, as a function of the actions `[20, 2]`,
/// and of the initial `q` (`[4]`: arm angles and the target's slides).
fn summed_reward(pipeline: Pipeline) -> impl Fn((Tensor, Tensor)) -> Tensor + Clone {
    let env = Reacher::new(pipeline, DType::F64).unwrap();
    move |(acts, q0): (Tensor, Tensor)| {
        let ps = env.base.pipeline_init(&q0, &Tensor::zeros(DType::F64, &[4]));
        let zero = env.base.scalar(0.0);
        let s0 = EnvState {
            obs: Reacher::observe(&ps),
            pipeline_state: ps,
            reward: zero.clone(),
            done: zero.clone(),
            metrics: vec![zero.clone(), zero],
            info: Info::default(),
        };
        let (_, rewards) = scan(
            |s: EnvState, a: Tensor| {
                let next = env.step(&s, &a);
                let r = next.reward.clone();
                (next, r)
            },
            s0,
            acts,
        );
        rewards.sum_all()
    }
}

#[test]
fn gradient_through_20_env_steps_matches_central_differences_f64() {
    let steps = 20;
    let acts: Vec<f64> = (0..steps * 2).map(|k| 0.6 * ((k as f64) * 0.7).sin()).collect();
    let q0 = vec![0.3, -0.4, 0.12, -0.08];
    for pipeline in [Pipeline::Spring, Pipeline::Positional] {
        let f = summed_reward(pipeline);
        let value = jit(f.clone());
        let gradient = jit(grad(f));
        let args = |a: &[f64], q: &[f64]| {
            (Tensor::from_vec(&[steps, 2], a.to_vec()), Tensor::from_vec(&[4], q.to_vec()))
        };
        let (ga, gq) = gradient.call(&args(&acts, &q0)).unwrap();
        let (ga, gq) = (ga.to_vec::<f64>(), gq.to_vec::<f64>());
        let eps = 1e-6;
        let mut worst = 0.0f64;
        let mut check = |what: String, g: f64, at: &dyn Fn(f64) -> f64| {
            let fd = (at(eps) - at(-eps)) / (2.0 * eps);
            let rel = (g - fd).abs() / fd.abs();
            println!(
                "{}: d(reward)/d({what}): grad {g:.9e}, central difference {fd:.9e}, rel {rel:.1e}",
                pipeline.name()
            );
            assert!(fd.abs() > 1e-6, "degenerate check: d/d({what}) = {fd}");
            assert!(
                rel < 1e-4,
                "{}: d/d({what}): grad {g} vs central difference {fd} (rel {rel:.2e})",
                pipeline.name()
            );
            worst = worst.max(rel);
        };
        for k in [0usize, 1, 10, 21, 36, 39] {
            check(format!("act[{k}]"), ga[k], &|d| {
                let mut a = acts.clone();
                a[k] += d;
                value.call(&args(&a, &q0)).unwrap().item::<f64>()
            });
        }
        // Through the target's slide stack: its x and y set the distance term of every step.
        for k in 0..4 {
            check(format!("q0[{k}]"), gq[k], &|d| {
                let mut q = q0.clone();
                q[k] += d;
                value.call(&args(&acts, &q)).unwrap().item::<f64>()
            });
        }
        println!("{}: max relative error vs central differences {worst:.2e}", pipeline.name());
    }
}
