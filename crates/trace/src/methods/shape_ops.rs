//! Shape manipulation (`reshape transpose expand_dims squeeze flatten swapaxes moveaxis roll flip
//! concatenate stack slice_axis index pad tile repeat`), `clip`, the `*_like` constructors and the
//! concrete constructors `arange linspace eye` plus the `iota` wrapper.

use super::{
    Axes, check, fail1, resolve_axes, resolve_axes_rank, resolve_axis, transpose_if_needed, tuple_i64,
};
use crate::context::fail;
use crate::{Tensor, lax};
use kiln_ir::{DType, Shape};

/// The shape `spec` (one `-1` allowed) resolved against `total` elements; the error quotes both shapes.
fn resolve_reshape(own: &Shape, spec: &[i64]) -> Result<Vec<usize>, String> {
    let bad = || format!("cannot reshape array of shape {own} into shape {}", tuple_i64(spec));
    let mut unknown = None;
    let mut known = 1usize;
    let mut dims = Vec::with_capacity(spec.len());
    for (i, &d) in spec.iter().enumerate() {
        if d == -1 {
            if unknown.replace(i).is_some() {
                return Err(format!("can only specify one unknown dimension in shape {}", tuple_i64(spec)));
            }
            dims.push(0);
        } else {
            let d = usize::try_from(d)
                .map_err(|_| format!("invalid dimension {d} in shape {}", tuple_i64(spec)))?;
            known = known.checked_mul(d).ok_or_else(bad)?;
            dims.push(d);
        }
    }
    let total = own.size();
    match unknown {
        Some(i) => {
            // `-1` next to a zero-size dim is ambiguous (numpy refuses it too).
            if known == 0 || !total.is_multiple_of(known) {
                return Err(bad());
            }
            dims[i] = total / known;
        }
        None if known != total => return Err(bad()),
        None => {}
    }
    Ok(dims)
}

/// Python's `slice(start, stop, step).indices(n)` and the resulting length.
fn python_slice(start: Option<i64>, stop: Option<i64>, step: i64, n: usize) -> (i64, i64, usize) {
    let n = n as i64;
    let (lower, upper) = if step > 0 { (0, n) } else { (-1, n - 1) };
    let clampi = |v: i64| if v < 0 { (v.saturating_add(n)).max(lower) } else { v.min(upper) };
    let start = start.map_or(if step > 0 { lower } else { upper }, clampi);
    let stop = stop.map_or(if step > 0 { upper } else { lower }, clampi);
    // In i128: a step near `i64::MIN`/`MAX` overflowed `-step` and `stop - start + step - 1`.
    let (lo, hi, by) = (i128::from(start), i128::from(stop), i128::from(step));
    let len = if by > 0 {
        if hi > lo { (hi - lo + by - 1) / by } else { 0 }
    } else if lo > hi {
        (lo - hi - by - 1) / (-by)
    } else {
        0
    };
    (start, stop, len as usize)
}

/// `x[lo:hi:stride]` along `axis` (all in range, `stride >= 1`), full along the other axes.
#[track_caller]
fn slice_along(x: &Tensor, axis: usize, lo: usize, hi: usize, stride: usize) -> Tensor {
    let dims = x.shape();
    let mut start = vec![0; dims.rank()];
    let mut limit = dims.dims().to_vec();
    let mut strides = vec![1; dims.rank()];
    start[axis] = lo;
    limit[axis] = hi;
    strides[axis] = stride;
    lax::slice(x, &start, &limit, &strides)
}

