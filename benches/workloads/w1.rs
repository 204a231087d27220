//! W1 heat: 1-D periodic explicit diffusion, T steps in a `scan` (`benches/jax/w1_heat.py`).
//!
//! `u <- u + dt*alpha*(roll(u,1) - 2u + roll(u,-1))`, `loss = sum(u_T^2)`; timed: `jit(loss)` (fwd)
//! and `jit(grad(loss))` w.r.t. `(u0, alpha)` (grad). Inputs: `u0 = uniform(1, N, -1, 1)` (f32),
//! `alpha = 0.5` (f32 scalar), `dt = 0.1`.

use super::Case;
use super::common::{runner, uniform};
use kiln::prelude::*;

/// The time step (a Python float in the anchor: weakly typed, so it becomes f32 next to `alpha`).
const DT: f64 = 0.1;
/// (N, T) of the anchor, in its order.
const SIZES: [(usize, usize); 3] = [(64, 100), (4096, 1000), (1_000_000, 100)];

/// `sum(u_T^2)` after `steps` diffusion steps from `u0` (f32[N]) with diffusivity `alpha` (f32[]).
pub fn loss(u0: Tensor, alpha: Tensor, steps: usize) -> Tensor {
    // `DT * alpha` in the anchor: f32(0.1) * alpha, once, outside the loop.
    let c = &alpha * DT;
    let opts = ScanOptions { length: Some(steps), reverse: false };
    let step = |u: Tensor, (): ()| {
        // Same association as the anchor: ((roll(u,1) - 2u) + roll(u,-1)), then c *, then u +.
        let lap = u.roll(1, 0) - 2.0 * &u + u.roll(-1, 0);
        (&u + &(&c * &lap), ())
    };
    let (u_t, ()) = scan_with(step, u0, (), opts);
    (&u_t * &u_t).sum(All)
}

fn inputs(n: usize) -> (Tensor, Tensor) {
    (uniform(1, &[n], -1.0, 1.0), Tensor::scalar(0.5f32))
}

/// One case per (variant, size) of the anchor: fwd and grad at each (N, T).
pub fn cases() -> Vec<Case> {
    let mut cases = Vec::new();
    for (n, t) in SIZES {
        let size = format!("N={n},T={t}");
        cases.push(Case {
            workload: "W1",
            variant: "fwd",
            size: size.clone(),
            make: Box::new(move || runner(move |(u0, alpha)| loss(u0, alpha, t), inputs(n))),
        });
        cases.push(Case {
            workload: "W1",
            variant: "grad",
            size,
            make: Box::new(move || {
                // `grad(..)` is not `Clone`: wrap it in a closure that is.
                let g = move |args: (Tensor, Tensor)| {
                    grad(move |(u0, alpha): (Tensor, Tensor)| loss(u0, alpha, t))(args)
                };
                runner(g, inputs(n))
            }),
        });
    }
    cases
}
