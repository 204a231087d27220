//! Shape primitives: broadcast, reshape, transpose, rev, slices, concatenate, pad.
//!
//! Each primitive is one generic function over the element type, dispatched with [`with_array!`];
//! operands are assumed well-typed (the shape rule ran first). Results are always in standard
//! (row-major) layout, so later consumers may rely on `iter()` order = memory order.

use crate::{Array, Element, Shape, with_array};
use ndarray::{ArrayD, ArrayViewD, Axis, IxDyn, Slice};

pub(super) fn broadcast_in_dim(x: &Array, shape: &Shape, broadcast_dimensions: &[usize]) -> Array {
    with_array!(x, a => Element::wrap(broadcast_t(a, shape.dims(), broadcast_dimensions)))
}
pub(super) fn reshape(x: &Array, new_sizes: &Shape) -> Array {
    with_array!(x, a => Element::wrap(from_vec(new_sizes.dims(), a.iter().copied().collect())))
}
pub(super) fn transpose(x: &Array, permutation: &[usize]) -> Array {
    with_array!(x, a => Element::wrap(owned(a.view().permuted_axes(IxDyn(permutation)))))
}
pub(super) fn rev(x: &Array, dimensions: &[usize]) -> Array {
    with_array!(x, a => {
        let mut v = a.view();
        for &d in dimensions {
            v.invert_axis(Axis(d));
        }
        Element::wrap(owned(v))
    })
}
pub(super) fn slice(x: &Array, start: &[usize], limit: &[usize], strides: &[usize]) -> Array {
    with_array!(x, a => Element::wrap(owned(a.slice_each_axis(|ax| {
        let d = ax.axis.index();
        Slice::new(start[d] as isize, Some(limit[d] as isize), strides[d] as isize)
    }))))
}
/// One integer scalar start per dimension, clamped to `[0, dim - size]`.
pub(super) fn dynamic_slice(x: &Array, starts: &[&Array], slice_sizes: &[usize]) -> Array {
    let starts = clamped_starts(&x.shape(), starts, slice_sizes);
    with_array!(x, a => Element::wrap(owned(a.slice_each_axis(|ax| {
        let d = ax.axis.index();
        Slice::from(starts[d]..starts[d] + slice_sizes[d])
    }))))
}
pub(super) fn dynamic_update_slice(x: &Array, update: &Array, starts: &[&Array]) -> Array {
    let upd_shape = update.shape();
    let starts = clamped_starts(&x.shape(), starts, upd_shape.dims());
    with_array!(x, a => {
        let mut out = owned(a.view());
        out.slice_each_axis_mut(|ax| {
            let d = ax.axis.index();
            Slice::from(starts[d]..starts[d] + upd_shape[d])
        })
        .assign(same_dtype(a, update));
        Element::wrap(out)
    })
}
pub(super) fn concatenate(xs: &[&Array], dimension: usize) -> Array {
    with_array!(xs[0], a => {
        let views: Vec<_> = xs.iter().map(|x| same_dtype(a, x).view()).collect();
        let out = ndarray::concatenate(Axis(dimension), &views).expect("concatenate: shapes checked by the rule");
        // Already standard (ndarray allocates the result row-major); a copy would double the
        // memory `eval_prim` checked.
        Element::wrap(if out.is_standard_layout() { out } else { owned(out.view()) })
    })
}
pub(super) fn pad(x: &Array, padding_value: &Array, low: &[i64], high: &[i64], interior: &[usize]) -> Array {
    with_array!(x, a => {
        let pv = *same_dtype(a, padding_value).first().expect("padding value is a scalar");
        Element::wrap(pad_t(a, pv, low, high, interior))
    })
}

/// `x`'s data when it has `like`'s element type (operands of one primitive share a dtype, checked
/// by the shape rule).
fn same_dtype<'a, T: Element>(_like: &ArrayD<T>, x: &'a Array) -> &'a ArrayD<T> {
    T::view(x).expect("operand dtypes checked by the shape rule")
}

