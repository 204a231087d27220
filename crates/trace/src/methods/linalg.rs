//! `dot`, `matmul`, `inner` and `outer` with `jax.numpy` semantics, on `dot_general`.

use super::fail1;
use crate::numpy::{bin, broadcast_shapes};
use crate::{Tensor, lax};
use kiln_ir::{BinaryOp, DType};

/// Dtypes of both operands equal and numeric; otherwise the message.
fn check_dtypes(a: &Tensor, b: &Tensor) -> Result<(), String> {
    if a.dtype() != b.dtype() {
        return Err(format!("dtypes {} and {} differ (use astype)", a.dtype(), b.dtype()));
    }
    if a.dtype() == DType::Bool {
        return Err("dtype bool is not numeric".into());
    }
    Ok(())
}

/// `dot_general` contracting `a`'s axis `ca` with `b`'s axis `cb`, no batch dims.
#[track_caller]
fn contract(a: &Tensor, b: &Tensor, ca: usize, cb: usize) -> Tensor {
    lax::dot_general(a, b, (&[ca], &[cb]), (&[], &[]), None)
}

impl Tensor {
    /// `jnp.dot`: a scalar operand multiplies elementwise; 1-D·1-D is the inner product; otherwise
    /// the sum product over the last axis of `self` and the second-to-last of `other` (its only axis
    /// if 1-D), giving `self.shape[:-1] + other.shape[:-2] + other.shape[-1:]`.
    #[track_caller]
    pub fn dot(&self, other: &Tensor) -> Tensor {
        let ops = [self, other];
        if let Err(m) = check_dtypes(self, other) {
            return fail1("dot", &ops, m);
        }
        let (sa, sb) = (self.shape(), other.shape());
        if sa.rank() == 0 || sb.rank() == 0 {
            return bin(BinaryOp::Mul, self, other);
        }
        let (ca, cb) = (sa.rank() - 1, sb.rank().saturating_sub(2));
        if sa[ca] != sb[cb] {
            let msg =
                format!("shapes {sa} and {sb} not aligned: {} (dim {ca}) != {} (dim {cb})", sa[ca], sb[cb]);
            return fail1("dot", &ops, msg);
        }
        contract(self, other, ca, cb)
    }

    /// `jnp.matmul` (`@`): matrix product over the last two axes with numpy broadcasting of the
    /// leading (batch) axes; a 1-D `self` acts as a row `(1, k)` and a 1-D `other` as a column
    /// `(k, 1)`, the added axis removed from the result. Scalars are an error, as are inner sizes
    /// that differ (the message names `matmul` and both shapes).
    #[track_caller]
    pub fn matmul(&self, other: &Tensor) -> Tensor {
        let ops = [self, other];
        if let Err(m) = check_dtypes(self, other) {
            return fail1("matmul", &ops, m);
        }
        let (sa, sb) = (self.shape(), other.shape());
        let (ra, rb) = (sa.rank(), sb.rank());
        if ra == 0 || rb == 0 {
            let msg = format!("operands must have at least one dimension, got shapes {sa} and {sb}");
            return fail1("matmul", &ops, msg);
        }
        let (ka, kb_axis) = (sa[ra - 1], if rb == 1 { 0 } else { rb - 2 });
        if ka != sb[kb_axis] {
            let msg = format!("inner dimensions differ: {sa} @ {sb} ({ka} != {})", sb[kb_axis]);
            return fail1("matmul", &ops, msg);
        }
        if rb <= 2 || ra == 1 {
            // One side has no batch axes: a plain contraction yields `a[:-1] ++ b[:-2] ++ b[-1:]`,
            // which is matmul's result shape here without broadcasting anything.
            return contract(self, other, ra - 1, kb_axis);
        }
        // Both have rank >= 2 here and `other` has batch axes.
        let (ba, bb) = (&sa.dims()[..ra - 2], &sb.dims()[..rb - 2]);
        let Some(batch) = broadcast_shapes(ba, bb) else {
            let msg = format!("batch dimensions of shapes {sa} and {sb} cannot be broadcast together");
            return fail1("matmul", &ops, msg);
        };
        let nb = batch.len();
        let with = |tail: &[usize]| batch.iter().chain(tail).copied().collect::<Vec<_>>();
        let a = self.broadcast_unchecked(&with(&sa.dims()[ra - 2..]));
        let b = other.broadcast_unchecked(&with(&sb.dims()[rb - 2..]));
        let batch_axes: Vec<usize> = (0..nb).collect();
        lax::dot_general(&a, &b, (&[nb + 1], &[nb]), (&batch_axes, &batch_axes), None)
    }

    /// `jnp.inner`: the sum product over the last axes of both, giving
    /// `self.shape[:-1] + other.shape[:-1]`; a scalar operand multiplies elementwise.
    #[track_caller]
    pub fn inner(&self, other: &Tensor) -> Tensor {
        let ops = [self, other];
        if let Err(m) = check_dtypes(self, other) {
            return fail1("inner", &ops, m);
        }
        let (sa, sb) = (self.shape(), other.shape());
        if sa.rank() == 0 || sb.rank() == 0 {
            return bin(BinaryOp::Mul, self, other);
        }
        let (ca, cb) = (sa.rank() - 1, sb.rank() - 1);
        if sa[ca] != sb[cb] {
            let msg = format!("last dimensions of shapes {sa} and {sb} differ");
            return fail1("inner", &ops, msg);
        }
        contract(self, other, ca, cb)
    }

    /// `jnp.outer`: `result[i, j] = self.flat[i] * other.flat[j]` (both flattened first).
    #[track_caller]
    pub fn outer(&self, other: &Tensor) -> Tensor {
        let ops = [self, other];
        if let Err(m) = check_dtypes(self, other) {
            return fail1("outer", &ops, m);
        }
        let col = lax::reshape(self, &[self.size(), 1]);
        let row = lax::reshape(other, &[1, other.size()]);
        bin(BinaryOp::Mul, &col, &row)
    }
}
