//! Which steps before a scan can run on another thread while the scan consumes their rows.
//!
//! A scan's carry-independent work computed for all steps before the loop
//! (`kiln_transform::precompute_scan_xs_work`: W2's actuation `tanh(W·sin(ω·dt·t + φ))`, a sine
//! kernel, a matrix product and a tanh kernel over the 1000 steps) is a chain of steps whose row
//! `t` depends only on rows `t` of the chain's earlier results, and the loop's step `t` reads only
//! row `t` of it. Run in that order, the loop waits for the whole chain (a fifth of W2's forward
//! pass on one thread, with the second core idle during the loop). Pipelined, another thread
//! computes the chain in blocks of rows while the loop runs, and step `t` waits only until row `t`
//! is done ([`crate::runtime::pipeline`]). Each element is computed by the same kernel or gemm
//! rows as before, so results are bitwise the same.

use crate::runtime::Op;
use kiln_ir::{Function, Prim, Var};

/// A planned step as the pipeline search sees it.
pub(crate) struct StepView<'a> {
    pub(crate) op: &'a Op,
    pub(crate) inputs: &'a [Var],
    pub(crate) outputs: &'a [Var],
    pub(crate) scratch_bytes: usize,
    /// The equation of a runtime step (a `dot_general`'s dimension numbers).
    pub(crate) eqn: Option<usize>,
}

/// Steps `first..scan` feeding step `scan`'s xs ([`find`]).
#[derive(Clone, Debug)]
pub(crate) struct Chain {
    pub(crate) first: usize,
    pub(crate) scan: usize,
    /// The scan's length: the rows of every chain result.
    pub(crate) rows: usize,
    /// Per step of `first..scan`: a member of the chain (else run whole before it).
    pub(crate) members: Box<[bool]>,
}

/// How many steps before a scan the search looks at (planning stays linear).
const WINDOW: usize = 32;

/// The chains of `steps` (of `f`): for each forward scan that is not split over threads, the
/// steps among the [`WINDOW`] before it that are kernels over `length` rows or plain matrix
/// products `[length, k]·[k, n]` read in place, whose results are read only by other members in
/// the row they write (kernels: `row_local`, a later member of the same multi-output kernel
/// included; products: as the lhs), as xs of the scan, or by steps after it (the chain is done by
/// then: W2's backward loop reads the forward loop's precomputed xs). Steps between members run
/// whole before the chain. The ranges `first..=scan` of the chains never overlap: a later scan's
/// chain that would reach into an earlier one's range is dropped.
pub(crate) fn find(f: &Function, steps: &[StepView]) -> Vec<Chain> {
    let mut chains = Vec::new();
    // Readers of each variable, (step, input position), indexed once for every scan's search.
    let mut read_by: Vec<Vec<(usize, usize)>> = vec![Vec::new(); f.vars.len()];
    for (i, d) in steps.iter().enumerate() {
        for (k, v) in d.inputs.iter().enumerate() {
            read_by[v.index()].push((i, k));
        }
    }
    let readers = |v: Var| read_by[v.index()].iter().copied();
    for (scan, s) in steps.iter().enumerate() {
        let Op::Control(c) = s.op else { continue };
        let Some((rows, first_xs)) = c.pipelinable_scan() else { continue };
        // Chain membership of the steps before the scan, decided from the scan backwards: a step
        // that is not a member (W2's gradient transposes W between the sines and the product)
        // runs before the chain, which needs it to read no member's result.
        let mut member = vec![false; scan];
        for p in (scan.saturating_sub(WINDOW)..scan).rev() {
            let d = &steps[p];
            let rows_ok = match d.op {
                Op::Kernel { rows: r, .. } => *r == rows as i64,
                Op::Dot(plan) => plan.row_block_rows() == Some(rows) && plain_matmul(f, d.eqn),
                _ => false,
            };
            let used_well = d.outputs.iter().all(|&v| {
                f.var_type(v).shape.dims().first() == Some(&rows)
                    && !f.outputs.contains(&v)
                    && readers(v).all(|(i, k)| {
                        (i == scan && k >= first_xs)
                            || (i >= p && i < scan && (i == p || member[i]) && reads_rowwise(&steps[i], k))
                            || i > scan
                    })
            });
            member[p] = rows_ok && used_well && d.scratch_bytes == 0;
        }
        let Some(first) = member.iter().position(|&m| m) else { continue };
        // At least one xs of the scan must come from the chain.
        let feeds = (first..scan)
            .any(|p| member[p] && steps[p].outputs.iter().any(|v| s.inputs[first_xs..].contains(v)));
        // Ranges stay disjoint: the runtime runs a range from its first step, the donation check
        // counts a step's reads from its range's first step, and the listing names each chain;
        // with two scans of different lengths one range could hold the other (a scan, to the
        // outer chain, is a step run before it).
        let disjoint = chains.iter().all(|c: &Chain| c.scan < first || scan < c.first);
        if feeds && rows >= 2 && disjoint {
            chains.push(Chain { first, scan, rows, members: member[first..].to_vec().into() });
        }
    }
    chains
}

/// Whether input `k` of a chain step is read only in the row it writes.
fn reads_rowwise(step: &StepView, k: usize) -> bool {
    match step.op {
        Op::Kernel { row_local, .. } => row_local.get(k).copied().unwrap_or(false),
        // The lhs of `[rows, k]·[k, n]`: result row `t` reads lhs row `t`.
        Op::Dot(_) => k == 0,
        _ => false,
    }
}

/// Whether equation `eqn` is a `dot_general` of a rank-2 lhs contracting its axis 1, no batch
/// axes: its gemm rows are the lhs's rows and the result's.
fn plain_matmul(f: &Function, eqn: Option<usize>) -> bool {
    let Some(e) = eqn.map(|i| &f.eqns[i]) else { return false };
    match &e.prim {
        Prim::DotGeneral { lhs_contracting, lhs_batch, rhs_batch, .. } => {
            f.var_type(e.inputs[0]).rank() == 2
                && lhs_contracting.as_slice() == [1]
                && lhs_batch.is_empty()
                && rhs_batch.is_empty()
        }
        _ => false,
    }
}
