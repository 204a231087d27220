//! Builds one kernel: the scalar loop nest over the root's output and the per-primitive `value` table
//! (the vector path, when the kernel qualifies, is in [`super::vector`]).

use super::{pairwise, scalar};
use crate::CompileError;
use cranelift_codegen::ir::{
    AbiParam, AliasRegion, AliasRegionData, Block, FuncRef, Function as ClifFunction, InstBuilder,
    InstructionData, MemFlagsData, Opcode, StackSlotData, StackSlotKind, Type, Value, ValueDef,
    condcodes::IntCC, types,
};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_jit::JITModule;
use cranelift_module::{Linkage, Module};
use kiln_ir::{ArgOp, DType, Eqn, Function, IndexMode, Prim, Var};
use std::collections::{HashMap, HashSet};

pub(super) type R<T> = Result<T, CompileError>;

/// Elements per iteration of a rank-1 gather kernel's unrolled loop ([`Emitter::gather_rows`]).
const GATHER_UNROLL: i64 = 4;

/// Trailing axes of a scalar loop nest holding at most this many elements are unrolled.
const SMALL_AXES_UNROLL: usize = 16;
/// At most this many copies of one body from nested unrolled nests (compile time stays linear).
pub(super) const UNROLLED_COPIES_MAX: usize = 64;

/// The Cranelift type holding a dtype's elements (bool is one byte, 0 or 1).
pub(super) fn clif_type(dt: DType) -> Type {
    match dt {
        DType::F32 => types::F32,
        DType::F64 => types::F64,
        DType::I32 | DType::U32 => types::I32,
        DType::Bool => types::I8,
    }
}

/// The least and greatest element of an integer array (`None` for floats, bools or no element).
fn int_range(a: &kiln_ir::Array) -> Option<(i64, i64)> {
    fn min_max(values: impl Iterator<Item = i64>) -> Option<(i64, i64)> {
        values.fold(None, |r, v| match r {
            None => Some((v, v)),
            Some((lo, hi)) => Some((lo.min(v), hi.max(v))),
        })
    }
    match a.dtype() {
        DType::I32 => min_max(a.as_array::<i32>()?.iter().map(|&v| i64::from(v))),
        DType::U32 => min_max(a.as_array::<u32>()?.iter().map(|&v| i64::from(v))),
        DType::F32 | DType::F64 | DType::Bool => None,
    }
}

/// Loads and stores only ever touch in-bounds addresses (indices are clamped before use, or are
/// constants known in range, see [`Emitter::indices_within`]).
pub(super) fn mem() -> MemFlagsData {
    MemFlagsData::new().with_notrap()
}

/// Two Cranelift alias regions: the buffers the kernel only reads and those it writes. A step
/// never writes a buffer it reads as an input (`plan`: outputs are placed before inputs are freed;
/// a donated buffer read by the step writing it computes in a spill slot), so stores to outputs
/// cannot change an input; a later member reading an earlier member's output has that leaf in the
/// output region (the table names that buffer twice: as a leaf and as the output). Tagging the
/// accesses lets Cranelift's redundant-load elimination reuse an input load across output stores:
/// W2's gather member `x[b[i], j] - x[a[i], j]` reloaded and re-clamped both indices for `j = 1`
/// after storing `j = 0`. Loads and stores of stack buffers (tiles, pairwise partials)
/// keep no region: in Cranelift's alias analysis a store without a region is a fence for every
/// later load, but a load without a region only sees such fences, not stores in a region — so
/// every access to a step buffer carries its region (rank-0 leaves loaded in the entry block too).
#[derive(Clone, Copy)]
struct Regions {
    inputs: AliasRegion,
    outputs: AliasRegion,
}

impl Regions {
    fn declare(b: &mut FunctionBuilder) -> Regions {
        let mut region = |user_id, description: &'static str| {
            b.func.dfg.alias_regions.insert(AliasRegionData { user_id, description: description.into() })
        };
        Regions { inputs: region(0, "kernel inputs"), outputs: region(1, "kernel outputs") }
    }
}

/// One root of a kernel: the function it is read from (the original, or its collapsed copy, see
/// `collapse`), its inlined producers, how many of that function's outer rows make one row of the
/// step, and the table slots of its leaves (its own variables) and of its output.
pub(super) struct Member<'m> {
    pub(super) f: &'m Function,
    pub(super) root: usize,
    pub(super) inline: &'m [Option<usize>],
    pub(super) row_scale: i64,
    pub(super) slots: HashMap<Var, usize>,
    pub(super) out_slot: usize,
}

/// Compiles a kernel with one or more roots into `func`: for rows `lo..hi`, each member's loop nest
/// in turn (a multi-output kernel, see `crate::grouping`). Segment and scatter kernels are groups
/// of one.
pub(super) fn build(
    module: &mut JITModule,
    func: &mut ClifFunction,
    fctx: &mut FunctionBuilderContext,
    members: &[Member],
    written_slots: &[usize],
) -> R<()> {
    let mut b = FunctionBuilder::new(func, fctx);
    let entry = b.create_block();
    b.append_block_params_for_function_params(entry);
    b.switch_to_block(entry);
    let table = b.block_params(entry)[0];
    // The kernel computes outer-axis rows [lo, hi) of its outputs (the runtime splits rows over threads).
    let (lo0, hi0) = (b.block_params(entry)[1], b.block_params(entry)[2]);
    let mut callbacks = HashMap::new();
    let regions = Regions::declare(&mut b);
    // The table holds the step's inputs, then its outputs (`runtime::Table`): a slot before the
    // first output is a buffer no member writes, unless it names an earlier member's output.
    let first_out = members.iter().map(|m| m.out_slot).min().unwrap_or(0);
    let read_only = |k: usize| k < first_out && !written_slots.contains(&k);
    // Grouped segment kernels (`grouping::find_segment_sibling`) share one loop over the data
    // rows: one emitter over all their leaves (never collapsed: the same function and inlining).
    let segment_group = members.len() > 1
        && members.iter().all(|m| {
            matches!(m.f.eqns[m.root].prim, Prim::SegmentSum { .. })
                && std::ptr::eq(m.f, members[0].f)
                && std::ptr::eq(m.inline, members[0].inline)
        });
    // Members emitted as one loop: a segment group, or consecutive members on the scalar loop nest
    // over the same rows (`row_runs`); else one member each.
    let runs: Vec<Vec<&Member>> =
        if segment_group { vec![members.iter().collect()] } else { row_runs(members) };
    // A segment kernel's flag follows the outputs (`runtime::Op::SegmentKernel`).
    let flag_slot = first_out + members.len();
    for run in &runs {
        let merged;
        let m: &Member = match run.as_slice() {
            [one] => one,
            _ => {
                // One emitter over all the run's leaves: the same function and inlining.
                let mut slots = HashMap::new();
                for m in run {
                    slots.extend(m.slots.iter().map(|(v, k)| (*v, *k)));
                }
                let m0 = run[0];
                merged = Member {
                    f: m0.f,
                    root: m0.root,
                    inline: m0.inline,
                    row_scale: 1,
                    slots,
                    out_slot: m0.out_slot,
                };
                &merged
            }
        };
        let (mut lo, mut hi) = (lo0, hi0);
        if m.row_scale != 1 {
            // Collapsed kernel (see `collapse`): rows of the original outer axis, in collapsed rows.
            lo = b.ins().imul_imm_s(lo, m.row_scale);
            hi = b.ins().imul_imm_s(hi, m.row_scale);
        }
        let mut bases = HashMap::new();
        // Rank-0 leaves are loaded once here, not at every element: Cranelift cannot hoist a load out
        // of a loop that stores (it cannot prove the store misses it), and the jnp index wrap reads
        // two rank-0 leaves per gathered element. Reading them before the loop is exact: a rank-0
        // leaf can only share memory with a rank-0 output, whose one element is stored after this
        // load anyway (rank-0 outputs are never grouped).
        let mut scalars = HashMap::new();
        let mut leaves: Vec<(&Var, &usize)> = m.slots.iter().collect();
        leaves.sort_by_key(|(_, k)| **k);
        let (mut inputs, mut outputs) = (HashSet::new(), HashSet::new());
        for (v, &k) in leaves {
            let p = b.ins().load(types::I64, mem(), table, (k * 8) as i32);
            bases.insert(*v, p);
            let region = if read_only(k) {
                inputs.insert(p);
                regions.inputs
            } else {
                outputs.insert(p);
                regions.outputs
            };
            if m.f.var_type(*v).rank() == 0 {
                let flags = mem().with_alias_region(Some(region));
                let x = b.ins().load(clif_type(m.f.dtype(*v)), flags, p, 0);
                scalars.insert(*v, x);
            }
        }
        let out_base = b.ins().load(types::I64, mem(), table, (m.out_slot * 8) as i32);
        outputs.insert(out_base);
        let mut em = Emitter {
            b,
            f: m.f,
            inline: m.inline,
            bases,
            regions,
            inputs,
            outputs,
            scalars,
            module: &mut *module,
            callbacks,
            vs: super::vector::VState::default(),
            unrolled: 1,
            const_ranges: HashMap::new(),
            known_elems: None,
        };
        let e = &m.f.eqns[m.root];
        let out_ty = m.f.var_type(e.outputs[0]).clone();
        let dims = out_ty.shape.dims().to_vec();
        // A segment or scatter kernel's own loop (see `segment_rows`, `scatter_rows`); else the
        // vector path when the static check allows it (see `vector`), else the scalar loop nest
        // (unrolled for a rank-1 gather, see `gather_rows`).
        if run.len() > 1 {
            let mut outs = Vec::with_capacity(run.len());
            for o in run {
                // A later member's leaf naming this output has its base already: the same value
                // lets Cranelift forward the stored elements to that member's loads.
                let out = o.f.eqns[o.root].outputs[0];
                let base = match em.bases.get(&out).copied() {
                    Some(base) => base,
                    None => em.b.ins().load(types::I64, mem(), table, (o.out_slot * 8) as i32),
                };
                em.outputs.insert(base);
                outs.push((&o.f.eqns[o.root], base));
            }
            if segment_group {
                em.segment_group_rows(&outs, lo, hi)?;
            } else {
                em.row_group(&outs, lo, hi)?;
            }
        } else if let Prim::SegmentSum { .. } = e.prim {
            let flag = em.b.ins().load(types::I64, mem(), table, (flag_slot * 8) as i32);
            em.segment_rows(e, out_base, flag, lo, hi)?;
        } else if let Prim::Scatter { .. } = e.prim {
            em.scatter_rows(e, out_base, lo, hi)?;
        } else if out_ty.shape.size() > 0
            && !super::vector::emit(&mut em, e, out_base, lo, hi)?
            && !em.gather_rows(e, out_base, lo, hi)?
        {
            em.rows_nest(&dims, lo, hi, true, &mut |s, idx| {
                let v = s.eqn_value(e, idx)?;
                let off = s.offset(&dims, idx);
                s.store(out_ty.dtype, out_base, off, v);
                Ok(())
            })?;
        }
        b = em.b;
        callbacks = em.callbacks;
    }
    b.ins().return_(&[]);
    b.seal_all_blocks();
    let cfg = module.target_config();
    b.finalize(cfg);
    Ok(())
}

