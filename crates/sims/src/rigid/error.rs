//! Errors of the MJCF loader: every one names the file, the line and the element.

use thiserror::Error;

/// An MJCF file that kiln cannot load. `line` is 1-based (0 when the file could not be read);
/// `element` is the XML tag the problem is on (empty when the file could not be read or parsed).
///
/// Displays as `file:line: <element>: what went wrong`.
#[derive(Debug, Error)]
#[error("{file}:{line}: <{element}>: {kind}")]
pub struct MjcfError {
    /// The path given to [`super::System::from_mjcf_file`], or the name given to
    /// [`super::System::from_mjcf_str`].
    pub file: String,
    /// 1-based line of the element's start tag.
    pub line: u32,
    /// The element's tag name.
    pub element: String,
    /// What is wrong.
    pub kind: MjcfErrorKind,
}

/// What is wrong with an MJCF element.
#[derive(Debug, Error)]
pub enum MjcfErrorKind {
    /// The file could not be read.
    #[error("cannot read the file: {0}")]
    Io(#[from] std::io::Error),
    /// The text is not well-formed XML.
    #[error("not well-formed XML: {0}")]
    Xml(String),
    /// An element kiln does not support and does not ignore (see `rigid`'s module docs).
    #[error("unsupported element <{0}> (kiln's rigid loader supports Brax's MJCF subset)")]
    UnknownElement(String),
    /// An attribute kiln does not support on this element.
    #[error("unsupported attribute `{0}`")]
    UnknownAttribute(String),
    /// A required attribute is absent.
    #[error("missing attribute `{0}`")]
    MissingAttribute(String),
    /// An attribute's value is not the expected number or list of numbers.
    #[error("attribute `{attribute}`: cannot read {value:?} as {expected}")]
    BadNumber {
        /// The attribute name.
        attribute: String,
        /// The text found.
        value: String,
        /// What was expected, e.g. "3 numbers".
        expected: String,
    },
    /// An attribute value outside the accepted set (e.g. `type="ellipsoid"`).
    #[error("attribute `{attribute}`: unsupported value {value:?} (accepted: {accepted})")]
    BadValue {
        /// The attribute name.
        attribute: String,
        /// The text found.
        value: String,
        /// The accepted values.
        accepted: String,
    },
    /// A value MuJoCo's compiler rejects (a non-positive geom size, a negative mass, an empty
    /// limit range, a repeated name, ...): the message quotes MuJoCo's rule.
    #[error("invalid: {0}")]
    Invalid(String),
    /// A feature Brax rejects (ball joints, joint `ref`, ...) or that kiln does not model.
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// A name that refers to nothing (a joint, a default class).
    #[error("unknown {what} {name:?}")]
    UnknownName {
        /// What kind of name ("joint", "default class").
        what: String,
        /// The name.
        name: String,
    },
}
