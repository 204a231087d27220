//! `extern "C"` math routines JIT code calls per element (the slow path: ~3 ns per call; to be
//! replaced by inline polynomials or tile calls). Each computes exactly what the interpreter computes
//! (the same Rust/libm function), so results are bitwise equal. None of them can panic.

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

unary! {
    kiln_exp_f32 kiln_exp_f64 "exp" |x| x.exp();
    kiln_expm1_f32 kiln_expm1_f64 "expm1" |x| x.exp_m1();
    kiln_log_f32 kiln_log_f64 "log" |x| x.ln();
    kiln_log1p_f32 kiln_log1p_f64 "log1p" |x| x.ln_1p();
    kiln_sin_f32 kiln_sin_f64 "sin" |x| x.sin();
    kiln_cos_f32 kiln_cos_f64 "cos" |x| x.cos();
    kiln_tanh_f32 kiln_tanh_f64 "tanh" |x| x.tanh();
    // exp of a negative argument only: no inf/inf for large |x| (the interpreter's formula).
    kiln_logistic_f32 kiln_logistic_f64 "logistic" |x| if x >= 0.0 { 1.0 / (1.0 + (-x).exp()) } else { let e = x.exp(); e / (1.0 + e) };
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
