//! Multi-output kernels: after [`fusion`](crate::fusion) has chosen the kernel roots, kernels whose
//! outputs have the same number of outer rows are grouped into one native function with several
//! outputs. The group runs as one step: each task takes a range of rows and computes, member after
//! member, those rows of every output. That is one dispatch (and, for a parallel step, one fork and
//! join) instead of one per kernel. A member may read an earlier member's output, but only at its
//! own row: such rows are then written by the same task just before, and still in its cache.
//!
//! A kernel joins the latest group it can be moved up to: every buffer it reads must be ready there
//! (computed before the group, or an earlier member's output read at the same row, see
//! [`row_local`]). Moving a kernel earlier is safe because nothing between reads its output yet.
//! Not grouped: scatter kernels (their own loop over the updates), rank-0 outputs (one element that
//! every task would write), and empty outputs. Segment kernels (their runtime cuts rows by id)
//! group only with each other, when they sum data of the same type and run on one thread
//! ([`find_segment_sibling`]): W2's spring forces `f.segment_sum(a) − f.segment_sum(b)` then
//! compute `f` once per spring, in one loop adding it to both outputs.

use crate::codegen::{MAX_KERNEL_OPERANDS, kernel_leaves};
use crate::fusion::Role;
use kiln_ir::{Function, Prim, Var};

/// A planned step, in execution order: a single equation (a runtime step, or a reshape sharing its
/// operand's buffer), or a kernel with one or more roots (program order; outputs in that order).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Item {
    Eqn(usize),
    Kernel(Vec<usize>),
}

/// How far back (in planned steps) a kernel looks for a group to join; keeps planning linear.
const WINDOW: usize = 32;

/// The most roots in one kernel.
const MAX_MEMBERS: usize = 16;

/// The planned steps of `f` given the fusion roles: kernels grouped when `multi_output` (else one
/// kernel per root, program order). `resolve`: the buffer a variable reads (aliases followed);
/// `aliased[i]`: equation `i` is a kernel root that needs no step (it shares its operand's buffer);
/// `serial(roots)`: a kernel with these roots would run on one thread.
pub(crate) fn schedule(
    f: &Function,
    roles: &[Role],
    inline: &[Option<usize>],
    aliased: &dyn Fn(usize) -> bool,
    resolve: &dyn Fn(Var) -> Var,
    serial: &dyn Fn(&[usize]) -> bool,
    multi_output: bool,
) -> Vec<Item> {
    let mut items: Vec<Item> = Vec::new();
    // The distinct leaves (as the kernels name them, before aliases are resolved: the pointer
    // table's entries) of each item's kernel, to respect the table limit with its outputs.
    let mut operands: Vec<Vec<Var>> = Vec::new();
    // The planned step computing each variable's buffer (none for parameters and constants).
    let mut at: Vec<Option<usize>> = vec![None; f.vars.len()];
    for (i, e) in f.eqns.iter().enumerate() {
        match roles[i] {
            Role::Inline => continue,
            Role::Kernel if !aliased(i) => {}
            Role::Kernel | Role::Runtime => {
                for v in &e.outputs {
                    at[v.index()] = Some(items.len());
                }
                items.push(Item::Eqn(i));
                operands.push(Vec::new());
                continue;
            }
        }
        let own = kernel_leaves(f, i, inline);
        let leaves: Vec<Var> = own.iter().copied().map(resolve).collect();
        let joined = if !multi_output {
            None
        } else if groupable(f, i) {
            find_group(f, i, inline, &own, &leaves, &items, &operands, &at, resolve)
        } else {
            find_segment_sibling(f, i, &own, &leaves, &items, &operands, &at, serial)
        };
        let g = joined.unwrap_or_else(|| {
            items.push(Item::Kernel(Vec::new()));
            operands.push(Vec::new());
            items.len() - 1
        });
        if let Item::Kernel(roots) = &mut items[g] {
            roots.push(i);
        }
        for v in &own {
            if !operands[g].contains(v) {
                operands[g].push(*v);
            }
        }
        for v in &e.outputs {
            at[v.index()] = Some(g);
        }
    }
    items
}

/// Whether the kernel rooted at `f.eqns[i]` may share a step with others (see the module doc).
fn groupable(f: &Function, i: usize) -> bool {
    let e = &f.eqns[i];
    let out = f.var_type(e.outputs[0]);
    !matches!(e.prim, Prim::SegmentSum { .. } | Prim::Scatter { .. })
        && out.rank() >= 1
        && out.shape.size() > 0
}

