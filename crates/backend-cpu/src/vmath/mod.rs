//! Vectorized transcendentals on tiles, for JIT code to call.
//!
//! Cranelift only has 128-bit vectors and no transcendental instructions, and a per-element libm call
//! costs ~2 ns; a call into LLVM-compiled code on a tile of a few hundred elements runs at LLVM speed
//! (`../shared/research/tech-cranelift-egg.md` §1.4). So each function here is a tile function
//!
//! ```text
//! unsafe extern "C" fn(src: *const T, dst: *mut T, n: usize)     // T = f32 or f64
//! ```
//!
//! built from a branch-free polynomial kernel written so that LLVM vectorizes it (fixed chunks of 16
//! lanes, `mul_add`, selects, integer bit tricks instead of saturating casts). Each tile function is
//! compiled three times — AVX-512 (`avx512f,avx512dq,avx512vl,avx2,fma`), AVX2+FMA, and the baseline
//! target — in [`avx512`], [`avx2`] and [`baseline`]; [`table`] picks the best level the CPU has once
//! and caches it. The three levels give bit-identical results (same operations, and `mul_add` is a
//! fused multiply-add everywhere — on the baseline level a libm `fma` call, so that level is slow but
//! only serves CPUs without FMA).
//!
//! Contract of every tile function: `src` is valid for `n` reads and `dst` for `n` writes, and the two
//! ranges are either identical (in place) or disjoint; no alignment needed; it never panics and never
//! allocates; `n = 0` does nothing.
//!
//! # Algorithms
//! The f64 kernels (`kernels`) reach 1 ulp with a few double-double steps. The f32 exp, expm1,
//! log, log1p, tanh and logistic run the same algorithms in f32 (`kernels_f32`: 16 lanes per
//! AVX-512 vector, f32 divisions), with the f32 coefficient tables rounded to f32; each result
//! carries a few f32 roundings, so they are within 0.84–1.48 ulp, not correctly rounded (XLA's own f32
//! exp, log and tanh are polynomial approximations of this kind). Until 2026-12-01 they ran in f64
//! and were correctly rounded but for ~2⁻⁸ ulp, at 2–2.5× the time per element (a quarter of W2's
//! mass-spring step). f32 sin and cos still widen to f64, where a plain argument reduction is
//! accurate to 10⁶, and skip the double-double steps their f64 kernels need for 1 ulp (a plain f64
//! rounding is ~2⁻²⁹ of an f32 ulp).
//! - exp: x = k·ln2 + r (Cody–Waite, two-part ln2), eʳ = 1 + r + r²P(r), 2ᵏ applied in two halves so
//!   results underflow gradually.
//! - expm1: 2ᵏ·expm1(r) + (2ᵏ - 1) in one fma, expm1(r) = r + r²P(r) (same P as exp).
//! - log, log1p: fdlibm's scheme, x = 2ᵏ(1+f), log(1+f) = 2s + s·z·Q(z) with s = f/(2+f); log1p adds
//!   the rounding error of 1 + x back as c/(1+x).
//! - sin, cos: q = round(2x/π), r = x - q·π/2 with a three-part π/2 (the first two parts of 33 bits, so
//!   q·part is exact), sin/cos polynomials on |r| ≤ π/4 selected by the quadrant.
//! - tanh: E/(E+2) with E = expm1(2|x|), sign restored (f32: an odd polynomial x + x³P(x²) below
//!   |x| = 0.55, where the quotient would add expm1's error at full weight); logistic: 1/(1+e) or
//!   e/(1+e), e = exp(-|x|).
//!
//! # Accuracy (measured)
//! Max error in ulp, measured by `tests/vmath_ulp.rs` (which asserts these numbers).
//! - f32, against the unrounded f64 libm value (so ≥ 0.5 wherever the result is inexact): every one
//!   of the 2³² f32 inputs for the f32-evaluated functions (2026-12-01, a scratch run of the test's
//!   comparison; the test itself samples every 256th f32 in [-10, 10] (8.5·10⁶ points, log-spaced,
//!   subnormals included), 10⁶ random bit patterns (the whole domain, inf and NaN included) and 10⁶
//!   uniform in [-100, 100], and asserts the exhaustive maxima); sin/cos (through f64, correctly
//!   rounded but for ~2⁻⁸ ulp) on the samples, plus every 64th f32 in [-10⁴, 10⁴] (3.7·10⁷) and 10⁶
//!   uniform there.
//! - f64, against glibc through std (tanh and logistic: a double-double evaluation on glibc's expm1 and
//!   exp). glibc is itself within ~1 ulp, so these integer distances can be off by that much from the
//!   true error: 2·10⁶ log-uniform magnitudes in [2⁻¹⁰⁷⁴, 10] of both signs, 2·10⁶ uniform in
//!   [-10, 10], 10⁶ random bit patterns, 10⁶ uniform in [-750, 750]; sin/cos also 4·10⁶ uniform in
//!   [-10⁴, 10⁴] and 10⁶ in [-10⁶, 10⁶].
//!
//! | function | f32 | f64 (vs glibc) | bound (issue 5) |
//! |---|---|---|---|
//! | exp      | 0.998 | 1 | 2 |
//! | expm1    | 1.438 | 1 | 2 |
//! | log      | 0.840 | 1 | 2 |
//! | log1p    | 0.840 | 1 | 2 |
//! | sin      | 0.500 | 1 | 2 (\|x\| ≤ 10⁴; measured to 10⁶) |
//! | cos      | 0.500 | 1 | 2 (\|x\| ≤ 10⁴; measured to 10⁶) |
//! | tanh     | 0.850 | 2 | 3 |
//! | logistic | 1.480 | 2 | 3 |
//!
//! Speed (`benches/vmath.rs`, AVX-512 level, tiles of 256, 2-core VM under load from other builds, so
//! ±30%): ns/element at 4096 elements, tile vs a scalar std loop — f32 (evaluated in f64 then, see
//! below for today's): exp 0.84 vs 3.7, expm1 1.2 vs 13, log 1.2 vs 4.5, log1p 1.8 vs 11, sin 1.4
//! vs 5.3, cos 1.5 vs 5.6, tanh 2.8 vs 17, logistic 2.0 vs 4.3; f64: exp 1.2 vs 6.3, expm1 1.4 vs 12, log 1.4 vs 7.1, log1p 1.5 vs 8.4, sin 1.9 vs 8.8,
//! cos 1.7 vs 9.3, tanh 2.6 vs 13, logistic 2.3 vs 7.5. At 10⁶ elements within ~1.5× of these.
//! Without the double-double steps (2026-11-30, back to back, criterion medians at 4096): f32 sin
//! 1.29 → 0.94, cos 1.34 → 0.87, tanh 2.03 → 1.04, logistic 1.82 → 1.17 ns/element. Evaluated in
//! f32 (2026-12-01, another AVX-512 VM, back to back, criterion medians at 4096): exp 0.72 → 0.29,
//! expm1 1.00 → 0.35, log 1.10 → 0.56, log1p 0.99 → 0.47, tanh 0.84 → 0.61, logistic 0.98 → 0.55
//! ns/element (sin, cos 0.87 unchanged). Logistic's sign of a NaN result is not the input's (it
//! comes out negative); NaN in gives NaN out, which is all the table promises.
//!
//! Beyond the table's domains: sin/cos take the vector path for |x| ≤ 10⁶ and recompute larger
//! arguments (and ±inf) lane by lane with std's libm (exact, slower); on the vector path the reduction
//! is not carried in double-double, so f64 arguments within ~2⁻⁴⁰ of a multiple of π/2 can lose
//! accuracy (no random sample hit such a case). The other functions have the same accuracy on their
//! whole domain.
//!
//! Special values (asserted by the tests): NaN → NaN everywhere; exp(-inf) = 0, exp(+inf) = +inf,
//! exp(x > ln MAX) = +inf with gradual underflow below; expm1(±0) = ±0, expm1(-inf) = -1;
//! log(±0) = -inf, log(x < 0) = NaN, log(+inf) = +inf, log(subnormal) exact to the table; log1p(-1) =
//! -inf, log1p(x < -1) = NaN, log1p(±0) = ±0; sin(±0) = ±0, sin/cos(±inf) = NaN; tanh(±0) = ±0,
//! tanh(±inf) = ±1; logistic(-inf) = 0, logistic(+inf) = 1.

