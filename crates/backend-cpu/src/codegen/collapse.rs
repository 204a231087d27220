//! Dimension collapsing: a kernel whose accesses are all contiguous across adjacent output axes is
//! compiled as the same kernel over fewer, longer axes.
//!
//! vmap puts the batch outermost, so rigid-body kernels have outputs like `[128, 9, 3]`: innermost
//! rows of 3 elements run the scalar loop nest (the vector path needs a row of at least one
//! vector). When every read of the fused tree moves contiguously across axes `d, d+1` (for a
//! strided access: `stride[d] == stride[d+1] · extent[d+1]`), the two axes are one loop: the
//! elementwise `[128, 9, 3]` kernel becomes one row of 3456 that the vector path runs on 128-bit
//! vectors.
//!
//! [`plan`] rewrites the fused tree into a small [`Function`] over collapsed shapes: each node gets
//! a *partition* of its axes into consecutive groups, derived from its consumer's partition by a
//! per-primitive rule (exhaustive `match`); a node that cannot follow its consumer's partition makes
//! the candidate fail. Candidates for the root are tried most-collapsed first. The rewritten tree
//! computes, at every element, the same primitive on the same operand elements, so elementwise
//! results are bitwise equal; reductions keep every reduced axis on its own, only kept axes merge.
//! One exception to "bitwise equal with collapsing off": a float sum whose operand only becomes
//! vector-eligible through the rewrite (e.g. `reduce_sum(reshape(x: [2,4,8] -> [2,32]), 1)`, where
//! the reshape turns into the identity) is summed in the vector path's order instead of the scalar
//! one — both within the documented float-sum bound (README: float sums are reassociated). Leaves are the same buffers, read with the collapsed shape
//! (a row-major view). The runtime still splits rows of the original outermost axis over
//! threads; [`Collapsed::row_scale`] turns them into rows of the collapsed one.
//!
//! [`Emitter::reshape_index`] is the other half of the job: a reshape maps indices block by block
//! between the axis boundaries both shapes share, so a reshape that keeps a prefix or suffix does
//! no divide/modulo round trip on it.

use super::kernel::Emitter;
use cranelift_codegen::ir::Value;
use kiln_ir::{Function, Prim, Shape, TensorType, Var};
use std::collections::HashMap;
use std::ops::Range;

/// Consecutive, non-empty groups `[a, b)` covering the axes `0..rank` of a node in order.
pub(super) type Part = Vec<Range<usize>>;

/// Above this output rank only suffix/prefix candidates are tried (the full set is `2^(rank-1)`).
const MAX_ENUM_RANK: usize = 7;

/// A kernel rewritten over collapsed axes.
pub(super) struct Collapsed {
    /// Parameters (the leaves, collapsed) and the rewritten tree; the root is the last equation.
    pub(super) func: Function,
    pub(super) root: usize,
    /// `inline[v]`: the equation of `func` computing the inlined variable `v`.
    pub(super) inline: Vec<Option<usize>>,
    /// The original leaf behind each parameter of `func`.
    pub(super) origin: HashMap<Var, Var>,
    /// Rows of the collapsed outermost axis per row of the original one.
    pub(super) row_scale: i64,
    /// The root's partition.
    pub(super) part: Part,
    /// Whether any node's axes merged (else the rewrite is the original kernel).
    pub(super) changed: bool,
}

/// Whether collapsing is on: `KILN_COLLAPSE=0` turns it off (a diagnostic switch for measuring
/// its effect; results are bitwise equal either way except float sums, see the module docs).
fn enabled() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var("KILN_COLLAPSE").map_or(true, |v| v != "0"))
}

