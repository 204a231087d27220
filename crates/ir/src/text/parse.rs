//! Parsing the text form.

use crate::Function;

/// A syntax or type error in IR text, with its 1-based line and column.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{line}:{column}: {message}")]
pub struct ParseError {
    /// 1-based line.
    pub line: usize,
    /// 1-based column.
    pub column: usize,
    /// What is wrong.
    pub message: String,
}

/// Parses the text printed by `Function`'s `Display`.
///
/// # Errors
/// A [`ParseError`] with the line and column of the first problem.
pub fn parse(src: &str) -> Result<Function, ParseError> {
    let _ = src;
    todo!("parser")
}
