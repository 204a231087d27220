//! Per-element kernels evaluated in f32 itself (exp, expm1, log, log1p, tanh, logistic): 16 lanes
//! per 512-bit vector where the f64 evaluation of [`kernels`](super::kernels) has 8, and f32
//! divisions, which cost a fraction of f64 ones per lane. On W2's mass-spring step the f64
//! evaluation of its f32 tanh, logistic, exp and log1p tiles was a quarter of the run time.
//!
//! The algorithms are the f64 kernels' (Cody–Waite exp, fdlibm's log, tanh = h/(1+h) with
//! h = expm1(2|x|)/2, logistic from exp(-|x|)) with the f32 coefficient tables of
//! [`kernels`](super::kernels) rounded to f32 (their weighted error is then 2^-28.5 for exp's P
//! and 2^-31.1 for log's Q, against 2⁻²⁴ of an f32 rounding), every step a fused multiply-add where
//! the f64 kernels have one. Each result carries a few f32 roundings, so
//! these are not correctly rounded: the module docs of [`vmath`](super) give the measured errors.
//! sin and cos stay in f64 ([`kernels::sincos_f32`](super::kernels::sincos_f32)): an f32 argument
//! reduction accurate to 10⁶ would need more steps than the widening saves.

use super::kernels::{EXP_F32, LOG_F32, poly, sel};

// The float↔int tricks add 1.5·2²³ so that the integer lands in the low mantissa bits (see
// `kernels::MAGIC`): round to nearest-even, no saturating `as` in a vectorized loop.
const MAGIC: f32 = 12582912.0; // 1.5·2²³

/// Rounds `v` to the nearest integer (ties to even) for |v| < 2²²; returns it as f32 and as i32.
#[inline(always)]
fn round_int(v: f32) -> (f32, i32) {
    let t = v + MAGIC;
    (t - MAGIC, (t.to_bits() as i32).wrapping_sub(MAGIC.to_bits() as i32))
}

/// i32 → f32 for |k| < 2²² (see [`MAGIC`]).
#[inline(always)]
fn int_to_f32(k: i32) -> f32 {
    f32::from_bits(k.wrapping_add(MAGIC.to_bits() as i32) as u32) - MAGIC
}

/// 2ᵏ for k in [-126, 127] (wrapping garbage outside, never UB).
#[inline(always)]
fn pow2(k: i32) -> f32 {
    f32::from_bits((k.wrapping_add(127) as u32).wrapping_shl(23))
}

/// A coefficient table rounded to f32 (at compile time).
const fn narrow<const N: usize>(c: &[f64; N]) -> [f32; N] {
    let mut out = [0.0f32; N];
    let mut i = 0;
    while i < N {
        out[i] = c[i] as f32;
        i += 1;
    }
    out
}

/// [`EXP_F32`] and [`LOG_F32`] in f32.
const EXP_C: [f32; 6] = narrow(&EXP_F32);
const LOG_C: [f32; 4] = narrow(&LOG_F32);

const LOG2E: f32 = std::f32::consts::LOG2_E;
// ln 2 = LN2_HI + LN2_LO with LN2_HI of 15 significant bits, so k·LN2_HI is exact for |k| < 2⁹.
const LN2_HI: f32 = 0.693_145_75;
const LN2_LO: f32 = 1.428_606_8e-6;

/// Cody–Waite reduction: x = k·ln2 + r, |r| ≤ ln2/2 (+ rounding); `x - k·LN2_HI` is exact.
#[inline(always)]
fn exp_reduce(x: f32) -> (i32, f32) {
    let (kf, k) = round_int(x * LOG2E);
    let r = (-kf).mul_add(LN2_HI, x);
    (k, (-kf).mul_add(LN2_LO, r))
}

/// expm1(r) = r + r²·P(r) on the reduced argument.
#[inline(always)]
fn expm1_reduced(r: f32) -> f32 {
    r.mul_add(r * poly(r, &EXP_C), r)
}