pub(crate) mod elem;
pub(crate) mod kernels;
pub(crate) mod kernels_f32;

use std::sync::OnceLock;

/// A tile function on f32: `dst[i] = f(src[i])` for `i < n` (see the module docs for the contract).
pub type TileF32 = unsafe extern "C" fn(src: *const f32, dst: *mut f32, n: usize);
/// A tile function on f64: `dst[i] = f(src[i])` for `i < n` (see the module docs for the contract).
pub type TileF64 = unsafe extern "C" fn(src: *const f64, dst: *mut f64, n: usize);

/// The functions of this library.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Func {
    /// eˣ
    Exp,
    /// eˣ - 1
    Expm1,
    /// ln x
    Log,
    /// ln(1 + x)
    Log1p,
    /// sin x
    Sin,
    /// cos x
    Cos,
    /// tanh x
    Tanh,
    /// 1 / (1 + e⁻ˣ)
    Logistic,
}

impl Func {
    /// Every function, in declaration order.
    pub const ALL: [Func; 8] =
        [Func::Exp, Func::Expm1, Func::Log, Func::Log1p, Func::Sin, Func::Cos, Func::Tanh, Func::Logistic];
}

/// An instruction-set level the tile functions are compiled for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Level {
    /// AVX-512 F/DQ/VL with AVX2 and FMA.
    Avx512,
    /// AVX2 with FMA.
    Avx2,
    /// The compilation target's baseline (SSE2 on x86-64).
    Baseline,
}

