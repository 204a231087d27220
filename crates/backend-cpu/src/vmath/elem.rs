//! The element functions behind each tile function: one per (function, dtype), each a thin wrapper of
//! a kernel with its coefficient tables. f64 runs the [`kernels`](super::kernels) kernels; f32 runs
//! the f32 ones of [`kernels_f32`](super::kernels_f32), but for sin and cos, which go through f64
//! (kernels without the f64 ones' double-double steps).

use super::kernels::{self as k, COS_F32, COS_F64, EXP_F64, LOG_F64, SIN_F32, SIN_F64};
// The f32 functions that run in f32 are the kernels themselves.
pub(crate) use super::kernels_f32::{
    exp as exp_f32, expm1 as expm1_f32, log as log_f32, log1p as log1p_f32, logistic as logistic_f32,
    tanh as tanh_f32,
};

#[inline(always)]
pub(crate) fn exp_f64(x: f64) -> f64 {
    k::exp(x, &EXP_F64)
}
#[inline(always)]
pub(crate) fn expm1_f64(x: f64) -> f64 {
    k::expm1(x, &EXP_F64)
}
#[inline(always)]
pub(crate) fn log_f64(x: f64) -> f64 {
    k::log(x, &LOG_F64)
}
#[inline(always)]
pub(crate) fn log1p_f64(x: f64) -> f64 {
    k::log1p(x, &LOG_F64)
}
#[inline(always)]
pub(crate) fn tanh_f64(x: f64) -> f64 {
    k::tanh(x, &EXP_F64)
}
#[inline(always)]
pub(crate) fn logistic_f64(x: f64) -> f64 {
    k::logistic(x, &EXP_F64)
}
#[inline(always)]
pub(crate) fn sin_f64(x: f64) -> f64 {
    k::sincos(x, false, &SIN_F64, &COS_F64)
}
#[inline(always)]
pub(crate) fn cos_f64(x: f64) -> f64 {
    k::sincos(x, true, &SIN_F64, &COS_F64)
}
#[inline(always)]
pub(crate) fn sin_f32(x: f32) -> f32 {
    k::sincos_f32(x as f64, false, &SIN_F32, &COS_F32) as f32
}
#[inline(always)]
pub(crate) fn cos_f32(x: f32) -> f32 {
    k::sincos_f32(x as f64, true, &SIN_F32, &COS_F32) as f32
}

/// Lanes per chunk: one 512-bit vector of f32, two of f64 (LLVM interleaves them).
pub(crate) const LANES: usize = 16;

/// A per-chunk fix-up applied after the vector kernel, given the chunk's inputs and outputs.
pub(crate) trait Fixup<T> {
    fn apply(src: &[T; LANES], dst: &mut [T; LANES]);
    /// The same fix-up for one element `x` whose kernel value is `y`.
    fn apply_one(x: T, y: T) -> T;
}

/// No fix-up (every function but sin/cos).
pub(crate) struct NoFix;
impl<T> Fixup<T> for NoFix {
    #[inline(always)]
    fn apply(_: &[T; LANES], _: &mut [T; LANES]) {}
    #[inline(always)]
    fn apply_one(_: T, y: T) -> T {
        y
    }
}

macro_rules! trig_fixup {
    ($name:ident, $t:ty, $f:ident) => {
        /// Lanes with |x| beyond the vector path's limit (or ±inf) are recomputed with std's libm:
        /// one predictable branch per chunk, scalar work only where such lanes exist.
        pub(crate) struct $name;
        impl Fixup<$t> for $name {
            #[inline(always)]
            fn apply(src: &[$t; LANES], dst: &mut [$t; LANES]) {
                let big = |x: $t| (x as f64).abs() > k::TRIG_VECTOR_LIMIT;
                let mut any = false;
                for &x in src {
                    any |= big(x);
                }
                if any {
                    for (d, &x) in dst.iter_mut().zip(src) {
                        *d = Self::apply_one(x, *d);
                    }
                }
            }
            #[inline(always)]
            fn apply_one(x: $t, y: $t) -> $t {
                if (x as f64).abs() > k::TRIG_VECTOR_LIMIT { (x as f64).$f() as $t } else { y }
            }
        }
    };
}
trig_fixup!(SinFixF32, f32, sin);
trig_fixup!(SinFixF64, f64, sin);
trig_fixup!(CosFixF32, f32, cos);
trig_fixup!(CosFixF64, f64, cos);

