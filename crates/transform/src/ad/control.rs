//! AD of control flow and calls: `while_loop`, `cond`, `call`, `checkpoint`, `custom_jvp_call`,
//! `custom_vjp_call` here; `scan` (with checkpointing) in `scan.rs`.
//!
//! Sub-functions of new control-flow equations are built with [`crate::trace_function`] around
//! [`super::jvp_replay`]/[`super::vjp_replay`] of the original ones, so they are closed functions of
//! their own parameters; calls are differentiated inline.
//!
//! * `while_loop` — JVP: a while loop over `(state, tangent state)` (every float state component
//!   carries a tangent; nonzero body-const tangents become extra body consts). VJP: only with
//!   `max_iters = Some(n)`, by lowering to a masked scan of `n` steps, carry `(state, active)`, whose
//!   step runs the body through a `cond` on `active & cond(state)` (so a finished loop's steps are
//!   the identity, in the forward and the backward pass — nothing is computed on states the loop
//!   never reached) and differentiating that scan.
//! * `cond` — JVP/VJP: a `cond` on the same index over each branch's JVP/VJP.
//! * `call`, `checkpoint` — replayed inline. Direct VJP rules only see an equation's inputs and
//!   outputs, so both recompute the callee's forward in the backward pass (remat); for `checkpoint`
//!   that is the point.
//! * `custom_jvp_call` — JVP: the user's rule; VJP: its transpose (the rule is linear in tangents).
//! * `custom_vjp_call` — VJP: `fwd`, then `bwd`; reverse mode runs `fwd` in the forward pass in the
//!   call's place (as JAX does), so the program `grad` records holds ordinary ops and forward mode
//!   over it works (`jvp(grad(f))`, `hessian`); JVP of the call itself: an error, as in JAX.

use super::{instantiate, is_differentiable, jvp_replay, scan, vjp_replay, zeros_like};
use crate::{replay, trace_function};
use kiln_ir::{DType, Function, Prim, TensorType};
use kiln_trace::{Branch, ScanOptions, Tensor, lax, report_error};

/// The JVP of a control-flow primitive.
pub(super) fn jvp(
    prim: &Prim,
    primals: &[Tensor],
    tangents: &[Option<Tensor>],
) -> (Vec<Tensor>, Vec<Option<Tensor>>) {
    match prim {
        Prim::Scan { .. } => scan::jvp(prim, primals, tangents),
        Prim::WhileLoop { cond, body, cond_consts, body_consts, max_iters } => {
            while_jvp(cond, body, *cond_consts, *body_consts, *max_iters, primals, tangents)
        }
        Prim::Cond { branches } => cond_jvp(branches, primals, tangents),
        Prim::Call { body } | Prim::Checkpoint { body } => jvp_replay(body, primals, tangents),
        Prim::CustomJvpCall { jvp, .. } => {
            // The user's rule takes a tangent for every operand (zeros where symbolic).
            let ts: Vec<Tensor> =
                tangents.iter().zip(primals).map(|(t, p)| instantiate(t.clone(), &p.ty())).collect();
            let args: Vec<Tensor> = primals.iter().cloned().chain(ts).collect();
            let mut outs = replay(jvp, &args);
            let touts = outs.split_off(outs.len() / 2);
            let touts = touts.into_iter().map(|t| Some(t).filter(|t| is_differentiable(t.dtype()))).collect();
            (outs, touts)
        }
        Prim::CustomVjpCall { .. } => {
            // JAX: "can't apply forward-mode autodiff (jvp) to a custom_vjp function."
            let refs: Vec<&Tensor> = primals.iter().collect();
            report_error(
                "custom_vjp_call",
                &refs,
                "forward-mode differentiation of a custom_vjp function is not supported \
                 (differentiate it in reverse mode: grad, vjp, jacrev)"
                    .into(),
            );
            let outs = lax::bind(prim.clone(), &refs);
            let n = outs.len();
            (outs, vec![None; n])
        }
        Prim::Unary(_)
        | Prim::Binary(_)
        | Prim::Compare(_)
        | Prim::Select
        | Prim::Clamp
        | Prim::ConvertElementType { .. }
        | Prim::BitcastConvertType { .. }
        | Prim::Iota { .. }
        | Prim::BroadcastInDim { .. }
        | Prim::Reshape { .. }
        | Prim::Transpose { .. }
        | Prim::Rev { .. }
        | Prim::Slice { .. }
        | Prim::DynamicSlice { .. }
        | Prim::DynamicUpdateSlice
        | Prim::Concatenate { .. }
        | Prim::Pad { .. }
        | Prim::Reduce { .. }
        | Prim::ArgReduce { .. }
        | Prim::Cumulative { .. }
        | Prim::Sort { .. }
        | Prim::DotGeneral { .. }
        | Prim::Gather { .. }
        | Prim::Scatter { .. }
        | Prim::SegmentSum { .. }
        | Prim::Threefry2x32
        | Prim::StopGradient => unreachable!("{} is not a control-flow primitive", prim.name()),
    }
}

