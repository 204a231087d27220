//! kiln: a JAX-style traced array-program compiler for differentiable simulation, in Rust.
//!
//! User code runs once on tracer [`Tensor`]s and records a pure array IR ([`ir::Function`]); that IR
//! is printed, verified and evaluated by the reference interpreter today, and transformed (grad, vmap),
//! simplified and compiled to native code by the crates that follow. See `ARCHITECTURE.md` for the walk
//! of one program through the pipeline.
//!
//! ```
//! use kiln::prelude::*;
//! // One explicit diffusion step on a periodic 1-D grid, traced to IR and evaluated.
//! let step = |u: Tensor| &u + 0.05 * (u.roll(1, 0) - 2.0 * &u + u.roll(-1, 0));
//! let traced = trace(step, &Tensor::placeholder(DType::F32, &[4]))?;
//! println!("{}", traced.function);
//! let u1 = traced.eval(&Tensor::from_vec(&[4], vec![1.0f32, 0.0, 0.0, 0.0]))?;
//! assert_eq!(u1.to_vec::<f32>(), vec![0.9, 0.05, 0.0, 0.05]);
//! # Ok::<(), kiln::Error>(())
//! ```
#![warn(missing_docs)]

extern crate self as kiln;

mod ad;
mod checkpoint_policy;
mod chunked;
mod custom;
mod jit;
pub mod optim;
mod vmap;

pub use ad::{
    Args, grad, grad_argnums, hessian, jacfwd, jacrev, jvp, linearize, value_and_grad, value_and_grad_aux,
    vjp,
};
pub use checkpoint_policy::{AUTO_STORE_ALL_BYTES, Checkpoint, checkpoint_policy, with_checkpoint};
pub use chunked::{ChunkedSpecialized, ChunkedVmap, DEFAULT_CHUNK, chunked_vmap};
pub use custom::{checkpoint, custom_jvp, custom_vjp};
pub use jit::{Compiled, Jit, JitOptions, JitStatic, SimplifyOutcome, Specialized, jit, jit_static};
pub use kiln_ir as ir;
pub use kiln_ir::DType;
pub use kiln_trace::{
    Branch, Error, Result, Scalar, ScanOptions, Tensor, Traced, Tree, broadcast_shapes, cond, lax, methods,
    nn, random, scan, scan_with, switch, trace, where_, while_loop, while_loop_bounded,
};
pub use kiln_transform as transform;
pub use vmap::{AxisSpec, axis, unmapped, vmap, vmap_sized};

/// The README's examples, run as doc-tests so they stay true.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

/// Everything a user program needs: `use kiln::prelude::*;`.
pub mod prelude {
    pub use crate::methods::{All, Axes};
    pub use crate::{AxisSpec, chunked_vmap, vmap, vmap_sized};
    pub use crate::{Checkpoint, with_checkpoint};
    pub use crate::{Compiled, Jit, JitOptions, JitStatic, Specialized, jit, jit_static};
    pub use crate::{
        DType, Error, ScanOptions, Tensor, Traced, Tree, cond, scan, scan_with, switch, trace, where_,
        while_loop, while_loop_bounded,
    };
    pub use crate::{checkpoint, custom_jvp, custom_vjp};
    pub use crate::{
        grad, grad_argnums, hessian, jacfwd, jacrev, jvp, linearize, value_and_grad, value_and_grad_aux, vjp,
    };
}
