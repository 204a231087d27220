//! Elementwise primitives, conversions, `iota` and `threefry2x32`.
//!
//! Every dtype implements [`Kernel`], the scalar semantics of the unary and binary ops (one exhaustive
//! `match` per dtype family, written once for `f32`/`f64` and once for `i32`/`u32` by macros); the
//! array functions below only map or zip a kernel over `ndarray`s. Operands are well-typed (the shape
//! rule ran first), so an op on a dtype it does not accept is a bug and panics.

use crate::{Array, BinaryOp, CompareOp, DType, Element, Shape, UnaryOp};
use ndarray::{ArrayD, IxDyn, Zip};
use std::f64::consts::FRAC_2_SQRT_PI;

/// Matches two arrays of the same dtype, binding their `ndarray`s to `$a` and `$b`.
macro_rules! with_pair {
    ($x:expr, $y:expr, ($a:ident, $b:ident) => $body:expr) => {
        match ($x, $y) {
            (Array::F32($a), Array::F32($b)) => $body,
            (Array::F64($a), Array::F64($b)) => $body,
            (Array::I32($a), Array::I32($b)) => $body,
            (Array::U32($a), Array::U32($b)) => $body,
            (Array::Bool($a), Array::Bool($b)) => $body,
            (x, y) => panic!("elementwise operands of different dtypes {} and {}", x.dtype(), y.dtype()),
        }
    };
}

pub(super) fn unary(op: UnaryOp, x: &Array) -> Array {
    // `is_finite` is the one unary op whose result dtype differs from the operand's.
    if op == UnaryOp::IsFinite {
        return Array::Bool(crate::with_array!(x, a => a.mapv(Kernel::is_finite)));
    }
    crate::with_array!(x, a => Element::wrap(a.mapv(|v| v.unary(op))))
}

pub(super) fn binary(op: BinaryOp, x: &Array, y: &Array) -> Array {
    with_pair!(x, y, (a, b) => Element::wrap(zip_map(a, b, |p, q| p.binary(op, q))))
}

pub(super) fn compare(op: CompareOp, x: &Array, y: &Array) -> Array {
    // Rust's `PartialOrd` is IEEE for floats (NaN unordered, -0.0 == 0.0) and has false < true.
    Array::Bool(with_pair!(x, y, (a, b) => zip_map(a, b, |p, q| compare_elem(op, p, q))))
}

/// `pred` is bool of the arms' shape or a bool scalar.
pub(super) fn select(pred: &Array, on_true: &Array, on_false: &Array) -> Array {
    let Array::Bool(p) = pred else { ill_typed("select's predicate", pred.dtype()) };
    if p.ndim() == 0 {
        let arm = if p[IxDyn(&[])] { on_true } else { on_false };
        return arm.clone();
    }
    with_pair!(on_true, on_false, (t, f) => Element::wrap(
        Zip::from(p).and(t).and(f).map_collect(|&c, &t, &f| if c { t } else { f })
    ))
}

/// `lo`/`hi` have x's type or are scalars of x's dtype.
pub(super) fn clamp(lo: &Array, x: &Array, hi: &Array) -> Array {
    // XLA defines clamp as min(max(x, lo), hi), so a NaN anywhere propagates like in max/min.
    let shape = x.shape();
    let lo = broadcast_to(lo, &shape);
    let hi = broadcast_to(hi, &shape);
    binary(BinaryOp::Min, &binary(BinaryOp::Max, x, &lo), &hi)
}

pub(super) fn convert(x: &Array, dtype: DType) -> Array {
    match dtype {
        DType::F32 => Array::F32(convert_to(x)),
        DType::F64 => Array::F64(convert_to(x)),
        DType::I32 => Array::I32(convert_to(x)),
        DType::U32 => Array::U32(convert_to(x)),
        DType::Bool => Array::Bool(convert_to(x)),
    }
}

pub(super) fn bitcast(x: &Array, dtype: DType) -> Array {
    // The 32-bit dtypes all go through their u32 bit pattern; f64 only bitcasts to itself.
    let bits = match x {
        Array::F32(a) => a.mapv(f32::to_bits),
        Array::I32(a) => a.mapv(|v| v as u32),
        Array::U32(a) => a.clone(),
        Array::F64(a) if dtype == DType::F64 => return Array::F64(a.clone()),
        Array::F64(_) | Array::Bool(_) => ill_typed("bitcast_convert_type", x.dtype()),
    };
    match dtype {
        DType::F32 => Array::F32(bits.mapv(f32::from_bits)),
        DType::I32 => Array::I32(bits.mapv(|b| b as i32)),
        DType::U32 => Array::U32(bits),
        DType::F64 | DType::Bool => ill_typed("bitcast_convert_type to", dtype),
    }
}

/// Built in its dtype directly: `eval_prim` checked only the result's size, so no temporary (an
/// index array of `usize` was twice a u32 result) may exceed it.
pub(super) fn iota(dtype: DType, shape: &Shape, dimension: usize) -> Array {
    let dims = IxDyn(shape.dims());
    match dtype {
        DType::F32 => Array::F32(ArrayD::from_shape_fn(dims, |ix| ix[dimension] as f32)),
        DType::F64 => Array::F64(ArrayD::from_shape_fn(dims, |ix| ix[dimension] as f64)),
        DType::I32 => Array::I32(ArrayD::from_shape_fn(dims, |ix| ix[dimension] as i32)),
        DType::U32 => Array::U32(ArrayD::from_shape_fn(dims, |ix| ix[dimension] as u32)),
        DType::Bool => ill_typed("iota", dtype),
    }
}

/// Writes both results in one pass (no array of pairs: as for [`iota`], nothing beyond the results).
pub(super) fn threefry2x32(k0: &Array, k1: &Array, x0: &Array, x1: &Array) -> Vec<Array> {
    let mut y0 = ArrayD::<u32>::zeros(as_u32(x0).raw_dim());
    let mut y1 = ArrayD::<u32>::zeros(as_u32(x0).raw_dim());
    Zip::from(&mut y0)
        .and(&mut y1)
        .and(as_u32(k0))
        .and(as_u32(k1))
        .and(as_u32(x0))
        .and(as_u32(x1))
        .for_each(|y0, y1, &k0, &k1, &x0, &x1| (*y0, *y1) = threefry_block(k0, k1, x0, x1));
    vec![Array::U32(y0), Array::U32(y1)]
}

fn as_u32(a: &Array) -> &ArrayD<u32> {
    match a {
        Array::U32(a) => a,
        Array::F32(_) | Array::F64(_) | Array::I32(_) | Array::Bool(_) => {
            ill_typed("threefry2x32", a.dtype())
        }
    }
}

#[track_caller]
fn ill_typed(what: &str, dtype: DType) -> ! {
    panic!("{what} on {dtype}: an ill-typed operand reached the interpreter (the shape rule rejects it)")
}

fn zip_map<T: Copy, U>(a: &ArrayD<T>, b: &ArrayD<T>, f: impl Fn(T, T) -> U) -> ArrayD<U> {
    Zip::from(a).and(b).map_collect(|&p, &q| f(p, q))
}

/// `a` itself if it already has `shape`, else the rank-0 `a` repeated over `shape`.
fn broadcast_to(a: &Array, shape: &Shape) -> Array {
    crate::with_array!(a, v => Element::wrap(
        v.broadcast(IxDyn(shape.dims())).expect("clamp bounds are x-shaped or scalars").to_owned()
    ))
}

fn compare_elem<T: PartialOrd>(op: CompareOp, x: T, y: T) -> bool {
    match op {
        CompareOp::Eq => x == y,
        CompareOp::Ne => x != y,
        CompareOp::Lt => x < y,
        CompareOp::Le => x <= y,
        CompareOp::Gt => x > y,
        CompareOp::Ge => x >= y,
    }
}

/// The scalar semantics of the unary and binary ops for one dtype.
trait Kernel: Element {
    /// The unary op on one element (`is_finite` excluded: see [`Kernel::is_finite`]).
    fn unary(self, op: UnaryOp) -> Self;
    /// The binary op on one pair of elements.
    fn binary(self, op: BinaryOp, y: Self) -> Self;
    /// `is_finite` (floats only).
    fn is_finite(self) -> bool;
}

