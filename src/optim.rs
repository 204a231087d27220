//! First-order optimizers over pytrees of parameters (optax's `sgd`, `adam`, `clip_by_global_norm`).
//!
//! Parameters and gradients are any [`Tree`] of float tensors with the same structure; updates are
//! computed leaf by leaf in each leaf's dtype, with kiln ops (so they also work on tracers, e.g. a
//! whole training step under `jit`). The state (momenta, step count) lives in the optimizer value.
//!
//! ```
//! use kiln::optim::Adam;
//! use kiln::prelude::*;
//! // Minimize (p - 3)² from p = 0 with Adam.
//! let mut p = Tensor::scalar(0.0f32);
//! let mut opt = Adam::new(0.1);
//! for _ in 0..500 {
//!     let g = grad(|p: Tensor| (&p - 3.0).square())(p.clone());
//!     p = opt.update(&p, &g)?;
//! }
//! assert!((p.item::<f32>() - 3.0).abs() < 1e-2);
//! # Ok::<(), kiln::Error>(())
//! ```

use kiln_ir::DType;
use kiln_trace::{Error, Result, Tensor, Tree};

/// The leaves of `params` and `grads`, checked to have the same structure and leaf types.
fn paired<P: Tree>(what: &str, params: &P, grads: &P) -> Result<(Vec<Tensor>, Vec<Tensor>)> {
    let (p, g) = (params.leaves(), grads.leaves());
    if params.structure() != grads.structure() || p.len() != g.len() {
        return Err(Error::Input {
            message: format!(
                "{what}: gradients have structure {} but parameters have {}",
                grads.structure(),
                params.structure()
            ),
        });
    }
    for (k, (a, b)) in p.iter().zip(&g).enumerate() {
        if a.ty() != b.ty() {
            return Err(Error::Input {
                message: format!("{what}: leaf {k}: gradient is {:?} but parameter is {:?}", b.ty(), a.ty()),
            });
        }
        if !a.dtype().is_float() {
            return Err(Error::Input {
                message: format!(
                    "{what}: leaf {k} has dtype {:?}; optimizers update float leaves",
                    a.dtype()
                ),
            });
        }
    }
    Ok((p, g))
}

/// Stochastic gradient descent with optional (heavy-ball) momentum, optax's `sgd`:
/// `v ← μ·v + g`, `p ← p − lr·v` (with μ = 0: `p ← p − lr·g`).
pub struct Sgd {
    lr: f64,
    momentum: f64,
    velocity: Option<Vec<Tensor>>,
}

impl Sgd {
    /// Plain SGD with learning rate `lr`.
    pub fn new(lr: f64) -> Sgd {
        Sgd { lr, momentum: 0.0, velocity: None }
    }

    /// SGD with heavy-ball momentum `momentum` (optax's `sgd(lr, momentum)`, not Nesterov).
    pub fn with_momentum(lr: f64, momentum: f64) -> Sgd {
        Sgd { lr, momentum, velocity: None }
    }

    /// One step: the updated parameters.
    ///
    /// # Errors
    /// [`Error::Input`] when `grads` does not have `params`' structure, leaf types, or float dtypes, or
    /// when the structure changes between calls; the optimizer's state is then left as it was.
    pub fn update<P: Tree>(&mut self, params: &P, grads: &P) -> Result<P> {
        let (p, g) = paired("Sgd::update", params, grads)?;
        // Checked before the state is taken: a refused update leaves it as it was.
        if let Some(v) = &self.velocity {
            check_state("Sgd::update", v, &p)?;
        }
        let v: Vec<Tensor> = match self.velocity.take() {
            Some(v) if self.momentum != 0.0 => v.iter().zip(&g).map(|(v, g)| v * self.momentum + g).collect(),
            Some(_) | None => g,
        };
        let new = p.iter().zip(&v).map(|(p, v)| p - &(v * self.lr)).collect();
        if self.momentum != 0.0 {
            self.velocity = Some(v);
        }
        Ok(params.rebuild(new))
    }
}

fn check_state(what: &str, state: &[Tensor], p: &[Tensor]) -> Result<()> {
    let same = state.len() == p.len() && state.iter().zip(p).all(|(s, p)| s.ty() == p.ty());
    if same {
        Ok(())
    } else {
        Err(Error::Input {
            message: format!("{what}: the parameters changed structure since the first step"),
        })
    }
}

