//! Placeholder: see the crate description; filled in by later issues.
pub mod vmath;
