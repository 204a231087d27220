//! The text form of a [`crate::Function`]: a printer (`Display`) and a parser that round-trip.

mod parse;
mod print;

pub use parse::{ParseError, parse};
