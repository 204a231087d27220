//! Errors of compilation.

/// Why a [`crate::Function`](kiln_ir::Function) could not be compiled.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CompileError {
    /// The backend has no lowering (yet) for this primitive, or for this primitive on these dtypes.
    /// Never a wrong number: the caller gets this error instead.
    #[error("the CPU backend cannot lower `{prim}` yet{}", if detail.is_empty() { String::new() } else { format!(" ({detail})") })]
    Unsupported {
        /// The primitive's name.
        prim: &'static str,
        /// What exactly is missing (dtype, parameter), possibly empty.
        detail: String,
    },
    /// Cranelift rejected the generated code (a backend bug).
    #[error("cranelift: {0}")]
    Codegen(String),
    /// The function breaks the IR's invariants ([`kiln_ir::verify`]): a variable declared with
    /// another type than its equation gives, used before it is defined, ... — a bug in whatever
    /// built it. Compiling it anyway could compute wrong numbers.
    #[error("the function is not valid IR:\n{0}")]
    Invalid(kiln_ir::VerifyErrors),
    /// The compiled function would need more memory than this process can allocate: its
    /// intermediates, or one of its results (asked of the allocator once, at compile time, rather
    /// than aborting the process at the first call; see `kiln_ir::TensorType::check_allocatable`
    /// for what the allocator's answer is worth).
    #[error("{0}")]
    OutOfMemory(String),
}

impl CompileError {
    pub(crate) fn unsupported(prim: &'static str, detail: impl Into<String>) -> CompileError {
        CompileError::Unsupported { prim, detail: detail.into() }
    }
}
