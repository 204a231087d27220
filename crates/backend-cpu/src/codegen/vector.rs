//! The vector path: SIMD on the contiguous innermost loop.
//!
//! Cranelift has 128-bit vectors only, so a kernel runs `L = 16 / w` lanes (f32x4, i32x4 or f64x2)
//! where `w` is the one element width (4 or 8 bytes) of every lane-varying value in its fused tree.
//! The static check [`Checker`] — an exhaustive per-primitive `match` — decides per kernel: a value
//! is *lane-varying* when its innermost index moves with the output's (loaded with one vector load,
//! stride 1), or *lane-invariant* when a broadcast (or iota along another axis, or a rank-0 bound)
//! drops the innermost index (computed once by the scalar path and splatted). Whatever the check
//! rejects (gather, pad, concatenate, rev of the last axis, dynamic slices, strided slices or
//! transposes of the last axis, mixed widths, bool leaves or outputs) keeps the scalar loop nest.
//! Bools inside a vector kernel are comparison masks, lane-width integers (all ones for true).
//!
//! Loop shape for one innermost row `[start, end)` (`lo..hi` for a rank-1 output):
//! - the main loop steps `U·L` elements (unrolled `U`×: [`UNROLL_MAP`], [`UNROLL_REDUCE`]);
//! - the remainder (`< U·L` elements) runs the scalar `value` code, so results agree bitwise.
//!
//! Results are bitwise equal to the interpreter: no FMA contraction; max/min (and reductions'
//! max/min) are built from compares and `bitselect` with the scalar code's NaN and ±0 rules rather
//! than Cranelift's vector `fmin`/`fmax`; integer division and shifts go lane by lane through the
//! scalar code (x86 has no vector division, Cranelift's vector shifts take one scalar amount);
//! reductions over non-innermost axes keep one sequential accumulator per lane, in the
//! interpreter's order.
//!
//! **Innermost-axis reductions** (row sums, full sums: a root `reduce` whose axes include the
//! input's last axis) run `UNROLL_REDUCE` vector accumulators over the row and combine them at the
//! end ([`ReduceRoot`]). Integer sums and products wrap, and float max/min are order-free (up to
//! a NaN's payload), so those stay exact; a float sum or product is reassociated: each of the
//! `U·L` partial sums and the final combination round in a different order than the interpreter's
//! left fold. Both orders are within the classic bound `(n-1)·ε·Σ|xᵢ|` of the exact sum (ε the
//! unit roundoff), so JIT and interpreter differ by at most `2(n-1)·ε·Σ|xᵢ|` — the tolerance the
//! differential tests use — and exactly the same overflow/NaN outcome only when no partial sum
//! overflows.
//!
//! **Transcendentals** (`exp expm1 log log1p sin cos tanh logistic`) all come from the
//! [`crate::vmath`] tile functions, on both paths: the scalar path calls a per-element wrapper that
//! runs the tile function with `n = 1` ([`crate::runtime::math`]), and the vector path strip-mines
//! the row into tiles of [`TILE`] elements: each transcendental occurrence gets a stack buffer;
//! pass `p` computes the arguments of the occurrences whose argument needs only earlier results
//! and stores them in their buffers, then calls each one's tile function once, in place; the last
//! pass computes the root, reading transcendental results from the buffers. Measured
//! (`benches/kernels.rs`, back to back on the loaded 2-core VM): f32 `exp` at 4096 elements ran at
//! 85 Melem/s when each vector was spilled and the tile function called on its 4 lanes (the call
//! plus a whole 16-lane chunk per vector) and at 600 Melem/s strip-mined; f64 `tanh` 26 vs 291
//! Melem/s. So tiles it is. Occurrences inside a lane-varying reduction loop (one value per reduced
//! index, not per row element) still use the spill call, the cheapest option there. erf, erf_inv,
//! pow, atan2 and float rem call their per-element routines lane by lane.
//!
//! **Constants**: Cranelift rematerializes a constant (`vconst`, `splat` of a scalar constant) once
//! per block that uses it, not once per use, and folds constant block parameters away, so hoisting
//! by hand buys nothing; the unrolled loop body is one block, so each constant is loaded once per
//! `U·L` elements (see `shared/research/tech-cranelift-egg.md` §1.3).

use super::kernel::{Emitter, R, clif_type, mem};
use super::scalar;
use crate::CompileError;
use crate::vmath::Func;
use cranelift_codegen::ir::{
    AbiParam, InstBuilder, StackSlot, StackSlotData, StackSlotKind, Type, Value, types,
};
use cranelift_module::{Linkage, Module};
use kiln_ir::{DType, Eqn, Function, Prim, ReduceOp, UnaryOp, Var};
use std::collections::HashMap;

/// Elements per transcendental tile (a multiple of every `U·L`): 1–2 KiB per buffer, L1-resident.
pub(super) const TILE: i64 = 256;
/// Unroll factor of elementwise rows. ×2 measured within noise of ×1 on `a*b + c*d - e` (f32 and
/// f64 at 4096, `benches/kernels.rs`: 1.79–1.96 vs 1.87–2.09 Gelem/s f32), so rows are not unrolled
/// (half the code, half the compile time).
pub(super) const UNROLL_MAP: usize = 1;
/// Vector accumulators of an innermost-axis reduction (independent dependency chains).
pub(super) const UNROLL_REDUCE: usize = 4;
/// More tiled occurrences than this (stack buffers of `TILE` elements each) fall back to spill calls.
const MAX_TILED: usize = 32;

