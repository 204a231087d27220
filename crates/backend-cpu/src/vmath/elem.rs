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
}

/// No fix-up (every function but sin/cos).
pub(crate) struct NoFix;
impl<T> Fixup<T> for NoFix {
    #[inline(always)]
    fn apply(_: &[T; LANES], _: &mut [T; LANES]) {}
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
                        if big(x) {
                            *d = (x as f64).$f() as $t;
                        }
                    }
                }
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

/// Applies `f` to `n` elements from `src` to `dst` in chunks of [`LANES`]; the tail is padded with
/// zeros so it runs the same vector code. A chunk is read whole before it is written, so `src == dst`
/// is fine.
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
    let full = n / LANES * LANES;
    let mut i = 0;
    while i < full {
        // SAFETY: i + LANES ≤ n; unaligned access is what read/write_unaligned are for.
        unsafe {
            let a = (src.add(i) as *const [T; LANES]).read_unaligned();
            (dst.add(i) as *mut [T; LANES]).write_unaligned(run_chunk::<T, X>(&a, &f));
        }
        i += LANES;
    }
    let rest = n - full;
    if rest > 0 {
        let mut a = [T::default(); LANES];
        // SAFETY: rest elements remain in both ranges; the local array does not overlap them.
        unsafe {
            std::ptr::copy_nonoverlapping(src.add(full), a.as_mut_ptr(), rest);
            std::ptr::copy_nonoverlapping(run_chunk::<T, X>(&a, &f).as_ptr(), dst.add(full), rest);
        }
    }
}
