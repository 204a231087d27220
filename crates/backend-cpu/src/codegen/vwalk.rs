//! The vector walk: the per-primitive vector table (`veqn`, mirroring [`super::check::Checker`]),
//! lane-varying loads, reductions over non-innermost axes, and transcendental tiles and spills.

use super::check::{Mode, Occ, tile_func};
use super::kernel::{Emitter, R, mem};
use super::vector::Hoist;
use super::{pairwise, scalar};
use crate::CompileError;
use crate::vmath::Func;
use cranelift_codegen::ir::{
    AbiParam, InstBuilder, StackSlotData, StackSlotKind, Value, condcodes::IntCC, types,
};
use cranelift_module::{Linkage, Module};
use kiln_ir::{DType, Eqn, Prim, ReduceOp, Var};

impl<'a, 'b> Emitter<'a, 'b> {
    // ---- the vector walk --------------------------------------------------------------------------

    /// The vector of `v` at lanes `idx .. idx + L` (innermost index): computed, or one load.
    /// `None` when the current pass does not need it (see the module docs).
    pub(super) fn vvalue(&mut self, v: Var, idx: &[Value]) -> R<Option<Value>> {
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
        let recording = self.recording();
        match self.inline[v.index()] {
            // The header's walk emits no lane-varying value (see [`Hoist`]).
            Some(p) => self.veqn(&f.eqns[p], idx).map(|x| x.filter(|_| !recording)),
            None if recording => Ok(None),
            None => {
                let dt = f.dtype(v);
                let dims = f.var_type(v).shape.dims().to_vec();
                let off = self.offset(&dims, idx);
                let base = self.bases[&v];
                let addr = self.address(dt, base, off);
                let ty = self.vty(dt);
                let flags = self.mem_at(base);
                if dt == DType::Bool {
                    return Ok(Some(self.bool_lanes(flags, addr)));
                }
                Ok(Some(self.b.ins().load(ty, flags, addr, 0)))
            }
        }
    }

    /// The `L` bytes (0 or 1) of a bool leaf at `addr` as a lane-width mask: one integer load of
    /// all of them, placed in the low bytes of a vector and zero-extended lane by lane to the
    /// kernel's width (`uwiden_low` twice for 4 lanes, three times for 2), then negated (1 → all
    /// ones). Kernels reading a bool residual (W2's backward step reads the forward pass's ground
    /// contact mask) then keep the vector path and its transcendental tiles.
    fn bool_lanes(&mut self, flags: cranelift_codegen::ir::MemFlagsData, addr: Value) -> Value {
        let (int, vec, widen) = match self.lanes() {
            4 => (types::I32, types::I32X4, 2),
            _ => (types::I16, types::I16X8, 3),
        };
        let x = self.b.ins().load(int, flags, addr, 0);
        let v = self.b.ins().scalar_to_vector(vec, x);
        let mut v = self.b.ins().bitcast(types::I8X16, super::vops::bits(), v);
        for _ in 0..widen {
            v = self.b.ins().uwiden_low(v);
        }
        self.b.ins().ineg(v)
    }

    /// Lanes `idx, idx + stride, ...` (along the innermost axis) of the leaf `v`: a strided slice of
    /// a materialized buffer (quaternion components `q[..., k:k+1]` once collapsed), loaded lane by
    /// lane (the check admits strided slices of leaves only).
    fn strided_leaf(&mut self, v: Var, idx: &[Value], stride: i64) -> R<Option<Value>> {
        if self.vs.pass <= self.vs.passes && !self.vs.needed || self.recording() {
            return Ok(None);
        }
        let f = self.f;
        let dt = f.dtype(v);
        let dims = f.var_type(v).shape.dims().to_vec();
        let off = self.offset(&dims, idx);
        let base = self.bases[&v];
        let addr = self.address(dt, base, off);
        let step = stride * dt.size_bytes() as i64;
        let lane_ty = super::kernel::clif_type(dt);
        let flags = self.mem_at(base);
        let x = self.b.ins().load(lane_ty, flags, addr, 0);
        let ty = self.vty(dt);
        let mut vec = self.b.ins().splat(ty, x);
        for l in 1..self.vs.lanes {
            // The load's immediate offset is an i32; a larger lane offset goes into the address.
            let x = match i32::try_from(l as i64 * step) {
                Ok(at) => self.b.ins().load(lane_ty, flags, addr, at),
                Err(_) => {
                    let lane_addr = self.b.ins().iadd_imm_s(addr, l as i64 * step);
                    self.b.ins().load(lane_ty, flags, lane_addr, 0)
                }
            };
            vec = self.b.ins().insertlane(vec, x, l as u8);
        }
        Ok(Some(vec))
    }