/// The vmath function behind a unary op, if any.
pub(super) fn tile_func(op: UnaryOp) -> Option<Func> {
    match op {
        UnaryOp::Exp => Some(Func::Exp),
        UnaryOp::Expm1 => Some(Func::Expm1),
        UnaryOp::Log => Some(Func::Log),
        UnaryOp::Log1p => Some(Func::Log1p),
        UnaryOp::Sin => Some(Func::Sin),
        UnaryOp::Cos => Some(Func::Cos),
        UnaryOp::Tanh => Some(Func::Tanh),
        UnaryOp::Logistic => Some(Func::Logistic),
        UnaryOp::Neg
        | UnaryOp::Abs
        | UnaryOp::Sign
        | UnaryOp::Not
        | UnaryOp::Floor
        | UnaryOp::Ceil
        | UnaryOp::Round
        | UnaryOp::RoundEven
        | UnaryOp::Sqrt
        | UnaryOp::Rsqrt
        | UnaryOp::Erf
        | UnaryOp::ErfInv
        | UnaryOp::IsFinite => None,
    }
}

/// How one transcendental occurrence (a visit of the walk, in pre-order) is computed on vectors.
#[derive(Clone, Copy, Debug)]
enum Mode {
    /// Through a tile buffer; its argument is computed in pass `pass` (1-based).
    Tiled { pass: usize },
    /// Spill the vector to the stack and call the tile function on its `L` lanes.
    Spill,
}

#[derive(Clone, Copy, Debug)]
struct Occ {
    mode: Mode,
    /// Occurrences inside its argument (skipped when the walk reads the buffer instead).
    inner: usize,
    func: Func,
    dt: DType,
}

/// State of the vector walk, kept in the [`Emitter`].
#[derive(Default)]
pub(super) struct VState {
    /// Lanes per vector (0 when the kernel is scalar).
    lanes: usize,
    /// Element width in bytes of every lane-varying value.
    width: usize,
    occs: Vec<Occ>,
    /// Tile buffers of the tiled occurrences (by occurrence).
    bufs: HashMap<usize, StackSlot>,
    /// Passes before the final one.
    passes: usize,
    /// The pass being emitted (1-based; `passes + 1` is the final pass).
    pass: usize,
    /// The next occurrence's number in the current walk.
    next: usize,
    /// Whether the walk is inside the argument of an occurrence of the current (non-final) pass.
    needed: bool,
    /// Element offset of the current vector inside its tile.
    rel: Option<Value>,
    /// 16-byte stack slot for spill calls.
    spill: Option<StackSlot>,
    /// (max tiled pass, occurrence count) of each inlined variable's tree, memoized.
    summary: HashMap<Var, (usize, usize)>,
}

/// The static vectorizability check: walks the fused tree in the emitter's order, assigning
/// transcendental occurrences their mode and unifying the lane width.
struct Checker<'a> {
    f: &'a Function,
    inline: &'a [Option<usize>],
    width: Option<usize>,
    occs: Vec<Occ>,
    /// Depth of lane-varying reductions enclosing the current node.
    in_reduce: usize,
}

