//! W2 mass-spring soft robot (DiffTaichi-style): a 10×4 grid of unit point masses joined by 120
//! springs, driven open-loop by a sine controller, semi-implicit Euler for T = 1000 steps of
//! dt = 0.004 inside `scan`. Timed forward and `jit(grad)` w.r.t. the controller weights W, for one
//! robot and `vmap`ped over 256 robots.
//!
//! The specification is `../shared/anchors/jax/w2_massspring.py` (docstring and code): same
//! constants, same inputs (`W = uniform(21, (256, 120, 10), -0.5, 0.5)`, robot 0 for the single
//! case), same loss (`-mean_i x_T[i, 0]`), and the same f32 evaluation order for every expression
//! (Python evaluates `a * b * c` left to right, and folds Python-float subexpressions such as
//! `OMEGA * DT` in f64 before they meet an f32 array; the Rust code below writes the same f64
//! products before the tensor operands).

use super::Case;
use super::common::{runner, uniform};
use kiln::nn;
use kiln::prelude::*;

/// Grid of point masses: NX × NY, spacing SP, at x = 0.1 + SP·i, y = 0.03 + SP·j.
const NX: usize = 10;
const NY: usize = 4;
const SP: f64 = 0.05;
/// Controller: NSIN sines of angular frequency OMEGA; actuation amplitude ACT of the rest length.
const NSIN: usize = 10;
const OMEGA: f64 = 10.0;
const ACT: f64 = 0.2;
/// Spring and ground stiffness, ground smoothing sharpness, friction, ground damping, gravity,
/// velocity damping rate.
const K: f64 = 1e4;
const KG: f64 = 1e4;
const BETA: f64 = 500.0;
const MU: f64 = 50.0;
const DG: f64 = 20.0;
const GRAV: f64 = -4.8;
const DAMP: f64 = 10.0;
/// Time step (s) and number of steps.
const DT: f64 = 0.004;
const T: usize = 1000;
/// Robots in the batched cases (and rows of the W table all cases draw from).
const R_BATCH: usize = 256;

/// The robot: f32 positions `[M, 2]`, spring end points `a`, `b` (node ids, `i*NY + j`) and rest
/// lengths (f32 distance between the f32 initial positions), springs in the anchor's generation
/// order: for i, for j: right, up, diagonal, anti-diagonal.
struct Robot {
    pos: Vec<f32>,
    a: Vec<i32>,
    b: Vec<i32>,
    rest: Vec<f32>,
}

fn robot() -> Robot {
    let node = |i: usize, j: usize| (i * NY + j) as i32;
    let mut pos = Vec::with_capacity(2 * NX * NY);
    for i in 0..NX {
        for j in 0..NY {
            pos.push((0.1 + i as f64 * SP) as f32);
            pos.push((0.03 + j as f64 * SP) as f32);
        }
    }
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for i in 0..NX {
        for j in 0..NY {
            let mut spring = |p: i32, q: i32| {
                a.push(p);
                b.push(q);
            };
            if i + 1 < NX {
                spring(node(i, j), node(i + 1, j));
            }
            if j + 1 < NY {
                spring(node(i, j), node(i, j + 1));
            }
            if i + 1 < NX && j + 1 < NY {
                spring(node(i, j), node(i + 1, j + 1));
                spring(node(i + 1, j), node(i, j + 1));
            }
        }
    }
    // numpy f32: squared differences, summed over the 2 coordinates, then sqrt.
    let rest = a
        .iter()
        .zip(&b)
        .map(|(&p, &q)| {
            let (p, q) = (p as usize, q as usize);
            let dx = pos[2 * q] - pos[2 * p];
            let dy = pos[2 * q + 1] - pos[2 * p + 1];
            (dx * dx + dy * dy).sqrt()
        })
        .collect();
    Robot { pos, a, b, rest }
}

/// The robot's constant arrays as tensors (they become constants of the traced program).
#[derive(Clone)]
pub(crate) struct Consts {
    pos: Tensor,
    a: Tensor,
    b: Tensor,
    rest: Tensor,
    masses: usize,
}

