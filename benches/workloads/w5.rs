//! W5 MLP: 784 -> 512 (relu) -> 10, batch 256, mean softmax cross-entropy (`benches/jax/w5_mlp.py`).
//!
//! Timed: `jit(loss)` (fwd) and `jit(grad(loss))` w.r.t. the parameters `(W1, b1, W2, b2)` (grad; the
//! four gradient leaves are the outputs, as JAX's). Inputs: `x = uniform(51, (256,784))`,
//! `labels = randint(52, 256, 10)`, `W1 = uniform(53, (784,512), -a1, a1)`, `a1 = 1/sqrt(784)`;
//! `b1 = uniform(54, 512, -0.1, 0.1)`; `W2 = uniform(55, (512,10), -a2, a2)`, `a2 = 1/sqrt(512)`;
//! `b2 = uniform(56, 10, -0.1, 0.1)`.

use super::Case;
use super::common::{randint, runner, uniform};
use kiln::nn;
use kiln::prelude::*;

/// (batch, input, hidden, classes) of the anchor.
const SIZES: [(usize, usize, usize, usize); 1] = [(256, 784, 512, 10)];

/// The parameters `(W1 [D,H], b1 [H], W2 [H,C], b2 [C])`, f32.
pub type Params = (Tensor, Tensor, Tensor, Tensor);

/// Mean over the batch of `logsumexp(logits) - logits[label]`; `x` f32[B,D], `labels` i32[B].
pub fn loss((w1, b1, w2, b2): Params, x: Tensor, labels: Tensor) -> Tensor {
    let h = nn::relu(&(x.matmul(&w1) + &b1));
    let logits = h.matmul(&w2) + &b2;
    let lse = nn::logsumexp(&logits, -1);
    let picked = logits.take_along_axis(&labels.reshape(&[-1, 1]), -1).reshape(&[-1]);
    (&lse - &picked).mean(All)
}

fn inputs((b, d, h, c): (usize, usize, usize, usize)) -> (Params, Tensor, Tensor) {
    let (a1, a2) = (1.0 / (d as f64).sqrt(), 1.0 / (h as f64).sqrt());
    let params = (
        uniform(53, &[d, h], -a1, a1),
        uniform(54, &[h], -0.1, 0.1),
        uniform(55, &[h, c], -a2, a2),
        uniform(56, &[c], -0.1, 0.1),
    );
    let labels = Tensor::from_vec(&[b], randint(52, b, c as u32));
    (params, uniform(51, &[b, d], 0.0, 1.0), labels)
}

/// The fwd and grad cases at the anchor's size.
pub fn cases() -> Vec<Case> {
    let mut cases = Vec::new();
    for dims in SIZES {
        let (b, d, h, c) = dims;
        let size = format!("B={b},{d}-{h}-{c}");
        cases.push(Case {
            workload: "W5",
            variant: "fwd",
            size: size.clone(),
            make: Box::new(move || runner(|(p, x, l)| loss(p, x, l), inputs(dims))),
        });
        cases.push(Case {
            workload: "W5",
            variant: "grad",
            size,
            make: Box::new(move || {
                // Only the parameters are differentiated; the gradient's x and labels entries are
                // dropped inside the jitted function, so they are never materialised.
                let g = |args: (Params, Tensor, Tensor)| {
                    grad_argnums(|(p, x, l): (Params, Tensor, Tensor)| loss(p, x, l), &[0])(args).0
                };
                runner(g, inputs(dims))
            }),
        });
    }
    cases
}