/// For an integer `dtype`, why a monotone run of values from `first` to `last` does not fit it
/// (after truncation toward zero, as `convert_element_type`); converting would saturate them
/// silently (`arange(2^31 + 5, i32)` ending in a run of `i32::MAX`). `None` when they fit.
fn out_of_range(dtype: DType, first: f64, last: f64) -> Option<String> {
    let (lo, hi) = match dtype {
        DType::I32 => (f64::from(i32::MIN), f64::from(i32::MAX)),
        DType::U32 => (0.0, f64::from(u32::MAX)),
        DType::F32 | DType::F64 | DType::Bool => return None,
    };
    let fits = |v: f64| v.trunc() >= lo && v.trunc() <= hi;
    (!fits(first) || !fits(last))
        .then(|| format!("values from {first} to {last} do not fit {dtype} ({lo} to {hi})"))
}

/// A concrete tensor of `dtype` and `shape` whose element `i` (row-major) is `value(i)` converted
/// (as `convert_element_type`). Written straight in `dtype`: no f64 copy of the whole array is staged.
fn from_f64s(shape: &[usize], value: impl Fn(usize) -> f64, dtype: DType) -> Tensor {
    let n: usize = shape.iter().product();
    match dtype {
        DType::F32 => Tensor::from_vec(shape, (0..n).map(|i| value(i) as f32).collect()),
        DType::F64 => Tensor::from_vec(shape, (0..n).map(value).collect()),
        DType::I32 => Tensor::from_vec(shape, (0..n).map(|i| value(i) as i32).collect()),
        DType::U32 => Tensor::from_vec(shape, (0..n).map(|i| value(i) as u32).collect()),
        DType::Bool => Tensor::from_vec(shape, (0..n).map(|i| value(i) != 0.0).collect()),
    }
}

impl Tensor {
    /// Row-major reshape (`jnp.reshape`); one entry may be `-1`, inferred from the element count.
    #[track_caller]
    pub fn reshape(&self, shape: &[i64]) -> Tensor {
        let dims = check!(resolve_reshape(&self.shape(), shape), "reshape", &[self]);
        lax::reshape(self, &dims)
    }

    /// The tensor as one dimension (`jnp.ravel` / `x.flatten()`); a scalar becomes shape `(1,)`.
    #[track_caller]
    pub fn flatten(&self) -> Tensor {
        lax::reshape(self, &[self.size()])
    }

    /// Permutes the axes (`jnp.transpose(x, axes)`): result axis `i` is `axes[i]` (negatives allowed).
    /// [`crate::methods::All`] reverses them, as numpy's default.
    #[track_caller]
    pub fn transpose(&self, axes: impl Axes) -> Tensor {
        let shape = self.shape();
        let perm = match axes.axes() {
            None => (0..shape.rank()).rev().collect(),
            Some(list) => {
                let bad = format!("axes {list:?} are not a permutation of the dimensions of shape {shape}");
                if list.len() != shape.rank() {
                    return fail1("transpose", &[self], bad);
                }
                check!(
                    resolve_axes_rank(&list, shape.rank(), &format!("shape {shape}")),
                    "transpose",
                    &[self]
                )
            }
        };
        transpose_if_needed(self, &perm)
    }

    /// Reverses all axes (numpy's `x.T`): a matrix transpose for rank 2, the identity for rank 0 and 1.
    #[track_caller]
    pub fn t(&self) -> Tensor {
        let perm: Vec<usize> = (0..self.ndim()).rev().collect();
        transpose_if_needed(self, &perm)
    }

    /// Swaps two axes (`jnp.swapaxes`).
    #[track_caller]
    pub fn swapaxes(&self, axis1: i32, axis2: i32) -> Tensor {
        let shape = self.shape();
        let a = check!(resolve_axis(axis1.into(), &shape), "swapaxes", &[self]);
        let b = check!(resolve_axis(axis2.into(), &shape), "swapaxes", &[self]);
        let mut perm: Vec<usize> = (0..shape.rank()).collect();
        perm.swap(a, b);
        transpose_if_needed(self, &perm)
    }

