//! The flags of a [`crate::Jit`] and the one place where they reach the backend.

use crate::Checkpoint;
use kiln_backend_cpu::{CompileError, CompileOptions, Executable};
use kiln_ir::Function;

/// Compilation flags of a jitted function, set with the builder methods of [`crate::Jit`] and
/// [`crate::JitStatic`] (`jit(f).threads(2).fast_math(true)`). Every field is part of the cache key,
/// so the same function with other flags is compiled separately.
///
/// ```
/// use kiln::prelude::*;
/// let f = jit(|x: Tensor| x.exp()).threads(2).fast_math(true).checkpoint_policy(Checkpoint::StoreAll);
/// assert_eq!(
///     *f.options(),
///     JitOptions { threads: Some(2), fast_math: true, checkpoint: Some(Checkpoint::StoreAll) }
/// );
/// assert_eq!(JitOptions::default().threads, None); // the backend's choice
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct JitOptions {
    /// Worker threads the compiled code may use; `None` lets the backend choose (`KILN_NUM_THREADS`,
    /// else one per core).
    pub threads: Option<usize>,
    /// Allow reassociation and contraction of float arithmetic (results may differ in the last bits).
    /// Keyed, but no rewrite uses it yet.
    pub fast_math: bool,
    /// The reverse-mode `scan` checkpoint policy applied while tracing (see [`crate::with_checkpoint`]);
    /// `None` uses the policy in effect on the calling thread, which then becomes part of the key.
    pub checkpoint: Option<Checkpoint>,
}

impl JitOptions {
    /// The options with the checkpoint policy made explicit (the caller's thread policy when unset):
    /// what a trace depends on, hence what the cache key holds.
    pub(crate) fn resolved(&self) -> JitOptions {
        JitOptions { checkpoint: Some(self.checkpoint.unwrap_or_else(crate::checkpoint_policy)), ..*self }
    }

    /// Runs `f` (which traces) under this checkpoint policy.
    pub(crate) fn tracing<T>(&self, f: impl FnOnce() -> T) -> T {
        match self.checkpoint {
            Some(p) => crate::with_checkpoint(p, f),
            None => f(),
        }
    }
}

/// Compiles `f` for `opts`: dead equations are dropped first (`grad` leaves the unused forward pass
/// that computed the loss value; JAX's DCE does the same), then the backend compiles with
/// `opts.threads` (or `KILN_NUM_THREADS`) and `KILN_DUMP` from the environment. `fast_math` is keyed
/// but changes nothing yet: no backend rewrite depends on it (the egg pass will).
pub(crate) fn backend_compile(f: &Function, opts: &JitOptions) -> Result<Executable, CompileError> {
    let env = CompileOptions::from_env();
    let options = CompileOptions { threads: opts.threads.or(env.threads), ..env };
    kiln_backend_cpu::compile_with(&kiln_transform::dce(f), &options)
}