impl Checker<'_> {
    fn unify(&mut self, dt: DType) -> Option<()> {
        let w = match dt {
            DType::F32 | DType::F64 | DType::I32 | DType::U32 => dt.size_bytes(),
            DType::Bool => return None,
        };
        match self.width {
            None => self.width = Some(w),
            Some(x) if x == w => {}
            Some(_) => return None,
        }
        Some(())
    }

    /// Checks `v` reached lane-varying; returns the last tiled pass its tree needs (0: none).
    fn var(&mut self, v: Var) -> Option<usize> {
        match self.inline[v.index()] {
            Some(p) => self.eqn(&self.f.eqns[p]),
            None if self.f.var_type(v).rank() == 0 => None,
            None => {
                self.unify(self.f.dtype(v))?;
                Some(0)
            }
        }
    }

    /// Checks `v` reached with the innermost index dropped unless `varying`.
    fn maybe(&mut self, v: Var, varying: bool) -> Option<usize> {
        if varying { self.var(v) } else { Some(0) }
    }

    fn eqn(&mut self, e: &Eqn) -> Option<usize> {
        let f = self.f;
        let ins = &e.inputs;
        let out_dt = f.dtype(e.outputs[0]);
        let in_dt = |k: usize| f.dtype(ins[k]);
        let rank = |v: Var| f.var_type(v).rank();
        let dims = |v: Var| f.var_type(v).shape.dims().to_vec();
        if out_dt != DType::Bool {
            self.unify(out_dt)?;
        }
        match &e.prim {
            Prim::Unary(op) => {
                if let (Some(func), true) = (tile_func(*op), in_dt(0).is_float()) {
                    let k = self.occs.len();
                    self.occs.push(Occ { mode: Mode::Spill, inner: 0, func, dt: in_dt(0) });
                    let d = self.var(ins[0])?;
                    let inner = self.occs.len() - k - 1;
                    let (mode, pass) = if self.in_reduce > 0 {
                        (Mode::Spill, d)
                    } else {
                        (Mode::Tiled { pass: d + 1 }, d + 1)
                    };
                    self.occs[k].mode = mode;
                    self.occs[k].inner = inner;
                    return Some(pass);
                }
                self.var(ins[0])
            }
            Prim::Binary(_) => Some(self.var(ins[0])?.max(self.var(ins[1])?)),
            Prim::Compare(_) if in_dt(0) == DType::Bool => None,
            Prim::Compare(_) => Some(self.var(ins[0])?.max(self.var(ins[1])?)),
            Prim::Select if out_dt == DType::Bool => None,
            Prim::Select => {
                let p = self.maybe(ins[0], rank(ins[0]) > 0)?;
                Some(p.max(self.var(ins[1])?).max(self.var(ins[2])?))
            }
            Prim::Clamp => {
                let lo = self.maybe(ins[0], rank(ins[0]) > 0)?;
                let x = self.var(ins[1])?;
                Some(lo.max(x).max(self.maybe(ins[2], rank(ins[2]) > 0)?))
            }
            Prim::ConvertElementType { .. } | Prim::BitcastConvertType { .. } | Prim::StopGradient => {
                self.var(ins[0])
            }
            Prim::Iota { dtype: DType::Bool, .. } => None,
            Prim::Iota { .. } => Some(0),
            Prim::BroadcastInDim { broadcast_dimensions, .. } => {
                let out_rank = rank(e.outputs[0]);
                let varying = broadcast_dimensions.last() == Some(&(out_rank - 1))
                    && dims(ins[0]).last().is_some_and(|&n| n != 1);
                self.maybe(ins[0], varying)
            }
            Prim::Reshape { .. } => {
                let (i, o) = (dims(ins[0]), dims(e.outputs[0]));
                match (i.last(), o.last()) {
                    (None, _) => Some(0),
                    (Some(a), Some(b)) if a == b => self.var(ins[0]),
                    _ => None,
                }
            }
            Prim::Transpose { permutation } => {
                if permutation.last() == Some(&(permutation.len() - 1)) {
                    self.var(ins[0])
                } else {
                    None
                }
            }
            Prim::Slice { strides, .. } => {
                if strides.last() == Some(&1) {
                    self.var(ins[0])
                } else {
                    None
                }
            }
            Prim::Reduce { axes, .. } => {
                let r = rank(ins[0]);
                if r == 0 || axes.contains(&(r - 1)) || in_dt(0) == DType::Bool {
                    return None;
                }
                self.in_reduce += 1;
                let d = self.var(ins[0]);
                self.in_reduce -= 1;
                d.map(|_| 0)
            }
            Prim::Rev { .. }
            | Prim::DynamicSlice { .. }
            | Prim::DynamicUpdateSlice
            | Prim::Concatenate { .. }
            | Prim::Pad { .. }
            | Prim::ArgReduce { .. }
            | Prim::Cumulative { .. }
            | Prim::Gather { .. }
            | Prim::Sort { .. }
            | Prim::DotGeneral { .. }
            | Prim::Scatter { .. }
            | Prim::SegmentSum { .. }
            | Prim::Threefry2x32
            | Prim::CustomJvpCall { .. }
            | Prim::CustomVjpCall { .. }
            | Prim::Scan { .. }
            | Prim::WhileLoop { .. }
            | Prim::Cond { .. }
            | Prim::Call { .. }
            | Prim::Checkpoint { .. } => None,
        }
    }
}

/// An innermost-axis reduction at the root (see the module docs).
struct ReduceRoot {
    op: ReduceOp,
    x: Var,
}

/// Emits the kernel rooted at `e` on the vector path if the static check allows it; returns
/// whether it did (else the caller emits the scalar loop nest). `lo..hi`: the outer rows.
pub(super) fn emit<'a>(
    s: &mut Emitter<'a, '_>,
    e: &'a Eqn,
    out_base: Value,
    lo: Value,
    hi: Value,
) -> R<bool> {
    let f = s.f;
    let out = e.outputs[0];
    let reduce = match &e.prim {
        Prim::Reduce { op, axes } => {
            let r = f.var_type(e.inputs[0]).rank();
            (r > 0 && axes.contains(&(r - 1))).then_some(ReduceRoot { op: *op, x: e.inputs[0] })
        }
        _ => None,
    };
    if f.var_type(out).rank() == 0 && reduce.is_none() || f.dtype(out) == DType::Bool {
        return Ok(false);
    }
    let mut ck = Checker { f, inline: s.inline, width: None, occs: Vec::new(), in_reduce: 0 };
    let passes = match &reduce {
        Some(r) => {
            if f.dtype(r.x) == DType::Bool {
                return Ok(false);
            }
            ck.var(r.x)
        }
        None => ck.eqn(e),
    };
    let (Some(mut passes), Some(width)) = (passes, ck.width) else { return Ok(false) };
    // Rows shorter than one vector gain nothing.
    let row_len = match &reduce {
        Some(r) => f.var_type(r.x).shape.dims().last().copied(),
        None => f.var_type(out).shape.dims().last().copied(),
    };
    if row_len.unwrap_or(0) < 16 / width {
        return Ok(false);
    }
    let mut occs = ck.occs;
    if occs.iter().filter(|o| matches!(o.mode, Mode::Tiled { .. })).count() > MAX_TILED {
        occs.iter_mut().for_each(|o| o.mode = Mode::Spill);
        passes = 0;
    }
    let mut bufs = HashMap::new();
    for (k, o) in occs.iter().enumerate() {
        if let Mode::Tiled { .. } = o.mode {
            let data = StackSlotData::new(StackSlotKind::ExplicitSlot, (TILE as usize * width) as u32, 4);
            bufs.insert(k, s.b.create_sized_stack_slot(data));
        }
    }
    s.vs = VState { lanes: 16 / width, width, occs, bufs, passes, ..VState::default() };
    match reduce {
        Some(r) => s.reduce_root(e, &r, out_base, lo, hi)?,
        None => s.map_root(e, out_base, lo, hi)?,
    }
    Ok(true)
}

