//! The vector path: SIMD on the contiguous innermost loop.
//!
//! Cranelift has 128-bit vectors only, so a kernel runs `L = 16 / w` lanes (f32x4, i32x4 or f64x2)
//! where `w` is the one element width (4 or 8 bytes) of every lane-varying value in its fused tree.
//! The static check [`Checker`] — an exhaustive per-primitive `match` — decides per kernel: a value
//! is *lane-varying* when its innermost index moves with the output's (loaded with one vector load,
//! stride 1), or *lane-invariant* when a broadcast (or iota along another axis, or a rank-0 bound)
//! drops the innermost index (computed once by the scalar path and splatted); a strided slice of
//! the last axis of a leaf is lane-varying too, loaded lane by lane (the quaternion components
//! `q[..., k:k+1]` of a collapsed kernel, see [`super::collapse`]). Whatever the check rejects
//! (gather, rev of the last axis, dynamic slices, strided slices of inlined values or transposes of
//! the last axis, interior padding of the last axis, mixed widths, bool outputs, more than
//! `MAX_SEGMENTS` segments) keeps the scalar loop nest. The check lives in [`super::check`], the
//! per-primitive vector table in [`super::vwalk`].
//!
//! **Segments**: concatenates and pads along the innermost axis (rolls, stencil borders, the pads
//! of slice transposes) split each row at static breakpoints into segments inside which each of
//! them reads one operand or the pad value ([`super::check::Checker`]); every segment gets its own
//! vector loop and scalar remainder, segments shorter than a vector step only the scalar loop.
//! Along other axes they are lane-invariant selects.
//! Bools inside a vector kernel are comparison masks, lane-width integers (all ones for true); a
//! bool leaf's bytes are widened to such masks as they are loaded.
//!
//! Loop shape for one innermost row `[start, end)` (`lo..hi` for a rank-1 output):
//! - the main loop steps `U·L` elements (unrolled `U`×: [`UNROLL_MAP`], or [`UNROLL_MAP_LONG`] for
//!   long row segments in kernels without transcendental tiles; [`UNROLL_REDUCE`]);
//! - the remainder (`< U·L` elements) runs the scalar `value` code, so results agree bitwise.
//!
//! Results are bitwise equal to the interpreter: no FMA contraction; max/min (and reductions'
//! max/min) are built from compares and `bitselect` with the scalar code's NaN and ±0 rules rather
//! than Cranelift's vector `fmin`/`fmax`; integer division and shifts go lane by lane through the
//! scalar code (x86 has no vector division, Cranelift's vector shifts take one scalar amount);
//! reductions over non-innermost axes keep one sequential accumulator per lane, in the
//! interpreter's order — including float sums/products longer than [`pairwise::BLOCK`], which are
//! blocked-pairwise on every path and in the interpreter alike (see [`super::pairwise`] for the
//! error bound).
//!
//! **Matrix-vector products** (a `dot_general` kernel root whose output's innermost axis is a free
//! axis of one operand): that operand's lanes are loaded per contracting index — whole vectors
//! along its last axis, lane by lane from a leaf along another (W4's `W·s`, lanes over the rows
//! of a `[B, 4]` state) — and multiplied by the other operand's splatted scalar, in the scalar
//! path's order (`0 + l·r + ...`), so bitwise equal. Reductions over outer axes that are the
//! root accumulate [`REDUCE_COLUMNS`] vectors of the row per pass over the reduced rows.
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

use super::check::{Checker, Mode, Occ};
use super::kernel::{Emitter, R, UNROLLED_COPIES_MAX, clif_type};
use super::{pairwise, scalar};
use crate::CompileError;
use cranelift_codegen::ir::{
    InstBuilder, StackSlot, StackSlotData, StackSlotKind, Type, Value, condcodes::IntCC, types,
};
use kiln_ir::{DType, Eqn, Function, Prim, ReduceOp, Var};
use std::collections::HashMap;