    /// (last tiled pass, occurrence count) of `v`'s tree, as the checker sees it outside reductions.
    fn summary(&mut self, v: Var) -> (usize, usize) {
        if let Some(&r) = self.vs.summary.get(&v) {
            return r;
        }
        let mut ck = super::check::Checker::new(self.f, self.inline);
        let r = (ck.var(v).unwrap_or(0), ck.occs.len());
        self.vs.summary.insert(v, r);
        r
    }

    /// The lane-invariant value of `v` at `idx` (scalar path), splatted; in a row's loop, the one
    /// its header computed ([`Hoist`]).
    fn splat_value(&mut self, v: Var, idx: &[Value]) -> R<Value> {
        if let Hoist::Replay { vals, next } = &mut self.vs.hoist {
            let x = vals.get(*next).copied().ok_or_else(|| {
                CompileError::Codegen(
                    "hoist: a loop walk reached more lane-invariant values than its header".into(),
                )
            })?;
            *next += 1;
            return Ok(x);
        }
        let x = self.value(v, idx)?;
        let x = self.splat(self.f.dtype(v), x);
        if let Hoist::Record(vals) = &mut self.vs.hoist {
            vals.push(x);
        }
        Ok(x)
    }

    /// Runs `body` (a reduction's or dot's loop) with hoisting off: its splats depend on the loop
    /// index. The header's walk skips such loops (`None`, see [`Emitter::veqn`]).
    fn unhoisted<T>(&mut self, body: impl FnOnce(&mut Self) -> R<T>) -> R<T> {
        let saved = std::mem::take(&mut self.vs.hoist);
        let r = body(self);
        self.vs.hoist = saved;
        r
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
    pub(super) fn veqn(&mut self, e: &'a Eqn, idx: &[Value]) -> R<Option<Value>> {
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
                let mut j = self.reshape_index(in_prefix, &out_dims[..last], &idx[..last]);
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
                if strides[last] != 1 {
                    return self.strided_leaf(ins[0], &j, strides[last] as i64);
                }
                return self.vshifted(ins[0], &j, start[last] as i64);
            }
            Prim::Concatenate { dimension } => return self.vconcatenate(e, *dimension, idx),
            Prim::Pad { low, interior, .. } => return self.vpad(e, low, interior, idx),
            Prim::StopGradient => return self.vvalue(ins[0], idx),
            // Loops over reduced or contracting indices: skipped by a row header's walk, run with
            // hoisting off by the loop's walks (their splats depend on the loop index; [`Hoist`]).
            Prim::Reduce { .. } | Prim::DotGeneral { .. } if self.recording() => return Ok(None),
            Prim::Reduce { op, axes } => return self.unhoisted(|s| s.vreduce(*op, axes, ins[0], idx)),
            Prim::DotGeneral { lhs_contracting, rhs_contracting, lhs_batch, rhs_batch, .. } => {
                let (c, b) = ((&lhs_contracting[..], &rhs_contracting[..]), (&lhs_batch[..], &rhs_batch[..]));
                return self.unhoisted(|s| s.vdot(e, c, b, idx));
            }
            Prim::Rev { .. }
            | Prim::DynamicSlice { .. }
            | Prim::DynamicUpdateSlice
            | Prim::ArgReduce { .. }
            | Prim::Cumulative { .. }
            | Prim::Gather { .. }
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
                return Err(CompileError::Codegen(format!(
                    "{} reached the vector path (vectorizability check bug)",
                    e.prim.name()
                )));
            }
        }))
    }

    /// [`Emitter::vvalue`] of an operand whose innermost index is the node's plus `by`.
    fn vshifted(&mut self, v: Var, idx: &[Value], by: i64) -> R<Option<Value>> {
        self.vs.shift += by;
        let r = self.vvalue(v, idx);
        self.vs.shift -= by;
        r
    }

    /// Skips the transcendental occurrences of `v`'s tree (an operand the segment does not read).
    fn skip(&mut self, v: Var) {
        if self.inline[v.index()].is_some() {
            self.vs.next += self.summary(v).1;
        }
    }

    /// A concatenate: along the innermost axis the segment reads one operand (see
    /// [`super::check::Checker`]); along another axis each operand is read at its clamped index and
    /// the one whose range holds the (lane-invariant) index is selected, as on the scalar path.
    fn vconcatenate(&mut self, e: &'a Eqn, dim: usize, idx: &[Value]) -> R<Option<Value>> {
        let f = self.f;
        let last = idx.len() - 1;
        let mut parts = Vec::new();
        let mut off = 0i64;
        for &v in &e.inputs {
            let n = f.var_type(v).shape[dim] as i64;
            parts.push((v, off, n));
            off += n;
        }
        if dim == last {
            let (a, b) = (self.vs.seg.0 + self.vs.shift, self.vs.seg.1 + self.vs.shift);
            let Some(k) = parts.iter().position(|&(_, o, n)| n > 0 && o <= a && b <= o + n) else {
                return Err(CompileError::Codegen(format!(
                    "concatenate: segment [{a}, {b}) spans operands (segment breakpoint bug)"
                )));
            };
            let mut result = None;
            for (i, &(v, o, _)) in parts.iter().enumerate() {
                if i == k {
                    let mut j = idx.to_vec();
                    j[dim] = self.b.ins().iadd_imm_s(idx[dim], -o);
                    result = self.vshifted(v, &j, -o)?;
                } else {
                    self.skip(v);
                }
            }
            return Ok(result);
        }
        // Operands walked first to last (the checker's occurrence order), selected last to first.
        let mut xs = Vec::new();
        for &(v, o, n) in &parts {
            if n == 0 {
                continue;
            }
            let mut j = idx.to_vec();
            let rel = self.b.ins().iadd_imm_s(idx[dim], -o);
            let (l, h) = (self.iconst(0), self.iconst(n - 1));
            let rel = self.b.ins().smax(rel, l);
            j[dim] = self.b.ins().smin(rel, h);
            xs.push((self.vvalue(v, &j)?, o + n));
        }
        let mut result: Option<Option<Value>> = None;
        for (x, end) in xs.into_iter().rev() {
            result = Some(match (result, x) {
                (None, x) => x,
                (Some(Some(later)), Some(x)) => {
                    let here = self.b.ins().icmp_imm_s(IntCC::SignedLessThan, idx[dim], end);
                    Some(self.b.ins().select(here, x, later))
                }
                (Some(_), _) => None,
            });
        }
        result.ok_or_else(|| CompileError::Codegen("concatenate of empty operands reached a kernel".into()))
    }

    /// A pad: along the innermost axis the segment is all operand or all padding; along other axes
    /// (lane-invariant indices, interior padding allowed) the operand is read at the clamped index
    /// and the pad value selected where the index is off the operand's grid.
    fn vpad(&mut self, e: &'a Eqn, low: &[i64], interior: &[usize], idx: &[Value]) -> R<Option<Value>> {
        let f = self.f;
        let (x, p) = (e.inputs[0], e.inputs[1]);
        let last = idx.len() - 1;
        let in_dims = f.var_type(x).shape.dims().to_vec();
        let dt = f.dtype(x);
        let (a, b) = (self.vs.seg.0 + self.vs.shift, self.vs.seg.1 + self.vs.shift);
        let n = in_dims[last] as i64;
        let inside = low[last] <= a && b <= low[last] + n;
        if !inside || in_dims.contains(&0) {
            if !(b <= low[last] || a >= low[last] + n || in_dims.contains(&0)) {
                return Err(CompileError::Codegen(format!(
                    "pad: segment [{a}, {b}) spans operand and padding (segment breakpoint bug)"
                )));
            }
            self.skip(x);
            let pv = self.value(p, &[])?;
            return Ok(Some(self.splat(dt, pv)));
        }
        let mut valid = self.b.ins().iconst(types::I8, 1);
        let mut j = idx.to_vec();
        for d in 0..last {
            let t = self.b.ins().iadd_imm_s(idx[d], -low[d]);
            let step = interior[d] as i64 + 1;
            let q = if step == 1 {
                t
            } else {
                let q = self.b.ins().sdiv_imm_s(t, step);
                let back = self.b.ins().imul_imm_s(q, step);
                let on_grid = self.b.ins().icmp(IntCC::Equal, back, t);
                valid = self.b.ins().band(valid, on_grid);
                q
            };
            let ge = self.b.ins().icmp_imm_s(IntCC::SignedGreaterThanOrEqual, t, 0);
            let lt = self.b.ins().icmp_imm_s(IntCC::SignedLessThan, q, in_dims[d] as i64);
            let both = self.b.ins().band(ge, lt);
            valid = self.b.ins().band(valid, both);
            let (l, h) = (self.iconst(0), self.iconst(in_dims[d] as i64 - 1));
            let q = self.b.ins().smax(q, l);
            j[d] = self.b.ins().smin(q, h);
        }
        j[last] = self.b.ins().iadd_imm_s(idx[last], -low[last]);
        let Some(v) = self.vshifted(x, &j, -low[last])? else { return Ok(None) };
        if last == 0 {
            return Ok(Some(v));
        }
        let pv = self.value(p, &[])?;
        let pv = self.splat(dt, pv);
        Ok(Some(self.b.ins().select(valid, v, pv)))
    }

    /// A `dot_general` whose lanes run along a free axis of one operand (`check::dot_lanes`): per
    /// contracting index, in row-major order, `acc + l·r` from `0`, with that operand's lanes loaded
    /// (strided when the axis is not its innermost: W4's `W·s` over a `[B, 4]` state) and the
    /// other operand's scalar splatted — the scalar path's fold (`small_dot`) in every lane, so
    /// bitwise equal.
    fn vdot(
        &mut self,
        e: &'a Eqn,
        (lc, rc): (&[usize], &[usize]),
        (lb, rb): (&[usize], &[usize]),
        idx: &[Value],
    ) -> R<Option<Value>> {
        if self.vs.pass <= self.vs.passes && !self.vs.needed {
            return Ok(None);
        }
        let f = self.f;
        let (slot, axis) = super::check::dot_lanes(f, e).ok_or_else(|| {
            CompileError::Codegen("a dot_general without lanes reached the vector path".into())
        })?;
        let (l, r) = (e.inputs[0], e.inputs[1]);
        let (lt, rt) = (f.var_type(l).clone(), f.var_type(r).clone());
        let dt = lt.dtype;
        let (li, ri) = self.dot_operand_indices((lt.rank(), rt.rank()), (lc, rc), (lb, rb), idx);
        let dims = [lt.shape.dims(), rt.shape.dims()][slot];
        let stride = dims[axis + 1..].iter().product::<usize>() as i64;
        let vty = self.vty(dt);
        let acc = self.b.declare_var(vty);
        let init = scalar::reduce_identity(self, ReduceOp::Sum, dt);
        let vinit = self.b.ins().splat(vty, init);
        self.b.def_var(acc, vinit);
        let c_dims: Vec<usize> = lc.iter().map(|&d| lt.shape[d]).collect();
        let mut missing = false;
        self.for_each_index_unrolled(&c_dims, &mut |s, cidx| {
            let (mut li, mut ri) = (li.clone(), ri.clone());
            for (p, (&a, &b)) in lc.iter().zip(rc).enumerate() {
                (li[a], ri[b]) = (cidx[p], cidx[p]);
            }
            let (vi, oi) = if slot == 0 { (&li, &ri) } else { (&ri, &li) };
            let (v, other) = if slot == 0 { (l, r) } else { (r, l) };
            let lanes = if stride == 1 { s.vvalue(v, vi)? } else { s.strided_leaf(v, vi, stride)? };
            let Some(lanes) = lanes else {
                missing = true;
                return Ok(());
            };
            let y = s.splat_value(other, oi)?;
            let (x, y) = if slot == 0 { (lanes, y) } else { (y, lanes) };
            let p = s.vbinary(kiln_ir::BinaryOp::Mul, dt, x, y)?;
            let a = s.b.use_var(acc);
            let sum = s.vbinary(kiln_ir::BinaryOp::Add, dt, a, p)?;
            s.b.def_var(acc, sum);
            Ok(())
        })?;
        Ok(if missing { None } else { Some(self.b.use_var(acc)) })
    }

    /// A lane-varying reduction over non-innermost axes: one accumulator per lane, in the
    /// interpreter's order.
    fn vreduce(&mut self, op: ReduceOp, axes: &[usize], x: Var, idx: &[Value]) -> R<Option<Value>> {
        Ok(self.vreduce_group(op, axes, x, &[idx.to_vec()])?.pop().flatten())
    }

    /// [`Emitter::vreduce`] at several lane groups `idxs` (output indices, one vector each) in one
    /// loop nest, each with its own accumulators: every lane folds in the same order as alone, so
    /// the results are bitwise the same. A root sum over axis 0 of `[T, B]` rewards then reads
    /// a cache line of each row per pass instead of one vector, in independent add chains.
    pub(super) fn vreduce_group(
        &mut self,
        op: ReduceOp,
        axes: &[usize],
        x: Var,
        idxs: &[Vec<Value>],
    ) -> R<Vec<Option<Value>>> {
        let f = self.f;
        let in_dims = f.var_type(x).shape.dims().to_vec();
        let dt = f.dtype(x);
        let mut reduced = axes.to_vec();
        reduced.sort_unstable();
        let kept: Vec<usize> = (0..in_dims.len()).filter(|d| !axes.contains(d)).collect();
        let red_dims: Vec<usize> = reduced.iter().map(|&d| in_dims[d]).collect();
        let vty = self.vty(dt);
        let accs: Vec<_> = idxs.iter().map(|_| self.b.declare_var(vty)).collect();
        let init = scalar::reduce_identity(self, op, dt);
        let vinit = self.b.ins().splat(vty, init);
        for &acc in &accs {
            self.b.def_var(acc, vinit);
        }
        let mut missing = false;
        let full = |idx: &[Value], ridx: &[Value]| -> Vec<Value> {
            (0..in_dims.len())
                .map(|d| match reduced.iter().position(|&r| r == d) {
                    Some(k) => ridx[k],
                    None => idx[kept.iter().position(|&q| q == d).expect("kept dim")],
                })
                .collect()
        };
        let mut step = |s: &mut Self, ridx: &[Value]| -> R<()> {
            // Each group member walks the same occurrences (spill calls) of `x`'s tree.
            let first = s.vs.next;
            for (idx, &acc) in idxs.iter().zip(&accs) {
                s.vs.next = first;
                match s.vvalue(x, &full(idx, ridx))? {
                    Some(v) => {
                        let a = s.b.use_var(acc);
                        let c = s.vcombine(op, dt, a, v);
                        s.b.def_var(acc, c);
                    }
                    None => missing = true,
                }
            }
            Ok(())
        };
        let total: usize = red_dims.iter().product();
        if !(pairwise::blocked(op, dt) && total as i64 > pairwise::BLOCK) {
            // The body is emitted once (and runs zero times where a reduced extent is 0).
            self.for_each_index(&red_dims, &mut |s, ridx| step(s, ridx))?;
            return Ok(accs.iter().map(|&acc| (!missing).then(|| self.b.use_var(acc))).collect());
        }
        // Long float sums/products: per lane, blocks of the innermost reduced axis, combined pairwise.
        let pws: Vec<_> = accs.iter().map(|_| pairwise::Pairwise::new(self, vty, op)).collect();
        let (outer, m) = (&red_dims[..red_dims.len() - 1], red_dims[red_dims.len() - 1] as i64);
        self.for_each_index(outer, &mut |s, oidx| {
            let (start, end) = (s.iconst(0), s.iconst(m));
            s.for_step_by(start, end, pairwise::BLOCK, &mut |s, c| {
                let bend = s.b.ins().iadd_imm_s(c, pairwise::BLOCK);
                let bend = s.b.ins().smin(bend, end);
                let init = scalar::reduce_identity(s, op, dt);
                let vinit = s.b.ins().splat(vty, init);
                for &acc in &accs {
                    s.b.def_var(acc, vinit);
                }
                s.for_range_from(c, bend, &mut |s, j| {
                    let mut ridx = oidx.to_vec();
                    ridx.push(j);
                    step(s, &ridx)
                })?;
                for (pw, &acc) in pws.iter().zip(&accs) {
                    let a = s.b.use_var(acc);
                    pw.push(s, a)?;
                }
                Ok(())
            })
        })?;
        if missing {
            return Ok(vec![None; idxs.len()]);
        }
        pws.iter().map(|pw| pw.finish(self, vinit).map(Some)).collect()
    }

    /// A transcendental occurrence (see the module docs for the passes).
    fn transcendental(&mut self, func: Func, dt: DType, arg: Var, idx: &[Value]) -> R<Option<Value>> {
        let k = self.vs.next;
        self.vs.next += 1;
        let occ = self.vs.occs[k];
        let width = self.vs.width as i64;
        match occ.mode {
            Mode::Spill => {
                let x = self.vvalue(arg, idx)?;
                // The header's walk only records the argument's splats.
                let Some(x) = x.filter(|_| !self.recording()) else {
                    return Ok(None);
                };
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
    pub(super) fn tile_call(&mut self, k: usize, addr: Value, n: Value) -> R<()> {
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
