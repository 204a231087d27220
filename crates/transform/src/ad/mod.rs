//! Automatic differentiation (DESIGN §5).
//!
//! kiln uses two rule sets, one rule per primitive each, in one place each:
//! * a **JVP rule** per primitive (`jvp_rules.rs`): primal and tangent outputs from primal and tangent
//!   inputs — forward mode, [`jvp_replay`];
//! * a **direct VJP rule** per primitive (`vjp_rules.rs`): input cotangents from the primal inputs,
//!   primal outputs and output cotangents — reverse mode, [`vjp_replay`]: the forward equations are
//!   replayed, then the rules run in reverse order, accumulating cotangents.
//!
//! Direct VJP rules (rather than JAX's linearize + transpose) keep reverse mode one pass over the
//! equations; since the rules are written in traced ops, `grad(grad(f))` and `jvp(grad(f))` work by
//! applying the transforms to the IR the first one recorded.
//!
//! Zeros are symbolic: a tangent or cotangent is `Option<Tensor>`, `None` meaning zero. Integer and
//! bool values never carry one. Rules skip work on zeros.
//!
//! **`where` safety.** In reverse mode a branch that `select` did not choose receives a cotangent of
//! exactly zero; multiplying that zero by an infinite local derivative (`sqrt'(0)`, `log'(0)`) would
//! give NaN, as in JAX. kiln's VJP rules multiply cotangents by local derivatives with [`safe_mul`],
//! which yields 0 where the cotangent is 0, so the unselected branch contributes exactly 0.

mod control;
mod jvp_rules;
mod partition;
mod scan;
mod vjp_rules;

use kiln_ir::{DType, Function, TensorType};
use kiln_trace::{Tensor, at_location, lax};

pub use scan::{Checkpoint, checkpoint_policy, with_checkpoint};

/// True if values of this dtype carry tangents/cotangents.
pub fn is_differentiable(dtype: DType) -> bool {
    dtype.is_float()
}

/// Forward mode: replays `f` on `primals` with `tangents` (`None` = zero; must be `None` for integer
/// and bool parameters) and returns the primal outputs and their tangents.
pub fn jvp_replay(
    f: &Function,
    primals: &[Tensor],
    tangents: &[Option<Tensor>],
) -> (Vec<Tensor>, Vec<Option<Tensor>>) {
    assert_eq!(primals.len(), f.params.len(), "jvp: primal count");
    assert_eq!(tangents.len(), f.params.len(), "jvp: tangent count");
    let n = f.vars.len();
    let mut p: Vec<Option<Tensor>> = vec![None; n];
    let mut t: Vec<Option<Tensor>> = vec![None; n];
    for (i, v) in f.params.iter().enumerate() {
        p[v.index()] = Some(primals[i].clone());
        t[v.index()] = tangents[i].clone().filter(|_| is_differentiable(f.dtype(*v)));
    }
    for c in &f.consts {
        p[c.var.index()] = Some(Tensor::from_shared(c.value.clone()));
    }
    for eqn in &f.eqns {
        let ins: Vec<Tensor> =
            eqn.inputs.iter().map(|v| p[v.index()].clone().expect("verified function")).collect();
        let tins: Vec<Option<Tensor>> = eqn.inputs.iter().map(|v| t[v.index()].clone()).collect();
        let (outs, touts) = at_location(eqn.loc.as_ref(), || {
            if tins.iter().all(Option::is_none) {
                let refs: Vec<&Tensor> = ins.iter().collect();
                let outs = lax::bind(eqn.prim.clone(), &refs);
                let n = outs.len();
                (outs, vec![None; n])
            } else {
                jvp_rules::jvp_rule(&eqn.prim, &ins, &tins)
            }
        });
        for ((v, o), to) in eqn.outputs.iter().zip(outs).zip(touts) {
            p[v.index()] = Some(o);
            t[v.index()] = to.filter(|_| is_differentiable(f.dtype(*v)));
        }
    }
    let outs = f.outputs.iter().map(|v| p[v.index()].clone().expect("verified function")).collect();
    let touts = f.outputs.iter().map(|v| t[v.index()].clone()).collect();
    (outs, touts)
}

