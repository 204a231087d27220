//! `+ - * /` and unary `-` on tensors, by reference or by value, and with `f32`/`f64` scalars on
//! either side (the scalar takes the tensor's dtype). All `#[track_caller]`, so errors point at the
//! user's expression.

use crate::numpy::{bin, weak_scalar};
use crate::{Tensor, lax};
use kiln_ir::{BinaryOp, UnaryOp};
use std::ops::{Add, Div, Mul, Neg, Sub};

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
        tensor_binop!(@scalar $trait, $method, $op, f32);
        tensor_binop!(@scalar $trait, $method, $op, f64);
    };
    (@scalar $trait:ident, $method:ident, $op:expr, $s:ty) => {
        impl $trait<$s> for &Tensor {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: $s) -> Tensor {
                bin($op, self, &weak_scalar(rhs as f64, self))
            }
        }
        impl $trait<$s> for Tensor {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: $s) -> Tensor {
                bin($op, &self, &weak_scalar(rhs as f64, &self))
            }
        }
        impl $trait<&Tensor> for $s {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: &Tensor) -> Tensor {
                bin($op, &weak_scalar(self as f64, rhs), rhs)
            }
        }
        impl $trait<Tensor> for $s {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: Tensor) -> Tensor {
                bin($op, &weak_scalar(self as f64, &rhs), &rhs)
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