/// The most-collapsed rewrite of the kernel rooted at `f.eqns[root]`, or `None` when no two
/// output axes can merge (then the kernel compiles as it is).
pub(super) fn plan(f: &Function, root: usize, inline: &[Option<usize>]) -> Option<Collapsed> {
    if !enabled() {
        return None;
    }
    let out = f.var_type(f.eqns[root].outputs[0]);
    let dims = out.shape.dims();
    // Segment and scatter kernels loop over their data rows, not their output's axes.
    let own_loop = matches!(f.eqns[root].prim, Prim::SegmentSum { .. } | Prim::Scatter { .. });
    if dims.is_empty() || out.shape.size() == 0 || own_loop {
        return None;
    }
    candidates(dims)
        .into_iter()
        .find_map(|part| Rewriter::run(f, root, inline, part))
        // No root axes merge, but an operand's may (a reshape `[n, 1] -> [n]` becomes the identity).
        .or_else(|| Rewriter::run(f, root, inline, singletons(dims.len())).filter(|c| c.changed))
}

/// Root partitions with at least one merge, best first: the longest innermost group, then the
/// fewest groups.
pub(super) fn candidates(dims: &[usize]) -> Vec<Part> {
    let r = dims.len();
    let from_cuts = |cuts: usize| -> Part {
        let mut part = Vec::new();
        let mut a = 0;
        for d in 1..r {
            if cuts >> (d - 1) & 1 == 1 {
                part.push(a..d);
                a = d;
            }
        }
        part.push(a..r);
        part
    };
    let mut out: Vec<Part> = if r <= MAX_ENUM_RANK {
        (0..(1usize << (r - 1))).map(from_cuts).collect()
    } else {
        // Merge a suffix, or a prefix, only.
        (1..r)
            .map(|k| (0..k).map(|d| d..d + 1).chain(std::iter::once(k..r)).collect())
            .chain((2..=r).map(|k| std::iter::once(0..k).chain((k..r).map(|d| d..d + 1)).collect()))
            .collect()
    };
    out.retain(|p: &Part| p.len() < r);
    let ext = |g: &Range<usize>| dims[g.clone()].iter().product::<usize>();
    out.sort_by_key(|p| (std::cmp::Reverse(ext(p.last().expect("non-empty"))), p.len()));
    out
}

/// `", axes collapsed [128, 9, 3] -> [3456]"`: the dump's note on a collapsed kernel.
pub(super) fn describe(f: &Function, root: usize, c: &Collapsed) -> String {
    let dims = f.var_type(f.eqns[root].outputs[0]).shape.dims();
    format!(", axes collapsed {dims:?} -> {:?}", collapse_dims(dims, &c.part))
}

/// Extents of `dims` grouped by `part`.
fn collapse_dims(dims: &[usize], part: &Part) -> Vec<usize> {
    part.iter().map(|g| dims[g.clone()].iter().product()).collect()
}

/// Every axis in its own group.
fn singletons(rank: usize) -> Part {
    (0..rank).map(|d| d..d + 1).collect()
}

/// The group holding axis `d`.
fn group_of(part: &Part, d: usize) -> usize {
    part.iter().position(|g| g.contains(&d)).expect("partition covers every axis")
}

/// Whether every axis of `g` other than `keep` has extent 1.
fn others_unit(dims: &[usize], g: &Range<usize>, keep: usize) -> bool {
    g.clone().all(|d| d == keep || dims[d] == 1)
}

/// Builds the rewritten tree for one root partition.
struct Rewriter<'a> {
    f: &'a Function,
    inline: &'a [Option<usize>],
    func: Function,
    inl: HashMap<Var, usize>,
    memo: HashMap<(Var, Part), Var>,
    /// Each original leaf's partition and parameter.
    leaves: HashMap<Var, (Part, Var)>,
    changed: bool,
}

impl<'a> Rewriter<'a> {
    fn run(f: &'a Function, root: usize, inline: &'a [Option<usize>], part: Part) -> Option<Collapsed> {
        let mut w = Rewriter {
            f,
            inline,
            func: Function::new(),
            inl: HashMap::new(),
            memo: HashMap::new(),
            leaves: HashMap::new(),
            changed: false,
        };
        let e = &f.eqns[root];
        w.eqn(root, &part, true)?;
        let dims = f.var_type(e.outputs[0]).shape.dims();
        let row_scale = dims[1..part[0].end].iter().product::<usize>() as i64;
        let mut inline = vec![None; w.func.vars.len()];
        for (v, k) in &w.inl {
            inline[v.index()] = Some(*k);
        }
        let origin = w.leaves.iter().map(|(orig, (_, p))| (*p, *orig)).collect();
        let root = w.func.eqns.len() - 1;
        Some(Collapsed { func: w.func, root, inline, origin, row_scale, part, changed: w.changed })
    }

