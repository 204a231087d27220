//! Neural-network composites (`jax.nn`-style free functions) in numerically stable forms, built from
//! [`Tensor`] methods. Each names the JAX function it matches and its formula; differences from JAX
//! are stated. Errors name the composite and quote the user's shapes, as every method does.

use crate::methods::{Axes, check, fail1, keepdims_shape, resolve_axes};
use crate::numpy::broadcast_shapes;
use crate::{Tensor, lax, where_};
use kiln_ir::{DType, Shape};

/// Floats only: the composites below take `exp`/`log` of their input.
fn check_float(x: &Tensor) -> Result<(), String> {
    if x.dtype().is_float() {
        Ok(())
    } else {
        Err(format!("dtype {} is not a float type (use astype)", x.dtype()))
    }
}

/// The shift that makes `exp(x - shift)` safe over `axes` (keepdims shape): the max, with `±inf` and
/// NaN replaced by 0 (so an all `-inf` lane stays `-inf` instead of `-inf - -inf = NaN`), and 0 for
/// empty lanes. Its gradient is stopped: the results do not depend on it mathematically.
#[track_caller]
fn safe_shift(x: &Tensor, axes: &[usize]) -> Tensor {
    let shape = x.shape();
    let keep = keepdims_shape(&shape, axes);
    if axes.iter().any(|&a| shape[a] == 0) {
        return Tensor::scalar_like(0.0, x.dtype()).broadcast_unchecked(&keep);
    }
    let m = lax::reshape(&lax::reduce(kiln_ir::ReduceOp::Max, x, axes), &keep);
    lax::stop_gradient(&where_(&m.isfinite(), &m, &m.zeros_like()))
}

/// Normalized axes of a float `x`, or the error message.
fn float_axes(x: &Tensor, axes: &dyn Axes) -> Result<Vec<usize>, String> {
    check_float(x)?;
    resolve_axes(axes, &x.shape())
}

/// `jax.nn.softmax(x, axis)`: `exp(x - m) / Σ exp(x - m)` over `axes`, `m` the (gradient-stopped)
/// max. A lane that is all `-inf` gives NaN, as in JAX; a lane with a `+inf` entry gives NaN there
/// and 0 elsewhere (JAX: NaN in the whole lane; the shift is 0 where the max is infinite).
#[track_caller]
pub fn softmax(x: &Tensor, axes: impl Axes) -> Tensor {
    let axes = check!(float_axes(x, &axes), "softmax", &[x]);
    let e = (x - &safe_shift(x, &axes)).exp();
    let s = lax::reshape(&lax::reduce(kiln_ir::ReduceOp::Sum, &e, &axes), &keepdims_shape(&x.shape(), &axes));
    &e / &s
}

/// `jax.nn.log_softmax(x, axis)`: `(x - m) - log Σ exp(x - m)` over `axes`, `m` the max. A lane with a
/// `+inf` entry gives NaN there and `-inf` elsewhere (JAX: NaN in the whole lane).
#[track_caller]
pub fn log_softmax(x: &Tensor, axes: impl Axes) -> Tensor {
    let axes = check!(float_axes(x, &axes), "log_softmax", &[x]);
    let shifted = x - &safe_shift(x, &axes);
    let s = lax::reduce(kiln_ir::ReduceOp::Sum, &shifted.exp(), &axes);
    &shifted - &lax::reshape(&s.log(), &keepdims_shape(&x.shape(), &axes))
}

/// `jax.nn.logsumexp(x, axis)` (= `jax.scipy.special.logsumexp`): `m + log Σ exp(x - m)` over `axes`
/// (removed), `m` the max replaced by 0 where it is `±inf`, so an all `-inf` lane gives `-inf` (not
/// NaN) and a `+inf` entry gives `+inf`. An empty lane gives `-inf`.
///
/// An all `-inf` lane has gradient 0 (the function is constant there; JAX gives NaN, jax-ml/jax#6811):
/// the sum `s` is 0 in such a lane, so the log is taken of `where(s != 0, s, 1)` and the lane's value
/// selected as `-inf` — no infinite `log'(0)` meets the zero `exp(-inf)` in either mode.
#[track_caller]
pub fn logsumexp(x: &Tensor, axes: impl Axes) -> Tensor {
    let axes = check!(float_axes(x, &axes), "logsumexp", &[x]);
    let m = safe_shift(x, &axes);
    let s = lax::reduce(kiln_ir::ReduceOp::Sum, &(x - &m).exp(), &axes);
    let shape = x.shape();
    let reduced: Vec<usize> =
        shape.dims().iter().enumerate().filter(|(i, _)| !axes.contains(i)).map(|(_, &d)| d).collect();
    // `s != 0` is true for NaN, so a NaN entry still gives NaN.
    let nonzero = s.ne(&s.zeros_like());
    let lse = &where_(&nonzero, &s, &s.ones_like()).log() + &lax::reshape(&m, &reduced);
    where_(&nonzero, &lse, &s.full_like(f64::NEG_INFINITY))
}

