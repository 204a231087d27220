//! Lowering a [`Function`] to steps over buffers: fusion decides the kernels, each kernel or runtime
//! step gets its operands' locations, and intermediate buffers are placed in one arena by liveness
//! (first fit over freed blocks), so buffers whose lifetimes do not overlap share memory.

use crate::CompileError;
use crate::codegen::Jit;
use crate::fusion::{self, Role};
use crate::runtime::indexing::{ScatterPlan, SegmentSumPlan};
use crate::runtime::sort::SortPlan;
use crate::runtime::{Aligned, Executable, Loc, Op, Step, control::Control, dot::DotPlan};
use kiln_ir::{Array, Function, Prim, TensorType, Var};
use std::sync::Mutex;

/// Every arena block starts on a 64-byte boundary (cache line).
const ALIGN: usize = 64;

/// First-fit allocator over arena offsets.
#[derive(Default)]
struct Arena {
    free: Vec<(usize, usize)>,
    top: usize,
}

impl Arena {
    fn alloc(&mut self, bytes: usize) -> usize {
        let bytes = bytes.max(1).next_multiple_of(ALIGN);
        if let Some(k) = self.free.iter().position(|&(_, s)| s >= bytes) {
            let (off, size) = self.free[k];
            if size == bytes {
                self.free.remove(k);
            } else {
                self.free[k] = (off + bytes, size - bytes);
            }
            return off;
        }
        self.top += bytes;
        self.top - bytes
    }

    fn release(&mut self, off: usize, bytes: usize) {
        self.free.push((off, bytes.max(1).next_multiple_of(ALIGN)));
    }
}

/// A step before buffer assignment: what it reads and writes, by variable.
struct Draft {
    op: Op,
    inputs: Vec<Var>,
    outputs: Vec<Var>,
    scratch_bytes: usize,
}

fn bytes(t: &TensorType) -> usize {
    t.shape.size() * t.dtype.size_bytes()
}

/// The runtime lowering of a non-kernel primitive.
fn runtime_op(f: &Function, prim: &Prim, ins: &[Var], outs: &[Var]) -> Result<(Op, usize), CompileError> {
    let ty = |v: &Var| f.var_type(*v).clone();
    let in_types: Vec<TensorType> = ins.iter().map(ty).collect();
    let out_types: Vec<TensorType> = outs.iter().map(ty).collect();
    match prim {
        Prim::DotGeneral {
            lhs_contracting,
            rhs_contracting,
            lhs_batch,
            rhs_batch,
            preferred_element_type,
        } => {
            let d = DotPlan::new(
                &in_types[0],
                &in_types[1],
                (lhs_contracting, rhs_contracting),
                (lhs_batch, rhs_batch),
                *preferred_element_type,
            )?;
            let s = d.scratch_bytes();
            Ok((Op::Dot(d), s))
        }
        Prim::Threefry2x32 => Ok((Op::Threefry(out_types[0].shape.size()), 0)),
        Prim::Scan { .. }
        | Prim::WhileLoop { .. }
        | Prim::Cond { .. }
        | Prim::Call { .. }
        | Prim::Checkpoint { .. }
        | Prim::CustomJvpCall { .. }
        | Prim::CustomVjpCall { .. } => {
            let c = Control::new(prim, &in_types, &out_types)?;
            let s = c.scratch_bytes();
            Ok((Op::Control(Box::new(c)), s))
        }
        Prim::Sort { dimension, num_keys } => {
            Ok((Op::Sort(SortPlan::new(*dimension, *num_keys, &in_types)?), 0))
        }
        Prim::Scatter { op, axis, batch_dims, mode } => {
            Ok((Op::Scatter(ScatterPlan::new(*op, *axis, *batch_dims, *mode, &in_types)?), 0))
        }
        Prim::SegmentSum { num_segments } => {
            Ok((Op::SegmentSum(SegmentSumPlan::new(*num_segments, &in_types)?), 0))
        }
        Prim::Unary(_)
        | Prim::Binary(_)
        | Prim::Compare(_)
        | Prim::Select
        | Prim::Clamp
        | Prim::ConvertElementType { .. }
        | Prim::BitcastConvertType { .. }
        | Prim::Iota { .. }
        | Prim::BroadcastInDim { .. }
        | Prim::Reshape { .. }
        | Prim::Transpose { .. }
        | Prim::Rev { .. }
        | Prim::Slice { .. }
        | Prim::DynamicSlice { .. }
        | Prim::DynamicUpdateSlice
        | Prim::Concatenate { .. }
        | Prim::Pad { .. }
        | Prim::Reduce { .. }
        | Prim::ArgReduce { .. }
        | Prim::Cumulative { .. }
        | Prim::Gather { .. }
        | Prim::StopGradient => Err(CompileError::Codegen(format!("{} is a kernel primitive", prim.name()))),
    }
}

