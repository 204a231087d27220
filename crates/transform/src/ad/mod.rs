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
//! zero; multiplying that zero by an infinite local derivative (`sqrt'(0)`, `log'(0)`) gives NaN, and
//! JAX returns that NaN for `grad(sum(where(x > 0, sqrt(x), 0)))` at 0. kiln's reverse mode tracks,
//! next to each cotangent, a *branch mask*: `select` gives its arms the masks `pred` and `!pred`
//! (and-ed with its own), elementwise primitives pass their output's mask to same-shaped inputs, and
//! after each rule the driver replaces the cotangent by 0 outside the mask. Elements that no selected
//! branch reaches therefore contribute exactly 0, while everything else keeps IEEE semantics: a
//! genuine `0 · ∞` (a zero cotangent that is not a masked branch, e.g. `exp(cumsum(log x))` at a zero
//! of `x`) is still NaN, as in JAX, rather than a silently wrong 0. A value used both inside and
//! outside a `where` gets no mask (all of it is live). The mask does not pass through non-elementwise
//! primitives (broadcasts, reductions, indexing); composites that need safety there use a double
//! `where` (as `nn::norm` does). Forward mode needs no mask: `select` picks the tangent of the chosen
//! arm.

mod control;
mod jvp_rules;
mod mincut;
mod partition;
mod scan;
mod vjp_rules;

use kiln_ir::{DType, Function, Prim, TensorType, Var};
use kiln_trace::{Tensor, at_location, lax};

pub use scan::{AUTO_STORE_ALL_BYTES, Checkpoint, checkpoint_policy, with_checkpoint};

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
        if kiln_trace::trace_failed() {
            return (stand_ins(f, &f.outputs), vec![None; f.outputs.len()]);
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
    vjp_replay_active(f, primals, cts_out, &vec![true; f.params.len()])
}

/// Which variables of `f` are *active*: float values that depend on a float parameter flagged in
/// `active` through anything but `stop_gradient` (activity analysis). Only active values can pass a
/// cotangent on to a parameter.
pub(crate) fn activity(f: &Function, active: &[bool]) -> Vec<bool> {
    let mut on = vec![false; f.vars.len()];
    for (v, &a) in f.params.iter().zip(active) {
        on[v.index()] = a && is_differentiable(f.dtype(*v));
    }
    for e in &f.eqns {
        let any = !matches!(e.prim, Prim::StopGradient) && e.inputs.iter().any(|v| on[v.index()]);
        for o in &e.outputs {
            on[o.index()] = any && is_differentiable(f.dtype(*o));
        }
    }
    on
}

/// Which variables of `f` can pass a cotangent on to an output given one (`cts_out[k].is_some()`):
/// the outputs' producers, transitively, except through `stop_gradient`.
fn reaching(f: &Function, cts_out: &[Option<Tensor>]) -> Vec<bool> {
    let mut on = vec![false; f.vars.len()];
    for (v, c) in f.outputs.iter().zip(cts_out) {
        on[v.index()] |= c.is_some();
    }
    for e in f.eqns.iter().rev() {
        if !matches!(e.prim, Prim::StopGradient) && e.outputs.iter().any(|v| on[v.index()]) {
            for v in &e.inputs {
                on[v.index()] = true;
            }
        }
    }
    on
}

