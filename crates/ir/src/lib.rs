//! kiln's array IR: dtypes, shapes, the closed primitive set with one shape rule per primitive, the
//! [`Function`] graph, its text form (printer and parser that round-trip), the [`verify`]er and the
//! reference interpreter ([`eval`]).
//!
//! Everything else in kiln produces or consumes a [`Function`]: the tracer records one, transforms
//! rewrite one, the CPU backend compiles one, and the interpreter here defines what each means.
#![deny(missing_docs)]

mod canonical;
mod dtype;
mod error;
mod function;
mod interp;
mod prim;
mod shape;
mod shape_rule;
mod text;
mod value;
mod verify;

pub use dtype::DType;
pub use error::{EvalError, TypeError};
pub use function::{ConstDef, Eqn, Function, SrcLoc, Var};
pub use interp::{erf_inv, eval, eval_prim, interpreter_calls};
pub use prim::{ArgOp, BinaryOp, CompareOp, CumulativeOp, IndexMode, Prim, ReduceOp, ScatterOp, UnaryOp};
pub use shape::{ALLOCATION_PROBE_BYTES, Shape, TensorType, can_allocate, human_bytes};
pub use shape_rule::output_types;
pub use text::{ParseError, parse};
pub use value::{Array, Element};
pub use verify::{VerifyError, VerifyErrors, verify};