/// What the row driver does with each computed vector (`unroll slot, first index, value`) and each
/// remainder element (`index`).
type VecSink<'x, 'a, 'b> = dyn FnMut(&mut Emitter<'a, 'b>, usize, Value, Value) -> R<()> + 'x;
type ScalarSink<'x, 'a, 'b> = dyn FnMut(&mut Emitter<'a, 'b>, Value) -> R<()> + 'x;

impl<'a, 'b> Emitter<'a, 'b> {
    /// The vector type of `dt`'s lanes in this kernel (bools are integer masks).
    pub(super) fn vty(&self, dt: DType) -> Type {
        match (dt, self.vs.width) {
            (DType::F32, _) => types::F32X4,
            (DType::F64, _) => types::F64X2,
            (DType::I32 | DType::U32, _) => types::I32X4,
            (DType::Bool, 8) => types::I64X2,
            (DType::Bool, _) => types::I32X4,
        }
    }

    pub(super) fn lanes(&self) -> usize {
        self.vs.lanes
    }

    /// `for i in (lo..hi).step_by(step)`; the body sees `i`, and `i + step ≤ hi` when `hi - lo` is a
    /// multiple of `step`.
    fn for_step(
        &mut self,
        lo: Value,
        hi: Value,
        step: i64,
        body: &mut dyn FnMut(&mut Self, Value) -> R<()>,
    ) -> R<()> {
        let var = self.b.declare_var(types::I64);
        self.b.def_var(var, lo);
        let (header, body_blk, exit) = (self.b.create_block(), self.b.create_block(), self.b.create_block());
        self.b.ins().jump(header, &[]);
        self.b.switch_to_block(header);
        let i = self.b.use_var(var);
        let more = self.b.ins().icmp(cranelift_codegen::ir::condcodes::IntCC::SignedLessThan, i, hi);
        self.b.ins().brif(more, body_blk, &[], exit, &[]);
        self.b.switch_to_block(body_blk);
        body(self, i)?;
        let next = self.b.ins().iadd_imm_s(i, step);
        self.b.def_var(var, next);
        self.b.ins().jump(header, &[]);
        self.b.switch_to_block(exit);
        Ok(())
    }

    /// One innermost row `[start, end)` at outer index `prefix`: `root(idx)` gives the lane-varying
    /// value at the lane-0 multi-index `idx` (`None` when a pass does not need it).
    fn row(
        &mut self,
        prefix: &[Value],
        start: Value,
        end: Value,
        unroll: usize,
        root: &mut dyn FnMut(&mut Self, &[Value]) -> R<Option<Value>>,
        sink: &mut VecSink<'_, 'a, 'b>,
        tail: &mut ScalarSink<'_, 'a, 'b>,
    ) -> R<()> {
        let step = (unroll * self.vs.lanes) as i64;
        let len = self.b.ins().isub(end, start);
        let vec_len = self.b.ins().band_imm_s(len, -step);
        let vend = self.b.ins().iadd(start, vec_len);
        let passes = self.vs.passes;
        // One pass over [t, t_end): every unroll slot of every vector step.
        let mut pass_over = |s: &mut Self, t: Value, t_end: Value, pass: usize| {
            s.for_step(t, t_end, step, &mut |s, j| {
                for u in 0..unroll {
                    let ju = s.b.ins().iadd_imm_s(j, (u * s.vs.lanes) as i64);
                    s.vs.rel = Some(s.b.ins().isub(ju, t));
                    s.vs.pass = pass;
                    s.vs.next = 0;
                    let mut idx = prefix.to_vec();
                    idx.push(ju);
                    let v = root(s, &idx)?;
                    if let (Some(v), true) = (v, pass == passes + 1) {
                        sink(s, u, ju, v)?;
                    }
                }
                Ok(())
            })
        };
        if passes == 0 {
            pass_over(self, start, vend, 1)?;
        } else {
            self.for_step(start, vend, TILE, &mut |s, t| {
                let rest = s.b.ins().isub(vend, t);
                let tile = s.iconst(TILE);
                let tn = s.b.ins().smin(rest, tile);
                let t_end = s.b.ins().iadd(t, tn);
                for pass in 1..=passes + 1 {
                    pass_over(s, t, t_end, pass)?;
                    for k in 0..s.vs.occs.len() {
                        if let Mode::Tiled { pass: p } = s.vs.occs[k].mode
                            && p == pass
                        {
                            let addr = s.b.ins().stack_addr(types::I64, s.vs.bufs[&k], 0);
                            s.tile_call(k, addr, tn)?;
                        }
                    }
                }
                Ok(())
            })?;
        }
        self.for_range_from(vend, end, &mut |s, j| tail(s, j))
    }

