//! Per-element kernels evaluated in f64: every f64 function, and f32 sin and cos (the other f32
//! functions run in f32, [`kernels_f32`](super::kernels_f32), with this module's f32 tables).
//!
//! Every kernel is `#[inline(always)]`, branch-free (only selects, which LLVM turns into blends) and
//! generic over its polynomial coefficients: the f64 functions use the full-degree tables, f32 sin
//! and cos widen to f64 and use shorter tables fitted to ~2⁻³² (an f32 result then carries at most
//! 0.5 + 2⁻⁸ ulp of polynomial error, and needs no hi/lo splits of its own).
//!
//! Coefficients: weighted minimax fits (Lawson iteration in 60-digit `mpmath`, on 400 Chebyshev
//! nodes), rounded to f64. The comment above each table gives the max weighted error of the rounded
//! table measured on a 2001-point grid; the weight makes it the error relative to the final result.

// The float↔int tricks below add 1.5·2⁵² so that the integer lands in the low mantissa bits: it rounds
// to nearest-even without `roundpd` (SSE4.1) and converts without `cvtpd2qq` (AVX-512DQ) or Rust's
// saturating `as`, which scalarizes inside vectorized loops.
const MAGIC: f64 = 6755399441055744.0; // 1.5·2⁵²

/// Rounds `v` to the nearest integer (ties to even) for |v| < 2⁵¹; returns it as f64 and as i64.
#[inline(always)]
fn round_int(v: f64) -> (f64, i64) {
    let t = v + MAGIC;
    (t - MAGIC, (t.to_bits() as i64).wrapping_sub(MAGIC.to_bits() as i64))
}

/// i64 → f64 for |k| < 2⁵¹ (see [`MAGIC`]).
#[inline(always)]
fn int_to_f64(k: i64) -> f64 {
    f64::from_bits(k.wrapping_add(MAGIC.to_bits() as i64) as u64) - MAGIC
}

/// 2ᵏ for k in [-1022, 1023] (wrapping garbage outside, never UB).
#[inline(always)]
fn pow2(k: i64) -> f64 {
    f64::from_bits((k.wrapping_add(1023) as u64).wrapping_shl(52))
}

/// f32 and f64: what [`poly`] needs (`kernels_f32` shares it).
pub(crate) trait Fma: Copy {
    /// `self·a + b` with one rounding.
    fn fma(self, a: Self, b: Self) -> Self;
}

impl Fma for f32 {
    #[inline(always)]
    fn fma(self, a: f32, b: f32) -> f32 {
        self.mul_add(a, b)
    }
}

impl Fma for f64 {
    #[inline(always)]
    fn fma(self, a: f64, b: f64) -> f64 {
        self.mul_add(a, b)
    }
}

/// Horner evaluation of `c[0] + c[1]·z + …`; unrolled by LLVM for fixed-size tables.
#[inline(always)]
pub(crate) fn poly<T: Fma, const N: usize>(z: T, c: &[T; N]) -> T {
    let mut acc = c[N - 1];
    let mut i = N - 1;
    while i > 0 {
        i -= 1;
        acc = acc.fma(z, c[i]);
    }
    acc
}

/// `a` if `c`, else `b` (a blend in vector code).
#[inline(always)]
pub(crate) fn sel<T>(c: bool, a: T, b: T) -> T {
    if c { a } else { b }
}

const LOG2E: f64 = std::f64::consts::LOG2_E;
// ln 2 split so that k·LN2_HI is exact for |k| < 2¹¹ (fdlibm's split).
const LN2_HI: f64 = 0.6931471803691238;
const LN2_LO: f64 = 1.9082149292705877e-10;

/// Coefficients P of exp(r) = 1 + r + r²·P(r) and expm1(r) = r + r²·P(r) on |r| ≤ ln2/2,
/// weighted by |r| (the relative error of expm1). f32 table: 2^-32.0; f64 table: 2^-60.7.
pub(crate) type ExpC<const N: usize> = [f64; N];
pub(crate) const EXP_F32: ExpC<6> = [
    0.5000000046770855,
    0.1666666680610204,
    0.04166635354220349,
    0.008333275615164408,
    0.0013941085939012882,
    0.00019912763783243255,
];
pub(crate) const EXP_F64: ExpC<11> = [
    0.5,
    0.16666666666666677,
    0.0416666666666667,
    0.008333333333321577,
    0.0013888888888866772,
    0.0001984126988626746,
    2.480158736068736e-05,
    2.7557244060762588e-06,
    2.7557242647258693e-07,
    2.510909079732167e-08,
    2.09244781673076e-09,
];
/// Q of log(1+f) = 2s + s·z·Q(z), s = f/(2+f), z = s², z ≤ 0.0295; weighted by z/2 (relative to
/// log(1+f)). f32 table: 2^-37.6; f64 table: 2^-59.2 (agrees with fdlibm's Lg1..Lg7).
pub(crate) const LOG_F32: [f64; 4] =
    [0.6666666564086037, 0.4000033632291967, 0.28537231367785293, 0.2358370774441331];
