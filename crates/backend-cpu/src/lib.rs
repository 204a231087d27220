//! kiln's CPU backend: compiles a [`kiln_ir::Function`] to native code with Cranelift.
//!
//! Pipeline ([`compile`]):
//! 1. `fusion`: greedy producer→consumer fusion decides which equations are computed
//!    inline inside their consumer's kernel, which are kernel roots, and which are runtime steps;
//! 2. `grouping`: kernels with the same number of outer rows share one multi-output kernel (one
//!    step, each member's loop over the step's row range in turn), when
//!    [`CompileOptions::multi_output`];
//! 3. `plan`: steps over buffers, with intermediate buffers placed in one arena by liveness;
//! 4. `codegen`: one Cranelift function per kernel, a loop nest over the root's output computing each
//!    element through the fused producers' index arithmetic;
//! 5. `runtime`: [`Executable::run`] walks the steps — kernels (split over rayon threads above a
//!    measured work threshold), gemm, sort, cumulative scans, control flow over compiled
//!    sub-functions — with an arena pool kept between calls. The interpreter is never used.
//!
//! Results equal the reference interpreter's (`kiln_ir::interp`) bit for bit, except: transcendentals
//! (within a few ulp, see `vmath`), float sums and products (reassociated, within the bound documented
//! in `codegen/vector.rs` and `codegen/pairwise.rs`), gemm, and the sign and payload of a NaN produced
//! by arithmetic, which IEEE 754 leaves unspecified (x86's instructions give the default negative
//! quiet NaN where Rust's code may keep an operand's; XLA makes no promise either) — such a NaN is a
//! NaN on both sides, and only `bitcast` can tell them apart.
//!
//! [`compile_with`] takes [`CompileOptions`] (thread count; `KILN_DUMP`-style debug dump of the IR,
//! the plan and the kernels); [`Executable::cost_report`] estimates bytes moved and flops per call.
//!
//! [`vmath`] holds the vectorized transcendental tiles (AVX-512/AVX2/baseline, chosen at run time)
//! that kernels will call on tiles of elements; today's kernels still call per-element functions.
#![deny(missing_docs)]

mod codegen;
mod cost;
mod dump;
mod error;
mod fusion;
mod grouping;
mod options;
mod pipeline;
mod plan;
mod runtime;
pub mod vmath;

pub use cost::CostReport;
pub use error::CompileError;
pub use options::CompileOptions;
pub use plan::{compile, compile_with, estimate};
pub use runtime::{Arg, ArgumentError, Executable};
