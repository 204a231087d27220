//! Small elementwise methods built from primitives: `square`, `reciprocal`, `sigmoid`, `relu`.

use crate::{Tensor, lax, where_};
use kiln_ir::UnaryOp;

impl Tensor {
    /// `x * x` (`jnp.square`).
    #[track_caller]
    pub fn square(&self) -> Tensor {
        self * self
    }

    /// `1 / x` (`jnp.reciprocal`); integer division for ints (truncating, as `/` on integer tensors:
    /// `1 / 2 = 0`; JAX instead promotes ints to float).
    #[track_caller]
    pub fn reciprocal(&self) -> Tensor {
        if self.dtype().is_float() { 1.0 / self } else { Tensor::scalar_like(1.0, self.dtype()) / self }
    }

    /// `1 / (1 + e^-x)` (`jax.nn.sigmoid`, the `logistic` primitive: saturates without overflow).
    #[track_caller]
    pub fn sigmoid(&self) -> Tensor {
        lax::unary(UnaryOp::Logistic, self)
    }

    /// `max(x, 0)` (`jax.nn.relu`), written as `where(x > 0 or x is NaN, x, 0)` so that NaN propagates
    /// and the derivative at 0 is 0, as `jax.nn.relu`'s custom JVP (a `maximum` would split it 0.5).
    #[track_caller]
    pub fn relu(&self) -> Tensor {
        let zero = self.zeros_like();
        let keep = self.gt(&zero).logical_or(&self.ne(self));
        where_(&keep, self, &zero)
    }
}