    /// The rewritten `v` under partition `part` of its axes.
    fn var(&mut self, v: Var, part: &Part) -> Option<Var> {
        if let Some(&n) = self.memo.get(&(v, part.clone())) {
            return Some(n);
        }
        self.changed |= part.iter().any(|g| g.len() > 1);
        let ty = self.f.var_type(v);
        let n = match self.inline[v.index()] {
            Some(k) => self.eqn(k, part, false)?,
            None => match self.leaves.get(&v) {
                // One view per leaf: the pointer table has one slot per leaf.
                Some((p, _)) if p != part => return None,
                Some((_, n)) => *n,
                None => {
                    let shape = Shape::new(&collapse_dims(ty.shape.dims(), part));
                    let n = self.func.add_param(TensorType::new(ty.dtype, shape));
                    self.leaves.insert(v, (part.clone(), n));
                    n
                }
            },
        };
        self.memo.insert((v, part.clone()), n);
        Some(n)
    }

    /// Operand `k` of `e` with the same partition as the output (same shape), or none if rank 0.
    fn same(&mut self, x: Var, part: &Part, out_dims: &[usize]) -> Option<Var> {
        let dims = self.f.var_type(x).shape.dims();
        if dims.is_empty() {
            self.var(x, &Vec::new())
        } else if dims == out_dims {
            self.var(x, part)
        } else {
            None
        }
    }

