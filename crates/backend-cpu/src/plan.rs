//! Lowering a [`Function`] to steps over buffers: fusion decides the kernels, each kernel or runtime
//! step gets its operands' locations, and intermediate buffers are placed in one arena by liveness
//! (first fit over freed blocks), so buffers whose lifetimes do not overlap share memory. A computed
//! output is written by its step straight into the caller's buffer (`Loc::Out`), never through the
//! arena: a scan body thus writes its carries and `ys` where the loop wants them.

use crate::codegen::Jit;
use crate::cost::{self, Traffic};
use crate::dump::{self, PlanText};
use crate::fusion::{self, Role};
use crate::grouping::{self, Item};
use crate::pipeline;
use crate::runtime::control::{Control, SubCompiler};
use crate::runtime::cumulative::CumulativePlan;
use crate::runtime::indexing::{ScatterPlan, SegmentSumPlan};
use crate::runtime::parallel::Threads;
use crate::runtime::pipeline::Pipeline;
use crate::runtime::sort::SortPlan;
use crate::runtime::{Aligned, Executable, Loc, Op, Step, dot::DotPlan};
use crate::{CompileError, CompileOptions};
use kiln_ir::{Array, Function, Prim, ScatterOp, TensorType, Var};
use std::path::Path;
use std::sync::Mutex;
use std::time::Instant;

/// Integer operations of one threefry-2x32 block: 20 rounds of add, rotate, xor; 5 key injections
/// of 3 adds; the initial 2 adds and the key schedule's 2 xors.
const THREEFRY_OPS: usize = 20 * 3 + 5 * 3 + 2 + 2;

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
    traffic: Traffic,
    /// A runtime step's equation.
    eqn: Option<usize>,
}

fn bytes(t: &TensorType) -> usize {
    t.shape.size() * t.dtype.size_bytes()
}

