//! Element types.

use std::fmt;

/// The element type of an array. JAX's names: `f32 f64 i32 u32 bool`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DType {
    /// IEEE-754 binary32.
    F32,
    /// IEEE-754 binary64.
    F64,
    /// Two's-complement 32-bit signed integer (wrapping arithmetic, as XLA).
    I32,
    /// 32-bit unsigned integer (wrapping arithmetic); the dtype of random bits.
    U32,
    /// Boolean; the result of comparisons.
    Bool,
}

impl DType {
    /// Every dtype, in a fixed order (handy for tables and tests).
    pub const ALL: [DType; 5] = [DType::F32, DType::F64, DType::I32, DType::U32, DType::Bool];

    /// The name used in the text form and in error messages (`f32`, `bool`, ...).
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F64 => "f64",
            DType::I32 => "i32",
            DType::U32 => "u32",
            DType::Bool => "bool",
        }
    }

    /// Parses a name printed by [`DType::name`].
    pub fn from_name(name: &str) -> Option<DType> {
        DType::ALL.into_iter().find(|d| d.name() == name)
    }

    /// `f32` or `f64`: the dtypes that carry tangents.
    pub fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F64)
    }

    /// `i32` or `u32`.
    pub fn is_int(self) -> bool {
        matches!(self, DType::I32 | DType::U32)
    }

    /// Size of one element in bytes (`bool` is stored as one byte).
    pub fn size_bytes(self) -> usize {
        match self {
            DType::F32 | DType::I32 | DType::U32 => 4,
            DType::F64 => 8,
            DType::Bool => 1,
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
