//! The benchmark workloads of issue 5 (W1 heat, W2 mass-spring, W4 cart-pole rollout, W5 MLP), each a
//! kiln program to the specification of its JAX anchor (`benches/jax/`, from `../shared/anchors/jax/`).
//!
//! Shared by `benches/workloads.rs` (criterion) and `examples/bench_kiln.rs` (the comparison runner)
//! through `#[path = "../benches/workloads/mod.rs"] mod workloads;`.
#![allow(dead_code)]

pub mod common;
pub mod w2;
pub mod w4;

/// One timed program of the suite, named like the JAX anchor's `emit(workload, variant, size)`.
pub struct Case {
    /// "W1", "W2", "W4", "W5".
    pub workload: &'static str,
    /// e.g. "fwd", "grad", "grad_vmap" — the JAX anchor's variant string.
    pub variant: &'static str,
    /// e.g. "N=4096,T=1000" — the JAX anchor's size string, character for character.
    pub size: String,
    /// Builds inputs and a fresh `kiln::jit` closure; each call of the returned closure runs the
    /// program once (the first call traces + compiles) and returns every output leaf as host arrays.
    pub make: Box<dyn Fn() -> Box<dyn FnMut() -> Vec<kiln::ir::Array>>>,
}
