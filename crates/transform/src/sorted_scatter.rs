//! Scatter-adds with loop-invariant indices inside a `scan` become segment sums over indices sorted
//! once. The transpose of `take(y, idx)` is `scatter_add(zeros, idx, ct)`; in a loop over a fixed
//! edge list (GradABM's contact graph, a mass-spring mesh) its indices are the same at every step, but
//! a scatter into random rows runs on one thread. Sorting the indices (stably) once gives the same
//! sums as a `segment_sum` over sorted ids, which the backend splits over threads and fuses with the
//! updates' producers (the message-passing kernel of the forward pass).
//!
//! The rewrite, for `scatter_add(operand, idx, updates)` along axis 0 with `operand` all zero bits,
//! `idx: int[E]` computed from the loop's constants only, in a scan of at least 2 steps:
//!
//! ```text
//! (idx_s, perm) = sort(idx, iota(E))           # stable, by idx: loop-invariant, hoisted by LICM
//! out = segment_sum(updates[perm], idx_s, N)   # `updates[perm]` pushed into its producers
//! ```
//!
//! Each output row receives the same updates in the same (input) order as before, starting from the
//! same zero, so the values are unchanged bit for bit: a stable sort keeps equal indices in input
//! order, `segment_sum` adds its rows in order and drops out-of-range ids as `FillOrDrop` drops
//! them (with `Clip`, the indices are clamped into range before sorting). The permutation is pushed
//! through elementwise ops, broadcasts that make the edge axis, and gathers along axis 0
//! (`take(y, ix)[perm] = take(y, ix[perm])`) down to loop-invariant arrays (edge lists, masks),
//! which LICM moves out with the sort. Updates `select(mask, x, 0)` with a loop-invariant mask (the
//! transpose of a `FillOrDrop` gather: edges whose destination is out of range) sum `x` instead,
//! the masked rows dropped through an out-of-range id (`select(mask[perm], idx_s, -1)`, hoisted
//! too): adding zero changes no partial sum, so the bits are the same, and the loop reads one
//! edge array fewer (W3's gradient: −8 %). A scatter whose updates would need a loop-variant edge array
//! permuted (W2's per-spring forces: that gather would cost every step about what the scatter did)
//! becomes `segment_sum(updates, idx)` without the sort: the same sums in the same order, one
//! kernel with the updates' producers fused in (on one thread: the ids are not sorted) instead of
//! a runtime scatter over materialized updates (W2's single-robot gradient: −15 %). Run before
//! [`crate::hoist_scan_invariants`]: without it the sort (and `Clip`'s clamp) would run at every
//! step.

use crate::licm::invariant_vars;
use kiln_ir::{Array, DType, Eqn, Function, IndexMode, Prim, ScatterOp, Shape, SrcLoc, Var};
use std::collections::HashMap;

