//! Reductions, prefix scans, sort and `dot_general`.
//!
//! Each primitive is one generic function over [`Num`], dispatched with [`with_array!`]. All
//! accumulation is sequential, starting from the op's identity and walking the elements in row-major
//! order, in the element type (ints wrap) — so results are deterministic and a sum of only `-0.0`
//! is `+0.0`, as XLA's `reduce` with init value 0.

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
        .map(|x| with_array!(x, a => lanes_last(a, dimension).into_iter().map(Num::order_key).collect()))
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
    /// A key whose `u64` order is sort's total order: `-0.0 < 0.0`, every NaN last and equal to the
    /// others (so a stable sort keeps their input order), `false < true`.
    fn order_key(self) -> u64;
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
    // become one contiguous run, in row-major order.
    let kept: Vec<usize> = (0..a.ndim()).filter(|d| !axes.contains(d)).collect();
    let mut reduced = axes.to_vec();
    reduced.sort_unstable();
    let data = permuted_vec(a, &[kept.as_slice(), &reduced].concat());
    let out_dims: Vec<usize> = kept.iter().map(|&d| a.shape()[d]).collect();
    let run: usize = reduced.iter().map(|&d| a.shape()[d]).product();
    let out = (0..out_dims.iter().product())
        .map(|o: usize| data[o * run..(o + 1) * run].iter().fold(identity(op), |acc, &x| combine(op, acc, x)))
        .collect();
    from_vec(&out_dims, out)
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
    let mut out = Vec::with_capacity(nb * m * n);
    for b in 0..nb {
        for i in 0..m {
            for j in 0..n {
                let dot = (0..k)
                    .fold(T::ZERO, |acc, p| acc.add(lm[(b * m + i) * k + p].mul(rm[(b * k + p) * n + j])));
                out.push(dot);
            }
        }
    }
    from_vec(&[bs, ms, ns].concat(), out)
}