/// Reverse mode: replays `f` on `primals`, then propagates the output cotangents `cts_out` (`None` =
/// zero) backwards; returns the primal outputs and the cotangent of each parameter (`None` = zero,
/// always `None` for integer and bool parameters).
pub fn vjp_replay(
    f: &Function,
    primals: &[Tensor],
    cts_out: &[Option<Tensor>],
) -> (Vec<Tensor>, Vec<Option<Tensor>>) {
    assert_eq!(primals.len(), f.params.len(), "vjp: primal count");
    assert_eq!(cts_out.len(), f.outputs.len(), "vjp: cotangent count");
    let n = f.vars.len();
    let mut p: Vec<Option<Tensor>> = vec![None; n];
    for (i, v) in f.params.iter().enumerate() {
        p[v.index()] = Some(primals[i].clone());
    }
    for c in &f.consts {
        p[c.var.index()] = Some(Tensor::from_shared(c.value.clone()));
    }
    // Forward.
    for eqn in &f.eqns {
        let ins: Vec<&Tensor> =
            eqn.inputs.iter().map(|v| p[v.index()].as_ref().expect("verified function")).collect();
        let outs = at_location(eqn.loc.as_ref(), || lax::bind(eqn.prim.clone(), &ins));
        for (v, o) in eqn.outputs.iter().zip(outs) {
            p[v.index()] = Some(o);
        }
    }
    // Backward.
    let mut ct: Vec<Option<Tensor>> = vec![None; n];
    for (v, c) in f.outputs.iter().zip(cts_out) {
        if is_differentiable(f.dtype(*v)) {
            accumulate(&mut ct[v.index()], c.clone());
        }
    }
    for eqn in f.eqns.iter().rev() {
        let cts: Vec<Option<Tensor>> = eqn.outputs.iter().map(|v| ct[v.index()].clone()).collect();
        if cts.iter().all(Option::is_none) {
            continue;
        }
        let ins: Vec<Tensor> =
            eqn.inputs.iter().map(|v| p[v.index()].clone().expect("forward value")).collect();
        let outs: Vec<Tensor> =
            eqn.outputs.iter().map(|v| p[v.index()].clone().expect("forward value")).collect();
        let cts_in = at_location(eqn.loc.as_ref(), || vjp_rules::vjp_rule(&eqn.prim, &ins, &outs, &cts));
        for (v, c) in eqn.inputs.iter().zip(cts_in) {
            if is_differentiable(f.dtype(*v)) {
                accumulate(&mut ct[v.index()], c);
            }
        }
    }
    let outs = f.outputs.iter().map(|v| p[v.index()].clone().expect("verified function")).collect();
    let cts = f.params.iter().map(|v| ct[v.index()].clone()).collect();
    (outs, cts)
}

/// `acc += c`, with `None` as zero.
fn accumulate(acc: &mut Option<Tensor>, c: Option<Tensor>) {
    if let Some(c) = c {
        *acc = Some(match acc.take() {
            Some(a) => &a + &c,
            None => c,
        });
    }
}

/// `a + b` with `None` as zero.
pub(crate) fn add_opt(a: Option<Tensor>, b: Option<Tensor>) -> Option<Tensor> {
    let mut acc = a;
    accumulate(&mut acc, b);
    acc
}

/// Zeros of `t`'s type.
pub(crate) fn zeros_like(t: &Tensor) -> Tensor {
    zeros_of(&t.ty())
}

/// Zeros of a type (a constant broadcast; cheap in the IR).
pub(crate) fn zeros_of(ty: &TensorType) -> Tensor {
    lax::broadcast_in_dim(&Tensor::scalar_like(0.0, ty.dtype), ty.shape.dims(), &[])
}

/// `t`, or zeros of `ty` for a symbolic zero.
pub(crate) fn instantiate(t: Option<Tensor>, ty: &TensorType) -> Tensor {
    t.unwrap_or_else(|| zeros_of(ty))
}

/// `ct * d`, but exactly 0 where `ct` is 0 even if `d` is infinite or NaN — the cotangent of an
/// unselected `where` branch must not turn into NaN (see the module docs).
pub(crate) fn safe_mul(ct: &Tensor, d: &Tensor) -> Tensor {
    let zero = Tensor::scalar_like(0.0, ct.dtype());
    kiln_trace::where_(&ct.eq(&zero), &zero, &(ct * d))
}

/// The JVP of a closed function as a function: parameters `primals ++ tangents` (a tangent parameter
/// for every parameter; those of integer/bool parameters are ignored), outputs `outs ++ tangent outs`
/// (zeros instantiated; integer/bool outputs get zero tangents of their own dtype).
pub fn jvp_function(f: &Function) -> Function {
    let pt = f.param_types();
    let types: Vec<TensorType> = pt.iter().chain(&pt).cloned().collect();
    let n = pt.len();
    let out_types = f.output_types();
    crate::trace_function(&types, |args| {
        let (primals, tangents) = args.split_at(n);
        let tangents: Vec<Option<Tensor>> = tangents.iter().map(|t| Some(t.clone())).collect();
        let (outs, touts) = jvp_replay(f, primals, &tangents);
        let touts: Vec<Tensor> =
            touts.into_iter().zip(&out_types).map(|(t, ty)| instantiate(t, ty)).collect();
        outs.into_iter().chain(touts).collect()
    })
}

/// The VJP of a closed function as a function: parameters `primals ++ output cotangents`, outputs
/// `outs ++ parameter cotangents` (zeros instantiated, of each parameter's own dtype).
pub fn vjp_function(f: &Function) -> Function {
    let pt = f.param_types();
    let ot = f.output_types();
    let types: Vec<TensorType> = pt.iter().chain(&ot).cloned().collect();
    let n = pt.len();
    crate::trace_function(&types, |args| {
        let (primals, cts) = args.split_at(n);
        let cts: Vec<Option<Tensor>> = cts.iter().map(|t| Some(t.clone())).collect();
        let (outs, cts_in) = vjp_replay(f, primals, &cts);
        let cts_in: Vec<Tensor> = cts_in.into_iter().zip(&pt).map(|(t, ty)| instantiate(t, ty)).collect();
        outs.into_iter().chain(cts_in).collect()
    })
}