/// `f` with every qualifying `scatter_add` of a scan body (nested ones included) turned into a
/// `segment_sum`, over stably sorted indices where the updates can be permuted (see the module
/// doc), and how many were rewritten.
///
/// ```
/// use kiln_ir::{Array, DType, Function, IndexMode, Prim, ScatterOp, TensorType, eval};
/// use kiln_transform::sort_scan_scatters;
/// // A scan over 2 steps of `c' = c + scatter_add(zeros(3), idx, take(x, dst))`: the transpose of
/// // a message pass over 4 edges `dst → idx`, both loop constants; `x` is the step's input.
/// let ty = |dt, n: usize| TensorType::new(dt, [n]);
/// let mut body = Function::new();
/// let (idx, dst) = (body.add_param(ty(DType::I32, 4)), body.add_param(ty(DType::I32, 4)));
/// let (c, x) = (body.add_param(ty(DType::F32, 3)), body.add_param(ty(DType::F32, 3)));
/// let take = Prim::Gather { axis: 0, batch_dims: 0, mode: IndexMode::Clip };
/// let upd = body.push(take, &[x, dst], None)?[0];
/// let zeros = body.add_const(Array::from_vec(&[3], vec![0.0f32; 3]));
/// let scatter = Prim::Scatter { op: ScatterOp::Add, axis: 0, batch_dims: 0, mode: IndexMode::FillOrDrop };
/// let s = body.push(scatter, &[zeros, idx, upd], None)?[0];
/// body.outputs = vec![body.push(Prim::Binary(kiln_ir::BinaryOp::Add), &[c, s], None)?[0]];
/// let mut f = Function::new();
/// let ps = [ty(DType::I32, 4), ty(DType::I32, 4), ty(DType::F32, 3), TensorType::new(DType::F32, [2, 3])];
/// let ps: Vec<_> = ps.into_iter().map(|t| f.add_param(t)).collect();
/// let scan = Prim::Scan { length: 2, reverse: false, num_consts: 2, num_carry: 1, body: Box::new(body) };
/// f.outputs = f.push(scan, &ps, None)?.to_vec();
/// let (g, rewritten) = sort_scan_scatters(&f);
/// assert_eq!(rewritten, 1); // the body now sorts `idx` and sums `take(x, dst[perm])` by segment
/// let args = [
///     Array::from_vec(&[4], vec![2i32, 0, 2, 7]), // 7 is out of range: dropped
///     Array::from_vec(&[4], vec![0i32, 1, 2, 0]),
///     Array::from_vec(&[3], vec![0.0f32; 3]),
///     Array::from_vec(&[2, 3], vec![1.0f32, 2.0, 4.0, 10.0, 20.0, 40.0]),
/// ];
/// let out = eval(&g, &args)?;
/// // Row 2 gets x[0] + x[2] per step: 5 + 50; row 0 gets x[1]: 2 + 20.
/// assert_eq!(out[0].to_vec::<f32>(), Some(vec![22.0, 0.0, 55.0]));
/// assert!(out[0].bitwise_eq(&eval(&f, &args)?[0]));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn sort_scan_scatters(f: &Function) -> (Function, usize) {
    let mut count = 0;
    let g = walk(f, &mut count);
    (g, count)
}

/// [`sort_scan_scatters`] on `f`: sub-functions first, then each scan's own body.
fn walk(f: &Function, count: &mut usize) -> Function {
    let mut g = f.clone();
    for e in &mut g.eqns {
        e.prim = match &e.prim {
            Prim::Scan { length, reverse, num_consts, num_carry, body } => {
                let inner = walk(body, count);
                let body = if *length >= 2 { rewrite_body(&inner, *num_consts, count) } else { inner };
                Prim::Scan {
                    length: *length,
                    reverse: *reverse,
                    num_consts: *num_consts,
                    num_carry: *num_carry,
                    body: Box::new(body),
                }
            }
            p => p.map_subfunctions(|s| walk(s, count)),
        };
    }
    g
}

/// A scan body (with `nc` loop constants) with its qualifying scatter-adds rewritten.
fn rewrite_body(b: &Function, nc: usize, count: &mut usize) -> Function {
    let invariant = invariant_vars(b, nc);
    let mut def: Vec<Option<usize>> = vec![None; b.vars.len()];
    for (i, e) in b.eqns.iter().enumerate() {
        e.outputs.iter().for_each(|o| def[o.index()] = Some(i));
    }
    let consts: HashMap<Var, &Array> = b.consts.iter().map(|c| (c.var, &*c.value)).collect();
    let body = Body { b, def, consts };
    // The new body keeps every variable of the old one; `rename` maps a rewritten scatter's output
    // to the segment sum that replaces it.
    let mut nb = b.clone();
    nb.eqns.clear();
    let mut rename: Vec<Var> = (0..b.vars.len()).map(|i| Var(i as u32)).collect();
    let before = *count;
    for e in &b.eqns {
        if let Some(mode) = body.sortable(e, &invariant)
            && let Some(ids) = segment_ids(&mut nb, &body, e, mode, &rename)
            && let Some(out) = emit_sorted(&mut nb, &body, e, ids, &rename, &invariant)
                .or_else(|| emit_unsorted(&mut nb, &body, e, ids, &rename))
        {
            rename[e.outputs[0].index()] = out;
            *count += 1;
            continue;
        }
        let mut e = e.clone();
        e.inputs.iter_mut().for_each(|v| *v = rename[v.index()]);
        nb.eqns.push(e);
    }
    if *count == before {
        // Nothing rewritten: the body as it was (an abandoned attempt left unused variables).
        return b.clone();
    }
    nb.outputs.iter_mut().for_each(|v| *v = rename[v.index()]);
    crate::dce(&nb)
}