/// Elements per transcendental tile (a multiple of every `U·L`): 1–2 KiB per buffer, L1-resident.
pub(super) const TILE: i64 = 256;
/// Unroll factor of elementwise rows. ×2 was first measured within noise of ×1 on `a*b + c*d - e`
/// (`benches/kernels.rs`); on W1's stencil step (three shifted loads, two splatted scalars, 4096
/// elements under `scan`) ×2 runs the forward in 0.97 ms against 1.8 ms (3 alternating rounds,
/// 2026-11-30), W1 at 10⁶ points 20–27 against 26–45 ms, and W2, W4, W5 within noise.
pub(super) const UNROLL_MAP: usize = 2;
/// Unroll factor of elementwise row segments (rows, or the pieces concatenates and pads cut
/// them into) of at least [`LONG_ROW`] elements in kernels without transcendental tiles
/// (transcendentals called lane by lane do not count): on a 2-core AVX2 host (minima of
/// alternating runs, one thread, 2026-12-01) W1's stencil step at N = 4096 ran 0.86–0.87 ms against 0.91–0.94 ms for ×2, W1's gradient 4.8–6.5 against
/// 6.5–7.0 ms and W5's forward 2.8–3.0 against 3.0–3.3 ms; rows of 10–120 elements (W2) were
/// no faster with it, and kernels with tiles (W3, W4) were not shown to gain, so they keep ×2.
pub(super) const UNROLL_MAP_LONG: usize = 4;
/// See [`UNROLL_MAP_LONG`].
pub(super) const LONG_ROW: i64 = 1024;
/// Vector accumulators of an innermost-axis reduction (independent dependency chains).
pub(super) const UNROLL_REDUCE: usize = 4;
// `row` rounds a length down to whole steps of `U·L` with a mask, and tiles hold whole steps.
const _: () = assert!(
    UNROLL_MAP.is_power_of_two()
        && UNROLL_MAP_LONG.is_power_of_two()
        && UNROLL_REDUCE.is_power_of_two()
        && REDUCE_COLUMNS.is_power_of_two()
        && TILE % (4 * UNROLL_MAP_LONG as i64) == 0
);
/// Vectors of a row that a root reduction over outer axes accumulates per pass over the reduced
/// rows: 4 × 16 bytes, one cache line of each row. W4's sum over the 1000 steps of `[1000, 1024]`
/// rewards took 9 % of its forward pass one vector at a time (each row's line fetched four
/// times, from L2, at the latency of one add chain).
pub(super) const REDUCE_COLUMNS: usize = 4;
/// More tiled occurrences than this (stack buffers of `TILE` elements each) fall back to spill calls.
const MAX_TILED: usize = 32;

/// More segments than this (concatenates/pads along the innermost axis with many pieces) keep
/// the scalar loop nest: each segment is its own copy of the loop.
const MAX_SEGMENTS: usize = 32;

/// State of the vector walk, kept in the [`Emitter`].
#[derive(Default)]
pub(super) struct VState {
    /// Lanes per vector (0 when the kernel is scalar).
    pub(super) lanes: usize,
    /// Element width in bytes of every lane-varying value.
    pub(super) width: usize,
    pub(super) occs: Vec<Occ>,
    /// Tile buffers of the tiled occurrences (by occurrence).
    pub(super) bufs: HashMap<usize, StackSlot>,
    /// Passes before the final one.
    pub(super) passes: usize,
    /// The pass being emitted (1-based; `passes + 1` is the final pass).
    pub(super) pass: usize,
    /// The next occurrence's number in the current walk.
    pub(super) next: usize,
    /// Whether the walk is inside the argument of an occurrence of the current (non-final) pass.
    pub(super) needed: bool,
    /// Element offset of the current vector inside its tile.
    pub(super) rel: Option<Value>,
    /// 16-byte stack slot for spill calls.
    pub(super) spill: Option<StackSlot>,
    /// (max tiled pass, occurrence count) of each inlined variable's tree, memoized.
    pub(super) summary: HashMap<Var, (usize, usize)>,
    /// The root innermost-index range `[a, b)` of the segment being emitted (see [`Checker`]).
    pub(super) seg: (i64, i64),
    /// Innermost-index offset of the node being walked relative to the root's.
    pub(super) shift: i64,
    /// Lane-invariant values of the row being emitted, computed once ahead of its loops.
    pub(super) hoist: Hoist,
}

/// Lane-invariant values (splats of the scalar path, [`Emitter::splat_value`]) of a map root's
/// row, computed once in the row's header instead of once per vector of the row. W2's weight
/// gradient `dW += (a·b·(1 - t²))[:, None] * s[None, :]` (rows of 10) recomputed its per-row
/// factor, five loads and seven flops, for each of the row's three vectors. Measured on that
/// kernel alone (`[R, 10]`, one thread, `Executable::run`, minima of alternating runs,
/// 2026-12-02): 1.24 against 1.30 µs at R = 120, 4.00 against 4.25 µs at R = 1000; W2 and W4
/// were within this host's noise either way.
///
/// The header walks the root once in [`Hoist::Record`]: lane-varying values are not emitted
/// (leaves and inlined equations give `None`), each splat reached outside a reduction or dot
/// loop is computed and kept. The loop's walks ([`Hoist::Replay`]) reach the same splats in the
/// same order, since the walk depends only on the kernel and the segment, and take the `k`-th
/// kept value for the `k`-th. Splats inside a reduction's or dot's loop depend on its loop index
/// and are computed in place (the header skips those loops, the loop's walks turn hoisting off
/// inside them). Lane-invariant values depend on the row's outer index only, and the scalar path
/// never traps (integer division by zero and gathers are guarded), so computing them ahead of a
/// loop that may run zero times (a rank-1 row split over threads) is safe. Only map roots
/// without transcendental tiles hoist: tiled passes skip subtrees, so their walks differ.
#[derive(Default)]
pub(super) enum Hoist {
    #[default]
    Off,
    /// The header's walk: the splats computed so far, in walk order.
    Record(Vec<Value>),
    /// A loop walk: the recorded splats and the next one's position.
    Replay { vals: Vec<Value>, next: usize },
}