    /// Rewrites equation `k` under `part` of its output's axes; returns the new output variable.
    /// `root`: keep the equation even when it becomes the identity.
    fn eqn(&mut self, k: usize, part: &Part, root: bool) -> Option<Var> {
        let f = self.f;
        let e = &f.eqns[k];
        let out_ty = f.var_type(e.outputs[0]);
        let od = out_ty.shape.dims().to_vec();
        let new_od = collapse_dims(&od, part);
        let in_dims = |i: usize| f.var_type(e.inputs[i]).shape.dims().to_vec();
        let trivial = part.iter().all(|g| g.len() == 1);
        self.changed |= !trivial;
        let (prim, inputs): (Prim, Vec<Var>) = match &e.prim {
            Prim::Unary(_)
            | Prim::Binary(_)
            | Prim::Compare(_)
            | Prim::Select
            | Prim::Clamp
            | Prim::ConvertElementType { .. }
            | Prim::BitcastConvertType { .. }
            | Prim::StopGradient => {
                let ins = e.inputs.iter().map(|&x| self.same(x, part, &od)).collect::<Option<_>>()?;
                (e.prim.clone(), ins)
            }
            Prim::Iota { dtype, dimension, .. } => {
                let g = group_of(part, *dimension);
                if !others_unit(&od, &part[g], *dimension) {
                    return None;
                }
                (Prim::Iota { dtype: *dtype, shape: Shape::new(&new_od), dimension: g }, vec![])
            }
            Prim::BroadcastInDim { broadcast_dimensions: bd, .. } => {
                let id = in_dims(0);
                let mut in_part = Vec::new();
                let mut new_bd = Vec::new();
                for (gi, g) in part.iter().enumerate() {
                    let ks: Vec<usize> = (0..id.len()).filter(|&i| g.contains(&bd[i])).collect();
                    // Every non-unit output axis of the group read, or every one broadcast.
                    let present = |d: usize| ks.iter().any(|&i| bd[i] == d && id[i] == od[d]);
                    let status: Vec<bool> = g.clone().filter(|&d| od[d] != 1).map(present).collect();
                    if status.windows(2).any(|w| w[0] != w[1]) {
                        return None;
                    }
                    if let (Some(&a), Some(&b)) = (ks.first(), ks.last()) {
                        in_part.push(a..b + 1);
                        new_bd.push(gi);
                    }
                }
                let x = self.var(e.inputs[0], &in_part)?;
                (Prim::BroadcastInDim { shape: Shape::new(&new_od), broadcast_dimensions: new_bd }, vec![x])
            }
            Prim::Reshape { .. } => {
                let id = in_dims(0);
                let in_part = reshape_part(&id, &od, part)?;
                let x = self.var(e.inputs[0], &in_part)?;
                if !root
                    && f.var_type(e.inputs[0]).dtype == out_ty.dtype
                    && collapse_dims(&id, &in_part) == new_od
                {
                    return Some(x);
                }
                (Prim::Reshape { new_sizes: Shape::new(&new_od) }, vec![x])
            }
            Prim::Transpose { permutation: perm } => {
                let mut groups: Vec<(Range<usize>, usize)> = Vec::new();
                for (gi, g) in part.iter().enumerate() {
                    let src: Vec<usize> = g.clone().map(|d| perm[d]).collect();
                    if src.windows(2).any(|w| w[1] != w[0] + 1) {
                        return None;
                    }
                    groups.push((src[0]..src[src.len() - 1] + 1, gi));
                }
                groups.sort_by_key(|(r, _)| r.start);
                let in_part: Part = groups.iter().map(|(r, _)| r.clone()).collect();
                // Output group gi reads input group `pos`.
                let new_perm = (0..part.len())
                    .map(|gi| groups.iter().position(|(_, o)| *o == gi).expect("each group once"))
                    .collect();
                let x = self.var(e.inputs[0], &in_part)?;
                (Prim::Transpose { permutation: new_perm }, vec![x])
            }
            Prim::Rev { dimensions } => {
                let mut new_dims = Vec::new();
                for (gi, g) in part.iter().enumerate() {
                    let flags: Vec<bool> =
                        g.clone().filter(|&d| od[d] != 1).map(|d| dimensions.contains(&d)).collect();
                    if flags.windows(2).any(|w| w[0] != w[1]) {
                        return None;
                    }
                    if flags.first() == Some(&true) {
                        new_dims.push(gi);
                    }
                }
                let x = self.var(e.inputs[0], part)?;
                (Prim::Rev { dimensions: new_dims }, vec![x])
            }
            Prim::Slice { start, strides, .. } => {
                // A slice of an inlined slice reads the inner operand directly (one progression).
                let (mut x, mut start, mut strides) = (e.inputs[0], start.clone(), strides.clone());
                while let Some(k) = self.inline[x.index()]
                    && let Prim::Slice { start: s2, strides: q2, .. } = &f.eqns[k].prim
                {
                    for d in 0..start.len() {
                        start[d] = s2[d] + start[d] * q2[d];
                        strides[d] *= q2[d];
                    }
                    x = f.eqns[k].inputs[0];
                    self.changed = true;
                }
                let id = f.var_type(x).shape.dims().to_vec();
                if od.contains(&0) {
                    return None;
                }
                let (mut ns, mut nl, mut nst) = (Vec::new(), Vec::new(), Vec::new());
                for g in part {
                    let (t, s) =
                        merged_slice(&id[g.clone()], &od[g.clone()], &start[g.clone()], &strides[g.clone()])?;
                    let n = od[g.clone()].iter().product::<usize>();
                    ns.push(t);
                    nl.push(t + (n - 1) * s + 1);
                    nst.push(s);
                }
                let x = self.var(x, part)?;
                (Prim::Slice { start: ns, limit: nl, strides: nst }, vec![x])
            }
            Prim::Concatenate { dimension } => {
                let g = group_of(part, *dimension);
                if !others_unit(&od, &part[g], *dimension) {
                    return None;
                }
                let ins = e.inputs.iter().map(|&x| self.var(x, part)).collect::<Option<_>>()?;
                (Prim::Concatenate { dimension: g }, ins)
            }
            Prim::Pad { low, high, interior } => {
                let id = in_dims(0);
                let padded = |d: usize| low[d] != 0 || high[d] != 0 || interior[d] != 0;
                let (mut nl, mut nh, mut ni) = (Vec::new(), Vec::new(), Vec::new());
                for g in part {
                    let (l, h, i) = match g.clone().find(|&d| padded(d)) {
                        Some(p) => {
                            if !g.clone().all(|d| d == p || (od[d] == 1 && id[d] == 1 && !padded(d))) {
                                return None;
                            }
                            (low[p], high[p], interior[p])
                        }
                        None => (0, 0, 0),
                    };
                    nl.push(l);
                    nh.push(h);
                    ni.push(i);
                }
                let x = self.var(e.inputs[0], part)?;
                let pv = self.var(e.inputs[1], &Vec::new())?;
                (Prim::Pad { low: nl, high: nh, interior: ni }, vec![x, pv])
            }
            Prim::Reduce { op, axes } => {
                let (in_part, new_axes) = reduce_part(in_dims(0).len(), axes, part)?;
                let x = self.var(e.inputs[0], &in_part)?;
                (Prim::Reduce { op: *op, axes: new_axes }, vec![x])
            }
            Prim::ArgReduce { op, axis, index_dtype } => {
                let (in_part, new_axes) = reduce_part(in_dims(0).len(), &[*axis], part)?;
                let x = self.var(e.inputs[0], &in_part)?;
                (Prim::ArgReduce { op: *op, axis: new_axes[0], index_dtype: *index_dtype }, vec![x])
            }
            // No collapse rule: the subtree is copied as it is when its axes stay apart.
            Prim::DynamicSlice { .. }
            | Prim::DynamicUpdateSlice
            | Prim::Gather { .. }
            | Prim::DotGeneral { .. }
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
            | Prim::Checkpoint { .. } => {
                if !trivial {
                    return None;
                }
                let ins = e
                    .inputs
                    .iter()
                    .map(|&x| self.var(x, &singletons(f.var_type(x).rank())))
                    .collect::<Option<_>>()?;
                (e.prim.clone(), ins)
            }
        };
        let outs = self.func.push(prim, &inputs, e.loc.clone()).ok()?;
        let n = outs[0];
        // The shape rule must agree with the collapse (else this is a rule bug: compile uncollapsed).
        let ty = self.func.var_type(n);
        if outs.len() != 1 || ty.dtype != out_ty.dtype || ty.shape.dims() != new_od.as_slice() {
            debug_assert!(false, "collapse rule of {} gave {ty} for {new_od:?}", e.prim.name());
            return None;
        }
        self.inl.insert(n, self.func.eqns.len() - 1);
        Some(n)
    }
}