pub(crate) const LOG_F64: [f64; 7] = [
    0.6666666666666735,
    0.39999999999410735,
    0.28571428743348404,
    0.2222219846655195,
    0.18183570261847246,
    0.15313889111601836,
    0.147976566365941,
];
/// S of sin(r) = r + r³·S(r²) on |r| ≤ π/4, weighted by r². f32: 2^-37.5; f64: 2^-57.3.
pub(crate) const SIN_F32: [f64; 4] =
    [-0.16666666640611869, 0.008333329266636911, -0.000198392961073946, 2.717939712945384e-06];
pub(crate) const SIN_F64: [f64; 7] = [
    -0.16666666666666666,
    0.008333333333333323,
    -0.0001984126984125439,
    2.7557319213831365e-06,
    -2.5052104816562322e-08,
    1.6058354342537436e-10,
    -7.57808055290648e-13,
];
/// C of cos(r) = 1 - r²/2 + r⁴·C(r²) on |r| ≤ π/4, weighted by r⁴/0.7. f32: 2^-42.6; f64: 2^-59.4.
pub(crate) const COS_F32: [f64; 4] =
    [0.041666666621049724, -0.0013888883598092588, 2.4799478584993932e-05, -2.720678516472915e-07];
pub(crate) const COS_F64: [f64; 7] = [
    0.041666666666666664,
    -0.0013888888888888874,
    2.4801587301570737e-05,
    -2.755731921504593e-07,
    2.0876754291160956e-09,
    -1.1470284681511907e-11,
    4.7377186509344e-14,
];

/// Cody–Waite reduction for exp/expm1: x = k·ln2 + r + c, |r| ≤ ln2/2 (+ rounding), c the rounding
/// error of r (k·LN2_HI and x - k·LN2_HI are exact, so c is exact up to k·LN2_LO's own rounding).
#[inline(always)]
fn exp_reduce(x: f64) -> (i64, f64, f64) {
    let (kf, k) = round_int(x * LOG2E);
    let r1 = (-kf).mul_add(LN2_HI, x);
    let r = (-kf).mul_add(LN2_LO, r1);
    (k, r, (-kf).mul_add(LN2_LO, r1 - r))
}

/// eˣ. Exact special cases: NaN → NaN, +inf and x > ln(MAX) → +inf, -inf → +0; the result underflows
/// gradually (2ᵏ is applied in two halves, so only the last multiply rounds into the subnormals).
#[inline(always)]
pub(crate) fn exp<const N: usize>(x: f64, c: &ExpC<N>) -> f64 {
    // exp(-746) < 2⁻¹⁰⁷⁵ rounds to 0; exp(710) overflows. The comparisons keep NaN.
    let x = sel(x < -746.0, -746.0, x);
    let x = sel(x > 710.0, 710.0, x);
    let (k, r, _) = exp_reduce(x);
    let p = r.mul_add(r * poly(r, c), r) + 1.0;
    let k1 = k >> 1;
    p * pow2(k1) * pow2(k - k1)
}

/// eˣ - 1, accurate near 0: expm1(x) = 2ᵏ·(r + lo) + (2ᵏ - 1) with lo = r²P(r) + c, where 2ᵏ·r + (2ᵏ - 1)
/// is summed exactly (TwoSum) so that only the last addition rounds. Without that, k = ±1 (where
/// the result is smaller than 2ᵏ·r) measured 2 ulp.
#[inline(always)]
pub(crate) fn expm1<const N: usize>(x: f64, c: &ExpC<N>) -> f64 {
    // Below -40, eˣ < 2⁻⁵⁷ and the result rounds to -1; above 710 it overflows. NaN passes.
    let xc = sel(x < -40.0, -40.0, x);
    let xc = sel(xc > 710.0, 710.0, xc);
    let (k, r, rc) = exp_reduce(xc);
    let lo = r.mul_add(r * poly(r, c), rc);
    // k reaches 1024 just below ln(MAX), where 2ᵏ itself overflows: scale by 2¹⁰²³ and double after.
    let kk = k.min(1023);
    let s = pow2(kk);
    let (a, b) = (s * r, s - 1.0); // both exact
    let t = a + b;
    let bp = t - a;
    let err = (a - (t - bp)) + (b - bp);
    let y = (t + s.mul_add(lo, err)) * pow2(k - kk);
    // ±0 keep their sign (the sum gives +0 for -0).
    sel(x == 0.0, x, y)
}

