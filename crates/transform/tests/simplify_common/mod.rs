//! Shared helpers of the simplify tests: special-value inputs, bitwise comparison, and options
//! without wall-clock budgets.
#![allow(dead_code)]

use kiln_ir::{Array, DType, Function, TensorType};
use kiln_transform::SimplifyOptions;
use std::time::Duration;

/// The default options with the wall-clock budgets out of reach: what a test asserts about rules
/// must not depend on how loaded the machine is (a region stopped by its 50 ms budget is kept as
/// written). Iteration and node limits, which are deterministic, stay as they are.
pub fn untimed() -> SimplifyOptions {
    let hour = Duration::from_secs(3600);
    SimplifyOptions { time_limit: hour, pass_time_limit: hour, ..SimplifyOptions::default() }
}

/// Float values that break unsound rules: NaN, ±inf, ±0, subnormals, huge and ordinary numbers.
pub const SPECIAL_F: [f64; 16] = [
    f64::NAN,
    f64::INFINITY,
    f64::NEG_INFINITY,
    -0.0,
    0.0,
    1.0,
    -1.0,
    2.5,
    -3.75,
    1e30,
    -1e-40,
    0.1,
    7.0,
    -2.0,
    3e38,
    1e-45,
];
/// Integer values, including out-of-range indices and the extremes.
pub const SPECIAL_I: [i64; 10] = [-1, 0, 1, 7, -7, 100, i32::MIN as i64, i32::MAX as i64, 3, 2];

/// An array of type `t` filled with special values, starting at `offset` in the tables.
pub fn special(t: &TensorType, offset: usize) -> Array {
    let n = t.shape.size();
    let dims = t.shape.dims();
    match t.dtype {
        DType::F32 => Array::from_vec(dims, (0..n).map(|i| SPECIAL_F[(i + offset) % 16] as f32).collect()),
        DType::F64 => Array::from_vec(dims, (0..n).map(|i| SPECIAL_F[(i + offset) % 16]).collect()),
        DType::I32 => Array::from_vec(dims, (0..n).map(|i| SPECIAL_I[(i + offset) % 10] as i32).collect()),
        DType::U32 => Array::from_vec(dims, (0..n).map(|i| SPECIAL_I[(i + offset) % 10] as u32).collect()),
        DType::Bool => Array::from_vec(dims, (0..n).map(|i| (i + offset).is_multiple_of(3)).collect()),
    }
}

/// Bitwise equality with every NaN equal to every NaN (IEEE leaves NaN payloads open).
pub fn same_bits(a: &Array, b: &Array) -> bool {
    match (a, b) {
        (Array::F32(x), Array::F32(y)) => {
            x.shape() == y.shape()
                && x.iter()
                    .zip(y.iter())
                    .all(|(p, q)| (p.is_nan() && q.is_nan()) || p.to_bits() == q.to_bits())
        }
        (Array::F64(x), Array::F64(y)) => {
            x.shape() == y.shape()
                && x.iter()
                    .zip(y.iter())
                    .all(|(p, q)| (p.is_nan() && q.is_nan()) || p.to_bits() == q.to_bits())
        }
        _ => a.bitwise_eq(b),
    }
}

/// Evaluates `f` and `g` on several special-value inputs and asserts bitwise-equal results.
pub fn assert_same_values(f: &Function, g: &Function) {
    assert_eq!(f.param_types(), g.param_types());
    assert_eq!(f.output_types(), g.output_types());
    for offset in 0..16 {
        // Each parameter its own values (7k: distinct offsets in both tables), so that a rewrite
        // picking the wrong one of two operands (a select's arms) shows.
        let args: Vec<Array> =
            f.param_types().iter().enumerate().map(|(k, t)| special(t, offset + 7 * k)).collect();
        let want = kiln_ir::eval(f, &args).expect("input evaluates");
        let got = kiln_ir::eval(g, &args).expect("simplified evaluates");
        for (w, o) in want.iter().zip(&got) {
            assert!(same_bits(w, o), "results differ on {args:?}:\n  before {w:?}\n  after  {o:?}\n{f}\n{g}");
        }
    }
}