/// `jax.nn.softplus(x) = log(1 + e^x)`, computed as `max(x, 0) + log1p(exp(-|x|))` so it neither
/// overflows for large `x` (`softplus(100) = 100`) nor loses small values (`softplus(-100) ≈
/// 3.72e-44` in f32).
///
/// `max(x, 0)` and `|x|` are written as selects on `x > 0` so that the derivative is `sigmoid(x)`
/// everywhere, 1/2 at 0 as JAX's (`maximum`'s tie split plus `abs'(0) = 1` would give 0 there).
#[track_caller]
pub fn softplus(x: &Tensor) -> Tensor {
    check!(check_float(x), "softplus", &[x]);
    let zero = x.zeros_like();
    let positive = x.gt(&zero);
    let abs = where_(&positive, x, &-x);
    &where_(&positive, x, &zero) + &(-abs).exp().log1p()
}

/// `jax.nn.sigmoid(x) = 1 / (1 + e^-x)` (the `logistic` primitive).
#[track_caller]
pub fn sigmoid(x: &Tensor) -> Tensor {
    check!(check_float(x), "sigmoid", &[x]);
    x.sigmoid()
}

/// `jax.nn.log_sigmoid(x) = -softplus(-x)`, finite for large `|x|`.
#[track_caller]
pub fn log_sigmoid(x: &Tensor) -> Tensor {
    check!(check_float(x), "log_sigmoid", &[x]);
    -softplus(&-x)
}

/// `jax.nn.relu(x) = max(x, 0)`; NaN propagates and the derivative at 0 is 0 (see [`Tensor::relu`]).
#[track_caller]
pub fn relu(x: &Tensor) -> Tensor {
    x.relu()
}

/// The Euclidean norm `sqrt(Σ x²)` over `axes` (removed), `jnp.linalg.norm(x, axis=axes)` for
/// vectors. Written with a "double where" so that its gradient at `x = 0` is 0 (the subgradient
/// convention) where JAX gives NaN (jax-ml/jax#4177); values are identical.
#[track_caller]
pub fn norm(x: &Tensor, axes: impl Axes) -> Tensor {
    let axes = check!(float_axes(x, &axes), "norm", &[x]);
    let ss = lax::reduce(kiln_ir::ReduceOp::Sum, &(x * x), &axes);
    let zero = ss.zeros_like();
    let positive = ss.gt(&zero);
    where_(&positive, &where_(&positive, &ss, &ss.ones_like()).sqrt(), &zero)
}

/// `jax.nn.one_hot(indices, num_classes, dtype)`: shape `indices.shape + (num_classes,)`, 1 where the
/// last index equals the class; out-of-range (and negative) indices give an all-zero row.
#[track_caller]
pub fn one_hot(indices: &Tensor, num_classes: usize, dtype: DType) -> Tensor {
    let d = indices.dtype();
    if !d.is_int() {
        return fail1("one_hot", &[indices], format!("indices dtype {d} is not i32 or u32"));
    }
    let classes = lax::iota(d, &[num_classes], 0);
    let mut col = indices.shape().dims().to_vec();
    col.push(1);
    lax::reshape(indices, &col).eq(&classes).astype(dtype)
}

