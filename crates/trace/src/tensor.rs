//! The one `Tensor` type of eager and traced code.

use crate::context::{self, TraceId};
use kiln_ir::{Array, DType, Element, Shape, TensorType, Var};
use ndarray::{ArrayD, IxDyn};
use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

/// An array value: concrete (a host array, computed eagerly) or a tracer (a variable of the function
/// being traced). Cloning is cheap (a reference count or a small handle).
///
/// Operators `+ - * /` and unary `-` work between tensors and with scalars on either side (a scalar
/// takes the tensor's dtype, JAX's weak typing; one the dtype cannot hold exactly is an error); shapes
/// broadcast as in numpy. `/` on integer tensors truncates toward zero like Rust's (`lax.div`), and
/// refuses float scalars. Methods are named as in `jax.numpy`. Tensors are not `Send`: a tracer
/// belongs to a trace on one thread.
///
/// ```
/// use kiln_trace::Tensor;
/// let x = Tensor::from_vec(&[3], vec![1.0f32, 2.0, 3.0]);
/// let y = &x * 2.0 + 1.0;
/// assert_eq!(y.to_vec::<f32>(), vec![3.0, 5.0, 7.0]);
/// ```
#[derive(Clone)]
pub struct Tensor {
    repr: Repr,
    _not_send: PhantomData<*const ()>,
}

#[derive(Clone)]
pub(crate) enum Repr {
    Concrete(Arc<Array>),
    Traced { trace: TraceId, var: Var, ty: TensorType },
    Placeholder(TensorType),
}

impl Tensor {
    pub(crate) fn repr(&self) -> &Repr {
        &self.repr
    }

    pub(crate) fn traced(trace: TraceId, var: Var, ty: TensorType) -> Tensor {
        Tensor { repr: Repr::Traced { trace, var, ty }, _not_send: PhantomData }
    }

    /// A concrete tensor holding `a`.
    pub fn from_array(a: Array) -> Tensor {
        Tensor { repr: Repr::Concrete(Arc::new(a)), _not_send: PhantomData }
    }

    /// A concrete tensor sharing `a`.
    pub fn from_shared(a: Arc<Array>) -> Tensor {
        Tensor { repr: Repr::Concrete(a), _not_send: PhantomData }
    }

    /// A tensor that stands for a type only (JAX's `ShapeDtypeStruct`): pass it to `trace` to say
    /// what a parameter looks like. Using it in an op panics.
    pub fn placeholder(dtype: DType, shape: &[usize]) -> Tensor {
        Tensor { repr: Repr::Placeholder(TensorType::new(dtype, shape)), _not_send: PhantomData }
    }

    /// A concrete tensor from row-major data.
    ///
    /// # Panics
    /// If `data.len()` is not the product of `shape`.
    #[track_caller]
    pub fn from_vec<T: Element>(shape: &[usize], data: Vec<T>) -> Tensor {
        if let Some(e) = too_large("from_vec", T::DTYPE, shape) {
            return e;
        }
        Tensor::from_array(Array::from_vec(shape, data))
    }

    /// A concrete rank-0 tensor.
    pub fn scalar<T: Element>(x: T) -> Tensor {
        Tensor::from_array(Array::scalar(x))
    }

    /// A concrete tensor of `shape` filled with `value`.
    #[track_caller]
    pub fn full<T: Element>(shape: &[usize], value: T) -> Tensor {
        if let Some(e) = unallocatable("full", T::DTYPE, shape) {
            return e;
        }
        Tensor::from_array(T::wrap(ArrayD::from_elem(IxDyn(shape), value)))
    }

    /// Zeros (false) of the given dtype and shape.
    #[track_caller]
    pub fn zeros(dtype: DType, shape: &[usize]) -> Tensor {
        if let Some(e) = unallocatable("zeros", dtype, shape) {
            return e;
        }
        Tensor::from_array(Array::zeros(&TensorType::new(dtype, shape)))
    }

    /// Ones (true) of the given dtype and shape.
    #[track_caller]
    pub fn ones(dtype: DType, shape: &[usize]) -> Tensor {
        match dtype {
            DType::F32 => Tensor::full(shape, 1.0f32),
            DType::F64 => Tensor::full(shape, 1.0f64),
            DType::I32 => Tensor::full(shape, 1i32),
            DType::U32 => Tensor::full(shape, 1u32),
            DType::Bool => Tensor::full(shape, true),
        }
    }

    /// A rank-0 tensor of `dtype` holding `x` converted (as `convert_element_type` would).
    pub fn scalar_like(x: f64, dtype: DType) -> Tensor {
        match dtype {
            DType::F32 => Tensor::scalar(x as f32),
            DType::F64 => Tensor::scalar(x),
            DType::I32 => Tensor::scalar(x as i32),
            DType::U32 => Tensor::scalar(x as u32),
            DType::Bool => Tensor::scalar(x != 0.0),
        }
    }

    /// Dtype and shape.
    pub fn ty(&self) -> TensorType {
        match &self.repr {
            Repr::Concrete(a) => a.ty(),
            Repr::Traced { ty, .. } | Repr::Placeholder(ty) => ty.clone(),
        }
    }