/// The input partition of a reshape from `id` to `od` whose output is grouped by `part`: each
/// output group boundary must fall on an input axis boundary with the same leading element count.
fn reshape_part(id: &[usize], od: &[usize], part: &Part) -> Option<Part> {
    let prefix = |dims: &[usize]| -> Vec<usize> {
        let mut p = vec![1];
        for &n in dims {
            p.push(p.last().expect("non-empty") * n);
        }
        p
    };
    if part.is_empty() || id.is_empty() {
        // To or from rank 0 (one element): the input keeps its own (unit) axes.
        return Some(singletons(id.len()));
    }
    let (pi, po) = (prefix(id), prefix(od));
    let mut in_part = Vec::new();
    let mut a = 0;
    for g in &part[..part.len() - 1] {
        let c = po[g.end];
        let j = (a + 1..id.len()).find(|&j| pi[j] == c)?;
        in_part.push(a..j);
        a = j;
    }
    if a >= id.len() {
        return None;
    }
    in_part.push(a..id.len());
    Some(in_part)
}

/// The input partition and new axes of a reduction over `axes` of a rank-`rank` input whose output
/// (the kept axes in order) is grouped by `part`: reduced axes stay alone (the order of every sum is
/// unchanged); a group of kept axes must be adjacent in the input.
fn reduce_part(rank: usize, axes: &[usize], part: &Part) -> Option<(Part, Vec<usize>)> {
    let kept: Vec<usize> = (0..rank).filter(|d| !axes.contains(d)).collect();
    let mut groups: Vec<Range<usize>> = Vec::new();
    for g in part {
        let (a, b) = (kept[g.start], kept[g.end - 1]);
        if b - a != g.len() - 1 {
            return None;
        }
        groups.push(a..b + 1);
    }
    groups.extend(axes.iter().map(|&d| d..d + 1));
    groups.sort_by_key(|r| r.start);
    let new_axes =
        axes.iter().map(|&d| groups.iter().position(|r| r.start == d).expect("reduced axis")).collect();
    Some((groups, new_axes))
}

