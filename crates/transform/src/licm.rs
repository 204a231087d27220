//! Loop-invariant code motion for `scan` (XLA's while-loop invariant code motion): equations of a
//! scan body that read only the body's constants (its `num_consts` leading parameters and captured
//! arrays) compute the same value at every step, so they are computed once before the loop and
//! passed in as new constants. Inner loops are treated first, so an invariant of an inner loop that
//! is invariant in the outer one too moves out of both.
//!
//! Cheap layout ops (broadcasts, iotas, reshapes, transposes, slices...) whose result the body still
//! needs stay inside: fused into their consumers they cost nothing, while hoisted they would be
//! materialized (a broadcast of a scalar to `[B, N]` would become a `[B, N]` array read every
//! step). Control flow is never hoisted. Whether a scan's hoisting pays is the caller's call
//! (`accept`, given the scan alone before and after; kiln's `jit` asks the backend's estimate):
//! a hoisted value is read from memory at every step where it may have been cheap to recompute.
//! The program's values are unchanged (every primitive is pure): bit for bit in the reference
//! interpreter. A backend may round float sums differently once a hoisted reduction becomes a
//! kernel of its own (kiln's vector path reassociates innermost sums within its documented bound).

use crate::loop_split::{Place, split};
use crate::var_map::{VarMap, rebuild};
use kiln_ir::{Function, Prim, Var};

/// What [`hoist_scan_invariants`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HoistReport {
    /// Equations moved out of scan bodies.
    pub hoisted: usize,
    /// Scans that lost equations.
    pub scans: usize,
    /// Scans with invariant work whose hoisting `accept` refused.
    pub refused: usize,
}

/// `f` with loop-invariant equations of every `scan` body (nested ones included) moved in front of
/// their loop, for each scan that `accept(before, after)` approves: two functions of the scan's
/// operands, the scan alone and the hoisted equations followed by the new scan.
///
/// ```
/// use kiln_ir::{Array, DType, Function, Prim, TensorType, UnaryOp, eval};
/// use kiln_transform::hoist_scan_invariants;
/// // scan over 3 steps of `c' = c + exp(k)` with `k` a constant of the loop.
/// let mut body = Function::new();
/// let k = body.add_param(TensorType::new(DType::F32, [2]));
/// let c = body.add_param(TensorType::new(DType::F32, [2]));
/// let e = body.push(Prim::Unary(UnaryOp::Exp), &[k], None)?[0];
/// let c2 = body.push(Prim::Binary(kiln_ir::BinaryOp::Add), &[c, e], None)?[0];
/// body.outputs = vec![c2];
/// let mut f = Function::new();
/// let (k, c) = (f.add_param(TensorType::new(DType::F32, [2])), f.add_param(TensorType::new(DType::F32, [2])));
/// let scan = Prim::Scan { length: 3, reverse: false, num_consts: 1, num_carry: 1, body: Box::new(body) };
/// f.outputs = f.push(scan, &[k, c], None)?.to_vec();
/// let (g, report) = hoist_scan_invariants(&f, &|_, _| true);
/// assert_eq!((report.hoisted, report.scans), (1, 1)); // exp(k) runs once, before the loop
/// let args = [Array::from_vec(&[2], vec![0.0f32, 1.0]), Array::from_vec(&[2], vec![1.0f32, 2.0])];
/// assert_eq!(eval(&f, &args)?, eval(&g, &args)?);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn hoist_scan_invariants(
    f: &Function,
    accept: &dyn Fn(&Function, &Function) -> bool,
) -> (Function, HoistReport) {
    let mut report = HoistReport::default();
    let g = hoist(f, accept, &mut report);
    (g, report)
}

/// [`hoist_scan_invariants`] on `f`, its sub-functions first (inner loops before outer ones).
fn hoist(f: &Function, accept: &dyn Fn(&Function, &Function) -> bool, report: &mut HoistReport) -> Function {
    rebuild(f, |g, e, ins| {
        let prim = e.prim.map_subfunctions(|sub| hoist(sub, accept, report));
        let Some(p) = plan(&prim) else {
            return g.push(prim, &ins, e.loc.clone()).expect("equations of a verified function").to_vec();
        };
        let scratch = |hoisted: bool| {
            let mut s = Function::new();
            let params: Vec<Var> = ins.iter().map(|v| s.add_param(g.var_type(*v).clone())).collect();
            s.outputs = if hoisted {
                emit(&mut s, &prim, &p, &params, e.loc.clone())
            } else {
                s.push(prim.clone(), &params, e.loc.clone()).expect("a verified scan").to_vec()
            };
            s
        };
        if accept(&scratch(false), &scratch(true)) {
            report.hoisted += p.hoisted.len();
            report.scans += 1;
            emit(g, &prim, &p, &ins, e.loc.clone())
        } else {
            report.refused += 1;
            g.push(prim, &ins, e.loc.clone()).expect("a verified scan").to_vec()
        }
    })
}