/// [`vjp_replay`] for the parameters flagged in `active` only: the others get no cotangent
/// (`None`), and no cotangent is computed for values that depend on none of the active ones, so a
/// step's VJP does no work for the data it merely reads. A `scan` with an active operand runs its
/// forward pass once ([`scan::forward`]): the same scan gives the primal outputs and what its
/// backward pass needs.
pub(crate) fn vjp_replay_active(
    f: &Function,
    primals: &[Tensor],
    cts_out: &[Option<Tensor>],
    active: &[bool],
) -> (Vec<Tensor>, Vec<Option<Tensor>>) {
    assert_eq!(primals.len(), f.params.len(), "vjp: primal count");
    assert_eq!(cts_out.len(), f.outputs.len(), "vjp: cotangent count");
    assert_eq!(active.len(), f.params.len(), "vjp: activity count");
    let n = f.vars.len();
    let on = activity(f, active);
    // A scan saves residuals only if a cotangent can reach one of its outputs.
    let reach = reaching(f, cts_out);
    let mut p: Vec<Option<Tensor>> = vec![None; n];
    for (i, v) in f.params.iter().enumerate() {
        p[v.index()] = Some(primals[i].clone());
    }
    for c in &f.consts {
        p[c.var.index()] = Some(Tensor::from_shared(c.value.clone()));
    }
    // Forward.
    let mut saved: Vec<Option<Saved>> = (0..f.eqns.len()).map(|_| None).collect();
    for (k, eqn) in f.eqns.iter().enumerate() {
        let ins: Vec<Tensor> =
            eqn.inputs.iter().map(|v| p[v.index()].clone().expect("verified function")).collect();
        let outs = at_location(eqn.loc.as_ref(), || match &eqn.prim {
            Prim::Scan { .. }
                if eqn.inputs.iter().any(|v| on[v.index()])
                    && eqn.outputs.iter().any(|v| reach[v.index()]) =>
            {
                let act: Vec<bool> = eqn.inputs.iter().map(|v| on[v.index()]).collect();
                let wanted: Vec<bool> = eqn.outputs.iter().map(|v| reach[v.index()]).collect();
                let (outs, s) = scan::forward(&eqn.prim, &ins, &act, &wanted);
                saved[k] = Some(Saved::Scan(s));
                outs
            }
            Prim::CustomVjpCall { fwd, .. } if eqn.inputs.iter().any(|v| on[v.index()]) => {
                let (outs, residuals) = control::custom_vjp_forward(fwd, &ins, eqn.outputs.len());
                saved[k] = Some(Saved::CustomVjp(residuals));
                outs
            }
            _ => lax::bind(eqn.prim.clone(), &ins.iter().collect::<Vec<_>>()),
        });
        for (v, o) in eqn.outputs.iter().zip(outs) {
            p[v.index()] = Some(o);
        }
        if kiln_trace::trace_failed() {
            return (stand_ins(f, &f.outputs), vec![None; f.params.len()]);
        }
    }
    // Backward.
    let mut ct: Vec<Option<Tensor>> = vec![None; n];
    let mut mask: Vec<Mask> = vec![Mask::Unset; n];
    for (v, c) in f.outputs.iter().zip(cts_out) {
        if on[v.index()] && c.is_some() {
            accumulate(&mut ct[v.index()], c.clone());
            mask[v.index()] = Mask::Live;
        }
    }
    for (k, eqn) in f.eqns.iter().enumerate().rev() {
        let cts: Vec<Option<Tensor>> = eqn.outputs.iter().map(|v| ct[v.index()].clone()).collect();
        if cts.iter().all(Option::is_none) || !eqn.inputs.iter().any(|v| on[v.index()]) {
            continue;
        }
        let ins: Vec<Tensor> =
            eqn.inputs.iter().map(|v| p[v.index()].clone().expect("forward value")).collect();
        let outs: Vec<Tensor> =
            eqn.outputs.iter().map(|v| p[v.index()].clone().expect("forward value")).collect();
        let in_masks =
            at_location(eqn.loc.as_ref(), || input_masks(&eqn.prim, &ins, &outs, &eqn.outputs, &mask));
        let cts_in = at_location(eqn.loc.as_ref(), || {
            let cts_in = match saved[k].take() {
                Some(Saved::Scan(s)) => scan::backward(&eqn.prim, &ins, s, &cts),
                Some(Saved::CustomVjp(residuals)) => {
                    control::custom_vjp_backward(&eqn.prim, residuals, &outs, &cts)
                }
                None => vjp_rules::vjp_rule(&eqn.prim, &ins, &outs, &cts),
            };
            // Zero the cotangent outside the branch mask (where safety, see the module docs).
            cts_in
                .into_iter()
                .zip(&in_masks)
                .map(|(c, m)| match (c, m) {
                    (Some(c), Some(m)) => {
                        Some(kiln_trace::where_(m, &c, &Tensor::scalar_like(0.0, c.dtype())))
                    }
                    (c, _) => c,
                })
                .collect::<Vec<_>>()
        });
        for ((v, c), m) in eqn.inputs.iter().zip(cts_in).zip(in_masks) {
            if on[v.index()] && c.is_some() {
                accumulate(&mut ct[v.index()], c);
                let merged = at_location(eqn.loc.as_ref(), || mask[v.index()].merge(m));
                mask[v.index()] = merged;
            }
        }
        if kiln_trace::trace_failed() {
            return (stand_ins(f, &f.outputs), vec![None; f.params.len()]);
        }
    }
    let outs = f.outputs.iter().map(|v| p[v.index()].clone().expect("verified function")).collect();
    let cts = f.params.iter().map(|v| ct[v.index()].clone().filter(|_| on[v.index()])).collect();
    (outs, cts)
}

