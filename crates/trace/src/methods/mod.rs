//! `jax.numpy`-style methods on [`Tensor`] beyond the elementwise ones: reductions, shape
//! manipulation, indexing and linear algebra, plus concrete constructors (`arange`, `linspace`, `eye`).
//!
//! Conventions shared by every method here:
//! - Axes may be negative (counted from the end, as in numpy) and are normalized against the rank
//!   the axis refers to; arguments that take several axes accept anything implementing [`Axes`]:
//!   an `i32`, an array, slice or `Vec` of `i32`, or [`All`] (numpy's `axis=None`). Most reductions
//!   also have a `*_all()` shorthand for `All`.
//! - Arguments are checked *before* any primitive is bound, so errors quote the user's shapes
//!   (`sum: axis 2 out of range for shape (3, 4)`): inside a trace the error is recorded and
//!   `trace` returns it; eagerly it panics at the caller's line. Bad user input never panics inside
//!   a trace and never indexes out of bounds.
//! - No implicit dtype promotion: operands of two-tensor methods must share a dtype (use `astype`).

mod indexing;
mod linalg;
mod misc;
mod reductions;
mod shape_ops;

use crate::Tensor;
use crate::context::fail;
use kiln_ir::Shape;

/// A set of axes, as `jax.numpy` takes them: one axis, several, or all of them (`axis=None`).
/// Negative axes count from the end.
///
/// ```
/// use kiln_trace::{Tensor, methods::All};
/// let x = Tensor::from_vec(&[2, 3], vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]);
/// assert_eq!(x.sum(-1).to_vec::<f32>(), vec![6.0, 15.0]);
/// assert_eq!(x.sum([0, 1]).item::<f32>(), 21.0);
/// assert_eq!(x.sum(All).item::<f32>(), 21.0);
/// ```
pub trait Axes {
    /// The axes as given (possibly negative, not yet checked), or `None` for all axes.
    fn axes(&self) -> Option<Vec<i64>>;
}

/// Every axis (numpy's `axis=None`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct All;

impl Axes for All {
    fn axes(&self) -> Option<Vec<i64>> {
        None
    }
}

impl Axes for i32 {
    fn axes(&self) -> Option<Vec<i64>> {
        Some(vec![i64::from(*self)])
    }
}

impl Axes for [i32] {
    fn axes(&self) -> Option<Vec<i64>> {
        Some(self.iter().map(|&a| i64::from(a)).collect())
    }
}

impl<const N: usize> Axes for [i32; N] {
    fn axes(&self) -> Option<Vec<i64>> {
        self.as_slice().axes()
    }
}

impl Axes for Vec<i32> {
    fn axes(&self) -> Option<Vec<i64>> {
        self.as_slice().axes()
    }
}

impl Axes for (i32, i32) {
    fn axes(&self) -> Option<Vec<i64>> {
        Some(vec![i64::from(self.0), i64::from(self.1)])
    }
}

impl Axes for (i32, i32, i32) {
    fn axes(&self) -> Option<Vec<i64>> {
        Some(vec![i64::from(self.0), i64::from(self.1), i64::from(self.2)])
    }
}

impl<A: Axes + ?Sized> Axes for &A {
    fn axes(&self) -> Option<Vec<i64>> {
        (**self).axes()
    }
}

/// `axis` normalized into `0..rank`, or `None` if out of range.
pub(crate) fn normalize_axis(axis: i64, rank: usize) -> Option<usize> {
    let r = i64::try_from(rank).ok()?;
    let a = if axis < 0 { axis.checked_add(r)? } else { axis };
    (0..r).contains(&a).then_some(a as usize)
}

/// One axis of `shape`, normalized; the error names the axis and the shape.
pub(crate) fn resolve_axis(axis: i64, shape: &Shape) -> Result<usize, String> {
    normalize_axis(axis, shape.rank()).ok_or_else(|| format!("axis {axis} out of range for shape {shape}"))
}

/// Axes of a rank-`rank` result (e.g. `expand_dims`, `stack`), normalized and distinct.
pub(crate) fn resolve_axes_rank(axes: &[i64], rank: usize, what: &str) -> Result<Vec<usize>, String> {
    let mut out = Vec::with_capacity(axes.len());
    for &a in axes {
        let n = normalize_axis(a, rank).ok_or_else(|| format!("axis {a} out of range for {what}"))?;
        if out.contains(&n) {
            return Err(format!("repeated axis {a} in {axes:?} for {what}"));
        }
        out.push(n);
    }
    Ok(out)
}

/// Axes of `shape` (all of them for [`All`]), normalized and distinct, in the order given.
pub(crate) fn resolve_axes(axes: &dyn Axes, shape: &Shape) -> Result<Vec<usize>, String> {
    match axes.axes() {
        None => Ok((0..shape.rank()).collect()),
        Some(list) => resolve_axes_rank(&list, shape.rank(), &format!("shape {shape}")),
    }
}

/// Reports a user-level error for an op with one result and returns its placeholder.
#[track_caller]
pub(crate) fn fail1(op: &str, operands: &[&Tensor], message: String) -> Tensor {
    fail(op, operands, message, 1).remove(0)
}

/// Unwraps a check's `Ok`, or reports its message as an error of `$op` on `$operands` and returns
/// the placeholder result from the enclosing method. A macro (not a closure) so `#[track_caller]`
/// still sees the user's call site.
macro_rules! check {
    ($res:expr, $op:expr, $operands:expr) => {
        match $res {
            Ok(v) => v,
            Err(message) => return $crate::methods::fail1($op, $operands, message),
        }
    };
}
pub(crate) use check;

/// A shape as Python prints a tuple of possibly negative sizes, e.g. `(5, -1)`.
pub(crate) fn tuple_i64(dims: &[i64]) -> String {
    match dims {
        [d] => format!("({d},)"),
        _ => format!("({})", dims.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(", ")),
    }
}

/// The dims of `shape` with every axis in `axes` set to 1 (the `keepdims` shape of a reduction).
pub(crate) fn keepdims_shape(shape: &Shape, axes: &[usize]) -> Vec<usize> {
    shape.dims().iter().enumerate().map(|(i, &d)| if axes.contains(&i) { 1 } else { d }).collect()
}

/// Applies `lax::transpose` unless `perm` is the identity.
#[track_caller]
pub(crate) fn transpose_if_needed(x: &Tensor, perm: &[usize]) -> Tensor {
    if perm.iter().copied().eq(0..perm.len()) { x.clone() } else { crate::lax::transpose(x, perm) }
}