    /// An elementwise-shaped root: rows of the output, each stored a vector at a time.
    fn map_root(&mut self, e: &'a Eqn, out_base: Value, lo: Value, hi: Value) -> R<()> {
        let f = self.f;
        let out_ty = f.var_type(e.outputs[0]).clone();
        let dims = out_ty.shape.dims().to_vec();
        let dt = out_ty.dtype;
        let last = dims.len() - 1;
        let n = dims[last] as i64;
        let do_row = |s: &mut Self, prefix: &[Value], start: Value, end: Value| {
            let with = |j: Value| {
                let mut idx = prefix.to_vec();
                idx.push(j);
                idx
            };
            s.row(
                prefix,
                start,
                end,
                UNROLL_MAP,
                &mut |s, idx| s.veqn(e, idx),
                &mut |s, _, j, v| {
                    let off = s.offset(&dims, &with(j));
                    let addr = s.address(dt, out_base, off);
                    s.b.ins().store(mem(), v, addr, 0);
                    Ok(())
                },
                &mut |s, j| {
                    let idx = with(j);
                    let v = s.eqn_value(e, &idx)?;
                    let off = s.offset(&dims, &idx);
                    s.store(dt, out_base, off, v);
                    Ok(())
                },
            )
        };
        if last == 0 {
            return do_row(self, &[], lo, hi);
        }
        self.for_each_index_rows(&dims[..last], lo, hi, &mut |s, prefix| {
            let zero = s.iconst(0);
            let end = s.iconst(n);
            do_row(s, prefix, zero, end)
        })
    }

    /// A root reduction over the input's innermost axis (and maybe others): per output element,
    /// `UNROLL_REDUCE` vector accumulators over every reduced row, then one horizontal combine.
    fn reduce_root(&mut self, e: &'a Eqn, r: &ReduceRoot, out_base: Value, lo: Value, hi: Value) -> R<()> {
        let f = self.f;
        let Prim::Reduce { axes, .. } = &e.prim else { unreachable!("reduce_root on a reduce") };
        let in_dims = f.var_type(r.x).shape.dims().to_vec();
        let out_dims = f.var_type(e.outputs[0]).shape.dims().to_vec();
        let dt = f.dtype(r.x);
        let last = in_dims.len() - 1;
        let mut outer_reduced: Vec<usize> = axes.iter().copied().filter(|&a| a != last).collect();
        outer_reduced.sort_unstable();
        let kept: Vec<usize> = (0..last).filter(|d| !axes.contains(d)).collect();
        let red_dims: Vec<usize> = outer_reduced.iter().map(|&d| in_dims[d]).collect();
        let (op, x) = (r.op, r.x);
        let vty = self.vty(dt);
        let lanes = self.vs.lanes;
        self.for_each_index_rows(&out_dims, lo, hi, &mut |s, oidx| {
            let accs: Vec<_> = (0..UNROLL_REDUCE).map(|_| s.b.declare_var(vty)).collect();
            let init = scalar::reduce_identity(s, op, dt);
            let vinit = s.b.ins().splat(vty, init);
            for &a in &accs {
                s.b.def_var(a, vinit);
            }
            let sacc = s.b.declare_var(clif_type(dt));
            s.b.def_var(sacc, init);
            s.for_each_index(&red_dims, &mut |s, ridx| {
                let prefix: Vec<Value> = (0..last)
                    .map(|d| match outer_reduced.iter().position(|&q| q == d) {
                        Some(k) => ridx[k],
                        None => oidx[kept.iter().position(|&q| q == d).expect("kept dim")],
                    })
                    .collect();
                let zero = s.iconst(0);
                let end = s.iconst(in_dims[last] as i64);
                let with = |j: Value| {
                    let mut idx = prefix.clone();
                    idx.push(j);
                    idx
                };
                s.row(
                    &prefix,
                    zero,
                    end,
                    UNROLL_REDUCE,
                    &mut |s, idx| s.vvalue(x, idx),
                    &mut |s, u, _, v| {
                        let a = s.b.use_var(accs[u]);
                        let c = s.vcombine(op, dt, a, v);
                        s.b.def_var(accs[u], c);
                        Ok(())
                    },
                    &mut |s, j| {
                        let v = s.value(x, &with(j))?;
                        let a = s.b.use_var(sacc);
                        let c = scalar::reduce_combine(s, op, dt, a, v);
                        s.b.def_var(sacc, c);
                        Ok(())
                    },
                )
            })?;
            let mut v = s.b.use_var(accs[0]);
            for &a in &accs[1..] {
                let w = s.b.use_var(a);
                v = s.vcombine(op, dt, v, w);
            }
            let mut acc = s.b.use_var(sacc);
            for l in 0..lanes {
                let x = s.b.ins().extractlane(v, l as u8);
                acc = scalar::reduce_combine(s, op, dt, acc, x);
            }
            let off = s.offset(&out_dims, oidx);
            s.store(dt, out_base, off, acc);
            Ok(())
        })
    }

    // ---- the vector walk --------------------------------------------------------------------------

    /// The vector of `v` at lanes `idx .. idx + L` (innermost index): computed, or one load.
    /// `None` when the current pass does not need it (see the module docs).
    fn vvalue(&mut self, v: Var, idx: &[Value]) -> R<Option<Value>> {
        let f = self.f;
        if self.vs.pass <= self.vs.passes && !self.vs.needed {
            // Outside the arguments of this pass's occurrences, a non-final pass only descends
            // toward them: subtrees whose occurrences all belong to earlier passes are skipped.
            let Some(_) = self.inline[v.index()] else { return Ok(None) };
            let (last_pass, count) = self.summary(v);
            if last_pass < self.vs.pass {
                self.vs.next += count;
                return Ok(None);
            }
        }
        match self.inline[v.index()] {
            Some(p) => self.veqn(&f.eqns[p], idx),
            None => {
                let dt = f.dtype(v);
                let dims = f.var_type(v).shape.dims().to_vec();
                let off = self.offset(&dims, idx);
                let addr = self.address(dt, self.bases[&v], off);
                let ty = self.vty(dt);
                Ok(Some(self.b.ins().load(ty, mem(), addr, 0)))
            }
        }
    }