/// The old body and where its variables come from.
struct Body<'a> {
    b: &'a Function,
    /// The equation defining each variable (`None`: a parameter or constant).
    def: Vec<Option<usize>>,
    consts: HashMap<Var, &'a Array>,
}

impl Body<'_> {
    /// The defining equation of `v`, if an equation defines it.
    fn eqn(&self, v: Var) -> Option<&Eqn> {
        self.def[v.index()].map(|i| &self.b.eqns[i])
    }

    /// The scatter's index mode when `e` qualifies: `scatter_add` along axis 0 without batch dims,
    /// into an all-zero operand of at least one row, with invariant `int[E]` indices, `2 ≤ E ≤ 2^32`.
    fn sortable(&self, e: &Eqn, invariant: &[bool]) -> Option<IndexMode> {
        let Prim::Scatter { op: ScatterOp::Add, axis: 0, batch_dims: 0, mode } = e.prim else { return None };
        let [operand, idx, _] = e.inputs[..] else { return None };
        let it = self.b.var_type(idx);
        let len = *it.shape.dims().first()?;
        let ok = it.rank() == 1
            && matches!(it.dtype, DType::I32 | DType::U32)
            && (2..=1usize << 32).contains(&len)
            && self.b.var_type(operand).shape.dims().first().is_some_and(|&n| n > 0)
            && invariant[idx.index()]
            && self.is_zero(operand);
        ok.then_some(mode)
    }

    /// `(mask, kept)` when the updates `v` are `select(mask, kept, zeros)` with one loop-invariant
    /// mask element per row (rank-1 updates, the transpose of a `FillOrDrop` gather: GradABM's
    /// contact edges whose destination is in range). Summing such a row adds `+0` (all zero bits)
    /// or an integer 0, which leaves every partial sum as it was: a sum starts from `+0` and never
    /// becomes `−0` (`+0 + −0 = +0`), and `x + 0 = x` for every other `x`, NaN included. So the
    /// row can be dropped instead, by an out-of-range id, with the same bits.
    fn masked_rows(&self, v: Var, invariant: &[bool]) -> Option<(Var, Var)> {
        let e = self.eqn(v)?;
        let (Prim::Select, &[mask, kept, zeros]) = (&e.prim, &e.inputs[..]) else { return None };
        let ok = self.b.var_type(v).rank() == 1
            && self.b.var_type(mask).shape == self.b.var_type(v).shape
            && invariant[mask.index()]
            && self.is_zero(zeros);
        ok.then_some((mask, kept))
    }

    /// Whether `v` is all zero bits: a constant, or a broadcast of one.
    fn is_zero(&self, v: Var) -> bool {
        if let Some(a) = self.consts.get(&v) {
            return a.bitwise_eq(&Array::zeros(&a.ty()));
        }
        match self.eqn(v) {
            Some(Eqn { prim: Prim::BroadcastInDim { .. }, inputs, .. }) => self.is_zero(inputs[0]),
            _ => false,
        }
    }
}