    /// Moves axis `source` to position `destination`, keeping the others in order (`jnp.moveaxis`).
    #[track_caller]
    pub fn moveaxis(&self, source: i32, destination: i32) -> Tensor {
        let shape = self.shape();
        let s = check!(resolve_axis(source.into(), &shape), "moveaxis", &[self]);
        let d = check!(resolve_axis(destination.into(), &shape), "moveaxis", &[self]);
        let mut perm: Vec<usize> = (0..shape.rank()).filter(|&i| i != s).collect();
        perm.insert(d, s);
        transpose_if_needed(self, &perm)
    }

    /// Inserts size-1 axes at `axes`, which index the *result* (`jnp.expand_dims`).
    #[track_caller]
    pub fn expand_dims(&self, axes: impl Axes) -> Tensor {
        let shape = self.shape();
        let Some(list) = axes.axes() else {
            return fail1("expand_dims", &[self], "axes must be given explicitly, not All".into());
        };
        let out_rank = shape.rank() + list.len();
        let what = format!("the result of rank {out_rank} (input shape {shape})");
        let axes = check!(resolve_axes_rank(&list, out_rank, &what), "expand_dims", &[self]);
        let mut own = shape.dims().iter();
        let dims: Vec<usize> =
            (0..out_rank).map(|i| if axes.contains(&i) { 1 } else { *own.next().unwrap_or(&1) }).collect();
        lax::reshape(self, &dims)
    }

    /// Removes the size-1 axes `axes` (`jnp.squeeze(x, axes)`; an axis of another size is an error),
    /// or every size-1 axis for [`crate::methods::All`].
    #[track_caller]
    pub fn squeeze(&self, axes: impl Axes) -> Tensor {
        let shape = self.shape();
        let axes: Vec<usize> = match axes.axes() {
            None => (0..shape.rank()).filter(|&i| shape[i] == 1).collect(),
            Some(_) => check!(resolve_axes(&axes, &shape), "squeeze", &[self]),
        };
        if let Some(&a) = axes.iter().find(|&&a| shape[a] != 1) {
            let msg =
                format!("cannot squeeze axis {a} of size {} (shape {shape}): only size-1 axes", shape[a]);
            return fail1("squeeze", &[self], msg);
        }
        let dims: Vec<usize> =
            shape.dims().iter().enumerate().filter(|(i, _)| !axes.contains(i)).map(|(_, &d)| d).collect();
        lax::reshape(self, &dims)
    }

    /// Removes every size-1 axis (`jnp.squeeze(x)`).
    #[track_caller]
    pub fn squeeze_all(&self) -> Tensor {
        self.squeeze(super::All)
    }

    /// Rotates elements along `axis` by `shift` positions, periodically (`jnp.roll`):
    /// `roll([0,1,2,3,4], 1) = [4,0,1,2,3]`. Negative shifts go the other way; shifts wrap modulo
    /// the axis size.
    #[track_caller]
    pub fn roll(&self, shift: i64, axis: i32) -> Tensor {
        let shape = self.shape();
        let axis = check!(resolve_axis(axis.into(), &shape), "roll", &[self]);
        let n = shape[axis];
        let s = if n == 0 { 0 } else { shift.rem_euclid(n as i64) as usize };
        if s == 0 {
            return self.clone();
        }
        // The last `s` elements move to the front.
        let tail = slice_along(self, axis, n - s, n, 1);
        let head = slice_along(self, axis, 0, n - s, 1);
        lax::concatenate(&[tail, head], axis)
    }

    /// Reverses the order of elements along `axes` (`jnp.flip`; [`crate::methods::All`] for all).
    #[track_caller]
    pub fn flip(&self, axes: impl Axes) -> Tensor {
        let axes = check!(resolve_axes(&axes, &self.shape()), "flip", &[self]);
        if axes.is_empty() {
            return self.clone();
        }
        lax::rev(self, &axes)
    }