/// One chunk through `f` and the fix-up. A named `#[inline(always)]` fn, not a closure: a closure
/// called twice was outlined and so compiled without the caller's target features (scalar, with
/// `fma` calls), 20× slower.
#[inline(always)]
fn run_chunk<T: Copy + Default, X: Fixup<T>>(a: &[T; LANES], f: &impl Fn(T) -> T) -> [T; LANES] {
    let mut b = [T::default(); LANES];
    for (y, &x) in b.iter_mut().zip(a) {
        *y = f(x);
    }
    X::apply(a, &mut b);
    b
}

/// Applies `f` to `n` elements from `src` to `dst` in chunks of [`LANES`]. `src == dst` is fine:
/// every chunk is read whole before it is written, and the last, partial chunk is read first.
///
/// Short rows and tails are what the JIT's tiles mostly are (W2's rows of 10, 40 and 120), and a
/// zero-padded copy of the tail through a stack chunk (a variable-length `memcpy` there and back,
/// and a vector load the copy's stores cannot forward to) cost more than two whole chunks:
/// 28 ns for 8 f32 `exp` against 8 ns for 16. So: with at least one whole chunk, the last
/// `LANES` elements are computed as one overlapping chunk (elements computed twice get the same
/// bits); below that, the chunk is filled and stored under `i < n` per lane, which LLVM turns into
/// masked loads and stores at the AVX-512 level (8.7 ns for 8); one element runs the same kernel
/// as scalar code (same operations, so the same bits: the JIT's per-element routines end here,
/// 4–7 ns a call instead of ~25).
///
/// # Safety
/// `src` valid for `n` reads and `dst` for `n` writes; the two ranges are identical or disjoint.
#[inline(always)]
pub(crate) unsafe fn drive<T: Copy + Default, X: Fixup<T>>(
    src: *const T,
    dst: *mut T,
    n: usize,
    f: impl Fn(T) -> T,
) {
    if n <= 1 {
        if n == 1 {
            // SAFETY: one element each way.
            unsafe {
                let x = src.read();
                dst.write(X::apply_one(x, f(x)));
            }
        }
        return;
    }
    if n < LANES {
        let mut a = [T::default(); LANES];
        for (i, x) in a.iter_mut().enumerate() {
            if i < n {
                // SAFETY: i < n.
                *x = unsafe { src.add(i).read() };
            }
        }
        let b = run_chunk::<T, X>(&a, &f);
        for (i, &y) in b.iter().enumerate() {
            if i < n {
                // SAFETY: i < n; the whole chunk was read first.
                unsafe { dst.add(i).write(y) };
            }
        }
        return;
    }
    let full = n / LANES * LANES;
    // SAFETY: n ≥ LANES, so the last chunk [n - LANES, n) is in range; read before any write.
    let last = unsafe { (src.add(n - LANES) as *const [T; LANES]).read_unaligned() };
    let mut i = 0;
    while i < full {
        // SAFETY: i + LANES ≤ n; unaligned access is what read/write_unaligned are for.
        unsafe {
            let a = (src.add(i) as *const [T; LANES]).read_unaligned();
            (dst.add(i) as *mut [T; LANES]).write_unaligned(run_chunk::<T, X>(&a, &f));
        }
        i += LANES;
    }
    if full < n {
        // SAFETY: as above.
        unsafe { (dst.add(n - LANES) as *mut [T; LANES]).write_unaligned(run_chunk::<T, X>(&last, &f)) };
    }
}
