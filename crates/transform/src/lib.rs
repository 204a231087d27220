//! kiln's IR → IR transforms.
//!
//! Every transform is an *interpreter over tensors*: it walks a [`kiln_ir::Function`]'s equations and,
//! for each, calls that primitive's rule, which computes with [`kiln_trace::Tensor`] ops. Run inside a
//! trace, the rules' ops are recorded, so the result is a new `Function` (JAX's design: rules are
//! written in the same ops as user code); run eagerly, they compute values at once.
//!
//! * [`replay`]: re-emit a function's equations (inlining a traced function into the current trace).
//! * [`ad`]: forward mode ([`ad::jvp_replay`], one JVP rule per primitive in `ad/jvp_rules.rs`) and
//!   reverse mode ([`ad::vjp_replay`], one direct VJP rule per primitive in `ad/vjp_rules.rs`), with the
//!   control-flow rules (scan with checkpointing, while, cond, custom rules) in `ad/control.rs`.
//! * [`batching`]: `vmap` ([`batching::batch_replay`], one batching rule per primitive in
//!   `batching/rules.rs`, control flow in `batching/control.rs`).
//! * [`dce`]: dead-code elimination.
//! * [`hoist_scan_invariants`]: loop-invariant code motion out of `scan`; before it,
//!   [`sort_scan_scatters`] turns scatter-adds with loop-invariant indices into segment sums (over
//!   indices sorted once where their updates can be permuted), and
//!   [`transpose_scan_dot_constants`] gives loop constants read by a product a layout whose lanes
//!   are contiguous, and [`split_scan_carry_columns`] carries a carry with a short last axis as
//!   its columns, the body computing column by column; [`sink_scan_constants`] makes loop constants that are literals constants of
//!   the loop's body; [`precompute_scan_xs_work`] computes a scan body's carry-independent work
//!   for all steps before the loop (vmapped over the scan axis); [`reuse_scan_xs_echoes`] drops
//!   scan outputs that only pass an `xs` slice through (reverse mode's saved inputs), their
//!   readers reading the `xs` itself.
//! * [`simplify`](mod@simplify): equality-saturation simplification with egg (named IEEE-exact rules,
//!   a DAG-cost extractor, bounded per-region runs).
#![warn(missing_docs)]

pub mod ad;
pub mod batching;
mod dce;
mod licm;
mod loop_split;
mod replay;
mod scan_carry_split;
mod scan_constants;
mod scan_dot_layout;
mod scan_xs;
mod scan_xs_echo;
pub mod simplify;
mod sorted_scatter;
mod var_map;

pub use dce::dce;
pub use licm::{HoistReport, hoist_scan_invariants};
pub use replay::{replay, trace_function};
pub use scan_carry_split::split_scan_carry_columns;
pub use scan_constants::sink_scan_constants;
pub use scan_dot_layout::transpose_scan_dot_constants;
pub use scan_xs::{XsWorkReport, precompute_scan_xs_work};
pub use scan_xs_echo::reuse_scan_xs_echoes;
pub use simplify::{CostModel, RegionReport, SimplifyOptions, SimplifyReport, StopReason, simplify};
pub use sorted_scatter::sort_scan_scatters;