    /// Joins tensors along an existing `axis` (`jnp.concatenate`): equal dtypes and ranks ≥ 1, equal
    /// sizes outside `axis`.
    #[track_caller]
    pub fn concatenate(xs: &[Tensor], axis: i32) -> Tensor {
        let refs: Vec<&Tensor> = xs.iter().collect();
        let Some(first) = xs.first() else {
            return fail1("concatenate", &[], "need at least one array to concatenate".into());
        };
        let shape = first.shape();
        if shape.rank() == 0 {
            return fail1("concatenate", &refs, "zero-dimensional arrays cannot be concatenated".into());
        }
        let ax = check!(resolve_axis(axis.into(), &shape), "concatenate", &refs);
        for x in xs {
            if x.dtype() != first.dtype() {
                let msg = format!("dtypes {} and {} differ (use astype)", first.dtype(), x.dtype());
                return fail1("concatenate", &refs, msg);
            }
            let xs_ = x.shape();
            let fits = xs_.rank() == shape.rank() && (0..shape.rank()).all(|i| i == ax || xs_[i] == shape[i]);
            if !fits {
                let msg = format!("shapes {shape} and {xs_} differ outside axis {axis}");
                return fail1("concatenate", &refs, msg);
            }
        }
        if xs.len() == 1 {
            return first.clone();
        }
        lax::concatenate(xs, ax)
    }

    /// Joins equal-shaped tensors along a new `axis` of the result (`jnp.stack`).
    #[track_caller]
    pub fn stack(xs: &[Tensor], axis: i32) -> Tensor {
        let refs: Vec<&Tensor> = xs.iter().collect();
        let Some(first) = xs.first() else {
            return fail1("stack", &[], "need at least one array to stack".into());
        };
        let shape = first.shape();
        for x in xs {
            if x.dtype() != first.dtype() || x.shape() != shape {
                let msg = format!("all arrays must have the same type: {} and {}", first.ty(), x.ty());
                return fail1("stack", &refs, msg);
            }
        }
        let what = format!("the result of rank {} (input shape {shape})", shape.rank() + 1);
        let ax = check!(resolve_axes_rank(&[axis.into()], shape.rank() + 1, &what), "stack", &refs)[0];
        let mut dims = shape.dims().to_vec();
        dims.insert(ax, 1);
        // A loop, not `map`: closures lose `#[track_caller]`, and errors must point at the user's line.
        let mut parts: Vec<Tensor> = Vec::with_capacity(xs.len());
        for x in xs {
            parts.push(lax::reshape(x, &dims));
        }
        if parts.len() == 1 {
            return parts.into_iter().next().unwrap_or_else(|| first.clone());
        }
        lax::concatenate(&parts, ax)
    }

    /// `x[start:stop:step]` along `axis` with Python semantics: `None` defaults, negative bounds
    /// count from the end, out-of-range bounds are clamped, a negative `step` walks backwards.
    /// `step == 0` is an error.
    #[track_caller]
    pub fn slice_axis(&self, axis: i32, start: Option<i64>, stop: Option<i64>, step: i64) -> Tensor {
        let shape = self.shape();
        let ax = check!(resolve_axis(axis.into(), &shape), "slice_axis", &[self]);
        if step == 0 {
            return fail1("slice_axis", &[self], "slice step cannot be zero".into());
        }
        let n = shape[ax];
        let (start, _, len) = python_slice(start, stop, step, n);
        if len == 0 {
            return slice_along(self, ax, 0, 0, 1);
        }
        let stride = step.unsigned_abs() as usize;
        if step > 0 {
            let lo = start as usize;
            slice_along(self, ax, lo, lo + (len - 1) * stride + 1, stride)
        } else {
            // Walking back from `start` is walking forward from `n-1-start` in the reversed axis.
            let lo = n - 1 - start as usize;
            slice_along(&lax::rev(self, &[ax]), ax, lo, lo + (len - 1) * stride + 1, stride)
        }
    }

    /// `x[i]`: the sub-tensor at position `i` of axis 0, which is removed; negative `i` counts from
    /// the end. An index out of range is an error (a static index, as numpy).
    #[track_caller]
    pub fn index(&self, i: i64) -> Tensor {
        self.index_axis(0, i)
    }

