//! Structured control flow inside traced (or eager) code: [`scan`], [`while_loop`], [`switch`] and
//! [`cond`] (JAX's `lax.scan`, `lax.while_loop`, `lax.switch`, `lax.cond`).
//!
//! Each body is traced once into a closed sub-function. Tracers of enclosing traces that a body uses
//! are captured as extra parameters of the body (closure conversion) and passed as leading operands
//! (`scan`'s consts, `while_loop`'s cond/body consts, extra `cond` operands), so sub-functions stay
//! closed. Errors inside a body are reported at the user's line inside the body; structural errors
//! (a carry whose type changes, branches whose outputs differ) at the call of `scan`/`cond`.

use crate::context::{self, Frame, bind, fail};
use crate::{Tensor, Tree};
use kiln_ir::{DType, Function, Prim, TensorType};

/// A body traced into a closed function: its parameters are `captured ++ own parameters`.
struct Body {
    func: Function,
    captured: Vec<Tensor>,
    /// The output leaves' structure template (leaves are dead tracers; only the shape of the tree is used).
    out_types: Vec<TensorType>,
}

/// Traces `f` on parameters of types `param_types`; returns its output (as a structure template) and
/// the closed function, or `None` after recording the body's error in the enclosing trace (eagerly,
/// it panics).
#[track_caller]
fn trace_body<R>(
    param_types: &[TensorType],
    f: impl FnOnce(Vec<Tensor>) -> R,
    leaves: impl Fn(&R) -> Vec<Tensor>,
) -> (R, Option<Body>) {
    let id = context::push_trace();
    let params: Vec<Tensor> = param_types.iter().map(|t| context::new_param(id, t.clone())).collect();
    // End the body's trace even if the user's body panics.
    struct Guard(Option<u64>);
    impl Drop for Guard {
        fn drop(&mut self) {
            if let Some(id) = self.0.take() {
                context::pop_trace(id);
            }
        }
    }
    let mut guard = Guard(Some(id));
    let out = f(params);
    let out_leaves = leaves(&out);
    let out_vars: Vec<_> = out_leaves.iter().map(|t| context::var_in(id, t)).collect();
    guard.0 = None;
    let Frame { mut func, error, captured, .. } = context::pop_trace(id);
    if let Some(err) = error {
        context::propagate_error(err);
        return (out, None);
    }
    func.outputs = out_vars;
    // Captured tracers were appended as parameters after the body's own: move them to the front.
    let own = param_types.len();
    func.params.rotate_left(own);
    let out_types = func.output_types();
    (out, Some(Body { func, captured, out_types }))
}

fn types(ts: &[Tensor]) -> Vec<TensorType> {
    ts.iter().map(|t| t.ty()).collect()
}

fn placeholders<T: Tree>(template: &T, tys: &[TensorType]) -> T {
    template.rebuild(tys.iter().map(|t| Tensor::placeholder(t.dtype, t.shape.dims())).collect())
}

/// Placeholders shaped like `value` (whose leaves may be tracers of an ended trace), returned after
/// an error has been recorded: nobody reads them, the trace fails.
fn placeholders_like<T: Tree>(value: &T) -> T {
    value.map(|t| {
        let ty = t.ty();
        Tensor::placeholder(ty.dtype, ty.shape.dims())
    })
}

/// The number of scan steps: the common leading size of the `xs` arrays, checked against `given`.
fn scan_length(x_leaves: &[Tensor], given: Option<usize>) -> Result<usize, String> {
    let Some(x0) = x_leaves.first() else {
        return given.ok_or_else(|| "xs has no arrays; give the length in ScanOptions".to_string());
    };
    let lead = |t: &Tensor| t.shape().dims().first().copied();
    if let Some(t) = x_leaves.iter().find(|t| lead(t).is_none()) {
        return Err(format!("every xs array needs a leading axis to scan over, got shape {}", t.shape()));
    }
    let n = lead(x0).unwrap_or(0);
    if let Some(t) = x_leaves.iter().find(|t| lead(t) != Some(n)) {
        return Err(format!("xs arrays have different leading sizes: {} and {}", x0.shape(), t.shape()));
    }
    match given {
        Some(g) if g != n => Err(format!("length {g} differs from the leading size {n} of xs")),
        _ => Ok(n),
    }
}

