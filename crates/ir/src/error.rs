//! Errors of the IR crate.

use crate::TensorType;
use std::fmt;

/// A primitive applied to operands it does not accept: the shape/dtype rule's error. Names the
/// primitive and the operand types.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TypeError {
    /// The primitive's name (`add`, `dot_general`, ...).
    pub prim: &'static str,
    /// The operand types as given to the rule.
    pub operands: Vec<TensorType>,
    /// What is wrong, lowercase, e.g. `shapes (3,) and (4,) differ`.
    pub message: String,
}

impl TypeError {
    /// A new error for `prim` on `operands`.
    pub fn new(prim: &'static str, operands: &[TensorType], message: impl Into<String>) -> TypeError {
        TypeError { prim, operands: operands.to_vec(), message: message.into() }
    }
}

impl fmt::Display for TypeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.prim, self.message)?;
        if !self.operands.is_empty() {
            f.write_str(" (operands: ")?;
            for (i, t) in self.operands.iter().enumerate() {
                if i > 0 {
                    f.write_str(", ")?;
                }
                write!(f, "{t}")?;
            }
            f.write_str(")")?;
        }
        Ok(())
    }
}

impl std::error::Error for TypeError {}

/// An error while interpreting a function.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum EvalError {
    /// An operand did not fit the primitive.
    #[error(transparent)]
    Type(#[from] TypeError),
    /// The function was called with the wrong arguments.
    #[error("function expects {expected} arguments of types [{}], got [{}]", fmt_types(.expected_types), fmt_types(.got))]
    Arguments {
        /// Number of parameters.
        expected: usize,
        /// Parameter types.
        expected_types: Vec<TensorType>,
        /// Argument types given.
        got: Vec<TensorType>,
    },
    /// A result too large to allocate ([`TensorType::check_allocatable`]), refused before any
    /// allocation is tried, so the process does not abort.
    #[error("{prim}: the result {message}")]
    OutOfMemory {
        /// The primitive's name.
        prim: &'static str,
        /// The result type and its size (the allocation check's message).
        message: String,
    },
}

fn fmt_types(ts: &[TensorType]) -> String {
    ts.iter().map(|t| t.to_string()).collect::<Vec<_>>().join(", ")
}