    /// The sub-tensor at position `i` along `axis`, which is removed (`x[:, i]` for axis 1).
    #[track_caller]
    pub fn index_axis(&self, axis: i32, i: i64) -> Tensor {
        let shape = self.shape();
        if shape.rank() == 0 {
            return fail1("index", &[self], format!("too many indices for array of shape {shape}"));
        }
        let ax = check!(resolve_axis(axis.into(), &shape), "index", &[self]);
        let n = shape[ax];
        let Some(pos) = super::normalize_axis(i, n) else {
            let msg = format!("index {i} is out of bounds for axis {ax} with size {n} (shape {shape})");
            return fail1("index", &[self], msg);
        };
        let mut dims = shape.dims().to_vec();
        dims.remove(ax);
        lax::reshape(&slice_along(self, ax, pos, pos + 1, 1), &dims)
    }

    /// Pads with the constant `value` (`jnp.pad(x, pad_width, constant_values=value)`): one
    /// `(before, after)` pair per axis, or a single pair used for every axis. `value` takes the
    /// tensor's dtype as `convert_element_type` does (kiln does not promote): on an integer tensor a
    /// fraction is truncated toward zero (`2.7` pads with `2`), on bool anything non-zero is `true`.
    #[track_caller]
    pub fn pad(&self, pad_width: &[(usize, usize)], value: f64) -> Tensor {
        let rank = self.ndim();
        let pairs: Vec<(usize, usize)> = match pad_width {
            [p] => vec![*p; rank],
            _ if pad_width.len() == rank => pad_width.to_vec(),
            _ => {
                let msg = format!("pad_width has {} pairs for shape {}", pad_width.len(), self.shape());
                return fail1("pad", &[self], msg);
            }
        };
        let (mut low, mut high) = (Vec::with_capacity(rank), Vec::with_capacity(rank));
        for (b, a) in pairs {
            match (i64::try_from(b), i64::try_from(a)) {
                (Ok(b), Ok(a)) => {
                    low.push(b);
                    high.push(a);
                }
                _ => return fail1("pad", &[self], format!("padding ({b}, {a}) is too large")),
            }
        }
        lax::pad(self, &Tensor::scalar_like(value, self.dtype()), &low, &high, &vec![0; rank])
    }

    /// Repeats the whole tensor `reps[i]` times along axis `i` (`jnp.tile`); the shorter of `reps` and
    /// the shape is padded with leading 1s.
    #[track_caller]
    pub fn tile(&self, reps: &[usize]) -> Tensor {
        let shape = self.shape();
        let k = shape.rank().max(reps.len());
        let pad1 =
            |d: &[usize]| std::iter::repeat_n(1, k - d.len()).chain(d.iter().copied()).collect::<Vec<_>>();
        let (dims, reps) = (pad1(shape.dims()), pad1(reps));
        let mut out = Vec::with_capacity(k);
        for (&d, &r) in dims.iter().zip(&reps) {
            match d.checked_mul(r) {
                Some(n) => out.push(n),
                None => return fail1("tile", &[self], format!("tiling shape {shape} by {reps:?} overflows")),
            }
        }
        // Broadcast dim i to (reps[i], dims[i]) interleaved, then merge each pair row-major.
        let inter: Vec<usize> = reps.iter().zip(&dims).flat_map(|(&r, &d)| [r, d]).collect();
        let bdims: Vec<usize> = (0..k).map(|i| 2 * i + 1).collect();
        let b = lax::broadcast_in_dim(&lax::reshape(self, &dims), &inter, &bdims);
        lax::reshape(&b, &out)
    }

