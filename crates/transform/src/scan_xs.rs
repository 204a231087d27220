//! Step-indexed work of a `scan` computed for every step at once, before the loop (loop fission
//! over the scanned inputs). Equations of a scan body that read only its loop constants and its
//! `xs` (the per-step slices of the scanned arrays), never its carries, do not depend on earlier
//! steps: vmapped over the scan axis ([`crate::batching::batch_function`]) they run once, as whole
//! `[length, ...]` array ops before the loop, and the body reads their per-step results as new `xs`.
//! W2's actuation `tanh(W · sin(ω·dt·t + φ))` is such work: in the loop it is a handful of tiny
//! kernels per step (a 10-wide sine, a `[120, 10]` product, a 120-wide tanh), each paying its
//! dispatch; before the loop it is three array ops over all 1000 steps.
//!
//! Cheap layout ops (see [`crate::licm`]) whose results only the loop reads stay inside, fused
//! into their consumers. Loop-invariant equations still in the body (those loop-invariant code
//! motion left there, cheap) are duplicated where the moved work reads them. Control flow is never
//! moved. Whether a scan's move pays is the caller's call (`accept`, given the body before and
//! after and the bytes the precomputation may hold; kiln's `jit` asks the backend's estimate): the
//! precomputed arrays are written once and read back step by step, where the loop computed them in
//! registers.
//!
//! Values are unchanged bit for bit in the reference interpreter (every primitive is pure and its
//! batching rule computes each step's slice as the unbatched op would), but for which NaN a
//! product of two NaN factors yields (a batched `dot_general` may swap its operands; IEEE 754
//! §6.2.3 leaves the choice open). A backend may round float
//! sums differently once a product over one step becomes a product over all steps (kiln's vector
//! path reassociates innermost sums within its documented bound).

use crate::licm::{cheap, control_flow};
use crate::loop_split::{Place, split};
use crate::var_map::{VarMap, inline, rebuild};
use kiln_ir::{Function, Prim, Var};

/// What [`precompute_scan_xs_work`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct XsWorkReport {
    /// Body equations computed for all steps before their loop.
    pub moved: usize,
    /// Scans that lost equations.
    pub scans: usize,
    /// Scans with movable work whose move `accept` refused.
    pub refused: usize,
}

/// `f` with the carry-independent work of every `scan` body (nested ones included) computed for
/// all steps before the loop, for each scan that `accept(body, new_body, bytes)` approves: the body
/// before and after, and the bytes of the largest array the precomputation may hold — the new `xs`
/// together, or any one moved intermediate (`length` times its per-step bytes; an intermediate
/// `[1000, 1000]` per step is 4 GB over 1000 steps even where the loop reads back a scalar). Scans
/// of length 0 are left alone.
///
/// ```
/// use kiln_ir::{Array, BinaryOp, DType, Function, Prim, TensorType, UnaryOp, eval};
/// use kiln_transform::precompute_scan_xs_work;
/// // scan over 3 steps of `c' = c + exp(x_t)`: `exp` reads only the scanned input.
/// let mut body = Function::new();
/// let c = body.add_param(TensorType::new(DType::F32, [2]));
/// let x = body.add_param(TensorType::new(DType::F32, [2]));
/// let e = body.push(Prim::Unary(UnaryOp::Exp), &[x], None)?[0];
/// body.outputs = body.push(Prim::Binary(BinaryOp::Add), &[c, e], None)?.to_vec();
/// let mut f = Function::new();
/// let c0 = f.add_param(TensorType::new(DType::F32, [2]));
/// let xs = f.add_param(TensorType::new(DType::F32, [3, 2]));
/// let scan = Prim::Scan { length: 3, reverse: false, num_consts: 0, num_carry: 1, body: Box::new(body) };
/// f.outputs = f.push(scan, &[c0, xs], None)?.to_vec();
/// let (g, report) = precompute_scan_xs_work(&f, &|_, _, bytes| bytes <= 1 << 20);
/// assert_eq!((report.moved, report.scans), (1, 1)); // exp(xs) runs once, over [3, 2]
/// let args = [Array::from_vec(&[2], vec![0.0f32, 1.0]), Array::from_vec(&[3, 2], vec![0.5f32, 1.0, -1.0, 2.0, 0.0, -0.5])];
/// assert_eq!(eval(&f, &args)?, eval(&g, &args)?);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn precompute_scan_xs_work(
    f: &Function,
    accept: &dyn Fn(&Function, &Function, u64) -> bool,
) -> (Function, XsWorkReport) {
    let mut report = XsWorkReport::default();
    let g = rewrite(f, accept, &mut report);
    (g, report)
}