/// Options of [`scan_with`].
#[derive(Clone, Copy, Debug, Default)]
pub struct ScanOptions {
    /// Number of steps; required when `xs` has no leaves, otherwise it must equal their leading size.
    pub length: Option<usize>,
    /// Iterate from the last element of `xs` (ys are still stored at their input positions).
    pub reverse: bool,
}

/// `lax.scan`: `body(carry, x) -> (carry, y)` applied along the leading axis of every leaf of `xs`;
/// returns the final carry and the `y`s stacked along a new leading axis.
///
/// The carry's structure, dtypes and shapes must be the same on input and output.
///
/// ```
/// use kiln_trace::{Tensor, scan};
/// let xs = Tensor::from_vec(&[4], vec![1.0f32, 2.0, 3.0, 4.0]);
/// let (total, running) = scan(|c: Tensor, x: Tensor| { let s = &c + &x; (s.clone(), s) }, Tensor::scalar(0.0f32), xs);
/// assert_eq!(total.item::<f32>(), 10.0);
/// assert_eq!(running.to_vec::<f32>(), vec![1.0, 3.0, 6.0, 10.0]);
/// ```
#[track_caller]
pub fn scan<C: Tree, X: Tree, Y: Tree>(body: impl FnOnce(C, X) -> (C, Y), init: C, xs: X) -> (C, Y) {
    scan_with(body, init, xs, ScanOptions::default())
}

/// [`scan`] with a given length (for `xs = ()`) or in reverse.
#[track_caller]
pub fn scan_with<C: Tree, X: Tree, Y: Tree>(
    body: impl FnOnce(C, X) -> (C, Y),
    init: C,
    xs: X,
    opts: ScanOptions,
) -> (C, Y) {
    let carry = init.leaves();
    let x_leaves = xs.leaves();
    let all: Vec<&Tensor> = carry.iter().chain(&x_leaves).collect();
    let length = match scan_length(&x_leaves, opts.length) {
        Ok(n) => Some(n),
        Err(msg) => {
            fail("scan", &all, msg, 0);
            None
        }
    };
    let carry_types = types(&carry);
    // Slice types: leading axis dropped (leniently, so the body can still be traced after an error).
    let x_types: Vec<TensorType> = x_leaves
        .iter()
        .map(|t| TensorType::new(t.dtype(), t.shape().dims().get(1..).unwrap_or(&[])))
        .collect();
    let param_types: Vec<TensorType> = carry_types.iter().chain(&x_types).cloned().collect();
    let n_carry = carry.len();
    let ((c_out, y_out), traced) = trace_body(
        &param_types,
        |params| {
            let (c, x) = params.split_at(n_carry);
            body(init.rebuild(c.to_vec()), xs.rebuild(x.to_vec()))
        },
        |(c, y): &(C, Y)| {
            let mut v = c.leaves();
            y.flatten_into(&mut v);
            v
        },
    );
    let give_up = || (placeholders(&init, &carry_types), placeholders_like(&y_out));
    let (Some(length), Some(b)) = (length, traced) else {
        return give_up();
    };
    // The carry must keep its structure and types (JAX #15178: name the component and both types).
    if c_out.structure() != init.structure() {
        let msg = format!(
            "the body returns a carry of structure {} but init has structure {}",
            c_out.structure(),
            init.structure()
        );
        fail("scan", &all, msg, 0);
        return give_up();
    }
    if let Some(i) = (0..n_carry).find(|&i| b.out_types[i] != carry_types[i]) {
        let msg = format!(
            "the body returns carry component {i} as {} but the initial carry is {}",
            b.out_types[i], carry_types[i]
        );
        fail("scan", &all, msg, 0);
        return give_up();
    }
    let n_out = b.out_types.len();
    let prim = Prim::Scan {
        length,
        reverse: opts.reverse,
        num_consts: b.captured.len(),
        num_carry: n_carry,
        body: Box::new(b.func),
    };
    let operands: Vec<&Tensor> = b.captured.iter().chain(&carry).chain(&x_leaves).collect();
    let outs = bind(prim, &operands, n_out);
    let (c, y) = outs.split_at(n_carry);
    (init.rebuild(c.to_vec()), y_out.rebuild(y.to_vec()))
}

