//! The positional pipeline against Brax 0.14's own trajectories
//! (`shared/data/brax/{ip,ant}_positional_*.npz`, made by `env.pipeline_step` from `init_q` with
//! closed-form actions): one env step from the stored state, free-running rollouts, and the gradient
//! through 100 env steps against central differences. Tolerances are those of
//! `shared/data/brax/README.md` (anchor-brax.md §5.3): positional one-step gates are 10× the
//! spring ones in f32.

use kiln::prelude::*;
use kiln_sims::rigid::{Model, Motion, State, System, Transform, positional};

mod common;
use common::brax::{Reference, as_f64, errors, max_abs_diff, reference};

/// The positional inverted pendulum as Brax's environment runs it: 0.005 s × `n_frames` substeps.
fn pendulum(dtype: DType, env_dt: f64) -> (Model, usize) {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/data/mjcf/inverted_pendulum.xml");
    let sys = System::from_mjcf_file(path).unwrap();
    let timestep = 0.005;
    let n_frames = (env_dt / timestep).round() as usize;
    assert_eq!(n_frames, 4);
    let model = Model::new(&sys, dtype).unwrap().with_timestep(timestep);
    assert!(model.structure.contacts.is_empty(), "the pendulum's geoms do not collide");
    (model, n_frames)
}

/// The positional ant as Brax's environment runs it: 0.005 s × 10 substeps, and Brax's
/// positional-only override of every actuator's gear to 200 (`envs/ant.py`).
fn ant(dtype: DType, env_dt: f64) -> (Model, usize) {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/data/mjcf/ant.xml");
    let sys = System::from_mjcf_file(path).unwrap();
    let timestep = 0.005;
    let n_frames = (env_dt / timestep).round() as usize;
    assert_eq!(n_frames, 10);
    let mut model = Model::new(&sys, dtype).unwrap().with_timestep(timestep);
    let nu = model.gear.shape().dims()[0];
    model.gear = Tensor::from_vec(&[nu], vec![200.0; nu]).astype(dtype);
    assert_eq!(model.structure.contacts.len(), 4, "the four foot spheres against the floor");
    (model, n_frames)
}

type Builder = fn(DType, f64) -> (Model, usize);

/// One env step (`n_frames` substeps under `scan`) from the stored state at several t, jitted;
/// link pose and velocity errors must be within `tol` = (pos m, quat, vel m/s, ω rad/s).
fn one_step(file: &str, build: Builder, dtype: DType, tol: [f64; 4]) {
    let r = reference(file);
    let (model, n_frames) = build(dtype, r.env_dt);
    let env_step = jit(move |(m, s, a): (Model, State, Tensor)| positional::steps(&m, &s, &a, n_frames));
    let mut worst = [0.0f64; 6];
    for t in [0usize, 1, 10, 50, 100, 250, 500, 750, 998] {
        let next = env_step.call(&(model.clone(), r.state(t, dtype), r.action(t + 1, dtype))).unwrap();
        let e = errors(&next, &r, t + 1);
        for k in 0..6 {
            worst[k] = worst[k].max(e[k]);
        }
    }
    println!(
        "{file}: one-step max |Δ| pos {:.2e} rot {:.2e} vel {:.2e} ang {:.2e} q {:.2e} qd {:.2e}",
        worst[0], worst[1], worst[2], worst[3], worst[4], worst[5]
    );
    let names = ["pos", "rot", "vel", "ang"];
    for k in 0..4 {
        assert!(worst[k] <= tol[k], "{file}: one-step |Δ{}| = {:.3e} > {:.1e}", names[k], worst[k], tol[k]);
    }
}

/// `steps` env steps from `init_q`, qd = 0, under the stored actions, traced as one jitted scan;
/// returns per step the link positions `[steps, L, 3]` and `q` `[steps, nq]`.
fn rollout(
    model: &Model,
    n_frames: usize,
    r: &Reference,
    dtype: DType,
    steps: usize,
) -> (Vec<f64>, Vec<f64>) {
    let q0 = Tensor::from_vec(&[r.nq], r.q0.clone()).astype(dtype);
    let qd0 = Tensor::zeros(dtype, &[r.nv]);
    let acts = Tensor::from_vec(&[steps, r.nu], r.acts[..steps * r.nu].to_vec()).astype(dtype);
    let run = jit(move |(m, q0, qd0, acts): (Model, Tensor, Tensor, Tensor)| {
        let s0 = positional::init(&m, &q0, &qd0);
        let (_, (pos, q)) = scan(
            |s: State, a: Tensor| {
                let next = positional::steps(&m, &s, &a, n_frames);
                let out = (next.x.pos.clone(), next.q.clone());
                (next, out)
            },
            s0,
            acts,
        );
        (pos, q)
    });
    let (pos, q) = run.call(&(model.clone(), q0, qd0, acts)).unwrap();
    (as_f64(&pos), as_f64(&q))
}