/// [`precompute_scan_xs_work`] on `f`, its sub-functions first.
fn rewrite(
    f: &Function,
    accept: &dyn Fn(&Function, &Function, u64) -> bool,
    report: &mut XsWorkReport,
) -> Function {
    rebuild(f, |g, e, ins| {
        let prim = e.prim.map_subfunctions(|sub| rewrite(sub, accept, report));
        let Some(p) = plan(&prim) else {
            return g.push(prim, &ins, e.loc.clone()).expect("equations of a verified function").to_vec();
        };
        let (new_body, bytes) = new_body(&prim, &p);
        let Prim::Scan { body, .. } = &prim else { unreachable!("plans are made for scans only") };
        if accept(body, &new_body, bytes) {
            report.moved += p.moved.len();
            report.scans += 1;
            emit(g, &prim, &p, new_body, &ins, e.loc.clone())
        } else {
            report.refused += 1;
            g.push(prim, &ins, e.loc.clone()).expect("a verified scan").to_vec()
        }
    })
}

/// Which equations of a scan body run before the loop, and what the loop still reads.
struct Plan {
    /// Body equations computed for all steps before the loop, in order.
    moved: Vec<usize>,
    /// Body equations kept in the loop, in order (loop-invariant ones the moved work reads too
    /// are in both lists).
    kept: Vec<usize>,
    /// Results of moved equations the loop reads: new `xs`, in this order.
    frontier: Vec<Var>,
    /// The body's `xs` parameters the loop still reads (indices into its `xs`).
    xs_kept: Vec<usize>,
}

/// The plan of a `scan`, or `None` when no carry-independent work other than cheap layout ops
/// depends on its `xs`.
fn plan(prim: &Prim) -> Option<Plan> {
    let Prim::Scan { length, num_consts, num_carry, body, .. } = prim else { return None };
    let (b, nc, nk): (&Function, usize, usize) = (body, *num_consts, *num_carry);
    if *length == 0 {
        return None;
    }
    // `free`: reads no carry (constants, captured arrays, xs and what is computed from them only);
    // `varying`: free and reads an `xs`.
    let (mut free, mut varying) = (vec![false; b.vars.len()], vec![false; b.vars.len()]);
    for p in b.params[..nc].iter().chain(&b.params[nc + nk..]) {
        free[p.index()] = true;
    }
    for p in &b.params[nc + nk..] {
        varying[p.index()] = true;
    }
    for c in &b.consts {
        free[c.var.index()] = true;
    }
    for e in &b.eqns {
        if !control_flow(&e.prim) && e.inputs.iter().all(|v| free[v.index()]) {
            let vary = e.inputs.iter().any(|v| varying[v.index()]);
            for o in &e.outputs {
                free[o.index()] = true;
                varying[o.index()] = vary;
            }
        }
    }
    // Carry-independent work on the xs moves before the loop, unless it is cheap and only the
    // loop reads it; loop-invariant equations are computed wherever they are read.
    let s = split(b, |_, e, reads| {
        let is_free = e.outputs.iter().all(|o| free[o.index()]);
        let is_varying = is_free && e.outputs.iter().any(|o| varying[o.index()]);
        if !is_free || (is_varying && reads.by_loop && !reads.before && cheap(&e.prim)) {
            Place::Loop
        } else if !is_varying {
            Place::Both
        } else if reads.any() {
            Place::Before
        } else {
            Place::Dropped
        }
    });
    let real_work =
        s.before.iter().any(|&i| varying[b.eqns[i].outputs[0].index()] && !cheap(&b.eqns[i].prim));
    if s.frontier.is_empty() || !real_work {
        return None;
    }
    let xs_kept =
        (0..b.params.len() - nc - nk).filter(|&j| s.in_loop[b.params[nc + nk + j].index()]).collect();
    Some(Plan { moved: s.before, kept: s.kept, frontier: s.frontier, xs_kept })
}

