//! Reductions, prefix scans, sort and `dot_general`.
//!
//! Each primitive is one generic function over [`Num`], dispatched with [`with_array!`]. All
//! accumulation starts from the op's identity and walks the elements in row-major order, in the
//! element type (ints wrap) — so results are deterministic and a sum of only `-0.0` is `+0.0`, as
//! XLA's `reduce` with init value 0. Float sums and products of more than 256 elements are
//! blocked-pairwise, exactly as the CPU backend's kernels (`fold_run`); everything else is sequential.

use crate::{ArgOp, Array, CumulativeOp, DType, Element, ReduceOp, with_array};
use ndarray::{ArrayD, ArrayView1, Axis, IxDyn};
use std::cmp::Ordering;

pub(super) fn reduce(op: ReduceOp, x: &Array, axes: &[usize]) -> Array {
    with_array!(x, a => Element::wrap(reduce_t(op, a, axes)))
}
pub(super) fn arg_reduce(op: ArgOp, x: &Array, axis: usize, index_dtype: DType) -> Array {
    let idx = with_array!(x, a => a.map_axis(Axis(axis), |lane| first_extreme(op, lane)));
    match index_dtype {
        DType::I32 => Array::I32(idx.mapv(|i| i as i32)),
        DType::U32 => Array::U32(idx.mapv(|i| i as u32)),
        DType::F32 | DType::F64 | DType::Bool => unreachable!("index dtype is i32/u32 (shape rule)"),
    }
}
pub(super) fn cumulative(op: CumulativeOp, x: &Array, axis: usize, reverse: bool) -> Array {
    with_array!(x, a => Element::wrap(cumulative_t(op, a, axis, reverse)))
}
pub(super) fn sort(xs: &[&Array], dimension: usize, num_keys: usize) -> Vec<Array> {
    let shape = xs[0].shape();
    let n = shape[dimension];
    // Every key as order-preserving u64s, lanes along `dimension` laid out contiguously.
    let keys: Vec<Vec<u64>> = xs[..num_keys]
        .iter()
        .map(|x| with_array!(x, a => lanes_last(a, dimension).into_iter().map(Num::sort_key).collect()))
        .collect();
    let lex = |&i: &usize, &j: &usize| {
        keys.iter().map(|k| k[i].cmp(&k[j])).find(|o| o.is_ne()).unwrap_or(Ordering::Equal)
    };
    // One permutation (of flat positions) shared by all operands; `sort_by` is stable.
    let mut perm: Vec<usize> = (0..shape.size()).collect();
    if n > 0 {
        perm.chunks_mut(n).for_each(|lane| lane.sort_by(lex));
    }
    xs.iter()
        .map(|x| {
            with_array!(x, a => {
                let v = lanes_last(a, dimension);
                Element::wrap(from_lanes(perm.iter().map(|&i| v[i]).collect(), a.shape(), dimension))
            })
        })
        .collect()
}
/// `contracting` and `batch` are (lhs dims, rhs dims) pairs.
pub(super) fn dot_general(
    lhs: &Array,
    rhs: &Array,
    contracting: (&[usize], &[usize]),
    batch: (&[usize], &[usize]),
    preferred_element_type: Option<DType>,
) -> Array {
    match preferred_element_type {
        Some(dt) if dt != lhs.dtype() => {
            dot_general(&convert(lhs, dt), &convert(rhs, dt), contracting, batch, None)
        }
        Some(_) | None => with_array!(lhs, l => {
            let r = Element::view(rhs).expect("dot_general operands share a dtype (shape rule)");
            Element::wrap(dot_t(l, r, contracting, batch))
        }),
    }
}

/// A value of any dtype, wide enough to convert between dtypes exactly where the target can hold it.
#[derive(Clone, Copy)]
enum Scalar {
    F(f64),
    I(i64),
    B(bool),
}

/// Per-dtype arithmetic of the reductions. For bool, `add` is or and `mul` is and (XLA's `pred`
/// arithmetic; the shape rules reject bool sums, but this keeps every op total).
trait Num: Element + PartialOrd {
    const ZERO: Self;
    const ONE: Self;
    /// The identity of max: the least value.
    const LOWEST: Self;
    /// The identity of min: the greatest value.
    const HIGHEST: Self;
    fn add(self, o: Self) -> Self;
    fn mul(self, o: Self) -> Self;
    fn is_nan(self) -> bool;
    /// A key whose `u64` order is the total order used by max/min: `-0.0 < 0.0`, every NaN last and
    /// equal to the others, `false < true`.
    fn order_key(self) -> u64;
    /// The key sort orders by: [`Num::order_key`] with `-0.0` equal to `0.0`, as JAX canonicalizes
    /// both before comparing (`_canonicalize_float_for_sort`); a stable sort keeps their input order.
    fn sort_key(self) -> u64 {
        self.order_key()
    }
    fn to_scalar(self) -> Scalar;
    /// XLA's `convert`: float→int truncates and saturates (NaN→0), int→int wraps, →bool is `!= 0`.
    fn from_scalar(s: Scalar) -> Self;
}

macro_rules! float_num {
    ($t:ty) => {
        impl Num for $t {
            const ZERO: Self = 0.0;
            const ONE: Self = 1.0;
            const LOWEST: Self = <$t>::NEG_INFINITY;
            const HIGHEST: Self = <$t>::INFINITY;
            fn add(self, o: Self) -> Self {
                self + o
            }
            fn mul(self, o: Self) -> Self {
                self * o
            }
            fn is_nan(self) -> bool {
                <$t>::is_nan(self)
            }
            fn sort_key(self) -> u64 {
                // `x + 0.0` turns -0.0 into 0.0 and leaves everything else as it is.
                (self + 0.0).order_key()
            }
            fn order_key(self) -> u64 {
                if self.is_nan() {
                    return u64::MAX;
                }
                // Widening to f64 keeps order and sign; then the usual sign-magnitude flip.
                let b = (self as f64).to_bits();
                if b >> 63 == 1 { !b } else { b | 1 << 63 }
            }
            fn to_scalar(self) -> Scalar {
                Scalar::F(self as f64)
            }
            fn from_scalar(s: Scalar) -> Self {
                match s {
                    Scalar::F(x) => x as $t,
                    Scalar::I(i) => i as $t,
                    Scalar::B(b) => u8::from(b) as $t,
                }
            }
        }
    };
}
float_num!(f32);
float_num!(f64);

