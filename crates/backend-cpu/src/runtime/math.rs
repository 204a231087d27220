//! `extern "C"` math routines JIT code calls.
//!
//! - Per-element routines (`kiln_exp_f32`, ...), called by the scalar path (4–7 ns per call). The
//!   eight functions [`crate::vmath`] covers run its tile function on one element, so the scalar and
//!   vector paths give the same bits (vmath's documented ulp from the interpreter's std/libm values);
//!   the others (erf, erf_inv, rem, pow, atan2) compute exactly what the interpreter computes (the
//!   same Rust/libm function), so they are bitwise equal.
//! - Tile routines (`kiln_tile_exp_f32`, ...): the vmath tile functions of the best level this CPU
//!   has, `fn(src, dst, n)`, called by the vector path on whole tiles.
//!
//! None of them can panic.

use crate::vmath::{self, Func};

/// The symbol of routine `op` (a primitive name) for f32 or f64.
pub(crate) fn name(op: &'static str, f64: bool) -> &'static str {
    for (n, o, is64, _) in table() {
        if o == op && is64 == f64 {
            return n;
        }
    }
    "kiln_missing"
}

/// Every routine's (symbol, address), for `JITBuilder::symbol`.
pub(crate) fn symbols() -> Vec<(&'static str, *const u8)> {
    table().into_iter().map(|(n, _, _, p)| (n, p)).collect()
}

macro_rules! unary {
    ($($sym32:ident $sym64:ident $op:literal |$x:ident| $body:expr;)*) => {
        $(
            extern "C" fn $sym32($x: f32) -> f32 { $body }
            extern "C" fn $sym64($x: f64) -> f64 { $body }
        )*
    };
}
macro_rules! binary {
    ($($sym32:ident $sym64:ident $op:literal |$x:ident, $y:ident| $body:expr;)*) => {
        $(
            extern "C" fn $sym32($x: f32, $y: f32) -> f32 { $body }
            extern "C" fn $sym64($x: f64, $y: f64) -> f64 { $body }
        )*
    };
}

/// `func` on one f32 through the vmath tile function (the vector path's implementation).
fn tile1_f32(func: Func, x: f32) -> f32 {
    let mut y = x;
    // SAFETY: one valid element each way, disjoint; the table only holds levels this CPU supports.
    unsafe { vmath::table().f32(func)(&x, &mut y, 1) };
    y
}

/// `func` on one f64 through the vmath tile function.
fn tile1_f64(func: Func, x: f64) -> f64 {
    let mut y = x;
    // SAFETY: as in `tile1_f32`.
    unsafe { vmath::table().f64(func)(&x, &mut y, 1) };
    y
}

macro_rules! tiled {
    ($($sym32:ident $sym64:ident $func:ident;)*) => {
        $(
            extern "C" fn $sym32(x: f32) -> f32 { tile1_f32(Func::$func, x) }
            extern "C" fn $sym64(x: f64) -> f64 { tile1_f64(Func::$func, x) }
        )*
    };
}

tiled! {
    kiln_exp_f32 kiln_exp_f64 Exp;
    kiln_expm1_f32 kiln_expm1_f64 Expm1;
    kiln_log_f32 kiln_log_f64 Log;
    kiln_log1p_f32 kiln_log1p_f64 Log1p;
    kiln_sin_f32 kiln_sin_f64 Sin;
    kiln_cos_f32 kiln_cos_f64 Cos;
    kiln_tanh_f32 kiln_tanh_f64 Tanh;
    kiln_logistic_f32 kiln_logistic_f64 Logistic;
}

unary! {
    kiln_erf_inv_f32 kiln_erf_inv_f64 "erf_inv" |x| kiln_ir::erf_inv(x as f64) as _;
}
extern "C" fn kiln_erf_f32(x: f32) -> f32 {
    libm::erff(x)
}
extern "C" fn kiln_erf_f64(x: f64) -> f64 {
    libm::erf(x)
}
binary! {
    kiln_rem_f32 kiln_rem_f64 "rem" |x, y| x % y;
    kiln_pow_f32 kiln_pow_f64 "pow" |x, y| x.powf(y);
    kiln_atan2_f32 kiln_atan2_f64 "atan2" |x, y| x.atan2(y);
}

type Entry = (&'static str, &'static str, bool, *const u8);
fn table() -> [Entry; 26] {
    [
        ("kiln_exp_f32", "exp", false, kiln_exp_f32 as *const u8),
        ("kiln_exp_f64", "exp", true, kiln_exp_f64 as *const u8),
        ("kiln_expm1_f32", "expm1", false, kiln_expm1_f32 as *const u8),
        ("kiln_expm1_f64", "expm1", true, kiln_expm1_f64 as *const u8),
        ("kiln_log_f32", "log", false, kiln_log_f32 as *const u8),
        ("kiln_log_f64", "log", true, kiln_log_f64 as *const u8),
        ("kiln_log1p_f32", "log1p", false, kiln_log1p_f32 as *const u8),
        ("kiln_log1p_f64", "log1p", true, kiln_log1p_f64 as *const u8),
        ("kiln_sin_f32", "sin", false, kiln_sin_f32 as *const u8),
        ("kiln_sin_f64", "sin", true, kiln_sin_f64 as *const u8),
        ("kiln_cos_f32", "cos", false, kiln_cos_f32 as *const u8),
        ("kiln_cos_f64", "cos", true, kiln_cos_f64 as *const u8),
        ("kiln_tanh_f32", "tanh", false, kiln_tanh_f32 as *const u8),
        ("kiln_tanh_f64", "tanh", true, kiln_tanh_f64 as *const u8),
        ("kiln_logistic_f32", "logistic", false, kiln_logistic_f32 as *const u8),
        ("kiln_logistic_f64", "logistic", true, kiln_logistic_f64 as *const u8),
        ("kiln_erf_f32", "erf", false, kiln_erf_f32 as *const u8),
        ("kiln_erf_f64", "erf", true, kiln_erf_f64 as *const u8),
        ("kiln_erf_inv_f32", "erf_inv", false, kiln_erf_inv_f32 as *const u8),
        ("kiln_erf_inv_f64", "erf_inv", true, kiln_erf_inv_f64 as *const u8),
        ("kiln_rem_f32", "rem", false, kiln_rem_f32 as *const u8),
        ("kiln_rem_f64", "rem", true, kiln_rem_f64 as *const u8),
        ("kiln_pow_f32", "pow", false, kiln_pow_f32 as *const u8),
        ("kiln_pow_f64", "pow", true, kiln_pow_f64 as *const u8),
        ("kiln_atan2_f32", "atan2", false, kiln_atan2_f32 as *const u8),
        ("kiln_atan2_f64", "atan2", true, kiln_atan2_f64 as *const u8),
    ]
}

/// The symbol of `func`'s tile routine on f32 or f64.
pub(crate) fn tile_name(func: Func, f64: bool) -> &'static str {
    match (func, f64) {
        (Func::Exp, false) => "kiln_tile_exp_f32",
        (Func::Exp, true) => "kiln_tile_exp_f64",
        (Func::Expm1, false) => "kiln_tile_expm1_f32",
        (Func::Expm1, true) => "kiln_tile_expm1_f64",
        (Func::Log, false) => "kiln_tile_log_f32",
        (Func::Log, true) => "kiln_tile_log_f64",
        (Func::Log1p, false) => "kiln_tile_log1p_f32",
        (Func::Log1p, true) => "kiln_tile_log1p_f64",
        (Func::Sin, false) => "kiln_tile_sin_f32",
        (Func::Sin, true) => "kiln_tile_sin_f64",
        (Func::Cos, false) => "kiln_tile_cos_f32",
        (Func::Cos, true) => "kiln_tile_cos_f64",
        (Func::Tanh, false) => "kiln_tile_tanh_f32",
        (Func::Tanh, true) => "kiln_tile_tanh_f64",
        (Func::Logistic, false) => "kiln_tile_logistic_f32",
        (Func::Logistic, true) => "kiln_tile_logistic_f64",
    }
}

/// Every tile routine's (symbol, address) at the best vmath level of this CPU (resolved once, at
/// JIT time, so calls skip the dispatch).
pub(crate) fn tile_symbols() -> Vec<(&'static str, *const u8)> {
    let t = vmath::table();
    Func::ALL
        .into_iter()
        .flat_map(|func| {
            [
                (tile_name(func, false), t.f32(func) as *const u8),
                (tile_name(func, true), t.f64(func) as *const u8),
            ]
        })
        .collect()
}