impl Level {
    /// Every level, best first.
    pub const ALL: [Level; 3] = [Level::Avx512, Level::Avx2, Level::Baseline];

    /// Whether this CPU can run the level's code.
    pub fn supported(self) -> bool {
        match self {
            #[cfg(target_arch = "x86_64")]
            Level::Avx512 => {
                std::is_x86_feature_detected!("avx512f")
                    && std::is_x86_feature_detected!("avx512dq")
                    && std::is_x86_feature_detected!("avx512vl")
                    && Level::Avx2.supported()
            }
            #[cfg(target_arch = "x86_64")]
            Level::Avx2 => std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma"),
            #[cfg(not(target_arch = "x86_64"))]
            Level::Avx512 | Level::Avx2 => false,
            Level::Baseline => true,
        }
    }
}

/// Function pointers to the tile functions of one [`Level`], for JIT code to call.
#[derive(Debug)]
pub struct VmathTable {
    /// The level these functions are compiled for.
    pub level: Level,
    /// [`Func::Exp`] on f32.
    pub exp_f32: TileF32,
    /// [`Func::Exp`] on f64.
    pub exp_f64: TileF64,
    /// [`Func::Expm1`] on f32.
    pub expm1_f32: TileF32,
    /// [`Func::Expm1`] on f64.
    pub expm1_f64: TileF64,
    /// [`Func::Log`] on f32.
    pub log_f32: TileF32,
    /// [`Func::Log`] on f64.
    pub log_f64: TileF64,
    /// [`Func::Log1p`] on f32.
    pub log1p_f32: TileF32,
    /// [`Func::Log1p`] on f64.
    pub log1p_f64: TileF64,
    /// [`Func::Sin`] on f32.
    pub sin_f32: TileF32,
    /// [`Func::Sin`] on f64.
    pub sin_f64: TileF64,
    /// [`Func::Cos`] on f32.
    pub cos_f32: TileF32,
    /// [`Func::Cos`] on f64.
    pub cos_f64: TileF64,
    /// [`Func::Tanh`] on f32.
    pub tanh_f32: TileF32,
    /// [`Func::Tanh`] on f64.
    pub tanh_f64: TileF64,
    /// [`Func::Logistic`] on f32.
    pub logistic_f32: TileF32,
    /// [`Func::Logistic`] on f64.
    pub logistic_f64: TileF64,
}

