//! `gather`, `scatter`/`scatter_add` and `segment_sum`, with XLA's out-of-range rules.
//!
//! Gather and scatter share one index walk ([`rows`]): the operand is viewed as
//! `batch ++ pre ++ [axis] ++ suffix` and flattened to those four counts, so every (batch, pre, index)
//! triple of the result (or of `updates`) addresses one contiguous run of `suffix` elements of the
//! operand. Data is copied to row-major `Vec`s first, so the operand's memory layout does not matter.

use crate::{Array, Element, IndexMode, ScatterOp};
use ndarray::{ArrayD, IxDyn};

/// What the indexing primitives need of an element type beyond [`Element`].
trait IndexElem: Element {
    /// What a `FillOrDrop` gather reads out of range: JAX's `mode="fill"` defaults.
    const FILL: Self;
    /// The combination of `scatter_add` and `segment_sum` (ints wrap; bool: or, as XLA's add on pred).
    fn add(self, other: Self) -> Self;
}

impl IndexElem for f32 {
    const FILL: f32 = f32::NAN;
    fn add(self, other: f32) -> f32 {
        self + other
    }
}
impl IndexElem for f64 {
    const FILL: f64 = f64::NAN;
    fn add(self, other: f64) -> f64 {
        self + other
    }
}
impl IndexElem for i32 {
    const FILL: i32 = i32::MIN;
    fn add(self, other: i32) -> i32 {
        self.wrapping_add(other)
    }
}
impl IndexElem for u32 {
    const FILL: u32 = u32::MAX;
    fn add(self, other: u32) -> u32 {
        self.wrapping_add(other)
    }
}
impl IndexElem for bool {
    const FILL: bool = true;
    fn add(self, other: bool) -> bool {
        self || other
    }
}

/// The operand's shape `batch ++ pre ++ [axis] ++ suffix` flattened to element counts, and the count
/// of the indices' non-batch dims.
struct Layout {
    batch: usize,
    pre: usize,
    axis: usize,
    suffix: usize,
    idx: usize,
}

/// Splits the shapes and returns the gather result shape
/// `x[..axis] ++ indices[batch_dims..] ++ x[axis+1..]`.
fn layout(x: &[usize], indices: &[usize], axis: usize, batch_dims: usize) -> (Layout, Vec<usize>) {
    assert!(
        batch_dims <= axis && axis < x.len() && batch_dims <= indices.len(),
        "gather/scatter: axis {axis}, batch_dims {batch_dims} do not fit operand {x:?} and indices {indices:?}"
    );
    assert_eq!(x[..batch_dims], indices[..batch_dims], "gather/scatter: batch dims differ");
    let prod = |d: &[usize]| d.iter().product::<usize>();
    let l = Layout {
        batch: prod(&x[..batch_dims]),
        pre: prod(&x[batch_dims..axis]),
        axis: x[axis],
        suffix: prod(&x[axis + 1..]),
        idx: prod(&indices[batch_dims..]),
    };
    let out = [&x[..axis], &indices[batch_dims..], &x[axis + 1..]].concat();
    (l, out)
}

/// Index values widened to `i64`, so that u32 and i32 indices clamp alike.
fn index_values(indices: &Array) -> Vec<i64> {
    match indices {
        Array::I32(a) => a.iter().map(|&i| i64::from(i)).collect(),
        Array::U32(a) => a.iter().map(|&i| i64::from(i)).collect(),
        Array::F32(_) | Array::F64(_) | Array::Bool(_) => {
            unreachable!("indices are i32 or u32 (the shape rule checks), got {}", indices.dtype())
        }
    }
}

/// Maps an index into `[0, size)`, or `None` where gather reads the fill value and scatter drops the
/// update. An axis of size 0 has nothing to clamp into, so `Clip` gives `None` there too.
fn resolve(i: i64, size: usize, mode: IndexMode) -> Option<usize> {
    let size = i64::try_from(size).expect("axis size fits i64");
    if size == 0 {
        return None;
    }
    let i = match mode {
        IndexMode::Clip => i.clamp(0, size - 1),
        IndexMode::FillOrDrop => i,
    };
    // In range here for Clip; for FillOrDrop the filter drops the rest.
    (0..size).contains(&i).then(|| usize::try_from(i).expect("non-negative"))
}