/// A copy in standard layout.
fn owned<T: Clone>(v: ArrayViewD<'_, T>) -> ArrayD<T> {
    v.as_standard_layout().into_owned()
}

fn from_vec<T>(dims: &[usize], data: Vec<T>) -> ArrayD<T> {
    ArrayD::from_shape_vec(IxDyn(dims), data).expect("element count checked by the shape rule")
}

/// Reads a rank-0 i32/u32 start index.
fn scalar_index(a: &Array) -> i64 {
    const MSG: &str = "start index is a scalar";
    match a {
        Array::I32(v) => i64::from(*v.first().expect(MSG)),
        Array::U32(v) => i64::from(*v.first().expect(MSG)),
        Array::F32(_) | Array::F64(_) | Array::Bool(_) => {
            unreachable!("start indices are i32/u32 (shape rule)")
        }
    }
}

/// XLA's start clamping: each start into `[0, dim - size]`, so the window always fits.
fn clamped_starts(shape: &Shape, starts: &[&Array], sizes: &[usize]) -> Vec<usize> {
    starts
        .iter()
        .zip(shape.dims().iter().zip(sizes))
        .map(|(s, (&dim, &size))| scalar_index(s).min(dim as i64 - size as i64).max(0) as usize)
        .collect()
}

fn broadcast_t<T: Element>(a: &ArrayD<T>, shape: &[usize], bdims: &[usize]) -> ArrayD<T> {
    // Give the operand the result's rank (size 1 at inserted dims), then let ndarray stretch the
    // size-1 dims with stride 0.
    let mut dims = vec![1; shape.len()];
    for (i, &d) in bdims.iter().enumerate() {
        dims[d] = a.shape()[i];
    }
    let lifted = from_vec(&dims, a.iter().copied().collect());
    owned(lifted.broadcast(IxDyn(shape)).expect("broadcast sizes checked by the shape rule"))
}