/// Start and stride of a slice over a group of axes (input extents `id`, output extents `od`,
/// per-axis `start`, `stride`) read as one axis, or `None` when the group's reads are not one
/// arithmetic progression in the row-major flattening: for every non-unit output axis `d`,
/// `stride[d] · W[d] == S · N[d]` (`W`, `N`: input and output elements per step of axis `d`).
fn merged_slice(id: &[usize], od: &[usize], start: &[usize], stride: &[usize]) -> Option<(usize, usize)> {
    let m = id.len();
    let w: Vec<usize> = (0..m).map(|d| id[d + 1..].iter().product()).collect();
    let n: Vec<usize> = (0..m).map(|d| od[d + 1..].iter().product()).collect();
    let t = (0..m).map(|d| start[d] * w[d]).sum();
    let s = match (0..m).rev().find(|&d| od[d] != 1) {
        Some(d) => stride[d] * w[d],
        None => 1,
    };
    (0..m).filter(|&d| od[d] != 1).all(|d| stride[d] * w[d] == s * n[d]).then_some((t, s))
}

impl Emitter<'_, '_> {
    /// The input multi-index of a row-major reshape from `in_dims` to `out_dims` at output index
    /// `idx`. Unit axes are index 0 / ignored; the remaining axes split into blocks between the
    /// element counts both shapes share at an axis boundary: a block of one axis on each side maps
    /// directly, any other block goes through its own flat index (divide/modulo by constants).
    pub(super) fn reshape_index(
        &mut self,
        in_dims: &[usize],
        out_dims: &[usize],
        idx: &[Value],
    ) -> Vec<Value> {
        let zero = self.iconst(0);
        let mut j = vec![zero; in_dims.len()];
        let ins: Vec<usize> = (0..in_dims.len()).filter(|&d| in_dims[d] != 1).collect();
        let outs: Vec<usize> = (0..out_dims.len()).filter(|&d| out_dims[d] != 1).collect();
        let (mut a, mut b) = (0, 0);
        while a < ins.len() && b < outs.len() {
            // Grow the block [a, a2) × [b, b2) until both sides hold the same element count.
            let (mut a2, mut b2) = (a + 1, b + 1);
            let (mut pi, mut po) = (in_dims[ins[a]] as u128, out_dims[outs[b]] as u128);
            while pi != po {
                if pi < po && a2 < ins.len() {
                    pi *= in_dims[ins[a2]] as u128;
                    a2 += 1;
                } else if b2 < outs.len() {
                    po *= out_dims[outs[b2]] as u128;
                    b2 += 1;
                } else {
                    break;
                }
            }
            let (bi, bo) = (&ins[a..a2], &outs[b..b2]);
            if bi.len() == 1 && bo.len() == 1 {
                j[bi[0]] = idx[bo[0]];
            } else {
                let od: Vec<usize> = bo.iter().map(|&d| out_dims[d]).collect();
                let oi: Vec<Value> = bo.iter().map(|&d| idx[d]).collect();
                let lin = self.offset(&od, &oi);
                let id: Vec<usize> = bi.iter().map(|&d| in_dims[d]).collect();
                for (&d, v) in bi.iter().zip(self.unravel(lin, &id)) {
                    j[d] = v;
                }
            }
            (a, b) = (a2, b2);
        }
        j
    }
}

#[cfg(test)]
#[allow(clippy::single_range_in_vec_init)] // one-group partitions
mod tests {
    use super::*;
    use kiln_ir::{BinaryOp, DType, ReduceOp};

    fn param(f: &mut Function, dims: &[usize]) -> Var {
        f.add_param(TensorType::new(DType::F32, Shape::new(dims)))
    }

    fn push(f: &mut Function, p: Prim, ins: &[Var]) -> Var {
        f.push(p, ins, None).unwrap()[0]
    }

