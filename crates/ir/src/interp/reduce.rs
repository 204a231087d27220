//! Reductions, prefix scans, sort and `dot_general`.

use crate::{ArgOp, Array, CumulativeOp, DType, ReduceOp};

pub(super) fn reduce(op: ReduceOp, x: &Array, axes: &[usize]) -> Array {
    todo!("{op:?} {x:?} {axes:?}")
}
pub(super) fn arg_reduce(op: ArgOp, x: &Array, axis: usize, index_dtype: DType) -> Array {
    todo!("{op:?} {x:?} {axis} {index_dtype:?}")
}
pub(super) fn cumulative(op: CumulativeOp, x: &Array, axis: usize, reverse: bool) -> Array {
    todo!("{op:?} {x:?} {axis} {reverse}")
}
pub(super) fn sort(xs: &[&Array], dimension: usize, num_keys: usize) -> Vec<Array> {
    todo!("{xs:?} {dimension} {num_keys}")
}
/// `contracting` and `batch` are (lhs dims, rhs dims) pairs.
pub(super) fn dot_general(
    lhs: &Array,
    rhs: &Array,
    contracting: (&[usize], &[usize]),
    batch: (&[usize], &[usize]),
    preferred_element_type: Option<DType>,
) -> Array {
    todo!("{lhs:?} {rhs:?} {contracting:?} {batch:?} {preferred_element_type:?}")
}