/// The members of a multi-output kernel in runs that share one loop: members that take the scalar
/// loop nest (`rows_nest`: not the vector path, not a rank-1 gather, segment or scatter kernel)
/// over the same outer rows of the same function, uncollapsed, each joining the latest such run
/// it may move up to (past members whose outputs it does not read). One loop over the
/// rows then emits each member's elements of a row in turn, so a member reading an earlier one's
/// output finds it just stored (members read earlier outputs only at their own row,
/// `grouping::row_local`) and the rows' index and loop work is shared. W2's spring step: the
/// gather `x[b] − x[a]` and the squared lengths over its rows of 2.
fn row_runs<'m, 'a>(members: &'m [Member<'a>]) -> Vec<Vec<&'m Member<'a>>> {
    let scalar = |m: &Member| {
        let e = &m.f.eqns[m.root];
        let out = m.f.var_type(e.outputs[0]);
        let own_loop = matches!(e.prim, Prim::SegmentSum { .. } | Prim::Scatter { .. })
            || matches!(e.prim, Prim::Gather { .. }) && out.rank() == 1;
        m.row_scale == 1
            && out.rank() >= 1
            && out.shape.size() > 0
            && !own_loop
            && !super::vector::qualifies(m.f, m.inline, e)
    };
    let rows = |m: &Member| m.f.var_type(m.f.eqns[m.root].outputs[0]).shape.dims()[0];
    let output = |m: &Member| m.f.eqns[m.root].outputs[0];
    let mut runs: Vec<Vec<&Member>> = Vec::new();
    for m in members {
        // The latest scalar run `m` may join: moving `m` up past later runs is exact when it reads
        // none of their outputs (they cannot read `m`'s: members come in dependency order). A
        // collapsed member's variables are its own copy's, so `m` stays after it.
        let mut home = None;
        if scalar(m) {
            for (k, run) in runs.iter().enumerate().rev() {
                let p = run[0];
                if scalar(p)
                    && std::ptr::eq(p.f, m.f)
                    && std::ptr::eq(p.inline, m.inline)
                    && rows(p) == rows(m)
                {
                    home = Some(k);
                    break;
                }
                // Variables compare only within one function: never past a collapsed copy.
                let reads = |x: &&Member| !std::ptr::eq(x.f, m.f) || m.slots.contains_key(&output(x));
                if run.iter().any(reads) {
                    break;
                }
            }
        }
        match home {
            Some(k) => runs[k].push(m),
            None => runs.push(vec![m]),
        }
    }
    runs
}

/// The leaves of the kernel rooted at `f.eqns[root]`, in first-use order.
pub(super) fn leaves(f: &Function, root: usize, inline: &[Option<usize>]) -> Vec<Var> {
    let mut out = Vec::new();
    collect_leaves(f, &f.eqns[root], inline, &mut out);
    out
}

/// The materialized variables the kernel reads, in first-use order.
fn collect_leaves(f: &Function, e: &Eqn, inline: &[Option<usize>], out: &mut Vec<Var>) {
    for v in &e.inputs {
        match inline[v.index()] {
            Some(p) => collect_leaves(f, &f.eqns[p], inline, out),
            None if !out.contains(v) => out.push(*v),
            None => {}
        }
    }
}

/// Code generation state for one kernel.
pub(super) struct Emitter<'a, 'b> {
    pub(super) b: FunctionBuilder<'b>,
    pub(super) f: &'a Function,
    pub(super) inline: &'a [Option<usize>],
    pub(super) bases: HashMap<Var, Value>,
    regions: Regions,
    /// Base addresses of the buffers this kernel only reads (its step's inputs) ...
    inputs: HashSet<Value>,
    /// ... and of those it writes (its outputs, also read by later members); see [`Regions`].
    outputs: HashSet<Value>,
    /// The values of the rank-0 leaves, loaded once in the entry block.
    pub(super) scalars: HashMap<Var, Value>,
    pub(super) module: &'a mut JITModule,
    pub(super) callbacks: HashMap<&'static str, FuncRef>,
    /// State of the vector walk (see [`super::vector`]); unused by the scalar path.
    pub(super) vs: super::vector::VState,
    /// Copies of the body being emitted made by enclosing unrolled nests (1 outside them).
    pub(super) unrolled: usize,
    /// The value range of each constant index array asked about ([`Emitter::indices_within`]).
    const_ranges: HashMap<Var, Option<(i64, i64)>>,
    /// Elements of buffers known in the block being emitted ([`Known`]), inside a row group.
    known_elems: Option<Known>,
}

/// Inside a run of scalar members ([`Emitter::row_group`]), the elements already in registers in
/// the block being emitted: each member's stored results (a later member reads an earlier member's
/// output at its own row: W2's `reduce_sum(d * d)` after `d = x[b] - x[a]`) and every leaf
/// element loaded (`d * d` loads each element once). Keyed by variable and index (constant
/// indices by value, others by SSA value); entries of another block are dropped, so an entry is
/// only used after where it was made in the same block. A store to a variable forgets its entries
/// at indices that may name the same element (all but those differing in a constant index);
/// within a group, every store to an earlier member's output precedes the later members' loads of
/// it, and inputs are never stored to.
#[derive(Default)]
struct Known {
    block: Option<Block>,
    elems: HashMap<(Var, Vec<IdxKey>), Value>,
}

impl Known {
    /// The entries of `block` (all others dropped).
    fn at(&mut self, block: Option<Block>) -> &mut HashMap<(Var, Vec<IdxKey>), Value> {
        if self.block != block {
            self.block = block;
            self.elems.clear();
        }
        &mut self.elems
    }
}

/// One index of a [`Known`] element: a compile-time constant, or an SSA value.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum IdxKey {
    Const(i64),
    Value(Value),
}

impl IdxKey {
    /// Whether two multi-indices surely name different elements: different constants somewhere
    /// (`d[r, 0]` and `d[r, 1]`); SSA values may be equal at run time.
    fn distinct(a: &[IdxKey], b: &[IdxKey]) -> bool {
        a.iter().zip(b).any(|(x, y)| matches!((x, y), (IdxKey::Const(p), IdxKey::Const(q)) if p != q))
    }
}

pub(super) type Body<'x, 'a, 'b> = dyn FnMut(&mut Emitter<'a, 'b>, &[Value]) -> R<()> + 'x;

impl<'a, 'b> Emitter<'a, 'b> {
    // ---- loops and index arithmetic -------------------------------------------------------------

    /// `for i in 0..n { body(i) }` with `n` an i64 value.
    pub(super) fn for_range(&mut self, n: Value, body: &mut dyn FnMut(&mut Self, Value) -> R<()>) -> R<()> {
        let zero = self.b.ins().iconst(types::I64, 0);
        self.for_range_from(zero, n, body)
    }

    /// `for i in (lo..hi).step_by(step)` with i64 bounds.
    pub(super) fn for_step_by(
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
        let more = self.b.ins().icmp(IntCC::SignedLessThan, i, hi);
        self.b.ins().brif(more, body_blk, &[], exit, &[]);
        self.b.switch_to_block(body_blk);
        body(self, i)?;
        let next = self.b.ins().iadd_imm_s(i, step);
        self.b.def_var(var, next);
        self.b.ins().jump(header, &[]);
        self.b.switch_to_block(exit);
        Ok(())
    }

