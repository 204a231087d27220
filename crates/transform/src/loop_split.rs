//! Splitting a scan body between the loop and the work before it: the backward pass both scan
//! rewrites share ([`crate::hoist_scan_invariants`] moves loop-invariant equations out,
//! [`crate::precompute_scan_xs_work`] carry-independent work on the `xs`). Each rewrite says
//! where one equation belongs; this pass follows what reads what, so that whatever the loop or
//! the moved work reads is computed on that side, and records the moved results the loop reads.

use kiln_ir::{Eqn, Function, Var};

/// Where one equation of the body goes, given who reads it ([`Reads`]).
pub(crate) enum Place {
    /// Stays in the loop (even if nothing reads it: the rewrites keep the body as it was).
    Loop,
    /// Runs before the loop; the loop reads its results as new operands (the frontier).
    Before,
    /// Computed on each side that reads it: in the loop if the loop does, before it if moved
    /// work does.
    Both,
    /// Read by neither side: dropped.
    Dropped,
}

/// Whether an equation's results are read by the loop (later kept equations, the body's
/// outputs) and by the work moved before it.
#[derive(Clone, Copy)]
pub(crate) struct Reads {
    pub(crate) by_loop: bool,
    pub(crate) before: bool,
}

impl Reads {
    /// Read by either side.
    pub(crate) fn any(self) -> bool {
        self.by_loop || self.before
    }
}

/// The body's equations split by [`split`].
pub(crate) struct Split {
    /// Equations computed before the loop, in program order.
    pub(crate) before: Vec<usize>,
    /// Equations kept in the loop, in program order ([`Place::Both`] ones may be in both lists).
    pub(crate) kept: Vec<usize>,
    /// Results of equations placed [`Place::Before`] that the loop reads, by variable index.
    pub(crate) frontier: Vec<Var>,
    /// Per body variable: read by the loop (parameters included).
    pub(crate) in_loop: Vec<bool>,
}

/// Walks `b`'s equations backwards from its outputs, placing each where `place` says.
pub(crate) fn split(b: &Function, place: impl Fn(usize, &Eqn, Reads) -> Place) -> Split {
    let (mut in_loop, mut before_reads) = (vec![false; b.vars.len()], vec![false; b.vars.len()]);
    for v in &b.outputs {
        in_loop[v.index()] = true;
    }
    let (mut before, mut kept, mut frontier): (Vec<usize>, Vec<usize>, Vec<Var>) =
        (Vec::new(), Vec::new(), Vec::new());
    for (i, e) in b.eqns.iter().enumerate().rev() {
        let reads = Reads {
            by_loop: e.outputs.iter().any(|o| in_loop[o.index()]),
            before: e.outputs.iter().any(|o| before_reads[o.index()]),
        };
        let (in_the_loop, ahead) = match place(i, e, reads) {
            Place::Loop => (true, false),
            Place::Before => {
                frontier.extend(e.outputs.iter().filter(|o| in_loop[o.index()]));
                (false, true)
            }
            Place::Both => (reads.by_loop, reads.before),
            Place::Dropped => (false, false),
        };
        if in_the_loop {
            kept.push(i);
            e.inputs.iter().for_each(|v| in_loop[v.index()] = true);
        }
        if ahead {
            before.push(i);
            e.inputs.iter().for_each(|v| before_reads[v.index()] = true);
        }
    }
    before.reverse();
    kept.reverse();
    frontier.sort_unstable_by_key(|v| v.index());
    Split { before, kept, frontier, in_loop }
}