/// eˣ. NaN → NaN, x > ln(MAX) → +inf, -inf → +0; 2ᵏ is applied in two halves, so the result
/// underflows gradually.
#[inline(always)]
pub(crate) fn exp(x: f32) -> f32 {
    // e⁻¹⁰⁴ < 2⁻¹⁵⁰ rounds to 0; e⁸⁹ overflows. The comparisons keep NaN.
    let x = sel(x < -104.0, -104.0, x);
    let x = sel(x > 89.0, 89.0, x);
    let (k, r) = exp_reduce(x);
    let p = expm1_reduced(r) + 1.0;
    let k1 = k >> 1;
    p * pow2(k1) * pow2(k - k1)
}

/// eˣ - 1 = 2ᵏ·expm1(r) + (2ᵏ - 1) in one fused multiply-add (2ᵏ - 1 is exact for k ≥ -24; below,
/// where eˣ < 2⁻²³, 2ᵏ·(1 + expm1 r) - 1: the fma's rounding of that tiny eˣ is negligible against
/// the subtraction's near -1). ±0 keep their sign; -inf → -1.
#[inline(always)]
pub(crate) fn expm1(x: f32) -> f32 {
    // Below -87 the result is -1 (and 2ᵏ stays normal); above 89 it overflows. NaN passes.
    let xc = sel(x < -87.0, -87.0, x);
    let xc = sel(xc > 89.0, 89.0, xc);
    let (k, r) = exp_reduce(xc);
    let q = expm1_reduced(r);
    // k reaches 128 just below ln(MAX), where 2ᵏ itself overflows: scale by 2¹²⁷ and double after.
    let kk = k.min(127);
    let s = pow2(kk);
    let y = sel(k < -24, s.mul_add(q, s) - 1.0, s.mul_add(q, s - 1.0)) * pow2(k - kk);
    sel(x == 0.0, x, y)
}

/// Splits a positive normal `x` as 2ᵏ·m with m in [√½, √2); returns (k as f32, f = m - 1).
#[inline(always)]
fn log_split(x: f32) -> (f32, f32) {
    const SQRT_HALF_BITS: i32 = 0x3f35_04f3;
    let ix = (x.to_bits() as i32).wrapping_sub(SQRT_HALF_BITS);
    let k = ix >> 23;
    let m = f32::from_bits(((ix & 0x007f_ffff) + SQRT_HALF_BITS) as u32);
    (int_to_f32(k), m - 1.0)
}

/// log(2ᵏ·(1+f)) + c (fdlibm's form, as `kernels::log_combine`: the big terms k·ln2_hi and f last).
#[inline(always)]
fn log_combine(k: f32, f: f32, c: f32) -> f32 {
    let s = f / (2.0 + f);
    let z = s * s;
    let r = z * poly(z, &LOG_C);
    let hfsq = 0.5 * f * f;
    k.mul_add(LN2_HI, -((hfsq - s.mul_add(hfsq + r, k.mul_add(LN2_LO, c))) - f))
}

/// Natural log. log(±0) = -inf, log(x<0) = NaN, log(+inf) = +inf, NaN → NaN; subnormals scaled.
#[inline(always)]
pub(crate) fn log(x: f32) -> f32 {
    // Subnormals: scale by 2²⁵ into the normal range and take 25 off the exponent.
    let sub = x < f32::MIN_POSITIVE;
    let xs = sel(sub, x * 33_554_432.0, x);
    let (k, f) = log_split(xs);
    let k = k - sel(sub, 25.0, 0.0);
    let y = log_combine(k, f, 0.0);
    let y = sel(x == f32::INFINITY, x, y);
    let y = sel(x == 0.0, f32::NEG_INFINITY, y);
    sel(x < 0.0 || x.is_nan(), f32::NAN, y)
}