impl VmathTable {
    /// The f32 tile function of `func`.
    pub fn f32(&self, func: Func) -> TileF32 {
        match func {
            Func::Exp => self.exp_f32,
            Func::Expm1 => self.expm1_f32,
            Func::Log => self.log_f32,
            Func::Log1p => self.log1p_f32,
            Func::Sin => self.sin_f32,
            Func::Cos => self.cos_f32,
            Func::Tanh => self.tanh_f32,
            Func::Logistic => self.logistic_f32,
        }
    }

    /// The f64 tile function of `func`.
    pub fn f64(&self, func: Func) -> TileF64 {
        match func {
            Func::Exp => self.exp_f64,
            Func::Expm1 => self.expm1_f64,
            Func::Log => self.log_f64,
            Func::Log1p => self.log1p_f64,
            Func::Sin => self.sin_f64,
            Func::Cos => self.cos_f64,
            Func::Tanh => self.tanh_f64,
            Func::Logistic => self.logistic_f64,
        }
    }

    /// `dst[i] = func(src[i])`. Panics if the lengths differ.
    pub fn map_f32(&self, func: Func, src: &[f32], dst: &mut [f32]) {
        assert_eq!(src.len(), dst.len(), "vmath: source and destination lengths differ");
        // SAFETY: the table only holds levels this CPU supports; two distinct slices of equal length.
        unsafe { self.f32(func)(src.as_ptr(), dst.as_mut_ptr(), src.len()) }
    }

    /// `dst[i] = func(src[i])`. Panics if the lengths differ.
    pub fn map_f64(&self, func: Func, src: &[f64], dst: &mut [f64]) {
        assert_eq!(src.len(), dst.len(), "vmath: source and destination lengths differ");
        // SAFETY: as in `map_f32`.
        unsafe { self.f64(func)(src.as_ptr(), dst.as_mut_ptr(), src.len()) }
    }

    /// `buf[i] = func(buf[i])`.
    pub fn map_f32_in_place(&self, func: Func, buf: &mut [f32]) {
        // SAFETY: identical source and destination ranges are allowed.
        unsafe { self.f32(func)(buf.as_ptr(), buf.as_mut_ptr(), buf.len()) }
    }

    /// `buf[i] = func(buf[i])`.
    pub fn map_f64_in_place(&self, func: Func, buf: &mut [f64]) {
        // SAFETY: identical source and destination ranges are allowed.
        unsafe { self.f64(func)(buf.as_ptr(), buf.as_mut_ptr(), buf.len()) }
    }
}