/// An innermost-axis reduction at the root (see the module docs).
struct ReduceRoot {
    op: ReduceOp,
    x: Var,
}

/// The segments `[a, b)` of `0..n` between the sorted distinct breakpoints inside it.
fn segments(mut breaks: Vec<i64>, n: i64) -> Vec<(i64, i64)> {
    breaks.retain(|&x| x > 0 && x < n);
    breaks.extend([0, n]);
    breaks.sort_unstable();
    breaks.dedup();
    breaks.windows(2).map(|w| (w[0], w[1])).collect()
}

/// What the static check decided for a kernel that takes the vector path.
struct Plan {
    reduce: Option<ReduceRoot>,
    passes: usize,
    width: usize,
    occs: Vec<Occ>,
    segs: Vec<(i64, i64)>,
}

/// The static check of the kernel rooted at `e` (see [`Checker`]): `None` keeps it scalar.
fn plan(f: &Function, inline: &[Option<usize>], e: &Eqn) -> Option<Plan> {
    let out = e.outputs[0];
    let reduce = match &e.prim {
        Prim::Reduce { op, axes } => {
            let r = f.var_type(e.inputs[0]).rank();
            (r > 0 && axes.contains(&(r - 1))).then_some(ReduceRoot { op: *op, x: e.inputs[0] })
        }
        _ => None,
    };
    if f.var_type(out).rank() == 0 && reduce.is_none() || f.dtype(out) == DType::Bool {
        return None;
    }
    let mut ck = Checker::new(f, inline);
    let passes = match &reduce {
        Some(r) if f.dtype(r.x) == DType::Bool => return None,
        Some(r) => ck.var(r.x),
        None => ck.eqn(e),
    };
    let (Some(mut passes), Some(width)) = (passes, ck.width) else { return None };
    // Rows shorter than one vector gain nothing.
    let row_len = match &reduce {
        Some(r) => f.var_type(r.x).shape.dims().last().copied(),
        None => f.var_type(out).shape.dims().last().copied(),
    }
    .unwrap_or(0);
    if row_len < 16 / width {
        return None;
    }
    let segs = segments(std::mem::take(&mut ck.breaks), row_len as i64);
    if segs.len() > MAX_SEGMENTS {
        return None;
    }
    let mut occs = ck.occs;
    if occs.iter().filter(|o| matches!(o.mode, Mode::Tiled { .. })).count() > MAX_TILED {
        occs.iter_mut().for_each(|o| o.mode = Mode::Spill);
        passes = 0;
    }
    Some(Plan { reduce, passes, width, occs, segs })
}