/// Outer rows of the kernel rooted at `f.eqns[i]`.
fn rows(f: &Function, i: usize) -> usize {
    f.var_type(f.eqns[i].outputs[0]).shape.dims()[0]
}

/// The group the kernel rooted at `f.eqns[i]` (leaves `own`, reading buffers `leaves`) can join,
/// if any.
#[allow(clippy::too_many_arguments)]
fn find_group(
    f: &Function,
    i: usize,
    inline: &[Option<usize>],
    own: &[Var],
    leaves: &[Var],
    items: &[Item],
    operands: &[Vec<Var>],
    at: &[Option<usize>],
    resolve: &dyn Fn(Var) -> Var,
) -> Option<usize> {
    // The latest step whose output this kernel reads: it cannot move above it.
    let ready = leaves.iter().filter_map(|v| at[v.index()]).max();
    for g in (items.len().saturating_sub(WINDOW)..items.len()).rev() {
        if ready.is_some_and(|r| r > g) {
            return None;
        }
        let Item::Kernel(roots) = &items[g] else { continue };
        if roots.len() >= MAX_MEMBERS || !groupable(f, roots[0]) || rows(f, roots[0]) != rows(f, i) {
            continue;
        }
        // The table: distinct leaves, then one slot per root's output (`codegen::Jit::kernel`).
        let extra = own.iter().filter(|v| !operands[g].contains(v)).count();
        if operands[g].len() + extra + roots.len() + 1 > MAX_KERNEL_OPERANDS {
            continue;
        }
        // Buffers computed by this group's members must be read at the reader's own row.
        let from_group: Vec<Var> = leaves.iter().copied().filter(|v| at[v.index()] == Some(g)).collect();
        if from_group.is_empty() || row_local(f, i, inline, &from_group, resolve) {
            return Some(g);
        }
    }
    None
}

/// The group of `segment_sum` kernels the one rooted at `f.eqns[i]` can join: the latest earlier
/// one (within [`WINDOW`] steps, not before a step computing one of its leaves) whose members sum
/// data of the same type into outputs of the same type, if the joined kernel runs on one thread
/// (`serial`). Its one loop over the data rows computes each member's row values (a value two
/// members share, the same variable or the same leaf load, once: Cranelift's value numbering)
/// and adds them into that member's output at its id, rows in order: per output the sequential
/// sum of a kernel alone, so bitwise the same. W2's forward pass sums the same spring forces by
/// both end points; its backward pass sums the same cotangent by both, negated for one. Parallel
/// segment kernels cut their rows where one id array changes, which cannot own another's
/// segments.
#[allow(clippy::too_many_arguments)]
fn find_segment_sibling(
    f: &Function,
    i: usize,
    own: &[Var],
    leaves: &[Var],
    items: &[Item],
    operands: &[Vec<Var>],
    at: &[Option<usize>],
    serial: &dyn Fn(&[usize]) -> bool,
) -> Option<usize> {
    let e = &f.eqns[i];
    let Prim::SegmentSum { .. } = e.prim else { return None };
    // A leaf computed by a group (or after it) rules it out: a segment kernel reads its leaves at
    // any row.
    let ready = leaves.iter().filter_map(|v| at[v.index()]).max();
    for g in (items.len().saturating_sub(WINDOW)..items.len()).rev() {
        if ready.is_some_and(|r| r >= g) {
            return None;
        }
        let Item::Kernel(roots) = &items[g] else { continue };
        let sibling = |r: &usize| {
            let o = &f.eqns[*r];
            o.prim == e.prim
                && f.var_type(o.inputs[0]) == f.var_type(e.inputs[0])
                && f.var_type(o.outputs[0]) == f.var_type(e.outputs[0])
        };
        if roots.len() >= MAX_MEMBERS || !roots.iter().all(sibling) {
            continue;
        }
        // The table: distinct leaves, the outputs, the flag (`codegen::Jit::kernel`).
        let extra = own.iter().filter(|v| !operands[g].contains(v)).count();
        if operands[g].len() + extra + roots.len() + 2 > MAX_KERNEL_OPERANDS {
            continue;
        }
        let joined: Vec<usize> = roots.iter().copied().chain([i]).collect();
        return serial(&joined).then_some(g);
    }
    None
}