fn pad_t<T: Element>(a: &ArrayD<T>, pv: T, low: &[i64], high: &[i64], interior: &[usize]) -> ArrayD<T> {
    // Element `i` of a dimension lands at `low + i * (interior + 1)`; negative low/high crop, so
    // positions outside `[0, out)` are dropped.
    let out_dims: Vec<usize> = (0..a.ndim())
        .map(|d| {
            let n = a.shape()[d] as i64;
            let inner = if n == 0 { 0 } else { n + (n - 1) * interior[d] as i64 };
            (low[d] + inner + high[d]).max(0) as usize
        })
        .collect();
    let mut out = ArrayD::from_elem(IxDyn(&out_dims), pv);
    let mut pos = vec![0usize; a.ndim()];
    'elems: for (idx, &v) in a.indexed_iter() {
        for d in 0..a.ndim() {
            let p = low[d] + idx[d] as i64 * (interior[d] as i64 + 1);
            if p < 0 || p >= out_dims[d] as i64 {
                continue 'elems;
            }
            pos[d] = p as usize;
        }
        out[pos.as_slice()] = v;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Element;

    fn arr<T: Element>(shape: &[usize], data: Vec<T>) -> Array {
        Array::from_vec(shape, data)
    }
    /// `0, 1, ..., n-1` as f32 of `shape`.
    fn iota(shape: &[usize]) -> Array {
        arr(shape, (0..shape.iter().product::<usize>()).map(|i| i as f32).collect())
    }
    fn i32s(x: i32) -> Array {
        Array::scalar(x)
    }
    fn u32s(x: u32) -> Array {
        Array::scalar(x)
    }
    /// Bitwise check of dtype, shape and data.
    #[track_caller]
    fn check<T: Element>(got: Array, shape: &[usize], data: Vec<T>) {
        assert_eq!(got, arr(shape, data));
    }

    #[test]
    fn broadcast_scalar_and_inserted_dims() {
        check(broadcast_in_dim(&Array::scalar(7.0f32), &Shape::new(&[2, 3]), &[]), &[2, 3], vec![7.0f32; 6]);
        let x = arr(&[3], vec![1i32, 2, 3]);
        // Operand becomes the columns (dim 1): every row is x.
        check(broadcast_in_dim(&x, &Shape::new(&[2, 3]), &[1]), &[2, 3], vec![1i32, 2, 3, 1, 2, 3]);
        // Operand becomes the rows (dim 0): each element repeated along dim 1.
        check(broadcast_in_dim(&x, &Shape::new(&[3, 2]), &[0]), &[3, 2], vec![1i32, 1, 2, 2, 3, 3]);
        // Rank 2 -> 3 inserting the middle dim: out[i,j,k] = x[i,k].
        check(
            broadcast_in_dim(&iota(&[2, 2]), &Shape::new(&[2, 3, 2]), &[0, 2]),
            &[2, 3, 2],
            vec![0.0f32, 1., 0., 1., 0., 1., 2., 3., 2., 3., 2., 3.],
        );
        // Rank 1 -> 4: out[a,b,c,d] = x[b].
        check(
            broadcast_in_dim(&arr(&[2], vec![true, false]), &Shape::new(&[1, 2, 1, 2]), &[1]),
            &[1, 2, 1, 2],
            vec![true, true, false, false],
        );
    }

    #[test]
    fn broadcast_size_one_dims_and_empty() {
        // [1,3] -> [2,3]: the size-1 row is stretched.
        check(
            broadcast_in_dim(&arr(&[1, 3], vec![1u32, 2, 3]), &Shape::new(&[2, 3]), &[0, 1]),
            &[2, 3],
            vec![1u32, 2, 3, 1, 2, 3],
        );
        // [2,1] -> [2,2,3] with the size-1 dim stretched to 3 and dim 1 inserted: out[i,j,k] = x[i,0].
        check(
            broadcast_in_dim(&arr(&[2, 1], vec![-0.0f64, f64::NAN]), &Shape::new(&[2, 2, 3]), &[0, 2]),
            &[2, 2, 3],
            [vec![-0.0f64; 6], vec![f64::NAN; 6]].concat(),
        );
        check(
            broadcast_in_dim(&arr(&[0], Vec::<f32>::new()), &Shape::new(&[2, 0]), &[1]),
            &[2, 0],
            Vec::<f32>::new(),
        );
        check(broadcast_in_dim(&Array::scalar(1i32), &Shape::new(&[0, 3]), &[]), &[0, 3], Vec::<i32>::new());
    }

    #[test]
    fn reshape_is_row_major() {
        check(reshape(&iota(&[2, 3]), &Shape::new(&[3, 2])), &[3, 2], vec![0.0f32, 1., 2., 3., 4., 5.]);
        check(
            reshape(&iota(&[6]), &Shape::new(&[1, 2, 3, 1])),
            &[1, 2, 3, 1],
            vec![0.0f32, 1., 2., 3., 4., 5.],
        );
        check(reshape(&Array::scalar(5i32), &Shape::new(&[1, 1])), &[1, 1], vec![5i32]);
        check(reshape(&arr(&[1, 1, 1], vec![5u32]), &Shape::scalar()), &[], vec![5u32]);
        check(reshape(&arr(&[0, 3], Vec::<bool>::new()), &Shape::new(&[3, 0])), &[3, 0], Vec::<bool>::new());
        // An owned array whose memory is not row-major (reversed axes of [[0,1,2],[3,4,5]] is its
        // transpose [[0,3],[1,4],[2,5]]): reshape follows the logical order.
        let t = ndarray::ArrayD::from_shape_vec(IxDyn(&[2, 3]), vec![0.0f32, 1., 2., 3., 4., 5.]).unwrap();
        check(
            reshape(&Array::F32(t.reversed_axes()), &Shape::new(&[6])),
            &[6],
            vec![0.0f32, 3., 1., 4., 2., 5.],
        );
    }

    #[test]
    fn transpose_ranks_0_to_4() {
        check(transpose(&Array::scalar(2.5f64), &[]), &[], vec![2.5f64]);
        check(transpose(&iota(&[3]), &[0]), &[3], vec![0.0f32, 1., 2.]);
        check(transpose(&iota(&[2, 3]), &[1, 0]), &[3, 2], vec![0.0f32, 3., 1., 4., 2., 5.]);
        // [2,2,2], perm [1,2,0]: out[i,j,k] = x[k,i,j] = 4k + 2i + j.
        check(transpose(&iota(&[2, 2, 2]), &[1, 2, 0]), &[2, 2, 2], vec![0.0f32, 4., 1., 5., 2., 6., 3., 7.]);
        // [2,1,3], perm [2,0,1]: shape [3,2,1], out[i,j,0] = x[j,0,i] = 3j + i.
        check(transpose(&iota(&[2, 1, 3]), &[2, 0, 1]), &[3, 2, 1], vec![0.0f32, 3., 1., 4., 2., 5.]);
        // [1,2,1,2], perm [3,2,1,0]: out[a,0,c,0] = x[0,c,0,a] = 2c + a.
        check(transpose(&iota(&[1, 2, 1, 2]), &[3, 2, 1, 0]), &[2, 1, 2, 1], vec![0.0f32, 2., 1., 3.]);
        check(transpose(&arr(&[0, 2], Vec::<i32>::new()), &[1, 0]), &[2, 0], Vec::<i32>::new());
    }

    #[test]
    fn rev_dims() {
        check(rev(&Array::scalar(1u32), &[]), &[], vec![1u32]);
        check(rev(&arr(&[2], vec![f32::NAN, -0.0]), &[0]), &[2], vec![-0.0f32, f32::NAN]);
        check(rev(&iota(&[2, 3]), &[0, 1]), &[2, 3], vec![5.0f32, 4., 3., 2., 1., 0.]);
        check(rev(&iota(&[2, 3]), &[0]), &[2, 3], vec![3.0f32, 4., 5., 0., 1., 2.]);
        // [2,2,2] rev dims 0 and 2: out[i,j,k] = x[1-i, j, 1-k] = 4(1-i) + 2j + (1-k).
        check(rev(&iota(&[2, 2, 2]), &[2, 0]), &[2, 2, 2], vec![5.0f32, 4., 7., 6., 1., 0., 3., 2.]);
        // [1,2,1,2] rev dim 3: pairs swapped.
        check(rev(&iota(&[1, 2, 1, 2]), &[3]), &[1, 2, 1, 2], vec![1.0f32, 0., 3., 2.]);
        check(rev(&arr(&[0], Vec::<bool>::new()), &[0]), &[0], Vec::<bool>::new());
    }

    #[test]
    fn strided_slice() {
        check(slice(&Array::scalar(true), &[], &[], &[]), &[], vec![true]);
        // 1, 4, 7 (9 is past the limit 8 and the limit 9 alike).
        check(slice(&iota(&[10]), &[1], &[8], &[3]), &[3], vec![1.0f32, 4., 7.]);
        check(slice(&iota(&[10]), &[1], &[9], &[3]), &[3], vec![1.0f32, 4., 7.]);
        check(slice(&iota(&[10]), &[4], &[4], &[1]), &[0], Vec::<f32>::new());
        // [3,4] rows 0,2 and cols 1,3 of 4r + c.
        check(slice(&iota(&[3, 4]), &[0, 1], &[3, 4], &[2, 2]), &[2, 2], vec![1.0f32, 3., 9., 11.]);
        // [2,3,4] = 12i + 4j + k: i = 1, j in {0, 2}, k in {2, 3}.
        check(
            slice(&iota(&[2, 3, 4]), &[1, 0, 2], &[2, 3, 4], &[1, 2, 1]),
            &[1, 2, 2],
            vec![14.0f32, 15., 22., 23.],
        );
        // [2,2,2,2] = 8a + 4b + 2c + d: a = 1, b = 0, c in {0,1}, d = 1.
        check(
            slice(&iota(&[2, 2, 2, 2]), &[1, 0, 0, 1], &[2, 1, 2, 2], &[1, 1, 1, 5]),
            &[1, 1, 2, 1],
            vec![9.0f32, 11.],
        );
    }

    #[test]
    fn dynamic_slice_clamps_starts() {
        let x = arr(&[5], vec![0i32, 1, 2, 3, 4]);
        let ds = |s: Array| dynamic_slice(&x, &[&s], &[2]);
        check(ds(i32s(-3)), &[2], vec![0i32, 1]); // negative -> 0
        check(ds(i32s(4)), &[2], vec![3i32, 4]); // 4 > 5 - 2 -> 3
        check(ds(i32s(i32::MIN)), &[2], vec![0i32, 1]);
        check(ds(u32s(2)), &[2], vec![2i32, 3]);
        check(ds(u32s(4_000_000_000)), &[2], vec![3i32, 4]);
        // Whole-dim window: every start clamps to 0.
        check(dynamic_slice(&x, &[&i32s(5)], &[5]), &[5], vec![0i32, 1, 2, 3, 4]);
        check(dynamic_slice(&x, &[&i32s(2)], &[0]), &[0], Vec::<i32>::new());
        check(dynamic_slice(&Array::scalar(3.0f32), &[], &[]), &[], vec![3.0f32]);
        // [3,4] = 4r + c, starts (1, 10 -> 2), size [2,2]: rows 1..3, cols 2..4.
        check(
            dynamic_slice(&iota(&[3, 4]), &[&i32s(1), &u32s(10)], &[2, 2]),
            &[2, 2],
            vec![6.0f32, 7., 10., 11.],
        );
        // [2,2,3] = 6i + 3j + k, starts (-1 -> 0, 1, 1), size [2,1,2].
        check(
            dynamic_slice(&iota(&[2, 2, 3]), &[&i32s(-1), &i32s(1), &u32s(1)], &[2, 1, 2]),
            &[2, 1, 2],
            vec![4.0f32, 5., 10., 11.],
        );
    }

    #[test]
    fn dynamic_update_slice_clamps_starts() {
        let x = arr(&[5], vec![0i32; 5]);
        let upd = arr(&[2], vec![7i32, 8]);
        check(dynamic_update_slice(&x, &upd, &[&i32s(10)]), &[5], vec![0i32, 0, 0, 7, 8]);
        check(dynamic_update_slice(&x, &upd, &[&i32s(-1)]), &[5], vec![7i32, 8, 0, 0, 0]);
        check(dynamic_update_slice(&x, &upd, &[&u32s(1)]), &[5], vec![0i32, 7, 8, 0, 0]);
        check(dynamic_update_slice(&x, &arr(&[0], Vec::<i32>::new()), &[&i32s(2)]), &[5], vec![0i32; 5]);
        check(dynamic_update_slice(&Array::scalar(1.0f32), &Array::scalar(-0.0f32), &[]), &[], vec![-0.0f32]);
        // [3,3] zeros, update [[1,2]] at (2, 5 -> 3 - 2 = 1).
        check(
            dynamic_update_slice(
                &arr(&[3, 3], vec![0.0f64; 9]),
                &arr(&[1, 2], vec![1.0f64, 2.]),
                &[&i32s(2), &u32s(5)],
            ),
            &[3, 3],
            vec![0.0f64, 0., 0., 0., 0., 0., 0., 1., 2.],
        );
        // [2,2,2] false, update true [1,2,1] at (1, -5 -> 0, 1).
        check(
            dynamic_update_slice(
                &arr(&[2, 2, 2], vec![false; 8]),
                &arr(&[1, 2, 1], vec![true, true]),
                &[&i32s(1), &i32s(-5), &i32s(1)],
            ),
            &[2, 2, 2],
            vec![false, false, false, false, false, true, false, true],
        );
    }

    #[test]
    fn concatenate_ranks_1_to_4() {
        let (a, b, e) = (arr(&[2], vec![1u32, 2]), arr(&[1], vec![3u32]), arr(&[0], Vec::<u32>::new()));
        check(concatenate(&[&a, &e, &b], 0), &[3], vec![1u32, 2, 3]);
        check(concatenate(&[&a], 0), &[2], vec![1u32, 2]);
        // [[1],[2]] ++ [[3,4],[5,6]] along dim 1.
        let (x, y) = (arr(&[2, 1], vec![1.0f32, 2.]), arr(&[2, 2], vec![3.0f32, 4., 5., 6.]));
        check(concatenate(&[&x, &y], 1), &[2, 3], vec![1.0f32, 3., 4., 2., 5., 6.]);
        // Rank 3 along dim 0 and dim 2.
        let (p, q) = (arr(&[1, 2, 1], vec![true, false]), arr(&[1, 2, 1], vec![false, true]));
        check(concatenate(&[&p, &q], 0), &[2, 2, 1], vec![true, false, false, true]);
        check(concatenate(&[&p, &q], 2), &[1, 2, 2], vec![true, false, false, true]);
        // Rank 4 along dim 3: [1,1,2,1] ++ [1,1,2,2].
        let (r, s) = (arr(&[1, 1, 2, 1], vec![0i32, 1]), arr(&[1, 1, 2, 2], vec![10i32, 11, 12, 13]));
        check(concatenate(&[&r, &s], 3), &[1, 1, 2, 3], vec![0i32, 10, 11, 1, 12, 13]);
    }

    #[test]
    fn pad_low_high_interior() {
        let pv = Array::scalar(0.0f32);
        let x = arr(&[3], vec![1.0f32, 2., 3.]);
        // 1 + (3 + 2 interior) + 2 = 8.
        check(pad(&x, &pv, &[1], &[2], &[1]), &[8], vec![0.0f32, 1., 0., 2., 0., 3., 0., 0.]);
        // Negative low crops the interior-padded [1,0,2,0,3]: drop 2 -> [2,0,3].
        check(pad(&x, &pv, &[-2], &[0], &[1]), &[3], vec![2.0f32, 0., 3.]);
        check(pad(&x, &Array::scalar(f32::NAN), &[1], &[-1], &[0]), &[3], vec![f32::NAN, 1., 2.]);
        check(pad(&x, &pv, &[-3], &[0], &[0]), &[0], Vec::<f32>::new());
        // Empty dim: interior adds nothing, 1 + 0 + 1.
        check(
            pad(&arr(&[0], Vec::<i32>::new()), &Array::scalar(9i32), &[1], &[1], &[3]),
            &[2],
            vec![9i32, 9],
        );
        check(pad(&Array::scalar(4u32), &Array::scalar(0u32), &[], &[], &[]), &[], vec![4u32]);
        // [[1,2],[3,4]]: rows 1 + 2 + 0 = 3; cols [1,p,2] cropped by 1 then 1 added: [p,2,p].
        check(
            pad(&arr(&[2, 2], vec![1i32, 2, 3, 4]), &Array::scalar(0i32), &[1, -1], &[0, 1], &[0, 1]),
            &[3, 3],
            vec![0i32, 0, 0, 0, 2, 0, 0, 4, 0],
        );
        // Rank 3 [1,1,2] of bools, high 1 on dim 0, interior 2 on dim 2: [t,p,p,f] per (i,j).
        check(
            pad(
                &arr(&[1, 1, 2], vec![true, true]),
                &Array::scalar(false),
                &[0, 0, 0],
                &[1, 0, 0],
                &[0, 0, 2],
            ),
            &[2, 1, 4],
            vec![true, false, false, true, false, false, false, false],
        );
        // Rank 4 [1,1,1,2] = [5,6], low 1 on dim 3 and -1 high on dim 3 (crops 6).
        check(
            pad(
                &arr(&[1, 1, 1, 2], vec![5.0f64, 6.]),
                &Array::scalar(-0.0f64),
                &[0, 0, 0, 1],
                &[0, 0, 0, -1],
                &[0; 4],
            ),
            &[1, 1, 1, 2],
            vec![-0.0f64, 5.],
        );
    }
}
