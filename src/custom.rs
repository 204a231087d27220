//! Control over differentiation: [`checkpoint`] (`jax.checkpoint`, a.k.a. remat), [`custom_jvp`] and
//! [`custom_vjp`] (`jax.custom_jvp`, `jax.custom_vjp`).
//!
//! Each traces the user's functions on the argument types into closed sub-functions and binds one
//! equation (`checkpoint`, `custom_jvp_call`, `custom_vjp_call`); evaluating it runs the primal
//! function, and the AD rules in `kiln_transform::ad` use the sub-functions. Tracers of enclosing
//! traces that the functions use become extra operands. A custom rule gives derivatives with respect
//! to the explicit arguments only: values the functions close over are treated as constants by the
//! rule (pass them as arguments to differentiate with respect to them; JAX asks for
//! `closure_convert` there).

use crate::ad::{Flat, flatten};
use kiln_ir::{Function, Prim, SrcLoc, TensorType};
use kiln_trace::{Tensor, Tree, at_location, lax, report_error};
use kiln_transform::{dce, replay, trace_function};

fn types(ts: &[Tensor]) -> Vec<TensorType> {
    ts.iter().map(Tensor::ty).collect()
}

fn zeros(ty: &TensorType) -> Tensor {
    lax::broadcast_in_dim(&Tensor::scalar_like(0.0, ty.dtype), ty.shape.dims(), &[])
}

/// A copy of a tree (same leaves), to trace a function of two arguments shaped like it.
fn copy<T: Tree>(t: &T) -> T {
    t.map(Tensor::clone)
}

/// Traces `f` like `args`. On error (already reported in the enclosing trace) returns the output
/// structure with placeholder leaves.
#[track_caller]
fn traced<A: Tree, R: Tree>(f: impl FnOnce(A) -> R, args: &A) -> Result<Flat<R>, R> {
    flatten(f, args)
}

/// Binds `prim` to `operands` and rebuilds the output tree. The equation is attributed to `at`,
/// where the user wrote `checkpoint`/`custom_jvp`/`custom_vjp`, so errors about it (a transform
/// rejecting it, a shape check) name the user's line, not this file.
fn bind_tree<R: Tree>(prim: Prim, operands: &[Tensor], out: &R, at: &SrcLoc) -> R {
    let refs: Vec<&Tensor> = operands.iter().collect();
    out.rebuild(at_location(Some(at), || lax::bind(prim, &refs)))
}

/// After a rule was rejected (error reported): the plain function's result, so tracing can go on.
fn call_plain<R: Tree>(leaves: Vec<Tensor>, fun: Flat<R>, at: &SrcLoc) -> R {
    let operands: Vec<Tensor> = leaves.into_iter().chain(fun.captured).collect();
    bind_tree(Prim::Call { body: Box::new(fun.function) }, &operands, &fun.output, at)
}

/// A closed function of `param_types` that calls `f` on the parameters picked by `pick` (indices into
/// the parameter list) and appends `extra` of those parameters to the outputs.
fn wrap(f: &Function, param_types: &[TensorType], pick: &[usize], extra: &[usize]) -> Function {
    trace_function(param_types, |p| {
        let args: Vec<Tensor> = pick.iter().map(|&i| p[i].clone()).collect();
        let mut outs = replay(f, &args);
        outs.extend(extra.iter().map(|&i| p[i].clone()));
        outs
    })
}

/// `jax.checkpoint` (remat): `f`, whose intermediates are not kept for reverse mode but recomputed in
/// the backward pass from its inputs — less memory for more compute. Values are unchanged.
///
/// ```
/// use kiln::prelude::*;
/// let f = checkpoint(|x: Tensor| x.sin().sin());
/// let g = grad(move |x: Tensor| f(x).sum(All))(Tensor::from_vec(&[2], vec![0.0f64, 1.0]));
/// // d/dx sin(sin x) = cos(sin x)·cos x
/// let want = |x: f64| x.sin().cos() * x.cos();
/// assert_eq!(g.to_vec::<f64>(), vec![want(0.0), want(1.0)]);
/// ```
#[track_caller]
pub fn checkpoint<A: Tree, R: Tree>(f: impl Fn(A) -> R) -> impl Fn(A) -> R {
    let at = crate::ad::here();
    move |args: A| {
        kiln_trace::with_api_location(&at, || {
            let flat = match traced(&f, &args) {
                Ok(flat) => flat,
                Err(placeholder) => return placeholder,
            };
            let operands: Vec<Tensor> = args.leaves().into_iter().chain(flat.captured).collect();
            bind_tree(Prim::Checkpoint { body: Box::new(dce(&flat.function)) }, &operands, &flat.output, &at)
        })
    }
}