/// Which variables of a scan body (with `nc` loop constants) hold the same value at every step: the
/// constants and captured arrays, and the results of equations other than control flow that read
/// only such variables.
pub(crate) fn invariant_vars(b: &Function, nc: usize) -> Vec<bool> {
    let mut invariant = vec![false; b.vars.len()];
    for p in &b.params[..nc] {
        invariant[p.index()] = true;
    }
    for c in &b.consts {
        invariant[c.var.index()] = true;
    }
    for e in &b.eqns {
        if !control_flow(&e.prim) && e.inputs.iter().all(|v| invariant[v.index()]) {
            e.outputs.iter().for_each(|o| invariant[o.index()] = true);
        }
    }
    invariant
}

/// Which equations of a scan body move out, and which of their results the body still reads.
struct Plan {
    /// Body equations computed before the loop, in order.
    hoisted: Vec<usize>,
    /// Body equations kept in the loop, in order.
    kept: Vec<usize>,
    /// Hoisted results the body reads: new loop constants, in this order.
    frontier: Vec<Var>,
}

/// The hoisting plan of a `scan`, or `None` when nothing worth moving is invariant.
fn plan(prim: &Prim) -> Option<Plan> {
    let Prim::Scan { num_consts, body, .. } = prim else { return None };
    let b: &Function = body;
    let invariant = invariant_vars(b, *num_consts);
    let inv_eqn: Vec<bool> = b
        .eqns
        .iter()
        .map(|e| !control_flow(&e.prim) && e.inputs.iter().all(|v| invariant[v.index()]))
        .collect();
    // An invariant equation leaves the loop unless only the loop reads it and it is cheap.
    let s = split(b, |i, e, reads| {
        if !inv_eqn[i] || (reads.by_loop && !reads.before && cheap(&e.prim)) {
            Place::Loop
        } else if reads.any() {
            Place::Before
        } else {
            Place::Dropped
        }
    });
    if s.frontier.is_empty() {
        return None;
    }
    Some(Plan { hoisted: s.before, kept: s.kept, frontier: s.frontier })
}

/// Emits the hoisted equations and the new scan into `g`, whose `ins` are the scan's operands;
/// returns the scan's results.
fn emit(g: &mut Function, prim: &Prim, p: &Plan, ins: &[Var], loc: Option<kiln_ir::SrcLoc>) -> Vec<Var> {
    let Prim::Scan { length, reverse, num_consts, num_carry, body } = prim else {
        unreachable!("plans are made for scans only")
    };
    let (b, nc): (&Function, usize) = (body, *num_consts);
    // Before the loop: body variables as variables of `g`; the body's captured arrays that hoisted
    // equations read become constants of `g`.
    let mut outer = VarMap::new(b);
    for (k, p) in b.params[..nc].iter().enumerate() {
        outer.set(*p, ins[k]);
    }
    for &i in &p.hoisted {
        outer.add_consts_read(g, b, &b.eqns[i]);
        outer.push(g, &b.eqns[i]);
    }
    // The new body: old constants, the hoisted values, then carries and xs.
    let mut nb = Function::new();
    let mut inner = VarMap::new(b);
    inner.add_params(&mut nb, b, b.params[..nc].iter().chain(&p.frontier).chain(&b.params[nc..]));
    inner.add_consts(&mut nb, b);
    for &i in &p.kept {
        inner.push(&mut nb, &b.eqns[i]);
    }
    nb.outputs = inner.all(&b.outputs);
    let nb = crate::dce(&nb);
    let operands: Vec<Var> = ins[..nc]
        .iter()
        .copied()
        .chain(p.frontier.iter().map(|v| outer.at(*v)))
        .chain(ins[nc..].iter().copied())
        .collect();
    let scan = Prim::Scan {
        length: *length,
        reverse: *reverse,
        num_consts: nc + p.frontier.len(),
        num_carry: *num_carry,
        body: Box::new(nb),
    };
    g.push(scan, &operands, loc).expect("the hoisted scan types as the original").to_vec()
}

/// Control flow stays where it is (its cost and its own loops are its own business).
pub(crate) fn control_flow(p: &Prim) -> bool {
    !p.subfunctions().is_empty()
}

/// Layout ops that cost nothing fused into their consumer (see the module doc).
pub(crate) fn cheap(p: &Prim) -> bool {
    match p {
        Prim::BroadcastInDim { .. }
        | Prim::Iota { .. }
        | Prim::Reshape { .. }
        | Prim::Transpose { .. }
        | Prim::Slice { .. }
        | Prim::Rev { .. }
        | Prim::StopGradient => true,
        Prim::Unary(_)
        | Prim::Binary(_)
        | Prim::Compare(_)
        | Prim::Select
        | Prim::Clamp
        | Prim::ConvertElementType { .. }
        | Prim::BitcastConvertType { .. }
        | Prim::DynamicSlice { .. }
        | Prim::DynamicUpdateSlice
        | Prim::Concatenate { .. }
        | Prim::Pad { .. }
        | Prim::Gather { .. }
        | Prim::DotGeneral { .. }
        | Prim::Reduce { .. }
        | Prim::ArgReduce { .. }
        | Prim::Cumulative { .. }
        | Prim::Sort { .. }
        | Prim::Scatter { .. }
        | Prim::SegmentSum { .. }
        | Prim::Threefry2x32
        | Prim::CustomJvpCall { .. }
        | Prim::CustomVjpCall { .. }
        | Prim::Scan { .. }
        | Prim::WhileLoop { .. }
        | Prim::Cond { .. }
        | Prim::Call { .. }
        | Prim::Checkpoint { .. } => false,
    }
}
