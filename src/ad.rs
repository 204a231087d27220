//! Automatic differentiation for users: `grad`, `value_and_grad`, `vjp`, `jvp`, `linearize`,
//! `jacfwd`, `jacrev`, `hessian` — JAX's API over kiln's IR transforms (`kiln_transform::ad`).
//!
//! Each call traces the user's function on the argument types into IR, applies the transform, and
//! replays the result in the current context: inside another trace (e.g. `grad(grad(f))`, or a
//! function being traced for `jit`) the derivative is recorded there; on concrete tensors it is
//! computed at once. Errors follow kiln's policy: recorded in the enclosing trace, or a panic at the
//! caller's line in eager mode.

use kiln_ir::SrcLoc;
use kiln_ir::{DType, Function, TensorType};
use kiln_trace::{Tensor, Tree, propagate_error, report_error, with_api_location};
use kiln_transform::ad::{jvp_replay, vjp_replay};
use std::ops::Range;
use std::panic::Location;

/// A traced user function, flattened: parameters are the argument leaves, then captured tracers.
pub(crate) struct Flat<R> {
    /// The traced function: parameters are the argument leaves, then the captured tracers.
    pub(crate) function: Function,
    /// Tracers of enclosing traces that `function` uses (its trailing parameters).
    pub(crate) captured: Vec<Tensor>,
    /// The output structure with placeholder leaves.
    pub(crate) output: R,
}

/// Traces `f` on placeholders shaped like `args`. On error, reports it in the enclosing trace (or
/// panics eagerly) and returns the output structure with placeholder leaves, so the caller can go on
/// with placeholder results: the enclosing trace fails with the recorded error.
#[track_caller]
pub(crate) fn flatten<A: Tree, R: Tree>(f: impl FnOnce(A) -> R, args: &A) -> Result<Flat<R>, R> {
    let shapes = placeholders_like(args);
    match kiln_trace::trace_or_template(f, &shapes) {
        Ok(t) => Ok(Flat { function: t.function, captured: t.captured, output: t.output }),
        Err((e, template)) => {
            propagate_error(e);
            Err(template)
        }
    }
}

fn zeros(ty: &TensorType) -> Tensor {
    kiln_trace::lax::broadcast_in_dim(&Tensor::scalar_like(0.0, ty.dtype), ty.shape.dims(), &[])
}

pub(crate) fn placeholders_like<T: Tree>(t: &T) -> T {
    t.map(|x| {
        let ty = x.ty();
        Tensor::placeholder(ty.dtype, ty.shape.dims())
    })
}

/// Arguments whose top-level elements can be selected by position (`argnums`): tuples, and any
/// single value (one element).
pub trait Args: Tree {
    /// The leaf index range of each top-level element.
    fn element_ranges(&self) -> Vec<Range<usize>>;
}

impl Args for Tensor {
    fn element_ranges(&self) -> Vec<Range<usize>> {
        vec![0..1]
    }
}

impl<T: Tree> Args for Vec<T> {
    fn element_ranges(&self) -> Vec<Range<usize>> {
        let mut start = 0;
        self.iter()
            .map(|x| {
                let n = x.leaves().len();
                start += n;
                start - n..start
            })
            .collect()
    }
}

macro_rules! tuple_args {
    ($($name:ident $idx:tt),+) => {
        impl<$($name: Tree),+> Args for ($($name,)+) {
            fn element_ranges(&self) -> Vec<Range<usize>> {
                let mut start = 0;
                let mut out = Vec::new();
                $(
                    let n = self.$idx.leaves().len();
                    out.push(start..start + n);
                    start += n;
                )+
                let _ = start;
                out
            }
        }
    };
}
tuple_args!(A 0);
tuple_args!(A 0, B 1);
tuple_args!(A 0, B 1, C 2);
tuple_args!(A 0, B 1, C 2, D 3);
tuple_args!(A 0, B 1, C 2, D 3, E 4);
tuple_args!(A 0, B 1, C 2, D 3, E 4, F 5);