/// Whether every read of the buffers `targets` in the kernel rooted at `f.eqns[root]` is at the
/// root's own outer row: the path from the root down to each such leaf only passes through index
/// maps that keep the outer coordinate (elementwise ops on equal shapes, broadcasts, reshapes,
/// slices and transposes that keep axis 0 whole, reductions over other axes).
pub(crate) fn row_local(
    f: &Function,
    root: usize,
    inline: &[Option<usize>],
    targets: &[Var],
    resolve: &dyn Fn(Var) -> Var,
) -> bool {
    fn walk(
        f: &Function,
        e: &kiln_ir::Eqn,
        inline: &[Option<usize>],
        targets: &[Var],
        resolve: &dyn Fn(Var) -> Var,
        aligned: bool,
    ) -> bool {
        e.inputs.iter().enumerate().all(|(k, &v)| {
            let keeps = aligned && keeps_row(f, e, k);
            match inline[v.index()] {
                Some(p) => walk(f, &f.eqns[p], inline, targets, resolve, keeps),
                // A leaf sharing a target's buffer through reshapes is at the same row when the
                // outer sizes agree (row-major order is kept by reshapes).
                None => {
                    let t = resolve(v);
                    !targets.contains(&t)
                        || (keeps && f.var_type(v).shape.dims().first() == f.var_type(t).shape.dims().first())
                }
            }
        })
    }
    walk(f, &f.eqns[root], inline, targets, resolve, true)
}

/// How far, in rows of the outer axis counted cyclically, the kernel rooted at `f.eqns[root]`
/// reads leaf `target` (as [`row_local`]: `inline[v]` the equation computing an inlined `v`,
/// `resolve` the buffer a leaf reads): `Some(r)` when output row `i` reads only rows
/// `i - r ..= i + r` (mod N) of it, N the root's outer size, which the target shares; `Some(0)`
/// when it does not read it at all. `None` when a read is not a fixed shift of the row: the path
/// passes through an index map other than those of [`keeps_row`] and the shifts of [`row_shift`].
/// A `roll` by ±1 along axis 0 (a `concatenate` of two slices) has reach 1: row 0 reads row N − 1,
/// which is 1 away cyclically. A scan whose carries are read this way can run as row ranges with
/// halos (`Executable::halo_split`).
pub(crate) fn row_reach(
    f: &Function,
    root: usize,
    inline: &[Option<usize>],
    target: Var,
    resolve: &dyn Fn(Var) -> Var,
) -> Option<u64> {
    let n = i64::try_from(*f.var_type(f.eqns[root].outputs[0]).shape.dims().first()?).ok()?;
    if n == 0 {
        return None;
    }
    // (equation, shift of its output row from the root's row; None: not a fixed shift). Each
    // pair is walked once: a diamond of inlined equations would otherwise be walked once per path.
    let mut todo = vec![(root, Some(0i64))];
    let mut seen = std::collections::HashSet::new();
    let mut reach = 0u64;
    while let Some((i, shift)) = todo.pop() {
        if !seen.insert((i, shift)) {
            continue;
        }
        let e = &f.eqns[i];
        for (k, &v) in e.inputs.iter().enumerate() {
            let s = shift.and_then(|s| Some(s + row_shift(f, e, k)?));
            match inline[v.index()] {
                Some(p) => todo.push((p, s)),
                None if resolve(v) != target => {}
                None => {
                    let outer = |t: Var| f.var_type(t).shape.dims().first().copied();
                    let s =
                        s.filter(|_| outer(v) == Some(n as usize) && outer(target) == Some(n as usize))?;
                    let d = s.rem_euclid(n);
                    reach = reach.max(d.min(n - d) as u64);
                }
            }
        }
    }
    Some(reach)
}