/// Emits the sort of the segment ids `idx` ([`segment_ids`], in `nb`) and the segment sum
/// replacing scatter `e` (an equation of the old body) into `nb`; returns the sum, or `None` when
/// the permutation would reach a loop-variant array or an equation does not type (what was emitted
/// is then dead).
fn emit_sorted(
    nb: &mut Function,
    body: &Body,
    e: &Eqn,
    idx: Var,
    rename: &[Var],
    invariant: &[bool],
) -> Option<Var> {
    let [operand, old_idx, updates] = e.inputs[..] else { return None };
    let loc = e.loc.clone();
    let n = body.b.var_type(operand).shape.dims()[0];
    let len = body.b.var_type(old_idx).shape.dims()[0];
    let perm_dtype = if len <= i32::MAX as usize { DType::I32 } else { DType::U32 };
    let iota = Prim::Iota { dtype: perm_dtype, shape: Shape::new(&[len]), dimension: 0 };
    let iota = nb.push(iota, &[], loc.clone()).ok()?[0];
    let sorted = nb.push(Prim::Sort { dimension: 0, num_keys: 1 }, &[idx, iota], loc.clone()).ok()?;
    let mut p = Permuter { body, rename, invariant, perm: sorted[1], memo: HashMap::new() };
    if let Some((mask, kept)) = body.masked_rows(updates, invariant)
        && let Some(none) = out_of_range_id(body.b.var_type(old_idx).dtype, n)
    {
        // Rows the mask zeroes are dropped through their ids instead (see `Body::masked_rows`):
        // the ids' select is loop-invariant, so it leaves the loop with the sort.
        let data = p.permute(nb, kept)?;
        let mask = p.permute(nb, mask)?;
        let none = nb.add_const(none);
        let bc = Prim::BroadcastInDim { shape: Shape::new(&[len]), broadcast_dimensions: vec![] };
        let none = nb.push(bc, &[none], loc.clone()).ok()?[0];
        let ids = nb.push(Prim::Select, &[mask, sorted[0], none], loc.clone()).ok()?[0];
        return nb.push(Prim::SegmentSum { num_segments: n }, &[data, ids], loc).ok().map(|o| o[0]);
    }
    let data = p.permute(nb, updates)?;
    nb.push(Prim::SegmentSum { num_segments: n }, &[data, sorted[0]], loc).ok().map(|o| o[0])
}

/// An id of `dtype` outside `0..n` (dropped by a segment sum): −1, or `u32::MAX` when below `n`'s
/// reach (`None` for `n > u32::MAX`).
fn out_of_range_id(dtype: DType, n: usize) -> Option<Array> {
    match dtype {
        DType::I32 => Some(Array::scalar(-1i32)),
        DType::U32 => (n < u32::MAX as usize).then(|| Array::scalar(u32::MAX)),
        DType::F32 | DType::F64 | DType::Bool => None,
    }
}

/// The segment ids of scatter `e` in the new body: its indices, clamped into `[0, n)` first with
/// `Clip` (whose indices land there; `hi` fits the dtype: larger indices than its maximum do not
/// exist), as they are with `FillOrDrop` (a segment sum drops what the scatter drops).
fn segment_ids(nb: &mut Function, body: &Body, e: &Eqn, mode: IndexMode, rename: &[Var]) -> Option<Var> {
    let [operand, idx, _] = e.inputs[..] else { return None };
    let n = body.b.var_type(operand).shape.dims()[0];
    let dtype = body.b.var_type(idx).dtype;
    let idx = rename[idx.index()];
    match mode {
        IndexMode::FillOrDrop => Some(idx),
        IndexMode::Clip => {
            let (lo, hi) = match dtype {
                DType::I32 => (Array::scalar(0i32), Array::scalar(i32::try_from(n - 1).unwrap_or(i32::MAX))),
                _ => (Array::scalar(0u32), Array::scalar(u32::try_from(n - 1).unwrap_or(u32::MAX))),
            };
            let (lo, hi) = (nb.add_const(lo), nb.add_const(hi));
            nb.push(Prim::Clamp, &[lo, idx, hi], e.loc.clone()).ok().map(|o| o[0])
        }
    }
}

