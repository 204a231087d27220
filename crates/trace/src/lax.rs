//! One thin wrapper per primitive, with `jax.lax` semantics: no implicit broadcasting or type
//! promotion (operands must already agree; a mismatch is a recorded error quoting the operands).
//! The `jax.numpy`-style methods on [`Tensor`] are built on these.

use crate::Tensor;
use crate::context;
use kiln_ir::{
    ArgOp, BinaryOp, CompareOp, CumulativeOp, DType, Function, IndexMode, Prim, ReduceOp, ScatterOp, Shape,
    UnaryOp,
};

/// Binds any primitive to tensors: stages it into the innermost trace, or evaluates it eagerly. The
/// transforms use this to replay a function's equations; user code calls the typed wrappers below.
#[track_caller]
pub fn bind(prim: Prim, inputs: &[&Tensor]) -> Vec<Tensor> {
    let types: Vec<_> = inputs.iter().map(|t| t.ty()).collect();
    let n_out = kiln_ir::output_types(&prim, &types).map_or(1, |t| t.len());
    context::bind(prim, inputs, n_out)
}

#[track_caller]
fn one(prim: Prim, inputs: &[&Tensor]) -> Tensor {
    context::bind(prim, inputs, 1).pop().expect("one result")
}

/// Applies a one-operand elementwise primitive.
#[track_caller]
pub fn unary(op: UnaryOp, x: &Tensor) -> Tensor {
    one(Prim::Unary(op), &[x])
}

/// Applies a two-operand elementwise primitive (equal shapes and dtypes).
#[track_caller]
pub fn binary(op: BinaryOp, x: &Tensor, y: &Tensor) -> Tensor {
    one(Prim::Binary(op), &[x, y])
}

/// Applies a comparison (equal shapes and dtypes), giving bool.
#[track_caller]
pub fn compare(op: CompareOp, x: &Tensor, y: &Tensor) -> Tensor {
    one(Prim::Compare(op), &[x, y])
}

/// `select(pred, on_true, on_false)`; pred bool of the arms' shape or rank 0.
#[track_caller]
pub fn select(pred: &Tensor, on_true: &Tensor, on_false: &Tensor) -> Tensor {
    one(Prim::Select, &[pred, on_true, on_false])
}

/// `clamp(lo, x, hi)`.
#[track_caller]
pub fn clamp(lo: &Tensor, x: &Tensor, hi: &Tensor) -> Tensor {
    one(Prim::Clamp, &[lo, x, hi])
}

/// `convert_element_type`.
#[track_caller]
pub fn convert_element_type(x: &Tensor, dtype: DType) -> Tensor {
    if x.dtype() == dtype {
        return x.clone();
    }
    one(Prim::ConvertElementType { dtype }, &[x])
}

/// `bitcast_convert_type`.
#[track_caller]
pub fn bitcast_convert_type(x: &Tensor, dtype: DType) -> Tensor {
    one(Prim::BitcastConvertType { dtype }, &[x])
}

/// `iota`: `0, 1, ...` along `dimension` of `shape`.
#[track_caller]
pub fn iota(dtype: DType, shape: &[usize], dimension: usize) -> Tensor {
    one(Prim::Iota { dtype, shape: Shape::new(shape), dimension }, &[])
}

/// `broadcast_in_dim`.
#[track_caller]
pub fn broadcast_in_dim(x: &Tensor, shape: &[usize], broadcast_dimensions: &[usize]) -> Tensor {
    if x.shape().dims() == shape && broadcast_dimensions.iter().copied().eq(0..shape.len()) {
        return x.clone();
    }
    one(
        Prim::BroadcastInDim {
            shape: Shape::new(shape),
            broadcast_dimensions: broadcast_dimensions.to_vec(),
        },
        &[x],
    )
}

/// `reshape` (row-major).
#[track_caller]
pub fn reshape(x: &Tensor, new_sizes: &[usize]) -> Tensor {
    if x.shape().dims() == new_sizes {
        return x.clone();
    }
    one(Prim::Reshape { new_sizes: Shape::new(new_sizes) }, &[x])
}

/// `transpose`: result dim `i` is operand dim `permutation[i]`.
#[track_caller]
pub fn transpose(x: &Tensor, permutation: &[usize]) -> Tensor {
    one(Prim::Transpose { permutation: permutation.to_vec() }, &[x])
}

/// `rev` along `dimensions`.
#[track_caller]
pub fn rev(x: &Tensor, dimensions: &[usize]) -> Tensor {
    one(Prim::Rev { dimensions: dimensions.to_vec() }, &[x])
}

/// Static strided `slice`.
#[track_caller]
pub fn slice(x: &Tensor, start: &[usize], limit: &[usize], strides: &[usize]) -> Tensor {
    one(Prim::Slice { start: start.to_vec(), limit: limit.to_vec(), strides: strides.to_vec() }, &[x])
}

/// `dynamic_slice` with one integer scalar start per dimension (clamped).
#[track_caller]
pub fn dynamic_slice(x: &Tensor, starts: &[Tensor], slice_sizes: &[usize]) -> Tensor {
    let mut ins = vec![x];
    ins.extend(starts.iter());
    one(Prim::DynamicSlice { slice_sizes: slice_sizes.to_vec() }, &ins)
}