macro_rules! float_kernel {
    ($t:ident, $erf:path) => {
        impl Kernel for $t {
            fn unary(self, op: UnaryOp) -> $t {
                let x = self;
                match op {
                    UnaryOp::Neg => -x,
                    UnaryOp::Abs => x.abs(),
                    // `signum` maps ±0.0 to ±1.0; XLA keeps zeros (and NaN) as they are.
                    UnaryOp::Sign => {
                        if x == 0.0 || x.is_nan() {
                            x
                        } else {
                            <$t>::copysign(1.0, x)
                        }
                    }
                    UnaryOp::Floor => x.floor(),
                    UnaryOp::Ceil => x.ceil(),
                    UnaryOp::Round => x.round(),
                    UnaryOp::RoundEven => x.round_ties_even(),
                    UnaryOp::Exp => x.exp(),
                    UnaryOp::Expm1 => x.exp_m1(),
                    UnaryOp::Log => x.ln(),
                    UnaryOp::Log1p => x.ln_1p(),
                    UnaryOp::Sqrt => x.sqrt(),
                    UnaryOp::Rsqrt => 1.0 / x.sqrt(),
                    UnaryOp::Sin => x.sin(),
                    UnaryOp::Cos => x.cos(),
                    UnaryOp::Tanh => x.tanh(),
                    // exp of a negative argument only: no inf/inf for large |x|.
                    UnaryOp::Logistic => {
                        if x >= 0.0 {
                            1.0 / (1.0 + (-x).exp())
                        } else {
                            let e = x.exp();
                            e / (1.0 + e)
                        }
                    }
                    UnaryOp::Erf => $erf(x),
                    // Computed in f64 to well under an f32 ulp, then rounded.
                    UnaryOp::ErfInv => erf_inv(x as f64) as $t,
                    UnaryOp::IsFinite | UnaryOp::Not => ill_typed(op.name(), <$t>::DTYPE),
                }
            }

            fn binary(self, op: BinaryOp, y: $t) -> $t {
                let x = self;
                match op {
                    BinaryOp::Add => x + y,
                    BinaryOp::Sub => x - y,
                    BinaryOp::Mul => x * y,
                    BinaryOp::Div => x / y,
                    // Rust's float `%` is C's fmod: the sign of the dividend.
                    BinaryOp::Rem => x % y,
                    BinaryOp::Pow => x.powf(y),
                    // IEEE 754-2019 maximum/minimum: NaN wins, and +0.0 > -0.0. `x + y` returns a NaN.
                    BinaryOp::Max => {
                        if x.is_nan() || y.is_nan() {
                            x + y
                        } else if x == y {
                            if x.is_sign_negative() { y } else { x }
                        } else {
                            x.max(y)
                        }
                    }
                    BinaryOp::Min => {
                        if x.is_nan() || y.is_nan() {
                            x + y
                        } else if x == y {
                            if x.is_sign_negative() { x } else { y }
                        } else {
                            x.min(y)
                        }
                    }
                    BinaryOp::Atan2 => x.atan2(y),
                    BinaryOp::And
                    | BinaryOp::Or
                    | BinaryOp::Xor
                    | BinaryOp::ShiftLeft
                    | BinaryOp::ShiftRightLogical => ill_typed(op.name(), <$t>::DTYPE),
                }
            }

            fn is_finite(self) -> bool {
                <$t>::is_finite(self)
            }
        }
    };
}
float_kernel!(f32, libm::erff);
float_kernel!(f64, libm::erf);

macro_rules! int_kernel {
    ($t:ident, abs: $abs:expr, sign: $sign:expr) => {
        impl Kernel for $t {
            fn unary(self, op: UnaryOp) -> $t {
                let x = self;
                match op {
                    UnaryOp::Neg => x.wrapping_neg(),
                    UnaryOp::Abs => $abs(x),
                    UnaryOp::Sign => $sign(x),
                    UnaryOp::Not => !x,
                    UnaryOp::Floor
                    | UnaryOp::Ceil
                    | UnaryOp::Round
                    | UnaryOp::RoundEven
                    | UnaryOp::Exp
                    | UnaryOp::Expm1
                    | UnaryOp::Log
                    | UnaryOp::Log1p
                    | UnaryOp::Sqrt
                    | UnaryOp::Rsqrt
                    | UnaryOp::Sin
                    | UnaryOp::Cos
                    | UnaryOp::Tanh
                    | UnaryOp::Logistic
                    | UnaryOp::Erf
                    | UnaryOp::ErfInv
                    | UnaryOp::IsFinite => ill_typed(op.name(), <$t>::DTYPE),
                }
            }

            fn binary(self, op: BinaryOp, y: $t) -> $t {
                let x = self;
                // Shift amounts are read as their u32 bit pattern, so negative i32 amounts are >= 32.
                let shift = y as u32;
                match op {
                    BinaryOp::Add => x.wrapping_add(y),
                    BinaryOp::Sub => x.wrapping_sub(y),
                    BinaryOp::Mul => x.wrapping_mul(y),
                    // XLA: x/0 is all ones (-1, u32::MAX); MIN / -1 wraps to MIN.
                    BinaryOp::Div => {
                        if y == 0 {
                            !0
                        } else {
                            x.wrapping_div(y)
                        }
                    }
                    // XLA: x%0 = x; MIN % -1 = 0 (wrapping_rem).
                    BinaryOp::Rem => {
                        if y == 0 {
                            x
                        } else {
                            x.wrapping_rem(y)
                        }
                    }
                    BinaryOp::Max => x.max(y),
                    BinaryOp::Min => x.min(y),
                    BinaryOp::And => x & y,
                    BinaryOp::Or => x | y,
                    BinaryOp::Xor => x ^ y,
                    BinaryOp::ShiftLeft => {
                        if shift >= 32 {
                            0
                        } else {
                            x << shift
                        }
                    }
                    BinaryOp::ShiftRightLogical => {
                        if shift >= 32 {
                            0
                        } else {
                            ((x as u32) >> shift) as $t
                        }
                    }
                    BinaryOp::Pow | BinaryOp::Atan2 => ill_typed(op.name(), <$t>::DTYPE),
                }
            }

            fn is_finite(self) -> bool {
                ill_typed("is_finite", <$t>::DTYPE)
            }
        }
    };
}
int_kernel!(i32, abs: i32::wrapping_abs, sign: i32::signum);
int_kernel!(u32, abs: |x: u32| x, sign: |x: u32| x.min(1));

impl Kernel for bool {
    fn unary(self, op: UnaryOp) -> bool {
        match op {
            UnaryOp::Not => !self,
            UnaryOp::Neg
            | UnaryOp::Abs
            | UnaryOp::Sign
            | UnaryOp::Floor
            | UnaryOp::Ceil
            | UnaryOp::Round
            | UnaryOp::RoundEven
            | UnaryOp::Exp
            | UnaryOp::Expm1
            | UnaryOp::Log
            | UnaryOp::Log1p
            | UnaryOp::Sqrt
            | UnaryOp::Rsqrt
            | UnaryOp::Sin
            | UnaryOp::Cos
            | UnaryOp::Tanh
            | UnaryOp::Logistic
            | UnaryOp::Erf
            | UnaryOp::ErfInv
            | UnaryOp::IsFinite => ill_typed(op.name(), DType::Bool),
        }
    }

    fn binary(self, op: BinaryOp, y: bool) -> bool {
        match op {
            // false < true, so max is `or` and min is `and`.
            BinaryOp::And | BinaryOp::Min => self & y,
            BinaryOp::Or | BinaryOp::Max => self | y,
            BinaryOp::Xor => self ^ y,
            BinaryOp::Add
            | BinaryOp::Sub
            | BinaryOp::Mul
            | BinaryOp::Div
            | BinaryOp::Rem
            | BinaryOp::Pow
            | BinaryOp::Atan2
            | BinaryOp::ShiftLeft
            | BinaryOp::ShiftRightLogical => ill_typed(op.name(), DType::Bool),
        }
    }