    /// Repeats each element `repeats` times along `axis` (`jnp.repeat(x, repeats, axis)`).
    #[track_caller]
    pub fn repeat(&self, repeats: usize, axis: i32) -> Tensor {
        let shape = self.shape();
        let ax = check!(resolve_axis(axis.into(), &shape), "repeat", &[self]);
        let Some(merged) = shape[ax].checked_mul(repeats) else {
            return fail1("repeat", &[self], format!("repeating shape {shape} {repeats} times overflows"));
        };
        // Insert a new axis after `ax`, broadcast it to `repeats`, merge it into `ax`.
        let mut wide = shape.dims().to_vec();
        wide.insert(ax + 1, repeats);
        let bdims: Vec<usize> = (0..shape.rank()).map(|i| if i <= ax { i } else { i + 1 }).collect();
        let b = lax::broadcast_in_dim(self, &wide, &bdims);
        let mut out = shape.dims().to_vec();
        out[ax] = merged;
        lax::reshape(&b, &out)
    }

    /// Limits values to `[lo, hi]` (`jnp.clip`): `min(max(x, lo), hi)`, written as those two ops as
    /// jnp.clip is, so NaN stays NaN and the gradient at a bound is `1/2` (the tie split of
    /// `maximum`/`minimum`; `lax::clamp` gives 0 there). The bounds take the tensor's dtype.
    #[track_caller]
    pub fn clip(&self, lo: f64, hi: f64) -> Tensor {
        if self.dtype() == DType::Bool {
            return fail1("clip", &[self], "dtype bool is not numeric".into());
        }
        let dt = self.dtype();
        self.maximum(&Tensor::scalar_like(lo, dt)).minimum(&Tensor::scalar_like(hi, dt))
    }

    /// Zeros (false) of this tensor's dtype and shape (`jnp.zeros_like`).
    #[track_caller]
    pub fn zeros_like(&self) -> Tensor {
        self.full_like(0.0)
    }

    /// Ones (true) of this tensor's dtype and shape (`jnp.ones_like`).
    #[track_caller]
    pub fn ones_like(&self) -> Tensor {
        self.full_like(1.0)
    }

    /// `value` (converted to this tensor's dtype) in this tensor's shape (`jnp.full_like`). Inside a
    /// trace this is a broadcast scalar constant, not a full-size constant.
    #[track_caller]
    pub fn full_like(&self, value: f64) -> Tensor {
        Tensor::scalar_like(value, self.dtype()).broadcast_unchecked(self.shape().dims())
    }

    /// `0, 1, ..., n-1` as a concrete tensor of `dtype` (`jnp.arange(n)`).
    #[track_caller]
    pub fn arange(n: usize, dtype: DType) -> Tensor {
        Tensor::arange_step(0.0, n as f64, 1.0, dtype)
    }

    /// `start, start+step, ...` up to (excluding) `stop`, concrete, of `dtype` (`jnp.arange(start,
    /// stop, step)`); `ceil((stop-start)/step)` elements, none if that is negative. Values are computed
    /// in f64 and converted. A zero or non-finite step, or a bool dtype, is an error.
    #[track_caller]
    pub fn arange_step(start: f64, stop: f64, step: f64, dtype: DType) -> Tensor {
        if step == 0.0 || !step.is_finite() || !start.is_finite() || !stop.is_finite() {
            let msg =
                format!("arange({start}, {stop}, {step}) needs finite bounds and a nonzero finite step");
            return fail1("arange", &[], msg);
        }
        if dtype == DType::Bool {
            return fail1("arange", &[], "dtype bool is not numeric".into());
        }
        // Saturating: a count past usize stays unaddressable (and is refused) instead of wrapping.
        let n = ((stop - start) / step).ceil().max(0.0) as usize;
        if let Some(e) = crate::tensor::unallocatable("arange", dtype, &[n]) {
            return e;
        }
        let value = |i: usize| start + i as f64 * step;
        if let Some(msg) = n.checked_sub(1).and_then(|last| out_of_range(dtype, value(0), value(last))) {
            return fail1("arange", &[], msg);
        }
        from_f64s(&[n], value, dtype)
    }