/// Free-running from `init_q` under the stored actions; link positions must stay within `gates`
/// (`(up to env step, max |Δpos| m)`, increasing) and, up to the first gate, `q` within `q_tol`.
fn free_running(file: &str, build: Builder, dtype: DType, gates: &[(usize, f64)], q_tol: f64) {
    let r = reference(file);
    let (model, n_frames) = build(dtype, r.env_dt);
    let steps = gates.last().unwrap().0;
    let (pos, q) = rollout(&model, n_frames, &r, dtype, steps);
    let l = r.links;
    let mut worst_pos = 0.0f64;
    let mut worst_q = 0.0f64;
    for t in 0..steps {
        let e_pos = max_abs_diff(&pos[t * l * 3..(t + 1) * l * 3], &Reference::slice(&r.pos, t, l * 3));
        let e_q = max_abs_diff(&q[t * r.nq..(t + 1) * r.nq], &Reference::slice(&r.q, t, r.nq));
        let gate = gates.iter().find(|g| t < g.0).unwrap();
        assert!(
            e_pos < gate.1,
            "{file}: link position error {e_pos:.3e} m at env step {t} (gate {:.0e})",
            gate.1
        );
        if t < gates[0].0 {
            assert!(e_q < q_tol, "{file}: joint error {e_q:.3e} at env step {t}");
        }
        worst_pos = worst_pos.max(e_pos);
        if gates.iter().any(|g| g.0 == t + 1) {
            println!("{file}: max |Δpos| up to env step {}: {worst_pos:.2e} m", t + 1);
        }
        worst_q = worst_q.max(e_q);
    }
    println!("{file}: free-running {steps} env steps: max |Δpos| {worst_pos:.2e} m, max |Δq| {worst_q:.2e}");
    if let Some(stem) = file.strip_suffix("_f32.npz") {
        // Brax's own f32 trajectory against its f64 one: how far float32 rounding alone drifts.
        let wide = reference(&format!("{stem}_f64.npz"));
        let n = steps * l * 3;
        println!(
            "  Brax f32 vs Brax f64 over the same steps: max |Δpos| {:.2e} m",
            max_abs_diff(&r.pos[..n], &wide.pos[..n])
        );
    }
}

#[test]
fn inverted_pendulum_one_step_matches_brax_f32() {
    // README: positional is 10× the spring gate: |Δpos| ≤ 5e-5 m, |Δquat| ≤ 1e-5, |Δvel| ≤ 2e-3 m/s,
    // |Δω| ≤ 1e-3 rad/s.
    one_step("ip_positional_f32.npz", pendulum, DType::F32, [5e-5, 1e-5, 2e-3, 1e-3]);
}

#[test]
fn inverted_pendulum_one_step_matches_brax_f64() {
    // The README expects about 100× tighter than the f32 gate in f64; kiln matches Brax's f64 step to
    // about 1e-15 m and 1e-13 m/s (measured), so the gate is far tighter than the README's.
    one_step("ip_positional_f64.npz", pendulum, DType::F64, [1e-10, 1e-10, 1e-8, 1e-8]);
}

#[test]
fn inverted_pendulum_free_running_matches_brax_f32() {
    // The README's spring gate (1e-4 m up to 100 env steps) × its positional factor 10. Measured
    // about 1.2e-4 m; Brax's own f32 run drifts 4.6e-5 m from its f64 run over the same steps.
    free_running("ip_positional_f32.npz", pendulum, DType::F32, &[(100, 1e-3)], 1e-2);
}

#[test]
fn inverted_pendulum_free_running_matches_brax_f64() {
    // Measured: about 6e-14 m over 100 env steps and 4e-9 m over all 1000.
    free_running("ip_positional_f64.npz", pendulum, DType::F64, &[(100, 1e-10), (1000, 1e-7)], 1e-10);
}

#[test]
fn ant_one_step_matches_brax_f32() {
    // README: the spring gate × 10, as for the pendulum.
    one_step("ant_positional_f32.npz", ant, DType::F32, [5e-5, 1e-5, 2e-3, 1e-3]);
}

#[test]
fn ant_one_step_matches_brax_f64() {
    // Measured about 5e-15 m and 4e-13 m/s.
    one_step("ant_positional_f64.npz", ant, DType::F64, [1e-10, 1e-10, 1e-8, 1e-8]);
}