/// Constant data as row-major bytes (bool as 0/1).
fn const_bytes(a: &Array) -> Aligned {
    let std = kiln_ir::with_array!(a, x => {
        let x = x.as_standard_layout();
        let n = x.len() * std::mem::size_of_val(x.first().unwrap_or(&Default::default()));
        // SAFETY: a row-major array's elements are `n` contiguous initialized bytes.
        Aligned::from_bytes(unsafe { std::slice::from_raw_parts(x.as_ptr().cast::<u8>(), n) })
    });
    std
}

/// Compiles `f` (verified) to native code.
///
/// # Errors
/// [`CompileError::Unsupported`] for primitives without a lowering yet; never a wrong result.
pub fn compile(f: &Function) -> Result<Executable, CompileError> {
    let roles = fusion::assign(f);
    let mut inline = vec![None; f.vars.len()];
    for (i, e) in f.eqns.iter().enumerate() {
        if roles[i] == Role::Inline {
            inline[e.outputs[0].index()] = Some(i);
        }
    }
    // 1. Steps, by variable.
    let mut jit = Jit::new()?;
    let mut drafts = Vec::new();
    for (i, e) in f.eqns.iter().enumerate() {
        match roles[i] {
            Role::Inline => {}
            Role::Kernel => {
                let (handle, leaves) = jit.kernel(f, i, &inline)?;
                let rows = f.var_type(e.outputs[0]).shape.dims().first().map_or(1, |&n| n as i64);
                drafts.push(Draft {
                    op: Op::Kernel { kernel: handle, rows },
                    inputs: leaves,
                    outputs: e.outputs.to_vec(),
                    scratch_bytes: 0,
                });
            }
            Role::Runtime => {
                let (op, scratch_bytes) = runtime_op(f, &e.prim, &e.inputs, &e.outputs)?;
                drafts.push(Draft {
                    op,
                    inputs: e.inputs.to_vec(),
                    outputs: e.outputs.to_vec(),
                    scratch_bytes,
                });
            }
        }
    }
    // 2. Liveness: the last step reading each variable; outputs live to the end.
    let mut last_use = vec![None; f.vars.len()];
    for (s, d) in drafts.iter().enumerate() {
        for v in &d.inputs {
            last_use[v.index()] = Some(s);
        }
    }
    let mut pinned = vec![false; f.vars.len()];
    for v in &f.outputs {
        pinned[v.index()] = true;
    }
    // 3. Locations: parameters and constants in place, the rest in the arena.
    let mut loc: Vec<Option<Loc>> = vec![None; f.vars.len()];
    for (i, p) in f.params.iter().enumerate() {
        loc[p.index()] = Some(Loc::Param(i));
    }
    let consts: Vec<Aligned> = f.consts.iter().map(|c| const_bytes(&c.value)).collect();
    for (i, c) in f.consts.iter().enumerate() {
        loc[c.var.index()] = Some(Loc::Const(i));
    }
    let mut arena = Arena::default();
    let mut steps = Vec::with_capacity(drafts.len());
    for (s, d) in drafts.into_iter().enumerate() {
        // Outputs are placed before inputs are freed: a step never writes over what it reads.
        for v in &d.outputs {
            loc[v.index()] = Some(Loc::Arena(arena.alloc(bytes(f.var_type(*v)))));
        }
        let scratch = arena.alloc(d.scratch_bytes);
        arena.release(scratch, d.scratch_bytes);
        let at =
            |v: &Var| loc[v.index()].ok_or_else(|| CompileError::Codegen(format!("{v:?} has no buffer")));
        let inputs = d.inputs.iter().map(at).collect::<Result<Vec<_>, _>>()?;
        let outputs = d.outputs.iter().map(at).collect::<Result<Vec<_>, _>>()?;
        let dead = d
            .inputs
            .iter()
            .filter(|v| last_use[v.index()] == Some(s))
            .chain(d.outputs.iter().filter(|v| last_use[v.index()].is_none()));
        let mut freed: Vec<Var> = Vec::new();
        for v in dead {
            if let (Some(Loc::Arena(off)), false) = (loc[v.index()], pinned[v.index()]) {
                if !freed.contains(v) {
                    arena.release(off, bytes(f.var_type(*v)));
                    freed.push(*v);
                }
            }
        }
        steps.push(Step { op: d.op, inputs, outputs, scratch });
    }
    let outputs = f
        .outputs
        .iter()
        .map(|v| loc[v.index()].ok_or_else(|| CompileError::Codegen(format!("output {v:?} has no buffer"))))
        .collect::<Result<Vec<_>, _>>()?;
    let (kernels, code, _clif) = jit.finish()?;
    Ok(Executable {
        param_types: f.param_types(),
        output_types: f.output_types(),
        steps,
        outputs,
        consts,
        arena_bytes: arena.top,
        kernels,
        pool: Mutex::new(Vec::new()),
        _code: code,
    })
}
