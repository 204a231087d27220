//! `gather`, `scatter`/`scatter_add` and `segment_sum`, with XLA's out-of-range rules.

use crate::{Array, IndexMode, ScatterOp};

pub(super) fn gather(x: &Array, indices: &Array, axis: usize, batch_dims: usize, mode: IndexMode) -> Array {
    todo!("{x:?} {indices:?} {axis} {batch_dims} {mode:?}")
}
pub(super) fn scatter(
    op: ScatterOp,
    x: &Array,
    indices: &Array,
    updates: &Array,
    axis: usize,
    batch_dims: usize,
    mode: IndexMode,
) -> Array {
    todo!("{op:?} {x:?} {indices:?} {updates:?} {axis} {batch_dims} {mode:?}")
}
pub(super) fn segment_sum(data: &Array, segment_ids: &Array, num_segments: usize) -> Array {
    todo!("{data:?} {segment_ids:?} {num_segments}")
}
