//! The optional smooth contact onset (`Structure::contact_smoothing`, not in Brax), f64, spring and
//! positional pipelines, on the ant:
//! - the feet just above the floor, the ant falling at 0.5 m/s without gravity: with Brax's hard
//!   gate the torso's drop over 4 physics steps (the feet do not reach the floor) does not depend on
//!   the starting height (gradient 0); with a smooth onset of width 5 mm it does (the push reaches
//!   the torso through the leg joints), and the gradient equals central differences;
//! - feet on the floor (Brax's state at env step 12), 2 env steps: as the width goes to 0 the torso
//!   height tends to the hard gate's.
//!
//! With smoothing off (the default) the pipelines are Brax's bit for bit: `rigid_spring` and
//! `rigid_positional` check them against Brax's trajectories.

use kiln::prelude::*;
use kiln_sims::rigid::quat::rotate;
use kiln_sims::rigid::{Model, State, System, positional, spring};

mod common;
use common::brax::reference;

type Steps = fn(&Model, &State, &Tensor, usize) -> State;

fn ant(smoothing: Option<f64>) -> (Model, System) {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/data/mjcf/ant.xml");
    let sys = System::from_mjcf_file(path).unwrap();
    let mut model = Model::new(&sys, DType::F64).unwrap().with_timestep(0.005);
    model.structure.contact_smoothing = smoothing;
    (model, sys)
}

/// Signed heights (m) of the four feet's spheres above the floor at link frames of `state`.
fn foot_heights(model: &Model, state: &State) -> Vec<f64> {
    let pos = state.x.pos.to_vec::<f64>();
    let geom_pos = model.geom_pos.to_vec::<f64>();
    let geom_size = model.geom_size.to_vec::<f64>();
    model
        .structure
        .contacts
        .iter()
        .map(|row| {
            let l = row.link2.expect("a foot on a link");
            let g = row.other;
            let local = Tensor::from_vec(&[3], geom_pos[3 * g..3 * g + 3].to_vec());
            let offset = rotate(&local, &state.x.rot.index(l as i64)).to_vec::<f64>();
            pos[3 * l + 2] + offset[2] - geom_size[3 * g]
        })
        .collect()
}

/// `init_q` with the torso raised so that the lowest foot is `gap` above the floor, the whole ant
/// falling at `FALL` m/s.
fn falling_start(model: &Model, sys: &System, gap: f64) -> (Vec<f64>, Vec<f64>) {
    let mut q = sys.init_q.clone();
    let qd0 = vec![0.0; sys.nv];
    let s = spring::init(model, &Tensor::from_vec(&[q.len()], q.clone()), &Tensor::from_vec(&[sys.nv], qd0));
    let lowest = foot_heights(model, &s).into_iter().fold(f64::INFINITY, f64::min);
    q[2] += gap - lowest;
    let mut qd = vec![0.0; sys.nv];
    qd[2] = -FALL;
    (q, qd)
}

/// Falling speed (m/s) and start gap (m): 4 steps of 5 ms fall 10 mm, less than the gap, and the
/// spring pipeline's impulse is positive (approach speed > `erp/dt · dist` = 20/s · 15 mm).
const FALL: f64 = 0.5;
const GAP: f64 = 0.015;
const STEPS: usize = 4;

/// The torso's drop over `STEPS` physics steps without gravity as a function of a height offset `h`
/// (m) of the start.
fn drop_over_steps(
    model: &Model,
    sys: &System,
    steps: Steps,
    init: fn(&Model, &Tensor, &Tensor) -> State,
) -> impl Fn(Tensor) -> Tensor + Clone {
    let (q, qd) = falling_start(model, sys, GAP);
    let mut model = model.clone();
    model.gravity = Tensor::zeros(DType::F64, &[3]);
    let nu = sys.actuators.joint.len();
    move |h: Tensor| {
        let mut up = vec![0.0; q.len()];
        up[2] = 1.0;
        let q = &Tensor::from_vec(&[q.len()], q.clone()) + &(&Tensor::from_vec(&[q.len()], up) * &h);
        let s0 = init(&model, &q, &Tensor::from_vec(&[qd.len()], qd.clone()));
        let s1 = steps(&model, &s0, &Tensor::zeros(DType::F64, &[nu]), STEPS);
        &s1.x.pos.index(0).index(2) - &s0.x.pos.index(0).index(2)
    }
}