/// For each (batch, pre, index) triple, in row-major order of the gather result: the flat offset of
/// the operand run `x[b, p, idx(b, i), ..]` it addresses (`None`: out of range, see [`resolve`]).
fn rows(l: &Layout, idx: &[i64], mode: IndexMode) -> Vec<Option<usize>> {
    let mut rows = Vec::with_capacity(l.batch * l.pre * l.idx);
    for b in 0..l.batch {
        for p in 0..l.pre {
            for i in 0..l.idx {
                let a = resolve(idx[b * l.idx + i], l.axis, mode);
                rows.push(a.map(|a| ((b * l.pre + p) * l.axis + a) * l.suffix));
            }
        }
    }
    rows
}

fn row_major<T: Copy>(a: &ArrayD<T>) -> Vec<T> {
    a.iter().copied().collect()
}

fn build<T: Element>(shape: &[usize], data: Vec<T>) -> Array {
    T::wrap(ArrayD::from_shape_vec(IxDyn(shape), data).expect("data length matches the shape"))
}

fn gather_t<T: IndexElem>(x: &ArrayD<T>, rows: &[Option<usize>], suffix: usize, shape: &[usize]) -> Array {
    let xs = row_major(x);
    let mut out = Vec::with_capacity(rows.len() * suffix);
    for r in rows {
        match r {
            Some(r) => out.extend_from_slice(&xs[*r..*r + suffix]),
            None => out.extend(std::iter::repeat_n(T::FILL, suffix)),
        }
    }
    build(shape, out)
}

/// `gather(x, indices)` along `axis` with `batch_dims` leading dims shared by `x` and `indices`
/// (TF's `gather`): `out[b.., p.., i.., s..] = x[b.., p.., indices[b.., i..], s..]`.
///
/// Out-of-range indices clamp (`Clip`) or read the fill value (`FillOrDrop`: NaN, `i32::MIN`,
/// `u32::MAX`, true). When `x`'s axis has size 0 (and the result is not empty), both modes read the
/// fill value: there is no element to clamp to.
pub(super) fn gather(x: &Array, indices: &Array, axis: usize, batch_dims: usize, mode: IndexMode) -> Array {
    let (l, shape) = layout(x.shape().dims(), indices.shape().dims(), axis, batch_dims);
    let rows = rows(&l, &index_values(indices), mode);
    crate::with_array!(x, a => gather_t(a, &rows, l.suffix, &shape))
}

fn scatter_t<T: IndexElem>(
    op: ScatterOp,
    x: &ArrayD<T>,
    updates: &Array,
    rows: &[Option<usize>],
    suffix: usize,
) -> Array {
    let upd = row_major(T::view(updates).expect("updates have the operand's dtype (the shape rule checks)"));
    let mut out = row_major(x);
    // Rows come in row-major order of `updates`, so with duplicates the last `Set` wins and `Add`
    // accumulates in that order.
    for (k, r) in rows.iter().enumerate() {
        let Some(r) = *r else { continue };
        let (dst, src) = (&mut out[r..r + suffix], &upd[k * suffix..(k + 1) * suffix]);
        match op {
            ScatterOp::Set => dst.copy_from_slice(src),
            ScatterOp::Add => dst.iter_mut().zip(src).for_each(|(d, &s)| *d = d.add(s)),
        }
    }
    build(x.shape(), out)
}

/// The transpose of [`gather`] with the same parameters: `updates` has gather's result shape and each
/// of its elements is written (`Set`) or added (`Add`) into a copy of `x` where gather would have read
/// it. `Clip` clamps indices; `FillOrDrop` drops out-of-range updates (so does `Clip` on an empty axis).
pub(super) fn scatter(
    op: ScatterOp,
    x: &Array,
    indices: &Array,
    updates: &Array,
    axis: usize,
    batch_dims: usize,
    mode: IndexMode,
) -> Array {
    let (l, shape) = layout(x.shape().dims(), indices.shape().dims(), axis, batch_dims);
    assert_eq!(updates.shape().dims(), shape, "scatter: updates must have gather's result shape");
    let rows = rows(&l, &index_values(indices), mode);
    crate::with_array!(x, a => scatter_t(op, a, updates, &rows, l.suffix))
}