/// Emits `segment_sum(updates, ids)` (`ids` from [`segment_ids`]) in place of scatter `e` when its
/// updates cannot be permuted (see the module doc): the same sums in the same order as the
/// scatter, without the sort. The backend runs it as one kernel over the edges with the updates'
/// producers fused in, on one thread when the ids are not sorted, where the scatter was a runtime
/// step over materialized updates.
fn emit_unsorted(nb: &mut Function, body: &Body, e: &Eqn, ids: Var, rename: &[Var]) -> Option<Var> {
    let [operand, _, updates] = e.inputs[..] else { return None };
    let n = body.b.var_type(operand).shape.dims()[0];
    let sum = Prim::SegmentSum { num_segments: n };
    nb.push(sum, &[rename[updates.index()], ids], e.loc.clone()).ok().map(|o| o[0])
}

/// Builds `v[perm]` (rows of an `[E, ...]` variable of the old body in sorted order) in the new body.
struct Permuter<'a> {
    body: &'a Body<'a>,
    rename: &'a [Var],
    invariant: &'a [bool],
    perm: Var,
    /// Old variable → its permuted rows, built once.
    memo: HashMap<Var, Var>,
}

impl Permuter<'_> {
    fn permute(&mut self, nb: &mut Function, v: Var) -> Option<Var> {
        if let Some(&p) = self.memo.get(&v) {
            return Some(p);
        }
        let p = match self.through(nb, v) {
            Some(p) => p,
            // Only a loop-invariant array is gathered (once, before the loop): permuting a
            // loop-variant one would add a gather to every step where the scatter had none.
            None if self.invariant[v.index()] => {
                let take = Prim::Gather { axis: 0, batch_dims: 0, mode: IndexMode::Clip };
                nb.push(take, &[self.rename[v.index()], self.perm], None).ok()?[0]
            }
            None => return None,
        };
        self.memo.insert(v, p);
        Some(p)
    }

    /// `v[perm]` computed from permuted operands of `v`'s defining equation, where that equation
    /// commutes with a permutation of the leading axis (`None` otherwise).
    fn through(&mut self, nb: &mut Function, v: Var) -> Option<Var> {
        let b = self.body.b;
        let e = self.body.eqn(v)?;
        let rows = &b.var_type(v).shape;
        let loc: Option<SrcLoc> = e.loc.clone();
        let ins = match &e.prim {
            Prim::Unary(_)
            | Prim::Binary(_)
            | Prim::Compare(_)
            | Prim::Select
            | Prim::Clamp
            | Prim::ConvertElementType { .. }
            | Prim::BitcastConvertType { .. }
            | Prim::StopGradient => {
                // Operands of the result's shape are permuted; scalar ones (a select's predicate,
                // a clamp's bounds) are the same for every row.
                let mut ins = Vec::with_capacity(e.inputs.len());
                for &x in &e.inputs {
                    let shape = &b.var_type(x).shape;
                    ins.push(match shape.rank() {
                        0 => self.rename[x.index()],
                        _ if shape == rows => self.permute(nb, x)?,
                        _ => return None,
                    });
                }
                ins
            }
            // A broadcast that creates the leading axis has equal rows: permuting them changes nothing.
            Prim::BroadcastInDim { broadcast_dimensions, .. } if !broadcast_dimensions.contains(&0) => {
                return Some(self.rename[v.index()]);
            }
            // `take(y, ix)[perm] = take(y, ix[perm])` for one axis of indices.
            Prim::Gather { axis: 0, batch_dims: 0, .. } if b.var_type(e.inputs[1]).rank() == 1 => {
                vec![self.rename[e.inputs[0].index()], self.permute(nb, e.inputs[1])?]
            }
            _ => return None,
        };
        nb.push(e.prim.clone(), &ins, loc).ok().map(|o| o[0])
    }
}
