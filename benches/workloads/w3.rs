//! W3 agent-based epidemic (GradABM-style, tensorized SEIR): N agents, E = 10·N directed contact
//! edges sorted by destination, DAYS = 30 days in `scan`. Each day gathers the infectiousness of
//! every edge's source (`take`), sums it per destination (`segment_sum`), and draws infections with
//! a straight-through relaxed Bernoulli (`sigmoid` of a logit, `stop_gradient`). Timed: the loss
//! (forward) and `jit(grad)` w.r.t. the transmission rate R and the mortality m.
//!
//! The specification is `../shared/anchors/jax/w3_abm.py` (docstring and code): same inputs
//! (`src = randint(31, E, N)`, `dst = randint(32, E, N)`, both permuted by a stable sort of `dst`;
//! seeds `uniform(33, N) < 1e-3`; noise `U = uniform(34, (DAYS, N))`; R = 0.06, m = 0.02), same loss,
//! and the same f32 evaluation order for every expression (Python folds `2 * 1.5**2` to 4.5 before it
//! meets an array; `x ** 2` is `x * x`; `a * b * c` is `(a * b) * c`).
//!
//! The program is dtype-generic: with f64 inputs (R, m, s0, t0, U) it runs in f64 (the test's
//! finite-difference check uses that).

use super::Case;
use super::common::{randint, runner, uniform};
use kiln::lax::stop_gradient;
use kiln::nn;
use kiln::prelude::*;

/// Days simulated by the timed cases, relaxed-Bernoulli temperature, contacts per agent.
pub(crate) const DAYS: usize = 30;
const TEMP: f64 = 1.0;
const DEG: usize = 10;
/// Agent counts of the timed cases (the anchor's SIZES).
const SIZES: [usize; 2] = [100_000, 1_000_000];
/// How the gradient through the scan is stored (kiln's public `with_checkpoint`). `StoreAll` keeps
/// every day's residuals, as JAX's `grad` of `lax.scan` does.
const GRAD_POLICY: Checkpoint = Checkpoint::StoreAll;

/// The data arguments of the loss: `src, dst: i32[E]` (edges, sorted by `dst`), the initial
/// susceptible flags `s0: F[N]` (0/1) and infection days `t0: F[N]` (-2 for seeds, else 0), and the
/// noise `u: F[days, N]` in (0, 1); `F` is f32 (or f64 for the test's reference runs).
pub(crate) type Data = (Tensor, Tensor, Tensor, Tensor, Tensor);

/// The anchor's `make(N)` for `days` days of noise (the timed cases use [`DAYS`]): all f32 / i32,
/// bit for bit the arrays `w3_abm.py` builds.
pub(crate) fn make_data(n: usize, days: usize) -> Data {
    let e = DEG * n;
    let (src, dst) = (randint(31, e, n as u32), randint(32, e, n as u32));
    // numpy's argsort(kind="stable"): ties keep their original order, as Rust's stable sort does.
    let mut order: Vec<usize> = (0..e).collect();
    order.sort_by_key(|&i| dst[i]);
    let src: Vec<i32> = order.iter().map(|&i| src[i]).collect();
    let dst: Vec<i32> = order.iter().map(|&i| dst[i]).collect();
    // `uniform(33, (N,)) < 1e-3`: NumPy compares the f32 array with the Python float in f32.
    let seed: Vec<bool> = uniform(33, &[n], 0.0, 1.0)
        .to_array()
        .and_then(|a| a.to_vec::<f32>())
        .expect("concrete f32 input")
        .into_iter()
        .map(|x| x < 1e-3f32)
        .collect();
    let s0 = seed.iter().map(|&b| if b { 0.0f32 } else { 1.0 }).collect();
    let t0 = seed.iter().map(|&b| if b { -2.0f32 } else { 0.0 }).collect();
    (
        Tensor::from_vec(&[e], src),
        Tensor::from_vec(&[e], dst),
        Tensor::from_vec(&[n], s0),
        Tensor::from_vec(&[n], t0),
        uniform(34, &[days, n], 0.0, 1.0),
    )
}

/// The loss for transmission rate `r` and mortality `m` (float scalars of the data's float dtype):
/// `mean_d (daily_d / N - target_d)² · 1e4` over the `days = u.shape[0]` days, where `daily_d` is
/// the number of agents infected on day `d` and `target_d = 0.02 · exp(-((d - 15) / 6)²)`. A scalar.
pub(crate) fn loss(r: &Tensor, m: &Tensor, data: &Data) -> Tensor {
    simulate(r, m, data, Draws::Sampled).0
}

/// Where each day's infection draw `b` comes from in [`simulate`].
pub(crate) enum Draws {
    /// The anchor's straight-through draw `b = hard + soft - stop_gradient(soft)`, `hard = [soft > 0.5]`.
    Sampled,
    /// As `Sampled`, and also return every day's `hard`, `soft` and stage flag `[2 <= tau < 8]`
    /// (`F[days, N]` each).
    Recorded,
    /// `b = hard_d + soft - soft0_d` and the stage flags taken from given constants `(hard, soft0,
    /// stage)` of a `Recorded` run: equal to the loss at the recording's parameters, and near them a
    /// smooth function whose derivative is the straight-through gradient (which treats every
    /// comparison as constant), so finite differences can check it.
    Frozen(Tensor, Tensor, Tensor),
}

