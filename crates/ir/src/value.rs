//! Host arrays: the values the interpreter computes with and the constants a [`crate::Function`] holds.

use crate::{DType, Shape, TensorType};
use ndarray::{ArrayD, IxDyn};
use std::fmt;

/// A dense host array of one of kiln's dtypes, on `ndarray` (row-major, any rank).
#[derive(Clone)]
pub enum Array {
    /// `f32` data.
    F32(ArrayD<f32>),
    /// `f64` data.
    F64(ArrayD<f64>),
    /// `i32` data.
    I32(ArrayD<i32>),
    /// `u32` data.
    U32(ArrayD<u32>),
    /// `bool` data.
    Bool(ArrayD<bool>),
}

/// Applies `$body` to the inner `ndarray` of an [`Array`] whatever its dtype, binding it to `$a`.
#[macro_export]
macro_rules! with_array {
    ($arr:expr, $a:ident => $body:expr) => {
        match $arr {
            $crate::Array::F32($a) => $body,
            $crate::Array::F64($a) => $body,
            $crate::Array::I32($a) => $body,
            $crate::Array::U32($a) => $body,
            $crate::Array::Bool($a) => $body,
        }
    };
}

/// Element types that an [`Array`] can hold, with conversions in and out.
pub trait Element: Copy + Default + PartialEq + fmt::Debug + Send + Sync + 'static {
    /// The dtype of this element type.
    const DTYPE: DType;
    /// Wraps an `ndarray` of this element type.
    fn wrap(a: ArrayD<Self>) -> Array;
    /// Borrows the data if the array has this dtype.
    fn view(a: &Array) -> Option<&ArrayD<Self>>;
}

macro_rules! element {
    ($t:ty, $variant:ident) => {
        impl Element for $t {
            const DTYPE: DType = DType::$variant;
            fn wrap(a: ArrayD<Self>) -> Array {
                Array::$variant(a)
            }
            fn view(a: &Array) -> Option<&ArrayD<Self>> {
                match a {
                    Array::$variant(x) => Some(x),
                    _ => None,
                }
            }
        }
        impl From<ArrayD<$t>> for Array {
            fn from(a: ArrayD<$t>) -> Array {
                Array::$variant(a)
            }
        }
    };
}
element!(f32, F32);
element!(f64, F64);
element!(i32, I32);
element!(u32, U32);
element!(bool, Bool);

impl Array {
    /// The dtype.
    pub fn dtype(&self) -> DType {
        match self {
            Array::F32(_) => DType::F32,
            Array::F64(_) => DType::F64,
            Array::I32(_) => DType::I32,
            Array::U32(_) => DType::U32,
            Array::Bool(_) => DType::Bool,
        }
    }

    /// The shape.
    pub fn shape(&self) -> Shape {
        with_array!(self, a => Shape::new(a.shape()))
    }

    /// Dtype and shape.
    pub fn ty(&self) -> TensorType {
        TensorType { dtype: self.dtype(), shape: self.shape() }
    }

    /// Builds an array from row-major data.
    ///
    /// # Panics
    /// If `data.len()` is not the product of `shape` (or that product overflows).
    #[track_caller]
    pub fn from_vec<T: Element>(shape: &[usize], data: Vec<T>) -> Array {
        let n = shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d));
        assert!(
            Some(data.len()) == n,
            "Array::from_vec: {} elements for shape {} ({})",
            data.len(),
            Shape::new(shape),
            n.map_or("more elements than a usize counts".into(), |n| format!("{n} elements")),
        );
        T::wrap(ArrayD::from_shape_vec(IxDyn(shape), data).expect("length checked above"))
    }

    /// A rank-0 array.
    pub fn scalar<T: Element>(x: T) -> Array {
        T::wrap(ArrayD::from_elem(IxDyn(&[]), x))
    }

    /// An array of zeros (false for bool) of the given type.
    pub fn zeros(ty: &TensorType) -> Array {
        let dims = IxDyn(ty.shape.dims());
        match ty.dtype {
            DType::F32 => Array::F32(ArrayD::zeros(dims)),
            DType::F64 => Array::F64(ArrayD::zeros(dims)),
            DType::I32 => Array::I32(ArrayD::zeros(dims)),
            DType::U32 => Array::U32(ArrayD::zeros(dims)),
            DType::Bool => Array::Bool(ArrayD::from_elem(dims, false)),
        }
    }

    /// Borrows the data as `ndarray` of `T`, or `None` if the dtype differs.
    pub fn as_array<T: Element>(&self) -> Option<&ArrayD<T>> {
        T::view(self)
    }

    /// The elements in row-major order, or `None` if the dtype differs.
    pub fn to_vec<T: Element>(&self) -> Option<Vec<T>> {
        T::view(self).map(|a| a.iter().copied().collect())
    }

    /// The elements converted to `f64` in row-major order (bool as 0/1) — for tests and printing.
    pub fn to_f64_vec(&self) -> Vec<f64> {
        match self {
            Array::F32(a) => a.iter().map(|&x| x as f64).collect(),
            Array::F64(a) => a.iter().copied().collect(),
            Array::I32(a) => a.iter().map(|&x| x as f64).collect(),
            Array::U32(a) => a.iter().map(|&x| x as f64).collect(),
            Array::Bool(a) => a.iter().map(|&x| if x { 1.0 } else { 0.0 }).collect(),
        }
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        with_array!(self, a => a.len())
    }

    /// True for arrays with no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bitwise equality: same dtype, shape and bit patterns (so NaN equals the same NaN and `-0.0`
    /// differs from `0.0`). This is the equality of constants in a [`crate::Function`].
    pub fn bitwise_eq(&self, other: &Array) -> bool {
        match (self, other) {
            (Array::F32(a), Array::F32(b)) => {
                a.shape() == b.shape() && a.iter().zip(b.iter()).all(|(x, y)| x.to_bits() == y.to_bits())
            }
            (Array::F64(a), Array::F64(b)) => {
                a.shape() == b.shape() && a.iter().zip(b.iter()).all(|(x, y)| x.to_bits() == y.to_bits())
            }
            (Array::I32(a), Array::I32(b)) => a == b,
            (Array::U32(a), Array::U32(b)) => a == b,
            (Array::Bool(a), Array::Bool(b)) => a == b,
            _ => false,
        }
    }
}

impl PartialEq for Array {
    /// Bitwise equality, see [`Array::bitwise_eq`].
    fn eq(&self, other: &Array) -> bool {
        self.bitwise_eq(other)
    }
}

impl fmt::Debug for Array {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ", self.ty())?;
        with_array!(self, a => write!(f, "{:?}", a.iter().collect::<Vec<_>>()))
    }
}