/// Which leaves are differentiated: all, or those of the selected top-level elements.
fn selected_leaves<A: Args>(args: &A, argnums: Option<&[usize]>) -> Vec<bool> {
    let ranges = args.element_ranges();
    let n = ranges.last().map_or(0, |r| r.end);
    match argnums {
        None => vec![true; n],
        Some(nums) => {
            let mut sel = vec![false; n];
            for &k in nums {
                if let Some(r) = ranges.get(k) {
                    sel[r.clone()].iter_mut().for_each(|s| *s = true);
                }
            }
            sel
        }
    }
}

/// The core of `grad`/`value_and_grad`: `f`'s first output must be a float scalar; returns its value,
/// the rest of `f`'s output (aux), and the cotangent of every selected leaf.
#[track_caller]
fn value_and_grad_impl<A: Args, R: Tree>(
    op: &str,
    f: impl FnOnce(A) -> (Tensor, R),
    args: A,
    argnums: Option<&[usize]>,
) -> ((Tensor, R), A) {
    let leaves = args.leaves();
    let sel = selected_leaves(&args, argnums);
    if let Some(nums) = argnums {
        let n_elems = args.element_ranges().len();
        if let Some(&k) = nums.iter().find(|&&k| k >= n_elems) {
            report_error(op, &[], format!("argnums {k} is out of range for {n_elems} arguments"));
        }
    }
    for (i, (l, s)) in leaves.iter().zip(&sel).enumerate() {
        if *s && !l.dtype().is_float() {
            // JAX: "grad requires real- or complex-valued inputs (input dtype that is a sub-dtype of
            // np.inexact), but got int32".
            let msg = format!(
                "differentiation requires float inputs, but argument leaf {i} has dtype {} (shape {}); \
                 pass it through argnums-excluded arguments or convert it with astype",
                l.dtype(),
                l.shape()
            );
            report_error(op, &[l], msg);
        }
    }
    let give_up = |out: &(Tensor, R)| (placeholders_like(out), placeholders_like(&args));
    let flat = match flatten(f, &args) {
        Ok(flat) => flat,
        Err(out) => return give_up(&out),
    };
    let out_types = flat.function.output_types();
    let value_ty = &out_types[0];
    if value_ty.rank() != 0 || !value_ty.dtype.is_float() {
        let msg = format!("the function must return a float scalar to differentiate, got {value_ty}");
        report_error(op, &leaves.iter().collect::<Vec<_>>(), msg);
        return give_up(&flat.output);
    }
    let primals: Vec<Tensor> = leaves.iter().chain(&flat.captured).cloned().collect();
    let mut cts: Vec<Option<Tensor>> = vec![None; out_types.len()];
    cts[0] = Some(Tensor::scalar_like(1.0, value_ty.dtype));
    let (outs, param_cts) = vjp_replay(&flat.function, &primals, &cts);
    let grads: Vec<Tensor> = param_cts
        .into_iter()
        .zip(&leaves)
        .zip(&sel)
        .map(|((c, l), s)| match (c, s) {
            (Some(c), true) => c,
            _ => zeros(&l.ty()),
        })
        .collect();
    (flat.output.rebuild(outs), args.rebuild(grads))
}

/// `jax.grad`: the gradient of a scalar-valued `f` with respect to all its (float) arguments, with
/// the arguments' structure.
///
/// Errors (recorded in the enclosing trace, or a panic in eager mode): an integer/bool argument leaf
/// (name its index and dtype), a non-scalar or non-float output.
///
/// ```
/// use kiln::prelude::*;
/// let f = |x: Tensor| (&x * &x).sum(All);           // sum x²
/// let g = grad(f)(Tensor::from_vec(&[3], vec![1.0f64, -2.0, 0.5]));
/// assert_eq!(g.to_vec::<f64>(), vec![2.0, -4.0, 1.0]);
/// ```
#[track_caller]
pub fn grad<A: Args>(f: impl Fn(A) -> Tensor) -> impl Fn(A) -> A {
    grad_at(f, here())
}