/// The day-by-day simulation behind [`loss`]: returns the loss and, for [`Draws::Recorded`], the
/// `[hard, soft, stage]` per day (else an empty vector).
pub(crate) fn simulate(r: &Tensor, m: &Tensor, data: &Data, draws: Draws) -> (Tensor, Vec<Tensor>) {
    let (src, dst, s0, t0, u) = data;
    let (n, days) = (s0.shape().dims()[0], u.shape().dims()[0]);
    let dtype = s0.dtype();
    let c = |x: f64| Tensor::scalar_like(x, dtype);
    let day_numbers = Tensor::arange(days, dtype);
    let q = (&day_numbers - 15.0) / 6.0;
    let target = 0.02 * (-(&q * &q)).exp();
    let record = matches!(draws, Draws::Recorded);
    let frozen = match draws {
        Draws::Frozen(hard, soft0, stage) => vec![hard, soft0, stage],
        Draws::Sampled | Draws::Recorded => Vec::new(),
    };

    let day = |(s, t_inf, a): (Tensor, Tensor, Tensor), (d, u, frozen): (Tensor, Tensor, Vec<Tensor>)| {
        let tau = &d - &t_inf;
        let late = &tau - 4.0;
        let inf = (1.0 - &s) * &a * (-(&late * &late) / 4.5).exp();
        // The message pass: every edge reads its source's infectiousness, summed per destination.
        let force = r * inf.take(src, 0).segment_sum(dst, n);
        // logit of p = 1 - exp(-force); the max keeps d/dforce finite where no neighbour is infected.
        let logit_p = force.maximum(&c(1e-6)).expm1().log();
        let z = (logit_p + u.log() - (1.0 - &u).log()) / TEMP;
        let soft = nn::sigmoid(&z);
        let hard = soft.gt(&c(0.5)).astype(dtype);
        let stage_i = tau.ge(&c(2.0)).logical_and(&tau.lt(&c(8.0))).astype(dtype);
        let (b, stage_i) = match frozen.as_slice() {
            [hard0, soft0, stage0] => (hard0 + &soft - soft0, stage0.clone()),
            _ => (&hard + &soft - stop_gradient(&soft), stage_i),
        };
        let new = &s * &b;
        let a = &a * (1.0 - m * (1.0 - &s) * &stage_i);
        let t_inf = &t_inf + &new * (&d - &t_inf);
        let ys = (new.sum_all(), if record { vec![hard, soft, stage_i] } else { Vec::new() });
        ((&s - &new, t_inf, a), ys)
    };
    let init = (s0.clone(), t0.clone(), s0.ones_like());
    let (_, (daily, recorded)) = scan(day, init, (day_numbers.clone(), u.clone(), frozen));
    let err = daily / n as f64 - target;
    ((&err * &err).mean_all() * 1e4, recorded)
}

/// `(dL/dR, dL/dm)` of [`loss`], the anchor's `grad(loss, argnums=(0, 1))`.
pub(crate) fn grad_rm(r: &Tensor, m: &Tensor, data: &Data) -> (Tensor, Tensor) {
    let f = |(r, m, data): (Tensor, Tensor, Data)| loss(&r, &m, &data);
    let (gr, gm, _) =
        with_checkpoint(GRAD_POLICY, || grad_argnums(f, &[0, 1])((r.clone(), m.clone(), data.clone())));
    (gr, gm)
}

/// The anchor's parameters R = 0.06, m = 0.02 (f32 scalars).
pub(crate) fn params() -> (Tensor, Tensor) {
    (Tensor::scalar(0.06f32), Tensor::scalar(0.02f32))
}

/// The anchor's rows: (fwd, grad) × N ∈ {10⁵, 10⁶}.
pub fn cases() -> Vec<Case> {
    let mut out = Vec::new();
    for n in SIZES {
        let size = format!("N={n},E={},days={DAYS}", DEG * n);
        for variant in ["fwd", "grad"] {
            out.push(Case {
                workload: "W3",
                variant,
                size: size.clone(),
                make: Box::new(move || make(variant == "grad", n)),
            });
        }
    }
    out
}

/// Inputs and a fresh jit closure for one case; the data are arguments of the compiled program
/// (as in the anchor's `jit(loss)(R, m, *data)`), not constants.
fn make(grad_rm_case: bool, n: usize) -> Box<dyn FnMut() -> Vec<kiln::ir::Array>> {
    let (r, m) = params();
    let args = (r, m, make_data(n, DAYS));
    if grad_rm_case {
        runner(|(r, m, data): (Tensor, Tensor, Data)| grad_rm(&r, &m, &data), args)
    } else {
        runner(|(r, m, data): (Tensor, Tensor, Data)| loss(&r, &m, &data), args)
    }
}