    /// (last tiled pass, occurrence count) of `v`'s tree, as the checker sees it outside reductions.
    fn summary(&mut self, v: Var) -> (usize, usize) {
        if let Some(&r) = self.vs.summary.get(&v) {
            return r;
        }
        let mut ck = Checker { f: self.f, inline: self.inline, width: None, occs: Vec::new(), in_reduce: 0 };
        let r = (ck.var(v).unwrap_or(0), ck.occs.len());
        self.vs.summary.insert(v, r);
        r
    }

    /// The lane-invariant value of `v` at `idx` (scalar path), splatted.
    fn splat_value(&mut self, v: Var, idx: &[Value]) -> R<Value> {
        let x = self.value(v, idx)?;
        Ok(self.splat(self.f.dtype(v), x))
    }

    /// Splats a scalar of `dt` (a bool 0/1 becomes a mask).
    pub(super) fn splat(&mut self, dt: DType, x: Value) -> Value {
        let ty = self.vty(dt);
        let x = if dt == DType::Bool {
            let w = self.b.ins().uextend(ty.lane_type(), x);
            self.b.ins().ineg(w)
        } else {
            x
        };
        self.b.ins().splat(ty, x)
    }

    /// `v` reached with the innermost index kept (`varying`) or dropped.
    fn vmaybe(&mut self, v: Var, idx: &[Value], varying: bool) -> R<Option<Value>> {
        if varying { self.vvalue(v, idx) } else { self.splat_value(v, idx).map(Some) }
    }

