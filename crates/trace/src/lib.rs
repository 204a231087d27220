//! kiln's tracer: the one [`Tensor`] type of eager and traced code, the thread-local stack of traces,
//! [`trace`] (a Rust function → an IR [`kiln_ir::Function`]), pytrees ([`Tree`], `#[derive(Tree)]`),
//! and the `jax.numpy`-like methods and composites users write programs with.
//!
//! Ops on concrete tensors run at once through the reference interpreter (eager mode); inside
//! [`trace`] they are recorded. Operators never return `Result`: a bad op inside a trace records the
//! first error with the user's call site and `trace` returns it; eager misuse panics at the caller's line.
#![warn(missing_docs)]

extern crate self as kiln_trace;

pub(crate) mod context;
mod control;
mod error;
pub mod lax;
pub mod methods;
pub mod nn;
mod numpy;
mod operators;
pub mod random;
mod tensor;
mod trace_fn;
mod tree;

pub use context::{
    at_location, is_tracing, propagate_error, report_error, stand_in, trace_failed, with_api_location,
};
pub use control::{Branch, ScanOptions, cond, scan, scan_with, switch, while_loop, while_loop_bounded};
pub use error::{Error, Result};
pub use kiln_trace_derive::Tree;
pub use numpy::{broadcast_shapes, where_};
pub use operators::Scalar;
pub use tensor::Tensor;
pub use trace_fn::{Traced, trace, trace_or_template};
pub use tree::{Tree, next_leaf};