/// log(1 + x). -1 → -inf, x < -1 → NaN, +inf → +inf, NaN → NaN, |x| < 2⁻²⁴ (±0 included) → x.
#[inline(always)]
pub(crate) fn log1p(x: f32) -> f32 {
    let u = 1.0 + x;
    // The rounding error of u (Fast2Sum; the larger operand goes first), corrected for as c/u.
    let err = sel(x.abs() <= 1.0, x - (u - 1.0), 1.0 - (u - x));
    let (k, f) = log_split(u);
    let y = log_combine(k, f, err / u);
    // log1p(x) = x·(1 - x/2 + …) rounds to x below 2⁻²⁴.
    let y = sel(x.abs() < 5.960_464_5e-8, x, y);
    let y = sel(x == f32::INFINITY, x, y);
    let y = sel(x == -1.0, f32::NEG_INFINITY, y);
    sel(x < -1.0 || x.is_nan(), f32::NAN, y)
}

/// P of tanh x = x + x³·P(x²) on |x| < [`TANH_POLY_BELOW`], weighted by x³/tanh x (relative to
/// tanh x; same Lawson fit as `kernels`' tables): 2^-29.8, 2^-27.8 rounded to f32.
const TANH_P: [f32; 5] = narrow(&[
    -0.33333317559141973,
    0.13332586123586918,
    -0.05385230854069588,
    0.021071673967537022,
    -0.00627423291124728,
]);

/// Below this |x|, tanh takes the odd polynomial: there `h / (1 + h)` adds expm1's and the
/// quotient's roundings at full weight (2.3 ulp measured near 0.016), above it 1 + h damps h's error.
const TANH_POLY_BELOW: f32 = 0.55;

/// tanh x: the odd polynomial [`TANH_P`] for |x| < [`TANH_POLY_BELOW`], else h / (1 + h)
/// ([`ratio_1p`]) with h = expm1(2|x|)/2 (2ᵏ·expm1 r + (2ᵏ - 1), used where k ≥ 2: 2ᵏ - 1 ≥ 3
/// outweighs a negative 2ᵏ·expm1 r ≥ -0.3·2ᵏ, so little cancels); |x| is clamped to 10, where tanh
/// rounds to 1; the sign of x is restored last (so tanh(-0) = -0).
#[inline(always)]
pub(crate) fn tanh(x: f32) -> f32 {
    let a = x.abs();
    let a = sel(a > 10.0, 10.0, a);
    let (k, r) = exp_reduce(2.0 * a);
    let s = pow2(k);
    let h = 0.5 * s.mul_add(expm1_reduced(r), s - 1.0);
    let z = a * a;
    let small = (a * z).mul_add(poly(z, &TANH_P), a);
    sel(a < TANH_POLY_BELOW, small, ratio_1p(h, h)).copysign(x)
}

/// n / (1 + e) for e ≥ 0: n·(1/d) corrected once by its residual, with d = 1 + e's rounding error
/// t carried (Fast2Sum): n - q·(d + t) = fma(-q, d, n) - q·t. The result has about one rounding
/// plus the error of `n` and `e` (damped by 1/(1 + e) or e/(1 + e)), for the one division a plain
/// n/d has (logistic measured 2.4 ulp that way, 1.5 this way).
#[inline(always)]
fn ratio_1p(n: f32, e: f32) -> f32 {
    let d = 1.0 + e;
    let t = sel(e <= 1.0, e - (d - 1.0), 1.0 - (d - e));
    let rcp = 1.0 / d;
    let q = n * rcp;
    let r = (-q).mul_add(d, n) - q * t;
    r.mul_add(rcp, q)
}

/// logistic x = 1/(1 + e) for x ≥ 0 and e/(1 + e) below, e = exp(-|x|) ≤ 1 ([`ratio_1p`]).
#[inline(always)]
pub(crate) fn logistic(x: f32) -> f32 {
    let e = exp(-x.abs());
    ratio_1p(sel(x >= 0.0, 1.0, e), e)
}
