//! The verifier.

use crate::Function;
use std::fmt;

/// One broken invariant, with its location.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifyError {
    /// Where: e.g. `eqn 3` or `eqn 5 (scan) > body > eqn 0`.
    pub location: String,
    /// What is wrong.
    pub message: String,
}

/// Every error the verifier found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifyErrors(pub Vec<VerifyError>);

impl fmt::Display for VerifyErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for e in &self.0 {
            writeln!(f, "{}: {}", e.location, e.message)?;
        }
        write!(f, "{} verifier errors detected", self.0.len())
    }
}

impl std::error::Error for VerifyErrors {}

/// Checks a function's invariants and returns every violation.
///
/// # Errors
/// All the [`VerifyError`]s found.
pub fn verify(f: &Function) -> Result<(), VerifyErrors> {
    let _ = f;
    todo!("verifier")
}
