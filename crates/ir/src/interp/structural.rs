//! Shape primitives: broadcast, reshape, transpose, rev, slices, concatenate, pad.

use crate::{Array, Shape};

pub(super) fn broadcast_in_dim(x: &Array, shape: &Shape, broadcast_dimensions: &[usize]) -> Array {
    todo!("{x:?} {shape:?} {broadcast_dimensions:?}")
}
pub(super) fn reshape(x: &Array, new_sizes: &Shape) -> Array {
    todo!("{x:?} {new_sizes:?}")
}
pub(super) fn transpose(x: &Array, permutation: &[usize]) -> Array {
    todo!("{x:?} {permutation:?}")
}
pub(super) fn rev(x: &Array, dimensions: &[usize]) -> Array {
    todo!("{x:?} {dimensions:?}")
}
pub(super) fn slice(x: &Array, start: &[usize], limit: &[usize], strides: &[usize]) -> Array {
    todo!("{x:?} {start:?} {limit:?} {strides:?}")
}
/// One integer scalar start per dimension, clamped to `[0, dim - size]`.
pub(super) fn dynamic_slice(x: &Array, starts: &[&Array], slice_sizes: &[usize]) -> Array {
    todo!("{x:?} {starts:?} {slice_sizes:?}")
}
pub(super) fn dynamic_update_slice(x: &Array, update: &Array, starts: &[&Array]) -> Array {
    todo!("{x:?} {update:?} {starts:?}")
}
pub(super) fn concatenate(xs: &[&Array], dimension: usize) -> Array {
    todo!("{xs:?} {dimension}")
}
pub(super) fn pad(x: &Array, padding_value: &Array, low: &[i64], high: &[i64], interior: &[usize]) -> Array {
    todo!("{x:?} {padding_value:?} {low:?} {high:?} {interior:?}")
}