/// `dynamic_update_slice` with one integer scalar start per dimension (clamped).
#[track_caller]
pub fn dynamic_update_slice(x: &Tensor, update: &Tensor, starts: &[Tensor]) -> Tensor {
    let mut ins = vec![x, update];
    ins.extend(starts.iter());
    one(Prim::DynamicUpdateSlice, &ins)
}

/// `concatenate` along `dimension`.
#[track_caller]
pub fn concatenate(xs: &[Tensor], dimension: usize) -> Tensor {
    let ins: Vec<&Tensor> = xs.iter().collect();
    one(Prim::Concatenate { dimension }, &ins)
}

/// `pad` with low/high (negative crops) and interior padding.
#[track_caller]
pub fn pad(x: &Tensor, padding_value: &Tensor, low: &[i64], high: &[i64], interior: &[usize]) -> Tensor {
    one(
        Prim::Pad { low: low.to_vec(), high: high.to_vec(), interior: interior.to_vec() },
        &[x, padding_value],
    )
}

/// `reduce_sum`/`reduce_max`/`reduce_min`/`reduce_prod` over `axes`.
#[track_caller]
pub fn reduce(op: ReduceOp, x: &Tensor, axes: &[usize]) -> Tensor {
    one(Prim::Reduce { op, axes: axes.to_vec() }, &[x])
}

/// `argmax`/`argmin` along `axis`.
#[track_caller]
pub fn arg_reduce(op: ArgOp, x: &Tensor, axis: usize, index_dtype: DType) -> Tensor {
    one(Prim::ArgReduce { op, axis, index_dtype }, &[x])
}

/// `cumsum`/`cumprod`/`cummax`/`cummin` along `axis`.
#[track_caller]
pub fn cumulative(op: CumulativeOp, x: &Tensor, axis: usize, reverse: bool) -> Tensor {
    one(Prim::Cumulative { op, axis, reverse }, &[x])
}

/// `sort` of several operands along `dimension` by the first `num_keys`.
#[track_caller]
pub fn sort(xs: &[Tensor], dimension: usize, num_keys: usize) -> Vec<Tensor> {
    let ins: Vec<&Tensor> = xs.iter().collect();
    context::bind(Prim::Sort { dimension, num_keys }, &ins, xs.len())
}

/// `dot_general` with (lhs, rhs) contracting and batch dimensions.
#[track_caller]
pub fn dot_general(
    lhs: &Tensor,
    rhs: &Tensor,
    contracting: (&[usize], &[usize]),
    batch: (&[usize], &[usize]),
    preferred_element_type: Option<DType>,
) -> Tensor {
    one(
        Prim::DotGeneral {
            lhs_contracting: contracting.0.to_vec(),
            rhs_contracting: contracting.1.to_vec(),
            lhs_batch: batch.0.to_vec(),
            rhs_batch: batch.1.to_vec(),
            preferred_element_type,
        },
        &[lhs, rhs],
    )
}

/// `gather` along `axis` with `batch_dims` shared leading dims.
#[track_caller]
pub fn gather(x: &Tensor, indices: &Tensor, axis: usize, batch_dims: usize, mode: IndexMode) -> Tensor {
    one(Prim::Gather { axis, batch_dims, mode }, &[x, indices])
}

/// `scatter` / `scatter_add`, the transpose of [`gather`].
#[track_caller]
pub fn scatter(
    op: ScatterOp,
    x: &Tensor,
    indices: &Tensor,
    updates: &Tensor,
    axis: usize,
    batch_dims: usize,
    mode: IndexMode,
) -> Tensor {
    one(Prim::Scatter { op, axis, batch_dims, mode }, &[x, indices, updates])
}

/// `segment_sum(data, segment_ids)`.
#[track_caller]
pub fn segment_sum(data: &Tensor, segment_ids: &Tensor, num_segments: usize) -> Tensor {
    one(Prim::SegmentSum { num_segments }, &[data, segment_ids])
}

/// `threefry2x32(k0, k1, x0, x1) -> (y0, y1)`.
#[track_caller]
pub fn threefry2x32(k0: &Tensor, k1: &Tensor, x0: &Tensor, x1: &Tensor) -> (Tensor, Tensor) {
    let mut r = context::bind(Prim::Threefry2x32, &[k0, k1, x0, x1], 2);
    let y1 = r.pop().expect("two results");
    let y0 = r.pop().expect("two results");
    (y0, y1)
}

/// `stop_gradient`.
#[track_caller]
pub fn stop_gradient(x: &Tensor) -> Tensor {
    one(Prim::StopGradient, &[x])
}

/// `call` of a closed sub-function.
#[track_caller]
pub fn call(body: Function, args: &[Tensor]) -> Vec<Tensor> {
    let n = body.outputs.len();
    let ins: Vec<&Tensor> = args.iter().collect();
    context::bind(Prim::Call { body: Box::new(body) }, &ins, n)
}