fn segment_sum_t<T: IndexElem>(data: &ArrayD<T>, ids: &[i64], num_segments: usize) -> Array {
    let shape = [&[num_segments], &data.shape()[1..]].concat();
    let row: usize = data.shape()[1..].iter().product();
    let xs = row_major(data);
    let mut out = vec![T::default(); num_segments * row];
    for (i, &id) in ids.iter().enumerate() {
        // Negative and too-large ids are dropped (never clamped).
        let Some(s) = usize::try_from(id).ok().filter(|&s| s < num_segments) else { continue };
        let src = &xs[i * row..(i + 1) * row];
        out[s * row..(s + 1) * row].iter_mut().zip(src).for_each(|(d, &x)| *d = d.add(x));
    }
    build(&shape, out)
}

/// `segment_sum(data, ids)`: `data` is `[n, ...]`, `ids` an int `[n]`; the result `[num_segments, ...]`
/// starts at zero and row `i` of `data` is added into row `ids[i]` (in order of `i`); out-of-range ids
/// are dropped.
pub(super) fn segment_sum(data: &Array, segment_ids: &Array, num_segments: usize) -> Array {
    let ids = index_values(segment_ids);
    assert!(
        data.shape().rank() >= 1 && data.shape()[0] == ids.len(),
        "segment_sum: data {} and {} ids",
        data.shape(),
        ids.len()
    );
    crate::with_array!(data, a => segment_sum_t(a, &ids, num_segments))
}

#[cfg(test)]
mod tests {
    use super::*;
    use IndexMode::{Clip, FillOrDrop};

    fn f32s(shape: &[usize], data: &[f32]) -> Array {
        Array::from_vec(shape, data.to_vec())
    }
    fn i32s(shape: &[usize], data: &[i32]) -> Array {
        Array::from_vec(shape, data.to_vec())
    }
    fn u32s(shape: &[usize], data: &[u32]) -> Array {
        Array::from_vec(shape, data.to_vec())
    }
    /// `0, 1, 2, ...` as f32 of `shape`.
    fn iota(shape: &[usize]) -> Array {
        let n: usize = shape.iter().product();
        Array::from_vec(shape, (0..n).map(|i| i as f32).collect::<Vec<_>>())
    }

    #[test]
    fn gather_rank1() {
        let x = f32s(&[4], &[10., 20., 30., 40.]);
        let got = gather(&x, &i32s(&[4], &[3, 0, 0, 2]), 0, 0, Clip);
        assert_eq!(got, f32s(&[4], &[40., 10., 10., 30.]));
        // 2-D indices give a 2-D result; a scalar index a scalar.
        let got = gather(&x, &i32s(&[2, 2], &[1, 2, 3, 1]), 0, 0, FillOrDrop);
        assert_eq!(got, f32s(&[2, 2], &[20., 30., 40., 20.]));
        let got = gather(&x, &Array::scalar(2i32), 0, 0, Clip);
        assert_eq!(got, Array::scalar(30f32));
    }

    #[test]
    fn gather_rank3_middle_axis() {
        // x[p,a,s] = p*6 + a*2 + s, shape (2,3,2); out[p,i,s] = x[p, idx[i], s] with idx = [2, 0].
        let got = gather(&iota(&[2, 3, 2]), &i32s(&[2], &[2, 0]), 1, 0, Clip);
        // out[0,0,:] = x[0,2,:] = [4,5]; out[0,1,:] = x[0,0,:] = [0,1]; out[1,0,:] = [10,11]; out[1,1,:] = [6,7]
        assert_eq!(got, f32s(&[2, 2, 2], &[4., 5., 0., 1., 10., 11., 6., 7.]));
    }

    #[test]
    fn gather_batch_dims_1_rank2() {
        // out[b,i] = x[b, idx[b,i]]
        let x = f32s(&[2, 3], &[1., 2., 3., 4., 5., 6.]);
        let got = gather(&x, &i32s(&[2, 2], &[2, 0, 1, 1]), 1, 1, Clip);
        assert_eq!(got, f32s(&[2, 2], &[3., 1., 5., 5.]));
    }

    #[test]
    fn gather_batch_dims_1_rank4_with_pre_dim() {
        // x[b,p,a,0] = b*6 + p*3 + a, shape (2,2,3,1); idx (2,1) = [[2],[0]];
        // out[b,p,i,0] = x[b,p,idx[b,i],0], shape (2,2,1,1).
        let got = gather(&iota(&[2, 2, 3, 1]), &i32s(&[2, 1], &[2, 0]), 2, 1, Clip);
        // out[0,p] = p*3 + 2 -> 2, 5; out[1,p] = 6 + p*3 + 0 -> 6, 9
        assert_eq!(got, f32s(&[2, 2, 1, 1], &[2., 5., 6., 9.]));
    }