    /// The collapsed root extents of the kernel rooted at the last equation, all others inlined.
    fn decision(f: &Function) -> Option<Vec<usize>> {
        let mut inline = vec![None; f.vars.len()];
        for (k, e) in f.eqns.iter().enumerate().take(f.eqns.len() - 1) {
            inline[e.outputs[0].index()] = Some(k);
        }
        let root = f.eqns.len() - 1;
        let c = plan(f, root, &inline)?;
        Some(collapse_dims(f.var_type(f.eqns[root].outputs[0]).shape.dims(), &c.part))
    }

    fn add(f: &mut Function, x: Var, y: Var) -> Var {
        push(f, Prim::Binary(BinaryOp::Add), &[x, y])
    }

    fn bcast(f: &mut Function, x: Var, dims: &[usize], bd: &[usize]) -> Var {
        push(f, Prim::BroadcastInDim { shape: Shape::new(dims), broadcast_dimensions: bd.to_vec() }, &[x])
    }

    #[test]
    fn elementwise_kernels_become_one_row() {
        let mut f = Function::new();
        let (x, y) = (param(&mut f, &[128, 9, 3]), param(&mut f, &[128, 9, 3]));
        let n = push(&mut f, Prim::Unary(kiln_ir::UnaryOp::Neg), &[x]);
        add(&mut f, n, y);
        assert_eq!(decision(&f), Some(vec![3456]));
    }

    #[test]
    fn broadcasts_merge_only_axes_they_read_alike() {
        // Read along axes 0 and 1, broadcast along 2: [1152, 3].
        let mut f = Function::new();
        let (x, y) = (param(&mut f, &[128, 9, 3]), param(&mut f, &[128, 9]));
        let b = bcast(&mut f, y, &[128, 9, 3], &[0, 1]);
        add(&mut f, x, b);
        assert_eq!(decision(&f), Some(vec![1152, 3]));
        // Read along axis 2 only: [1152, 3] too.
        let mut f = Function::new();
        let (x, y) = (param(&mut f, &[128, 9, 3]), param(&mut f, &[3]));
        let b = bcast(&mut f, y, &[128, 9, 3], &[2]);
        add(&mut f, x, b);
        assert_eq!(decision(&f), Some(vec![1152, 3]));
        // A size-1 axis broadcast along 1 ([128, 1, 3] -> [128, 9, 3]): axes 1 and 2 stay apart,
        // and so do 0 and 1.
        let mut f = Function::new();
        let (x, y) = (param(&mut f, &[128, 9, 3]), param(&mut f, &[128, 1, 3]));
        let b = bcast(&mut f, y, &[128, 9, 3], &[0, 1, 2]);
        add(&mut f, x, b);
        assert_eq!(decision(&f), None);
    }

    #[test]
    fn unit_batch_broadcasts() {
        let mut f = Function::new();
        let (x, y, z) = (param(&mut f, &[1, 9, 3]), param(&mut f, &[1, 9]), param(&mut f, &[3]));
        let b = bcast(&mut f, y, &[1, 9, 3], &[0, 1]);
        let c = bcast(&mut f, z, &[1, 9, 3], &[2]);
        let w = param(&mut f, &[9, 3]);
        let d = bcast(&mut f, w, &[1, 9, 3], &[1, 2]);
        let s = add(&mut f, x, b);
        let s = add(&mut f, s, c);
        add(&mut f, s, d);
        assert_eq!(decision(&f), Some(vec![9, 3]));
    }

    #[test]
    fn transposes_of_inner_axes_do_not_collapse() {
        let mut f = Function::new();
        let (x, y) = (param(&mut f, &[128, 9, 3]), param(&mut f, &[128, 3, 9]));
        let t = push(&mut f, Prim::Transpose { permutation: vec![0, 2, 1] }, &[y]);
        add(&mut f, x, t);
        assert_eq!(decision(&f), None);
        // Swapping the batch with a block of two axes keeps the block: [128, 27] vs [27, 128].
        let mut f = Function::new();
        let (x, y) = (param(&mut f, &[128, 9, 3]), param(&mut f, &[9, 3, 128]));
        let t = push(&mut f, Prim::Transpose { permutation: vec![2, 0, 1] }, &[y]);
        add(&mut f, x, t);
        assert_eq!(decision(&f), Some(vec![128, 27]));
    }