macro_rules! int_num {
    ($t:ty, $key:expr) => {
        impl Num for $t {
            const ZERO: Self = 0;
            const ONE: Self = 1;
            const LOWEST: Self = <$t>::MIN;
            const HIGHEST: Self = <$t>::MAX;
            fn add(self, o: Self) -> Self {
                self.wrapping_add(o)
            }
            fn mul(self, o: Self) -> Self {
                self.wrapping_mul(o)
            }
            fn is_nan(self) -> bool {
                false
            }
            fn order_key(self) -> u64 {
                $key(self)
            }
            fn to_scalar(self) -> Scalar {
                Scalar::I(i64::from(self))
            }
            fn from_scalar(s: Scalar) -> Self {
                match s {
                    Scalar::F(x) => x as $t,
                    Scalar::I(i) => i as $t,
                    Scalar::B(b) => <$t>::from(b),
                }
            }
        }
    };
}
// i32: flip the sign bit so MIN maps to 0.
int_num!(i32, |x: i32| u64::from(x as u32 ^ 1 << 31));
int_num!(u32, u64::from);

impl Num for bool {
    const ZERO: Self = false;
    const ONE: Self = true;
    const LOWEST: Self = false;
    const HIGHEST: Self = true;
    fn add(self, o: Self) -> Self {
        self | o
    }
    fn mul(self, o: Self) -> Self {
        self & o
    }
    fn is_nan(self) -> bool {
        false
    }
    fn order_key(self) -> u64 {
        u64::from(self)
    }
    fn to_scalar(self) -> Scalar {
        Scalar::B(self)
    }
    fn from_scalar(s: Scalar) -> Self {
        match s {
            Scalar::F(x) => x != 0.0,
            Scalar::I(i) => i != 0,
            Scalar::B(b) => b,
        }
    }
}

/// Max/min propagating NaN (the first NaN met); `-0.0 < 0.0` as IEEE-754 `maximum`/`minimum`.
fn nan_max<T: Num>(a: T, b: T) -> T {
    if a.is_nan() || (!b.is_nan() && a.order_key() >= b.order_key()) { a } else { b }
}
fn nan_min<T: Num>(a: T, b: T) -> T {
    if a.is_nan() || (!b.is_nan() && a.order_key() <= b.order_key()) { a } else { b }
}

fn identity<T: Num>(op: ReduceOp) -> T {
    match op {
        ReduceOp::Sum => T::ZERO,
        ReduceOp::Prod => T::ONE,
        ReduceOp::Max => T::LOWEST,
        ReduceOp::Min => T::HIGHEST,
    }
}

fn combine<T: Num>(op: ReduceOp, acc: T, x: T) -> T {
    match op {
        ReduceOp::Sum => acc.add(x),
        ReduceOp::Prod => acc.mul(x),
        ReduceOp::Max => nan_max(acc, x),
        ReduceOp::Min => nan_min(acc, x),
    }
}

/// A scan combines like the reduction of the same name.
fn scan_op(op: CumulativeOp) -> ReduceOp {
    match op {
        CumulativeOp::Sum => ReduceOp::Sum,
        CumulativeOp::Prod => ReduceOp::Prod,
        CumulativeOp::Max => ReduceOp::Max,
        CumulativeOp::Min => ReduceOp::Min,
    }
}

fn from_vec<T>(dims: &[usize], data: Vec<T>) -> ArrayD<T> {
    ArrayD::from_shape_vec(IxDyn(dims), data).expect("element count checked by the shape rule")
}

/// The elements in row-major order of `a` with its dims permuted (result dim `i` = dim `perm[i]`).
fn permuted_vec<T: Element>(a: &ArrayD<T>, perm: &[usize]) -> Vec<T> {
    a.view().permuted_axes(IxDyn(perm)).iter().copied().collect()
}

/// `a` with `axis` moved last, flattened: each lane along `axis` is a contiguous run.
fn lanes_last<T: Element>(a: &ArrayD<T>, axis: usize) -> Vec<T> {
    let perm: Vec<usize> = (0..a.ndim()).filter(|&d| d != axis).chain([axis]).collect();
    permuted_vec(a, &perm)
}

/// The inverse of [`lanes_last`] for an array of shape `dims`.
fn from_lanes<T: Element>(data: Vec<T>, dims: &[usize], axis: usize) -> ArrayD<T> {
    let last = dims.len() - 1;
    let moved: Vec<usize> = (0..dims.len()).filter(|&d| d != axis).chain([axis]).map(|d| dims[d]).collect();
    // Result dim `d` is moved dim: `last` for `axis`, `d` before it, `d - 1` after it.
    let back: Vec<usize> = (0..dims.len())
        .map(|d| match d.cmp(&axis) {
            Ordering::Less => d,
            Ordering::Equal => last,
            Ordering::Greater => d - 1,
        })
        .collect();
    from_vec(&moved, data).permuted_axes(IxDyn(&back)).as_standard_layout().into_owned()
}