    #[test]
    fn gather_batch_dims_2_rank4() {
        // x[b0,b1,a,s] = b0*12 + b1*6 + a*2 + s, shape (2,2,3,2); idx (2,2,1) = [[[2],[0]],[[1],[2]]].
        let got = gather(&iota(&[2, 2, 3, 2]), &i32s(&[2, 2, 1], &[2, 0, 1, 2]), 2, 2, Clip);
        // x[0,0,2,:] = [4,5]; x[0,1,0,:] = [6,7]; x[1,0,1,:] = [14,15]; x[1,1,2,:] = 12+6+4 = [22,23]
        assert_eq!(got, f32s(&[2, 2, 1, 2], &[4., 5., 6., 7., 14., 15., 22., 23.]));
    }

    #[test]
    fn gather_out_of_range_i32() {
        let x = f32s(&[3], &[1., 2., 3.]);
        let idx = i32s(&[5], &[-1, 3, 1, i32::MAX, i32::MIN]);
        assert_eq!(gather(&x, &idx, 0, 0, Clip), f32s(&[5], &[1., 3., 2., 3., 1.]));
        let nan = f32::NAN;
        assert_eq!(gather(&x, &idx, 0, 0, FillOrDrop), f32s(&[5], &[nan, nan, 2., nan, nan]));
    }

    #[test]
    fn gather_u32_indices_and_fill_values() {
        let idx = u32s(&[4], &[u32::MAX, 0, 2, 3]);
        let x = i32s(&[3], &[7, 8, 9]);
        // u32::MAX is huge, never negative: it clamps to the last element.
        assert_eq!(gather(&x, &idx, 0, 0, Clip), i32s(&[4], &[9, 7, 9, 9]));
        assert_eq!(gather(&x, &idx, 0, 0, FillOrDrop), i32s(&[4], &[i32::MIN, 7, 9, i32::MIN]));
        let x = u32s(&[3], &[7, 8, 9]);
        assert_eq!(gather(&x, &idx, 0, 0, FillOrDrop), u32s(&[4], &[u32::MAX, 7, 9, u32::MAX]));
        let x = Array::from_vec(&[3], vec![false, false, false]);
        assert_eq!(gather(&x, &idx, 0, 0, FillOrDrop), Array::from_vec(&[4], vec![true, false, false, true]));
        let x = Array::from_vec(&[3], vec![1f64, 2., 3.]);
        assert_eq!(
            gather(&x, &idx, 0, 0, FillOrDrop),
            Array::from_vec(&[4], vec![f64::NAN, 1., 3., f64::NAN])
        );
    }

    #[test]
    fn gather_fill_on_rows() {
        // A whole suffix row is filled: x (2,2), axis 0, idx [1, 5, -3].
        let x = f32s(&[2, 2], &[1., 2., 3., 4.]);
        let nan = f32::NAN;
        let got = gather(&x, &i32s(&[3], &[1, 5, -3]), 0, 0, FillOrDrop);
        assert_eq!(got, f32s(&[3, 2], &[3., 4., nan, nan, nan, nan]));
        let got = gather(&x, &i32s(&[3], &[1, 5, -3]), 0, 0, Clip);
        assert_eq!(got, f32s(&[3, 2], &[3., 4., 3., 4., 1., 2.]));
    }

    #[test]
    fn gather_keeps_special_floats_bitwise() {
        let x = f32s(&[4], &[-0.0, f32::INFINITY, f32::NEG_INFINITY, f32::NAN]);
        let got = gather(&x, &i32s(&[4], &[3, 2, 1, 0]), 0, 0, Clip);
        assert_eq!(got, f32s(&[4], &[f32::NAN, f32::NEG_INFINITY, f32::INFINITY, -0.0]));
    }