    #[test]
    fn slices_reshapes_reductions_and_iota() {
        // Last-axis element: one strided slice of the flat input.
        let mut f = Function::new();
        let x = param(&mut f, &[128, 9, 3]);
        let s = Prim::Slice { start: vec![0, 0, 1], limit: vec![128, 9, 2], strides: vec![1, 1, 1] };
        let s = push(&mut f, s, &[x]);
        push(&mut f, Prim::Unary(kiln_ir::UnaryOp::Neg), &[s]);
        assert_eq!(decision(&f), Some(vec![1152]));
        // A reshape that splits the last axis collapses away.
        let mut f = Function::new();
        let (x, y) = (param(&mut f, &[128, 27]), param(&mut f, &[128, 9, 3]));
        let r = push(&mut f, Prim::Reshape { new_sizes: Shape::new(&[128, 9, 3]) }, &[x]);
        add(&mut f, r, y);
        assert_eq!(decision(&f), Some(vec![3456]));
        // Sum over the last axis: kept axes merge.
        let mut f = Function::new();
        let x = param(&mut f, &[128, 9, 3]);
        push(&mut f, Prim::Reduce { op: ReduceOp::Sum, axes: vec![2] }, &[x]);
        assert_eq!(decision(&f), Some(vec![1152]));
        // Sum over the middle axis: nothing merges.
        let mut f = Function::new();
        let x = param(&mut f, &[128, 9, 3]);
        push(&mut f, Prim::Reduce { op: ReduceOp::Sum, axes: vec![1] }, &[x]);
        assert_eq!(decision(&f), None);
        // Iota counting along the last axis keeps it apart.
        let mut f = Function::new();
        let x = param(&mut f, &[128, 9, 3]);
        let i = push(
            &mut f,
            Prim::Iota { dtype: DType::F32, shape: Shape::new(&[128, 9, 3]), dimension: 2 },
            &[],
        );
        add(&mut f, x, i);
        assert_eq!(decision(&f), Some(vec![1152, 3]));
    }

    #[test]
    fn reshape_parts_follow_shared_boundaries() {
        // [128, 27] from [128, 9, 3]: boundary after 128 exists in the input.
        assert_eq!(reshape_part(&[128, 9, 3], &[128, 27], &vec![0..1, 1..2]), Some(vec![0..1, 1..3]));
        // [6] -> [2, 3] cannot split the input.
        assert_eq!(reshape_part(&[6], &[2, 3], &vec![0..1, 1..2]), None);
        assert_eq!(reshape_part(&[6], &[2, 3], &vec![0..2]), Some(vec![0..1]));
        // To and from rank 0.
        assert_eq!(reshape_part(&[1, 1], &[], &vec![]), Some(vec![0..1, 1..2]));
        assert_eq!(reshape_part(&[], &[1, 1], &vec![0..2]), Some(vec![]));
    }

    #[test]
    fn slices_merge_only_as_arithmetic_progressions() {
        // Last-axis element k of [9, 3]: stride 3 from k.
        assert_eq!(merged_slice(&[9, 3], &[9, 1], &[0, 2], &[1, 1]), Some((2, 3)));
        // Full inner axis, sliced outer axis: contiguous.
        assert_eq!(merged_slice(&[9, 3], &[4, 3], &[2, 0], &[1, 1]), Some((6, 1)));
        // Partial inner axis with a non-unit outer axis: not one progression.
        assert_eq!(merged_slice(&[9, 3], &[9, 2], &[0, 0], &[1, 1]), None);
    }

    #[test]
    fn reductions_keep_reduced_axes_alone() {
        assert_eq!(reduce_part(3, &[0], &vec![0..2]), Some((vec![0..1, 1..3], vec![0])));
        assert_eq!(reduce_part(3, &[1], &vec![0..2]), None);
    }

    #[test]
    fn candidates_prefer_the_longest_inner_group() {
        let c = candidates(&[128, 9, 3]);
        assert_eq!(c[0], vec![0..3]);
        assert_eq!(c[1], vec![0..1, 1..3]);
        assert!(c.iter().all(|p| p.len() < 3));
    }
}