/// n / (1 + e), with 1 + e and the quotient's remainder carried exactly, so the result has one
/// rounding plus `e`'s own error (scaled by e/(1+e) < 1). Used by tanh and logistic.
#[inline(always)]
fn ratio_1p(n: f64, e: f64) -> f64 {
    let s = 1.0 + e;
    let t = sel(e.abs() <= 1.0, e - (s - 1.0), 1.0 - (s - e)); // Fast2Sum error of 1 + e
    let q = n / s;
    let r = (-q).mul_add(s, n) - q * t;
    q + r / s
}

/// Splits a positive normal `x` as 2ᵏ·m with m in [√½, √2); returns (k as f64, f = m - 1).
#[inline(always)]
fn log_split(x: f64) -> (f64, f64) {
    const SQRT_HALF_BITS: i64 = 0x3fe6_a09e_667f_3bcd;
    let ix = (x.to_bits() as i64).wrapping_sub(SQRT_HALF_BITS);
    let k = ix >> 52;
    let m = f64::from_bits(((ix & 0x000f_ffff_ffff_ffff) + SQRT_HALF_BITS) as u64);
    (int_to_f64(k), m - 1.0)
}

/// log(2ᵏ·(1+f)) + c, with c a small correction of the argument (fdlibm's e_log/s_log1p form: the
/// big terms k·ln2_hi and f are added last, so the result is within ~1 ulp).
#[inline(always)]
fn log_combine<const N: usize>(k: f64, f: f64, c: f64, q: &[f64; N]) -> f64 {
    let s = f / (2.0 + f);
    let z = s * s;
    let r = z * poly(z, q);
    let hfsq = 0.5 * f * f;
    k.mul_add(LN2_HI, -((hfsq - s.mul_add(hfsq + r, k.mul_add(LN2_LO, c))) - f))
}

/// Natural log. log(±0) = -inf, log(x<0) = NaN, log(+inf) = +inf, NaN → NaN; subnormals exact.
#[inline(always)]
pub(crate) fn log<const N: usize>(x: f64, q: &[f64; N]) -> f64 {
    // Subnormals: scale by 2⁵⁴ into the normal range and take 54 off the exponent.
    let sub = x < f64::MIN_POSITIVE;
    let xs = sel(sub, x * 18014398509481984.0, x);
    let (k, f) = log_split(xs);
    let k = k - sel(sub, 54.0, 0.0);
    let y = log_combine(k, f, 0.0, q);
    let y = sel(x == f64::INFINITY, x, y);
    let y = sel(x == 0.0, f64::NEG_INFINITY, y);
    sel(x < 0.0 || x.is_nan(), f64::NAN, y)
}

/// log(1 + x). -1 → -inf, x < -1 → NaN, +inf → +inf, NaN → NaN, tiny x (±0, subnormals) → x.
#[inline(always)]
pub(crate) fn log1p<const N: usize>(x: f64, q: &[f64; N]) -> f64 {
    let u = 1.0 + x;
    // The rounding error of u (Fast2Sum; the larger operand goes first), corrected for as c/u.
    let err = sel(x.abs() <= 1.0, x - (u - 1.0), 1.0 - (u - x));
    let (k, f) = log_split(u);
    let y = log_combine(k, f, err / u, q);
    // |x| < 2⁻⁵⁴: log1p(x) = x·(1 - x/2 + …) rounds to x.
    let y = sel(x.abs() < 5.551115123125783e-17, x, y);
    let y = sel(x == f64::INFINITY, x, y);
    let y = sel(x == -1.0, f64::NEG_INFINITY, y);
    sel(x < -1.0 || x.is_nan(), f64::NAN, y)
}

/// Arguments up to this magnitude take the vector path of sin/cos (q = round(2x/π) < 2²⁰, so q·P1 and
/// q·P2 below are exact); larger ones, ±inf included, are recomputed by the caller with std's libm.
pub(crate) const TRIG_VECTOR_LIMIT: f64 = 1.0e6;

// π/2 = P1 + P2 + P3 with P1, P2 of 33 significant bits (fdlibm's pio2_1, pio2_2, pio2_2t).
const P1: f64 = 1.5707963267341256;
const P2: f64 = 6.077100506303966e-11;
const P3: f64 = 2.0222662487959506e-21;