/// The runtime lowering of a non-kernel primitive: the op, its scratch bytes and its traffic (a
/// control step's own is zero: [`Executable::cost_report`] adds its bodies').
fn runtime_op(
    f: &Function,
    prim: &Prim,
    ins: &[Var],
    outs: &[Var],
    sub: &SubCompiler<'_>,
) -> Result<(Op, usize, Traffic), CompileError> {
    let ty = |v: &Var| f.var_type(*v).clone();
    let in_types: Vec<TensorType> = ins.iter().map(ty).collect();
    let out_types: Vec<TensorType> = outs.iter().map(ty).collect();
    let (in_bytes, out_bytes): (usize, usize) =
        (in_types.iter().map(bytes).sum(), out_types.iter().map(bytes).sum());
    let elems = |t: &TensorType| t.shape.size();
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
            // Operands read in place cost one read; packed ones are also written and read again.
            let t = Traffic::new(in_bytes + out_bytes + d.packing_bytes(), d.flops());
            Ok((Op::Dot(d), s, t))
        }
        Prim::Threefry2x32 => {
            let n = elems(&out_types[0]);
            Ok((Op::Threefry { n, chunks: 1 }, 0, Traffic::new(in_bytes + out_bytes, n * THREEFRY_OPS)))
        }
        Prim::Scan { .. }
        | Prim::WhileLoop { .. }
        | Prim::Cond { .. }
        | Prim::Call { .. }
        | Prim::Checkpoint { .. }
        | Prim::CustomJvpCall { .. }
        | Prim::CustomVjpCall { .. } => {
            let c = Control::new(prim, &in_types, &out_types, sub)?;
            let s = c.scratch_bytes();
            Ok((Op::Control(Box::new(c)), s, Traffic::default()))
        }
        Prim::Sort { dimension, num_keys } => {
            let p = SortPlan::new(*dimension, *num_keys, &in_types)?;
            let s = p.scratch_bytes();
            Ok((Op::Sort(p), s, Traffic::new(in_bytes + out_bytes, 0)))
        }
        Prim::Scatter { op, axis, batch_dims, mode } => {
            let p = ScatterPlan::new(*op, *axis, *batch_dims, *mode, &in_types)?;
            // Copy the operand, then read every update (and index) and write its row.
            let updates = &in_types[2];
            let flops = match op {
                ScatterOp::Add => elems(updates),
                ScatterOp::Set => 0,
            };
            Ok((Op::Scatter(p), 0, Traffic::new(in_bytes + out_bytes + bytes(updates), flops)))
        }
        Prim::SegmentSum { num_segments } => {
            let p = SegmentSumPlan::new(*num_segments, &in_types)?;
            // Zero the output, then read and add every data row into its segment's row.
            let data = &in_types[0];
            Ok((Op::SegmentSum(p), 0, Traffic::new(in_bytes + out_bytes + 2 * bytes(data), elems(data))))
        }
        Prim::Cumulative { op, axis, reverse } => {
            let p = CumulativePlan::new(*op, *axis, *reverse, &in_types[0])?;
            let n = p.elements();
            Ok((Op::Cumulative(p), 0, Traffic::new(in_bytes + out_bytes, n)))
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

/// Compiles `f` to native code with [`CompileOptions::default`] (which reads `KILN_DUMP` and
/// `KILN_NUM_THREADS`).
///
/// # Errors
/// [`CompileError::Invalid`] when `f` fails [`kiln_ir::verify`] (checked first: the backend trusts
/// every declared type); [`CompileError::Unsupported`] for primitives without a lowering yet;
/// [`CompileError::OutOfMemory`] when its intermediates or a result could not be allocated; never
/// a wrong result.
pub fn compile(f: &Function) -> Result<Executable, CompileError> {
    compile_with(f, &CompileOptions::default())
}

/// Compiles `f` to native code with `options` (thread count, debug dump).
///
/// ```
/// use kiln_backend_cpu::{CompileOptions, compile_with};
/// use kiln_ir::{Array, BinaryOp, DType, Function, Prim, TensorType};
/// let mut f = Function::new();
/// let x = f.add_param(TensorType::new(DType::F32, [3]));
/// let y = f.push(Prim::Binary(BinaryOp::Add), &[x, x], None)?[0];
/// f.outputs.push(y);
/// let exe = compile_with(&f, &CompileOptions { threads: Some(1), ..CompileOptions::default() })?;
/// let out = exe.run(&[Array::from_vec(&[3], vec![1.0f32, 2.0, 3.0])])?;
/// assert!(out[0].bitwise_eq(&Array::from_vec(&[3], vec![2.0f32, 4.0, 6.0])));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Errors
/// As [`compile`]. A dump that cannot be written is reported on stderr, never an error.
pub fn compile_with(f: &Function, options: &CompileOptions) -> Result<Executable, CompileError> {
    let start = Instant::now();
    kiln_ir::verify(f).map_err(CompileError::Invalid)?;
    let threads = Threads::new(options.threads);
    let folder = options.dump_dir.as_ref().map(|d| dump::new_folder(d, f));
    let exe = compile_at(
        f,
        &threads,
        options.min_task_work,
        options.multi_output,
        folder.as_deref(),
        start,
        Codegen::Kernels,
        true,
    )?;
    check_memory(&exe)?;
    Ok(exe)
}

/// Refuses an executable whose arena (intermediates, scratch, control-flow frames) or one of whose
/// results cannot be allocated ([`kiln_ir::TensorType::check_allocatable`]): calling it would abort
/// the process in the allocator.
fn check_memory(exe: &Executable) -> Result<(), CompileError> {
    // Results first: the arena also holds a spill slot per result (`runtime/donate.rs`).
    for (k, ty) in exe.output_types.iter().enumerate() {
        ty.check_allocatable()
            .map_err(|m| CompileError::OutOfMemory(format!("the compiled function's output {k}: {m}")))?;
    }
    let arena = exe.arena_bytes;
    if arena >= kiln_ir::ALLOCATION_PROBE_BYTES && !kiln_ir::can_allocate(arena) {
        let size = kiln_ir::human_bytes(arena);
        let message = format!(
            "the compiled function needs {size} for its intermediates, more than this process can allocate"
        );
        return Err(CompileError::OutOfMemory(message));
    }
    Ok(())
}

/// The [`CostReport`](crate::CostReport) that [`compile`] would give for `f`, without generating code:
/// fusion and planning only, a small fraction of a compile (no Cranelift). The simplifier's result
/// is kept only if this estimate of it is no worse than the input's (kiln's `jit`). Its
/// `compile_time` is the estimate's own.
///
/// ```
/// use kiln_backend_cpu::{compile, estimate};
/// use kiln_ir::{BinaryOp, DType, Function, Prim, TensorType};
/// let mut f = Function::new();
/// let x = f.add_param(TensorType::new(DType::F32, [1000]));
/// let y = f.push(Prim::Binary(BinaryOp::Mul), &[x, x], None)?[0];
/// f.outputs.push(y);
/// let (e, c) = (estimate(&f)?, compile(&f)?.cost_report());
/// assert_eq!((e.kernels, e.bytes_moved, e.flops), (c.kernels, c.bytes_moved, c.flops));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Errors
/// As [`compile`], for the errors found before code generation.
pub fn estimate(f: &Function) -> Result<crate::CostReport, CompileError> {
    // Grouped as `compile` would group (`KILN_MULTI_OUTPUT`).
    let multi_output = CompileOptions::from_env().multi_output;
    kiln_ir::verify(f).map_err(CompileError::Invalid)?;
    let exe = compile_at(f, &Threads::Serial, None, multi_output, None, Instant::now(), Codegen::Skip, true)?;
    Ok(exe.cost_report())
}

/// Whether [`compile_at`] generates the kernels' code ([`estimate`] skips it: its executable only
/// reports costs and is never run).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Codegen {
    Kernels,
    Skip,
}