    fn is_finite(self) -> bool {
        ill_typed("is_finite", DType::Bool)
    }
}

/// The inverse error function in f64, within 2 ulp (the f32 `erf_inv` rounds this). Shared with the
/// CPU backend so both compute the same bits.
///
/// Giles' single-precision polynomials ("Approximating the erfinv function", GPU Computing Gems, 2011;
/// XLA's f32 `ErfInv`) give a first guess good to ~1e-7 relative; Halley steps on the residual
/// `erf(y) - x` then reach f64 accuracy (each step cubes the error; the loop stops when a step no
/// longer changes `y`, usually after one or two). For |x| > 0.5 the residual is formed as
/// `(1 - x) - erfc(y)`, where `1 - x` is exact (Sterbenz), so it does not cancel near ±1.
pub fn erf_inv(x: f64) -> f64 {
    if x.is_nan() || x.abs() > 1.0 {
        return f64::NAN;
    }
    if x == 0.0 {
        return x; // keeps the sign of zero
    }
    if x.abs() == 1.0 {
        return f64::INFINITY.copysign(x);
    }
    let a = x.abs();
    let q = 1.0 - a;
    let w = if a <= 0.5 { -(-a * a).ln_1p() } else { -(q * (1.0 + a)).ln() };
    let p = if w < 5.0 {
        horner(
            w - 2.5,
            &[
                2.81022636e-08,
                3.43273939e-07,
                -3.5233877e-06,
                -4.39150654e-06,
                0.00021858087,
                -0.00125372503,
                -0.00417768164,
                0.246640727,
                1.50140941,
            ],
        )
    } else {
        horner(
            w.sqrt() - 3.0,
            &[
                -0.000200214257,
                0.000100950558,
                0.00134934322,
                -0.00367342844,
                0.00573950773,
                -0.0076224613,
                0.00943887047,
                1.00167406,
                2.83297682,
            ],
        )
    };
    let mut y = p * a;
    for _ in 0..8 {
        let residual = if a <= 0.5 { libm::erf(y) - a } else { q - libm::erfc(y) };
        // Newton's step t = f/f'; Halley's step t / (1 - t f''/(2 f')) with f''/f' = -2y.
        let t = residual / (FRAC_2_SQRT_PI * (-y * y).exp());
        let step = t / (1.0 + y * t);
        let next = y - step;
        if next == y || !next.is_finite() {
            break;
        }
        y = next;
    }
    y.copysign(x)
}

/// Evaluates a polynomial with coefficients from the highest degree down.
fn horner(w: f64, coefficients: &[f64]) -> f64 {
    coefficients.iter().fold(0.0, |p, &c| p * w + c)
}

/// Conversion from each dtype's elements (`convert_element_type`).
trait FromElement: Element {
    fn from_f32(v: f32) -> Self;
    fn from_f64(v: f64) -> Self;
    fn from_i32(v: i32) -> Self;
    fn from_u32(v: u32) -> Self;
    fn from_bool(v: bool) -> Self;
}

// Rust's `as` is exactly XLA's CPU conversion: float->int truncates toward zero and saturates with
// NaN -> 0, int->float and f64->f32 round to nearest, i32<->u32 keeps the bit pattern.
macro_rules! from_element_numeric {
    ($($t:ident),*) => {$(
        impl FromElement for $t {
            fn from_f32(v: f32) -> $t { v as $t }
            fn from_f64(v: f64) -> $t { v as $t }
            fn from_i32(v: i32) -> $t { v as $t }
            fn from_u32(v: u32) -> $t { v as $t }
            fn from_bool(v: bool) -> $t { u8::from(v) as $t }
        }
    )*};
}
from_element_numeric!(f32, f64, i32, u32);

impl FromElement for bool {
    // `x != 0`: NaN is true, -0.0 is false.
    fn from_f32(v: f32) -> bool {
        v != 0.0
    }
    fn from_f64(v: f64) -> bool {
        v != 0.0
    }
    fn from_i32(v: i32) -> bool {
        v != 0
    }
    fn from_u32(v: u32) -> bool {
        v != 0
    }
    fn from_bool(v: bool) -> bool {
        v
    }
}

fn convert_to<U: FromElement>(x: &Array) -> ArrayD<U> {
    match x {
        Array::F32(a) => a.mapv(U::from_f32),
        Array::F64(a) => a.mapv(U::from_f64),
        Array::I32(a) => a.mapv(U::from_i32),
        Array::U32(a) => a.mapv(U::from_u32),
        Array::Bool(a) => a.mapv(U::from_bool),
    }
}

/// The rotation distances of the Threefry-2x32 rounds, alternating in groups of four.
const THREEFRY_ROTATIONS: [[u32; 4]; 2] = [[13, 15, 26, 6], [17, 29, 16, 24]];