/// Adam (Kingma & Ba 2015, Algorithm 1; optax's `adam` defaults b1 = 0.9, b2 = 0.999, eps = 1e-8):
/// `m ← b1·m + (1−b1)·g`, `v ← b2·v + (1−b2)·g²`, `p ← p − lr·m̂/(√v̂ + eps)` with
/// `m̂ = m/(1−b1ᵗ)`, `v̂ = v/(1−b2ᵗ)`, t counting from 1. The bias corrections `1−b1ᵗ`, `1−b2ᵗ` are
/// computed in f64 and then applied in the parameters' dtype; optax computes them in the
/// parameters' dtype, so f32 results differ from optax's in the last digits (`1 − 0.999` is
/// 0.00099998713 in f32: about 1e-5 relative in early steps) and agree in f64.
pub struct Adam {
    lr: f64,
    b1: f64,
    b2: f64,
    eps: f64,
    step: i32,
    moments: Option<(Vec<Tensor>, Vec<Tensor>)>,
}

impl Adam {
    /// Adam with learning rate `lr` and optax's default betas and epsilon.
    pub fn new(lr: f64) -> Adam {
        Adam::with_betas(lr, 0.9, 0.999, 1e-8)
    }

    /// Adam with explicit `b1`, `b2` and `eps`.
    pub fn with_betas(lr: f64, b1: f64, b2: f64, eps: f64) -> Adam {
        Adam { lr, b1, b2, eps, step: 0, moments: None }
    }

    /// The number of updates made so far.
    pub fn steps(&self) -> i32 {
        self.step
    }

    /// One step: the updated parameters.
    ///
    /// # Errors
    /// As [`Sgd::update`].
    pub fn update<P: Tree>(&mut self, params: &P, grads: &P) -> Result<P> {
        let (p, g) = paired("Adam::update", params, grads)?;
        // Checked before the moments are taken: a refused update leaves them and the step count.
        if let Some((m, _)) = &self.moments {
            check_state("Adam::update", m, &p)?;
        }
        let (m, v) = match self.moments.take() {
            Some(moments) => moments,
            None => (p.iter().map(Tensor::zeros_like).collect(), p.iter().map(Tensor::zeros_like).collect()),
        };
        self.step += 1;
        let (b1, b2) = (self.b1, self.b2);
        let m: Vec<Tensor> = m.iter().zip(&g).map(|(m, g)| m * b1 + g * (1.0 - b1)).collect();
        let v: Vec<Tensor> = v.iter().zip(&g).map(|(v, g)| v * b2 + g.square() * (1.0 - b2)).collect();
        let c1 = 1.0 - b1.powi(self.step);
        let c2 = 1.0 - b2.powi(self.step);
        let new = p
            .iter()
            .zip(m.iter().zip(&v))
            .map(|(p, (m, v))| {
                let step = (m / c1) / ((v / c2).sqrt() + self.eps);
                p - &(step * self.lr)
            })
            .collect();
        self.moments = Some((m, v));
        Ok(params.rebuild(new))
    }
}

/// The global L2 norm of all leaves of `tree`, `sqrt(Σ_leaves Σ x²)`, as a scalar tensor: f64 if
/// any leaf is f64, else f32 (optax's `global_norm`, whose per-leaf sums promote as jnp does). Each
/// leaf's sum of squares is taken in its own dtype; with no leaves the norm is an f32 zero.
pub fn global_norm<P: Tree>(tree: &P) -> Tensor {
    let leaves = tree.leaves();
    let dtype = if leaves.iter().any(|x| x.dtype() == DType::F64) { DType::F64 } else { DType::F32 };
    let total = leaves
        .iter()
        .map(|x| x.square().sum_all().astype(dtype))
        .fold(Tensor::scalar_like(0.0, dtype), |acc, s| acc + s);
    total.sqrt()
}

/// Scales `grads` so their [`global_norm`] is at most `max_norm` (optax's `clip_by_global_norm`:
/// unchanged when the norm is below `max_norm`, else multiplied by `max_norm / norm`). Returns the
/// clipped gradients and the norm before clipping.
///
/// # Errors
/// [`Error::Input`] when `max_norm` is not positive and finite.
pub fn clip_by_global_norm<P: Tree>(grads: &P, max_norm: f64) -> Result<(P, Tensor)> {
    if !(max_norm > 0.0 && max_norm.is_finite()) {
        return Err(Error::Input {
            message: format!("clip_by_global_norm: max_norm must be positive, got {max_norm}"),
        });
    }
    let norm = global_norm(grads);
    let below = norm.lt(&Tensor::scalar_like(max_norm, norm.dtype()));
    let scale = kiln_trace::where_(&below, &norm.ones_like(), &(norm.ones_like() * max_norm / &norm));
    let clipped = grads.leaves().iter().map(|g| g * &scale.astype(g.dtype())).collect();
    Ok((grads.rebuild(clipped), norm))
}