/// The fixed shift of the row operand `slot` of `e` is read at: output row `r` reads its row
/// `r + shift`. Zero where [`keeps_row`]; a slice along axis 0 with unit stride shifts by its
/// start, a concatenation along axis 0 by minus the rows of the operands before `slot`, a pad of
/// axis 0 without interior padding by minus its low padding. `None` for every other read.
fn row_shift(f: &Function, e: &kiln_ir::Eqn, slot: usize) -> Option<i64> {
    if keeps_row(f, e, slot) {
        return Some(0);
    }
    let (x, y) = (f.var_type(e.inputs[slot]), f.var_type(e.outputs[0]));
    if x.rank() == 0 || y.rank() == 0 {
        return None;
    }
    match &e.prim {
        Prim::Slice { start, strides, .. } if strides[0] == 1 => i64::try_from(start[0]).ok(),
        Prim::Concatenate { dimension: 0 } => {
            let before: usize = e.inputs[..slot].iter().map(|&v| f.var_type(v).shape.dims()[0]).sum();
            i64::try_from(before).ok().map(|b| -b)
        }
        Prim::Pad { low, interior, .. } if slot == 0 && interior[0] == 0 => Some(-low[0]),
        _ => None,
    }
}

/// Whether element `[r, ..]` of `e`'s output reads operand `slot` only in its row `r` (the operand
/// has the same outer size).
fn keeps_row(f: &Function, e: &kiln_ir::Eqn, slot: usize) -> bool {
    let (x, y) = (f.var_type(e.inputs[slot]), f.var_type(e.outputs[0]));
    let outer = |t: &kiln_ir::TensorType| t.shape.dims().first().copied();
    if x.rank() == 0 || y.rank() == 0 || outer(x) != outer(y) {
        return false;
    }
    match &e.prim {
        Prim::Unary(_)
        | Prim::Binary(_)
        | Prim::Compare(_)
        | Prim::Select
        | Prim::Clamp
        | Prim::ConvertElementType { .. }
        | Prim::BitcastConvertType { .. }
        | Prim::StopGradient => x.shape == y.shape,
        Prim::BroadcastInDim { broadcast_dimensions, .. } => broadcast_dimensions.first() == Some(&0),
        Prim::Reshape { .. } => true,
        Prim::Transpose { permutation } => permutation.first() == Some(&0),
        Prim::Slice { start, strides, .. } => start[0] == 0 && strides[0] == 1,
        Prim::Reduce { axes, .. } => !axes.contains(&0),
        Prim::ArgReduce { axis, .. } => *axis != 0,
        // Along another axis (a `stack` of a state's components, W4's step): row r of the output
        // is made of the operands' rows r.
        Prim::Concatenate { dimension } => *dimension != 0,
        Prim::Rev { dimensions } => !dimensions.contains(&0),
        // No padding on axis 0 (the equal outer sizes then rule out high padding too).
        Prim::Pad { low, interior, .. } => low[0] == 0 && interior[0] == 0,
        // The output's axis 0 is the first batch axis, else the lhs's first free axis, else the
        // rhs's (a vmapped `W·x` reads `x` in its own row).
        Prim::DotGeneral { lhs_contracting, rhs_contracting, lhs_batch, rhs_batch, .. } => {
            let free = |rank: usize, contracting: &[usize], batch: &[usize]| {
                (0..rank).find(|d| !contracting.contains(d) && !batch.contains(d))
            };
            let lhs_rank = f.var_type(e.inputs[0]).rank();
            match (lhs_batch.first(), rhs_batch.first(), slot) {
                (Some(&l), _, 0) => l == 0,
                (_, Some(&r), 1) => r == 0,
                (Some(_), _, _) => false,
                (None, _, 0) => free(lhs_rank, lhs_contracting, lhs_batch) == Some(0),
                (None, _, _) => {
                    free(lhs_rank, lhs_contracting, lhs_batch).is_none()
                        && free(x.rank(), rhs_contracting, rhs_batch) == Some(0)
                }
            }
        }
        // The output is `operand[..axis] ++ indices[batch_dims..] ++ ..`: its axis 0 is the
        // operand's when `axis ≥ 1` (a vmapped `take`), and the indices' when they share it or
        // index axis 0.
        Prim::Gather { axis, batch_dims, .. } => match slot {
            0 => *axis >= 1,
            _ => *batch_dims >= 1 || *axis == 0,
        },
        // Scattered along another axis, row r of the output is operand row r with the updates of
        // row r added (as in `Gather`); the indices share axis 0 only as a batch axis.
        Prim::Scatter { axis, batch_dims, .. } => match slot {
            1 => *batch_dims >= 1,
            _ => *axis >= 1,
        },
        Prim::Iota { .. }
        | Prim::DynamicSlice { .. }
        | Prim::DynamicUpdateSlice
        | Prim::Cumulative { .. }
        | Prim::Sort { .. }
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