pub(crate) fn consts() -> Consts {
    let r = robot();
    let (m, s) = (r.pos.len() / 2, r.a.len());
    Consts {
        pos: Tensor::from_vec(&[m, 2], r.pos),
        a: Tensor::from_vec(&[s], r.a),
        b: Tensor::from_vec(&[s], r.b),
        rest: Tensor::from_vec(&[s], r.rest),
        masses: m,
    }
}

/// `-mean_i x_T[i, 0]` after T steps for controller weights `w: f32[S, NSIN]`; a scalar f32.
pub(crate) fn loss(c: &Consts, w: &Tensor) -> Tensor {
    let phase = Tensor::arange(NSIN, DType::F32) * (2.0 * std::f64::consts::PI / NSIN as f64);
    let m = c.masses;
    let step = |(x, v): (Tensor, Tensor), t: Tensor| {
        let act = w.matmul(&(&t * (OMEGA * DT) + &phase).sin()).tanh();
        let target = &c.rest * &(1.0 + &act * ACT);
        let d = x.take(&c.b, 0) - x.take(&c.a, 0);
        let length = (&d * &d).sum(1).sqrt() + 1e-4;
        let f = (K * (&length - &target) / &length).expand_dims(1) * &d;
        let springs = f.segment_sum(&c.a, m) - f.segment_sum(&c.b, m);
        let y = x.index_axis(1, 1);
        let ground = nn::sigmoid(&(-BETA * &y));
        let fx = -MU * &ground * &v.index_axis(1, 0);
        let fy = KG * nn::softplus(&(-BETA * &y)) / BETA - DG * &ground * &v.index_axis(1, 1) + GRAV;
        let forces = springs + Tensor::stack(&[fx, fy], 1);
        let v = (&v + &(DT * forces)) * (-DT * DAMP).exp();
        ((&x + &(DT * &v), v), ())
    };
    let ts = Tensor::arange(T, DType::F32);
    let ((x, _), ()) = scan(step, (c.pos.clone(), Tensor::zeros(DType::F32, &[m, 2])), ts);
    -x.index_axis(1, 0).mean_all()
}

/// How the gradient through the 1000-step scan is stored (kiln's public `with_checkpoint`).
/// `StoreAll` keeps every step's residuals, as JAX's `grad` of `lax.scan` does.
const GRAD_POLICY: Checkpoint = Checkpoint::StoreAll;

/// The anchor's rows: (fwd, grad) × (single robot 0, vmap over 256 robots).
pub fn cases() -> Vec<Case> {
    let mut out = Vec::new();
    for (kind, r) in [("single", 1usize), ("batch", R_BATCH)] {
        let m = NX * NY;
        let size = format!("{kind} R={r},T={T},M={m},S={}", robot().a.len());
        for variant in ["fwd", "grad"] {
            out.push(Case {
                workload: "W2",
                variant,
                size: size.clone(),
                make: Box::new(move || make(kind == "batch", variant == "grad", r)),
            });
        }
    }
    out
}

/// Inputs and a fresh jit closure for one case (`r` robots; batched through `vmap`).
fn make(batched: bool, grad_w: bool, r: usize) -> Box<dyn FnMut() -> Vec<kiln::ir::Array>> {
    let s = robot().a.len();
    let all = uniform(21, &[R_BATCH, s, NSIN], -0.5, 0.5);
    let w = if batched { all.slice_axis(0, Some(0), Some(r as i64), 1) } else { all.index(0) };
    let c = consts();
    let program = move |w: Tensor| {
        let c = c.clone();
        let loss = move |w: Tensor| loss(&c, &w);
        match (batched, grad_w) {
            (false, false) => loss(w),
            (false, true) => with_checkpoint(GRAD_POLICY, || grad(loss)(w)),
            (true, false) => vmap(loss, 0, 0)(w),
            (true, true) => with_checkpoint(GRAD_POLICY, || vmap(grad(loss), 0, 0)(w)),
        }
    };
    runner(program, w)
}
