//! The benchmark suite's workloads as kiln programs, one module per workload, each to the exact
//! specification of its JAX anchor in `benches/jax/` (same sizes, inputs, constants, loss and
//! variants), so that checksums and times compare row by row.
//!
//! Shared by `benches/workloads.rs` (criterion) and `examples/bench_kiln.rs` (the JSON runner that
//! `scripts/compare_jax.sh` joins with the JAX side).

// Each includer uses a different subset of the helpers.
#![allow(dead_code)]

pub mod common;
pub mod w1;
pub mod w2;
pub mod w3;
pub mod w4;
pub mod w5;

/// One timed program of the suite, named like the JAX anchor's `emit(workload, variant, size)`.
pub struct Case {
    /// "W1", "W2", "W3", "W4", "W5".
    pub workload: &'static str,
    /// e.g. "fwd", "grad", "grad_vmap" — the JAX anchor's variant string.
    pub variant: &'static str,
    /// e.g. "N=4096,T=1000" — the JAX anchor's size string, character for character.
    pub size: String,
    /// Builds inputs and a fresh `kiln::jit` closure; each call of the returned closure runs the
    /// program once (the first call traces + compiles) and returns every output leaf as host arrays.
    pub make: Box<dyn Fn() -> Box<dyn FnMut() -> Vec<kiln::ir::Array>>>,
}

/// Every case of every workload, in the JAX suite's order.
pub fn all_cases() -> Vec<Case> {
    let mut cases = w1::cases();
    cases.extend(w2::cases());
    cases.extend(w3::cases());
    cases.extend(w4::cases());
    cases.extend(w5::cases());
    cases
}