fn reduce_t<T: Num>(op: ReduceOp, a: &ArrayD<T>, axes: &[usize]) -> ArrayD<T> {
    // Kept dims first, then the reduced ones in increasing order: each output element's inputs
    // are one run of that order, row-major over the reduced axes.
    let kept: Vec<usize> = (0..a.ndim()).filter(|d| !axes.contains(d)).collect();
    let mut reduced = axes.to_vec();
    reduced.sort_unstable();
    let order = a.view().permuted_axes(IxDyn(&[kept.as_slice(), &reduced].concat()));
    let out_dims: Vec<usize> = kept.iter().map(|&d| a.shape()[d]).collect();
    let run: usize = reduced.iter().map(|&d| a.shape()[d]).product();
    let last = reduced.last().map_or(1, |&d| a.shape()[d]);
    let out_len: usize = out_dims.iter().product();
    // Row-major already (the reduced axes trailing): fold the runs in place. Otherwise each run
    // is copied into one buffer, so the temporary is one run, never a copy of the operand.
    let out = match order.as_slice() {
        Some(data) => (0..out_len).map(|o| fold_run(op, &data[o * run..(o + 1) * run], last)).collect(),
        None => {
            let mut elements = order.iter();
            let mut buffer = Vec::with_capacity(run);
            (0..out_len)
                .map(|_| {
                    buffer.clear();
                    buffer.extend(elements.by_ref().take(run).copied());
                    fold_run(op, &buffer, last)
                })
                .collect()
        }
    };
    from_vec(&out_dims, out)
}

/// Elements per block of a blocked-pairwise reduction (the CPU backend's `pairwise::BLOCK`).
const PAIRWISE_BLOCK: usize = 256;

/// One output element of a reduction: the `run` of its inputs (row-major over the reduced axes,
/// whose last has `last` elements) folded from the op's identity.
///
/// Float sums and products of more than [`PAIRWISE_BLOCK`] elements are blocked-pairwise, exactly
/// as the CPU backend's kernels (`codegen::pairwise`), so the two stay bitwise equal: each row of
/// the last reduced axis is cut into blocks of at most `PAIRWISE_BLOCK`, each block folded in order,
/// and the block results merged by a binary counter (the `k`-th block absorbs the `ctz(k)` partials
/// below it, older first), the leftover partials combined lowest level first at the end. The error
/// then grows with log n, not n (2^20 f32 copies of 0.1 summed in order came to 105891.8, 1 % over
/// 104857.6). Shorter runs and exact ops (integer, max, min) are a plain left fold.
fn fold_run<T: Num>(op: ReduceOp, run: &[T], last: usize) -> T {
    let fold = |xs: &[T]| xs.iter().fold(identity(op), |acc, &x| combine(op, acc, x));
    let blocked = T::DTYPE.is_float() && matches!(op, ReduceOp::Sum | ReduceOp::Prod);
    if !blocked || run.len() <= PAIRWISE_BLOCK {
        return fold(run);
    }
    let mut levels: Vec<T> = Vec::new();
    let mut count = 0u64;
    for block in run.chunks(last).flat_map(|row| row.chunks(PAIRWISE_BLOCK)) {
        count += 1;
        let merges = count.trailing_zeros() as usize;
        let carry = levels[..merges].iter().fold(fold(block), |carry, &older| combine(op, older, carry));
        levels.resize(levels.len().max(merges + 1), identity(op));
        levels[merges] = carry;
    }
    (0..levels.len()).filter(|l| count >> l & 1 == 1).fold(identity(op), |acc, l| combine(op, levels[l], acc))
}

/// Index of the first extreme; the first NaN, if any, wins (numpy). 0 for an empty lane.
fn first_extreme<T: Num>(op: ArgOp, lane: ArrayView1<'_, T>) -> usize {
    let mut best = 0;
    for (i, &x) in lane.iter().enumerate() {
        if x.is_nan() {
            return i;
        }
        // Strict comparisons keep the first of equal values.
        let better = match op {
            ArgOp::Max => x > lane[best],
            ArgOp::Min => x < lane[best],
        };
        if better {
            best = i;
        }
    }
    best
}

fn cumulative_t<T: Num>(op: CumulativeOp, a: &ArrayD<T>, axis: usize, reverse: bool) -> ArrayD<T> {
    let op = scan_op(op);
    let mut out = a.as_standard_layout().into_owned();
    for mut lane in out.lanes_mut(Axis(axis)) {
        let mut acc = identity(op);
        let mut step = |x: &mut T| {
            acc = combine(op, acc, *x);
            *x = acc;
        };
        if reverse {
            lane.iter_mut().rev().for_each(&mut step);
        } else {
            lane.iter_mut().for_each(&mut step);
        }
    }
    out
}

fn convert(x: &Array, dtype: DType) -> Array {
    fn to<U: Num>(x: &Array) -> Array {
        with_array!(x, a => U::wrap(a.mapv(|v| U::from_scalar(v.to_scalar()))))
    }
    match dtype {
        DType::F32 => to::<f32>(x),
        DType::F64 => to::<f64>(x),
        DType::I32 => to::<i32>(x),
        DType::U32 => to::<u32>(x),
        DType::Bool => to::<bool>(x),
    }
}