/// The VJP of a control-flow primitive.
pub(super) fn vjp(
    prim: &Prim,
    ins: &[Tensor],
    outs: &[Tensor],
    cts: &[Option<Tensor>],
) -> Vec<Option<Tensor>> {
    match prim {
        Prim::Scan { .. } => scan::vjp(prim, ins, outs, cts),
        Prim::WhileLoop { cond, body, cond_consts, body_consts, max_iters } => match max_iters {
            Some(n) => {
                let f = masked_scan(cond, body, *cond_consts, *body_consts, *n, &types(ins));
                vjp_replay(&f, ins, cts).1
            }
            None => {
                let refs: Vec<&Tensor> = ins.iter().collect();
                report_error(
                    "while_loop",
                    &refs,
                    "reverse-mode differentiation of while_loop needs max_iters (use while_loop_bounded); \
                     forward mode (jvp) works without it"
                        .into(),
                );
                vec![None; ins.len()]
            }
        },
        Prim::Cond { branches } => cond_vjp(branches, ins, cts),
        // Replaying the callee's VJP re-runs its forward here: the forward pass kept only its outputs.
        Prim::Call { body } | Prim::Checkpoint { body } => vjp_replay(body, ins, cts).1,
        Prim::CustomJvpCall { jvp, .. } => {
            // The rule is linear in its tangent parameters: transpose it at zero tangents.
            let n = ins.len();
            let args: Vec<Tensor> = ins.iter().cloned().chain(ins.iter().map(zeros_like)).collect();
            let cts_all: Vec<Option<Tensor>> =
                vec![None; outs.len()].into_iter().chain(cts.iter().cloned()).collect();
            let (_, mut cin) = vjp_replay(jvp, &args, &cts_all);
            cin.split_off(n)
        }
        // Reached only where the forward pass did not run `fwd` itself (see `vjp_replay_active`):
        // `fwd` runs again here for its residuals.
        Prim::CustomVjpCall { fwd, .. } => {
            let (_, residuals) = custom_vjp_forward(fwd, ins, outs.len());
            custom_vjp_backward(prim, residuals, outs, cts)
        }
        Prim::Unary(_)
        | Prim::Binary(_)
        | Prim::Compare(_)
        | Prim::Select
        | Prim::Clamp
        | Prim::ConvertElementType { .. }
        | Prim::BitcastConvertType { .. }
        | Prim::Iota { .. }
        | Prim::BroadcastInDim { .. }
        | Prim::Reshape { .. }
        | Prim::Transpose { .. }
        | Prim::Rev { .. }
        | Prim::Slice { .. }
        | Prim::DynamicSlice { .. }
        | Prim::DynamicUpdateSlice
        | Prim::Concatenate { .. }
        | Prim::Pad { .. }
        | Prim::Reduce { .. }
        | Prim::ArgReduce { .. }
        | Prim::Cumulative { .. }
        | Prim::Sort { .. }
        | Prim::DotGeneral { .. }
        | Prim::Gather { .. }
        | Prim::Scatter { .. }
        | Prim::SegmentSum { .. }
        | Prim::Threefry2x32
        | Prim::StopGradient => unreachable!("{} is not a control-flow primitive", prim.name()),
    }
}

/// A `custom_vjp_call`'s forward pass under reverse mode: the user's `fwd` on the operands, split
/// into the `n_out` primal outputs and the residuals.
pub(super) fn custom_vjp_forward(fwd: &Function, ins: &[Tensor], n_out: usize) -> (Vec<Tensor>, Vec<Tensor>) {
    let mut outs = replay(fwd, ins);
    let residuals = outs.split_off(n_out);
    (outs, residuals)
}

/// A `custom_vjp_call`'s backward pass: the user's `bwd` on the residuals and the output cotangents
/// (zeros where symbolic); integer and bool operands get none.
pub(super) fn custom_vjp_backward(
    prim: &Prim,
    residuals: Vec<Tensor>,
    outs: &[Tensor],
    cts: &[Option<Tensor>],
) -> Vec<Option<Tensor>> {
    let Prim::CustomVjpCall { bwd, .. } = prim else {
        unreachable!("{} is not a custom_vjp_call", prim.name())
    };
    let cts = cts.iter().zip(outs).map(|(c, o)| instantiate(c.clone(), &o.ty()));
    let args: Vec<Tensor> = residuals.into_iter().chain(cts).collect();
    replay(bwd, &args).into_iter().map(|c| Some(c).filter(|c| is_differentiable(c.dtype()))).collect()
}