/// [`grad`] whose errors point at `at`.
fn grad_at<A: Args>(f: impl Fn(A) -> Tensor, at: SrcLoc) -> impl Fn(A) -> A {
    move |args: A| with_api_location(&at, || value_and_grad_impl("grad", |a| (f(a), ()), args, None).1)
}

/// The user's call site of a `#[track_caller]` transform, where errors of the closure it returns
/// point (closures cannot be `#[track_caller]`).
#[track_caller]
pub(crate) fn here() -> SrcLoc {
    SrcLoc::from_location(Location::caller())
}

/// `jax.grad(f, argnums)`: the gradient with respect to the selected top-level arguments (of a
/// tuple); the other arguments' entries are zeros of their own dtype (JAX returns only the selected
/// ones; kiln keeps the argument structure).
#[track_caller]
pub fn grad_argnums<A: Args>(f: impl Fn(A) -> Tensor, argnums: &[usize]) -> impl Fn(A) -> A {
    let argnums = argnums.to_vec();
    let at = here();
    move |args: A| {
        with_api_location(&at, || value_and_grad_impl("grad", |a| (f(a), ()), args, Some(&argnums)).1)
    }
}

/// `jax.value_and_grad`: `(f(args), grad(f)(args))` in one pass.
#[track_caller]
pub fn value_and_grad<A: Args>(f: impl Fn(A) -> Tensor) -> impl Fn(A) -> (Tensor, A) {
    let at = here();
    move |args: A| {
        let ((v, ()), g) =
            with_api_location(&at, || value_and_grad_impl("value_and_grad", |a| (f(a), ()), args, None));
        (v, g)
    }
}

/// `jax.value_and_grad(f, has_aux=True)`: `f` returns `(loss, aux)`; the result is
/// `((loss, aux), grad)`; aux is not differentiated.
#[track_caller]
pub fn value_and_grad_aux<A: Args, Aux: Tree>(
    f: impl Fn(A) -> (Tensor, Aux),
) -> impl Fn(A) -> ((Tensor, Aux), A) {
    let at = here();
    move |args: A| with_api_location(&at, || value_and_grad_impl("value_and_grad", &f, args, None))
}

/// `jax.vjp`: the outputs of `f` at `primals` and a function from output cotangents to argument
/// cotangents. (The returned function replays the forward pass on each call.)
#[track_caller]
pub fn vjp<A: Tree, R: Tree>(f: impl FnOnce(A) -> R, primals: A) -> (R, impl Fn(R) -> A) {
    let at = here();
    let leaves = primals.leaves();
    // On error (reported) the function is `None`: results and cotangents are placeholders.
    let (function, all, out) = match flatten(f, &primals) {
        Ok(flat) => {
            let all: Vec<Tensor> = leaves.iter().chain(&flat.captured).cloned().collect();
            // Reverse mode's forward pass (no cotangents yet): a `custom_vjp` function runs its
            // `fwd`, as in JAX, so forward mode over this (`jacfwd(jacrev(f))`) sees ordinary ops.
            let (outs, _) = vjp_replay(&flat.function, &all, &vec![None; flat.function.outputs.len()]);
            (Some(flat.function), all, flat.output.rebuild(outs))
        }
        Err(output) => (None, vec![], output),
    };
    let out_template = placeholders_like(&out);
    let pull = move |ct: R| -> A {
        let Some(function) = &function else { return placeholders_like(&primals) };
        if !same_types(&ct, &out_template) {
            let msg = format!(
                "the cotangent must have the outputs' structure and types {} {:?}, got {} {:?}",
                out_template.structure(),
                types(&out_template),
                ct.structure(),
                types(&ct)
            );
            with_api_location(&at, || report_error("vjp", &ct.leaves().iter().collect::<Vec<_>>(), msg));
            return placeholders_like(&primals);
        }
        let cts: Vec<Option<Tensor>> = ct.leaves().into_iter().map(Some).collect();
        let (_, param_cts) = vjp_replay(function, &all, &cts);
        let grads =
            param_cts.into_iter().zip(&leaves).map(|(c, l)| c.unwrap_or_else(|| zeros(&l.ty()))).collect();
        primals.rebuild(grads)
    };
    (out, pull)
}

