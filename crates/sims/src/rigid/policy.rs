//! Deterministic policies for rollouts and analytic policy gradients: a linear map or a small MLP,
//! `tanh` after every layer (so actions lie in `[−1, 1]`, Brax's action range), with parameters as a
//! pytree ([`Policy`]) that `grad` and the optimizers take directly.
//!
//! ```
//! use kiln::prelude::*;
//! use kiln_sims::rigid::policy::Policy;
//! let p = Policy::mlp(&kiln::random::key(0u32), &[4, 8, 1], DType::F32);
//! let a = p.apply(&Tensor::zeros(DType::F32, &[16, 4])); // a batch of 16 observations
//! assert_eq!(a.shape().dims(), &[16, 1]);
//! assert!(a.to_vec::<f32>().iter().all(|v| v.abs() <= 1.0));
//! ```

use kiln::prelude::*;
use kiln::random;

/// One dense layer: `y = x · w + b`, `w: [in, out]`, `b: [out]`.
#[derive(Tree, Clone, Debug)]
pub struct Dense {
    /// Weights `[in, out]`.
    pub w: Tensor,
    /// Bias `[out]`.
    pub b: Tensor,
}

/// A policy `obs [..., obs] → action [..., act]`: dense layers, each followed by `tanh`.
/// One layer is a linear policy (`tanh(x·w + b)`); more make an MLP with `tanh` hidden units.
#[derive(Tree, Clone, Debug)]
pub struct Policy {
    /// The layers, input first.
    pub layers: Vec<Dense>,
}

impl Policy {
    /// An MLP with layer sizes `sizes` (`[obs, hidden…, act]`, at least two entries): weights
    /// `N(0, 1/fan_in)` (LeCun normal) from `key`, biases 0.
    ///
    /// # Panics
    /// If `sizes` has fewer than two entries.
    pub fn mlp(key: &Tensor, sizes: &[usize], dtype: DType) -> Policy {
        assert!(sizes.len() >= 2, "Policy::mlp needs [obs, ..., act], got {sizes:?}");
        let keys = random::split(key, sizes.len() - 1);
        let layers = sizes
            .windows(2)
            .enumerate()
            .map(|(i, io)| Dense {
                w: &random::normal(&keys.index(i as i64), &[io[0], io[1]], dtype)
                    * (1.0 / (io[0] as f64).sqrt()),
                b: Tensor::zeros(dtype, &[io[1]]),
            })
            .collect();
        Policy { layers }
    }

    /// A linear policy `tanh(x·w + b)` with `w ~ scale · N(0, 1)` from `key`, `b = 0`
    /// (`scale = 0` gives the zero policy).
    pub fn linear(key: &Tensor, obs: usize, act: usize, dtype: DType, scale: f64) -> Policy {
        let w = &random::normal(key, &[obs, act], dtype) * scale;
        Policy { layers: vec![Dense { w, b: Tensor::zeros(dtype, &[act]) }] }
    }

    /// The actions for observations `obs: [..., obs]` → `[..., act]`, each in `[−1, 1]`.
    pub fn apply(&self, obs: &Tensor) -> Tensor {
        self.layers.iter().fold(obs.clone(), |x, l| (&x.matmul(&l.w) + &l.b).tanh())
    }

    /// Number of scalar parameters.
    pub fn num_params(&self) -> usize {
        self.leaves().iter().map(|t| t.shape().size()).sum()
    }
}