fn dot_t<T: Num>(
    l: &ArrayD<T>,
    r: &ArrayD<T>,
    (lc, rc): (&[usize], &[usize]),
    (lb, rb): (&[usize], &[usize]),
) -> ArrayD<T> {
    let free = |rank: usize, c: &[usize], b: &[usize]| -> Vec<usize> {
        (0..rank).filter(|d| !c.contains(d) && !b.contains(d)).collect()
    };
    let (lf, rf) = (free(l.ndim(), lc, lb), free(r.ndim(), rc, rb));
    // As matrices: lhs [batch, free, contracting], rhs [batch, contracting, free].
    let lm = permuted_vec(l, &[lb, &lf, lc].concat());
    let rm = permuted_vec(r, &[rb, rc, &rf].concat());
    let sizes = |a: &ArrayD<T>, ds: &[usize]| ds.iter().map(|&d| a.shape()[d]).collect::<Vec<_>>();
    let (bs, ms, ns) = (sizes(l, lb), sizes(l, &lf), sizes(r, &rf));
    let (nb, m, n) =
        (bs.iter().product::<usize>(), ms.iter().product::<usize>(), ns.iter().product::<usize>());
    let k: usize = sizes(l, lc).iter().product();
    // Each element sums its products in row-major order of the contracting dims, as a reduction
    // over them (`fold_run`: blocked-pairwise past 256 float products, like `reduce_sum`).
    let last = lc.last().map_or(1, |&d| l.shape()[d]);
    let mut products = Vec::with_capacity(k);
    let mut out = Vec::with_capacity(nb * m * n);
    for b in 0..nb {
        for i in 0..m {
            for j in 0..n {
                products.clear();
                products.extend((0..k).map(|p| lm[(b * m + i) * k + p].mul(rm[(b * k + p) * n + j])));
                out.push(fold_run(ReduceOp::Sum, &products, last));
            }
        }
    }
    from_vec(&[bs, ms, ns].concat(), out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arr<T: Element>(shape: &[usize], data: Vec<T>) -> Array {
        Array::from_vec(shape, data)
    }
    /// `0, 1, ..., n-1` as f32 of `shape`.
    fn iota(shape: &[usize]) -> Array {
        arr(shape, (0..shape.iter().product::<usize>()).map(|i| i as f32).collect())
    }
    /// Bitwise check of dtype, shape and data.
    #[track_caller]
    fn check<T: Element>(got: Array, shape: &[usize], data: Vec<T>) {
        assert_eq!(got, arr(shape, data));
    }
    const NAN: f32 = f32::NAN;
    const INF: f32 = f32::INFINITY;

    #[test]
    fn reduce_no_axes_all_axes_middle_axis() {
        check(reduce(ReduceOp::Sum, &Array::scalar(5.0f32), &[]), &[], vec![5.0f32]);
        check(reduce(ReduceOp::Max, &iota(&[2, 3]), &[]), &[2, 3], vec![0.0f32, 1., 2., 3., 4., 5.]);
        check(reduce(ReduceOp::Sum, &arr(&[4], vec![1i32, 2, 3, 4]), &[0]), &[], vec![10i32]);
        // [[0,1,2],[3,4,5]]: column sums 0+3, 1+4, 2+5; row sums 0+1+2, 3+4+5; total 15.
        check(reduce(ReduceOp::Sum, &iota(&[2, 3]), &[0]), &[3], vec![3.0f32, 5., 7.]);
        check(reduce(ReduceOp::Sum, &iota(&[2, 3]), &[1]), &[2], vec![3.0f32, 12.]);
        check(reduce(ReduceOp::Sum, &iota(&[2, 3]), &[1, 0]), &[], vec![15.0f32]);
        // [2,3,2] = 6i + 2j + k over j: max 6i + 4 + k; sum 3(6i + k) + 0 + 2 + 4 = 18i + 3k + 6.
        check(reduce(ReduceOp::Max, &iota(&[2, 3, 2]), &[1]), &[2, 2], vec![4.0f32, 5., 10., 11.]);
        check(reduce(ReduceOp::Sum, &iota(&[2, 3, 2]), &[1]), &[2, 2], vec![6.0f32, 9., 24., 27.]);
        check(reduce(ReduceOp::Min, &iota(&[2, 3, 2]), &[1]), &[2, 2], vec![0.0f32, 1., 6., 7.]);
        // [2,1,2,2] = 1..=8, x[a,0,c,d] = 4a + 2c + d + 1, prod over axes {3, 0}:
        // c = 0: 1 * 2 * 5 * 6 = 60; c = 1: 3 * 4 * 7 * 8 = 672.
        let x = arr(&[2, 1, 2, 2], (1..=8).collect::<Vec<i32>>());
        check(reduce(ReduceOp::Prod, &x, &[3, 0]), &[1, 2], vec![60i32, 672]);
        check(reduce(ReduceOp::Prod, &x, &[0, 1, 2, 3]), &[], vec![40320i32]); // 8!
    }

    #[test]
    fn reduce_empty_gives_identities() {
        let e32 = arr(&[0], Vec::<f32>::new());
        check(reduce(ReduceOp::Sum, &e32, &[0]), &[], vec![0.0f32]);
        check(reduce(ReduceOp::Prod, &e32, &[0]), &[], vec![1.0f32]);
        check(reduce(ReduceOp::Max, &e32, &[0]), &[], vec![-INF]);
        check(reduce(ReduceOp::Min, &e32, &[0]), &[], vec![INF]);
        let ei = arr(&[2, 0], Vec::<i32>::new());
        check(reduce(ReduceOp::Max, &ei, &[1]), &[2], vec![i32::MIN; 2]);
        check(reduce(ReduceOp::Min, &ei, &[1]), &[2], vec![i32::MAX; 2]);
        check(reduce(ReduceOp::Sum, &ei, &[1]), &[2], vec![0i32; 2]);
        let eu = arr(&[0, 3], Vec::<u32>::new());
        check(reduce(ReduceOp::Max, &eu, &[0]), &[3], vec![0u32; 3]);
        check(reduce(ReduceOp::Min, &eu, &[0]), &[3], vec![u32::MAX; 3]);
        check(reduce(ReduceOp::Prod, &eu, &[0]), &[3], vec![1u32; 3]);
        check(reduce(ReduceOp::Sum, &eu, &[1]), &[0], Vec::<u32>::new()); // nothing to produce
        let eb = arr(&[0], Vec::<bool>::new());
        check(reduce(ReduceOp::Max, &eb, &[0]), &[], vec![false]);
        check(reduce(ReduceOp::Min, &eb, &[0]), &[], vec![true]);
        check(reduce(ReduceOp::Sum, &arr(&[1, 0, 2], Vec::<f64>::new()), &[0, 1]), &[2], vec![0.0f64; 2]);
    }

    #[test]
    fn reduce_nan_zero_sign_wrap_bool() {
        let x = arr(&[3], vec![1.0f32, NAN, 3.]);
        assert!(reduce(ReduceOp::Max, &x, &[0]).to_vec::<f32>().unwrap()[0].is_nan());
        assert!(reduce(ReduceOp::Min, &x, &[0]).to_vec::<f32>().unwrap()[0].is_nan());
        assert!(reduce(ReduceOp::Sum, &x, &[0]).to_vec::<f32>().unwrap()[0].is_nan());
        // NaN in the last position too (not only when met first).
        assert!(reduce(ReduceOp::Max, &arr(&[2], vec![INF, NAN]), &[0]).to_vec::<f32>().unwrap()[0].is_nan());
        check(reduce(ReduceOp::Max, &arr(&[2], vec![-INF, INF]), &[0]), &[], vec![INF]);
        // IEEE maximum/minimum order -0.0 below 0.0, whatever the order met.
        let z = arr(&[2], vec![-0.0f64, 0.0]);
        check(reduce(ReduceOp::Max, &z, &[0]), &[], vec![0.0f64]);
        check(reduce(ReduceOp::Min, &z, &[0]), &[], vec![-0.0f64]);
        check(reduce(ReduceOp::Min, &arr(&[2], vec![0.0f64, -0.0]), &[0]), &[], vec![-0.0f64]);
        // Folded from the identity +0: 0 + -0 + -0 = +0.
        check(reduce(ReduceOp::Sum, &arr(&[2], vec![-0.0f32, -0.0]), &[0]), &[], vec![0.0f32]);
        check(reduce(ReduceOp::Prod, &arr(&[2], vec![-0.0f32, 2.0]), &[0]), &[], vec![-0.0f32]);
        check(reduce(ReduceOp::Sum, &arr(&[2], vec![i32::MAX, 1]), &[0]), &[], vec![i32::MIN]);
        check(reduce(ReduceOp::Prod, &arr(&[2], vec![65536u32, 65536]), &[0]), &[], vec![0u32]); // 2^32
        check(reduce(ReduceOp::Sum, &arr(&[2], vec![u32::MAX, 2]), &[0]), &[], vec![1u32]);
        check(reduce(ReduceOp::Max, &arr(&[3], vec![-5i32, i32::MIN, -7]), &[0]), &[], vec![-5i32]);
        // bool max = any, min = all: [[t,f],[f,f]].
        let b = arr(&[2, 2], vec![true, false, false, false]);
        check(reduce(ReduceOp::Max, &b, &[1]), &[2], vec![true, false]);
        check(reduce(ReduceOp::Min, &b, &[0]), &[2], vec![false, false]);
        check(reduce(ReduceOp::Min, &arr(&[2], vec![true, true]), &[0]), &[], vec![true]);
    }

    #[test]
    fn arg_reduce_first_occurrence() {
        let x = arr(&[8], vec![3.0f32, 1., 4., 1., 5., 9., 2., 9.]);
        check(arg_reduce(ArgOp::Max, &x, 0, DType::I32), &[], vec![5i32]);
        check(arg_reduce(ArgOp::Min, &x, 0, DType::U32), &[], vec![1u32]);
        // [[1,5,5],[7,0,5]]
        let m = arr(&[2, 3], vec![1i32, 5, 5, 7, 0, 5]);
        check(arg_reduce(ArgOp::Max, &m, 1, DType::I32), &[2], vec![1i32, 0]);
        check(arg_reduce(ArgOp::Min, &m, 1, DType::I32), &[2], vec![0i32, 1]);
        check(arg_reduce(ArgOp::Max, &m, 0, DType::I32), &[3], vec![1i32, 0, 0]);
        // [2,2,2] = 8 - (4i + 2j + k) along axis 1: max at j = 0, min at j = 1.
        let d = arr(&[2, 2, 2], (1..=8).rev().collect::<Vec<u32>>());
        check(arg_reduce(ArgOp::Max, &d, 1, DType::U32), &[2, 2], vec![0u32; 4]);
        check(arg_reduce(ArgOp::Min, &d, 1, DType::U32), &[2, 2], vec![1u32; 4]);
        // [1,1,1,3] along the last axis.
        check(
            arg_reduce(
                ArgOp::Min,
                &arr(&[1, 1, 1, 3], vec![2.0f64, -INF as f64, -INF as f64]),
                3,
                DType::I32,
            ),
            &[1, 1, 1],
            vec![1i32],
        );
        check(arg_reduce(ArgOp::Max, &arr(&[1], vec![7i32]), 0, DType::I32), &[], vec![0i32]);
        check(arg_reduce(ArgOp::Max, &arr(&[3], vec![false, true, true]), 0, DType::I32), &[], vec![1i32]);
        check(arg_reduce(ArgOp::Min, &arr(&[3], vec![true, false, false]), 0, DType::I32), &[], vec![1i32]);
        // -0.0 == 0.0: the first wins.
        check(arg_reduce(ArgOp::Max, &arr(&[2], vec![-0.0f32, 0.0]), 0, DType::I32), &[], vec![0i32]);
        check(
            arg_reduce(ArgOp::Min, &arr(&[3], vec![i32::MAX, i32::MIN, i32::MIN]), 0, DType::I32),
            &[],
            vec![1i32],
        );
        check(
            arg_reduce(ArgOp::Max, &arr(&[2, 0], Vec::<f32>::new()), 0, DType::I32),
            &[0],
            Vec::<i32>::new(),
        );
    }

    #[test]
    fn arg_reduce_nan_is_the_extreme() {
        let x = arr(&[4], vec![1.0f32, NAN, 5., NAN]);
        check(arg_reduce(ArgOp::Max, &x, 0, DType::I32), &[], vec![1i32]);
        check(arg_reduce(ArgOp::Min, &x, 0, DType::I32), &[], vec![1i32]);
        check(arg_reduce(ArgOp::Max, &arr(&[3], vec![NAN, INF, 0.]), 0, DType::U32), &[], vec![0u32]);
        check(arg_reduce(ArgOp::Min, &arr(&[3], vec![-INF, 0., NAN]), 0, DType::U32), &[], vec![2u32]);
        // Per row: [[2, NaN], [3, 1]].
        let m = arr(&[2, 2], vec![2.0f64, f64::NAN, 3., 1.]);
        check(arg_reduce(ArgOp::Max, &m, 1, DType::I32), &[2], vec![1i32, 0]);
        check(arg_reduce(ArgOp::Min, &m, 0, DType::I32), &[2], vec![0i32, 0]);
    }

    #[test]
    fn cumulative_scans() {
        let x = arr(&[4], vec![1.0f32, 2., 3., 4.]);
        check(cumulative(CumulativeOp::Sum, &x, 0, false), &[4], vec![1.0f32, 3., 6., 10.]);
        // From the end: 4, 4+3, 4+3+2, 4+3+2+1.
        check(cumulative(CumulativeOp::Sum, &x, 0, true), &[4], vec![10.0f32, 9., 7., 4.]);
        check(cumulative(CumulativeOp::Prod, &x, 0, true), &[4], vec![24.0f32, 24., 12., 4.]);
        // [[1,2],[3,4],[5,6]] down axis 0: products 1,2 / 3,8 / 15,48; reversed 15,48 / 15,24 / 5,6.
        let m = arr(&[3, 2], vec![1i32, 2, 3, 4, 5, 6]);
        check(cumulative(CumulativeOp::Prod, &m, 0, false), &[3, 2], vec![1i32, 2, 3, 8, 15, 48]);
        check(cumulative(CumulativeOp::Prod, &m, 0, true), &[3, 2], vec![15i32, 48, 15, 24, 5, 6]);
        check(cumulative(CumulativeOp::Sum, &m, 1, true), &[3, 2], vec![3i32, 2, 7, 4, 11, 6]);
        // Rank 3 along the last axis, wrapping: [MAX, 1] -> [MAX, MIN].
        let w = arr(&[1, 2, 2], vec![i32::MAX, 1, -1, -2]);
        check(cumulative(CumulativeOp::Sum, &w, 2, false), &[1, 2, 2], vec![i32::MAX, i32::MIN, -1, -3]);
        // [1,2,1,2] = 1..=4 along axis 1: [1,2] then [1+3, 2+4].
        let r4 = arr(&[1, 2, 1, 2], vec![1u32, 2, 3, 4]);
        check(cumulative(CumulativeOp::Sum, &r4, 1, false), &[1, 2, 1, 2], vec![1u32, 2, 4, 6]);
        check(cumulative(CumulativeOp::Min, &arr(&[3], vec![5u32, 7, 2]), 0, false), &[3], vec![5u32, 5, 2]);
        check(
            cumulative(CumulativeOp::Max, &arr(&[3], vec![false, true, false]), 0, false),
            &[3],
            vec![false, true, true],
        );
        check(
            cumulative(CumulativeOp::Min, &arr(&[3], vec![true, false, true]), 0, true),
            &[3],
            vec![false, false, true],
        );
        check(
            cumulative(CumulativeOp::Sum, &arr(&[2, 0], Vec::<f32>::new()), 1, false),
            &[2, 0],
            Vec::<f32>::new(),
        );
    }

    #[test]
    fn cumulative_nan_propagates() {
        let x = arr(&[4], vec![1.0f32, 3., NAN, 2.]);
        check(cumulative(CumulativeOp::Max, &x, 0, false), &[4], vec![1.0f32, 3., NAN, NAN]);
        // From the end: 2, min(2, NaN) = NaN, then NaN stays.
        check(cumulative(CumulativeOp::Min, &x, 0, true), &[4], vec![NAN, NAN, NAN, 2.0f32]);
        check(
            cumulative(CumulativeOp::Max, &arr(&[3], vec![-INF, -0.0, 0.0]), 0, false),
            &[3],
            vec![-INF, -0.0, 0.0],
        );
        check(
            cumulative(CumulativeOp::Min, &arr(&[3], vec![INF, 0.0, -0.0]), 0, false),
            &[3],
            vec![INF, 0.0, -0.0],
        );
    }

    #[test]
    fn sort_total_order_floats() {
        let x = arr(&[7], vec![3.0f32, NAN, 0.0, -0.0, -INF, -NAN, 1.0]);
        let payload = arr(&[7], vec![0i32, 1, 2, 3, 4, 5, 6]);
        let out = sort(&[&x, &payload], 0, 1);
        // NaNs last in input order (both signs); 0.0 and -0.0 equal, so input order is kept.
        check(out[0].clone(), &[7], vec![-INF, 0.0, -0.0, 1.0, 3.0, NAN, -NAN]);
        check(out[1].clone(), &[7], vec![4i32, 2, 3, 6, 0, 1, 5]);
        check(
            sort(&[&arr(&[4], vec![-1i32, i32::MIN, 5, 0])], 0, 1)[0].clone(),
            &[4],
            vec![i32::MIN, -1, 0, 5],
        );
        check(
            sort(&[&arr(&[3], vec![4_000_000_000u32, 0, 7])], 0, 1)[0].clone(),
            &[3],
            vec![0u32, 7, 4_000_000_000],
        );
        check(sort(&[&arr(&[0], Vec::<f64>::new())], 0, 1)[0].clone(), &[0], Vec::<f64>::new());
    }

    #[test]
    fn sort_two_keys_multi_operand_stable() {
        let k1 = arr(&[5], vec![2.0f32, 1., 2., 1., NAN]);
        let k2 = arr(&[5], vec![3i32, 5, 1, 5, 0]);
        let v = arr(&[5], vec![10u32, 11, 12, 13, 14]);
        // (2,3) (1,5) (2,1) (1,5) (NaN,0) -> positions 1, 3 (tie, stable), 2, 0, 4.
        let out = sort(&[&k1, &k2, &v], 0, 2);
        assert_eq!(out.len(), 3);
        check(out[0].clone(), &[5], vec![1.0f32, 1., 2., 2., NAN]);
        check(out[1].clone(), &[5], vec![5i32, 5, 1, 3, 0]);
        check(out[2].clone(), &[5], vec![11u32, 13, 12, 10, 14]);
        // With only k1 as key, the k2 values ride along unsorted: 1, 3, 0, 2, 4.
        let out = sort(&[&k1, &k2], 0, 1);
        check(out[1].clone(), &[5], vec![5i32, 5, 3, 1, 0]);
        // bool keys, stable: f f t t.
        let b = arr(&[4], vec![true, false, true, false]);
        let out = sort(&[&b, &arr(&[4], vec![0i32, 1, 2, 3])], 0, 1);
        check(out[0].clone(), &[4], vec![false, false, true, true]);
        check(out[1].clone(), &[4], vec![1i32, 3, 0, 2]);
    }

    #[test]
    fn sort_along_inner_dimensions() {
        // [[3,1,2],[0,5,4]] along rows and along columns, with a payload.
        let x = arr(&[2, 3], vec![3.0f64, 1., 2., 0., 5., 4.]);
        let p = arr(&[2, 3], vec![0i32, 1, 2, 3, 4, 5]);
        let out = sort(&[&x, &p], 1, 1);
        check(out[0].clone(), &[2, 3], vec![1.0f64, 2., 3., 0., 4., 5.]);
        check(out[1].clone(), &[2, 3], vec![1i32, 2, 0, 3, 5, 4]);
        let out = sort(&[&x, &p], 0, 1);
        check(out[0].clone(), &[2, 3], vec![0.0f64, 1., 2., 3., 5., 4.]);
        check(out[1].clone(), &[2, 3], vec![3i32, 1, 2, 0, 4, 5]);
        // [2,2,2] along dim 1: lanes (i,k) = (0,0): 5,2 -> 2,5; (0,1): 1,6; (1,0): 0,-1 -> -1,0; (1,1): 0,3.
        let r3 = arr(&[2, 2, 2], vec![5i32, 1, 2, 6, 0, 0, -1, 3]);
        check(sort(&[&r3], 1, 1)[0].clone(), &[2, 2, 2], vec![2i32, 1, 5, 6, -1, 0, 0, 3]);
        // [1,2,1,2] along dim 3: [4,3] -> [3,4], [1,2] stays.
        let r4 = arr(&[1, 2, 1, 2], vec![4u32, 3, 1, 2]);
        check(sort(&[&r4], 3, 1)[0].clone(), &[1, 2, 1, 2], vec![3u32, 4, 1, 2]);
    }

    fn dot(l: &Array, r: &Array, c: (&[usize], &[usize]), b: (&[usize], &[usize])) -> Array {
        dot_general(l, r, c, b, None)
    }
    const NB: (&[usize], &[usize]) = (&[], &[]);

    #[test]
    fn dot_matmul_matvec_outer() {
        // [[1,2,3],[4,5,6]] @ [[7,8],[9,10],[11,12]]:
        // 1*7+2*9+3*11 = 58, 1*8+2*10+3*12 = 64, 4*7+5*9+6*11 = 139, 4*8+5*10+6*12 = 154.
        let a = arr(&[2, 3], vec![1.0f32, 2., 3., 4., 5., 6.]);
        let b = arr(&[3, 2], vec![7.0f32, 8., 9., 10., 11., 12.]);
        check(dot(&a, &b, (&[1], &[0]), NB), &[2, 2], vec![58.0f32, 64., 139., 154.]);
        // Contracting dim 0 of both is a^T @ a: [i,j] = sum_r a[r,i] a[r,j].
        // [1*1+4*4, 1*2+4*5, 1*3+4*6; 2*1+5*4, 2*2+5*5, 2*3+5*6; 3*1+6*4, 3*2+6*5, 3*3+6*6]
        check(dot(&a, &a, (&[0], &[0]), NB), &[3, 3], vec![17.0f32, 22., 27., 22., 29., 36., 27., 36., 45.]);
        // matvec: a @ [1,0,-1] = [1-3, 4-6].
        let v = arr(&[3], vec![1.0f32, 0., -1.]);
        check(dot(&a, &v, (&[1], &[0]), NB), &[2], vec![-2.0f32, -2.]);
        // vecmat: [1,-1] @ a = [1-4, 2-5, 3-6].
        check(dot(&arr(&[2], vec![1.0f32, -1.]), &a, (&[0], &[0]), NB), &[3], vec![-3.0f32, -3., -3.]);
        // Inner product to rank 0: 1*4 + 2*5 + 3*6 = 32.
        check(
            dot(&arr(&[3], vec![1i32, 2, 3]), &arr(&[3], vec![4i32, 5, 6]), (&[0], &[0]), NB),
            &[],
            vec![32i32],
        );
        // Outer product: [1,2] x [3,4,5].
        let o = dot(&arr(&[2], vec![1.0f64, 2.]), &arr(&[3], vec![3.0f64, 4., 5.]), (&[], &[]), NB);
        check(o, &[2, 3], vec![3.0f64, 4., 5., 6., 8., 10.]);
        // Scalars: 3 * 4; scalar times vector.
        check(dot(&Array::scalar(3u32), &Array::scalar(4u32), (&[], &[]), NB), &[], vec![12u32]);
        check(dot(&Array::scalar(2i32), &arr(&[2], vec![5i32, -1]), (&[], &[]), NB), &[2], vec![10i32, -2]);
        // Empty contraction: all zeros.
        let z = dot(&arr(&[2, 0], Vec::<f32>::new()), &arr(&[0, 3], Vec::<f32>::new()), (&[1], &[0]), NB);
        check(z, &[2, 3], vec![0.0f32; 6]);
        // NaN and inf flow through the sum: [inf, 1] . [0, 1] = inf*0 + 1 = NaN.
        let n = dot(&arr(&[2], vec![INF, 1.]), &arr(&[2], vec![0.0f32, 1.]), (&[0], &[0]), NB);
        assert!(n.to_vec::<f32>().unwrap()[0].is_nan());
        // Accumulation starts at +0: 0 + (-1 * 0) = +0.
        check(dot(&arr(&[1], vec![-1.0f32]), &arr(&[1], vec![0.0f32]), (&[0], &[0]), NB), &[], vec![0.0f32]);
    }

    #[test]
    fn dot_batch_and_multi_contraction() {
        // lhs [B=2, M=1, K=2] = [[1,2]], [[3,4]]; rhs [K=2, N=2, B=2] = 1..=8, r[k,n,b] = 4k + 2n + b + 1.
        // b = 0: R0 = [[1,3],[5,7]], [1,2] @ R0 = [1+10, 3+14] = [11, 17].
        // b = 1: R1 = [[2,4],[6,8]], [3,4] @ R1 = [6+24, 12+32] = [30, 44].
        let l = arr(&[2, 1, 2], vec![1.0f32, 2., 3., 4.]);
        let r = arr(&[2, 2, 2], (1..=8).map(|i| i as f32).collect());
        check(dot(&l, &r, (&[2], &[0]), (&[0], &[2])), &[2, 1, 2], vec![11.0f32, 17., 30., 44.]);
        // Two contracting dims: l[m,k1,k2] = 4m + 2k1 + k2 + 1, r[k2,k1] = [[1,10],[100,1000]].
        // m = 0: 1*1 + 2*100 + 3*10 + 4*1000 = 4231; m = 1: 5*1 + 6*100 + 7*10 + 8*1000 = 8675.
        let l = arr(&[2, 2, 2], (1..=8).collect::<Vec<i32>>());
        let r = arr(&[2, 2], vec![1i32, 10, 100, 1000]);
        check(dot(&l, &r, (&[1, 2], &[1, 0]), NB), &[2], vec![4231i32, 8675]);
        // Contracting dims listed in the other order give the same pairs.
        check(dot(&l, &r, (&[2, 1], &[0, 1]), NB), &[2], vec![4231i32, 8675]);
        // Rank 4, two batch dims: lhs [1,2,1,2], rhs [1,2,2,1].
        // b2 = 0: [1,2] . [5,6] = 17; b2 = 1: [3,4] . [7,8] = 53.
        let l = arr(&[1, 2, 1, 2], vec![1.0f64, 2., 3., 4.]);
        let r = arr(&[1, 2, 2, 1], vec![5.0f64, 6., 7., 8.]);
        check(dot(&l, &r, (&[3], &[2]), (&[0, 1], &[0, 1])), &[1, 2, 1, 1], vec![17.0f64, 53.]);
        // Batch only (elementwise product): [2] x [2] batched -> [2].
        let e = dot(&arr(&[2], vec![3u32, 4]), &arr(&[2], vec![5u32, 6]), (&[], &[]), (&[0], &[0]));
        check(e, &[2], vec![15u32, 24]);
        // Free dims order: batch, lhs free, rhs free. lhs [K=1, M=2], rhs [N=3, K=1]:
        // out[m,n] = l[0,m] * r[n,0] = [1,2] x [1,10,100].
        let l = arr(&[1, 2], vec![1i32, 2]);
        let r = arr(&[3, 1], vec![1i32, 10, 100]);
        check(dot(&l, &r, (&[0], &[1]), NB), &[2, 3], vec![1i32, 10, 100, 2, 20, 200]);
    }

    #[test]
    fn dot_ints_wrap_and_preferred_type() {
        // 65536 * 65536 = 2^32 wraps to 0; MAX + 1 wraps to MIN.
        let c = (&[0usize][..], &[0usize][..]);
        check(dot(&arr(&[1], vec![65536i32]), &arr(&[1], vec![65536i32]), c, NB), &[], vec![0i32]);
        check(dot(&arr(&[2], vec![i32::MAX, 1]), &arr(&[2], vec![1i32, 1]), c, NB), &[], vec![i32::MIN]);
        check(dot(&arr(&[2], vec![u32::MAX, 3]), &arr(&[2], vec![1u32, 1]), c, NB), &[], vec![2u32]);
        // f32 accumulation loses the 1: 2^24 + 1 rounds to 2^24 (ties to even); f64 keeps it.
        let (l, r) = (arr(&[2], vec![16777216.0f32, 1.]), arr(&[2], vec![1.0f32, 1.]));
        check(dot_general(&l, &r, c, NB, None), &[], vec![16777216.0f32]);
        check(dot_general(&l, &r, c, NB, Some(DType::F64)), &[], vec![16777217.0f64]);
        check(dot_general(&l, &r, c, NB, Some(DType::F32)), &[], vec![16777216.0f32]);
        // Matmul in f64 from f32 inputs: [[0.5, 0.25]] @ [[2],[4]] = 1 + 1.
        let m = dot_general(
            &arr(&[1, 2], vec![0.5f32, 0.25]),
            &arr(&[2, 1], vec![2.0f32, 4.]),
            (&[1], &[0]),
            NB,
            Some(DType::F64),
        );
        check(m, &[1, 1], vec![2.0f64]);
        // i32 -> f32 first: 2^24 + 1 is not an f32 and rounds to 2^24.
        let p = dot_general(&arr(&[1], vec![16777217i32]), &arr(&[1], vec![1i32]), c, NB, Some(DType::F32));
        check(p, &[], vec![16777216.0f32]);
        // i32 -> u32 wraps: -1 becomes u32::MAX, times 2 wraps to u32::MAX - 1.
        let q = dot_general(&arr(&[1], vec![-1i32]), &arr(&[1], vec![2i32]), c, NB, Some(DType::U32));
        check(q, &[], vec![u32::MAX - 1]);
        // f32 -> i32 truncates toward zero and saturates: 2.9 -> 2, -2.9 -> -2, 1e10 -> MAX.
        let t = dot_general(
            &arr(&[3], vec![2.9f32, -2.9, 1e10]),
            &arr(&[3], vec![1.0f32, 0.0, 0.0]),
            c,
            NB,
            Some(DType::I32),
        );
        check(t, &[], vec![2i32]);
        let t = dot_general(&arr(&[1], vec![1e10f32]), &arr(&[1], vec![1.0f32]), c, NB, Some(DType::I32));
        check(t, &[], vec![i32::MAX]);
    }
}