    /// The per-primitive vector table (mirrors [`Checker::eqn`]; rejected primitives never get here).
    fn veqn(&mut self, e: &'a Eqn, idx: &[Value]) -> R<Option<Value>> {
        let f = self.f;
        let ins = &e.inputs;
        let dims_of = |v: Var| f.var_type(v).shape.dims().to_vec();
        let dt = |k: usize| f.dtype(ins[k]);
        let rank = |v: Var| f.var_type(v).rank();
        let last = idx.len().saturating_sub(1);
        Ok(Some(match &e.prim {
            Prim::Unary(op) => {
                if let (Some(func), true) = (tile_func(*op), dt(0).is_float()) {
                    return self.transcendental(func, dt(0), ins[0], idx);
                }
                let Some(x) = self.vvalue(ins[0], idx)? else { return Ok(None) };
                self.vunary(*op, dt(0), x)?
            }
            Prim::Binary(op) => {
                let (x, y) = (self.vvalue(ins[0], idx)?, self.vvalue(ins[1], idx)?);
                let (Some(x), Some(y)) = (x, y) else { return Ok(None) };
                self.vbinary(*op, dt(0), x, y)?
            }
            Prim::Compare(op) => {
                let (x, y) = (self.vvalue(ins[0], idx)?, self.vvalue(ins[1], idx)?);
                let (Some(x), Some(y)) = (x, y) else { return Ok(None) };
                self.vcompare(*op, dt(0), x, y)
            }
            Prim::Select => {
                let p = if rank(ins[0]) == 0 { None } else { Some(self.vvalue(ins[0], idx)?) };
                let (t, o) = (self.vvalue(ins[1], idx)?, self.vvalue(ins[2], idx)?);
                let (Some(t), Some(o)) = (t, o) else { return Ok(None) };
                match p {
                    None => {
                        let c = self.value(ins[0], &[])?;
                        self.b.ins().select(c, t, o)
                    }
                    Some(None) => return Ok(None),
                    Some(Some(m)) => self.vselect(m, t, o),
                }
            }
            Prim::Clamp => {
                let bound = |k: usize| if rank(ins[k]) > 0 { idx } else { &[] };
                let lo = self.vmaybe(ins[0], bound(0), rank(ins[0]) > 0)?;
                let x = self.vvalue(ins[1], idx)?;
                let hi = self.vmaybe(ins[2], bound(2), rank(ins[2]) > 0)?;
                let (Some(lo), Some(x), Some(hi)) = (lo, x, hi) else { return Ok(None) };
                let m = self.vbinary(kiln_ir::BinaryOp::Max, dt(1), x, lo)?;
                self.vbinary(kiln_ir::BinaryOp::Min, dt(1), m, hi)?
            }
            Prim::ConvertElementType { dtype } => {
                let Some(x) = self.vvalue(ins[0], idx)? else { return Ok(None) };
                self.vconvert(dt(0), *dtype, x)?
            }
            Prim::BitcastConvertType { dtype } => {
                let Some(x) = self.vvalue(ins[0], idx)? else { return Ok(None) };
                self.vbitcast(*dtype, x)
            }
            Prim::Iota { dtype, dimension, .. } => {
                if *dimension == last {
                    self.viota(*dtype, idx[last])?
                } else {
                    let x = scalar::from_index(self, idx[*dimension], *dtype)?;
                    self.splat(*dtype, x)
                }
            }
            Prim::BroadcastInDim { broadcast_dimensions, .. } => {
                let in_dims = dims_of(ins[0]);
                let zero = self.iconst(0);
                let j: Vec<Value> = in_dims
                    .iter()
                    .zip(broadcast_dimensions)
                    .map(|(&n, &d)| if n == 1 { zero } else { idx[d] })
                    .collect();
                let varying =
                    broadcast_dimensions.last() == Some(&last) && in_dims.last().is_some_and(|&n| n != 1);
                return self.vmaybe(ins[0], &j, varying);
            }
            Prim::Reshape { .. } => {
                let in_dims = dims_of(ins[0]);
                let Some((&n_in, in_prefix)) = in_dims.split_last() else {
                    return self.splat_value(ins[0], &[]).map(Some);
                };
                let out_dims = dims_of(e.outputs[0]);
                debug_assert_eq!(Some(&n_in), out_dims.last());
                let lin = self.offset(&out_dims[..last], &idx[..last]);
                let mut j = self.unravel(lin, in_prefix);
                j.push(idx[last]);
                return self.vvalue(ins[0], &j);
            }
            Prim::Transpose { permutation } => {
                let mut j = idx.to_vec();
                for (i, &p) in permutation.iter().enumerate() {
                    j[p] = idx[i];
                }
                return self.vvalue(ins[0], &j);
            }
            Prim::Slice { start, strides, .. } => {
                let mut j = idx.to_vec();
                for d in 0..idx.len() {
                    let scaled = self.b.ins().imul_imm_s(idx[d], strides[d] as i64);
                    j[d] = self.b.ins().iadd_imm_s(scaled, start[d] as i64);
                }
                return self.vvalue(ins[0], &j);
            }
            Prim::StopGradient => return self.vvalue(ins[0], idx),
            Prim::Reduce { op, axes } => return self.vreduce(*op, axes, ins[0], idx),
            Prim::Rev { .. }
            | Prim::DynamicSlice { .. }
            | Prim::DynamicUpdateSlice
            | Prim::Concatenate { .. }
            | Prim::Pad { .. }
            | Prim::ArgReduce { .. }
            | Prim::Cumulative { .. }
            | Prim::Gather { .. }
            | Prim::Sort { .. }
            | Prim::DotGeneral { .. }
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
                return Err(CompileError::Codegen(format!(
                    "{} reached the vector path (vectorizability check bug)",
                    e.prim.name()
                )));
            }
        }))
    }

    /// A lane-varying reduction over non-innermost axes: one accumulator per lane, in the
    /// interpreter's order.
    fn vreduce(&mut self, op: ReduceOp, axes: &[usize], x: Var, idx: &[Value]) -> R<Option<Value>> {
        let f = self.f;
        let in_dims = f.var_type(x).shape.dims().to_vec();
        let dt = f.dtype(x);
        let mut reduced = axes.to_vec();
        reduced.sort_unstable();
        let kept: Vec<usize> = (0..in_dims.len()).filter(|d| !axes.contains(d)).collect();
        let red_dims: Vec<usize> = reduced.iter().map(|&d| in_dims[d]).collect();
        let vty = self.vty(dt);
        let acc = self.b.declare_var(vty);
        let init = scalar::reduce_identity(self, op, dt);
        let vinit = self.b.ins().splat(vty, init);
        self.b.def_var(acc, vinit);
        let mut missing = false;
        // The body is emitted once (and runs zero times where a reduced extent is 0).
        self.for_each_index(&red_dims, &mut |s, ridx| {
            let full: Vec<Value> = (0..in_dims.len())
                .map(|d| match reduced.iter().position(|&r| r == d) {
                    Some(k) => ridx[k],
                    None => idx[kept.iter().position(|&q| q == d).expect("kept dim")],
                })
                .collect();
            match s.vvalue(x, &full)? {
                Some(v) => {
                    let a = s.b.use_var(acc);
                    let c = s.vcombine(op, dt, a, v);
                    s.b.def_var(acc, c);
                }
                None => missing = true,
            }
            Ok(())
        })?;
        Ok(if missing { None } else { Some(self.b.use_var(acc)) })
    }

    /// A transcendental occurrence (see the module docs for the passes).
    fn transcendental(&mut self, func: Func, dt: DType, arg: Var, idx: &[Value]) -> R<Option<Value>> {
        let k = self.vs.next;
        self.vs.next += 1;
        let occ = self.vs.occs[k];
        let width = self.vs.width as i64;
        match occ.mode {
            Mode::Spill => {
                let Some(x) = self.vvalue(arg, idx)? else { return Ok(None) };
                Ok(Some(self.spill_call(k, dt, x)?))
            }
            Mode::Tiled { pass } => {
                let rel = self.vs.rel.ok_or_else(|| CompileError::Codegen("tile offset unset".into()))?;
                let bytes = self.b.ins().imul_imm_s(rel, width);
                let base = self.b.ins().stack_addr(types::I64, self.vs.bufs[&k], 0);
                let addr = self.b.ins().iadd(base, bytes);
                if pass < self.vs.pass {
                    self.vs.next += occ.inner;
                    let ty = self.vty(dt);
                    return Ok(Some(self.b.ins().load(ty, mem(), addr, 0)));
                }
                let outer = self.vs.needed;
                self.vs.needed = pass == self.vs.pass;
                let x = self.vvalue(arg, idx);
                self.vs.needed = outer;
                let x = x?;
                if pass == self.vs.pass {
                    let x = x.ok_or_else(|| {
                        CompileError::Codegen(format!("{func:?} argument not ready in pass {pass}"))
                    })?;
                    self.b.ins().store(mem(), x, addr, 0);
                }
                Ok(None)
            }
        }
    }

    /// Calls occurrence `k`'s tile function in place on `n` elements at `addr`.
    fn tile_call(&mut self, k: usize, addr: Value, n: Value) -> R<()> {
        let Occ { func, dt, .. } = self.vs.occs[k];
        let name = crate::runtime::math::tile_name(func, dt == DType::F64);
        let fref = match self.callbacks.get(name) {
            Some(r) => *r,
            None => {
                let mut sig = self.module.make_signature();
                sig.params.extend([
                    AbiParam::new(types::I64),
                    AbiParam::new(types::I64),
                    AbiParam::new(types::I64),
                ]);
                let id = self
                    .module
                    .declare_function(name, Linkage::Import, &sig)
                    .map_err(|e| CompileError::Codegen(e.to_string()))?;
                let r = self.module.declare_func_in_func(id, self.b.func);
                self.callbacks.insert(name, r);
                r
            }
        };
        self.b.ins().call(fref, &[addr, addr, n]);
        Ok(())
    }

    /// Spills `x` to the stack, runs occurrence `k`'s tile function on its lanes, reloads.
    fn spill_call(&mut self, k: usize, dt: DType, x: Value) -> R<Value> {
        let slot = match self.vs.spill {
            Some(s) => s,
            None => {
                let s =
                    self.b.create_sized_stack_slot(StackSlotData::new(StackSlotKind::ExplicitSlot, 16, 4));
                self.vs.spill = Some(s);
                s
            }
        };
        let addr = self.b.ins().stack_addr(types::I64, slot, 0);
        self.b.ins().store(mem(), x, addr, 0);
        let n = self.iconst(self.vs.lanes as i64);
        self.tile_call(k, addr, n)?;
        let ty = self.vty(dt);
        Ok(self.b.ins().load(ty, mem(), addr, 0))
    }
}

