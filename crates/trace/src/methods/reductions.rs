//! Reductions (`sum mean max min prod var`), arg-reductions, cumulative scans, `sort` and `argsort`.

use super::{All, Axes, check, fail1, keepdims_shape, resolve_axes, resolve_axis};
use crate::{Tensor, lax};
use kiln_ir::{ArgOp, CumulativeOp, DType, ReduceOp};

/// The user-facing name of a reduction.
fn reduce_name(op: ReduceOp) -> &'static str {
    match op {
        ReduceOp::Sum => "sum",
        ReduceOp::Max => "max",
        ReduceOp::Min => "min",
        ReduceOp::Prod => "prod",
    }
}

/// `op` over `axes`, keeping them as size-1 dims if `keepdims`. Sums and products of bools count in
/// i32 (as `jnp.sum`); max/min over an empty axis is an error (no identity, as numpy).
#[track_caller]
fn reduce_impl(op: ReduceOp, x: &Tensor, axes: &dyn Axes, keepdims: bool) -> Tensor {
    let name = reduce_name(op);
    let shape = x.shape();
    let axes = check!(resolve_axes(axes, &shape), name, &[x]);
    let input = match op {
        ReduceOp::Sum | ReduceOp::Prod => {
            if x.dtype() == DType::Bool {
                x.astype(DType::I32)
            } else {
                x.clone()
            }
        }
        ReduceOp::Max | ReduceOp::Min => {
            if let Some(&a) = axes.iter().find(|&&a| shape[a] == 0) {
                let msg = format!(
                    "zero-size array to reduction operation {name} which has no identity (axis {a} of shape {shape})"
                );
                return fail1(name, &[x], msg);
            }
            x.clone()
        }
    };
    let r = lax::reduce(op, &input, &axes);
    if keepdims { lax::reshape(&r, &keepdims_shape(&shape, &axes)) } else { r }
}

/// `x` as a float for `mean`/`var`: ints and bools become f32 (`jnp.mean` with x64 disabled).
#[track_caller]
fn as_float(x: &Tensor) -> Tensor {
    if x.dtype().is_float() { x.clone() } else { x.astype(DType::F32) }
}

/// The mean over `axes`; `name` is the op reported in errors.
#[track_caller]
fn mean_impl(name: &str, x: &Tensor, axes: &dyn Axes, keepdims: bool) -> Tensor {
    let shape = x.shape();
    let resolved = check!(resolve_axes(axes, &shape), name, &[x]);
    let count: usize = resolved.iter().map(|&a| shape[a]).product();
    let s = reduce_impl(ReduceOp::Sum, &as_float(x), axes, keepdims);
    // An empty reduction divides 0 by 0: NaN, as numpy.
    &s / count as f64
}

/// The (population, `ddof=0`) variance over `axes`.
#[track_caller]
fn var_impl(x: &Tensor, axes: &dyn Axes, keepdims: bool) -> Tensor {
    let x = as_float(x);
    let shape = x.shape();
    check!(resolve_axes(axes, &shape), "var", &[&x]);
    let centered = &x - &mean_impl("var", &x, axes, true);
    mean_impl("var", &(&centered * &centered), axes, keepdims)
}