fn types(ts: &[Tensor]) -> Vec<TensorType> {
    ts.iter().map(Tensor::ty).collect()
}

/// Indices of the nonzero float tangents (the ones worth passing into a sub-function).
fn nonzero(ts: &[Option<Tensor>]) -> Vec<usize> {
    (0..ts.len()).filter(|&i| ts[i].as_ref().is_some_and(|t| is_differentiable(t.dtype()))).collect()
}

/// Indices of the float values among `tys`.
fn floats(tys: &[TensorType]) -> Vec<usize> {
    (0..tys.len()).filter(|&i| is_differentiable(tys[i].dtype)).collect()
}

/// A tangent list of length `n` with `vals[k]` at `idx[k]` and zeros elsewhere.
fn scatter_opt(n: usize, idx: &[usize], vals: &[Tensor]) -> Vec<Option<Tensor>> {
    let mut out = vec![None; n];
    for (&i, v) in idx.iter().zip(vals) {
        out[i] = Some(v.clone());
    }
    out
}

/// JVP of `while_loop(cond_consts.., body_consts.., init..)`: a while loop over `(state, dstate)` whose
/// cond looks at the primal state only.
fn while_jvp(
    cond: &Function,
    body: &Function,
    cond_consts: usize,
    body_consts: usize,
    max_iters: Option<u64>,
    primals: &[Tensor],
    tangents: &[Option<Tensor>],
) -> (Vec<Tensor>, Vec<Option<Tensor>>) {
    let (cc, rest) = primals.split_at(cond_consts);
    let (bc, init) = rest.split_at(body_consts);
    let (tbc, tinit) = tangents[cond_consts..].split_at(body_consts);
    let bc_t = nonzero(tbc);
    let state_types = types(init);
    // Every float component carries a tangent: a zero one may become nonzero through the body.
    let st = floats(&state_types);
    let (ncc, nbc, nbt, ns) = (cc.len(), bc.len(), bc_t.len(), init.len());
    let dstate_types: Vec<TensorType> = st.iter().map(|&i| state_types[i].clone()).collect();
    let loop_types: Vec<TensorType> = state_types.iter().chain(&dstate_types).cloned().collect();

    let cond_types: Vec<TensorType> = types(cc).into_iter().chain(loop_types.iter().cloned()).collect();
    let new_cond = trace_function(&cond_types, |p| {
        let args: Vec<Tensor> = p[..ncc + ns].to_vec();
        replay(cond, &args)
    });
    let bc_t_types: Vec<TensorType> = bc_t.iter().map(|&i| bc[i].ty()).collect();
    let body_types: Vec<TensorType> =
        types(bc).into_iter().chain(bc_t_types).chain(loop_types.iter().cloned()).collect();
    let new_body = trace_function(&body_types, |p| {
        let (bcv, rest) = p.split_at(nbc);
        let (dbc, rest) = rest.split_at(nbt);
        let (s, ds) = rest.split_at(ns);
        let mut tin = scatter_opt(nbc, &bc_t, dbc);
        tin.extend(scatter_opt(ns, &st, ds));
        let args: Vec<Tensor> = bcv.iter().chain(s).cloned().collect();
        let (mut outs, touts) = jvp_replay(body, &args, &tin);
        let dnext: Vec<Tensor> = st.iter().map(|&i| instantiate(touts[i].clone(), &state_types[i])).collect();
        outs.extend(dnext);
        outs
    });
    let mut operands: Vec<Tensor> = cc.iter().chain(bc).cloned().collect();
    operands.extend(bc_t.iter().map(|&i| tbc[i].clone().expect("nonzero")));
    operands.extend(init.iter().cloned());
    operands.extend(st.iter().map(|&i| instantiate(tinit[i].clone(), &state_types[i])));
    let refs: Vec<&Tensor> = operands.iter().collect();
    let prim = Prim::WhileLoop {
        cond: Box::new(new_cond),
        body: Box::new(new_body),
        cond_consts: ncc,
        body_consts: nbc + nbt,
        max_iters,
    };
    let mut outs = lax::bind(prim, &refs);
    let dout = outs.split_off(ns);
    let touts = scatter_opt(ns, &st, &dout);
    (outs, touts)
}