/// `lax.while_loop`: while `cond_fun(&state)` (a bool scalar) is true, `state = body_fun(state)`.
///
/// Forward only in reverse mode unless bounded: see [`while_loop_bounded`].
#[track_caller]
pub fn while_loop<S: Tree>(cond_fun: impl FnOnce(&S) -> Tensor, body_fun: impl FnOnce(S) -> S, init: S) -> S {
    while_impl(cond_fun, body_fun, init, None)
}

/// [`while_loop`] that stops after at most `max_iters` iterations (which makes it
/// reverse-differentiable, as a masked scan).
#[track_caller]
pub fn while_loop_bounded<S: Tree>(
    cond_fun: impl FnOnce(&S) -> Tensor,
    body_fun: impl FnOnce(S) -> S,
    init: S,
    max_iters: u64,
) -> S {
    while_impl(cond_fun, body_fun, init, Some(max_iters))
}

#[track_caller]
fn while_impl<S: Tree>(
    cond_fun: impl FnOnce(&S) -> Tensor,
    body_fun: impl FnOnce(S) -> S,
    init: S,
    max_iters: Option<u64>,
) -> S {
    let state = init.leaves();
    let state_types = types(&state);
    let refs: Vec<&Tensor> = state.iter().collect();
    let give_up = || placeholders(&init, &state_types);
    let (_, Some(c)) = trace_body(&state_types, |p| cond_fun(&init.rebuild(p)), |t: &Tensor| vec![t.clone()])
    else {
        return give_up();
    };
    if c.out_types != [TensorType::scalar(DType::Bool)] {
        fail("while_loop", &refs, format!("cond_fun must return a bool[] scalar, got {}", c.out_types[0]), 0);
        return give_up();
    }
    let (s_out, Some(b)) = trace_body(&state_types, |p| body_fun(init.rebuild(p)), |s: &S| s.leaves()) else {
        return give_up();
    };
    if s_out.structure() != init.structure() || b.out_types != state_types {
        let msg = match (0..state_types.len()).find(|&i| b.out_types.get(i) != Some(&state_types[i])) {
            Some(i) if s_out.structure() == init.structure() => format!(
                "body_fun returns state component {i} as {} but the initial state is {}",
                b.out_types[i], state_types[i]
            ),
            _ => format!(
                "body_fun returns a state of structure {} but init has structure {}",
                s_out.structure(),
                init.structure()
            ),
        };
        fail("while_loop", &refs, msg, 0);
        return give_up();
    }
    let prim = Prim::WhileLoop {
        cond_consts: c.captured.len(),
        body_consts: b.captured.len(),
        cond: Box::new(c.func),
        body: Box::new(b.func),
        max_iters,
    };
    let operands: Vec<&Tensor> = c.captured.iter().chain(&b.captured).chain(&state).collect();
    init.rebuild(bind(prim, &operands, state.len()))
}

/// A branch of [`switch`]: a function of the operands.
pub type Branch<'a, A, R> = Box<dyn FnOnce(A) -> R + 'a>;

/// `lax.switch`: runs `branches[clamp(index, 0, n-1)](operands)`; `index` is an i32 scalar. Every
/// branch must return the same structure and types.
///
/// # Panics
/// At the caller's line when `branches` is empty, even while tracing (JAX raises `ValueError`
/// there): with no branch there is no result structure to stand in for an error.
#[track_caller]
pub fn switch<A: Tree, R: Tree>(index: &Tensor, branches: Vec<Branch<'_, A, R>>, operands: A) -> R {
    switch_impl("switch", index, branches, operands)
}