#[test]
fn ant_free_running_matches_brax_f32() {
    // The README's spring gates (1e-4 m up to 20 env steps, 1e-3 up to 40) × its positional factor
    // 10. Measured about 5e-4 m by step 40; Brax's own f32 run drifts 7e-4 m from its f64 run.
    free_running("ant_positional_f32.npz", ant, DType::F32, &[(20, 1e-3), (40, 1e-2)], 1e-2);
}

#[test]
fn ant_free_running_matches_brax_f64() {
    // Far tighter than the README's f32-derived gates: kiln follows Brax's f64 trajectory to about
    // 1e-12 m for 40 env steps and 3e-9 m for 100 (measured); past the flip (steps 55–75) the
    // trajectories separate, to about 6e-5 m by step 200.
    free_running("ant_positional_f64.npz", ant, DType::F64, &[(40, 1e-10), (100, 1e-7), (200, 1e-3)], 1e-9);
}

/// The cart position and the pole angle after 100 env steps from `init_q`, as functions of the
/// actions `[100, 1]` (f64; the pendulum has no contacts).
fn final_q(model: &Model, n_frames: usize, q0: &[f64], which: usize) -> impl Fn(Tensor) -> Tensor + Clone {
    let model = model.clone();
    let q0 = q0.to_vec();
    move |acts: Tensor| {
        let s0 = positional::init(
            &model,
            &Tensor::from_vec(&[q0.len()], q0.clone()),
            &Tensor::zeros(DType::F64, &[2]),
        );
        let (last, ()) =
            scan(|s: State, a: Tensor| (positional::steps(&model, &s, &a, n_frames), ()), s0, acts);
        last.q.index(which as i64)
    }
}

#[test]
fn gradient_through_100_env_steps_matches_central_differences_f64() {
    let r = reference("ip_positional_f64.npz");
    let (model, n_frames) = pendulum(DType::F64, r.env_dt);
    let steps = 100;
    let acts: Vec<f64> = r.acts[..steps].to_vec();
    for (which, name) in [(0usize, "cart position"), (1, "pole angle")] {
        let f = final_q(&model, n_frames, &r.q0, which);
        let value = jit(f.clone());
        let gradient = jit(grad(f));
        let g = gradient.call(&Tensor::from_vec(&[steps, 1], acts.clone())).unwrap().to_vec::<f64>();
        let eps = 1e-5;
        let mut worst = 0.0f64;
        for k in [0usize, 1, 20, 50, 80, 97, 99] {
            let at = |delta: f64| {
                let mut a = acts.clone();
                a[k] += delta;
                value.call(&Tensor::from_vec(&[steps, 1], a)).unwrap().item::<f64>()
            };
            let fd = (at(eps) - at(-eps)) / (2.0 * eps);
            let rel = (g[k] - fd).abs() / fd.abs();
            println!("d({name})/d(act[{k}]): grad {:.9e}, central difference {fd:.9e}, rel {rel:.1e}", g[k]);
            assert!(fd.abs() > 1e-8, "degenerate check: d({name})/d(act[{k}]) = {fd}");
            assert!(
                rel < 1e-4,
                "d({name})/d(act[{k}]): grad {} vs central difference {fd} (rel {rel:.2e})",
                g[k]
            );
            worst = worst.max(rel);
        }
        println!("{name}: max relative error vs central differences {worst:.2e}");
    }
}

/// Stacks states along a new leading (batch) axis.
fn stack_states(states: &[State]) -> State {
    let leaves: Vec<Vec<Tensor>> = states.iter().map(|s| s.leaves()).collect();
    let stacked = (0..leaves[0].len())
        .map(|k| Tensor::stack(&leaves.iter().map(|l| l[k].clone()).collect::<Vec<_>>(), 0))
        .collect();
    states[0].rebuild(stacked)
}