    #[test]
    fn gather_empty_dims() {
        // Empty axis: nothing to clamp to, both modes read the fill value.
        let x = f32s(&[2, 0], &[]);
        let nan = f32::NAN;
        for mode in [Clip, FillOrDrop] {
            assert_eq!(gather(&x, &i32s(&[1], &[0]), 1, 0, mode), f32s(&[2, 1], &[nan, nan]));
        }
        // Empty indices, empty non-indexed dim.
        assert_eq!(gather(&iota(&[3, 2]), &i32s(&[0], &[]), 0, 0, Clip), f32s(&[0, 2], &[]));
        assert_eq!(gather(&f32s(&[0, 3], &[]), &i32s(&[2], &[0, 2]), 1, 0, Clip), f32s(&[0, 2], &[]));
    }

    #[test]
    fn scatter_duplicates() {
        let x = f32s(&[4], &[0., 0., 0., 0.]);
        let (idx, upd) = (i32s(&[3], &[1, 3, 1]), f32s(&[3], &[10., 20., 30.]));
        // Set: the later update to index 1 (30) wins.
        assert_eq!(scatter(ScatterOp::Set, &x, &idx, &upd, 0, 0, Clip), f32s(&[4], &[0., 30., 0., 20.]));
        // Add: 10 + 30 = 40.
        assert_eq!(scatter(ScatterOp::Add, &x, &idx, &upd, 0, 0, Clip), f32s(&[4], &[0., 40., 0., 20.]));
    }

    #[test]
    fn scatter_out_of_range_clip_vs_drop() {
        let x = f32s(&[3], &[1., 1., 1.]);
        let (idx, upd) = (i32s(&[3], &[-2, 5, 1]), f32s(&[3], &[10., 20., 30.]));
        // Clip: indices become 0, 2, 1.
        assert_eq!(scatter(ScatterOp::Add, &x, &idx, &upd, 0, 0, Clip), f32s(&[3], &[11., 31., 21.]));
        assert_eq!(scatter(ScatterOp::Set, &x, &idx, &upd, 0, 0, Clip), f32s(&[3], &[10., 30., 20.]));
        // Drop: only index 1 lands.
        assert_eq!(scatter(ScatterOp::Add, &x, &idx, &upd, 0, 0, FillOrDrop), f32s(&[3], &[1., 31., 1.]));
        assert_eq!(scatter(ScatterOp::Set, &x, &idx, &upd, 0, 0, FillOrDrop), f32s(&[3], &[1., 30., 1.]));
        // u32: MAX clamps to the end / is dropped.
        let idx = u32s(&[2], &[u32::MAX, 0]);
        let upd = f32s(&[2], &[5., 6.]);
        assert_eq!(scatter(ScatterOp::Set, &x, &idx, &upd, 0, 0, Clip), f32s(&[3], &[6., 1., 5.]));
        assert_eq!(scatter(ScatterOp::Set, &x, &idx, &upd, 0, 0, FillOrDrop), f32s(&[3], &[6., 1., 1.]));
        // The operand is not modified (the result is a copy).
        assert_eq!(x, f32s(&[3], &[1., 1., 1.]));
    }

    #[test]
    fn scatter_batch_dims_1() {
        // x (2,3) zeros; idx (2,2) = [[0,0],[2,1]]; upd = [[1,2],[3,4]]; axis 1.
        let x = i32s(&[2, 3], &[0; 6]);
        let (idx, upd) = (i32s(&[2, 2], &[0, 0, 2, 1]), i32s(&[2, 2], &[1, 2, 3, 4]));
        // Add: row 0: x[0,0] = 1 + 2 = 3; row 1: x[1,2] = 3, x[1,1] = 4.
        assert_eq!(scatter(ScatterOp::Add, &x, &idx, &upd, 1, 1, Clip), i32s(&[2, 3], &[3, 0, 0, 0, 4, 3]));
        // Set: row 0: the last (2) wins.
        assert_eq!(scatter(ScatterOp::Set, &x, &idx, &upd, 1, 1, Clip), i32s(&[2, 3], &[2, 0, 0, 0, 4, 3]));
    }

    #[test]
    fn scatter_middle_axis_rows() {
        // x (2,3,2) zeros, axis 1, idx [2,2], upd (2,2,2) = [[[1,2],[3,4]],[[5,6],[7,8]]]:
        // x[p,2,s] += upd[p,0,s] + upd[p,1,s] -> x[0,2,:] = [4,6], x[1,2,:] = [12,14].
        let x = i32s(&[2, 3, 2], &[0; 12]);
        let got = scatter(
            ScatterOp::Add,
            &x,
            &i32s(&[2], &[2, 2]),
            &i32s(&[2, 2, 2], &[1, 2, 3, 4, 5, 6, 7, 8]),
            1,
            0,
            Clip,
        );
        assert_eq!(got, i32s(&[2, 3, 2], &[0, 0, 0, 0, 4, 6, 0, 0, 0, 0, 12, 14]));
    }