    /// The dtype.
    pub fn dtype(&self) -> DType {
        match &self.repr {
            Repr::Concrete(a) => a.dtype(),
            Repr::Traced { ty, .. } | Repr::Placeholder(ty) => ty.dtype,
        }
    }

    /// The shape.
    pub fn shape(&self) -> Shape {
        match &self.repr {
            Repr::Concrete(a) => a.shape(),
            Repr::Traced { ty, .. } | Repr::Placeholder(ty) => ty.shape.clone(),
        }
    }

    /// The number of dimensions.
    pub fn ndim(&self) -> usize {
        self.shape().rank()
    }

    /// The number of elements.
    pub fn size(&self) -> usize {
        self.shape().size()
    }

    /// True for a tracer (a value of a function being traced).
    pub fn is_tracer(&self) -> bool {
        matches!(self.repr, Repr::Traced { .. })
    }

    /// The host array of a concrete tensor, or `None` for a tracer or placeholder.
    pub fn to_array(&self) -> Option<Array> {
        match &self.repr {
            Repr::Concrete(a) => Some((**a).clone()),
            Repr::Traced { .. } | Repr::Placeholder(_) => None,
        }
    }

    /// The shared host array of a concrete tensor (no copy), or `None` for a tracer or placeholder.
    pub fn shared(&self) -> Option<&Arc<Array>> {
        match &self.repr {
            Repr::Concrete(a) => Some(a),
            Repr::Traced { .. } | Repr::Placeholder(_) => None,
        }
    }

    /// The elements of a concrete tensor in row-major order.
    ///
    /// # Panics
    /// If the tensor is a tracer or its dtype is not `T`'s.
    #[track_caller]
    pub fn to_vec<T: Element>(&self) -> Vec<T> {
        let a = self.concrete_or_panic();
        match a.to_vec::<T>() {
            Some(v) => v,
            None => panic!("kiln: to_vec::<{}> of a {} tensor (use astype first)", T::DTYPE, a.dtype()),
        }
    }

    /// The value of a concrete rank-0 (or one-element) tensor.
    ///
    /// # Panics
    /// If the tensor is a tracer, has more than one element, or its dtype is not `T`'s.
    #[track_caller]
    pub fn item<T: Element>(&self) -> T {
        let v = self.to_vec::<T>();
        assert!(v.len() == 1, "kiln: item() of a tensor with {} elements (shape {})", v.len(), self.shape());
        v[0]
    }

    #[track_caller]
    pub(crate) fn concrete_or_panic(&self) -> Arc<Array> {
        match &self.repr {
            Repr::Concrete(a) => a.clone(),
            Repr::Traced { trace, ty, .. } => {
                if context::is_active(*trace) {
                    panic!(
                        "kiln: the value of a tracer ({ty}) is not known while tracing; use select/cond/while_loop \
                         instead of reading it"
                    )
                }
                panic!("kiln: a tracer of type {ty} escaped the trace that made it and was used outside it")
            }
            Repr::Placeholder(ty) => panic!("kiln: a placeholder tensor of type {ty} has no value"),
        }
    }
}

impl fmt::Debug for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.repr {
            Repr::Concrete(a) => write!(f, "Tensor({a:?})"),
            Repr::Traced { trace, var, ty } => write!(f, "Tracer({ty}, trace {trace}, {var:?})"),
            Repr::Placeholder(ty) => write!(f, "Placeholder({ty})"),
        }
    }
}

impl<T: Element> From<ArrayD<T>> for Tensor {
    fn from(a: ArrayD<T>) -> Tensor {
        Tensor::from_array(T::wrap(a))
    }
}

impl From<Array> for Tensor {
    fn from(a: Array) -> Tensor {
        Tensor::from_array(a)
    }
}

impl From<f32> for Tensor {
    fn from(x: f32) -> Tensor {
        Tensor::scalar(x)
    }
}

impl From<f64> for Tensor {
    fn from(x: f64) -> Tensor {
        Tensor::scalar(x)
    }
}

/// The error of constructor `op` (naming the type and the caller's line) when an array of `dtype`
/// and `shape` cannot exist ([`TensorType::addressable`]), else `None`.
#[track_caller]
pub(crate) fn too_large(op: &str, dtype: DType, shape: &[usize]) -> Option<Tensor> {
    let Err(m) = TensorType::new(dtype, shape).check_addressable() else { return None };
    // Not in a closure: `#[track_caller]` must see the user's call site.
    Some(crate::methods::fail1(op, &[], format!("the result {m}")))
}

/// [`too_large`] for constructors that allocate their result: also the error when it cannot be
/// allocated ([`TensorType::check_allocatable`]) rather than the process aborting.
#[track_caller]
pub(crate) fn unallocatable(op: &str, dtype: DType, shape: &[usize]) -> Option<Tensor> {
    let ty = TensorType::new(dtype, shape);
    let Err(m) = ty.check_addressable().and_then(|()| ty.check_allocatable()) else { return None };
    Some(crate::methods::fail1(op, &[], format!("the result {m}")))
}
