//! Static shapes and array types.

use crate::DType;
use smallvec::SmallVec;
use std::fmt;

/// A static shape: one size per dimension, rank 0 for scalars.
///
/// `Display` prints it as Python prints a shape tuple — `()`, `(3,)`, `(2, 4)` — because error messages
/// quote shapes the way a JAX user knows them.
#[derive(Clone, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub struct Shape(pub SmallVec<[usize; 4]>);

impl Shape {
    /// The shape of a scalar.
    pub fn scalar() -> Shape {
        Shape(SmallVec::new())
    }

    /// A shape from its dimension sizes.
    pub fn new(dims: &[usize]) -> Shape {
        Shape(SmallVec::from_slice(dims))
    }

    /// The number of dimensions.
    pub fn rank(&self) -> usize {
        self.0.len()
    }

    /// The dimension sizes.
    pub fn dims(&self) -> &[usize] {
        &self.0
    }

    /// The number of elements (1 for a scalar).
    pub fn size(&self) -> usize {
        self.0.iter().product()
    }
}

impl From<&[usize]> for Shape {
    fn from(d: &[usize]) -> Shape {
        Shape::new(d)
    }
}

impl<const N: usize> From<[usize; N]> for Shape {
    fn from(d: [usize; N]) -> Shape {
        Shape::new(&d)
    }
}

impl From<Vec<usize>> for Shape {
    fn from(d: Vec<usize>) -> Shape {
        Shape(SmallVec::from_vec(d))
    }
}

impl std::ops::Index<usize> for Shape {
    type Output = usize;
    fn index(&self, i: usize) -> &usize {
        &self.0[i]
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0.as_slice() {
            [] => f.write_str("()"),
            [d] => write!(f, "({d},)"),
            dims => {
                f.write_str("(")?;
                for (i, d) in dims.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{d}")?;
                }
                f.write_str(")")
            }
        }
    }
}

impl fmt::Debug for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// The type of an IR value: dtype and static shape (JAX's "aval"). Prints as `f32[3,4]`, `i32[]`.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TensorType {
    /// Element type.
    pub dtype: DType,
    /// Static shape.
    pub shape: Shape,
}

impl TensorType {
    /// A type from a dtype and a shape.
    pub fn new(dtype: DType, shape: impl Into<Shape>) -> TensorType {
        TensorType { dtype, shape: shape.into() }
    }

    /// Whether an array of this type can exist: its size in bytes (the product of its non-zero
    /// sizes, as ndarray counts) fits `isize`. Every shape rule checks its results with this, and
    /// `verify` a function's parameters (constants are arrays, so they exist), so the backend's size
    /// arithmetic never wraps.
    pub fn addressable(&self) -> bool {
        self.shape
            .dims()
            .iter()
            .filter(|&&d| d != 0)
            .try_fold(self.dtype.size_bytes(), |n, &d| n.checked_mul(d))
            .is_some_and(|bytes| bytes <= isize::MAX as usize)
    }

    /// [`TensorType::addressable`] as a check whose error names the type (the one message the
    /// shape rules, `verify` and the tracer's constructors give).
    pub fn check_addressable(&self) -> Result<(), String> {
        if self.addressable() {
            return Ok(());
        }
        Err(format!("{self} has too many elements: its size in bytes does not fit isize"))
    }

    /// A rank-0 type.
    pub fn scalar(dtype: DType) -> TensorType {
        TensorType { dtype, shape: Shape::scalar() }
    }

    /// The number of dimensions.
    pub fn rank(&self) -> usize {
        self.shape.rank()
    }
}

impl fmt::Display for TensorType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}[", self.dtype)?;
        for (i, d) in self.shape.dims().iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{d}")?;
        }
        f.write_str("]")
    }
}

impl fmt::Debug for TensorType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}
