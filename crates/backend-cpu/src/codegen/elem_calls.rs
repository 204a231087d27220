//! Per-element transcendental entries for the scalar path: vmath's element kernels
//! ([`crate::vmath::elem`]) called on one value, compiled with FMA where the CPU has it.
//!
//! They run the same polynomial with the same fused multiply-adds as the tile functions (and the
//! same std-libm fix-up of sin/cos beyond [`crate::vmath::kernels::TRIG_VECTOR_LIMIT`]), so the
//! scalar and vector paths give identical bits — at ~one call per element instead of a whole
//! 16-lane chunk (`tests/segments.rs` checks the identity on random bit patterns).

use crate::vmath::{Func, Level};

/// Defines the 16 entries of one level (the attributes go on each).
macro_rules! entries {
    ($level:ident $(#[$attr:meta])*) => {
        pub(super) mod $level {
            use crate::vmath::elem::{self, Fixup};
            entries!(@each [$(#[$attr])*]
                exp_f32 f32 NoFix, exp_f64 f64 NoFix, expm1_f32 f32 NoFix, expm1_f64 f64 NoFix,
                log_f32 f32 NoFix, log_f64 f64 NoFix, log1p_f32 f32 NoFix, log1p_f64 f64 NoFix,
                tanh_f32 f32 NoFix, tanh_f64 f64 NoFix, logistic_f32 f32 NoFix, logistic_f64 f64 NoFix,
                sin_f32 f32 SinFixF32, sin_f64 f64 SinFixF64, cos_f32 f32 CosFixF32, cos_f64 f64 CosFixF64,
            );
        }
    };
    (@each $attrs:tt $($name:ident $t:ident $fix:ident,)*) => {
        $(entries!(@one $attrs $name $t $fix);)*
    };
    (@one [$(#[$attr:meta])*] $name:ident $t:ident $fix:ident) => {
        /// # Safety
        /// The CPU supports this level's target features.
        $(#[$attr])*
        pub(super) unsafe extern "C" fn $name(x: $t) -> $t {
            // The tiles' fix-up (sin/cos beyond the vector reduction's range and ±inf: std's libm).
            <elem::$fix as Fixup<$t>>::apply_one(x, elem::$name(x))
        }
    };
}

#[cfg(target_arch = "x86_64")]
entries!(fma #[target_feature(enable = "avx2,fma")]);
entries!(baseline);

/// The symbol of `func`'s per-element entry on f32 or f64.
pub(super) fn elem_name(func: Func, f64: bool) -> &'static str {
    match (func, f64) {
        (Func::Exp, false) => "kiln_elem_exp_f32",
        (Func::Exp, true) => "kiln_elem_exp_f64",
        (Func::Expm1, false) => "kiln_elem_expm1_f32",
        (Func::Expm1, true) => "kiln_elem_expm1_f64",
        (Func::Log, false) => "kiln_elem_log_f32",
        (Func::Log, true) => "kiln_elem_log_f64",
        (Func::Log1p, false) => "kiln_elem_log1p_f32",
        (Func::Log1p, true) => "kiln_elem_log1p_f64",
        (Func::Sin, false) => "kiln_elem_sin_f32",
        (Func::Sin, true) => "kiln_elem_sin_f64",
        (Func::Cos, false) => "kiln_elem_cos_f32",
        (Func::Cos, true) => "kiln_elem_cos_f64",
        (Func::Tanh, false) => "kiln_elem_tanh_f32",
        (Func::Tanh, true) => "kiln_elem_tanh_f64",
        (Func::Logistic, false) => "kiln_elem_logistic_f32",
        (Func::Logistic, true) => "kiln_elem_logistic_f64",
    }
}

macro_rules! table {
    ($m:ident) => {{
        use $m as m;
        [
            (Func::Exp, m::exp_f32 as *const u8, m::exp_f64 as *const u8),
            (Func::Expm1, m::expm1_f32 as *const u8, m::expm1_f64 as *const u8),
            (Func::Log, m::log_f32 as *const u8, m::log_f64 as *const u8),
            (Func::Log1p, m::log1p_f32 as *const u8, m::log1p_f64 as *const u8),
            (Func::Sin, m::sin_f32 as *const u8, m::sin_f64 as *const u8),
            (Func::Cos, m::cos_f32 as *const u8, m::cos_f64 as *const u8),
            (Func::Tanh, m::tanh_f32 as *const u8, m::tanh_f64 as *const u8),
            (Func::Logistic, m::logistic_f32 as *const u8, m::logistic_f64 as *const u8),
        ]
    }};
}

/// Every entry's (symbol, address): the FMA build where this CPU has AVX2 and FMA (the levels the
/// tile functions also use fused multiply-adds on), else the baseline build (whose `mul_add` is a
/// libm `fma` call: slow, same bits).
pub(super) fn symbols() -> Vec<(&'static str, *const u8)> {
    #[cfg(target_arch = "x86_64")]
    let entries = if Level::Avx2.supported() { table!(fma) } else { table!(baseline) };
    #[cfg(not(target_arch = "x86_64"))]
    let entries = table!(baseline);
    entries
        .into_iter()
        .flat_map(|(func, p32, p64)| [(elem_name(func, false), p32), (elem_name(func, true), p64)])
        .collect()
}