    /// `for i in lo..hi` with i64 bounds.
    pub(super) fn for_range_from(
        &mut self,
        lo: Value,
        n: Value,
        body: &mut dyn FnMut(&mut Self, Value) -> R<()>,
    ) -> R<()> {
        self.for_step_by(lo, n, 1, body)
    }

    /// Row-major nested loops over `dims`, calling `body` with the multi-index; `body` is emitted
    /// once (the vector walk numbers its transcendental occurrences in emission order).
    pub(super) fn for_each_index(&mut self, dims: &[usize], body: &mut Body<'_, 'a, 'b>) -> R<()> {
        let mut prefix = Vec::with_capacity(dims.len());
        self.nest(dims, &mut prefix, false, body)
    }

    /// Like [`Emitter::for_each_index`] for the scalar path: trailing axes holding at most
    /// [`SMALL_AXES_UNROLL`] elements are unrolled with constant indices, `body` emitted per element.
    pub(super) fn for_each_index_unrolled(&mut self, dims: &[usize], body: &mut Body<'_, 'a, 'b>) -> R<()> {
        let mut prefix = Vec::with_capacity(dims.len());
        self.nest(dims, &mut prefix, true, body)
    }

    /// Like [`Emitter::for_each_index`], with the outermost axis restricted to `[lo, hi)` (a rank-0
    /// index space has one element, computed whatever the bounds).
    pub(super) fn for_each_index_rows(
        &mut self,
        dims: &[usize],
        lo: Value,
        hi: Value,
        body: &mut Body<'_, 'a, 'b>,
    ) -> R<()> {
        self.rows_nest(dims, lo, hi, false, body)
    }

    /// The rows `[lo, hi)` of `dims`, the inner axes nested (`unroll`: small trailing ones
    /// unrolled as in [`Emitter::for_each_index_unrolled`], for the scalar root loop).
    fn rows_nest(
        &mut self,
        dims: &[usize],
        lo: Value,
        hi: Value,
        unroll: bool,
        body: &mut Body<'_, 'a, 'b>,
    ) -> R<()> {
        if dims.is_empty() {
            return body(self, &[]);
        }
        let mut prefix = Vec::with_capacity(dims.len());
        self.for_range_from(lo, hi, &mut |s, i| {
            prefix.push(i);
            let r = s.nest(dims, &mut prefix, unroll, body);
            prefix.pop();
            r
        })
    }

    fn nest(
        &mut self,
        dims: &[usize],
        prefix: &mut Vec<Value>,
        unroll: bool,
        body: &mut Body<'_, 'a, 'b>,
    ) -> R<()> {
        if prefix.len() == dims.len() {
            return body(self, prefix);
        }
        // Small trailing axes are unrolled with constant indices: a `concatenate` or `stack` along
        // them then picks its operand statically (see `concatenate`) instead of branching at every
        // element, and short loops lose their overhead (W4's `[B, 4]` state update: 10 → 2 µs/step).
        // Copies multiply when unrolled nests nest (a small reduction inside an unrolled element),
        // so their product is capped too.
        let k = prefix.len();
        let copies = dims[k..].iter().product::<usize>();
        if unroll && copies <= SMALL_AXES_UNROLL && self.unrolled * copies <= UNROLLED_COPIES_MAX {
            // An empty axis emits no copy: the loop it replaces would run zero times.
            let factor = copies.max(1);
            self.unrolled *= factor;
            let mut r = Ok(());
            for flat in 0..copies {
                let mut rest = flat;
                let mut tail = vec![0usize; dims.len() - k];
                for d in (0..tail.len()).rev() {
                    tail[d] = rest % dims[k + d];
                    rest /= dims[k + d];
                }
                for &i in &tail {
                    let c = self.iconst(i as i64);
                    prefix.push(c);
                }
                r = body(self, prefix);
                prefix.truncate(k);
                if r.is_err() {
                    break;
                }
            }
            self.unrolled /= factor;
            return r;
        }
        let n = self.iconst(dims[prefix.len()] as i64);
        self.for_range(n, &mut |s, i| {
            prefix.push(i);
            let r = s.nest(dims, prefix, unroll, body);
            prefix.pop();
            r
        })
    }

    pub(super) fn iconst(&mut self, x: i64) -> Value {
        self.b.ins().iconst(types::I64, x)
    }

    /// The value of an i64 index known at compile time: an `iconst` (an unrolled small axis, a
    /// broadcast's zero, a concatenate operand's rebased constant).
    pub(super) fn known(&self, v: Value) -> Option<i64> {
        let dfg = &self.b.func.dfg;
        let ValueDef::Result(inst, 0) = dfg.value_def(v) else { return None };
        match dfg.insts[inst] {
            InstructionData::UnaryImm { opcode: Opcode::Iconst, imm } if dfg.value_type(v) == types::I64 => {
                Some(imm.bits())
            }
            _ => None,
        }
    }

    /// Row-major flat offset of `idx` in an array of shape `dims`.
    pub(super) fn offset(&mut self, dims: &[usize], idx: &[Value]) -> Value {
        let mut acc = self.iconst(0);
        for (k, &i) in idx.iter().enumerate() {
            let scaled = self.b.ins().imul_imm_s(acc, dims[k] as i64);
            acc = self.b.ins().iadd(scaled, i);
        }
        acc
    }

    /// The multi-index of flat offset `lin` in shape `dims`.
    pub(super) fn unravel(&mut self, lin: Value, dims: &[usize]) -> Vec<Value> {
        let mut out = vec![lin; dims.len()];
        let mut rest = lin;
        for k in (0..dims.len()).rev() {
            let n = dims[k].max(1) as i64;
            let q = self.b.ins().udiv_imm_s(rest, n);
            let qn = self.b.ins().imul_imm_s(q, n);
            out[k] = self.b.ins().isub(rest, qn);
            rest = q;
        }
        out
    }

    /// The scalar loop of a kernel rooted at a rank-1 `gather` (a message gather over a graph's
    /// edges: random reads from a table larger than L2), unrolled by [`GATHER_UNROLL`]: the
    /// unrolled body computes every element's index and gathered value before its stores, so the
    /// table reads of one group issue back to back and their cache misses overlap, with less loop
    /// overhead per element in the out-of-order window. Returns false (emitting nothing) for other
    /// kernels. Element values are computed exactly as the plain loop computes them.
    fn gather_rows(&mut self, e: &'a Eqn, out_base: Value, lo: Value, hi: Value) -> R<bool> {
        let out = self.f.var_type(e.outputs[0]).clone();
        if !matches!(e.prim, Prim::Gather { .. }) || out.rank() != 1 {
            return Ok(false);
        }
        let dt = out.dtype;
        let store_group = |s: &mut Self, i: Value, n: i64| -> R<()> {
            let mut vals = Vec::with_capacity(n as usize);
            for k in 0..n {
                let ik = s.b.ins().iadd_imm_s(i, k);
                vals.push((ik, s.eqn_value(e, &[ik])?));
            }
            for (ik, v) in vals {
                s.store(dt, out_base, ik, v);
            }
            Ok(())
        };
        self.for_groups(lo, hi, GATHER_UNROLL, &mut |s, i, n| store_group(s, i, n))?;
        Ok(true)
    }