/// One Threefry-2x32 block with 20 rounds (Salmon et al., "Parallel random numbers: as easy as 1, 2,
/// 3", SC 2011), as JAX's `threefry2x32_p`: five groups of four rounds, each group followed by a key
/// injection that adds the next pair of the key schedule `[k0, k1, k0^k1^0x1BD11BDA]` (rotating) and
/// the group's number to the second word.
fn threefry_block(k0: u32, k1: u32, x0: u32, x1: u32) -> (u32, u32) {
    let ks = [k0, k1, k0 ^ k1 ^ 0x1BD1_1BDA];
    let mut x = [x0.wrapping_add(ks[0]), x1.wrapping_add(ks[1])];
    for group in 0..5 {
        for &r in &THREEFRY_ROTATIONS[group % 2] {
            x[0] = x[0].wrapping_add(x[1]);
            x[1] = x[1].rotate_left(r) ^ x[0];
        }
        let injection = group + 1;
        x[0] = x[0].wrapping_add(ks[injection % 3]);
        x[1] = x[1].wrapping_add(ks[(injection + 1) % 3]).wrapping_add(injection as u32);
    }
    (x[0], x[1])
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::f64::consts::PI;

    const NAN32: f32 = f32::NAN;
    const INF32: f32 = f32::INFINITY;
    const NAN: f64 = f64::NAN;
    const INF: f64 = f64::INFINITY;

    fn f32s(v: &[f32]) -> Array {
        Array::from_vec(&[v.len()], v.to_vec())
    }
    fn f64s(v: &[f64]) -> Array {
        Array::from_vec(&[v.len()], v.to_vec())
    }
    fn i32s(v: &[i32]) -> Array {
        Array::from_vec(&[v.len()], v.to_vec())
    }
    fn u32s(v: &[u32]) -> Array {
        Array::from_vec(&[v.len()], v.to_vec())
    }
    fn bools(v: &[bool]) -> Array {
        Array::from_vec(&[v.len()], v.to_vec())
    }

    /// Bitwise comparison, so NaN matches NaN and -0.0 differs from 0.0.
    #[track_caller]
    fn assert_bits(got: Array, want: Array) {
        assert!(got.bitwise_eq(&want), "got {got:?}, want {want:?}");
    }

    /// NaN-aware bit comparison that accepts any NaN payload.
    #[track_caller]
    fn assert_f32(got: &Array, want: &[f32]) {
        let got = got.to_vec::<f32>().expect("f32 result");
        assert_eq!(got.len(), want.len());
        for (g, w) in got.iter().zip(want) {
            assert!(g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan()), "got {got:?}, want {want:?}");
        }
    }
    #[track_caller]
    fn assert_f64(got: &Array, want: &[f64]) {
        let got = got.to_vec::<f64>().expect("f64 result");
        assert_eq!(got.len(), want.len());
        for (g, w) in got.iter().zip(want) {
            assert!(g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan()), "got {got:?}, want {want:?}");
        }
    }

    /// Distance in ulps between two finite f64 (through the monotone integer image of the bits).
    fn ulps64(a: f64, b: f64) -> u64 {
        let key = |x: f64| {
            let b = x.to_bits() as i64;
            if b < 0 { i64::MIN - b } else { b }
        };
        key(a).abs_diff(key(b))
    }
    fn ulps32(a: f32, b: f32) -> u32 {
        let key = |x: f32| {
            let b = x.to_bits() as i32;
            if b < 0 { i32::MIN - b } else { b }
        };
        key(a).abs_diff(key(b))
    }

    /// Within `max_ulps` of `want`; NaN must match NaN and zeros and infinities must match exactly.
    #[track_caller]
    fn assert_close64(got: &Array, want: &[f64], max_ulps: u64) {
        let got = got.to_vec::<f64>().unwrap();
        assert_eq!(got.len(), want.len());
        for (&g, &w) in got.iter().zip(want) {
            let ok = if w.is_nan() || w == 0.0 || w.is_infinite() {
                g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan())
            } else {
                ulps64(g, w) <= max_ulps
            };
            assert!(ok, "got {got:?}, want {want:?}");
        }
    }
    #[track_caller]
    fn assert_close32(got: &Array, want: &[f32], max_ulps: u32) {
        let got = got.to_vec::<f32>().unwrap();
        assert_eq!(got.len(), want.len());
        for (&g, &w) in got.iter().zip(want) {
            let ok = if w.is_nan() || w == 0.0 || w.is_infinite() {
                g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan())
            } else {
                ulps32(g, w) <= max_ulps
            };
            assert!(ok, "got {got:?}, want {want:?}");
        }
    }

    // ---- unary ----

    #[test]
    fn neg_and_abs_keep_signs_and_wrap() {
        let x = f32s(&[1.5, -0.0, 0.0, INF32, -INF32, NAN32]);
        assert_f32(&unary(UnaryOp::Neg, &x), &[-1.5, 0.0, -0.0, -INF32, INF32, NAN32]);
        assert_f32(&unary(UnaryOp::Abs, &x), &[1.5, 0.0, 0.0, INF32, INF32, NAN32]);
        assert_f64(&unary(UnaryOp::Abs, &f64s(&[-0.0, -2.0, 5e-324])), &[0.0, 2.0, 5e-324]);
        assert_bits(unary(UnaryOp::Neg, &i32s(&[i32::MIN, 5, 0])), i32s(&[i32::MIN, -5, 0]));
        assert_bits(unary(UnaryOp::Abs, &i32s(&[i32::MIN, -5, 7])), i32s(&[i32::MIN, 5, 7]));
        assert_bits(unary(UnaryOp::Neg, &u32s(&[1, 0])), u32s(&[u32::MAX, 0]));
        assert_bits(unary(UnaryOp::Abs, &u32s(&[u32::MAX])), u32s(&[u32::MAX]));
    }

    #[test]
    fn sign_keeps_zeros_and_nan() {
        let x = f32s(&[-2.5, -0.0, 0.0, 3.0, NAN32, -INF32, 1e-45]);
        assert_f32(&unary(UnaryOp::Sign, &x), &[-1.0, -0.0, 0.0, 1.0, NAN32, -1.0, 1.0]);
        assert_f64(&unary(UnaryOp::Sign, &f64s(&[-5e-324, INF, -0.0])), &[-1.0, 1.0, -0.0]);
        assert_bits(unary(UnaryOp::Sign, &i32s(&[-7, 0, 9, i32::MIN])), i32s(&[-1, 0, 1, -1]));
        assert_bits(unary(UnaryOp::Sign, &u32s(&[0, 5, u32::MAX])), u32s(&[0, 1, 1]));
    }

    #[test]
    fn floor_ceil_round() {
        let x = f32s(&[-1.5, 1.5, -0.5, -0.0, INF32, NAN32, 2.5, 0.49999997]);
        assert_f32(&unary(UnaryOp::Floor, &x), &[-2.0, 1.0, -1.0, -0.0, INF32, NAN32, 2.0, 0.0]);
        // ceil(-0.5) is -0.0.
        assert_f32(&unary(UnaryOp::Ceil, &x), &[-1.0, 2.0, -0.0, -0.0, INF32, NAN32, 3.0, 1.0]);
        // Half away from zero; 0.49999997 (the f32 below 0.5) rounds down.
        assert_f32(&unary(UnaryOp::Round, &x), &[-2.0, 2.0, -1.0, -0.0, INF32, NAN32, 3.0, 0.0]);
        // Ties to even; round_even(-0.5) is -0.0.
        assert_f32(&unary(UnaryOp::RoundEven, &x), &[-2.0, 2.0, -0.0, -0.0, INF32, NAN32, 2.0, 0.0]);
        let y = f64s(&[0.5, 1.5, 2.5, -2.5, -0.4, 4503599627370497.0]);
        assert_f64(&unary(UnaryOp::Round, &y), &[1.0, 2.0, 3.0, -3.0, -0.0, 4503599627370497.0]);
        assert_f64(&unary(UnaryOp::RoundEven, &y), &[0.0, 2.0, 2.0, -2.0, -0.0, 4503599627370497.0]);
    }

    #[test]
    fn exp_and_log_families() {
        let x = f32s(&[0.0, -INF32, INF32, NAN32, 89.0, -0.0]);
        // e^89 ≈ 4.5e38 overflows f32 (max ≈ 3.4e38).
        assert_f32(&unary(UnaryOp::Exp, &x), &[1.0, 0.0, INF32, NAN32, INF32, 1.0]);
        assert_close64(&unary(UnaryOp::Exp, &f64s(&[1.0])), &[std::f64::consts::E], 1);
        // expm1(x) = x + x²/2 + ...: expm1(1e-10) = 1.00000000005e-10; expm1(-0.0) = -0.0.
        let e = unary(UnaryOp::Expm1, &f64s(&[1e-10, -0.0, -INF, 0.0]));
        assert_close64(&e, &[1.00000000005e-10, -0.0, -1.0, 0.0], 1);
        let l = unary(UnaryOp::Log, &f64s(&[0.0, -0.0, -1.0, 1.0, INF, NAN]));
        assert_f64(&l, &[-INF, -INF, NAN, 0.0, INF, NAN]);
        assert_close64(&unary(UnaryOp::Log, &f64s(&[10.0])), &[std::f64::consts::LN_10], 1);
        // log1p(x) = x - x²/2 + ...: log1p(1e-10) = 9.9999999995e-11.
        assert_close64(&unary(UnaryOp::Log1p, &f64s(&[1e-10])), &[9.9999999995e-11], 1);
        assert_f32(&unary(UnaryOp::Log1p, &f32s(&[-1.0, -0.0, -2.0, INF32])), &[-INF32, -0.0, NAN32, INF32]);
        // Subnormals: log of the smallest f32 subnormal 2^-149 is -149 ln 2 ≈ -103.27893.
        assert_close32(&unary(UnaryOp::Log, &f32s(&[1e-45])), &[-103.27893], 1);
    }

    #[test]
    fn sqrt_and_rsqrt() {
        let x = f32s(&[4.0, -0.0, 0.0, -1.0, INF32, NAN32, 0.25]);
        assert_f32(&unary(UnaryOp::Sqrt, &x), &[2.0, -0.0, 0.0, NAN32, INF32, NAN32, 0.5]);
        assert_f32(&unary(UnaryOp::Rsqrt, &x), &[0.5, -INF32, INF32, NAN32, 0.0, NAN32, 2.0]);
        // sqrt(2^-1074) = 2^-537, exact.
        assert_f64(&unary(UnaryOp::Sqrt, &f64s(&[5e-324])), &[2f64.powi(-537)]);
    }

    #[test]
    fn trig_and_tanh() {
        let x = f64s(&[0.0, -0.0, 1.0, INF, NAN]);
        // sin(1) = 0.8414709848078965, cos(1) = 0.5403023058681398 (to 16 digits).
        assert_close64(&unary(UnaryOp::Sin, &x), &[0.0, -0.0, 0.8414709848078965, NAN, NAN], 1);
        assert_close64(&unary(UnaryOp::Cos, &x), &[1.0, 1.0, 0.5403023058681398, NAN, NAN], 1);
        // sin(π/6) = 0.5 up to the rounding of π/6.
        assert_close64(&unary(UnaryOp::Sin, &f64s(&[PI / 6.0])), &[0.5], 1);
        // tanh(0.5) = (e - 1)/(e + 1) = 0.46211715726000976; tanh(20) rounds to 1 in f32.
        let t = unary(UnaryOp::Tanh, &f32s(&[0.5, -0.0, INF32, -INF32, 20.0, NAN32]));
        assert_close32(&t, &[0.46211716, -0.0, 1.0, -1.0, 1.0, NAN32], 1);
    }

    #[test]
    fn logistic_is_stable() {
        let x = f32s(&[0.0, INF32, -INF32, 1e30, -1e30, NAN32, 100.0]);
        assert_f32(&unary(UnaryOp::Logistic, &x), &[0.5, 1.0, 0.0, 1.0, 0.0, NAN32, 1.0]);
        // logistic(1) = 1/(1 + e^-1) = 0.7310585786300049.
        assert_close64(&unary(UnaryOp::Logistic, &f64s(&[1.0])), &[0.7310585786300049], 1);
        // logistic(-100) = e^-100/(1+e^-100) ≈ 3.7200759760e-44, an f32 subnormal (spacing 2^-149 ≈ 1.4e-45).
        let small = unary(UnaryOp::Logistic, &f32s(&[-100.0])).to_vec::<f32>().unwrap()[0];
        assert!((f64::from(small) - 3.7200759760208356e-44).abs() <= 1.5e-45, "{small:e}");
        assert_close64(&unary(UnaryOp::Logistic, &f64s(&[-100.0])), &[3.7200759760208356e-44], 2);
    }

    #[test]
    fn erf_values() {
        let x = f64s(&[0.0, -0.0, INF, -INF, NAN, 0.5, 1.0]);
        let e = unary(UnaryOp::Erf, &x);
        // erf(0.5) = 0.5204998778130465, erf(1) = 0.8427007929497149.
        assert_f64(&e, &[0.0, -0.0, 1.0, -1.0, NAN, 0.5204998778130465, 0.8427007929497149]);
        let e32 = unary(UnaryOp::Erf, &f32s(&[0.5, -0.0, -INF32]));
        assert_close32(&e32, &[0.5204998778130465_f64 as f32, -0.0, -1.0], 1);
    }

    #[test]
    fn erf_inv_edges() {
        let x = f64s(&[1.0, -1.0, 1.5, -1.0000000000000002, NAN, 0.0, -0.0, INF]);
        assert_f64(&unary(UnaryOp::ErfInv, &x), &[INF, -INF, NAN, NAN, NAN, 0.0, -0.0, NAN]);
        let x = f32s(&[1.0, -1.0, 1.0000001, -0.0, NAN32]);
        assert_f32(&unary(UnaryOp::ErfInv, &x), &[INF32, -INF32, NAN32, -0.0, NAN32]);
    }

    #[test]
    fn erf_inv_within_two_ulps() {
        // Reference values: mpmath.erfinv at 50 digits, rounded to f64.
        let x =
            f64s(&[0.5, -0.3, 0.9, 0.999, 1e-10, 1.0 - f64::EPSILON / 2.0, -(1.0 - 2f64.powi(-40)), 5e-324]);
        let want = [
            0.4769362762044699,
            -0.2724627147267543,
            1.1630871536766743,
            2.3267537655135246,
            8.862269254527581e-11,
            5.8635847487551676,
            -5.05125408524939,
            5e-324,
        ];
        assert_close64(&unary(UnaryOp::ErfInv, &x), &want, 2);
        // f32: the f32 nearest to mpmath's value for the f32 inputs 0.5, -0.3, 0.9, 1 - 2^-24 and 1e-10.
        let x = f32s(&[0.5, -0.3, 0.9, 1.0 - f32::EPSILON / 2.0, 1e-10]);
        let want = [
            0.4769362762044699,
            -0.27246272610552374,
            1.1630870719457722,
            3.832506856900711,
            8.862269372851566e-11,
        ];
        assert_close32(&unary(UnaryOp::ErfInv, &x), &want.map(|w: f64| w as f32), 1);
        // Round trip through erf in f64 on a grid of (0, 1): relative error a few ulps at most.
        for i in 1..1000 {
            let v = i as f64 / 1000.0;
            let y = unary(UnaryOp::ErfInv, &Array::scalar(v)).to_vec::<f64>().unwrap()[0];
            assert!(
                (libm::erf(y) - v).abs() <= 4.0 * f64::EPSILON * v,
                "erf(erf_inv({v})) = {}",
                libm::erf(y)
            );
        }
    }

    #[test]
    fn is_finite_and_not() {
        let x = f32s(&[1.0, INF32, -INF32, NAN32, -0.0, 1e-45, f32::MAX]);
        assert_bits(unary(UnaryOp::IsFinite, &x), bools(&[true, false, false, false, true, true, true]));
        assert_bits(unary(UnaryOp::IsFinite, &f64s(&[NAN, f64::MIN])), bools(&[false, true]));
        assert_bits(unary(UnaryOp::Not, &bools(&[true, false])), bools(&[false, true]));
        // Bitwise: !0 = -1, !-1 = 0, !5 = -6 (two's complement).
        assert_bits(unary(UnaryOp::Not, &i32s(&[0, -1, 5])), i32s(&[-1, 0, -6]));
        assert_bits(unary(UnaryOp::Not, &u32s(&[0, 0xF0F0_F0F0])), u32s(&[u32::MAX, 0x0F0F_0F0F]));
    }

    #[test]
    fn unary_keeps_rank_0_rank_3_and_empty_shapes() {
        let s = unary(UnaryOp::Neg, &Array::scalar(2.0f32));
        assert_bits(s, Array::scalar(-2.0f32));
        let x = Array::from_vec(&[2, 1, 3], vec![1.0f64, 4.0, 9.0, 16.0, 25.0, 0.0]);
        assert_bits(
            unary(UnaryOp::Sqrt, &x),
            Array::from_vec(&[2, 1, 3], vec![1.0f64, 2.0, 3.0, 4.0, 5.0, 0.0]),
        );
        let e = Array::from_vec::<f32>(&[2, 0, 3], vec![]);
        assert_bits(unary(UnaryOp::Exp, &e), e.clone());
        assert_bits(unary(UnaryOp::IsFinite, &e), Array::from_vec::<bool>(&[2, 0, 3], vec![]));
    }

    // ---- binary ----

    #[test]
    fn add_sub_mul() {
        let add = binary(BinaryOp::Add, &i32s(&[i32::MAX, -5]), &i32s(&[1, 3]));
        assert_bits(add, i32s(&[i32::MIN, -2]));
        assert_bits(binary(BinaryOp::Sub, &i32s(&[i32::MIN]), &i32s(&[1])), i32s(&[i32::MAX]));
        // 65536 * 65536 = 2^32 ≡ 0 mod 2^32; 65537 * 65537 = 2^32 + 2^17 + 1 ≡ 131073.
        let mul = binary(BinaryOp::Mul, &i32s(&[65536, 65537]), &i32s(&[65536, 65537]));
        assert_bits(mul, i32s(&[0, 131073]));
        assert_bits(binary(BinaryOp::Sub, &u32s(&[0]), &u32s(&[1])), u32s(&[u32::MAX]));
        let x = f32s(&[INF32, -0.0, 1.0, NAN32]);
        let y = f32s(&[-INF32, -0.0, -1.0, 1.0]);
        assert_f32(&binary(BinaryOp::Add, &x, &y), &[NAN32, -0.0, 0.0, NAN32]);
        assert_f32(&binary(BinaryOp::Sub, &x, &y), &[INF32, 0.0, 2.0, NAN32]);
        assert_f32(&binary(BinaryOp::Mul, &x, &y), &[-INF32, 0.0, -1.0, NAN32]);
        // 0.1 + 0.2 in f64 is 0.30000000000000004 (IEEE round-to-nearest).
        assert_f64(&binary(BinaryOp::Add, &f64s(&[0.1]), &f64s(&[0.2])), &[0.30000000000000004]);
        // Subnormal arithmetic is not flushed: 2^-149 + 2^-149 = 2^-148.
        assert_f32(&binary(BinaryOp::Add, &f32s(&[1e-45]), &f32s(&[1e-45])), &[3e-45]);
    }

    #[test]
    fn integer_division_truncates_and_handles_zero() {
        let x = i32s(&[7, -7, 7, -7, 5, -5, 0, i32::MIN]);
        let y = i32s(&[2, 2, -2, -2, 0, 0, 0, -1]);
        assert_bits(binary(BinaryOp::Div, &x, &y), i32s(&[3, -3, -3, 3, -1, -1, -1, i32::MIN]));
        assert_bits(
            binary(BinaryOp::Div, &u32s(&[7, 7, 0]), &u32s(&[2, 0, 0])),
            u32s(&[3, u32::MAX, u32::MAX]),
        );
        let f = binary(BinaryOp::Div, &f32s(&[1.0, -1.0, 1.0, 0.0, 1.0]), &f32s(&[0.0, 0.0, -0.0, 0.0, 4.0]));
        assert_f32(&f, &[INF32, -INF32, -INF32, NAN32, 0.25]);
    }

    #[test]
    fn remainder_has_dividends_sign() {
        let x = i32s(&[7, -7, 7, -7, 5, i32::MIN, -5]);
        let y = i32s(&[3, 3, -3, -3, 0, -1, 0]);
        assert_bits(binary(BinaryOp::Rem, &x, &y), i32s(&[1, -1, 1, -1, 5, 0, -5]));
        assert_bits(binary(BinaryOp::Rem, &u32s(&[7, 7]), &u32s(&[0, 4])), u32s(&[7, 3]));
        let x = f64s(&[5.5, -5.5, 5.5, 1.0, INF, 3.0, -0.0, NAN]);
        let y = f64s(&[2.0, 2.0, -2.0, 0.0, 2.0, INF, 1.0, 1.0]);
        assert_f64(&binary(BinaryOp::Rem, &x, &y), &[1.5, -1.5, 1.5, NAN, NAN, 3.0, -0.0, NAN]);
    }

    #[test]
    fn pow_has_c_semantics() {
        let x = f64s(&[2.0, 2.0, -8.0, NAN, 1.0, 0.0, -0.0, -2.0, INF, 4.0]);
        let y = f64s(&[10.0, -1.0, 1.0 / 3.0, 0.0, NAN, -1.0, -1.0, 3.0, -1.0, 0.5]);
        assert_f64(&binary(BinaryOp::Pow, &x, &y), &[1024.0, 0.5, NAN, 1.0, 1.0, INF, -INF, -8.0, 0.0, 2.0]);
        assert_f32(&binary(BinaryOp::Pow, &f32s(&[-1.0, 0.0]), &f32s(&[INF32, 0.0])), &[1.0, 1.0]);
    }

    #[test]
    fn max_min_propagate_nan_and_order_zeros() {
        let x = f32s(&[NAN32, 1.0, -0.0, 0.0, 3.0, -INF32]);
        let y = f32s(&[1.0, NAN32, 0.0, -0.0, -2.0, 5.0]);
        assert_f32(&binary(BinaryOp::Max, &x, &y), &[NAN32, NAN32, 0.0, 0.0, 3.0, 5.0]);
        assert_f32(&binary(BinaryOp::Min, &x, &y), &[NAN32, NAN32, -0.0, -0.0, -2.0, -INF32]);
        assert_f64(&binary(BinaryOp::Max, &f64s(&[-0.0, NAN]), &f64s(&[-0.0, NAN])), &[-0.0, NAN]);
        assert_bits(binary(BinaryOp::Max, &i32s(&[-3, i32::MIN]), &i32s(&[2, 0])), i32s(&[2, 0]));
        assert_bits(binary(BinaryOp::Min, &i32s(&[-3, i32::MIN]), &i32s(&[2, 0])), i32s(&[-3, i32::MIN]));
        // u32 compares unsigned: MAX is the largest.
        assert_bits(binary(BinaryOp::Max, &u32s(&[u32::MAX]), &u32s(&[1])), u32s(&[u32::MAX]));
        let p = bools(&[false, false, true, true]);
        let q = bools(&[false, true, false, true]);
        assert_bits(binary(BinaryOp::Max, &p, &q), bools(&[false, true, true, true]));
        assert_bits(binary(BinaryOp::Min, &p, &q), bools(&[false, false, false, true]));
    }

    #[test]
    fn atan2_quadrants() {
        let x = f64s(&[1.0, 1.0, 0.0, -0.0, -0.0, 1.0, NAN, -1.0]);
        let y = f64s(&[1.0, -1.0, -0.0, -0.0, 1.0, 0.0, 1.0, -INF]);
        let want = [PI / 4.0, 3.0 * PI / 4.0, PI, -PI, -0.0, PI / 2.0, NAN, -PI];
        assert_close64(&binary(BinaryOp::Atan2, &x, &y), &want, 1);
    }

    #[test]
    fn bitwise_and_logical_ops() {
        let x = i32s(&[0b1100, -1, i32::MIN]);
        let y = i32s(&[0b1010, 5, -1]);
        assert_bits(binary(BinaryOp::And, &x, &y), i32s(&[0b1000, 5, i32::MIN]));
        assert_bits(binary(BinaryOp::Or, &x, &y), i32s(&[0b1110, -1, -1]));
        assert_bits(binary(BinaryOp::Xor, &x, &y), i32s(&[0b0110, -6, i32::MAX]));
        assert_bits(binary(BinaryOp::Xor, &u32s(&[u32::MAX]), &u32s(&[1])), u32s(&[u32::MAX - 1]));
        let p = bools(&[false, false, true, true]);
        let q = bools(&[false, true, false, true]);
        assert_bits(binary(BinaryOp::And, &p, &q), bools(&[false, false, false, true]));
        assert_bits(binary(BinaryOp::Or, &p, &q), bools(&[false, true, true, true]));
        assert_bits(binary(BinaryOp::Xor, &p, &q), bools(&[false, true, true, false]));
    }

    #[test]
    fn shifts_of_32_or_more_give_zero() {
        let x = i32s(&[1, 1, 1, -1, 3, i32::MIN]);
        let s = i32s(&[31, 32, -1, 4, 0, 100]);
        assert_bits(binary(BinaryOp::ShiftLeft, &x, &s), i32s(&[i32::MIN, 0, 0, -16, 3, 0]));
        // Logical: -1 >> 28 fills with zeros, leaving 0xF; MIN >> 31 = 1.
        let x = i32s(&[-1, -16, i32::MIN, 64, 7]);
        let s = i32s(&[28, 32, 31, 3, -1]);
        assert_bits(binary(BinaryOp::ShiftRightLogical, &x, &s), i32s(&[15, 0, 1, 8, 0]));
        let x = u32s(&[0x8000_0000, 1, 0xFFFF_FFFF]);
        let s = u32s(&[31, 33, 32]);
        assert_bits(binary(BinaryOp::ShiftRightLogical, &x, &s), u32s(&[1, 0, 0]));
        assert_bits(
            binary(BinaryOp::ShiftLeft, &x, &u32s(&[1, 31, 4])),
            u32s(&[0, 0x8000_0000, 0xFFFF_FFF0]),
        );
    }

    #[test]
    fn binary_on_rank_0_rank_3_and_empty() {
        assert_bits(binary(BinaryOp::Sub, &Array::scalar(5i32), &Array::scalar(7i32)), Array::scalar(-2i32));
        let x = Array::from_vec(&[2, 2, 1, 2], (0..8).map(|i| i as f32).collect());
        let y = Array::from_vec(&[2, 2, 1, 2], vec![1.0f32; 8]);
        let want = Array::from_vec(&[2, 2, 1, 2], (1..9).map(|i| i as f32).collect());
        assert_bits(binary(BinaryOp::Add, &x, &y), want);
        let e = Array::from_vec::<u32>(&[0, 4], vec![]);
        assert_bits(binary(BinaryOp::Mul, &e, &e), e.clone());
    }

    // ---- compare ----

    #[test]
    fn comparisons_are_ieee() {
        let x = f32s(&[1.0, NAN32, -0.0, -INF32, 2.0]);
        let y = f32s(&[2.0, NAN32, 0.0, -INF32, NAN32]);
        let cases = [
            (CompareOp::Eq, [false, false, true, true, false]),
            (CompareOp::Ne, [true, true, false, false, true]),
            (CompareOp::Lt, [true, false, false, false, false]),
            (CompareOp::Le, [true, false, true, true, false]),
            (CompareOp::Gt, [false, false, false, false, false]),
            (CompareOp::Ge, [false, false, true, true, false]),
        ];
        for (op, want) in cases {
            assert_bits(compare(op, &x, &y), bools(&want));
        }
        assert_bits(compare(CompareOp::Lt, &i32s(&[-1, 3]), &i32s(&[0, 3])), bools(&[true, false]));
        // Unsigned: MAX > 0.
        assert_bits(compare(CompareOp::Gt, &u32s(&[u32::MAX]), &u32s(&[0])), bools(&[true]));
        let p = bools(&[false, true, false]);
        let q = bools(&[true, false, false]);
        assert_bits(compare(CompareOp::Lt, &p, &q), bools(&[true, false, false]));
        assert_bits(compare(CompareOp::Ge, &p, &q), bools(&[false, true, true]));
        let s = compare(CompareOp::Eq, &Array::scalar(NAN), &Array::scalar(NAN));
        assert_bits(s, Array::scalar(false));
    }

    // ---- select, clamp ----

    #[test]
    fn select_elementwise_and_scalar_pred() {
        let t = Array::from_vec(&[2, 1, 2], vec![1i32, 2, 3, 4]);
        let f = Array::from_vec(&[2, 1, 2], vec![-1i32, -2, -3, -4]);
        let p = Array::from_vec(&[2, 1, 2], vec![true, false, false, true]);
        assert_bits(select(&p, &t, &f), Array::from_vec(&[2, 1, 2], vec![1i32, -2, -3, 4]));
        assert_bits(select(&Array::scalar(true), &t, &f), t.clone());
        assert_bits(select(&Array::scalar(false), &t, &f), f.clone());
        // NaN and -0.0 pass through untouched.
        let t = f32s(&[NAN32, -0.0]);
        let f = f32s(&[0.0, 1.0]);
        assert_f32(&select(&bools(&[true, true]), &t, &f), &[NAN32, -0.0]);
        assert_bits(
            select(&Array::scalar(true), &Array::scalar(1.0), &Array::scalar(2.0)),
            Array::scalar(1.0),
        );
        let e = Array::from_vec::<bool>(&[0, 2], vec![]);
        let ef = Array::from_vec::<f64>(&[0, 2], vec![]);
        assert_bits(select(&e, &ef, &ef), ef.clone());
    }

    #[test]
    fn clamp_with_scalar_and_array_bounds() {
        let x = Array::from_vec(&[1, 2, 2], vec![-5.0f32, 0.5, 7.0, NAN32]);
        let got = clamp(&Array::scalar(0.0f32), &x, &Array::scalar(1.0f32));
        assert_f32(&got, &[0.0, 0.5, 1.0, NAN32]);
        assert_eq!(got.shape(), Shape::new(&[1, 2, 2]));
        // A NaN bound also propagates (min/max are NaN-propagating).
        let got = clamp(&Array::scalar(NAN32), &f32s(&[1.0]), &Array::scalar(2.0f32));
        assert_f32(&got, &[NAN32]);
        // max(-0.0, 0.0) = 0.0.
        assert_f32(&clamp(&Array::scalar(0.0f32), &f32s(&[-0.0]), &Array::scalar(1.0f32)), &[0.0]);
        let lo = i32s(&[0, -10, 5]);
        let hi = i32s(&[1, 10, 6]);
        assert_bits(clamp(&lo, &i32s(&[i32::MIN, 3, i32::MAX]), &hi), i32s(&[0, 3, 6]));
        let got = clamp(&Array::scalar(2u32), &u32s(&[0, 3, 9]), &Array::scalar(4u32));
        assert_bits(got, u32s(&[2, 3, 4]));
        assert_bits(
            clamp(&Array::scalar(-1.0), &Array::scalar(-3.0), &Array::scalar(1.0)),
            Array::scalar(-1.0),
        );
    }

    // ---- conversions ----

    #[test]
    fn float_to_int_truncates_and_saturates() {
        let x = f32s(&[1.9, -1.9, NAN32, INF32, -INF32, 3e9, -0.0, -3e9]);
        let want = [1, -1, 0, i32::MAX, i32::MIN, i32::MAX, 0, i32::MIN];
        assert_bits(convert(&x, DType::I32), i32s(&want));
        let x = f32s(&[-1.0, 3.7, 5e9, NAN32, -0.5]);
        assert_bits(convert(&x, DType::U32), u32s(&[0, 3, u32::MAX, 0, 0]));
        let x = f64s(&[2147483647.9, -2147483648.9, 2147483648.0]);
        assert_bits(convert(&x, DType::I32), i32s(&[i32::MAX, i32::MIN, i32::MAX]));
    }

    #[test]
    fn int_and_f64_to_float_round_to_nearest() {
        // 2^24 + 1 is a tie between 2^24 and 2^24 + 2: even mantissa wins (2^24); 2^24 + 3 ties to 2^24 + 4.
        let x = i32s(&[16777217, 16777219, -7, i32::MIN]);
        assert_f32(&convert(&x, DType::F32), &[16777216.0, 16777220.0, -7.0, -2147483648.0]);
        assert_f32(&convert(&u32s(&[u32::MAX]), DType::F32), &[4294967296.0]);
        assert_f64(&convert(&u32s(&[u32::MAX]), DType::F64), &[4294967295.0]);
        // 1 + 2^-24 ties to 1; 1 + 3·2^-24 ties to 1 + 2^-22 (even); 1e300 overflows; 1e-50 underflows.
        let one_ulp = 2f64.powi(-24);
        let x = f64s(&[1.0 + one_ulp, 1.0 + 3.0 * one_ulp, 1e300, -1e-50, NAN, 0.1]);
        let want = [1.0, 1.0 + 2f32.powi(-22), INF32, -0.0, NAN32, 0.1];
        assert_f32(&convert(&x, DType::F32), &want);
        // f32 -> f64 is exact, keeping -0.0 and subnormals.
        assert_f64(&convert(&f32s(&[-0.0, 1e-45]), DType::F64), &[-0.0, 2f64.powi(-149)]);
    }

    #[test]
    fn int_int_conversions_keep_bits() {
        assert_bits(convert(&i32s(&[-1, i32::MIN]), DType::U32), u32s(&[u32::MAX, 0x8000_0000]));
        assert_bits(convert(&u32s(&[u32::MAX, 7]), DType::I32), i32s(&[-1, 7]));
    }

    #[test]
    fn bool_conversions() {
        let x = f32s(&[0.0, -0.0, NAN32, 0.5, -INF32, 1e-45]);
        assert_bits(convert(&x, DType::Bool), bools(&[false, false, true, true, true, true]));
        assert_bits(convert(&i32s(&[0, -3]), DType::Bool), bools(&[false, true]));
        assert_bits(convert(&u32s(&[0, 9]), DType::Bool), bools(&[false, true]));
        let b = bools(&[true, false]);
        assert_f32(&convert(&b, DType::F32), &[1.0, 0.0]);
        assert_f64(&convert(&b, DType::F64), &[1.0, 0.0]);
        assert_bits(convert(&b, DType::I32), i32s(&[1, 0]));
        assert_bits(convert(&b, DType::U32), u32s(&[1, 0]));
        assert_bits(convert(&b, DType::Bool), b.clone());
        let s = convert(&Array::scalar(2.5f64), DType::I32);
        assert_bits(s, Array::scalar(2i32));
    }

    #[test]
    fn bitcast_reinterprets_bits() {
        // 1.0f32 = 0x3F800000 = 1065353216; -0.0 = 0x80000000 = i32::MIN.
        assert_bits(bitcast(&f32s(&[1.0, -0.0]), DType::I32), i32s(&[1065353216, i32::MIN]));
        assert_bits(bitcast(&f32s(&[-2.0]), DType::U32), u32s(&[0xC000_0000]));
        let nan = bitcast(&u32s(&[0x7FC0_0001, 0x0000_0001]), DType::F32).to_vec::<f32>().unwrap();
        assert_eq!(nan[0].to_bits(), 0x7FC0_0001);
        assert_eq!(nan[1], 1e-45);
        assert_bits(bitcast(&i32s(&[-1]), DType::U32), u32s(&[u32::MAX]));
        assert_bits(bitcast(&u32s(&[0x8000_0000]), DType::I32), i32s(&[i32::MIN]));
        assert_bits(bitcast(&i32s(&[0x4049_0FDB]), DType::F32), f32s(&[std::f32::consts::PI]));
        let payload = f64::from_bits(0x7FF8_0000_0000_0ABC);
        let got = bitcast(&f64s(&[payload]), DType::F64).to_vec::<f64>().unwrap();
        assert_eq!(got[0].to_bits(), 0x7FF8_0000_0000_0ABC);
        assert_bits(bitcast(&Array::scalar(7u32), DType::U32), Array::scalar(7u32));
    }

    // ---- iota ----

    #[test]
    fn iota_counts_along_dimension() {
        assert_bits(
            iota(DType::I32, &Shape::new(&[2, 3]), 0),
            Array::from_vec(&[2, 3], vec![0i32, 0, 0, 1, 1, 1]),
        );
        assert_bits(
            iota(DType::U32, &Shape::new(&[2, 3]), 1),
            Array::from_vec(&[2, 3], vec![0u32, 1, 2, 0, 1, 2]),
        );
        let want = Array::from_vec(&[2, 1, 2], vec![0.0f32, 1.0, 0.0, 1.0]);
        assert_bits(iota(DType::F32, &Shape::new(&[2, 1, 2]), 2), want);
        let want = Array::from_vec(&[2, 1, 2], vec![0.0f64, 0.0, 1.0, 1.0]);
        assert_bits(iota(DType::F64, &Shape::new(&[2, 1, 2]), 0), want);
        assert_bits(iota(DType::I32, &Shape::new(&[0, 3]), 1), Array::from_vec::<i32>(&[0, 3], vec![]));
        assert_bits(iota(DType::F32, &Shape::new(&[4]), 0), f32s(&[0.0, 1.0, 2.0, 3.0]));
    }

    // ---- threefry2x32 ----

    fn tf(k: [u32; 2], x0: &[u32], x1: &[u32]) -> (Vec<u32>, Vec<u32>) {
        let n = x0.len();
        let k0 = u32s(&vec![k[0]; n]);
        let k1 = u32s(&vec![k[1]; n]);
        let ys = threefry2x32(&k0, &k1, &u32s(x0), &u32s(x1));
        (ys[0].to_vec().unwrap(), ys[1].to_vec().unwrap())
    }

    #[test]
    fn threefry_random123_known_answers() {
        // Random123's kat_vectors for threefry2x32_20 (counter, key -> output), also in JAX's tests.
        assert_eq!(tf([0, 0], &[0], &[0]), (vec![0x6b20_0159], vec![0x99ba_4efe]));
        let ones = u32::MAX;
        assert_eq!(tf([ones, ones], &[ones], &[ones]), (vec![0x1cb9_96fc], vec![0xbb00_2be7]));
        let got = tf([0x1319_8a2e, 0x0370_7344], &[0x243f_6a88], &[0x85a3_08d3]);
        assert_eq!(got, (vec![0xc492_3a9c], vec![0x483d_f7a0]));
    }

    fn json() -> serde_json::Value {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/threefry.json");
        serde_json::from_str(&std::fs::read_to_string(path).expect("read threefry.json")).expect("parse")
    }
    fn u32_list(v: &serde_json::Value) -> Vec<u32> {
        v.as_array().unwrap().iter().map(|x| u32::try_from(x.as_u64().unwrap()).unwrap()).collect()
    }

    #[test]
    fn threefry_matches_jax_count_iota8() {
        let data = json();
        let cases = data["cases"].as_array().unwrap();
        assert_eq!(cases.len(), 4);
        for case in cases {
            let key = u32_list(&case["key"]);
            // threefry_2x32(key, iota(8)) splits the count in halves and concatenates the outputs.
            let (y0, y1) = tf([key[0], key[1]], &[0, 1, 2, 3], &[4, 5, 6, 7]);
            let got: Vec<u32> = y0.into_iter().chain(y1).collect();
            assert_eq!(got, u32_list(&case["threefry_2x32_count_iota8"]), "key {key:?}");
        }
    }

    #[test]
    fn threefry_matches_jax_split_fold_in_random_bits() {
        // With jax_threefry_partitionable, counters are (hi, lo) = (0, i) for the i-th output:
        // split(key, n)[i] = threefry(key, 0, i); fold_in(key, d) = threefry(key, 0, d);
        // random_bits(key, 32, shape)[i] = y0 ^ y1 of threefry(key, 0, i) over the flattened shape.
        let data = json();
        for case in data["cases"].as_array().unwrap() {
            let key = u32_list(&case["key"]);
            let key = [key[0], key[1]];
            for (name, n) in [("split_2", 2), ("split_3", 3)] {
                let (y0, y1) = tf(key, &vec![0; n], &(0..n as u32).collect::<Vec<_>>());
                let want: Vec<Vec<u32>> = case[name].as_array().unwrap().iter().map(u32_list).collect();
                let got: Vec<Vec<u32>> = y0.iter().zip(&y1).map(|(a, b)| vec![*a, *b]).collect();
                assert_eq!(got, want, "{name} key {key:?}");
            }
            let (y0, y1) = tf(key, &[0], &[7]);
            assert_eq!(vec![y0[0], y1[0]], u32_list(&case["fold_in_7"]), "fold_in key {key:?}");
            for (name, n) in [("random_bits_u32_shape_4", 4), ("random_bits_u32_shape_2x3", 6)] {
                let (y0, y1) = tf(key, &vec![0; n], &(0..n as u32).collect::<Vec<_>>());
                let got: Vec<u32> = y0.iter().zip(&y1).map(|(a, b)| a ^ b).collect();
                assert_eq!(got, u32_list(&case[name]), "{name} key {key:?}");
            }
        }
    }

    #[test]
    fn threefry_is_elementwise_over_any_shape() {
        let k0 = Array::from_vec(&[2, 1, 2], vec![0u32, 0x1319_8a2e, u32::MAX, 0]);
        let k1 = Array::from_vec(&[2, 1, 2], vec![0u32, 0x0370_7344, u32::MAX, 0]);
        let x0 = Array::from_vec(&[2, 1, 2], vec![0u32, 0x243f_6a88, u32::MAX, 0]);
        let x1 = Array::from_vec(&[2, 1, 2], vec![0u32, 0x85a3_08d3, u32::MAX, 0]);
        let ys = threefry2x32(&k0, &k1, &x0, &x1);
        let y0 = [0x6b20_0159u32, 0xc492_3a9c, 0x1cb9_96fc, 0x6b20_0159];
        let y1 = [0x99ba_4efeu32, 0x483d_f7a0, 0xbb00_2be7, 0x99ba_4efe];
        assert_bits(ys[0].clone(), Array::from_vec(&[2, 1, 2], y0.to_vec()));
        assert_bits(ys[1].clone(), Array::from_vec(&[2, 1, 2], y1.to_vec()));
        let s = |v: u32| Array::scalar(v);
        let ys = threefry2x32(&s(0), &s(0), &s(0), &s(0));
        assert_eq!((ys[0].clone(), ys[1].clone()), (s(0x6b20_0159), s(0x99ba_4efe)));
        let e = Array::from_vec::<u32>(&[3, 0], vec![]);
        let ys = threefry2x32(&e, &e, &e, &e);
        assert_eq!((ys[0].clone(), ys[1].clone()), (e.clone(), e));
    }
}