/// sin (`cos == false`) or cos of x, for |x| ≤ [`TRIG_VECTOR_LIMIT`] (garbage, but no UB, beyond).
#[inline(always)]
pub(crate) fn sincos<const N: usize>(x: f64, cos: bool, s: &[f64; N], c_: &[f64; N]) -> f64 {
    let (qf, q) = round_int(x * std::f64::consts::FRAC_2_PI);
    let r1 = (-qf).mul_add(P1, x); // exact
    // r1 - q·P2 (q·P2 exact) by TwoSum, then the small rest: r + rlo carries ~2⁻¹⁰⁵ relative, which
    // took the measured f64 error from 2 to 1 ulp against glibc for |x| up to 10⁴.
    let w = qf * P2;
    let r2 = r1 - w;
    let bp = r2 - r1;
    let e2 = (r1 - (r2 - bp)) - (w + bp);
    let c = (-qf).mul_add(P3, e2);
    let r = r2 + c;
    let rlo = (r2 - r) + c;
    let z = r * r;
    // sin(r + rlo) = sin r + rlo·cos r, cos r ≈ 1 - z/2 suffices for the tiny rlo.
    let sin_r = r + (r * z).mul_add(poly(z, s), (-0.5 * z).mul_add(rlo, rlo));
    // cos r = 1 - z/2 + z²C, with the rounding error of 1 - z/2 put back (fdlibm's k_cos);
    // cos(r + rlo) = cos r - rlo·sin r.
    let hz = 0.5 * z;
    let w = 1.0 - hz;
    let cos_r = w + (((1.0 - w) - hz) + (z * z).mul_add(poly(z, c_), -r * rlo));
    // cos x = sin(x + π/2): shift the quadrant by one. Quadrant bit 0 picks cos_r, bit 1 flips the sign.
    let q = q.wrapping_add(cos as i64);
    let v = sel(q & 1 == 0, sin_r, cos_r);
    let v = f64::from_bits(v.to_bits() ^ (((q as u64) & 2) << 62));
    // sin(±0) = ±0: r + r³S gives +0 for r = -0 because r³S is +0 there.
    sel(x == 0.0 && !cos, x, v)
}

/// tanh x = copysign(h / (1 + h), x) with h = expm1(2|x|)/2; |x| is clamped to 20, where tanh rounds
/// to 1.
#[inline(always)]
pub(crate) fn tanh<const N: usize>(x: f64, c: &ExpC<N>) -> f64 {
    let a = x.abs();
    let a = sel(a > 20.0, 20.0, a);
    let h = 0.5 * expm1(2.0 * a, c);
    ratio_1p(h, h).copysign(x)
}

/// logistic x = 1 / (1 + e⁻ˣ) for x ≥ 0 and eˣ / (1 + eˣ) below, both from e = exp(-|x|) ≤ 1.
#[inline(always)]
pub(crate) fn logistic<const N: usize>(x: f64, c: &ExpC<N>) -> f64 {
    let e = exp(-x.abs(), c);
    ratio_1p(sel(x >= 0.0, 1.0, e), e)
}

// ---- f32 sin and cos ------------------------------------------------------------------------------
// The f64 functions above carry some steps in double-double (the π/2 reduction's TwoSum) to reach
// 1 ulp in f64. An f32 result needs none of it: each plain f64 rounding adds at most 2⁻⁵³ relative
// error, about 2⁻²⁹ of an f32 ulp, against the f32 tables' 2⁻⁸ ulp (`tests/vmath_ulp.rs` measures
// the same bounds). The other f32 functions run in f32 (`kernels_f32`).

/// sin x (`cos = false`) or cos x for an f32 `x` widened to f64: the three-part π/2 reduction in
/// plain fused multiply-adds (the first, with a 33-bit part, exact), then `sincos`'s polynomials.
#[inline(always)]
pub(crate) fn sincos_f32<const N: usize>(x: f64, cos: bool, s: &[f64; N], c_: &[f64; N]) -> f64 {
    let (qf, q) = round_int(x * std::f64::consts::FRAC_2_PI);
    let r = (-qf).mul_add(P1, x);
    let r = (-qf).mul_add(P2, r);
    let r = (-qf).mul_add(P3, r);
    let z = r * r;
    let sin_r = (r * z).mul_add(poly(z, s), r);
    let cos_r = (z * z).mul_add(poly(z, c_), 0.5f64.mul_add(-z, 1.0));
    let q = q.wrapping_add(cos as i64);
    let v = sel(q & 1 == 0, sin_r, cos_r);
    let v = f64::from_bits(v.to_bits() ^ (((q as u64) & 2) << 62));
    sel(x == 0.0 && !cos, x, v)
}
