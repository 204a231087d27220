//! kiln: a JAX-style traced array-program compiler for differentiable simulation.
pub use kiln_ir as ir;