macro_rules! reductions {
    ($($(#[$doc:meta])* $name:ident, $keep:ident, $all:ident => $op:ident;)*) => {
        impl Tensor {
            $(
                $(#[$doc])*
                #[track_caller]
                pub fn $name(&self, axes: impl Axes) -> Tensor {
                    reduce_impl(ReduceOp::$op, self, &axes, false)
                }

                #[doc = concat!("[`Tensor::", stringify!($name), "`] keeping the reduced axes as size-1 dims (`keepdims=True`).")]
                #[track_caller]
                pub fn $keep(&self, axes: impl Axes) -> Tensor {
                    reduce_impl(ReduceOp::$op, self, &axes, true)
                }

                #[doc = concat!("[`Tensor::", stringify!($name), "`] over every axis (a rank-0 result).")]
                #[track_caller]
                pub fn $all(&self) -> Tensor {
                    reduce_impl(ReduceOp::$op, self, &All, false)
                }
            )*
        }
    };
}

reductions! {
    /// Sum over `axes` (`jnp.sum`); bools are counted in i32. An empty axis sums to 0.
    sum, sum_keepdims, sum_all => Sum;
    /// Product over `axes` (`jnp.prod`); bools in i32. An empty axis gives 1.
    prod, prod_keepdims, prod_all => Prod;
    /// Maximum over `axes` (`jnp.max`); NaN propagates. Reducing an empty axis is an error.
    max, max_keepdims, max_all => Max;
    /// Minimum over `axes` (`jnp.min`); NaN propagates. Reducing an empty axis is an error.
    min, min_keepdims, min_all => Min;
}

impl Tensor {
    /// Arithmetic mean over `axes` (`jnp.mean`). Integer and bool inputs are converted to f32 first
    /// (as `jnp.mean` with x64 disabled); an empty reduction gives NaN.
    #[track_caller]
    pub fn mean(&self, axes: impl Axes) -> Tensor {
        mean_impl("mean", self, &axes, false)
    }

    /// [`Tensor::mean`] keeping the reduced axes as size-1 dims.
    #[track_caller]
    pub fn mean_keepdims(&self, axes: impl Axes) -> Tensor {
        mean_impl("mean", self, &axes, true)
    }

    /// [`Tensor::mean`] over every axis.
    #[track_caller]
    pub fn mean_all(&self) -> Tensor {
        mean_impl("mean", self, &All, false)
    }

    /// Population variance (`ddof=0`) over `axes`: `mean((x - mean(x))²)` (`jnp.var`); ints → f32.
    #[track_caller]
    pub fn var(&self, axes: impl Axes) -> Tensor {
        var_impl(self, &axes, false)
    }

    /// [`Tensor::var`] keeping the reduced axes as size-1 dims.
    #[track_caller]
    pub fn var_keepdims(&self, axes: impl Axes) -> Tensor {
        var_impl(self, &axes, true)
    }

    /// [`Tensor::var`] over every axis.
    #[track_caller]
    pub fn var_all(&self) -> Tensor {
        var_impl(self, &All, false)
    }

    /// Index (i32) of the first maximum along `axis`, which is removed (`jnp.argmax`); a NaN counts as
    /// the maximum. An empty axis is an error.
    #[track_caller]
    pub fn argmax(&self, axis: i32) -> Tensor {
        arg_impl(ArgOp::Max, self, axis)
    }

    /// Index (i32) of the first minimum along `axis` (`jnp.argmin`); a NaN counts as the minimum.
    #[track_caller]
    pub fn argmin(&self, axis: i32) -> Tensor {
        arg_impl(ArgOp::Min, self, axis)
    }

    /// Index (i32, rank 0) of the first maximum of the flattened tensor (`jnp.argmax(x)`).
    #[track_caller]
    pub fn argmax_all(&self) -> Tensor {
        arg_all_impl(ArgOp::Max, self)
    }

    /// Index (i32, rank 0) of the first minimum of the flattened tensor (`jnp.argmin(x)`).
    #[track_caller]
    pub fn argmin_all(&self) -> Tensor {
        arg_all_impl(ArgOp::Min, self)
    }

    /// Inclusive cumulative sum along `axis` (`jnp.cumsum`); from the end if `reverse`
    /// (`lax.cumsum(..., reverse=True)`). Bools are summed in i32.
    #[track_caller]
    pub fn cumsum(&self, axis: i32, reverse: bool) -> Tensor {
        cumulative_impl(CumulativeOp::Sum, self, axis, reverse)
    }

    /// Inclusive cumulative product along `axis` (`jnp.cumprod`), optionally from the end.
    #[track_caller]
    pub fn cumprod(&self, axis: i32, reverse: bool) -> Tensor {
        cumulative_impl(CumulativeOp::Prod, self, axis, reverse)
    }

    /// Running maximum along `axis` (`lax.cummax`), optionally from the end; NaN propagates.
    #[track_caller]
    pub fn cummax(&self, axis: i32, reverse: bool) -> Tensor {
        cumulative_impl(CumulativeOp::Max, self, axis, reverse)
    }

    /// Running minimum along `axis` (`lax.cummin`), optionally from the end; NaN propagates.
    #[track_caller]
    pub fn cummin(&self, axis: i32, reverse: bool) -> Tensor {
        cumulative_impl(CumulativeOp::Min, self, axis, reverse)
    }

    /// Ascending sort along `axis` (`jnp.sort`), stable; NaNs last; `-0.0` and `0.0` compare equal and
    /// keep their order, as in JAX.
    #[track_caller]
    pub fn sort(&self, axis: i32) -> Tensor {
        let shape = self.shape();
        let axis = check!(resolve_axis(axis.into(), &shape), "sort", &[self]);
        lax::sort(std::slice::from_ref(self), axis, 1).remove(0)
    }

    /// The i32 indices that sort along `axis` (`jnp.argsort`, stable: ties keep their order). Built as
    /// a two-operand `sort` keyed on `self` carrying an `iota`. An axis of more than 2^31 elements is
    /// an error (its positions would not fit i32).
    #[track_caller]
    pub fn argsort(&self, axis: i32) -> Tensor {
        let shape = self.shape();
        let axis = check!(resolve_axis(axis.into(), &shape), "argsort", &[self]);
        if shape[axis] > 1 << 31 {
            let msg = format!(
                "i32 indices cannot number the {} positions along axis {axis} (at most {})",
                shape[axis],
                1usize << 31
            );
            return fail1("argsort", &[self], msg);
        }
        let positions = lax::iota(DType::I32, shape.dims(), axis);
        lax::sort(&[self.clone(), positions], axis, 1).remove(1)
    }
}

/// `argmax`/`argmin` along one axis; bools compare as 0/1.
#[track_caller]
fn arg_impl(op: ArgOp, x: &Tensor, axis: i32) -> Tensor {
    let name = op.name();
    let shape = x.shape();
    let axis = check!(resolve_axis(axis.into(), &shape), name, &[x]);
    if shape[axis] == 0 {
        let msg = format!("attempt to get {name} of an empty sequence (axis {axis} of shape {shape})");
        return fail1(name, &[x], msg);
    }
    let input = if x.dtype() == DType::Bool { x.astype(DType::I32) } else { x.clone() };
    lax::arg_reduce(op, &input, axis, DType::I32)
}

/// `argmax`/`argmin` of the flattened tensor.
#[track_caller]
fn arg_all_impl(op: ArgOp, x: &Tensor) -> Tensor {
    if x.size() == 0 {
        let msg = format!("attempt to get {} of an empty sequence (shape {})", op.name(), x.shape());
        return fail1(op.name(), &[x], msg);
    }
    arg_impl(op, &lax::reshape(x, &[x.size()]), 0)
}

/// A cumulative scan along one axis; sums and products of bools run in i32.
#[track_caller]
fn cumulative_impl(op: CumulativeOp, x: &Tensor, axis: i32, reverse: bool) -> Tensor {
    let shape = x.shape();
    let axis = check!(resolve_axis(axis.into(), &shape), op.name(), &[x]);
    let input = match op {
        CumulativeOp::Sum | CumulativeOp::Prod if x.dtype() == DType::Bool => x.astype(DType::I32),
        CumulativeOp::Sum | CumulativeOp::Prod | CumulativeOp::Max | CumulativeOp::Min => x.clone(),
    };
    lax::cumulative(op, &input, axis, reverse)
}
