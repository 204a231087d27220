//! W4 batched RL rollout: cart-pole (Gym/Barto equations, continuous force) under a linear tanh
//! policy, explicit Euler in Gym's order, T = 1000 steps in `scan`, `vmap`ped over B environments.
//! Timed: forward mean return for B = 1024 and B = 64, and `jit(grad(-mean return))` w.r.t. the
//! policy `(W, b)` for B = 64.
//!
//! The specification is `../shared/anchors/jax/w4_rollout.py`: same constants, inputs (initial
//! states `uniform(41, (B, 4), -0.05, 0.05)`, `W = [0.5, 1, 20, 3]`, `b = 0`) and the same f32
//! evaluation order (Python folds its float subexpressions such as `MP * L` and `MC + MP` in f64
//! before they meet an f32 array; the Rust below writes the same f64 expressions first).

use super::Case;
use super::common::{runner, uniform};
use kiln::prelude::*;

/// Gravity (m/s²), cart mass, pole mass (kg), pole half-length (m), maximum force (N), time step (s).
const G: f64 = 9.8;
const MC: f64 = 1.0;
const MP: f64 = 0.1;
const L: f64 = 0.5;
const FMAX: f64 = 10.0;
const DT: f64 = 0.02;
/// Steps per rollout.
const T: usize = 1000;
/// How the gradient through the scan is stored (kiln's public `with_checkpoint`). `StoreAll` keeps
/// every step's residuals, as JAX's `grad` of `lax.scan` does.
const GRAD_POLICY: Checkpoint = Checkpoint::StoreAll;

/// One environment's total reward over `T` steps from `state0: f32[4]` (`x, xd, th, thd`) under
/// the policy `u = tanh(W·state + b)` (`w: f32[4]`, `b: f32[]`); a scalar f32.
fn env_return(state0: &Tensor, w: &Tensor, b: &Tensor) -> Tensor {
    let step = |st: Tensor, _: ()| {
        let (x, xd, th, thd) = (st.index(0), st.index(1), st.index(2), st.index(3));
        let u = (w.dot(&st) + b).tanh();
        let f = FMAX * &u;
        let (s, c) = (th.sin(), th.cos());
        let tmp = (f + MP * L * &thd * &thd * &s) / (MC + MP);
        let tha = (G * &s - &c * &tmp) / (L * (4.0 / 3.0 - MP * &c * &c / (MC + MP)));
        let xa = &tmp - MP * L * &tha * &c / (MC + MP);
        let reward = &c - 0.01 * &x * &x - 0.001 * &u * &u;
        let new = Tensor::stack(&[&x + DT * &xd, &xd + DT * &xa, &th + DT * &thd, &thd + DT * &tha], 0);
        (new, reward)
    };
    let opts = ScanOptions { length: Some(T), reverse: false };
    let (_, rewards) = scan_with(step, state0.clone(), (), opts);
    rewards.sum_all()
}

/// Mean over the batch (`states: f32[B, 4]`) of each environment's return.
pub(crate) fn batch_return(states: &Tensor, w: &Tensor, b: &Tensor) -> Tensor {
    let per_env = vmap(
        |(s, w, b): (Tensor, Tensor, Tensor)| env_return(&s, &w, &b),
        (0, AxisSpec::NONE, AxisSpec::NONE),
        0,
    );
    per_env((states.clone(), w.clone(), b.clone())).mean_all()
}

/// The anchor's rows: forward B = 1024 and B = 64, gradient B = 64.
pub fn cases() -> Vec<Case> {
    [("fwd", 1024usize), ("fwd", 64), ("grad", 64)]
        .into_iter()
        .map(|(variant, batch)| Case {
            workload: "W4",
            variant,
            size: format!("B={batch},T={T}"),
            make: Box::new(move || make(variant == "grad", batch)),
        })
        .collect()
}

/// Inputs and a fresh jit closure for one case.
fn make(grad_policy: bool, batch: usize) -> Box<dyn FnMut() -> Vec<kiln::ir::Array>> {
    let states = uniform(41, &[batch, 4], -0.05, 0.05);
    let w = Tensor::from_vec(&[4], vec![0.5f32, 1.0, 20.0, 3.0]);
    let b = Tensor::scalar(0.0f32);
    let args = (w, b, states);
    if grad_policy {
        // The anchor's grad: argnums (W, b) of -batch_return; JAX returns only those two leaves.
        let program = |args: (Tensor, Tensor, Tensor)| {
            let loss = |(w, b, s): (Tensor, Tensor, Tensor)| -batch_return(&s, &w, &b);
            let (gw, gb, _) = with_checkpoint(GRAD_POLICY, || grad_argnums(loss, &[0, 1])(args));
            (gw, gb)
        };
        runner(program, args)
    } else {
        runner(|(w, b, s): (Tensor, Tensor, Tensor)| batch_return(&s, &w, &b), args)
    }
}