/// Defines the 16 tile functions of one level; the attributes (`#[target_feature]`) go on each.
macro_rules! tile_fns {
    ($(#[$attr:meta])*) => {
        tile_fns!(@each [$(#[$attr])*]
            exp_f32_tile f32 exp_f32 NoFix, exp_f64_tile f64 exp_f64 NoFix,
            expm1_f32_tile f32 expm1_f32 NoFix, expm1_f64_tile f64 expm1_f64 NoFix,
            log_f32_tile f32 log_f32 NoFix, log_f64_tile f64 log_f64 NoFix,
            log1p_f32_tile f32 log1p_f32 NoFix, log1p_f64_tile f64 log1p_f64 NoFix,
            sin_f32_tile f32 sin_f32 SinFixF32, sin_f64_tile f64 sin_f64 SinFixF64,
            cos_f32_tile f32 cos_f32 CosFixF32, cos_f64_tile f64 cos_f64 CosFixF64,
            tanh_f32_tile f32 tanh_f32 NoFix, tanh_f64_tile f64 tanh_f64 NoFix,
            logistic_f32_tile f32 logistic_f32 NoFix, logistic_f64_tile f64 logistic_f64 NoFix,
        );
        /// This level's table.
        pub(super) static TABLE: super::VmathTable = super::VmathTable {
            level: LEVEL,
            exp_f32: exp_f32_tile, exp_f64: exp_f64_tile,
            expm1_f32: expm1_f32_tile, expm1_f64: expm1_f64_tile,
            log_f32: log_f32_tile, log_f64: log_f64_tile,
            log1p_f32: log1p_f32_tile, log1p_f64: log1p_f64_tile,
            sin_f32: sin_f32_tile, sin_f64: sin_f64_tile,
            cos_f32: cos_f32_tile, cos_f64: cos_f64_tile,
            tanh_f32: tanh_f32_tile, tanh_f64: tanh_f64_tile,
            logistic_f32: logistic_f32_tile, logistic_f64: logistic_f64_tile,
        };
    };
    (@each $attrs:tt $($name:ident $t:ident $elem:ident $fix:ident,)*) => {
        $(tile_fns!(@one $attrs $name $t $elem $fix);)*
    };
    (@one [$(#[$attr:meta])*] $name:ident $t:ident $elem:ident $fix:ident) => {
        #[doc = concat!("`", stringify!($elem), "` on a tile (see the module docs for the contract).")]
        ///
        /// # Safety
        /// `src`/`dst` valid for `n` reads/writes, identical or disjoint; the CPU supports this level.
        $(#[$attr])*
        pub unsafe extern "C" fn $name(src: *const $t, dst: *mut $t, n: usize) {
            // SAFETY: forwarded from the caller.
            unsafe { super::elem::drive::<$t, super::elem::$fix>(src, dst, n, super::elem::$elem) }
        }
    };
}

/// The tile functions compiled for AVX-512 (call only where [`Level::Avx512`] is supported).
#[cfg(target_arch = "x86_64")]
pub mod avx512 {
    const LEVEL: super::Level = super::Level::Avx512;
    tile_fns!(#[target_feature(enable = "avx512f,avx512dq,avx512vl,avx2,fma")]);
}

/// The tile functions compiled for AVX2 + FMA (call only where [`Level::Avx2`] is supported).
#[cfg(target_arch = "x86_64")]
pub mod avx2 {
    const LEVEL: super::Level = super::Level::Avx2;
    tile_fns!(#[target_feature(enable = "avx2,fma")]);
}

/// The tile functions compiled for the target's baseline; run on every CPU.
pub mod baseline {
    const LEVEL: super::Level = super::Level::Baseline;
    tile_fns!();
}

/// The table of `level`, or `None` where this CPU cannot run it.
pub fn table_for(level: Level) -> Option<&'static VmathTable> {
    if !level.supported() {
        return None;
    }
    match level {
        #[cfg(target_arch = "x86_64")]
        Level::Avx512 => Some(&avx512::TABLE),
        #[cfg(target_arch = "x86_64")]
        Level::Avx2 => Some(&avx2::TABLE),
        #[cfg(not(target_arch = "x86_64"))]
        Level::Avx512 | Level::Avx2 => None,
        Level::Baseline => Some(&baseline::TABLE),
    }
}

/// The table of the best level this CPU supports, chosen on the first call and cached.
pub fn table() -> &'static VmathTable {
    static BEST: OnceLock<&'static VmathTable> = OnceLock::new();
    BEST.get_or_init(|| Level::ALL.into_iter().find_map(table_for).unwrap_or(&baseline::TABLE))
}

/// Defines the dispatching `<name>_<dtype>_tile` entry points (one indirect call through [`table`]).
macro_rules! dispatch_fns {
    ($($name:ident $field:ident $t:ident,)*) => {$(
        #[doc = concat!("`", stringify!($field), "` on a tile at the best level of this CPU.")]
        ///
        /// # Safety
        /// `src`/`dst` valid for `n` reads/writes, identical or disjoint.
        pub unsafe extern "C" fn $name(src: *const $t, dst: *mut $t, n: usize) {
            // SAFETY: forwarded from the caller; the table's level is supported.
            unsafe { (table().$field)(src, dst, n) }
        }
    )*};
}

dispatch_fns! {
    exp_f32_tile exp_f32 f32, exp_f64_tile exp_f64 f64,
    expm1_f32_tile expm1_f32 f32, expm1_f64_tile expm1_f64 f64,
    log_f32_tile log_f32 f32, log_f64_tile log_f64 f64,
    log1p_f32_tile log1p_f32 f32, log1p_f64_tile log1p_f64 f64,
    sin_f32_tile sin_f32 f32, sin_f64_tile sin_f64 f64,
    cos_f32_tile cos_f32 f32, cos_f64_tile cos_f64 f64,
    tanh_f32_tile tanh_f32 f32, tanh_f64_tile tanh_f64 f64,
    logistic_f32_tile logistic_f32 f32, logistic_f64_tile logistic_f64 f64,
}