/// Whether the kernel rooted at `e` takes the vector path ([`emit`] would emit it).
pub(super) fn qualifies(f: &Function, inline: &[Option<usize>], e: &Eqn) -> bool {
    plan(f, inline, e).is_some()
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
    let Some(Plan { reduce, passes, width, occs, segs }) = plan(s.f, s.inline, e) else { return Ok(false) };
    let mut bufs = HashMap::new();
    for (k, o) in occs.iter().enumerate() {
        if let Mode::Tiled { .. } = o.mode {
            let data = StackSlotData::new(StackSlotKind::ExplicitSlot, (TILE as usize * width) as u32, 4);
            bufs.insert(k, s.b.create_sized_stack_slot(data));
        }
    }
    s.vs = VState { lanes: 16 / width, width, occs, bufs, passes, ..VState::default() };
    match reduce {
        Some(r) => s.reduce_root(e, &r, &segs, out_base, lo, hi)?,
        None => s.map_root(e, &segs, out_base, lo, hi)?,
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

    /// One piece `[start, end)` of an innermost row inside segment `seg` at outer index `prefix`:
    /// `root(idx)` gives the lane-varying value at the lane-0 multi-index `idx` (`None` when a pass
    /// does not need it). A segment shorter than one vector step runs scalar only.
    ///
    /// `overlap` (a map root without tiles, whose sink only stores): the remainder after the vector
    /// steps (fewer than `U·L` elements) runs as single vectors, the last one ending at `end`, which
    /// recomputes and stores again up to `L - 1` elements with the same bits (the vector and scalar
    /// codes agree bitwise, and a kernel never reads its own output), instead of the remainder's
    /// scalar elements — each of which evaluates the whole fused tree, row-invariant factors
    /// included (W2's weight gradient: rows of 10, two scalar elements after the vector step).
    #[allow(clippy::too_many_arguments)]
    fn row(
        &mut self,
        prefix: &[Value],
        seg: (i64, i64),
        start: Value,
        end: Value,
        unroll: usize,
        overlap: bool,
        root: &mut dyn FnMut(&mut Self, &[Value]) -> R<Option<Value>>,
        sink: &mut VecSink<'_, 'a, 'b>,
        tail: &mut ScalarSink<'_, 'a, 'b>,
    ) -> R<()> {
        let step = (unroll * self.vs.lanes) as i64;
        if seg.1 - seg.0 < step {
            // A short segment at static bounds (one piece of a `stack` along the last axis) is
            // unrolled with constant indices, so its concatenate picks the operand statically.
            // Counted like the scalar nest's unrolled copies (a small reduction in `tail` may be
            // unrolled too).
            if let (Some(a), Some(b)) = (self.known(start), self.known(end))
                && self.unrolled * ((b - a).max(1) as usize) <= UNROLLED_COPIES_MAX
            {
                let factor = (b - a).max(1) as usize;
                self.unrolled *= factor;
                let mut r = Ok(());
                for j in a..b {
                    let j = self.iconst(j);
                    r = tail(self, j);
                    if r.is_err() {
                        break;
                    }
                }
                self.unrolled /= factor;
                return r;
            }
            return self.for_range_from(start, end, &mut |s, j| tail(s, j));
        }
        self.vs.seg = seg;
        self.vs.shift = 0;
        let len = self.b.ins().isub(end, start);
        let vec_len = self.b.ins().band_imm_s(len, -step);
        let vend = self.b.ins().iadd(start, vec_len);
        let passes = self.vs.passes;
        let hoist = overlap && passes == 0;
        if hoist {
            self.vs.hoist = Hoist::Record(Vec::new());
            self.vs.pass = passes + 1;
            self.vs.next = 0;
            self.vs.rel = Some(self.iconst(0));
            let mut idx = prefix.to_vec();
            idx.push(start);
            root(self, &idx)?;
            let Hoist::Record(vals) = std::mem::take(&mut self.vs.hoist) else {
                return Err(CompileError::Codegen("hoist: the header walk changed mode".into()));
            };
            self.vs.hoist = Hoist::Replay { vals, next: 0 };
        }
        // One pass over [t, t_end): every unroll slot of every vector step.
        let mut pass_over = |s: &mut Self, t: Value, t_end: Value, pass: usize| {
            s.for_step_by(t, t_end, step, &mut |s, j| {
                for u in 0..unroll {
                    let ju = s.b.ins().iadd_imm_s(j, (u * s.vs.lanes) as i64);
                    s.vs.rel = Some(s.b.ins().isub(ju, t));
                    s.vs.pass = pass;
                    s.vs.next = 0;
                    s.rewind_hoist();
                    let mut idx = prefix.to_vec();
                    idx.push(ju);
                    let v = root(s, &idx)?;
                    s.check_hoist()?;
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
            self.for_step_by(start, vend, TILE, &mut |s, t| {
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
        if overlap && passes == 0 {
            // Vector steps ran (`vend > start`) and elements remain (`vend < end`, fewer than a
            // step of `U` vectors): single vectors while a whole one fits before the last, then
            // the last vector [end - L, end), inside the piece since it holds at least one step.
            let lanes = self.vs.lanes as i64;
            let (last_vec, scalar_tail, done) =
                (self.b.create_block(), self.b.create_block(), self.b.create_block());
            let ran = self.b.ins().icmp(IntCC::SignedGreaterThan, vend, start);
            let left = self.b.ins().icmp(IntCC::SignedLessThan, vend, end);
            let both = self.b.ins().band(ran, left);
            self.b.ins().brif(both, last_vec, &[], scalar_tail, &[]);
            self.b.switch_to_block(last_vec);
            let mut one = |s: &mut Self, j: Value| -> R<()> {
                s.vs.rel = Some(s.iconst(0));
                s.vs.pass = passes + 1;
                s.vs.next = 0;
                s.rewind_hoist();
                let mut idx = prefix.to_vec();
                idx.push(j);
                let v = root(s, &idx)?;
                s.check_hoist()?;
                if let Some(v) = v {
                    sink(s, 0, j, v)?;
                }
                Ok(())
            };
            let last = self.b.ins().iadd_imm_s(end, -lanes);
            self.for_step_by(vend, last, lanes, &mut |s, j| one(s, j))?;
            one(self, last)?;
            self.b.ins().jump(done, &[]);
            self.b.switch_to_block(scalar_tail);
            self.for_range_from(vend, end, &mut |s, j| tail(s, j))?;
            self.b.ins().jump(done, &[]);
            self.b.switch_to_block(done);
            self.vs.hoist = Hoist::Off;
            return Ok(());
        }
        self.for_range_from(vend, end, &mut |s, j| tail(s, j))
    }

    /// Whether this is a row header's walk ([`Hoist::Record`]).
    pub(super) fn recording(&self) -> bool {
        matches!(self.vs.hoist, Hoist::Record(_))
    }

    /// Starts a loop walk at the first recorded splat ([`Hoist`]).
    fn rewind_hoist(&mut self) {
        if let Hoist::Replay { next, .. } = &mut self.vs.hoist {
            *next = 0;
        }
    }

    /// A loop walk must have used every recorded splat, as the header's walk reached them.
    fn check_hoist(&self) -> R<()> {
        match &self.vs.hoist {
            Hoist::Replay { vals, next } if *next != vals.len() => Err(CompileError::Codegen(format!(
                "hoist: a loop walk reached {next} of the header's {} lane-invariant values",
                vals.len()
            ))),
            _ => Ok(()),
        }
    }

    /// An elementwise-shaped root: rows of the output, each stored a vector at a time, segment by
    /// segment.
    fn map_root(&mut self, e: &'a Eqn, segs: &[(i64, i64)], out_base: Value, lo: Value, hi: Value) -> R<()> {
        let f = self.f;
        let out_ty = f.var_type(e.outputs[0]).clone();
        let dims = out_ty.shape.dims().to_vec();
        let dt = out_ty.dtype;
        let last = dims.len() - 1;
        // `bounds`: the row's [lo, hi) for a rank-1 output (split over threads), else the whole row.
        let do_row = |s: &mut Self, prefix: &[Value], bounds: Option<(Value, Value)>| -> R<()> {
            let with = |j: Value| {
                let mut idx = prefix.to_vec();
                idx.push(j);
                idx
            };
            for &seg in segs {
                let (a, b) = (s.iconst(seg.0), s.iconst(seg.1));
                let (start, end) = match bounds {
                    None => (a, b),
                    Some((lo, hi)) => {
                        let start = s.b.ins().smax(a, lo);
                        let end = s.b.ins().smin(b, hi);
                        (start, s.b.ins().smax(end, start))
                    }
                };
                // Segments shorter than an unrolled step keep single vectors (a `[B, 4]` row). A
                // reduction over outer axes computes `REDUCE_COLUMNS` vectors per pass over the
                // reduced rows (`vreduce_group`; not while tiles are in play, whose passes
                // number the occurrences per vector).
                let grouped = match &e.prim {
                    Prim::Reduce { op, axes } if s.vs.passes == 0 => Some((*op, axes.as_slice())),
                    _ => None,
                };
                let want = match grouped {
                    Some(_) => REDUCE_COLUMNS,
                    None if seg.1 - seg.0 >= LONG_ROW && s.vs.passes == 0 => UNROLL_MAP_LONG,
                    None => UNROLL_MAP,
                };
                let unroll = [want, UNROLL_MAP, 1]
                    .into_iter()
                    .find(|&u| seg.1 - seg.0 >= (u * s.vs.lanes) as i64)
                    .unwrap_or(1);
                // The group's vectors, computed at slot 0 and handed out to the later slots.
                let mut pending: Vec<Option<Value>> = Vec::new();
                s.row(
                    prefix,
                    seg,
                    start,
                    end,
                    unroll,
                    // Not for grouped reductions: slot 0 computes the whole group's vectors.
                    grouped.is_none(),
                    &mut |s, idx| match grouped {
                        Some((op, axes)) if unroll > 1 => {
                            if pending.is_empty() {
                                let idxs: Vec<Vec<Value>> = (0..unroll)
                                    .map(|u| {
                                        let mut j = idx.to_vec();
                                        j[last] = s.b.ins().iadd_imm_s(idx[last], (u * s.vs.lanes) as i64);
                                        j
                                    })
                                    .collect();
                                pending = s.vreduce_group(op, axes, e.inputs[0], &idxs)?;
                                pending.reverse();
                            }
                            Ok(pending.pop().flatten())
                        }
                        _ => s.veqn(e, idx),
                    },
                    &mut |s, _, j, v| {
                        let off = s.offset(&dims, &with(j));
                        let addr = s.address(dt, out_base, off);
                        let flags = s.mem_at(out_base);
                        s.b.ins().store(flags, v, addr, 0);
                        Ok(())
                    },
                    &mut |s, j| {
                        let idx = with(j);
                        let v = s.eqn_value(e, &idx)?;
                        let off = s.offset(&dims, &idx);
                        s.store(dt, out_base, off, v);
                        Ok(())
                    },
                )?;
            }
            Ok(())
        };
        if last == 0 {
            return do_row(self, &[], Some((lo, hi)));
        }
        self.for_each_index_rows(&dims[..last], lo, hi, &mut |s, prefix| do_row(s, prefix, None))
    }

    /// A root reduction over the input's innermost axis (and maybe others): per output element,
    /// `UNROLL_REDUCE` vector accumulators over every reduced row, then one horizontal combine.
    /// Float sums and products restart the accumulators every [`pairwise::BLOCK`] elements of a row
    /// and combine the block results pairwise.
    fn reduce_root(
        &mut self,
        e: &'a Eqn,
        r: &ReduceRoot,
        segs: &[(i64, i64)],
        out_base: Value,
        lo: Value,
        hi: Value,
    ) -> R<()> {
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
        // Short reductions keep the plain accumulators (bitwise the interpreter's order when the
        // rows are shorter than a vector step).
        let total: usize = red_dims.iter().product::<usize>() * in_dims[last];
        let blocked = pairwise::blocked(op, dt) && total as i64 > pairwise::BLOCK;
        let vty = self.vty(dt);
        let lanes = self.vs.lanes;
        self.for_each_index_rows(&out_dims, lo, hi, &mut |s, oidx| {
            let accs: Vec<_> = (0..UNROLL_REDUCE).map(|_| s.b.declare_var(vty)).collect();
            let sacc = s.b.declare_var(clif_type(dt));
            let reset = |s: &mut Self| {
                let init = scalar::reduce_identity(s, op, dt);
                let vinit = s.b.ins().splat(vty, init);
                for &a in &accs {
                    s.b.def_var(a, vinit);
                }
                s.b.def_var(sacc, init);
            };
            // The accumulators folded into one vector (the scalar remainder in lane 0).
            let gather = |s: &mut Self| {
                let mut vs: Vec<Value> = accs.iter().map(|&a| s.b.use_var(a)).collect();
                while vs.len() > 1 {
                    let (x, y) = (vs.remove(0), vs.remove(0));
                    let c = s.vcombine(op, dt, x, y);
                    vs.push(c);
                }
                let init = scalar::reduce_identity(s, op, dt);
                let vinit = s.b.ins().splat(vty, init);
                let sv = s.b.use_var(sacc);
                let tail = s.b.ins().insertlane(vinit, sv, 0);
                s.vcombine(op, dt, vs[0], tail)
            };
            reset(s);
            let pw = blocked.then(|| pairwise::Pairwise::new(s, vty, op));
            s.for_each_index(&red_dims, &mut |s, ridx| {
                let prefix: Vec<Value> = (0..last)
                    .map(|d| match outer_reduced.iter().position(|&q| q == d) {
                        Some(k) => ridx[k],
                        None => oidx[kept.iter().position(|&q| q == d).expect("kept dim")],
                    })
                    .collect();
                let with = |j: Value| {
                    let mut idx = prefix.clone();
                    idx.push(j);
                    idx
                };
                let piece = |s: &mut Self, seg: (i64, i64), start: Value, end: Value| {
                    s.row(
                        &prefix,
                        seg,
                        start,
                        end,
                        UNROLL_REDUCE,
                        false,
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
                };
                for &seg in segs {
                    let (a, b) = (s.iconst(seg.0), s.iconst(seg.1));
                    match &pw {
                        None => piece(s, seg, a, b)?,
                        Some(pw) => s.for_step_by(a, b, pairwise::BLOCK, &mut |s, c| {
                            let ce = s.b.ins().iadd_imm_s(c, pairwise::BLOCK);
                            let ce = s.b.ins().smin(ce, b);
                            piece(s, seg, c, ce)?;
                            let v = gather(s);
                            pw.push(s, v)?;
                            reset(s);
                            Ok(())
                        })?,
                    }
                }
                Ok(())
            })?;
            let total = match &pw {
                None => {
                    // The unblocked order: accumulators left to right, then the remainder, then lanes.
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
                    acc
                }
                Some(pw) => {
                    let init = scalar::reduce_identity(s, op, dt);
                    let vinit = s.b.ins().splat(vty, init);
                    let v = pw.finish(s, vinit)?;
                    // Lanes combined pairwise too.
                    let mut xs: Vec<Value> = (0..lanes).map(|l| s.b.ins().extractlane(v, l as u8)).collect();
                    while xs.len() > 1 {
                        let (x, y) = (xs.remove(0), xs.remove(0));
                        let c = scalar::reduce_combine(s, op, dt, x, y);
                        xs.push(c);
                    }
                    xs[0]
                }
            };
            let off = s.offset(&out_dims, oidx);
            s.store(dt, out_base, off, total);
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::Jit;
    use super::{LONG_ROW, UNROLL_MAP, UNROLL_MAP_LONG};
    use kiln_ir::*;

    /// The Cranelift IR of the kernel rooted at the last equation of `f`, every other equation inlined.
    fn clif(f: &Function) -> String {
        let mut inline = vec![None; f.vars.len()];
        for (k, e) in f.eqns.iter().enumerate().take(f.eqns.len() - 1) {
            inline[e.outputs[0].index()] = Some(k);
        }
        let mut jit = Jit::new_with_dump(true).unwrap();
        jit.kernel(f, &[f.eqns.len() - 1], &inline, &|v| v).unwrap();
        let (_, _, text) = jit.finish().unwrap();
        assert_eq!(text.len(), 1);
        text.into_iter().next().unwrap()
    }

    /// A later member of a multi-output kernel that reads an earlier member's output (at its own
    /// row, see `grouping`) loads it in the output region, where the earlier member stored it: the
    /// read-only region would tell Cranelift those stores cannot change what it loads.
    #[test]
    fn a_member_reading_an_earlier_members_output_loads_it_from_the_output_region() {
        let mut f = Function::new();
        let ty = TensorType::new(DType::F32, Shape::new(&[64]));
        let x = f.add_param(ty.clone());
        let y = f.add_param(ty);
        let a = f.push(Prim::Binary(BinaryOp::Mul), &[x, x], None).unwrap()[0];
        let b = f.push(Prim::Binary(BinaryOp::Add), &[a, y], None).unwrap()[0];
        f.outputs.extend([a, b]);
        let mut jit = Jit::new_with_dump(true).unwrap();
        jit.kernel(&f, &[0, 1], &vec![None; f.vars.len()], &|v| v).unwrap();
        let (_, _, text) = jit.finish().unwrap();
        let loads =
            |region: &str| text[0].lines().filter(|l| l.contains("= load.f32") && l.contains(region)).count();
        // x (member 0) and y (member 1) are read-only; `a` is read back by member 1 (in each of
        // its loops: vector body and scalar tails).
        assert!(loads("region0") > 0 && loads("region1") > 0, "{}", text[0]);
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

    /// Rows of at least `LONG_ROW` elements without tiles take the ×4 main loop: two more copies
    /// of the body's vector load than a row just short of it; rows with a transcendental tile
    /// keep ×2 at any length.
    #[test]
    fn long_rows_unroll_four_times() {
        let loads =
            |n: usize, ops: &[Prim]| clif(&unary_chain(DType::F32, &[n], ops)).matches("load.f32x4").count();
        let (long, short) = (LONG_ROW as usize, LONG_ROW as usize - 4);
        let neg = [Prim::Unary(UnaryOp::Neg)];
        assert_eq!(loads(long, &neg), loads(short, &neg) + UNROLL_MAP_LONG - UNROLL_MAP);
        let with_tile = [Prim::Unary(UnaryOp::Exp), Prim::Unary(UnaryOp::Neg)];
        assert_eq!(loads(4 * long, &with_tile), loads(short, &with_tile));
    }

    /// A row-invariant factor (`(a - b)[:, None]` on rows of 10: a ×2 step, then one overlapping
    /// vector) is computed and splatted once in each row's header, and computed once more in the
    /// scalar loop of rows without a vector step, instead of in each of the four vector walks
    /// (the ×2 step's two, the overlap loop's and the last vector's).
    #[test]
    fn row_invariant_factors_are_computed_once_per_row() {
        let mut f = Function::new();
        let x = f.add_param(TensorType::new(DType::F32, Shape::new(&[3, 10])));
        let a = f.add_param(TensorType::new(DType::F32, Shape::new(&[3])));
        let b = f.add_param(TensorType::new(DType::F32, Shape::new(&[3])));
        let d = f.push(Prim::Binary(BinaryOp::Sub), &[a, b], None).unwrap()[0];
        let shape = Shape::new(&[3, 10]);
        let db =
            f.push(Prim::BroadcastInDim { shape, broadcast_dimensions: vec![0] }, &[d], None).unwrap()[0];
        let out = f.push(Prim::Binary(BinaryOp::Mul), &[x, db], None).unwrap()[0];
        f.outputs.push(out);
        let text = clif(&f);
        let ir = text.split("; machine code").next().unwrap();
        assert_eq!(ir.matches(" fsub").count(), 2, "{ir}");
        assert_eq!(ir.matches(" splat").count(), 1, "{ir}");
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
    fn bool_leaves_are_widened_to_masks_on_the_vector_path() {
        // select(mask, exp(x), x) with a bool[1000] leaf: f32x4 and f64x2 kernels, tiles kept.
        for (dt, ty, widen) in [(DType::F32, "f32x4", 2), (DType::F64, "f64x2", 3)] {
            let mut f = Function::new();
            let m = f.add_param(TensorType::new(DType::Bool, Shape::new(&[1000])));
            let x = f.add_param(TensorType::new(dt, Shape::new(&[1000])));
            let e = f.push(Prim::Unary(UnaryOp::Exp), &[x], None).unwrap()[0];
            let out = f.push(Prim::Select, &[m, e, x], None).unwrap()[0];
            f.outputs.push(out);
            let text = clif(&f);
            assert!(text.contains(ty) && text.contains("explicit_slot"), "{text}");
            // One body of the unrolled loop: `widen` widenings per loaded mask vector.
            assert!(text.matches("uwiden_low").count() >= widen * super::UNROLL_MAP, "{text}");
        }
    }

    #[test]
    fn innermost_reductions_keep_several_accumulators() {
        let f = unary_chain(DType::F32, &[8, 1000], &[Prim::Reduce { op: ReduceOp::Sum, axes: vec![1] }]);
        let text = clif(&f);
        assert!(text.matches("fadd").count() >= super::UNROLL_REDUCE, "{text}");
        assert!(text.contains("extractlane"), "{text}");
    }

    fn dot_kernel(lhs: &[usize], rhs: &[usize], lc: usize, rc: usize, fused_rhs: bool) -> Function {
        let mut f = Function::new();
        let a = f.add_param(TensorType::new(DType::F32, Shape::new(lhs)));
        let mut b = f.add_param(TensorType::new(DType::F32, Shape::new(rhs)));
        if fused_rhs {
            b = f.push(Prim::Unary(UnaryOp::Neg), &[b], None).unwrap()[0];
        }
        let dot = Prim::DotGeneral {
            lhs_contracting: vec![lc],
            rhs_contracting: vec![rc],
            lhs_batch: vec![],
            rhs_batch: vec![],
            preferred_element_type: None,
        };
        let d = f.push(dot, &[a, b], None).unwrap()[0];
        f.outputs.push(d);
        f
    }

    #[test]
    fn matrix_vector_dots_run_on_lanes() {
        // W4's `W·s` over a [B, 4] state: lanes along the rhs's rows, loaded lane by lane.
        let text = clif(&dot_kernel(&[4], &[64, 4], 0, 1, false));
        assert!(text.contains("insertlane") && text.contains("splat.f32x4"), "{text}");
        // Along the rhs's last axis: whole vectors, also through a fused producer.
        for fused in [false, true] {
            let text = clif(&dot_kernel(&[6], &[6, 64], 0, 0, fused));
            assert!(text.contains("load.f32x4"), "{text}");
        }
        // A fused operand read across its rows is not loaded lane by lane: scalar code.
        let text = clif(&dot_kernel(&[4], &[64, 4], 0, 1, true));
        assert!(!text.contains("f32x4"), "{text}");
    }

    #[test]
    fn outer_axis_reductions_accumulate_four_vectors_per_row() {
        // Sum over the 1000 rows of [1000, 64]: four accumulators, each with its row load and its
        // pairwise stack, where 4 columns (one vector) have one; 8 columns, two.
        let sum = |cols: usize| {
            let f =
                unary_chain(DType::F32, &[1000, cols], &[Prim::Reduce { op: ReduceOp::Sum, axes: vec![0] }]);
            clif(&f).matches("load.f32x4").count()
        };
        assert_eq!(sum(64), super::REDUCE_COLUMNS * sum(4));
        assert_eq!(sum(8), 2 * sum(4));
    }

    #[test]
    fn rolls_and_pads_on_the_last_axis_are_vectorized_by_segments() {
        // concatenate(slice(u, 999..), slice(u, ..999)) + pad(u, 1, -1): segments [0,1) and [1,1000).
        let mut f = Function::new();
        let u = f.add_param(TensorType::new(DType::F32, Shape::new(&[1000])));
        let z = f.add_param(TensorType::new(DType::F32, Shape::new(&[])));
        let s1 = Prim::Slice { start: vec![999], limit: vec![1000], strides: vec![1] };
        let a = f.push(s1, &[u], None).unwrap()[0];
        let s2 = Prim::Slice { start: vec![0], limit: vec![999], strides: vec![1] };
        let b = f.push(s2, &[u], None).unwrap()[0];
        let r = f.push(Prim::Concatenate { dimension: 0 }, &[a, b], None).unwrap()[0];
        let pad = Prim::Pad { low: vec![1], high: vec![-1], interior: vec![0] };
        let p = f.push(pad, &[u, z], None).unwrap()[0];
        let out = f.push(Prim::Binary(BinaryOp::Add), &[r, p], None).unwrap()[0];
        f.outputs.push(out);
        let text = clif(&f);
        assert!(text.contains("load.f32x4"), "{text}");
    }
}