/// What the forward pass of [`vjp_replay_active`] keeps for an equation whose backward pass needs
/// more than its inputs and outputs.
enum Saved {
    /// A differentiated `scan`'s stored residuals or segment carries.
    Scan(scan::Saved),
    /// A `custom_vjp_call`'s residuals: the forward pass ran the user's `fwd` in its place, as JAX's
    /// does, so the differentiated program holds `fwd`'s and `bwd`'s ordinary ops, which forward
    /// mode can go through (`jvp(grad(f))`, `hessian`), and `fwd` runs once.
    CustomVjp(Vec<Tensor>),
}

/// Once the trace holds an error (a rule's op failed), what a replay returns for `vars`: fresh
/// values of their declared types, since the failed op's stand-ins may have other types, which
/// later rules and callers would trip over (the trace is discarded anyway).
fn stand_ins(f: &Function, vars: &[Var]) -> Vec<Tensor> {
    vars.iter().map(|v| kiln_trace::stand_in(f.var_type(*v))).collect()
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

/// The branch mask of a cotangent (see the module docs on `where` safety).
#[derive(Clone)]
enum Mask {
    /// No cotangent has arrived yet.
    Unset,
    /// Every element may be live.
    Live,
    /// Only elements where this bool tensor is true are reached by a selected branch.
    Where(Tensor),
}

impl Mask {
    /// The mask of a sum of cotangents: an element is live if any contribution is.
    fn merge(&self, contribution: Option<Tensor>) -> Mask {
        match (self, contribution) {
            (Mask::Unset, Some(m)) => Mask::Where(m),
            (Mask::Where(a), Some(b)) => Mask::Where(a.logical_or(&b)),
            (Mask::Unset | Mask::Live | Mask::Where(_), None) | (Mask::Live, Some(_)) => Mask::Live,
        }
    }

    fn tensor(&self) -> Option<&Tensor> {
        match self {
            Mask::Where(m) => Some(m),
            Mask::Unset | Mask::Live => None,
        }
    }
}

/// The branch mask passed to each input of an equation: `select`'s arms get `pred`/`!pred` (and-ed
/// with the output's mask); elementwise primitives pass their output's mask to inputs of the same
/// shape; every other primitive passes none.
fn input_masks(
    prim: &Prim,
    ins: &[Tensor],
    outs: &[Tensor],
    out_vars: &[kiln_ir::Var],
    mask: &[Mask],
) -> Vec<Option<Tensor>> {
    let out_mask = out_vars.first().and_then(|v| mask[v.index()].tensor());
    let same_shape = |t: &Tensor| outs.first().is_some_and(|o| o.shape() == t.shape());
    let pass_through = || ins.iter().map(|t| out_mask.filter(|_| same_shape(t)).cloned()).collect();
    let and = |m: Tensor| match out_mask {
        Some(o) => o.logical_and(&m),
        None => m,
    };
    match prim {
        Prim::Select => {
            let pred = &ins[0];
            vec![None, Some(and(pred.clone())), Some(and(pred.logical_not()))]
        }
        Prim::Unary(_) | Prim::Binary(_) | Prim::Clamp | Prim::ConvertElementType { .. } => pass_through(),
        Prim::Compare(_)
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
        | Prim::StopGradient
        | Prim::CustomJvpCall { .. }
        | Prim::CustomVjpCall { .. }
        | Prim::Scan { .. }
        | Prim::WhileLoop { .. }
        | Prim::Cond { .. }
        | Prim::Call { .. }
        | Prim::Checkpoint { .. } => vec![None; ins.len()],
    }
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
