//! The user-facing error of tracing.

use kiln_ir::{SrcLoc, TensorType, VerifyErrors};
use std::fmt;

/// An error from tracing or calling a kiln function. `Send + Sync`.
///
/// Operators never return `Result`: inside a trace the first bad op is recorded as
/// [`Error::Op`] with the user's call site, and the entry point (`trace`, later `jit`/`grad`)
/// returns it.
#[derive(Clone, Debug, PartialEq)]
pub enum Error {
    /// A primitive or composite was applied to operands it does not accept.
    Op {
        /// The op's name (`add`, `matmul`, `broadcast_to`, ...).
        op: String,
        /// The operand types as the user passed them (before any internal broadcasting).
        operands: Vec<TensorType>,
        /// What is wrong, lowercase.
        message: String,
        /// The user's call site.
        at: Option<SrcLoc>,
    },
    /// A value of the wrong kind was passed to an entry point (count, shape, dtype, structure).
    Input {
        /// What is wrong.
        message: String,
    },
    /// The traced function failed the IR verifier: a bug in kiln, please report it.
    Verify(VerifyErrors),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Op { op, operands, message, at } => {
                write!(f, "{op}: {message}")?;
                if !operands.is_empty() {
                    let tys: Vec<String> = operands.iter().map(|t| t.to_string()).collect();
                    write!(f, " (operands: {})", tys.join(", "))?;
                }
                if let Some(at) = at {
                    write!(f, " at {at}")?;
                }
                Ok(())
            }
            Error::Input { message } => write!(f, "bad input: {message}"),
            Error::Verify(e) => write!(f, "kiln produced invalid IR (a kiln bug): {e}"),
        }
    }
}

impl std::error::Error for Error {}

/// `Result` with kiln's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