fn types<T: Tree>(t: &T) -> Vec<TensorType> {
    t.leaves().iter().map(|l| l.ty()).collect()
}

/// Same tree structure and leaf types.
fn same_types<T: Tree>(a: &T, b: &T) -> bool {
    a.structure() == b.structure() && types(a) == types(b)
}

/// `jax.jvp`: `(f(primals), J·tangents)`; tangents have the primals' structure and types.
#[track_caller]
pub fn jvp<A: Tree, R: Tree>(f: impl FnOnce(A) -> R, primals: A, tangents: A) -> (R, R) {
    if !same_types(&primals, &tangents) {
        // JAX: "primal and tangent arguments to jax.jvp do not match".
        let msg = format!(
            "primals and tangents must have the same structure and types: primals {} {:?}, tangents {} {:?}",
            primals.structure(),
            types(&primals),
            tangents.structure(),
            types(&tangents)
        );
        report_error("jvp", &tangents.leaves().iter().collect::<Vec<_>>(), msg);
        let tangents = placeholders_like(&primals);
        return jvp(f, primals, tangents);
    }
    let flat = match flatten(f, &primals) {
        Ok(flat) => flat,
        Err(out) => return (placeholders_like(&out), out),
    };
    let mut all = primals.leaves();
    let mut ts: Vec<Option<Tensor>> = tangents.leaves().into_iter().map(Some).collect();
    all.extend(flat.captured.iter().cloned());
    ts.extend(flat.captured.iter().map(|_| None));
    let (outs, touts) = jvp_replay(&flat.function, &all, &ts);
    let tout_vals = touts.into_iter().zip(&outs).map(|(t, o)| t.unwrap_or_else(|| zeros(&o.ty()))).collect();
    (flat.output.rebuild(outs), flat.output.rebuild(tout_vals))
}

/// `jax.linearize`: `f(primals)` and the linear map `t ↦ J·t` (replayed on each call).
#[track_caller]
pub fn linearize<A: Tree + Clone, R: Tree>(f: impl Fn(A) -> R + Clone, primals: A) -> (R, impl Fn(A) -> R) {
    let (out, _) = jvp(f.clone(), primals.clone(), primals.map(|t| t * 0.0));
    let lin = move |t: A| jvp(f.clone(), primals.clone(), t).1;
    (out, lin)
}

/// `jax.jacfwd` for a function of one tensor: the Jacobian, of shape `out.shape ++ in.shape`, by one
/// forward-mode pass per input element.
#[track_caller]
pub fn jacfwd(f: impl Fn(Tensor) -> Tensor + Clone) -> impl Fn(Tensor) -> Tensor + Clone {
    let at = here();
    move |x: Tensor| with_api_location(&at, || jacfwd_at(&f, x))
}

fn jacfwd_at(f: &(impl Fn(Tensor) -> Tensor + Clone), x: Tensor) -> Tensor {
    if let Some(stand_in) = non_float_input("jacfwd", f, &x) {
        return stand_in;
    }
    {
        let n = x.size();
        let in_shape = x.shape();
        let out_shape = f(x.clone()).shape();
        let jacobian_zeros =
            || zeros(&TensorType::new(x.dtype(), [out_shape.dims(), in_shape.dims()].concat()));
        let mut cols = Vec::with_capacity(n);
        for j in 0..n {
            let e = basis(&x.ty(), j);
            let (_, t) = jvp(f.clone(), x.clone(), e);
            if kiln_trace::trace_failed() {
                // The other n - j passes would fail alike; the trace is discarded.
                return jacobian_zeros();
            }
            cols.push(t);
        }
        if n == 0 {
            return jacobian_zeros();
        }
        // cols[j] has the output shape; stack along a new last axis, then reshape to out ++ in.
        let stacked = Tensor::stack(&cols, -1);
        stacked.reshape(
            &[out_shape.dims(), in_shape.dims()].concat().iter().map(|&d| d as i64).collect::<Vec<_>>(),
        )
    }
}