#[cfg(test)]
mod tests {
    use super::super::Jit;
    use kiln_ir::*;

    /// The Cranelift IR of the kernel rooted at the last equation of `f`, every other equation inlined.
    fn clif(f: &Function) -> String {
        let mut inline = vec![None; f.vars.len()];
        for (k, e) in f.eqns.iter().enumerate().take(f.eqns.len() - 1) {
            inline[e.outputs[0].index()] = Some(k);
        }
        let mut jit = Jit::new_with_dump(true).unwrap();
        jit.kernel(f, f.eqns.len() - 1, &inline).unwrap();
        let (_, _, text) = jit.finish().unwrap();
        assert_eq!(text.len(), 1);
        text.into_iter().next().unwrap()
    }

    fn unary_chain(dt: DType, dims: &[usize], ops: &[Prim]) -> Function {
        let mut f = Function::new();
        let mut v = f.add_param(TensorType::new(dt, Shape::new(dims)));
        for p in ops {
            v = f.push(p.clone(), &[v], None).unwrap()[0];
        }
        f.outputs.push(v);
        f
    }

    #[test]
    fn elementwise_kernels_load_and_store_vectors() {
        for (dt, ty) in [(DType::F32, "f32x4"), (DType::F64, "f64x2"), (DType::I32, "i32x4")] {
            let f = unary_chain(dt, &[3, 100], &[Prim::Unary(UnaryOp::Neg), Prim::Unary(UnaryOp::Abs)]);
            let text = clif(&f);
            assert!(text.contains(&format!("load.{ty}")), "{text}");
            assert!(text.contains(&format!("store notrap")), "{text}");
        }
    }

    #[test]
    fn transcendentals_are_strip_mined_and_rejected_kernels_stay_scalar() {
        let f = unary_chain(DType::F32, &[1000], &[Prim::Unary(UnaryOp::Sin), Prim::Unary(UnaryOp::Exp)]);
        let text = clif(&f);
        // Two tile buffers of 256 f32 each, vector code around them.
        assert_eq!(text.matches("explicit_slot 1024").count(), 2, "{text}");
        assert!(text.contains("f32x4"), "{text}");
        // rev of the last axis is not vectorizable; mixed widths (f32 -> f64) neither.
        let rev =
            unary_chain(DType::F32, &[1000], &[Prim::Rev { dimensions: vec![0] }, Prim::Unary(UnaryOp::Neg)]);
        assert!(!clif(&rev).contains("f32x4"));
        let mixed = unary_chain(
            DType::F32,
            &[1000],
            &[Prim::ConvertElementType { dtype: DType::F64 }, Prim::Unary(UnaryOp::Neg)],
        );
        let text = clif(&mixed);
        assert!(!text.contains("f32x4") && !text.contains("f64x2"), "{text}");
    }

    #[test]
    fn innermost_reductions_keep_several_accumulators() {
        let f = unary_chain(DType::F32, &[8, 1000], &[Prim::Reduce { op: ReduceOp::Sum, axes: vec![1] }]);
        let text = clif(&f);
        assert!(text.matches("fadd").count() >= super::UNROLL_REDUCE, "{text}");
        assert!(text.contains("extractlane"), "{text}");
    }
}