/// The scan body after the move (parameters: constants, carries, the `xs` still read, then the
/// frontier as new `xs`), and the bytes of the largest array the precomputation may hold (the
/// frontier together, or one moved intermediate).
fn new_body(prim: &Prim, p: &Plan) -> (Function, u64) {
    let Prim::Scan { length, num_consts, num_carry, body, .. } = prim else {
        unreachable!("plans are made for scans only")
    };
    let (b, nc, nk): (&Function, usize, usize) = (body, *num_consts, *num_carry);
    let mut nb = Function::new();
    let mut inner = VarMap::new(b);
    let xs_kept = p.xs_kept.iter().map(|&j| &b.params[nc + nk + j]);
    inner.add_params(&mut nb, b, b.params[..nc + nk].iter().chain(xs_kept).chain(&p.frontier));
    inner.add_consts(&mut nb, b);
    for &i in &p.kept {
        inner.push(&mut nb, &b.eqns[i]);
    }
    nb.outputs = inner.all(&b.outputs);
    let per_step = |v: &Var| b.var_type(*v).bytes() as u64;
    let results: u64 = p.frontier.iter().map(per_step).sum();
    let largest = p.moved.iter().flat_map(|&i| &b.eqns[i].outputs).map(per_step).max().unwrap_or(0);
    (crate::dce(&nb), results.max(largest) * *length as u64)
}

/// Emits the precomputation (the moved equations, vmapped over the scan axis) and the new scan
/// into `g`, whose `ins` are the scan's operands; returns the scan's results.
fn emit(
    g: &mut Function,
    prim: &Prim,
    p: &Plan,
    new_body: Function,
    ins: &[Var],
    loc: Option<kiln_ir::SrcLoc>,
) -> Vec<Var> {
    let Prim::Scan { length, reverse, num_consts, num_carry, body } = prim else {
        unreachable!("plans are made for scans only")
    };
    let (b, nc, nk): (&Function, usize, usize) = (body, *num_consts, *num_carry);
    // One step's moved work as a function of the constants and the xs, batched over the steps.
    let mut step = Function::new();
    let mut map = VarMap::new(b);
    map.add_params(&mut step, b, b.params[..nc].iter().chain(&b.params[nc + nk..]));
    for &i in &p.moved {
        map.add_consts_read(&mut step, b, &b.eqns[i]);
        map.push(&mut step, &b.eqns[i]);
    }
    step.outputs = map.all(&p.frontier);
    let nx = b.params.len() - nc - nk;
    let in_batched: Vec<bool> = (0..nc + nx).map(|k| k >= nc).collect();
    let (batched, _) =
        crate::batching::batch_function(&step, &in_batched, *length, &vec![true; p.frontier.len()]);
    let step_ins: Vec<Var> = ins[..nc].iter().chain(&ins[nc + nk..]).copied().collect();
    let precomputed = inline(g, &batched, &step_ins);
    let operands: Vec<Var> = ins[..nc + nk]
        .iter()
        .copied()
        .chain(p.xs_kept.iter().map(|&j| ins[nc + nk + j]))
        .chain(precomputed)
        .collect();
    let scan = Prim::Scan {
        length: *length,
        reverse: *reverse,
        num_consts: nc,
        num_carry: nk,
        body: Box::new(new_body),
    };
    g.push(scan, &operands, loc).expect("the new scan types as the original").to_vec()
}
