//! Elementwise primitives, conversions, `iota` and `threefry2x32`.

use crate::{Array, BinaryOp, CompareOp, DType, Shape, UnaryOp};

pub(super) fn unary(op: UnaryOp, x: &Array) -> Array {
    todo!("{op:?} {x:?}")
}
pub(super) fn binary(op: BinaryOp, x: &Array, y: &Array) -> Array {
    todo!("{op:?} {x:?} {y:?}")
}
pub(super) fn compare(op: CompareOp, x: &Array, y: &Array) -> Array {
    todo!("{op:?} {x:?} {y:?}")
}
/// `pred` is bool of the arms' shape or a bool scalar.
pub(super) fn select(pred: &Array, on_true: &Array, on_false: &Array) -> Array {
    todo!("{pred:?} {on_true:?} {on_false:?}")
}
/// `lo`/`hi` have x's type or are scalars of x's dtype.
pub(super) fn clamp(lo: &Array, x: &Array, hi: &Array) -> Array {
    todo!("{lo:?} {x:?} {hi:?}")
}
pub(super) fn convert(x: &Array, dtype: DType) -> Array {
    todo!("{x:?} {dtype:?}")
}
pub(super) fn bitcast(x: &Array, dtype: DType) -> Array {
    todo!("{x:?} {dtype:?}")
}
pub(super) fn iota(dtype: DType, shape: &Shape, dimension: usize) -> Array {
    todo!("{dtype:?} {shape:?} {dimension}")
}
pub(super) fn threefry2x32(k0: &Array, k1: &Array, x0: &Array, x1: &Array) -> Vec<Array> {
    todo!("{k0:?} {k1:?} {x0:?} {x1:?}")
}
