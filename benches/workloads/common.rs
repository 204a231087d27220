//! Inputs and checksums shared by the workloads, bit-exact with `benches/jax/common.py`.
//!
//! Inputs come from lowbias32 (C. Wellons) applied to `i + seed * 0x9E3779B9 (mod 2^32)`, the
//! row-major flat index `i`; every step is exact integer or exactly rounded float arithmetic, so the
//! Rust and NumPy sides produce the same bits.

use kiln::Tensor;
use kiln::ir::{Array, Element};
use kiln::{Compiled, Jit, Tree};
use std::sync::Arc;

/// `n` hashes `lowbias32(i + seed * 0x9E3779B9)`, `i = 0..n` (wrapping u32 arithmetic).
pub fn hash_u32(n: usize, seed: u32) -> Vec<u32> {
    let base = seed.wrapping_mul(0x9E37_79B9);
    (0..n)
        .map(|i| {
            let mut x = (i as u32).wrapping_add(base);
            x ^= x >> 16;
            x = x.wrapping_mul(0x7FEB_352D);
            x ^= x >> 15;
            x = x.wrapping_mul(0x846C_A68B);
            x ^= x >> 16;
            x
        })
        .collect()
}

/// An f32 tensor of `shape`, uniform in `[lo, hi]`: `f32(lo) + f32(hi - lo) * u` evaluated in f32
/// (multiply, then add; no FMA), `u = ((h >> 9) + 0.5) / 2^23` exact in f32. `lo`, `hi` are taken as
/// f64 (Python floats) and `hi - lo` is formed in f64 before rounding, as `common.py` does.
pub fn uniform(seed: u32, shape: &[usize], lo: impl Into<f64>, hi: impl Into<f64>) -> Tensor {
    let (lo, hi) = (lo.into(), hi.into());
    let n: usize = shape.iter().product();
    let (lo32, width32) = (lo as f32, (hi - lo) as f32);
    let data = hash_u32(n, seed)
        .into_iter()
        .map(|h| {
            let u = (((h >> 9) as f64 + 0.5) / (1u64 << 23) as f64) as f32;
            // Two separate roundings, as NumPy's f32 `lo + width * u` (Rust never contracts to FMA).
            lo32 + width32 * u
        })
        .collect();
    Tensor::from_vec(shape, data)
}

/// `n` int32 values in `[0, m)`: `hash mod m`.
pub fn randint(seed: u32, n: usize, m: u32) -> Vec<i32> {
    hash_u32(n, seed).into_iter().map(|h| (h % m) as i32).collect()
}

fn f64s<T: Element>(a: &Array, to_f64: impl Fn(T) -> f64) -> Vec<f64> {
    a.to_vec::<T>().expect("dtype matched by the caller").into_iter().map(to_f64).collect()
}

/// Per output leaf: `[sum, sum |x|, first element]` in f64 (`common.py`'s `checksum`; NaN first
/// element for an empty leaf).
pub fn checksum(outs: &[Array]) -> Vec<[f64; 3]> {
    outs.iter()
        .map(|a| {
            let v = match a {
                Array::F32(_) => f64s::<f32>(a, f64::from),
                Array::F64(_) => f64s::<f64>(a, |x| x),
                Array::I32(_) => f64s::<i32>(a, f64::from),
                Array::U32(_) => f64s::<u32>(a, f64::from),
                Array::Bool(_) => f64s::<bool>(a, |b| f64::from(u8::from(b))),
            };
            let first = v.first().copied().unwrap_or(f64::NAN);
            [v.iter().sum(), v.iter().map(|x| x.abs()).sum(), first]
        })
        .collect()
}

/// The host arrays of concrete tensors (what the compiled program takes).
pub fn arrays(leaves: &[Tensor]) -> Vec<Array> {
    leaves.iter().map(|t| t.to_array().expect("workload inputs are concrete")).collect()
}

thread_local! {
    /// Whether [`runner`] compiles with the egg simplifier (the default, as `jit`) or the frozen
    /// greedy baseline (`.simplify(false)`); set by `benches/workloads_simplify.rs`.
    pub static SIMPLIFY: std::cell::Cell<bool> = const { std::cell::Cell::new(true) };
    /// The last program [`runner`] compiled on this thread, with a closure that traces its IR
    /// (on demand, so that timing the first call does not include a second trace).
    pub static LAST: std::cell::RefCell<Option<(TraceFn, Arc<Compiled>)>> =
        const { std::cell::RefCell::new(None) };
}

/// Traces a workload's function to its IR.
pub type TraceFn = Box<dyn Fn() -> kiln::ir::Function>;

/// The timed closure of a [`super::Case`]: the first call traces and compiles `f` for `args`
/// (`Jit::compiled`, with the simplifier as [`SIMPLIFY`] says) and runs it; later calls run the
/// cached native code on the same host arrays (the steady state JAX's `f(*args)` measures:
/// dispatch + execution, no input copies). The compiled program and a tracer of `f` go to [`LAST`].
///
/// # Panics
/// If tracing, compiling or running fails: a benchmark of a broken program has no result.
pub fn runner<A, R, F>(f: F, args: A) -> Box<dyn FnMut() -> Vec<Array>>
where
    A: Tree + Clone + 'static,
    R: Tree + Clone + 'static,
    F: Fn(A) -> R + Clone + 'static,
{
    let inputs = arrays(&args.leaves());
    let program: Jit<F, A, R> = kiln::jit(f.clone()).simplify(SIMPLIFY.get());
    let mut compiled: Option<Arc<Compiled>> = None;
    Box::new(move || {
        let exe = compiled.get_or_insert_with(|| {
            let exe = program.compiled(&args).unwrap_or_else(|e| panic!("compile: {e}"));
            let (f, args) = (f.clone(), args.clone());
            let trace: TraceFn = Box::new(move || {
                kiln::trace(f.clone(), &args).unwrap_or_else(|e| panic!("trace: {e}")).function
            });
            LAST.set(Some((trace, exe.clone())));
            exe
        });
        exe.run(&inputs).unwrap_or_else(|e| panic!("run: {e}"))
    })
}