/// Rows a kernel step splits over threads: the outputs' outer axis; a segment kernel's data rows.
fn kernel_rows(f: &Function, root: usize) -> i64 {
    let e = &f.eqns[root];
    let rows_of = |t: &TensorType| t.shape.dims().first().map_or(1, |&n| n as i64);
    match e.prim {
        Prim::SegmentSum { .. } => rows_of(f.var_type(e.inputs[0])),
        _ => rows_of(f.var_type(e.outputs[0])),
    }
}

/// The equations inlined into the kernel rooted at `root`, in program order.
fn inlined_eqns(f: &Function, root: usize, inline: &[Option<usize>]) -> Vec<usize> {
    let mut found = Vec::new();
    let mut stack = vec![root];
    while let Some(i) = stack.pop() {
        for v in &f.eqns[i].inputs {
            if let Some(p) = inline[v.index()]
                && !found.contains(&p)
            {
                found.push(p);
                stack.push(p);
            }
        }
    }
    found.sort_unstable();
    found
}

/// For each variable computed by a kernel that is only a reshape or a `stop_gradient` (the
/// identity once differentiation is done) of a materialized value (no producer inlined, not a
/// function output), the materialized variable it reads (through chains of such ops); `None` for
/// every other variable.
fn buffer_aliases(f: &Function, roles: &[Role], inline: &[Option<usize>]) -> Vec<Option<Var>> {
    let mut is_output = vec![false; f.vars.len()];
    for v in &f.outputs {
        is_output[v.index()] = true;
    }
    let mut alias: Vec<Option<Var>> = vec![None; f.vars.len()];
    for (i, e) in f.eqns.iter().enumerate() {
        let (src, out) = match (&e.prim, e.inputs.first(), e.outputs.first()) {
            (Prim::Reshape { .. } | Prim::StopGradient, Some(&src), Some(&out)) => (src, out),
            _ => continue,
        };
        if roles[i] == Role::Kernel && inline[src.index()].is_none() && !is_output[out.index()] {
            alias[out.index()] = Some(alias[src.index()].unwrap_or(src));
        }
    }
    alias
}

