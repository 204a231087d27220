//! The static vectorizability check of the vector path (see [`super::vector`]): an exhaustive
//! per-primitive walk of the fused tree that unifies the lane width, numbers the transcendental
//! occurrences and assigns their modes, and collects the innermost-axis breakpoints of
//! concatenates and pads (segment specialization).

use crate::vmath::Func;
use kiln_ir::{DType, Eqn, Function, Prim, UnaryOp, Var};

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

/// For a `dot_general`: the operand (0 lhs, 1 rhs) and its free axis that the output's innermost
/// axis comes from (output axes are batch, lhs free, rhs free). `None` when it is a batch axis (both
/// operands vary along it) or the output is rank 0.
pub(super) fn dot_lanes(f: &Function, e: &Eqn) -> Option<(usize, usize)> {
    let Prim::DotGeneral { lhs_contracting, rhs_contracting, lhs_batch, rhs_batch, .. } = &e.prim else {
        return None;
    };
    let last_free = |v: Var, c: &[usize], b: &[usize]| {
        (0..f.var_type(v).rank()).filter(|d| !c.contains(d) && !b.contains(d)).next_back()
    };
    match last_free(e.inputs[1], rhs_contracting, rhs_batch) {
        Some(d) => Some((1, d)),
        None => last_free(e.inputs[0], lhs_contracting, lhs_batch).map(|d| (0, d)),
    }
}

/// How one transcendental occurrence (a visit of the walk, in pre-order) is computed on vectors.
#[derive(Clone, Copy, Debug)]
pub(super) enum Mode {
    /// Through a tile buffer; its argument is computed in pass `pass` (1-based).
    Tiled { pass: usize },
    /// Spill the vector to the stack and call the tile function on its `L` lanes.
    Spill,
}

#[derive(Clone, Copy, Debug)]
pub(super) struct Occ {
    pub(super) mode: Mode,
    /// Occurrences inside its argument (skipped when the walk reads the buffer instead).
    pub(super) inner: usize,
    pub(super) func: Func,
    pub(super) dt: DType,
}

/// The static vectorizability check: walks the fused tree in the emitter's order, assigning
/// transcendental occurrences their mode, unifying the lane width, and collecting breakpoints.
///
/// **Segments.** A lane-varying node's innermost index is the root's innermost index `i` plus a
/// static `shift` (slices add their start, concatenate parts and pads subtract their offset). A
/// concatenate along the innermost axis switches operand, and a pad along it switches between
/// operand and pad value, at static values of `i`: the breakpoints. Between two breakpoints every
/// such node resolves to one operand, so the walk emits each segment's loop with that operand only.
pub(super) struct Checker<'a> {
    pub(super) f: &'a Function,
    pub(super) inline: &'a [Option<usize>],
    pub(super) width: Option<usize>,
    pub(super) occs: Vec<Occ>,
    /// Depth of lane-varying reductions enclosing the current node.
    pub(super) in_reduce: usize,
    /// Innermost-index offset of the current node relative to the root's.
    pub(super) shift: i64,
    /// Root innermost indices where a concatenate or pad switches (unsorted, may repeat).
    pub(super) breaks: Vec<i64>,
}

impl<'a> Checker<'a> {
    pub(super) fn new(f: &'a Function, inline: &'a [Option<usize>]) -> Checker<'a> {
        Checker { f, inline, width: None, occs: Vec::new(), in_reduce: 0, shift: 0, breaks: Vec::new() }
    }

    /// [`Checker::var`] with the innermost index shifted by `by` (restored after).
    fn shifted(&mut self, v: Var, by: i64) -> Option<usize> {
        self.shift += by;
        let r = self.var(v);
        self.shift -= by;
        r
    }

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
    pub(super) fn var(&mut self, v: Var) -> Option<usize> {
        match self.inline[v.index()] {
            Some(p) => self.eqn(&self.f.eqns[p]),
            None if self.f.var_type(v).rank() == 0 => None,
            // A bool leaf's bytes are widened to the kernel's lanes (`bool_lanes`): no width of its own.
            None if self.f.dtype(v) == DType::Bool => Some(0),
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

    pub(super) fn eqn(&mut self, e: &Eqn) -> Option<usize> {
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
            Prim::Slice { strides, start, .. } => match strides.last() {
                Some(&1) => self.shifted(ins[0], *start.last().expect("rank ≥ 1") as i64),
                // A strided slice of a leaf: lanes loaded one by one (`strided_leaf`).
                Some(_) if self.inline[ins[0].index()].is_none() && in_dt(0) != DType::Bool => {
                    self.unify(in_dt(0))?;
                    Some(0)
                }
                _ => None,
            },
            Prim::Concatenate { dimension } => {
                let last = rank(e.outputs[0]) - 1;
                let mut off = 0i64;
                let mut pass = 0;
                for &v in ins {
                    let n = f.var_type(v).shape[*dimension] as i64;
                    if *dimension == last {
                        self.breaks.push(off - self.shift);
                        pass = pass.max(self.shifted(v, -off)?);
                    } else {
                        pass = pass.max(self.var(v)?);
                    }
                    off += n;
                }
                Some(pass)
            }
            Prim::Pad { low, interior, .. } => {
                let last = low.len().checked_sub(1)?;
                let n = dims(ins[0])[last] as i64;
                if interior[last] != 0 || in_dt(0) == DType::Bool {
                    return None;
                }
                self.breaks.push(low[last] - self.shift);
                self.breaks.push(low[last] + n - self.shift);
                let p = self.shifted(ins[0], -low[last])?;
                Some(p.max(self.maybe(ins[1], false)?))
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
            // A product whose output lanes run along a free axis of one operand (`dot_lanes`); the
            // other operand is lane-invariant. Along that operand's innermost axis it may be any
            // tree without transcendentals (its body is emitted once per contracting index);
            // along another axis it must be a leaf, loaded lane by lane (`strided_leaf`).
            Prim::DotGeneral { .. } => {
                let (slot, axis) = dot_lanes(f, e)?;
                if in_dt(0) != out_dt || !out_dt.is_float() {
                    return None;
                }
                let v = ins[slot];
                if axis + 1 == rank(v) {
                    let before = self.occs.len();
                    self.var(v)?;
                    (self.occs.len() == before).then_some(0)
                } else {
                    self.inline[v.index()].is_none().then_some(0)
                }
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
            | Prim::Checkpoint { .. } => None,
        }
    }
}