    /// The one loop of a run of scalar members (see [`row_runs`]): for each row `r` in `[lo, hi)`,
    /// each member's elements `[r, ..]` in turn, computed and stored as its own loop nest would;
    /// elements already in registers in the same block are reused ([`Known`]).
    fn row_group(&mut self, outs: &[(&'a Eqn, Value)], lo: Value, hi: Value) -> R<()> {
        let f = self.f;
        self.known_elems = Some(Known::default());
        let r = self.for_range_from(lo, hi, &mut |s, r| {
            for &(e, base) in outs {
                let out = e.outputs[0];
                let ty = f.var_type(out);
                let dims = ty.shape.dims().to_vec();
                let mut prefix = vec![r];
                s.nest(&dims, &mut prefix, true, &mut |s, idx| {
                    let v = s.eqn_value(e, idx)?;
                    let off = s.offset(&dims, idx);
                    s.store(ty.dtype, base, off, v);
                    let key = s.idx_key(idx);
                    let block = s.b.current_block();
                    if let Some(known) = &mut s.known_elems {
                        let elems = known.at(block);
                        elems.retain(|(var, k), _| *var != out || IdxKey::distinct(k, &key));
                        elems.insert((out, key), v);
                    }
                    Ok(())
                })?;
            }
            Ok(())
        });
        self.known_elems = None;
        r
    }

    /// `body(i, n)` over `[lo, hi)` in groups: `n = unroll` elements from `i` while a whole group
    /// fits, then `n = 1` for each remaining element.
    fn for_groups(
        &mut self,
        lo: Value,
        hi: Value,
        unroll: i64,
        body: &mut dyn FnMut(&mut Self, Value, i64) -> R<()>,
    ) -> R<()> {
        let var = self.b.declare_var(types::I64);
        self.b.def_var(var, lo);
        let last = self.b.ins().iadd_imm_s(hi, -(unroll - 1));
        let (header, group, tail) = (self.b.create_block(), self.b.create_block(), self.b.create_block());
        self.b.ins().jump(header, &[]);
        self.b.switch_to_block(header);
        let i = self.b.use_var(var);
        let more = self.b.ins().icmp(IntCC::SignedLessThan, i, last);
        self.b.ins().brif(more, group, &[], tail, &[]);
        self.b.switch_to_block(group);
        body(self, i, unroll)?;
        let next = self.b.ins().iadd_imm_s(i, unroll);
        self.b.def_var(var, next);
        self.b.ins().jump(header, &[]);
        self.b.switch_to_block(tail);
        let rest = self.b.use_var(var);
        self.for_range_from(rest, hi, &mut |s, i| body(s, i, 1))
    }

    /// The loop of a kernel rooted at a `segment_sum` (see `fusion::segment_kernel`): for data rows
    /// `r` in `[lo, hi)`, in order, the row's values `data[r, ..]` (its producers fused in) are
    /// added to `out[ids[r], ..]` as `out + value` — per element the runtime routine's sequential
    /// sum, so bitwise the same; ids outside `0..num_segments` are dropped. The caller zeroes `out`
    /// first.
    ///
    /// Parallel ranges (`runtime::Op::SegmentKernel`) start where the id changes; the range
    /// `[lo, hi)` owns the segments from `ids[lo]` up to `ids[hi]` (unbounded below when `lo == 0`
    /// and above when `hi == n`), bounds clamped to `0..num_segments` (the runtime checks first
    /// that the unclamped ranges are disjoint), so a range over all rows owns every segment. A row
    /// whose segment another range owns (ids not sorted) stores 1 to the byte at `flag` (an atomic
    /// store: ranges run at once) and returns: the runtime then clears `out` and runs all rows on
    /// one thread.
    fn segment_rows(&mut self, e: &'a Eqn, out_base: Value, flag: Value, lo: Value, hi: Value) -> R<()> {
        let f = self.f;
        let Prim::SegmentSum { num_segments } = e.prim else {
            return Err(CompileError::Codegen(format!("{} is not a segment_sum", e.prim.name())));
        };
        let (data, ids) = (e.inputs[0], e.inputs[1]);
        let dims = f.var_type(data).shape.dims().to_vec();
        // Rows of `width` elements (`data[r, ..]`, row-major), added to `out[id, ..]`.
        let n = dims[0] as i64;
        let inner = &dims[1..];
        let row_len: usize = inner.iter().product();
        let dt = f.dtype(data);
        // The owned segments `[owned_lo, owned_lo + width)`, within `0..num_segments`; the bounds
        // are read at in-bounds rows only (`lo`, `hi` may equal `n`).
        let last = self.iconst(n - 1);
        let bound = |s: &mut Self, row: Value, open: i64, open_at: IntCC, at: i64| -> R<Value> {
            let clamped = s.b.ins().smin(row, last);
            let id = s.index_at(ids, &[clamped])?;
            let open_here = s.b.ins().icmp_imm_s(open_at, row, at);
            let unbounded = s.iconst(open);
            let b = s.b.ins().select(open_here, unbounded, id);
            Ok(s.clamp(b, 0, num_segments as i64))
        };
        let owned_lo = bound(self, lo, 0, IntCC::Equal, 0)?;
        let owned_hi = bound(self, hi, num_segments as i64, IntCC::SignedGreaterThanOrEqual, n)?;
        let width = self.b.ins().isub(owned_hi, owned_lo);
        let zero = self.iconst(0);
        let width = self.b.ins().smax(width, zero);
        // Kept in a stack slot and loaded per row: Cranelift places pure values at their uses, and
        // it sank this whole computation (and spills) into the loop body.
        let slot = self.b.create_sized_stack_slot(StackSlotData::new(StackSlotKind::ExplicitSlot, 16, 3));
        self.b.ins().stack_store(types::I64, owned_lo, slot, 0);
        self.b.ins().stack_store(types::I64, width, slot, 8);
        let stray = self.b.create_block();
        // Unrolled like `gather_rows`: a group's ids and values (the gathered reads) are computed
        // before its adds, so their cache misses overlap; the adds stay in row order.
        let unroll = (GATHER_UNROLL / row_len as i64).max(1);
        self.for_groups(lo, hi, unroll, &mut |s, i, n| {
            let mut rows = Vec::with_capacity(n as usize);
            for k in 0..n {
                let r = s.b.ins().iadd_imm_s(i, k);
                let mut values = Vec::with_capacity(row_len);
                for j in 0..row_len {
                    let idx = s.row_element(vec![r], inner, j);
                    values.push(s.value(data, &idx)?);
                }
                rows.push((s.index_at(ids, &[r])?, values));
            }
            for (id, values) in rows {
                let owned_lo = s.b.ins().stack_load(types::I64, types::I64, slot, 0);
                let width = s.b.ins().stack_load(types::I64, types::I64, slot, 8);
                let (add, other, next) = (s.b.create_block(), s.b.create_block(), s.b.create_block());
                // One unsigned compare for `owned_lo <= id < owned_lo + width` (the common case).
                let rel = s.b.ins().isub(id, owned_lo);
                let owned = s.b.ins().icmp(IntCC::UnsignedLessThan, rel, width);
                s.b.ins().brif(owned, add, &[], other, &[]);
                s.b.switch_to_block(add);
                let first = s.b.ins().imul_imm_s(id, row_len as i64);
                for (j, v) in values.into_iter().enumerate() {
                    let at = s.b.ins().iadd_imm_s(first, j as i64);
                    s.add_into(dt, out_base, at, v)?;
                }
                s.b.ins().jump(next, &[]);
                // Not owned: another range's segment, or an id outside `0..num_segments` (negative
                // ids wrap to large unsigned ones), which is dropped.
                s.b.switch_to_block(other);
                let in_range = s.b.ins().icmp_imm_u(IntCC::UnsignedLessThan, id, num_segments as i64);
                s.b.ins().brif(in_range, stray, &[], next, &[]);
                s.b.switch_to_block(next);
            }
            Ok(())
        })?;
        let done = self.b.create_block();
        self.b.ins().jump(done, &[]);
        self.b.switch_to_block(stray);
        let one = self.b.ins().iconst(types::I8, 1);
        self.b.ins().atomic_store(mem(), one, flag);
        self.b.ins().return_(&[]);
        self.b.switch_to_block(done);
        Ok(())
    }

    /// The one loop of a group of `segment_sum` kernels over data of one type (see
    /// `grouping::find_segment_sibling`): for data rows `r` in `[lo, hi)`, in order, each member
    /// `k`'s row values `data_k[r, ..]` (producers fused in; what members share is computed once)
    /// are added to `out_k[ids_k[r], ..]`, as `out + value`: per output the sequential sum of
    /// [`Emitter::segment_rows`] alone, so bitwise the same; ids outside `0..num_segments` are
    /// dropped. Groups run on one thread over all rows (the runtime zeroes the outputs first), so
    /// every segment is owned and no row is a stray.
    fn segment_group_rows(&mut self, outs: &[(&'a Eqn, Value)], lo: Value, hi: Value) -> R<()> {
        let f = self.f;
        let (e, _) = outs[0];
        let Prim::SegmentSum { num_segments } = e.prim else {
            return Err(CompileError::Codegen(format!("{} is not a segment_sum", e.prim.name())));
        };
        let dims = f.var_type(e.inputs[0]).shape.dims().to_vec();
        let inner = &dims[1..];
        let row_len: usize = inner.iter().product();
        let dt = f.dtype(e.inputs[0]);
        let unroll = (GATHER_UNROLL / row_len as i64).max(1);
        // Constant ids all in `0..num_segments` need no range check.
        let checked: Vec<bool> =
            outs.iter().map(|(o, _)| !self.indices_within(o.inputs[1], num_segments as i64)).collect();
        self.for_groups(lo, hi, unroll, &mut |s, i, n| {
            // A group's ids and values before its adds, as in `segment_rows`.
            let mut rows = Vec::with_capacity(n as usize);
            for k in 0..n {
                let r = s.b.ins().iadd_imm_s(i, k);
                let mut members = Vec::with_capacity(outs.len());
                for (o, _) in outs {
                    let mut values = Vec::with_capacity(row_len);
                    for j in 0..row_len {
                        let idx = s.row_element(vec![r], inner, j);
                        values.push(s.value(o.inputs[0], &idx)?);
                    }
                    members.push((s.index_at(o.inputs[1], &[r])?, values));
                }
                rows.push(members);
            }
            for members in rows {
                for ((&(_, out_base), (id, values)), &check) in outs.iter().zip(members).zip(&checked) {
                    let (add, next) = (s.b.create_block(), s.b.create_block());
                    if check {
                        // Negative ids wrap to large unsigned ones: dropped with those past the end.
                        let in_range = s.b.ins().icmp_imm_u(IntCC::UnsignedLessThan, id, num_segments as i64);
                        s.b.ins().brif(in_range, add, &[], next, &[]);
                    } else {
                        s.b.ins().jump(add, &[]);
                    }
                    s.b.switch_to_block(add);
                    let first = s.b.ins().imul_imm_s(id, row_len as i64);
                    for (j, &v) in values.iter().enumerate() {
                        let at = s.b.ins().iadd_imm_s(first, j as i64);
                        s.add_into(dt, out_base, at, v)?;
                    }
                    s.b.ins().jump(next, &[]);
                    s.b.switch_to_block(next);
                }
            }
            Ok(())
        })
    }

    /// The loop of a kernel rooted at a row-wise `scatter_add` (see `fusion::scatter_kernel`): for
    /// each row `b` in `[lo, hi)`, the output row is the operand's row `b`, then each update row
    /// `i` (its producers fused in) is added to `out[b, indices[b, i], ..]` (`indices[i]` without a
    /// batch dimension) as `out + value`,
    /// in order — the interpreter's sequential sum, so bitwise the same. Out-of-range indices are
    /// clamped (`Clip`) or their update dropped (`FillOrDrop`). Row `b` reads and writes only row
    /// `b` of its output.
    fn scatter_rows(&mut self, e: &'a Eqn, out_base: Value, lo: Value, hi: Value) -> R<()> {
        let f = self.f;
        let Prim::Scatter { mode, batch_dims, .. } = e.prim else {
            return Err(CompileError::Codegen(format!("{} is not a scatter", e.prim.name())));
        };
        let (x, ids, upd) = (e.inputs[0], e.inputs[1], e.inputs[2]);
        let out_dims = f.var_type(e.outputs[0]).shape.dims().to_vec();
        let (m, inner) = (out_dims[1] as i64, out_dims[2..].to_vec());
        let row_len: usize = inner.iter().product();
        let updates = f.var_type(ids).shape.dims()[batch_dims] as i64;
        let dt = f.dtype(x);
        // Constant indices all in `0..m` need no clamp or range check.
        let known = self.indices_within(ids, m);
        self.for_range_from(lo, hi, &mut |s, b| {
            s.for_each_index_unrolled(&out_dims[1..], &mut |s, rest| {
                let idx: Vec<Value> = std::iter::once(b).chain(rest.iter().copied()).collect();
                let v = s.value(x, &idx)?;
                let at = s.offset(&out_dims, &idx);
                s.store(dt, out_base, at, v);
                Ok(())
            })?;
            let n = s.iconst(updates);
            s.for_range(n, &mut |s, i| {
                let id = if batch_dims == 1 { s.index_at(ids, &[b, i])? } else { s.index_at(ids, &[i])? };
                let (add, next) = (s.b.create_block(), s.b.create_block());
                let target = match mode {
                    _ if known => id,
                    IndexMode::Clip => s.clamp(id, 0, m - 1),
                    IndexMode::FillOrDrop => id,
                };
                if known {
                    s.b.ins().jump(add, &[]);
                } else {
                    let in_range = s.b.ins().icmp_imm_u(IntCC::UnsignedLessThan, target, m);
                    s.b.ins().brif(in_range, add, &[], next, &[]);
                }
                s.b.switch_to_block(add);
                let row = s.b.ins().imul_imm_s(b, m);
                let row = s.b.ins().iadd(row, target);
                let first = s.b.ins().imul_imm_s(row, row_len as i64);
                for j in 0..row_len {
                    let idx = s.row_element(vec![b, i], &inner, j);
                    let v = s.value(upd, &idx)?;
                    let at = s.b.ins().iadd_imm_s(first, j as i64);
                    s.add_into(dt, out_base, at, v)?;
                }
                s.b.ins().jump(next, &[]);
                s.b.switch_to_block(next);
                Ok(())
            })
        })
    }

    /// `prefix` followed by the multi-index of element `j` of a row-major row of shape `inner`.
    fn row_element(&mut self, mut prefix: Vec<Value>, inner: &[usize], j: usize) -> Vec<Value> {
        let at = prefix.len();
        let mut rest = j;
        for &n in inner.iter().rev() {
            let c = self.iconst((rest % n) as i64);
            prefix.insert(at, c);
            rest /= n;
        }
        prefix
    }

    /// `out[at] = out[at] + v` (the interpreter's sequential sum, one element).
    fn add_into(&mut self, dt: DType, out_base: Value, at: Value, v: Value) -> R<()> {
        let old = self.load(dt, out_base, at);
        let sum = scalar::binary(self, kiln_ir::BinaryOp::Add, dt, old, v)?;
        self.store(dt, out_base, at, sum);
        Ok(())
    }

    /// `x` clamped into `[lo, hi]` (i64).
    fn clamp(&mut self, x: Value, lo: i64, hi: i64) -> Value {
        let (l, h) = (self.iconst(lo), self.iconst(hi));
        let x = self.b.ins().smax(x, l);
        self.b.ins().smin(x, h)
    }

    /// Whether every element of the index array `v` lies in `0..n`, known at compile time: `v` is
    /// an integer constant leaf of the kernel's function (a loop's literal index array, see
    /// `kiln_transform::sink_scan_constants`). Such indices need no clamp or range check.
    fn indices_within(&mut self, v: Var, n: i64) -> bool {
        if self.inline[v.index()].is_some() {
            return false;
        }
        let f = self.f;
        let range = *self
            .const_ranges
            .entry(v)
            .or_insert_with(|| f.consts.iter().find(|c| c.var == v).and_then(|c| int_range(&c.value)));
        range.is_some_and(|(lo, hi)| lo >= 0 && hi < n)
    }

    pub(super) fn address(&mut self, dt: DType, base: Value, off: Value) -> Value {
        let bytes = self.b.ins().imul_imm_s(off, dt.size_bytes() as i64);
        self.b.ins().iadd(base, bytes)
    }

    pub(super) fn load(&mut self, dt: DType, base: Value, off: Value) -> Value {
        let addr = self.address(dt, base, off);
        let flags = self.mem_at(base);
        self.b.ins().load(clif_type(dt), flags, addr, 0)
    }

    pub(super) fn store(&mut self, dt: DType, base: Value, off: Value, v: Value) {
        let addr = self.address(dt, base, off);
        let flags = self.mem_at(base);
        self.b.ins().store(flags, v, addr, 0);
    }

    /// [`mem`] with the alias region of the buffer at `base` ([`Regions`]); none for other memory.
    pub(super) fn mem_at(&self, base: Value) -> MemFlagsData {
        let region = if self.inputs.contains(&base) {
            Some(self.regions.inputs)
        } else if self.outputs.contains(&base) {
            Some(self.regions.outputs)
        } else {
            None
        };
        mem().with_alias_region(region)
    }

    /// Calls an `extern "C"` math routine registered in [`crate::runtime::math::symbols`].
    pub(super) fn call(&mut self, name: &'static str, ty: Type, args: &[Value]) -> R<Value> {
        let fref = match self.callbacks.get(name) {
            Some(r) => *r,
            None => {
                let mut sig = self.module.make_signature();
                sig.params.extend(args.iter().map(|_| AbiParam::new(ty)));
                sig.returns.push(AbiParam::new(ty));
                let id = self
                    .module
                    .declare_function(name, Linkage::Import, &sig)
                    .map_err(|e| CompileError::Codegen(e.to_string()))?;
                let r = self.module.declare_func_in_func(id, self.b.func);
                self.callbacks.insert(name, r);
                r
            }
        };
        let call = self.b.ins().call(fref, args);
        Ok(self.b.inst_results(call)[0])
    }

    // ---- values ---------------------------------------------------------------------------------

    /// The value of variable `v` at multi-index `idx`: computed inline, or loaded from its buffer.
    pub(super) fn value(&mut self, v: Var, idx: &[Value]) -> R<Value> {
        let f = self.f;
        match self.inline[v.index()] {
            Some(p) => self.eqn_value(&f.eqns[p], idx),
            None if self.f.var_type(v).rank() == 0 => Ok(self.scalars[&v]),
            None => {
                let key = self.known_elems.is_some().then(|| (v, self.idx_key(idx)));
                let block = self.b.current_block();
                if let (Some(key), Some(known)) = (&key, &mut self.known_elems)
                    && let Some(&x) = known.at(block).get(key)
                {
                    return Ok(x);
                }
                let base = self.bases[&v];
                let dims = f.var_type(v).shape.dims().to_vec();
                let off = self.offset(&dims, idx);
                let x = self.load(f.dtype(v), base, off);
                if let (Some(key), Some(known)) = (key, &mut self.known_elems) {
                    known.at(block).insert(key, x);
                }
                Ok(x)
            }
        }
    }

    /// The [`Known`] key of a multi-index.
    fn idx_key(&self, idx: &[Value]) -> Vec<IdxKey> {
        idx.iter().map(|&i| self.known(i).map_or(IdxKey::Value(i), IdxKey::Const)).collect()
    }

    /// Like [`Emitter::value`], but a rank-0 operand is broadcast (select's predicate, clamp's bounds).
    fn value_or_scalar(&mut self, v: Var, idx: &[Value]) -> R<Value> {
        if self.f.var_type(v).rank() == 0 { self.value(v, &[]) } else { self.value(v, idx) }
    }

    /// An integer scalar operand (a dynamic index) widened to i64 by its signedness.
    fn index_at(&mut self, v: Var, idx: &[Value]) -> R<Value> {
        let x = self.value(v, idx)?;
        Ok(match self.f.dtype(v) {
            DType::U32 => self.b.ins().uextend(types::I64, x),
            DType::I32 | DType::F32 | DType::F64 | DType::Bool => self.b.ins().sextend(types::I64, x),
        })
    }

    /// The per-primitive table: the value of `e`'s (single) output at `idx`.
    pub(super) fn eqn_value(&mut self, e: &'a Eqn, idx: &[Value]) -> R<Value> {
        let f = self.f;
        let ins = &e.inputs;
        let dims_of = |k: usize| f.var_type(ins[k]).shape.dims().to_vec();
        let dt = |k: usize| f.dtype(ins[k]);
        match &e.prim {
            Prim::Unary(op) => {
                let x = self.value(ins[0], idx)?;
                scalar::unary(self, *op, dt(0), x)
            }
            Prim::Binary(op) => {
                let x = self.value(ins[0], idx)?;
                let y = self.value(ins[1], idx)?;
                scalar::binary(self, *op, dt(0), x, y)
            }
            Prim::Compare(op) => {
                let x = self.value(ins[0], idx)?;
                let y = self.value(ins[1], idx)?;
                Ok(scalar::compare(self, *op, dt(0), x, y))
            }
            Prim::Select => {
                let p = self.value_or_scalar(ins[0], idx)?;
                let t = self.value(ins[1], idx)?;
                let o = self.value(ins[2], idx)?;
                Ok(self.b.ins().select(p, t, o))
            }
            Prim::Clamp => {
                // XLA: min(max(x, lo), hi), NaN propagating like max/min.
                let lo = self.value_or_scalar(ins[0], idx)?;
                let x = self.value(ins[1], idx)?;
                let hi = self.value_or_scalar(ins[2], idx)?;
                let m = scalar::binary(self, kiln_ir::BinaryOp::Max, dt(1), x, lo)?;
                scalar::binary(self, kiln_ir::BinaryOp::Min, dt(1), m, hi)
            }
            Prim::ConvertElementType { dtype } => {
                let x = self.value(ins[0], idx)?;
                Ok(scalar::convert(self, dt(0), *dtype, x))
            }
            Prim::BitcastConvertType { dtype } => {
                let x = self.value(ins[0], idx)?;
                scalar::bitcast(self, dt(0), *dtype, x)
            }
            Prim::Iota { dtype, dimension, .. } => scalar::from_index(self, idx[*dimension], *dtype),
            Prim::BroadcastInDim { broadcast_dimensions, .. } => {
                let in_dims = dims_of(0);
                let zero = self.iconst(0);
                let j: Vec<Value> = in_dims
                    .iter()
                    .zip(broadcast_dimensions)
                    .map(|(&n, &d)| if n == 1 { zero } else { idx[d] })
                    .collect();
                self.value(ins[0], &j)
            }
            Prim::Reshape { .. } => {
                let out_dims = f.var_type(e.outputs[0]).shape.dims().to_vec();
                let j = self.reshape_index(&dims_of(0), &out_dims, idx);
                self.value(ins[0], &j)
            }
            Prim::Transpose { permutation } => {
                let mut j = idx.to_vec();
                for (i, &p) in permutation.iter().enumerate() {
                    j[p] = idx[i];
                }
                self.value(ins[0], &j)
            }
            Prim::Rev { dimensions } => {
                let in_dims = dims_of(0);
                let mut j = idx.to_vec();
                for &d in dimensions {
                    let last = self.iconst(in_dims[d] as i64 - 1);
                    j[d] = self.b.ins().isub(last, idx[d]);
                }
                self.value(ins[0], &j)
            }
            Prim::Slice { start, strides, .. } => {
                let mut j = idx.to_vec();
                for d in 0..idx.len() {
                    let scaled = self.b.ins().imul_imm_s(idx[d], strides[d] as i64);
                    j[d] = self.b.ins().iadd_imm_s(scaled, start[d] as i64);
                }
                self.value(ins[0], &j)
            }
            Prim::DynamicSlice { slice_sizes } => {
                let in_dims = dims_of(0);
                let mut j = idx.to_vec();
                for d in 0..idx.len() {
                    let s = self.index_at(ins[1 + d], &[])?;
                    let s = self.clamp(s, 0, (in_dims[d] - slice_sizes[d]) as i64);
                    j[d] = self.b.ins().iadd(s, idx[d]);
                }
                self.value(ins[0], &j)
            }
            Prim::DynamicUpdateSlice => self.dynamic_update_slice(e, idx),
            Prim::Concatenate { dimension } => self.concatenate(e, *dimension, idx),
            Prim::Pad { low, interior, .. } => self.pad(e, low, interior, idx),
            Prim::Reduce { op, axes } => {
                let in_dims = dims_of(0);
                let mut reduced = axes.clone();
                reduced.sort_unstable();
                let kept: Vec<usize> = (0..in_dims.len()).filter(|d| !axes.contains(d)).collect();
                let red_dims: Vec<usize> = reduced.iter().map(|&d| in_dims[d]).collect();
                let ty = clif_type(dt(0));
                let acc = self.b.declare_var(ty);
                let init = scalar::reduce_identity(self, *op, dt(0));
                self.b.def_var(acc, init);
                let x = ins[0];
                let full = |ridx: &[Value]| -> Vec<Value> {
                    (0..in_dims.len())
                        .map(|d| match reduced.iter().position(|&r| r == d) {
                            Some(k) => ridx[k],
                            None => idx[kept.iter().position(|&q| q == d).expect("kept dim")],
                        })
                        .collect()
                };
                let total: usize = red_dims.iter().product();
                if !(pairwise::blocked(*op, dt(0)) && total as i64 > pairwise::BLOCK) {
                    // Exact in any order, or short: the interpreter's left fold.
                    self.for_each_index_unrolled(&red_dims, &mut |s, ridx| {
                        let v = s.value(x, &full(ridx))?;
                        let a = s.b.use_var(acc);
                        let c = scalar::reduce_combine(s, *op, dt(0), a, v);
                        s.b.def_var(acc, c);
                        Ok(())
                    })?;
                    return Ok(self.b.use_var(acc));
                }
                // Long float sums/products: blocks of the innermost reduced axis, combined pairwise.
                let pw = pairwise::Pairwise::new(self, ty, *op);
                let (outer, m) = (&red_dims[..red_dims.len() - 1], red_dims[red_dims.len() - 1] as i64);
                self.for_each_index(outer, &mut |s, oidx| {
                    let (start, end) = (s.iconst(0), s.iconst(m));
                    s.for_step_by(start, end, pairwise::BLOCK, &mut |s, c| {
                        let bend = s.b.ins().iadd_imm_s(c, pairwise::BLOCK);
                        let bend = s.b.ins().smin(bend, end);
                        let init = scalar::reduce_identity(s, *op, dt(0));
                        s.b.def_var(acc, init);
                        s.for_range_from(c, bend, &mut |s, j| {
                            let mut ridx = oidx.to_vec();
                            ridx.push(j);
                            let v = s.value(x, &full(&ridx))?;
                            let a = s.b.use_var(acc);
                            let c = scalar::reduce_combine(s, *op, dt(0), a, v);
                            s.b.def_var(acc, c);
                            Ok(())
                        })?;
                        let a = s.b.use_var(acc);
                        pw.push(s, a)
                    })
                })?;
                let init = scalar::reduce_identity(self, *op, dt(0));
                pw.finish(self, init)
            }
            Prim::ArgReduce { op, axis, index_dtype } => self.arg_reduce(e, *op, *axis, *index_dtype, idx),
            Prim::Gather { axis, batch_dims, mode } => self.gather(e, *axis, *batch_dims, *mode, idx),
            Prim::StopGradient => self.value(ins[0], idx),
            Prim::DotGeneral { lhs_contracting, rhs_contracting, lhs_batch, rhs_batch, .. } => {
                self.small_dot(e, (lhs_contracting, rhs_contracting), (lhs_batch, rhs_batch), idx)
            }
            Prim::Cumulative { .. }
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
                Err(CompileError::Codegen(format!("{} reached a kernel (fusion bug)", e.prim.name())))
            }
        }
    }

    /// The lhs and rhs indices of a `dot_general` output index `idx` (batch, lhs free, rhs free),
    /// with the contracting positions at 0 (set per contracting index by the caller).
    pub(super) fn dot_operand_indices(
        &mut self,
        (l_rank, r_rank): (usize, usize),
        (lc, rc): (&[usize], &[usize]),
        (lb, rb): (&[usize], &[usize]),
        idx: &[Value],
    ) -> (Vec<Value>, Vec<Value>) {
        let free = |rank: usize, c: &[usize], b: &[usize]| -> Vec<usize> {
            (0..rank).filter(|d| !c.contains(d) && !b.contains(d)).collect()
        };
        let zero = self.iconst(0);
        let (mut li, mut ri) = (vec![zero; l_rank], vec![zero; r_rank]);
        let mut k = 0;
        for (&a, &b) in lb.iter().zip(rb) {
            (li[a], ri[b]) = (idx[k], idx[k]);
            k += 1;
        }
        for d in free(l_rank, lc, lb) {
            li[d] = idx[k];
            k += 1;
        }
        for d in free(r_rank, rc, rb) {
            ri[d] = idx[k];
            k += 1;
        }
        (li, ri)
    }

    /// A small `dot_general` (a kernel root, see [`crate::fusion::SMALL_DOT_CONTRACTION`] and
    /// [`crate::fusion::TINY_DOT_MACS`]): the
    /// output index is (batch, lhs free, rhs free); the value is `0 + l·r + l·r + ...` over the
    /// contracting indices in row-major order of `lhs_contracting` — the interpreter's fold for
    /// contractions of at most one pairwise block, the only ones fusion makes kernels, so bitwise
    /// equal — in the result dtype (operands converted first, as the interpreter does).
    fn small_dot(
        &mut self,
        e: &'a Eqn,
        (lc, rc): (&[usize], &[usize]),
        (lb, rb): (&[usize], &[usize]),
        idx: &[Value],
    ) -> R<Value> {
        let f = self.f;
        let (l, r) = (e.inputs[0], e.inputs[1]);
        let (lt, rt) = (f.var_type(l).clone(), f.var_type(r).clone());
        let (in_dt, out_dt) = (lt.dtype, f.dtype(e.outputs[0]));
        let (li, ri) = self.dot_operand_indices((lt.rank(), rt.rank()), (lc, rc), (lb, rb), idx);
        let acc = self.b.declare_var(clif_type(out_dt));
        let init = scalar::reduce_identity(self, kiln_ir::ReduceOp::Sum, out_dt);
        self.b.def_var(acc, init);
        let c_dims: Vec<usize> = lc.iter().map(|&d| lt.shape[d]).collect();
        self.for_each_index_unrolled(&c_dims, &mut |s, cidx| {
            let (mut li, mut ri) = (li.clone(), ri.clone());
            for (p, (&a, &b)) in lc.iter().zip(rc).enumerate() {
                (li[a], ri[b]) = (cidx[p], cidx[p]);
            }
            let x = s.value(l, &li)?;
            let y = s.value(r, &ri)?;
            let (x, y) = if in_dt == out_dt {
                (x, y)
            } else {
                (scalar::convert(s, in_dt, out_dt, x), scalar::convert(s, in_dt, out_dt, y))
            };
            let p = scalar::binary(s, kiln_ir::BinaryOp::Mul, out_dt, x, y)?;
            let a = s.b.use_var(acc);
            let sum = scalar::binary(s, kiln_ir::BinaryOp::Add, out_dt, a, p)?;
            s.b.def_var(acc, sum);
            Ok(())
        })?;
        Ok(self.b.use_var(acc))
    }

    fn dynamic_update_slice(&mut self, e: &'a Eqn, idx: &[Value]) -> R<Value> {
        let f = self.f;
        let (op, upd) = (e.inputs[0], e.inputs[1]);
        let in_dims = f.var_type(op).shape.dims().to_vec();
        let up_dims = f.var_type(upd).shape.dims().to_vec();
        let old = self.value(op, idx)?;
        if up_dims.contains(&0) {
            return Ok(old);
        }
        let mut inside = self.b.ins().iconst(types::I8, 1);
        let mut j = idx.to_vec();
        for d in 0..idx.len() {
            let s = self.index_at(e.inputs[2 + d], &[])?;
            let s = self.clamp(s, 0, (in_dims[d] - up_dims[d]) as i64);
            let rel = self.b.ins().isub(idx[d], s);
            let ge = self.b.ins().icmp_imm_s(IntCC::SignedGreaterThanOrEqual, rel, 0);
            let lt = self.b.ins().icmp_imm_s(IntCC::SignedLessThan, rel, up_dims[d] as i64);
            let both = self.b.ins().band(ge, lt);
            inside = self.b.ins().band(inside, both);
            j[d] = self.clamp(rel, 0, up_dims[d] as i64 - 1);
        }
        let new = self.value(upd, &j)?;
        Ok(self.b.ins().select(inside, new, old))
    }

    fn concatenate(&mut self, e: &'a Eqn, dim: usize, idx: &[Value]) -> R<Value> {
        let f = self.f;
        // (operand, offset, size) of the non-empty operands along `dim`.
        let mut parts = Vec::new();
        let mut off = 0usize;
        for &v in &e.inputs {
            let n = f.var_type(v).shape[dim];
            if n > 0 {
                parts.push((v, off, n));
            }
            off += n;
        }
        // Branch to the one operand that holds `idx` instead of evaluating every operand and
        // selecting: with inlined operands (cross products, `stack`s of `stack`s in the rigid-body
        // code) a select chain computes each part at every output element, k× the work for k parts
        // and k²× for nested concatenates (ant spring `jit(vmap(step))` at batch 1024: 2.7k → 4.6k
        // env-steps/s).
        let Some((&(last_v, last_off, last_n), init)) = parts.split_last() else {
            return Err(CompileError::Codegen("concatenate of empty operands reached a kernel".into()));
        };
        // A constant index (an unrolled small axis) names its operand at compile time.
        if let Some(k) = self.known(idx[dim]) {
            let &(v, off, n) = parts
                .iter()
                .find(|&&(_, off, n)| k < (off + n) as i64)
                .unwrap_or(&(last_v, last_off, last_n));
            return self.concatenate_part(v, dim, off, n, idx);
        }
        let var = self.b.declare_var(clif_type(f.dtype(e.outputs[0])));
        let merge = self.b.create_block();
        for &(v, off, n) in init {
            let here = self.b.ins().icmp_imm_s(IntCC::SignedLessThan, idx[dim], (off + n) as i64);
            let (this, next) = (self.b.create_block(), self.b.create_block());
            self.b.ins().brif(here, this, &[], next, &[]);
            self.b.switch_to_block(this);
            let x = self.concatenate_part(v, dim, off, n, idx)?;
            self.b.def_var(var, x);
            self.b.ins().jump(merge, &[]);
            self.b.switch_to_block(next);
        }
        let x = self.concatenate_part(last_v, dim, last_off, last_n, idx)?;
        self.b.def_var(var, x);
        self.b.ins().jump(merge, &[]);
        self.b.switch_to_block(merge);
        Ok(self.b.use_var(var))
    }

    /// Operand `v` of a concatenate, placed at `off..off + n` along `dim`, at output index `idx`
    /// (clamped into the operand, so a stray index never reads out of bounds).
    fn concatenate_part(&mut self, v: Var, dim: usize, off: usize, n: usize, idx: &[Value]) -> R<Value> {
        let mut j = idx.to_vec();
        j[dim] = match self.known(idx[dim]) {
            Some(k) => self.iconst((k - off as i64).clamp(0, n as i64 - 1)),
            None => {
                let rel = self.b.ins().iadd_imm_s(idx[dim], -(off as i64));
                self.clamp(rel, 0, n as i64 - 1)
            }
        };
        self.value(v, &j)
    }

    fn pad(&mut self, e: &'a Eqn, low: &[i64], interior: &[usize], idx: &[Value]) -> R<Value> {
        let f = self.f;
        let (x, p) = (e.inputs[0], e.inputs[1]);
        let pv = self.value(p, &[])?;
        let in_dims = f.var_type(x).shape.dims().to_vec();
        if in_dims.contains(&0) {
            return Ok(pv);
        }
        // A constant index (an unrolled small axis, as in the gradient's `pad`s of `x[:, k:k+1]`
        // slices summed into a `[B, 4]` cotangent) decides its axis at compile time: off the
        // operand the result is the pad value, and the operand is never evaluated (with inlined
        // operands a select would compute every part at every element, as for `concatenate`).
        let mut j = idx.to_vec();
        let mut dynamic = Vec::new();
        for d in 0..idx.len() {
            match self.known(idx[d]) {
                Some(k) => {
                    let (t, step) = (k - low[d], interior[d] as i64 + 1);
                    if t < 0 || t % step != 0 || t / step >= in_dims[d] as i64 {
                        return Ok(pv);
                    }
                    j[d] = self.iconst(t / step);
                }
                None => dynamic.push(d),
            }
        }
        if dynamic.is_empty() {
            return self.value(x, &j);
        }
        let mut valid = self.b.ins().iconst(types::I8, 1);
        for d in dynamic {
            let t = self.b.ins().iadd_imm_s(idx[d], -low[d]);
            let step = interior[d] as i64 + 1;
            let q = if step == 1 {
                t
            } else {
                // Only used where t ≥ 0 (else `valid` is false), so truncating division is fine.
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
            j[d] = self.clamp(q, 0, in_dims[d] as i64 - 1);
        }
        let v = self.value(x, &j)?;
        Ok(self.b.ins().select(valid, v, pv))
    }

    fn arg_reduce(
        &mut self,
        e: &'a Eqn,
        op: ArgOp,
        axis: usize,
        index_dtype: DType,
        idx: &[Value],
    ) -> R<Value> {
        let f = self.f;
        let x = e.inputs[0];
        let dt = f.dtype(x);
        let n = f.var_type(x).shape[axis];
        let ity = clif_type(index_dtype);
        if n == 0 {
            return Ok(self.b.ins().iconst(ity, 0));
        }
        let with_axis = |i: Value| {
            let mut j = idx[..axis].to_vec();
            j.push(i);
            j.extend_from_slice(&idx[axis..]);
            j
        };
        let zero = self.iconst(0);
        let first = self.value(x, &with_axis(zero))?;
        let (best_i, best_v, done) = (
            self.b.declare_var(types::I64),
            self.b.declare_var(clif_type(dt)),
            self.b.declare_var(types::I8),
        );
        self.b.def_var(best_i, zero);
        self.b.def_var(best_v, first);
        let no = self.b.ins().iconst(types::I8, 0);
        self.b.def_var(done, no);
        let nv = self.iconst(n as i64);
        self.for_range(nv, &mut |s, i| {
            let v = s.value(x, &with_axis(i))?;
            let (bi, bv, dn) = (s.b.use_var(best_i), s.b.use_var(best_v), s.b.use_var(done));
            let nan = scalar::is_nan(s, dt, v);
            // Strict comparisons keep the first of equal values; the first NaN wins (numpy).
            let better = scalar::compare(
                s,
                match op {
                    ArgOp::Max => kiln_ir::CompareOp::Gt,
                    ArgOp::Min => kiln_ir::CompareOp::Lt,
                },
                dt,
                v,
                bv,
            );
            let live = s.b.ins().icmp_imm_s(IntCC::Equal, dn, 0);
            let hit = s.b.ins().bor(nan, better);
            let take = s.b.ins().band(live, hit);
            let ni = s.b.ins().select(take, i, bi);
            let nv = s.b.ins().select(take, v, bv);
            let nd = s.b.ins().bor(dn, nan);
            s.b.def_var(best_i, ni);
            s.b.def_var(best_v, nv);
            s.b.def_var(done, nd);
            Ok(())
        })?;
        let bi = self.b.use_var(best_i);
        Ok(self.b.ins().ireduce(ity, bi))
    }

    fn gather(
        &mut self,
        e: &'a Eqn,
        axis: usize,
        batch_dims: usize,
        mode: IndexMode,
        r: &[Value],
    ) -> R<Value> {
        let f = self.f;
        let (x, ind) = (e.inputs[0], e.inputs[1]);
        let dt = f.dtype(x);
        let size = f.var_type(x).shape[axis] as i64;
        let nidx = f.var_type(ind).rank() - batch_dims;
        let fill = scalar::gather_fill(self, dt);
        if size == 0 {
            // No element to clamp to: both modes read the fill value (the interpreter's rule).
            return Ok(fill);
        }
        let ind_idx: Vec<Value> = r[..batch_dims].iter().chain(&r[axis..axis + nidx]).copied().collect();
        let in_bounds = self.indices_within(ind, size);
        let (clamped, ok) = if in_bounds {
            (self.index_at(ind, &ind_idx)?, None)
        } else {
            self.clamped_index(ind, &ind_idx, size, mode == IndexMode::FillOrDrop)?
        };
        let mut j: Vec<Value> = r[..axis].to_vec();
        j.push(clamped);
        j.extend_from_slice(&r[axis + nidx..]);
        let v = self.value(x, &j)?;
        match (mode, ok) {
            (IndexMode::Clip, _) | (IndexMode::FillOrDrop, None) => Ok(v),
            (IndexMode::FillOrDrop, Some(ok)) => Ok(self.b.ins().select(ok, v, fill)),
        }
    }

    /// The index `ind[idx]` clamped into `0..size` (`size > 0`), and when `want_ok` whether it
    /// was in range (i8 0/1), with a branch for the common case: an index already in range is
    /// used as it is (one unsigned compare), so the clamp's compares and moves, and their
    /// registers, stay off the hot path of a gather whose indices are all valid. An index that
    /// wraps negative values (`select(lt(i, 0), add(i, n), i)`, as numpy-style indexing traces)
    /// is tested on `i` itself, which the wrap leaves unchanged when in range.
    fn clamped_index(
        &mut self,
        ind: Var,
        idx: &[Value],
        size: i64,
        want_ok: bool,
    ) -> R<(Value, Option<Value>)> {
        let probe = match self.negative_wrap_operand(ind) {
            Some(raw) => self.index_at(raw, idx)?,
            None => self.index_at(ind, idx)?,
        };
        let (slow, join) = (self.b.create_block(), self.b.create_block());
        // Laid out after the loop: the in-range path falls through.
        self.b.set_cold_block(slow);
        let clamped = self.b.append_block_param(join, types::I64);
        let ok = want_ok.then(|| self.b.append_block_param(join, types::I8));
        let in_range = self.b.ins().icmp_imm_u(IntCC::UnsignedLessThan, probe, size);
        let mut fast = vec![probe.into()];
        if want_ok {
            fast.push(self.b.ins().iconst(types::I8, 1).into());
        }
        self.b.ins().brif(in_range, join, &fast, slow, &[]);
        self.b.switch_to_block(slow);
        let i = self.index_at(ind, idx)?;
        let mut args = vec![self.clamp(i, 0, size - 1).into()];
        if want_ok {
            let ge = self.b.ins().icmp_imm_s(IntCC::SignedGreaterThanOrEqual, i, 0);
            let lt = self.b.ins().icmp_imm_s(IntCC::SignedLessThan, i, size);
            args.push(self.b.ins().band(ge, lt).into());
        }
        self.b.ins().jump(join, &args);
        self.b.switch_to_block(join);
        Ok((clamped, ok))
    }

    /// The value of an integer scalar constant of the kernel's function, or of a fused
    /// `broadcast_in_dim` of one.
    fn int_scalar(&self, v: Var) -> Option<i64> {
        let f = self.f;
        let v = match self.inline[v.index()].map(|p| &f.eqns[p]) {
            Some(e) if matches!(e.prim, Prim::BroadcastInDim { .. }) => e.inputs[0],
            Some(_) => return None,
            None => v,
        };
        if f.var_type(v).rank() != 0 {
            return None;
        }
        let (lo, hi) = f.consts.iter().find(|c| c.var == v).and_then(|c| int_range(&c.value))?;
        (lo == hi).then_some(lo)
    }

    /// `i` when the kernel computes `ind` as `select(lt(i, 0), _, i)` (fused in, `0` a constant
    /// scalar or a broadcast of one): numpy-style indexing's wrap of negative indices, which
    /// leaves every `i >= 0` as it is.
    fn negative_wrap_operand(&self, ind: Var) -> Option<Var> {
        let f = self.f;
        let eqn = |v: Var| self.inline[v.index()].map(|p| &f.eqns[p]);
        let e = eqn(ind)?;
        let (Prim::Select, &[p, _, o]) = (&e.prim, &e.inputs[..]) else { return None };
        let lt = eqn(p)?;
        let wraps = matches!(lt.prim, Prim::Compare(kiln_ir::CompareOp::Lt))
            && lt.inputs[0] == o
            && self.int_scalar(lt.inputs[1]) == Some(0);
        wraps.then_some(o)
    }
}

#[cfg(test)]
mod tests {
    use super::super::Jit;
    use kiln_ir::*;

    /// W2's spring step as one row group: `d = x[b] - x[a]` (rows of 2), then `|d|² =
    /// reduce_sum(d * d)` reading `d` at its own row. The second member takes both elements of `d`
    /// from the first member's registers ([`super::Known`]): no load from the output region, and
    /// each gathered element and index is loaded once.
    #[test]
    fn a_row_group_reuses_stored_and_loaded_elements_in_registers() {
        let mut f = Function::new();
        let x = f.add_param(TensorType::new(DType::F32, Shape::new(&[8, 2])));
        // Spring ends: constants in range, so the gathers need no clamp (no branch, one block).
        let ia = f.add_const(Array::from_vec(&[12], vec![0i32, 1, 2, 3, 4, 5, 6, 0, 1, 2, 3, 4]));
        let ib = f.add_const(Array::from_vec(&[12], vec![1i32, 2, 3, 4, 5, 6, 7, 2, 3, 4, 5, 6]));
        let gather = Prim::Gather { axis: 0, batch_dims: 0, mode: IndexMode::Clip };
        let g1 = f.push(gather.clone(), &[x, ib], None).unwrap()[0];
        let g0 = f.push(gather, &[x, ia], None).unwrap()[0];
        let d = f.push(Prim::Binary(BinaryOp::Sub), &[g1, g0], None).unwrap()[0];
        let dd = f.push(Prim::Binary(BinaryOp::Mul), &[d, d], None).unwrap()[0];
        let l = f.push(Prim::Reduce { op: ReduceOp::Sum, axes: vec![1] }, &[dd], None).unwrap()[0];
        f.outputs.extend([d, l]);
        let mut inline = vec![None; f.vars.len()];
        for (var, eqn) in [(g1, 0), (g0, 1), (dd, 3)] {
            inline[var.index()] = Some(eqn);
        }
        let mut jit = Jit::new_with_dump(true).unwrap();
        jit.kernel(&f, &[2, 4], &inline, &|v| v).unwrap();
        let (_, _, text) = jit.finish().unwrap();
        let ir = text[0].split("; machine code").next().unwrap();
        let loads = |what: &str| ir.lines().filter(|l| l.contains(what)).count();
        assert_eq!(loads("load.f32 notrap region1"), 0, "{ir}");
        assert_eq!(loads("load.f32 notrap region0"), 4, "{ir}");
        assert_eq!(loads("load.i32 notrap region0"), 2, "{ir}");
    }
}