/// [`compile_with`] with the pool resolved and the dump folder chosen (`None`: no dump); control-flow
/// bodies are compiled through here too, into sub-folders of the dump. `top`: a function the user
/// calls (which may be given donated buffers), not a control-flow body.
#[allow(clippy::too_many_arguments)]
fn compile_at(
    f: &Function,
    threads: &Threads,
    min_task: Option<u64>,
    multi_output: bool,
    folder: Option<&Path>,
    start: Instant,
    codegen: Codegen,
    top: bool,
) -> Result<Executable, CompileError> {
    let roles = fusion::assign(f);
    let mut inline = vec![None; f.vars.len()];
    for (i, e) in f.eqns.iter().enumerate() {
        if roles[i] == Role::Inline {
            inline[e.outputs[0].index()] = Some(i);
        }
    }
    let mut text = folder.map(|_| PlanText::new(f));
    let thread_count = threads.count();
    // A reshape of a materialized value needs no step: row-major data already has the new shape,
    // so its result shares its operand's buffer. `alias[v]`: the variable whose buffer `v` reads.
    // (On the ant's physics step, one `[128,9,3,3] → [128,81]` copy kernel was 2 % of the time:
    // its index math divides per element.) Likewise a `stop_gradient` read by several kernels (the
    // epidemic day's detached stage was a 400 KB copy per day). A function output keeps its copy
    // into the caller's buffer.
    let aliases = buffer_aliases(f, &roles, &inline);
    let resolve = |v: &Var| aliases[v.index()].unwrap_or(*v);
    // 1. Steps, in the order `grouping` plans them (kernels with the same rows may share a step).
    let aliased = |i: usize| aliases[f.eqns[i].outputs[0].index()].is_some();
    // Whether a kernel with these roots runs on one thread (`Op::Kernel`/`Op::SegmentKernel`).
    let serial = |roots: &[usize]| {
        let units = roots.iter().fold(0u64, |a, &r| {
            let own = crate::codegen::kernel_leaves(f, r, &inline).len();
            a.saturating_add(cost::kernel_work(f, r, &inlined_eqns(f, r, &inline), own).units)
        });
        let rows = kernel_rows(f, roots[0]);
        let chunks = cost::kernel_chunks(units, rows, thread_count, min_task);
        chunks < 2 || rows < 2 * chunks as i64
    };
    let items = grouping::schedule(f, &roles, &inline, &aliased, &|v| resolve(&v), &serial, multi_output);
    let mut jit = Jit::new_with_dump(folder.is_some())?;
    let mut drafts = Vec::new();
    for item in items {
        let step = drafts.len();
        let i = match item {
            Item::Kernel(roots) => {
                let (handle, leaves) = match codegen {
                    Codegen::Kernels => jit.kernel(f, &roots, &inline, &|v| resolve(&v))?,
                    // No code: a handle no step will ever call (the executable is never run).
                    Codegen::Skip => (usize::MAX, crate::codegen::kernel_table(f, &roots, &inline)),
                };
                let leaves: Vec<Var> = leaves.iter().map(resolve).collect();
                let e = &f.eqns[roots[0]];
                let rows = kernel_rows(f, roots[0]);
                // Work and traffic are each member's own, as if it were a kernel alone.
                let members: Vec<(usize, Vec<usize>, Vec<Var>, cost::KernelWork)> = roots
                    .iter()
                    .map(|&root| {
                        let inlined = inlined_eqns(f, root, &inline);
                        let own: Vec<Var> =
                            crate::codegen::kernel_leaves(f, root, &inline).iter().map(resolve).collect();
                        let work = cost::kernel_work(f, root, &inlined, own.len());
                        (root, inlined, own, work)
                    })
                    .collect();
                let units = members.iter().fold(0u64, |a, m| a.saturating_add(m.3.units));
                let chunks = cost::kernel_chunks(units, rows, thread_count, min_task);
                let mut traffic = Traffic::default();
                if let Some(t) = &mut text
                    && roots.len() > 1
                {
                    t.section(&format!("step {step}: a kernel with {} outputs (members below)", roots.len()));
                }
                let segment = matches!(e.prim, Prim::SegmentSum { .. });
                for (root, inlined, own, work) in &members {
                    if let Some(t) = &mut text {
                        t.kernel(
                            f,
                            step,
                            handle,
                            &jit.symbol(handle),
                            *root,
                            inlined,
                            own,
                            rows,
                            work.units,
                            chunks,
                        );
                    }
                    let out = bytes(f.var_type(f.eqns[*root].outputs[0]));
                    // Members of a segment group share one loop over the data rows: their leaves
                    // are read once, below.
                    let read: usize =
                        if segment { 0 } else { own.iter().map(|v| bytes(f.var_type(*v))).sum() };
                    traffic = traffic.add(Traffic { bytes: (read + out) as u64, flops: work.flops });
                }
                let op = match &e.prim {
                    // Each output zeroed, then every row's segment read and written
                    // (`Op::SegmentKernel`), members sharing the loop (`grouping::find_segment_sibling`).
                    Prim::SegmentSum { num_segments } => {
                        let ids = resolve(&e.inputs[1]);
                        let ids = leaves.iter().position(|v| *v == ids).ok_or_else(|| {
                            CompileError::Codegen("segment kernel without its ids leaf (fusion bug)".into())
                        })?;
                        let read: usize = leaves.iter().map(|v| bytes(f.var_type(*v))).sum();
                        let out_bytes: Box<[usize]> =
                            roots.iter().map(|&r| bytes(f.var_type(f.eqns[r].outputs[0]))).collect();
                        // Reads, the zeroing, each row's read-modify-write of its segment.
                        let rmw = 2 * bytes(f.var_type(e.inputs[0])) * roots.len();
                        traffic.bytes += (read + out_bytes.iter().sum::<usize>() + rmw) as u64;
                        Op::SegmentKernel {
                            kernel: handle,
                            rows,
                            chunks,
                            ids,
                            segments: *num_segments,
                            out_bytes,
                        }
                    }
                    _ => {
                        // Which leaves are read only in the written row: a control-flow body's
                        // split scan asks (`Executable::row_split`), and a top-level function's
                        // pipelined chain (`crate::pipeline`).
                        let local = |v: Var| {
                            members
                                .iter()
                                .all(|m| grouping::row_local(f, m.0, &inline, &[v], &|w| resolve(&w)))
                        };
                        let row_local = leaves.iter().map(|&v| local(v)).collect();
                        // How far from the written row each leaf is read: a scan body of such
                        // kernels runs as row ranges with halos (`Executable::halo_split`).
                        let reach = |v: Var| {
                            members.iter().try_fold(0, |r, m| {
                                Some(r.max(grouping::row_reach(f, m.0, &inline, v, &|w| resolve(&w))?))
                            })
                        };
                        let row_reach = leaves.iter().map(|&v| reach(v)).collect();
                        Op::Kernel { kernel: handle, rows, chunks, row_local, row_reach, units }
                    }
                };
                drafts.push(Draft {
                    op,
                    inputs: leaves,
                    outputs: roots.iter().map(|&r| f.eqns[r].outputs[0]).collect(),
                    scratch_bytes: 0,
                    traffic,
                    eqn: None,
                });
                continue;
            }
            Item::Eqn(i) => i,
        };
        let e = &f.eqns[i];
        match roles[i] {
            // Never planned as a step of its own.
            Role::Inline => {}
            // A reshape or stop_gradient sharing its operand's buffer.
            Role::Kernel => {
                if let Some(t) = &mut text {
                    let (o, src) = (e.outputs[0], resolve(&e.outputs[0]));
                    t.section(&format!(
                        "(no step) v{}:{} = {} of v{}: shares its buffer",
                        o.index(),
                        f.var_type(o),
                        e.prim.name(),
                        src.index()
                    ));
                }
            }
            Role::Runtime => {
                let sub = |g: &Function, label: &str| {
                    let at = folder.map(|d| dump::sub_folder(d, step, e.prim.name(), label));
                    compile_at(
                        g,
                        threads,
                        min_task,
                        multi_output,
                        at.as_deref(),
                        Instant::now(),
                        codegen,
                        false,
                    )
                };
                let (mut op, mut scratch_bytes, traffic) =
                    runtime_op(f, &e.prim, &e.inputs, &e.outputs, &sub)?;
                // Runtime routines that split over threads, by the kernels' work threshold.
                match &mut op {
                    Op::SegmentSum(p) => {
                        let (work, rows) = p.work();
                        p.set_chunks(cost::kernel_chunks(work, rows, thread_count, min_task));
                    }
                    Op::Threefry { n, chunks } => {
                        let work = (*n * THREEFRY_OPS) as u64;
                        *chunks = cost::kernel_chunks(work, *n as i64, thread_count, min_task);
                    }
                    Op::Dot(d) => {
                        let (work, rows) = d.work();
                        d.set_chunks(cost::kernel_chunks(work, rows, thread_count, min_task));
                    }
                    // A long lane with one integer key radix sorts in position ranges.
                    Op::Sort(s) => {
                        let (work, rows) = s.work();
                        s.set_chunks(cost::kernel_chunks(work, rows, thread_count, min_task));
                    }
                    // A scan whose rows evolve independently splits them for the whole loop;
                    // other control steps split inside their bodies.
                    Op::Control(c) => {
                        c.plan_split(thread_count, min_task);
                        scratch_bytes = c.scratch_bytes();
                    }
                    // Not split here (scatter and cumulative scans are sequential by their
                    // semantics here).
                    Op::Kernel { .. } | Op::SegmentKernel { .. } | Op::Cumulative(_) | Op::Scatter(_) => {}
                }
                if let Some(t) = &mut text {
                    let note = match &op {
                        Op::Control(c) => {
                            let subs: Vec<String> = c
                                .subs()
                                .iter()
                                .map(|(label, x)| {
                                    let r = x.cost_report();
                                    format!(
                                        "{label} ({} kernels, {} runtime steps): step{step}-{}-{label}/",
                                        r.kernels,
                                        r.runtime_steps,
                                        e.prim.name()
                                    )
                                })
                                .collect();
                            format!("runs {}; {}", c.trips(), subs.join("; "))
                        }
                        Op::Dot(d) => d.describe(),
                        Op::Sort(s) if s.chunks() > 1 => {
                            format!("radix sort, positions in {} ranges", s.chunks())
                        }
                        _ => String::new(),
                    };
                    t.runtime(f, step, i, &note);
                }
                drafts.push(Draft {
                    op,
                    inputs: e.inputs.iter().map(resolve).collect(),
                    outputs: e.outputs.to_vec(),
                    scratch_bytes,
                    traffic,
                    eqn: Some(i),
                });
            }
        }
    }
    // Steps whose rows a scan consumes as they are computed, on another thread (`crate::pipeline`).
    // Top level only: a body's call may already run inside a rayon job (a split scan's range),
    // whose queue the loop's waits would then take other work from.
    let chains = if thread_count > 1 && top {
        let views: Vec<pipeline::StepView> = drafts
            .iter()
            .map(|d| pipeline::StepView {
                op: &d.op,
                inputs: &d.inputs,
                outputs: &d.outputs,
                scratch_bytes: d.scratch_bytes,
                eqn: d.eqn,
            })
            .collect();
        pipeline::find(f, &views)
    } else {
        Vec::new()
    };
    // 2. Liveness: the last step reading each variable (outputs live in the caller's buffers).
    let mut last_use = vec![None; f.vars.len()];
    for (s, d) in drafts.iter().enumerate() {
        for v in &d.inputs {
            last_use[v.index()] = Some(s);
        }
    }
    // A pipelined chain's operands and results stay live until its scan ends: the chain runs
    // while the scan does.
    for c in &chains {
        for (d, _) in drafts[c.first..c.scan].iter().zip(&c.members).filter(|(_, m)| **m) {
            for v in d.inputs.iter().chain(&d.outputs) {
                last_use[v.index()] = last_use[v.index()].max(Some(c.scan));
            }
        }
    }
    // Each computed output is written straight into the caller's buffer by its step: the first
    // output slot holding that variable (a repeat is copied from it at the end).
    let mut out_slot: Vec<Option<usize>> = vec![None; f.vars.len()];
    for (k, v) in f.outputs.iter().enumerate().rev() {
        out_slot[v.index()] = Some(k);
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
    if let Some(t) = &mut text {
        for c in &chains {
            let p = Pipeline::new(c);
            let steps: Vec<String> =
                (c.first..c.scan).filter(|&i| c.members[i - c.first]).map(|i| i.to_string()).collect();
            t.section(&format!(
                "pipelined: steps {} run in blocks of {} rows on another thread while step {}'s scan \
                 consumes them (when the call has a second thread)",
                steps.join(", "),
                p.block,
                c.scan
            ));
        }
        t.section("buffers");
    }
    let mut arena = Arena::default();
    let mut steps = Vec::with_capacity(drafts.len());
    for (s, d) in drafts.into_iter().enumerate() {
        // Outputs are placed before inputs are freed: a step never writes over what it reads.
        for v in &d.outputs {
            loc[v.index()] = Some(match out_slot[v.index()] {
                Some(k) => Loc::Out(k),
                None => Loc::Arena(arena.alloc(bytes(f.var_type(*v)))),
            });
        }
        // Scratch is only live during the step; a step without any takes no arena space.
        let scratch = if d.scratch_bytes > 0 { arena.alloc(d.scratch_bytes) } else { 0 };
        if d.scratch_bytes > 0 {
            arena.release(scratch, d.scratch_bytes);
        }
        let at =
            |v: &Var| loc[v.index()].ok_or_else(|| CompileError::Codegen(format!("{v:?} has no buffer")));
        let inputs = d.inputs.iter().map(at).collect::<Result<Vec<_>, _>>()?;
        let outputs = d.outputs.iter().map(at).collect::<Result<Vec<_>, _>>()?;
        if let Some(t) = &mut text {
            t.buffers(s, &inputs, &outputs, (scratch, d.scratch_bytes));
        }
        let dead = d
            .inputs
            .iter()
            .filter(|v| last_use[v.index()] == Some(s))
            .chain(d.outputs.iter().filter(|v| last_use[v.index()].is_none()));
        let mut freed: Vec<Var> = Vec::new();
        for v in dead {
            if let Some(Loc::Arena(off)) = loc[v.index()]
                && !freed.contains(v)
            {
                arena.release(off, bytes(f.var_type(*v)));
                freed.push(*v);
            }
        }
        steps.push(Step::new(d.op, inputs, outputs, scratch, d.traffic));
    }
    let outputs = f
        .outputs
        .iter()
        .map(|v| {
            loc[resolve(v).index()]
                .ok_or_else(|| CompileError::Codegen(format!("output {v:?} has no buffer")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    // A user-called function gets a spill slot per output written by a step, above everything else
    // in the arena: where that output is computed when its donated buffer is still read by that or a
    // later step (`runtime/donate.rs`). Untouched otherwise, so its pages are never faulted in.
    let spill: Vec<Option<usize>> = outputs
        .iter()
        .enumerate()
        .map(|(k, l)| match l {
            Loc::Out(j) if top && *j == k => {
                let size = bytes(f.var_type(f.outputs[k])).max(1).next_multiple_of(ALIGN);
                arena.top += size;
                Some(arena.top - size)
            }
            _ => None,
        })
        .collect();
    let (kernels, code, clif_text) = jit.finish()?;
    // Kernel k's Cranelift IR text at index k (empty unless dumping).
    let clif: Vec<Option<String>> = (0..kernels.len()).map(|k| clif_text.get(k).cloned()).collect();
    let mut exe = Executable {
        param_types: f.param_types(),
        output_types: f.output_types(),
        steps,
        outputs,
        spill,
        const_ptrs: consts.iter().map(Aligned::ptr).collect(),
        consts,
        arena_bytes: arena.top,
        kernels,
        pool: Mutex::new(Vec::new()),
        threads: threads.clone(),
        parallel: false,
        pipelines: chains.iter().map(Pipeline::new).collect(),
        compile_time: Default::default(),
        _code: code,
    };
    exe.parallel = !exe.pipelines.is_empty() || exe.steps.iter().any(|s| s.op.parallel());
    exe.compile_time = start.elapsed();
    if let (Some(folder), Some(t)) = (folder, text) {
        let plan = t.finish(&exe, &exe.outputs);
        dump::write(folder, f, &plan, &clif);
    }
    Ok(exe)
}