/// `jax.custom_jvp`: `f` with a user-given forward-mode rule `jvp(primals, tangents) -> (outputs,
/// output tangents)`, linear in the tangents. Reverse mode transposes the rule, so `grad` uses it
/// too. Tangents have the primals' types (integer arguments get integer zeros); the rule returns
/// output tangents with the outputs' structure and types.
///
/// A numerically safe `log(1 + exp(x))`: its naive derivative `exp(x) / (1 + exp(x))` is `inf/inf =
/// NaN` at large `x` in f32; the rule's `1 - 1/(1 + exp(x))` is 1 there.
/// ```
/// use kiln::prelude::*;
/// let log1pexp = custom_jvp(
///     |x: Tensor| x.exp().log1p(),
///     |x: Tensor, t: Tensor| (x.exp().log1p(), t * (1.0 - 1.0 / (x.exp() + 1.0))),
/// );
/// let g = grad(move |x: Tensor| log1pexp(x).sum(All))(Tensor::from_vec(&[2], vec![0.0f32, 100.0]));
/// assert_eq!(g.to_vec::<f32>(), vec![0.5, 1.0]);
/// ```
#[track_caller]
pub fn custom_jvp<A: Tree, R: Tree>(f: impl Fn(A) -> R, jvp: impl Fn(A, A) -> (R, R)) -> impl Fn(A) -> R {
    let at = crate::ad::here();
    move |args: A| {
        kiln_trace::with_api_location(&at, || {
            let leaves = args.leaves();
            let fun = match traced(&f, &args) {
                Ok(fun) => fun,
                Err(placeholder) => return placeholder,
            };
            let Ok(rule) = traced(|(p, t): (A, A)| jvp(p, t), &(copy(&args), copy(&args))) else {
                return call_plain(leaves, fun, &at);
            };
            let out_types = fun.function.output_types();
            let want: Vec<TensorType> = out_types.iter().chain(&out_types).cloned().collect();
            let got = rule.function.output_types();
            let structure = fun.output.structure();
            if rule.output.0.structure() != structure || rule.output.1.structure() != structure || got != want
            {
                let msg = format!(
                    "the jvp rule must return (outputs, tangents), each of structure {structure} and types \
                     {out_types:?}, but returns ({}, {}) of types {got:?}",
                    rule.output.0.structure(),
                    rule.output.1.structure()
                );
                report_error("custom_jvp", &leaves.iter().collect::<Vec<_>>(), msg);
                return call_plain(leaves, fun, &at);
            }
            // Operands: args ++ f's captured ++ the rule's captured; the rule's tangent parameters follow.
            let (n, n1) = (leaves.len(), fun.captured.len());
            let operands: Vec<Tensor> = leaves.into_iter().chain(fun.captured).chain(rule.captured).collect();
            let m = operands.len();
            let op_types = types(&operands);
            let fun_f = wrap(&fun.function, &op_types, &(0..n + n1).collect::<Vec<_>>(), &[]);
            let jvp_types: Vec<TensorType> = op_types.iter().chain(&op_types).cloned().collect();
            let pick: Vec<usize> = (0..n).chain(m..m + n).chain(n + n1..m).collect();
            let jvp_f = wrap(&rule.function, &jvp_types, &pick, &[]);
            bind_tree(
                Prim::CustomJvpCall { fun: Box::new(fun_f), jvp: Box::new(jvp_f) },
                &operands,
                &fun.output,
                &at,
            )
        })
    }
}