/// `jax.jacrev` for a function of one tensor: the Jacobian, of shape `out.shape ++ in.shape`, by one
/// reverse-mode pass per output element.
#[track_caller]
pub fn jacrev(f: impl Fn(Tensor) -> Tensor + Clone) -> impl Fn(Tensor) -> Tensor + Clone {
    let at = here();
    move |x: Tensor| with_api_location(&at, || jacrev_at(&f, x))
}

fn jacrev_at(f: &(impl Fn(Tensor) -> Tensor + Clone), x: Tensor) -> Tensor {
    if let Some(stand_in) = non_float_input("jacrev", f, &x) {
        return stand_in;
    }
    {
        let (y, pull) = vjp(f.clone(), x.clone());
        if !y.dtype().is_float() {
            // JAX: "jacrev requires real-valued outputs (output dtype that is a sub-dtype of
            // np.floating), but got int32".
            let msg = format!("differentiation requires a float output, got {}", y.ty());
            report_error("jacrev", &[&y], msg);
            let dims = [y.shape().dims(), x.shape().dims()].concat();
            return zeros(&TensorType::new(x.dtype(), dims));
        }
        let m = y.size();
        let dims = [y.shape().dims(), x.shape().dims()].concat();
        let mut rows = Vec::with_capacity(m);
        for i in 0..m {
            rows.push(pull(basis(&y.ty(), i)));
            if kiln_trace::trace_failed() {
                // As in `jacfwd`: stop at the first failed pass.
                return zeros(&TensorType::new(x.dtype(), dims));
            }
        }
        if m == 0 {
            return zeros(&TensorType::new(x.dtype(), dims));
        }
        Tensor::stack(&rows, 0).reshape(&dims.iter().map(|&d| d as i64).collect::<Vec<_>>())
    }
}

/// `jax.hessian` for a scalar function of one tensor: `jacfwd(jacrev(f))`, shape `in.shape ++ in.shape`.
#[track_caller]
pub fn hessian(f: impl Fn(Tensor) -> Tensor + Clone + 'static) -> impl Fn(Tensor) -> Tensor + Clone {
    let at = here();
    let inner = at.clone();
    let g = move |x: Tensor| grad_at(f.clone(), inner.clone())(x);
    move |x: Tensor| with_api_location(&at, || jacfwd_at(&g, x))
}

/// The error of a Jacobian of a non-float input (JAX: "jacfwd requires real-valued inputs (input
/// dtype that is a sub-dtype of np.floating), but got int32"): reported (a panic in eager mode, the
/// trace's `Err` inside one), with f32 zeros of the Jacobian's shape (`f`'s output shape, from `f` of
/// `x` as f32, then `x`'s shape) as the trace's stand-in result, so code after it sees the shape it
/// expects. That calls `f` once more, as the Jacobians themselves call it once besides their
/// passes. `None` for floats.
fn non_float_input(op: &str, f: &impl Fn(Tensor) -> Tensor, x: &Tensor) -> Option<Tensor> {
    if x.dtype().is_float() {
        return None;
    }
    let msg = format!("differentiation requires a float input, got {}; convert it with astype", x.ty());
    report_error(op, &[x], msg);
    let out = f(x.astype(DType::F32)).shape();
    Some(zeros(&TensorType::new(DType::F32, [out.dims(), x.shape().dims()].concat())))
}

/// The `j`-th standard basis vector of a type (one at flat index `j`).
fn basis(ty: &TensorType, j: usize) -> Tensor {
    let n = ty.shape.size();
    let mut v = vec![0.0f64; n];
    v[j] = 1.0;
    Tensor::from_vec(ty.shape.dims(), v).astype(ty.dtype)
}