/// [`switch`], reporting errors as `op` (`cond` names its branches `false_fun` and `true_fun`).
#[track_caller]
fn switch_impl<A: Tree, R: Tree>(
    op: &str,
    index: &Tensor,
    branches: Vec<Branch<'_, A, R>>,
    operands: A,
) -> R {
    let branch_name = |i: usize| match (op, i) {
        ("cond", 0) => "false_fun".to_string(),
        ("cond", _) => "true_fun".to_string(),
        _ => format!("branch {i}"),
    };
    let args = operands.leaves();
    let arg_types = types(&args);
    let mut all: Vec<&Tensor> = vec![index];
    all.extend(args.iter());
    if index.ty() != TensorType::scalar(DType::I32) {
        fail(op, &all, format!("the index must be an i32[] scalar, got {}", index.ty()), 0);
    }
    assert!(!branches.is_empty(), "kiln: switch needs at least one branch");
    let mut traced: Vec<(Body, R)> = Vec::new();
    let mut failed = None;
    for br in branches {
        match trace_body(&arg_types, |p| br(operands.rebuild(p)), |r: &R| r.leaves()) {
            (r, Some(b)) => traced.push((b, r)),
            (r, None) => failed = Some(r),
        }
    }
    if let Some(r) = failed {
        return placeholders_like(&r);
    }
    let (b0, r0) = &traced[0];
    for (i, (b, r)) in traced.iter().enumerate().skip(1) {
        if r.structure() != r0.structure() || b.out_types != b0.out_types {
            let msg = if r.structure() == r0.structure() {
                format!(
                    "{} returns types {:?} but {} returns types {:?} (every branch must return the same)",
                    branch_name(i),
                    b.out_types,
                    branch_name(0),
                    b0.out_types
                )
            } else {
                format!(
                    "{} returns a result of structure {} (T: one tensor) and types {:?} but {} returns structure {} and types {:?}",
                    branch_name(i),
                    r.structure(),
                    b.out_types,
                    branch_name(0),
                    r0.structure(),
                    b0.out_types
                )
            };
            fail(op, &all[1..], msg, 0);
            return placeholders(r0, &b0.out_types);
        }
    }
    // Every branch gets every branch's captured values as trailing parameters (unused ones ignored).
    let captured_types: Vec<Vec<TensorType>> = traced.iter().map(|(b, _)| types(&b.captured)).collect();
    let out_types = b0.out_types.clone();
    let r_template = placeholders(r0, &out_types);
    let mut funcs = Vec::with_capacity(traced.len());
    let mut extra: Vec<Tensor> = Vec::new();
    for (i, (b, _)) in traced.into_iter().enumerate() {
        let Body { mut func, captured, .. } = b;
        // Own captured params are at the front: move them behind the operands, then add the others'.
        let n_cap = captured.len();
        func.params.rotate_left(n_cap);
        let own_caps: Vec<_> = func.params.split_off(arg_types.len());
        for (j, tys) in captured_types.iter().enumerate() {
            if j == i {
                func.params.extend(own_caps.iter().copied());
            } else {
                for t in tys {
                    func.add_param(t.clone());
                }
            }
        }
        extra.extend(captured);
        funcs.push(func);
    }
    let mut operands_all: Vec<&Tensor> = vec![index];
    operands_all.extend(args.iter());
    operands_all.extend(extra.iter());
    let outs = bind(Prim::Cond { branches: funcs }, &operands_all, out_types.len());
    r_template.rebuild(outs)
}

/// `lax.cond`: `true_fun(operands)` if `pred` (a bool scalar) else `false_fun(operands)`.
#[track_caller]
pub fn cond<A: Tree, R: Tree>(
    pred: &Tensor,
    true_fun: impl FnOnce(A) -> R,
    false_fun: impl FnOnce(A) -> R,
    operands: A,
) -> R {
    if pred.ty() != TensorType::scalar(DType::Bool) {
        fail("cond", &[pred], format!("the predicate must be a bool[] scalar, got {}", pred.ty()), 0);
    }
    let index = crate::lax::convert_element_type(pred, DType::I32);
    switch_impl("cond", &index, vec![Box::new(false_fun), Box::new(true_fun)], operands)
}
