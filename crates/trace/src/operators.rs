//! `+ - * /` and unary `-` on tensors, by reference or by value, and with scalars: `f32`, `f64`,
//! `i32` or `u32` on the right, `f64` on the left (the scalar takes the tensor's dtype). All
//! `#[track_caller]`, so errors point at the user's expression.
//!
//! `/` on integer tensors is `lax.div`: it truncates toward zero, as Rust's `/` on integers does
//! (`jnp`'s `/` would return floats). A float scalar on either side of `/` with an integer or bool
//! tensor (`&ints / 2.0`, `1.0 / &ints`) is an error rather than a truncating division: the literal
//! asks for a fraction that the integer result cannot hold.

use crate::numpy::{bin, weak_scalar};
use crate::{Tensor, lax};
use kiln_ir::{BinaryOp, UnaryOp};
use std::ops::{Add, Div, Mul, Neg, Sub};

/// A Rust scalar usable as an operand next to a tensor; it takes the tensor's dtype (JAX's weak typing
/// of Python scalars).
pub trait Scalar: Copy {
    /// Whether the Rust type is a float (`/` with an integer tensor refuses float scalars).
    const IS_FLOAT: bool;
    /// The value as `f64` (exact for `f32`).
    fn to_f64(self) -> f64;
}

impl Scalar for f32 {
    const IS_FLOAT: bool = true;
    fn to_f64(self) -> f64 {
        self as f64
    }
}

impl Scalar for f64 {
    const IS_FLOAT: bool = true;
    fn to_f64(self) -> f64 {
        self
    }
}

impl Scalar for i32 {
    const IS_FLOAT: bool = false;
    fn to_f64(self) -> f64 {
        f64::from(self)
    }
}

impl Scalar for u32 {
    const IS_FLOAT: bool = false;
    fn to_f64(self) -> f64 {
        f64::from(self)
    }
}

macro_rules! tensor_binop {
    ($trait:ident, $method:ident, $op:expr) => {
        impl $trait<&Tensor> for &Tensor {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: &Tensor) -> Tensor {
                bin($op, self, rhs)
            }
        }
        impl $trait<Tensor> for &Tensor {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: Tensor) -> Tensor {
                bin($op, self, &rhs)
            }
        }
        impl $trait<&Tensor> for Tensor {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: &Tensor) -> Tensor {
                bin($op, &self, rhs)
            }
        }
        impl $trait<Tensor> for Tensor {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: Tensor) -> Tensor {
                bin($op, &self, &rhs)
            }
        }
        // One generic impl for scalars on the right, so that `&x * 2.0` type-checks with a bare literal
        // (its type falls back to f64; with an impl per scalar type the result type would be ambiguous).
        impl<S: Scalar> $trait<S> for &Tensor {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: S) -> Tensor {
                bin($op, self, &weak_scalar($op, rhs.to_f64(), S::IS_FLOAT, self))
            }
        }
        impl<S: Scalar> $trait<S> for Tensor {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: S) -> Tensor {
                bin($op, &self, &weak_scalar($op, rhs.to_f64(), S::IS_FLOAT, &self))
            }
        }
        // Scalars on the left: `f64` only. A second impl for `f32` would make a bare literal
        // (`2.0 * &x`) ambiguous, since a tensor's dtype is not part of its Rust type; write
        // `&x * s` for an `f32` value `s`.
        tensor_binop!(@scalar $trait, $method, $op, f64);
    };
    (@scalar $trait:ident, $method:ident, $op:expr, $s:ty) => {
        impl $trait<&Tensor> for $s {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: &Tensor) -> Tensor {
                bin($op, &weak_scalar($op, self, true, rhs), rhs)
            }
        }
        impl $trait<Tensor> for $s {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: Tensor) -> Tensor {
                bin($op, &weak_scalar($op, self, true, &rhs), &rhs)
            }
        }
    };
}

tensor_binop!(Add, add, BinaryOp::Add);
tensor_binop!(Sub, sub, BinaryOp::Sub);
tensor_binop!(Mul, mul, BinaryOp::Mul);
tensor_binop!(Div, div, BinaryOp::Div);

impl Neg for &Tensor {
    type Output = Tensor;
    #[track_caller]
    fn neg(self) -> Tensor {
        lax::unary(UnaryOp::Neg, self)
    }
}

impl Neg for Tensor {
    type Output = Tensor;
    #[track_caller]
    fn neg(self) -> Tensor {
        lax::unary(UnaryOp::Neg, &self)
    }
}