/// `jax.custom_vjp`: `f` with a user-given reverse-mode rule: `fwd(args) -> (outputs, residuals)` and
/// `bwd(residuals, output cotangents) -> argument cotangents` (with the arguments' structure and
/// types). Forward mode (`jvp`, `jacfwd`) of such a function is an error, as in JAX. Forward over
/// reverse works, as in JAX (`hessian`, `jvp(grad(f))`): reverse mode runs `fwd` in the call's place
/// and `bwd` for the cotangents, and forward mode goes through their ordinary ops (so it
/// differentiates `bwd` itself, not `f`).
///
/// Gradient clipping in the backward pass, and `sin` with its derivative saved as a residual:
/// ```
/// use kiln::prelude::*;
/// let clip_grad = custom_vjp(
///     |x: Tensor| x,
///     |x: Tensor| (x, ()),
///     |(), g: Tensor| g.clip(-1.0, 1.0),
/// );
/// let g = grad(move |x: Tensor| (clip_grad(x) * 5.0).sum(All))(Tensor::from_vec(&[2], vec![1.0f64, 2.0]));
/// assert_eq!(g.to_vec::<f64>(), vec![1.0, 1.0]); // 5 clipped to 1
///
/// let sin = custom_vjp(|x: Tensor| x.sin(), |x: Tensor| (x.sin(), x.cos()), |c: Tensor, g: Tensor| c * g);
/// let g = grad(move |x: Tensor| sin(x).sum(All))(Tensor::from_vec(&[1], vec![0.0f64]));
/// assert_eq!(g.to_vec::<f64>(), vec![1.0]); // cos 0
/// ```
#[track_caller]
pub fn custom_vjp<A: Tree, R: Tree, Res: Tree>(
    f: impl Fn(A) -> R,
    fwd: impl Fn(A) -> (R, Res),
    bwd: impl Fn(Res, R) -> A,
) -> impl Fn(A) -> R {
    let at = crate::ad::here();
    move |args: A| {
        kiln_trace::with_api_location(&at, || {
            let leaves = args.leaves();
            let refs: Vec<&Tensor> = leaves.iter().collect();
            let fun = match traced(&f, &args) {
                Ok(fun) => fun,
                Err(placeholder) => return placeholder,
            };
            let out_types = fun.function.output_types();
            let n_out = out_types.len();
            let Ok(fw) = traced(&fwd, &args) else {
                return call_plain(leaves, fun, &at);
            };
            let fw_types = fw.function.output_types();
            let (fw_out, res_template) = fw.output;
            if fw_out.structure() != fun.output.structure() || fw_types[..n_out] != out_types[..] {
                let msg = format!(
                    "fwd must return (outputs, residuals) with outputs of structure {} and types {out_types:?}, \
                     but returns outputs {} of types {:?}",
                    fun.output.structure(),
                    fw_out.structure(),
                    &fw_types[..n_out.min(fw_types.len())]
                );
                report_error("custom_vjp", &refs, msg);
                return call_plain(leaves, fun, &at);
            }
            let Ok(bw) = traced(|(r, c): (Res, R)| bwd(r, c), &(res_template, copy(&fun.output))) else {
                return call_plain(leaves, fun, &at);
            };
            if bw.output.structure() != args.structure() || bw.function.output_types() != types(&leaves) {
                let msg = format!(
                    "bwd must return cotangents with the arguments' structure {} and types {:?}, but returns {} \
                     of types {:?}",
                    args.structure(),
                    types(&leaves),
                    bw.output.structure(),
                    bw.function.output_types()
                );
                report_error("custom_vjp", &refs, msg);
                return call_plain(leaves, fun, &at);
            }
            // Operands: args ++ f's, fwd's and bwd's captured values. bwd only sees residuals and
            // cotangents, so fwd passes bwd's captured values on as extra residuals.
            let (n, n1, n2, n3) = (leaves.len(), fun.captured.len(), fw.captured.len(), bw.captured.len());
            let operands: Vec<Tensor> =
                leaves.into_iter().chain(fun.captured).chain(fw.captured).chain(bw.captured).collect();
            let m = operands.len();
            let op_types = types(&operands);
            let fun_f = wrap(&fun.function, &op_types, &(0..n + n1).collect::<Vec<_>>(), &[]);
            let fw_pick: Vec<usize> = (0..n).chain(n + n1..n + n1 + n2).collect();
            let fwd_f = wrap(&fw.function, &op_types, &fw_pick, &(m - n3..m).collect::<Vec<_>>());
            // bwd's parameters: residuals ++ its captured values ++ output cotangents.
            let n_res = fw_types.len() - n_out;
            let bwd_types: Vec<TensorType> =
                fw_types[n_out..].iter().chain(&op_types[m - n3..]).chain(&out_types).cloned().collect();
            let bwd_f = trace_function(&bwd_types, |p| {
                let (res, rest) = p.split_at(n_res);
                let (caps, cts) = rest.split_at(n3);
                let args: Vec<Tensor> = res.iter().chain(cts).chain(caps).cloned().collect();
                let mut cts_in = replay(&bw.function, &args);
                // Captured values are constants to the rule.
                cts_in.extend(op_types[n..].iter().map(zeros));
                cts_in
            });
            let prim =
                Prim::CustomVjpCall { fun: Box::new(fun_f), fwd: Box::new(fwd_f), bwd: Box::new(bwd_f) };
            bind_tree(prim, &operands, &fun.output, &at)
        })
    }
}