/// The bounded `while_loop(cond_consts.., body_consts.., init..)` as a closed function of the same
/// operands: a scan of `max_iters` steps over `(state, active)` that applies the body while
/// `active & cond(state)` and is the identity afterwards.
fn masked_scan(
    cond: &Function,
    body: &Function,
    cond_consts: usize,
    body_consts: usize,
    max_iters: u64,
    operand_types: &[TensorType],
) -> Function {
    let length = usize::try_from(max_iters).expect("kiln: while_loop max_iters does not fit in usize");
    trace_function(operand_types, |p| {
        let (cc, rest) = p.split_at(cond_consts);
        let (bc, init) = rest.split_at(body_consts);
        let step = |(s, active): (Vec<Tensor>, Tensor), (): ()| {
            let cargs: Vec<Tensor> = cc.iter().chain(&s).cloned().collect();
            let go = active.logical_and(&replay(cond, &cargs)[0]);
            let index = lax::convert_element_type(&go, DType::I32);
            // A `cond`, not a `select`: a finished loop's steps never evaluate (or differentiate)
            // the body on a state the loop did not reach.
            let stay: Branch<'_, Vec<Tensor>, Vec<Tensor>> = Box::new(|s| s);
            let run: Branch<'_, Vec<Tensor>, Vec<Tensor>> = Box::new(|s| {
                let bargs: Vec<Tensor> = bc.iter().cloned().chain(s).collect();
                replay(body, &bargs)
            });
            let next = kiln_trace::switch(&index, vec![stay, run], s);
            ((next, go), ())
        };
        let init = (init.to_vec(), Tensor::scalar(true));
        let opts = ScanOptions { length: Some(length), reverse: false };
        let ((state, _), ()) = kiln_trace::scan_with(step, init, (), opts);
        state
    })
}

/// JVP of `cond(index, args..)`: a `cond` on the same index whose branch `j` is branch `j`'s JVP,
/// with parameters `args ++ nonzero tangents` and outputs `outs ++ float output tangents`.
fn cond_jvp(
    branches: &[Function],
    primals: &[Tensor],
    tangents: &[Option<Tensor>],
) -> (Vec<Tensor>, Vec<Option<Tensor>>) {
    let (_, args) = primals.split_first().expect("cond has an index operand");
    let targs = &tangents[1..];
    let sel = nonzero(targs);
    let n = args.len();
    let out_types = branches[0].output_types();
    let fl_out = floats(&out_types);
    let param_types: Vec<TensorType> =
        types(args).into_iter().chain(sel.iter().map(|&i| args[i].ty())).collect();
    let new_branches: Vec<Function> = branches
        .iter()
        .map(|b| {
            trace_function(&param_types, |p| {
                let (a, t) = p.split_at(n);
                let (mut outs, touts) = jvp_replay(b, a, &scatter_opt(n, &sel, t));
                let touts: Vec<Tensor> =
                    fl_out.iter().map(|&i| instantiate(touts[i].clone(), &out_types[i])).collect();
                outs.extend(touts);
                outs
            })
        })
        .collect();
    let mut refs: Vec<&Tensor> = primals.iter().collect();
    refs.extend(sel.iter().map(|&i| targs[i].as_ref().expect("nonzero")));
    let mut outs = lax::bind(Prim::Cond { branches: new_branches }, &refs);
    let touts = outs.split_off(out_types.len());
    (outs, scatter_opt(out_types.len(), &fl_out, &touts))
}

/// VJP of `cond(index, args..)`: a `cond` on the same index whose branch `j` maps `args ++ nonzero
/// output cotangents` to the float arguments' cotangents through branch `j`'s VJP. The index has none.
fn cond_vjp(branches: &[Function], ins: &[Tensor], cts: &[Option<Tensor>]) -> Vec<Option<Tensor>> {
    let (_, args) = ins.split_first().expect("cond has an index operand");
    let n = args.len();
    let arg_types = types(args);
    let fl_args = floats(&arg_types);
    let sel = nonzero(cts);
    if fl_args.is_empty() || sel.is_empty() {
        return vec![None; ins.len()];
    }
    let out_types = branches[0].output_types();
    let param_types: Vec<TensorType> =
        arg_types.iter().cloned().chain(sel.iter().map(|&i| out_types[i].clone())).collect();
    let new_branches: Vec<Function> = branches
        .iter()
        .map(|b| {
            trace_function(&param_types, |p| {
                let (a, c) = p.split_at(n);
                let (_, cin) = vjp_replay(b, a, &scatter_opt(out_types.len(), &sel, c));
                fl_args.iter().map(|&i| instantiate(cin[i].clone(), &arg_types[i])).collect()
            })
        })
        .collect();
    let mut refs: Vec<&Tensor> = ins.iter().collect();
    refs.extend(sel.iter().map(|&i| cts[i].as_ref().expect("nonzero")));
    let cin = lax::bind(Prim::Cond { branches: new_branches }, &refs);
    let mut out = vec![None];
    out.extend(scatter_opt(n, &fl_args, &cin));
    out
}