#[test]
fn batched_env_step_under_jit_vmap_matches_brax_ant_f32() {
    let r = reference("ant_positional_f32.npz");
    let (model, n_frames) = ant(DType::F32, r.env_dt);
    let times = [5usize, 13, 40, 85];
    let states = stack_states(&times.iter().map(|&t| r.state(t, DType::F32)).collect::<Vec<_>>());
    let acts = Tensor::stack(&times.iter().map(|&t| r.action(t + 1, DType::F32)).collect::<Vec<_>>(), 0);
    let m = model.clone();
    let batched =
        jit(vmap(move |(s, a): (State, Tensor)| positional::steps(&m, &s, &a, n_frames), (0, 0), 0));
    let next = batched.call(&(states, acts)).unwrap();
    for (b, &t) in times.iter().enumerate() {
        let one = State {
            q: next.q.index(b as i64),
            qd: next.qd.index(b as i64),
            x: Transform { pos: next.x.pos.index(b as i64), rot: next.x.rot.index(b as i64) },
            xd: Motion { vel: next.xd.vel.index(b as i64), ang: next.xd.ang.index(b as i64) },
        };
        let e = errors(&one, &r, t + 1);
        println!("batch element {b} (t = {t}): |Δpos| {:.1e} |Δvel| {:.1e}", e[0], e[2]);
        // The f32 one-step gate of the README for positional.
        assert!(e[0] <= 5e-5 && e[1] <= 1e-5 && e[2] <= 2e-3 && e[3] <= 1e-3, "t = {t}: {e:?}");
    }
}

#[test]
fn ant_gradient_through_10_env_steps_with_feet_on_the_floor_matches_central_differences_f64() {
    let r = reference("ant_positional_f64.npz");
    let (model, n_frames) = ant(DType::F64, r.env_dt);
    // From env step 12 (feet on the floor), 10 env steps; loss = the torso's final height.
    let (start, steps) = (12usize, 10usize);
    let s0 = r.state(start, DType::F64);
    let acts: Vec<f64> = r.acts[(start + 1) * r.nu..(start + 1 + steps) * r.nu].to_vec();
    let nu = r.nu;
    // The contacts carry the ant in this window: without them the torso ends far lower.
    let mut floorless = model.clone();
    floorless.structure.contacts.clear();
    let (with, without) = [&model, &floorless]
        .map(|m| {
            let m = m.clone();
            let s0 = s0.clone();
            let run = jit(move |acts: Tensor| {
                let (last, ()) = scan(
                    |s: State, a: Tensor| (positional::steps(&m, &s, &a, n_frames), ()),
                    s0.clone(),
                    acts,
                );
                last.x.pos.index(0).index(2)
            });
            run.call(&Tensor::from_vec(&[steps, nu], acts.clone())).unwrap().item::<f64>()
        })
        .into();
    println!("torso height after {steps} env steps: {with:.4} m with the floor, {without:.4} m without");
    assert!(with - without > 0.05, "contacts inactive? {with} vs {without}");
    let height = move |acts: Tensor| {
        let (last, ()) =
            scan(|s: State, a: Tensor| (positional::steps(&model, &s, &a, n_frames), ()), s0.clone(), acts);
        last.x.pos.index(0).index(2)
    };
    let value = jit(height.clone());
    let gradient = jit(grad(height));
    let shape = [steps, nu];
    let g = gradient.call(&Tensor::from_vec(&shape, acts.clone())).unwrap().to_vec::<f64>();
    assert!(g.iter().all(|v| v.is_finite()), "gradient {g:?}");
    let g_max = g.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    let eps = 1e-6;
    let mut worst = 0.0f64;
    for k in [0usize, 3, 17, 30, 44, 59, 71, 79] {
        let at = |delta: f64| {
            let mut a = acts.clone();
            a[k] += delta;
            value.call(&Tensor::from_vec(&shape, a)).unwrap().item::<f64>()
        };
        let fd = (at(eps) - at(-eps)) / (2.0 * eps);
        let rel = (g[k] - fd).abs() / fd.abs().max(1e-3 * g_max);
        println!("d(torso z)/d(act[{k}]): grad {:.9e}, central difference {fd:.9e}, rel {rel:.1e}", g[k]);
        assert!(rel < 1e-3, "d(torso z)/d(act[{k}]): grad {} vs central difference {fd}", g[k]);
        worst = worst.max(rel);
    }
    println!("max relative error vs central differences {worst:.2e} (|grad| max {g_max:.3e})");
}

/// The ant as `envs::Ant` builds it for the positional pipeline (its timestep, substeps and gear).
fn ant_env(dtype: DType, env_dt: f64) -> (Model, usize) {
    let env = kiln_sims::rigid::envs::Ant::new(kiln_sims::rigid::envs::Pipeline::Positional, dtype).unwrap();
    assert!((env.base.dt() - env_dt).abs() < 1e-12, "env dt {} vs the reference's {env_dt}", env.base.dt());
    (env.base.model, env.base.n_frames)
}

#[test]
fn the_positional_ant_environment_steps_like_brax_f64() {
    one_step("ant_positional_f64.npz", ant_env, DType::F64, [1e-10, 1e-10, 1e-8, 1e-8]);
}