/// Gumbel-softmax with the noise passed in: `y = softmax((logits + gumbel_noise) / tau)` over the
/// last axis. With `hard`, the straight-through estimator `y_hard - stop_gradient(y) + y`, `y_hard`
/// the one-hot of `argmax y` (values one-hot, gradients those of `y`). Draw the noise as
/// `-log(-log(u))`, `u ~ U(0, 1)`.
#[track_caller]
pub fn gumbel_softmax(logits: &Tensor, gumbel_noise: &Tensor, tau: f64, hard: bool) -> Tensor {
    let ops = [logits, gumbel_noise];
    check!(check_float(logits), "gumbel_softmax", &ops);
    if logits.ty() != gumbel_noise.ty() || logits.ndim() == 0 {
        let msg = format!(
            "logits and noise must have one type of rank >= 1, got {} and {}",
            logits.ty(),
            gumbel_noise.ty()
        );
        return fail1("gumbel_softmax", &ops, msg);
    }
    let y = softmax(&(&(logits + gumbel_noise) / tau), -1);
    if !hard {
        return y;
    }
    let n = logits.shape().dims().last().copied().unwrap_or(0);
    if n == 0 {
        return y;
    }
    let y_hard = one_hot(&y.argmax(-1), n, y.dtype());
    &(&y_hard - &lax::stop_gradient(&y)) + &y
}

/// Component `i` of the last axis, kept as a size-1 axis.
#[track_caller]
fn component(t: &Tensor, i: i64) -> Tensor {
    t.slice_axis(-1, Some(i), Some(i + 1), 1)
}

/// `jnp.cross(a, b)` of 3-vectors along the last axis (leading axes broadcast):
/// `(a1 b2 - a2 b1, a2 b0 - a0 b2, a0 b1 - a1 b0)`.
#[track_caller]
pub fn cross(a: &Tensor, b: &Tensor) -> Tensor {
    let ops = [a, b];
    let (sa, sb) = (a.shape(), b.shape());
    let last = |s: &Shape| s.dims().last().copied();
    if last(&sa) != Some(3) || last(&sb) != Some(3) {
        return fail1(
            "cross",
            &ops,
            format!("the last axis of both must have size 3, got shapes {sa} and {sb}"),
        );
    }
    if a.dtype() != b.dtype() {
        return fail1("cross", &ops, format!("dtypes {} and {} differ (use astype)", a.dtype(), b.dtype()));
    }
    if broadcast_shapes(sa.dims(), sb.dims()).is_none() {
        return fail1("cross", &ops, format!("shapes {sa} and {sb} cannot be broadcast together"));
    }
    let (a0, a1, a2) = (component(a, 0), component(a, 1), component(a, 2));
    let (b0, b1, b2) = (component(b, 0), component(b, 1), component(b, 2));
    let c0 = &(&a1 * &b2) - &(&a2 * &b1);
    let c1 = &(&a2 * &b0) - &(&a0 * &b2);
    let c2 = &(&a0 * &b1) - &(&a1 * &b0);
    Tensor::concatenate(&[c0, c1, c2], -1)
}

/// The mean of `data`'s rows per segment: `segment_sum(data) / max(count, 1)`, so an empty segment
/// gives 0 (as `torch_scatter.scatter_mean`; JAX has no `segment_mean`). Ids outside
/// `[0, num_segments)` are dropped; integer data is converted to f32 first.
#[track_caller]
pub fn segment_mean(data: &Tensor, segment_ids: &Tensor, num_segments: usize) -> Tensor {
    let ops = [data, segment_ids];
    let (sd, si) = (data.shape(), segment_ids.shape());
    if !segment_ids.dtype().is_int() || data.dtype() == DType::Bool || sd.rank() == 0 {
        let msg = format!(
            "needs numeric data of rank >= 1 and integer ids, got {} and {}",
            data.ty(),
            segment_ids.ty()
        );
        return fail1("segment_mean", &ops, msg);
    }
    if si.dims() != [sd[0]] {
        let msg = format!("segment ids shape {si} is not ({},) for data shape {sd}", sd[0]);
        return fail1("segment_mean", &ops, msg);
    }
    let data = if data.dtype().is_float() { data.clone() } else { data.astype(DType::F32) };
    let sums = data.segment_sum(segment_ids, num_segments);
    let ones = Tensor::scalar_like(1.0, data.dtype()).broadcast_unchecked(&[sd[0]]);
    let counts = ones.segment_sum(segment_ids, num_segments);
    let counts = counts.maximum(&counts.ones_like());
    let mut col = vec![1; sd.rank()];
    col[0] = num_segments;
    &sums / &lax::reshape(&counts, &col)
}
