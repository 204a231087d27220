//! The text form of a [`crate::Function`]: a printer (`Display`) and a parser that round-trip.
//!
//! The form follows JAX's jaxpr printing. An example (a 64-point diffusion step with a loop):
//!
//! ```text
//! { lambda a:f32[64] b:f32[] ; c:f32[] = 0.1, d:f32[3] = [1.0, 2.0, -0.0], e:f32[4096] = @e . let
//!     f:f32[64] = mul a c
//!     g:f32[64] = broadcast_in_dim[shape=(64,) broadcast_dimensions=()] b  @"src/main.rs":12:9
//!     h:f32[] i:f32[5,64] = scan[length=5 reverse=false num_consts=0 num_carry=1 body={ lambda j:f32[] . let
//!         k:f32[] = neg j
//!       in (k, k) }] b
//!   in (f, g) }
//! ```
//!
//! # Grammar
//!
//! Whitespace (including newlines) only separates tokens; `#` starts a comment that runs to the end
//! of the line.
//!
//! ```text
//! function  := "{" "lambda" param* [";" const ("," const)* [","]] "." "let" eqn* "in" outputs "}"
//! param     := NAME ":" type
//! const     := NAME ":" type "=" value
//! value     := scalar                      # rank-0 constants
//!            | "[" [scalar ("," scalar)* [","]] "]"   # all elements, flat, row-major
//!            | "@" IDENT                   # stored out of line (see below)
//! scalar    := ["-"] NUMBER | ["-"] "inf" | ["-"] "nan" | "true" | "false"
//!            | "f32bits" "(" HEX ")" | "f64bits" "(" HEX ")"
//! type      := DTYPE "[" [INT ("," INT)*] "]"      # f32[64], f32[], i32[2,3]; DTYPE: f32 f64 i32 u32 bool
//! eqn       := (binder+ | "(" ")") "=" PRIM ["[" (key "=" pvalue [","])* "]"] NAME* [loc]
//! binder    := NAME ":" type
//! loc       := "@" STRING ":" INT ":" INT              # @"src/main.rs":12:9
//! outputs   := "(" [NAME ("," NAME)* [","]] ")"     # (), (a,), (a, b)
//! pvalue    := INT | "-" INT | IDENT | "(" [pvalue ("," pvalue)* [","]] ")"
//!            | "[" [pvalue ("," pvalue)* [","]] "]" | function
//! ```
//!
//! - `NAME` is an identifier (`[A-Za-z_][A-Za-z0-9_]*`) other than the keywords `lambda`, `let`, `in`.
//!   The printer names variables `a`..`z`, `ba`, `bb`, ... (JAX's scheme, skipping the keywords) in
//!   definition order — parameters, then constants, then equation outputs — afresh in every
//!   sub-function. A variable's type is written where it is defined; uses are bare names.
//! - Order: parameters first, then constants after `;` (the `;` is printed only when there are
//!   constants), then equations. An equation with no results is written `() = prim ...`.
//! - `PRIM` is the name given by [`crate::Prim::name`] (`mul`, `reduce_sum`, `argmax`, `cumsum`,
//!   `scatter_add`, ...). Parameters are written `prim[key=value ...]` (omitted when there are none),
//!   keyed by the field names of the [`crate::Prim`] variant, in declaration order with
//!   sub-functions last (the parser accepts any order). Values: integers `5`, lists and shapes as
//!   Python tuples `()`, `(64,)`, `(0, 2)` (`pad`'s `low`/`high` may be negative), dtypes `f32`,
//!   booleans `true`/`false`, options `none` or the value, index modes `clip`/`fill`, sub-functions
//!   as nested `{ lambda ... }`, and `cond`'s `branches` as a list `[{ ... }, { ... }]`.
//! - Floats are printed with Rust's shortest round-trip formatting, so every bit survives: `0.1`,
//!   `-0.0`, `1e-7`, `inf`, `-inf`, `nan` (the default quiet NaN); a NaN with another payload or sign is
//!   printed by its bits, `f32bits(0x7fc00001)` / `f64bits(0x...)`. Integers in decimal, booleans
//!   `true`/`false`.
//! - Constants with more than 16 elements are printed as `@name` and returned out
//!   of line by [`crate::Function::to_text_with_consts`]; parse such text with
//!   [`crate::Function::parse_with_consts`]. Plain [`parse`] rejects an `@name` it cannot resolve.
//!   The alternate form `format!("{f:#}")` prints every constant inline.
//! - Locations ([`crate::Eqn::loc`]) are printed after the operands as `@"file":line:col`; the file is
//!   quoted with Rust's escapes (`\"`, `\\`, `\n`, `\u{..}`).
//!
//! # Round trip
//!
//! The parser gives variables fresh ids in definition order, so
//! `parse(&f.to_string()) == Ok(f.canonicalize())` for every function whose constants are printed
//! inline ([`crate::Function::canonicalize`]), and `== Ok(f)` when `f` is already canonical.
//!
//! # Leniency
//!
//! The parser does not enforce SSA or shape rules, so that [`crate::verify`] can report those: names
//! are resolved over the whole function (a use before its definition is accepted; a name defined twice
//! denotes one variable, with the first type). A name defined nowhere, an unknown primitive or
//! parameter, a malformed number and every syntax error is a [`ParseError`] with the 1-based line and
//! column of the offending token.

mod parse;
mod print;

pub use parse::{ParseError, parse};

/// Constants with at most this many elements are printed inline; larger ones as `@name`.
pub(crate) const INLINE_CONST_LIMIT: usize = 16;

/// Words that cannot name variables (they delimit a function).
const KEYWORDS: [&str; 3] = ["lambda", "let", "in"];

fn is_keyword(s: &str) -> bool {
    KEYWORDS.contains(&s)
}