    /// `num` evenly spaced values from `start` to `stop` inclusive, concrete (`jnp.linspace`); the
    /// last value is exactly `stop`. `num = 1` gives `[start]`. The values are computed in f64; for
    /// `i32` they are rounded down, as `jnp.linspace` does (`-1..=1` in 5 is `[-1, -1, 0, 0, 1]`);
    /// for `u32`, where that differs only below 0, a value in `(-1, 0)` gives 0 (JAX's floor then
    /// saturating conversion) and lower values are an error, as past the top.
    #[track_caller]
    pub fn linspace(start: f64, stop: f64, num: usize, dtype: DType) -> Tensor {
        if let Some(e) = crate::tensor::unallocatable("linspace", dtype, &[num]) {
            return e;
        }
        let value = |i: usize| {
            let v = if i + 1 == num && num > 1 {
                stop
            } else {
                start + i as f64 * (stop - start) / (num.max(2) - 1) as f64
            };
            if dtype == DType::I32 { v.floor() } else { v }
        };
        if let Some(msg) = num.checked_sub(1).and_then(|last| out_of_range(dtype, value(0), value(last))) {
            return fail1("linspace", &[], msg);
        }
        from_f64s(&[num], value, dtype)
    }

    /// The `n × n` identity matrix, concrete (`jnp.eye(n)`).
    #[track_caller]
    pub fn eye(n: usize, dtype: DType) -> Tensor {
        if let Some(e) = crate::tensor::unallocatable("eye", dtype, &[n, n]) {
            return e;
        }
        from_f64s(&[n, n], |i| if i / n == i % n { 1.0 } else { 0.0 }, dtype)
    }

    /// `0, 1, ...` along `dimension` of `shape`, constant along the others (`lax.broadcasted_iota`);
    /// staged inside a trace. `shape` must have rank ≥ 1 and `dtype` be numeric.
    #[track_caller]
    pub fn iota(dtype: DType, shape: &[usize], dimension: i32) -> Tensor {
        let s = Shape::new(shape);
        if dtype == DType::Bool || shape.is_empty() {
            let msg = format!("needs a numeric dtype and a shape of rank >= 1, got {dtype} and {s}");
            return fail("iota", &[], msg, 1).remove(0);
        }
        let dim = check!(resolve_axis(dimension.into(), &s), "iota", &[]);
        lax::iota(dtype, shape, dim)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_slice_matches_cpython() {
        // Values from CPython's slice(start, stop, step).indices(5) and len(range(...)).
        assert_eq!(python_slice(None, None, 1, 5), (0, 5, 5));
        assert_eq!(python_slice(Some(-2), None, 1, 5), (3, 5, 2));
        assert_eq!(python_slice(Some(1), Some(100), 2, 5), (1, 5, 2));
        assert_eq!(python_slice(None, None, -1, 5), (4, -1, 5));
        assert_eq!(python_slice(Some(3), Some(0), -2, 5), (3, 0, 2));
        assert_eq!(python_slice(Some(-100), Some(100), -1, 5), (-1, 4, 0));
        assert_eq!(python_slice(Some(10), None, -3, 5), (4, -1, 2));
        assert_eq!(python_slice(None, None, 1, 0), (0, 0, 0));
    }

    #[test]
    fn reshape_spec_resolution() {
        let s = Shape::new(&[3, 4]);
        assert_eq!(resolve_reshape(&s, &[2, -1]), Ok(vec![2, 6]));
        assert!(resolve_reshape(&s, &[5, -1]).unwrap_err().contains("(3, 4)"));
        assert!(resolve_reshape(&s, &[-1, -1]).is_err());
        assert!(resolve_reshape(&s, &[-2, 6]).is_err());
        assert!(resolve_reshape(&Shape::new(&[0, 4]), &[0, -1]).is_err());
        assert_eq!(resolve_reshape(&Shape::new(&[0, 4]), &[2, 0]), Ok(vec![2, 0]));
    }
}