    #[test]
    fn scatter_dtypes_and_empty_axis() {
        // u32 add wraps: MAX + 1 = 0.
        let x = u32s(&[2], &[u32::MAX, 5]);
        let got = scatter(ScatterOp::Add, &x, &i32s(&[1], &[0]), &u32s(&[1], &[1]), 0, 0, Clip);
        assert_eq!(got, u32s(&[2], &[0, 5]));
        // bool set.
        let x = Array::from_vec(&[3], vec![false; 3]);
        let got =
            scatter(ScatterOp::Set, &x, &i32s(&[1], &[1]), &Array::from_vec(&[1], vec![true]), 0, 0, Clip);
        assert_eq!(got, Array::from_vec(&[3], vec![false, true, false]));
        // -0.0 written by Set keeps its sign; NaN added propagates.
        let x = f32s(&[2], &[1., 1.]);
        let got = scatter(ScatterOp::Set, &x, &i32s(&[1], &[0]), &f32s(&[1], &[-0.0]), 0, 0, Clip);
        assert_eq!(got, f32s(&[2], &[-0.0, 1.]));
        let got = scatter(ScatterOp::Add, &x, &i32s(&[1], &[1]), &f32s(&[1], &[f32::INFINITY]), 0, 0, Clip);
        assert_eq!(got, f32s(&[2], &[1., f32::INFINITY]));
        // Empty axis: nothing is written, even with Clip.
        let x = f32s(&[2, 0], &[]);
        let got = scatter(ScatterOp::Set, &x, &i32s(&[1], &[0]), &f32s(&[2, 1], &[1., 2.]), 1, 0, Clip);
        assert_eq!(got, x);
    }

    #[test]
    fn segment_sum_duplicates_and_out_of_range() {
        let data = f32s(&[5], &[1., 2., 3., 4., 5.]);
        // ids -1 and 3 are dropped; seg0 = 1 + 3 = 4, seg1 = 0, seg2 = 2.
        let got = segment_sum(&data, &i32s(&[5], &[0, 2, 0, -1, 3]), 3);
        assert_eq!(got, f32s(&[3], &[4., 0., 2.]));
    }

    #[test]
    fn segment_sum_2d_u32_ids() {
        // rows [1,2],[3,4],[5,6],[7,8]; ids [1,1,MAX,0]: seg0 = [7,8], seg1 = [1+3, 2+4] = [4,6].
        let data = i32s(&[4, 2], &[1, 2, 3, 4, 5, 6, 7, 8]);
        let got = segment_sum(&data, &u32s(&[4], &[1, 1, u32::MAX, 0]), 2);
        assert_eq!(got, i32s(&[2, 2], &[7, 8, 4, 6]));
    }

    #[test]
    fn segment_sum_edges() {
        // No segments; no data (all zeros); rank-3 data.
        let data = f32s(&[2, 2], &[1., 2., 3., 4.]);
        assert_eq!(segment_sum(&data, &i32s(&[2], &[0, 1]), 0), f32s(&[0, 2], &[]));
        assert_eq!(segment_sum(&f32s(&[0, 2], &[]), &i32s(&[0], &[]), 2), f32s(&[2, 2], &[0.; 4]));
        let got = segment_sum(&iota(&[2, 1, 2]), &i32s(&[2], &[1, 1]), 2);
        // seg1 = [0,1] + [2,3] = [2,4]
        assert_eq!(got, f32s(&[2, 1, 2], &[0., 0., 2., 4.]));
        // inf + -inf = NaN, and a NaN row poisons its segment.
        let data = f32s(&[3], &[f32::INFINITY, f32::NEG_INFINITY, f32::NAN]);
        let got = segment_sum(&data, &i32s(&[3], &[0, 0, 1]), 3).to_vec::<f32>().unwrap();
        assert!(got[0].is_nan() && got[1].is_nan());
        assert_eq!(got[2], 0.0);
    }
}