fn onset_gradient(name: &str, steps: Steps, init: fn(&Model, &Tensor, &Tensor) -> State) {
    let h0 = Tensor::scalar_like(0.0, DType::F64);
    // Hard gate: the feet stay above the floor for the step, so the drop is free fall.
    let (hard, sys) = ant(None);
    let start = falling_start(&hard, &sys, GAP);
    let s = init(
        &hard,
        &Tensor::from_vec(&[start.0.len()], start.0.clone()),
        &Tensor::from_vec(&[sys.nv], start.1),
    );
    let gaps = foot_heights(&hard, &s);
    println!("{name}: foot heights {gaps:?}");
    assert!(gaps.iter().all(|&g| g > 0.0149), "the feet start above the floor: {gaps:?}");
    let g_hard = jit(grad(drop_over_steps(&hard, &sys, steps, init))).call(&h0).unwrap().item::<f64>();
    println!("{name}: hard gate d(drop)/dh = {g_hard:e}");
    assert!(g_hard.abs() < 1e-12, "{name}: the hard gate has no gradient here, got {g_hard}");

    // Smooth onset, 5 mm: the floor already pushes, more the lower the ant starts.
    let (smooth, _) = ant(Some(0.005));
    let f = drop_over_steps(&smooth, &sys, steps, init);
    let g = jit(grad(f.clone())).call(&h0).unwrap().item::<f64>();
    let value = jit(f);
    let eps = 1e-6;
    let at = |h: f64| value.call(&Tensor::scalar_like(h, DType::F64)).unwrap().item::<f64>();
    let fd = (at(eps) - at(-eps)) / (2.0 * eps);
    let rel = (g - fd).abs() / fd.abs();
    println!("{name}: smooth d(drop)/dh = {g:.9e}, central difference {fd:.9e}, rel {rel:.1e}");
    assert!(g.abs() > 1e-4, "{name}: the smooth onset should give a gradient, got {g}");
    // Lower start → more push → less drop: the drop grows with the height.
    assert!(g < 0.0, "{name}: a higher start should be pushed less, got d(drop)/dh = {g}");
    assert!(rel < 1e-5, "{name}: grad {g} vs central difference {fd}");
}

#[test]
fn spring_smooth_onset_gives_a_height_gradient_above_the_floor_matching_central_differences() {
    onset_gradient("spring", spring::steps, spring::init);
}

#[test]
fn positional_smooth_onset_gives_a_height_gradient_above_the_floor_matching_central_differences() {
    onset_gradient("positional", positional::steps, positional::init);
}

/// The torso's height after 2 env steps from Brax's state at env step 12 (feet on the floor), for
/// smoothing widths shrinking to 0, against the hard gate.
fn converges(file: &str, steps: Steps) {
    let r = reference(file);
    let s0 = r.state(12, DType::F64);
    let acts = Tensor::from_vec(&[2, r.nu], r.acts[13 * r.nu..15 * r.nu].to_vec());
    let height = |smoothing: Option<f64>| {
        let (model, _) = ant(smoothing);
        let run = jit(|(s0, acts): (State, Tensor)| {
            let (last, ()) = scan(|s: State, a: Tensor| (steps(&model, &s, &a, 10), ()), s0, acts);
            last.x.pos.index(0).index(2)
        });
        run.call(&(s0.clone(), acts.clone())).unwrap().item::<f64>()
    };
    let hard = height(None);
    let errors: Vec<f64> =
        [1e-2, 1e-3, 1e-4, 1e-5, 1e-6].iter().map(|&w| (height(Some(w)) - hard).abs()).collect();
    println!("{file}: hard torso z {hard:.9}; |smooth − hard| for widths 1e-2 … 1e-6 m: {errors:?}");
    assert!(errors[0] > 1e-4, "a 1 cm onset should change the trajectory: {errors:?}");
    // Not monotone (a row a few widths from the plane switches on or off), but at 1 µm no row is
    // within a few widths of the plane, and the result is the hard gate's to rounding.
    assert!(errors[1..].iter().all(|&e| e < errors[0]), "not converging: {errors:?}");
    assert!(errors[4] < 1e-9, "width 1 µm should be the hard gate's result: {errors:?}");
}

#[test]
fn spring_smooth_onset_tends_to_the_hard_gate_as_the_width_shrinks() {
    converges("ant_spring_f64.npz", spring::steps);
}

#[test]
fn positional_smooth_onset_tends_to_the_hard_gate_as_the_width_shrinks() {
    converges("ant_positional_f64.npz", positional::steps);
}
