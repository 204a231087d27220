//! Running a compiled plan: resolving buffer locations to pointers, calling kernels and runtime
//! routines, and the arena pool. No interpreter is involved at run time.

pub(crate) mod control;
pub(crate) mod cumulative;
mod donate;
pub(crate) mod dot;
mod fresh;
pub(crate) mod halo;
pub(crate) mod indexing;
pub(crate) mod math;
pub(crate) mod parallel;
pub(crate) mod pipeline;
pub(crate) mod serial;
pub(crate) mod sort;
pub(crate) mod threefry;

pub use donate::Arg;

use crate::codegen::{Code, KernelFn, MAX_KERNEL_OPERANDS};
use crate::cost::{CostReport, Traffic};
use kiln_ir::{Array, TensorType};
use std::mem::MaybeUninit;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::time::Duration;

/// Where a value lives during a call.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Loc {
    /// The `i`-th argument, read in place.
    Param(usize),
    /// The `i`-th constant, owned by the executable.
    Const(usize),
    /// At this byte offset of the call's arena.
    Arena(usize),
    /// In the caller's buffer for output `k`, written there by the step that computes it (so no
    /// final copy is needed, and a scan body writes its carries and `ys` straight into the loop's
    /// buffers).
    Out(usize),
}

/// What one step does.
pub(crate) enum Op {
    /// A JIT kernel: table = inputs, then the output.
    Kernel {
        /// Index into `Executable::kernels`.
        kernel: usize,
        /// Length of the output's outermost axis (1 for a rank-0 output).
        rows: i64,
        /// Row ranges the rows are split into, over threads (1: runs on the calling thread).
        chunks: usize,
        /// Per input: whether the kernel reads it only in the row it writes (`grouping::row_local`;
        /// the input then has `rows` outer rows too). A scan body made of such kernels can run as
        /// independent row ranges ([`control::Control::plan_split`]).
        row_local: Box<[bool]>,
        /// Per input: how many rows away from the written one (cyclically, along the outer axis)
        /// the kernel reads it (`grouping::row_reach`); `None` where a read is no fixed shift.
        row_reach: Box<[Option<u64>]>,
        /// Work units per call ([`crate::cost::kernel_work`], summed over members).
        units: u64,
    },
    /// A JIT kernel rooted at a `segment_sum` (`fusion::segment_kernel`): table = inputs, then the
    /// outputs, then a flag byte. The outputs are zeroed, then data rows `0..rows` run in `chunks`
    /// ranges cut where the id changes (each owning its segments); if a range met a row of another
    /// range's segment (unsorted ids), the output is zeroed again and all rows run on one thread.
    /// Several outputs (sums of data of one type by their own ids, `grouping::find_segment_sibling`)
    /// only ever run on one thread.
    SegmentKernel {
        /// Index into `Executable::kernels`.
        kernel: usize,
        /// Data rows (the ids' length).
        rows: i64,
        /// Row ranges over threads (1: runs on the calling thread).
        chunks: usize,
        /// Position of the (i32) ids among the step's inputs.
        ids: usize,
        /// The segments (rows of each output): ids outside `0..segments` are dropped.
        segments: usize,
        /// Bytes of each output.
        out_bytes: Box<[usize]>,
    },
    /// `cumsum`/`cumprod`/`cummax`/`cummin`: operand, output.
    Cumulative(cumulative::CumulativePlan),
    /// `dot_general` through matrixmultiply (f32/f64) or a loop.
    Dot(dot::DotPlan),
    /// Control flow over compiled sub-functions.
    Control(Box<control::Control>),
    /// Threefry-2x32 over `n` elements, split into `chunks` parallel ranges.
    Threefry { n: usize, chunks: usize },
    /// `sort`: inputs and outputs are the operands, in order.
    Sort(sort::SortPlan),
    /// `scatter`/`scatter_add`: operand, indices, updates.
    Scatter(indexing::ScatterPlan),
    /// `segment_sum`: data, ids.
    SegmentSum(indexing::SegmentSumPlan),
}

impl Op {
    /// Whether this step splits over threads (a control step: whether one of its bodies does).
    pub(crate) fn parallel(&self) -> bool {
        match self {
            Op::Kernel { chunks, .. } | Op::SegmentKernel { chunks, .. } | Op::Threefry { chunks, .. } => {
                *chunks > 1
            }
            Op::SegmentSum(p) => p.chunks() > 1,
            Op::Control(c) => c.parallel(),
            Op::Dot(d) => d.chunks() > 1,
            Op::Sort(s) => s.chunks() > 1,
            Op::Cumulative(_) | Op::Scatter(_) => false,
        }
    }
}

/// One step of the plan, in execution order.
pub(crate) struct Step {
    pub(crate) op: Op,
    pub(crate) inputs: Vec<Loc>,
    pub(crate) outputs: Vec<Loc>,
    /// Byte offset of this step's scratch space in the arena (see `Op::scratch_bytes`).
    pub(crate) scratch: usize,
    /// Bytes moved and flops per execution (control flow: the frame's own copies; its bodies are
    /// added by [`Executable::cost_report`]).
    pub(crate) traffic: Traffic,
    /// `inputs` then `outputs` as [`Slot`]s, for [`Table::fill_slots`]; built by [`Step::new`]
    /// (no pass changes a step's locations after the plan makes it; debug builds check each fill).
    slots: Box<[Slot]>,
}

impl Step {
    pub(crate) fn new(op: Op, inputs: Vec<Loc>, outputs: Vec<Loc>, scratch: usize, traffic: Traffic) -> Step {
        let slots = inputs.iter().chain(&outputs).map(Slot::of).collect();
        Step { op, inputs, outputs, scratch, traffic, slots }
    }
}

/// A [`Loc`] as data rather than a variant: the pointer is element `index` of base list `list`
/// ([`Bases`]: the inputs, the outputs, the constants, the arena) plus `offset` bytes. Filling a
/// kernel's table by matching on each `Loc` was an unpredictable indirect jump per pointer, a
/// third of `run_raw`'s own time on W2's 1000-step scan (about 3 % of the whole run).
#[derive(Clone, Copy, Debug, PartialEq)]
struct Slot {
    list: usize,
    index: usize,
    offset: usize,
}

impl Slot {
    fn of(l: &Loc) -> Slot {
        let (list, index, offset) = match *l {
            Loc::Param(i) => (0, i, 0),
            Loc::Out(k) => (1, k, 0),
            Loc::Const(i) => (2, i, 0),
            Loc::Arena(o) => (3, 0, o),
        };
        Slot { list, index, offset }
    }
}

/// The base pointers of one call that [`Slot`]s index: the inputs, the outputs, the constants, and
/// the arena (one pointer).
type Bases<'x> = [&'x [*mut u8]; 4];

/// 16-byte aligned bytes (arenas and constants).
pub(crate) struct Aligned(Vec<u128>, usize);

impl Aligned {
    pub(crate) fn zeroed(bytes: usize) -> Aligned {
        Aligned(vec![0u128; bytes.div_ceil(16).max(1)], bytes)
    }
    pub(crate) fn from_bytes(b: &[u8]) -> Aligned {
        let mut a = Aligned::zeroed(b.len());
        a.bytes_mut().copy_from_slice(b);
        a
    }
    fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: the Vec holds at least `self.1` initialized bytes.
        unsafe { std::slice::from_raw_parts_mut(self.0.as_mut_ptr().cast::<u8>(), self.1) }
    }
    pub(crate) fn ptr(&self) -> *mut u8 {
        self.0.as_ptr().cast::<u8>().cast_mut()
    }
}

/// A compiled function: call it with [`Executable::run`]. `Send + Sync`; concurrent calls each take
/// their own arena from a pool, so steady-state calls allocate only their result arrays.
pub struct Executable {
    pub(crate) param_types: Vec<TensorType>,
    pub(crate) output_types: Vec<TensorType>,
    pub(crate) steps: Vec<Step>,
    pub(crate) outputs: Vec<Loc>,
    /// Per output, an arena slot to compute it in when its donated buffer cannot be written early
    /// (`donate.rs`); `None` for bodies of control flow and for outputs copied in at the end.
    pub(crate) spill: Vec<Option<usize>>,
    pub(crate) consts: Vec<Aligned>,
    /// Where each of `consts` starts (for [`Slot`]s).
    pub(crate) const_ptrs: Vec<*mut u8>,
    pub(crate) arena_bytes: usize,
    pub(crate) kernels: Vec<KernelFn>,
    pub(crate) pool: Mutex<Vec<Aligned>>,
    /// Where parallel kernel steps run.
    pub(crate) threads: parallel::Threads,
    /// Whether some step (or a step of a control-flow body) splits over threads: calls then run
    /// on a pool thread ([`parallel::Threads::run_in_pool`]).
    pub(crate) parallel: bool,
    /// Steps that run on another thread while a scan consumes their rows ([`crate::pipeline`]).
    pub(crate) pipelines: Box<[pipeline::Pipeline]>,
    /// Wall time of compilation, sub-functions included.
    pub(crate) compile_time: Duration,
    pub(crate) _code: Code,
}

/// Sends the kernel pointer table to the threads running a kernel's row ranges. Only the first
/// `inputs + outputs` slots are written (and read by the kernel): filling all 256 would cost a 2 KiB
/// memset per kernel step, which showed in the per-step time of small scan bodies.
struct Table([MaybeUninit<*mut u8>; MAX_KERNEL_OPERANDS]);

// SAFETY: the table is only read; the buffers it points to are written on disjoint row ranges.
unsafe impl Sync for Table {}

/// How a scan body runs as row ranges ([`Executable::row_split`]).
#[derive(Clone, Debug)]
pub(crate) struct RowSplit {
    /// The row steps' rows (the carries' outer axis).
    pub(crate) rows: i64,
    /// Work units of the row steps per call of the body.
    pub(crate) units: u64,
    /// Per step: computed whole by every range (reads nothing that varies by row).
    pub(crate) uniform: Box<[bool]>,
    /// Body outputs (ys) written by shared steps, with their offsets in a range's private area:
    /// the first range writes the real output, every other range its own copy there (the same
    /// values; writing the shared buffer from several threads would race).
    pub(crate) private: Box<[(usize, usize)]>,
    /// Bytes of that private area.
    pub(crate) private_bytes: usize,
}

impl Table {
    /// An unfilled table. Built where it is used and filled there ([`Table::fill`]): returning a
    /// filled one by value copied all 2 KiB (a `memmove` per kernel step, a third of W1's 64-point
    /// scan step).
    fn new() -> Table {
        Table([MaybeUninit::uninit(); MAX_KERNEL_OPERANDS])
    }

    /// Writes a kernel step's pointers: its inputs, then its outputs, then `extra` (a segment
    /// kernel's flag).
    fn fill(&mut self, step: &Step, ptr: &dyn Fn(&Loc) -> *mut u8, extra: &[*mut u8]) {
        let slots = step.inputs.iter().chain(&step.outputs).map(ptr).chain(extra.iter().copied());
        for (slot, p) in self.0.iter_mut().zip(slots) {
            slot.write(p);
        }
    }

    /// [`Table::fill`] through the step's [`Slot`]s: the same pointers, without a branch per
    /// pointer on its kind.
    fn fill_slots(&mut self, step: &Step, bases: &Bases, extra: &[*mut u8]) {
        debug_assert!(step.inputs.iter().chain(&step.outputs).map(Slot::of).eq(step.slots.iter().copied()));
        let ptrs = step.slots.iter().map(|s| bases[s.list][s.index].wrapping_add(s.offset));
        for (slot, p) in self.0.iter_mut().zip(ptrs.chain(extra.iter().copied())) {
            slot.write(p);
        }
    }

    /// A method, so closures capture the whole (`Sync`) table rather than its array field.
    fn as_ptr(&self) -> *const *mut u8 {
        self.0.as_ptr().cast()
    }
}

// SAFETY: constants are never written after compilation, kernels are re-entrant (no global state),
// and each call gets its own arena from the mutex-guarded pool.
unsafe impl Sync for Executable {}
// SAFETY: as above; `const_ptrs` point into `consts`' heap buffers, owned by this executable and
// never written or reallocated after compilation.
unsafe impl Send for Executable {}

/// Why [`Executable::run`] refused its arguments.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("compiled function expects arguments of types {expected:?}, got {got:?}")]
pub struct ArgumentError {
    /// The parameter types.
    pub expected: Vec<TensorType>,
    /// The argument types given.
    pub got: Vec<TensorType>,
}

impl Executable {
    /// The parameter types, in order.
    pub fn param_types(&self) -> &[TensorType] {
        &self.param_types
    }

    /// The output types, in order.
    pub fn output_types(&self) -> &[TensorType] {
        &self.output_types
    }

    /// The number of JIT kernels (after fusion), for tests and reports.
    pub fn kernel_count(&self) -> usize {
        self.kernels.len()
    }

    /// Static counts and per-call estimates of bytes moved and flops; see [`CostReport`].
    pub fn cost_report(&self) -> CostReport {
        let mut r = CostReport {
            kernels: 0,
            runtime_steps: 0,
            bytes_moved: 0,
            flops: 0,
            while_loops: 0,
            arena_bytes: self.arena_bytes,
            compile_time: self.compile_time,
        };
        let t = self.tally(&mut r);
        r.bytes_moved = t.bytes;
        r.flops = t.flops;
        r
    }

    /// Adds this executable's step counts to `r` and returns its per-call traffic.
    pub(crate) fn tally(&self, r: &mut CostReport) -> Traffic {
        let mut t = Traffic::default();
        for step in &self.steps {
            match &step.op {
                Op::Kernel { .. } | Op::SegmentKernel { .. } => r.kernels += 1,
                Op::Control(c) => {
                    r.runtime_steps += 1;
                    t = t.add(c.tally(r));
                }
                Op::Dot(_)
                | Op::Cumulative(_)
                | Op::Threefry { .. }
                | Op::Sort(_)
                | Op::Scatter(_)
                | Op::SegmentSum(_) => r.runtime_steps += 1,
            }
            t = t.add(step.traffic);
        }
        let copy_out: usize = (0..self.outputs.len())
            .filter(|&k| self.copied_out(k))
            .map(|k| 2 * self.output_types[k].shape.size() * self.output_types[k].dtype.size_bytes())
            .sum();
        t.add(Traffic::new(copy_out, 0))
    }

    /// Bytes of output `k`.
    fn output_bytes(&self, k: usize) -> usize {
        self.output_types[k].shape.size() * self.output_types[k].dtype.size_bytes()
    }

    /// Whether output `k` is copied into its buffer after the steps (a parameter, a constant, or a
    /// value that is also an earlier output) rather than written there by the step computing it.
    pub(crate) fn copied_out(&self, k: usize) -> bool {
        !matches!(self.outputs[k], Loc::Out(j) if j == k)
    }

    /// Runs the compiled code on host arrays (any memory layout; row-major ones are read in place).
    ///
    /// # Errors
    /// [`ArgumentError`] when the count or types of `args` differ from the parameters'.
    pub fn run(&self, args: &[Array]) -> Result<Vec<Array>, ArgumentError> {
        self.run_args(args.iter().map(Arg::Borrowed).collect())
    }

    /// Where `l` is during a call with these buffers.
    ///
    /// # Safety
    /// As [`Executable::run_raw`].
    unsafe fn loc_ptr(&self, l: &Loc, ins: &[*const u8], outs: &[*mut u8], arena: *mut u8) -> *mut u8 {
        match *l {
            Loc::Param(i) => ins[i].cast_mut(),
            Loc::Const(i) => self.consts[i].ptr(),
            // SAFETY: plan offsets lie inside the arena.
            Loc::Arena(o) => unsafe { arena.add(o) },
            Loc::Out(k) => outs[k],
        }
    }

    /// For a scan body (`consts` scan constants, then `carries` carries, then the xs, as
    /// parameters): `Some(split)` when every step is a kernel, each of one of two kinds:
    /// - a **row** step, over the same `rows ≥ 2` as every other row step, that reads the carries
    ///   and the row steps' buffers only in the row it writes;
    /// - a **uniform** step, which reads only scan constants, xs, constants and earlier uniform
    ///   steps' buffers, and writes arena buffers or ys (W2's `sin(ω t + φ)`, shared by every robot,
    ///   computed from the step's xs, and saved for the gradient): each range computes it whole, in
    ///   its own sub-arena (ys: see [`RowSplit::private`]).
    ///
    /// At least one step is a row step, and every output is written by its step (none is copied in
    /// after the last). Rows `lo..hi` of the outputs then depend only on rows `lo..hi` of the
    /// carries, so [`Executable::run_rows`] may run row ranges on different threads, each at its own
    /// pace. The work counted is the row steps'. A body that splits with row steps only does so
    /// (nothing is computed twice).
    pub(crate) fn row_split(&self, consts: usize, carries: usize) -> Option<RowSplit> {
        self.split_steps(consts, carries, false).or_else(|| self.split_steps(consts, carries, true))
    }

    /// [`Executable::row_split`], with uniform steps (`shared`) or without.
    fn split_steps(&self, consts: usize, carries: usize, shared_steps: bool) -> Option<RowSplit> {
        let read_only = |l: &Loc| match *l {
            Loc::Const(_) => true,
            Loc::Param(i) => i < consts || i >= consts + carries,
            Loc::Arena(_) | Loc::Out(_) => false,
        };
        // Arena offsets whose latest writer is a uniform step (a live buffer's producer is the
        // latest step that wrote at its offset), and the ys uniform steps write.
        let mut uniform_at: std::collections::HashSet<usize> = std::collections::HashSet::new();
        let mut private: Vec<(usize, usize)> = Vec::new();
        let mut private_bytes = 0;
        let (mut rows, mut units) = (None, 0u64);
        let mut uniform = Vec::with_capacity(self.steps.len());
        // A step over the carries' rows stays a row step even if it reads nothing per row: shared,
        // every range would compute it whole.
        let carry = |l: &Loc| matches!(*l, Loc::Param(i) if i >= consts && i < consts + carries);
        let carry_rows = self.steps.iter().find_map(|s| match &s.op {
            Op::Kernel { rows, .. } if s.inputs.iter().any(carry) => Some(*rows),
            _ => None,
        });
        for step in &self.steps {
            let Op::Kernel { rows: r, row_local, units: u, .. } = &step.op else { return None };
            let shared = |l: &Loc| {
                read_only(l)
                    || match *l {
                        Loc::Arena(o) => uniform_at.contains(&o),
                        Loc::Out(k) => private.iter().any(|p| p.0 == k),
                        Loc::Const(_) | Loc::Param(_) => false,
                    }
            };
            let writable = |l: &Loc| matches!(*l, Loc::Arena(_)) || matches!(*l, Loc::Out(k) if k >= carries);
            let is_uniform = shared_steps
                && carry_rows != Some(*r)
                && step.inputs.iter().all(shared)
                && step.outputs.iter().all(writable);
            if !is_uniform {
                let local = step.inputs.iter().zip(row_local.iter()).all(|(l, &local)| local || shared(l));
                if *rows.get_or_insert(*r) != *r || !local {
                    return None;
                }
                units = units.saturating_add(*u);
            }
            for l in &step.outputs {
                match *l {
                    Loc::Arena(o) if is_uniform => _ = uniform_at.insert(o),
                    Loc::Arena(o) => _ = uniform_at.remove(&o),
                    Loc::Out(k) if is_uniform => {
                        private.push((k, private_bytes));
                        private_bytes += self.output_bytes(k).next_multiple_of(16);
                    }
                    Loc::Out(_) | Loc::Const(_) | Loc::Param(_) => {}
                }
            }
            uniform.push(is_uniform);
        }
        let rows = rows.filter(|&r| r >= 2)?;
        let whole = (0..self.outputs.len()).all(|k| !self.copied_out(k));
        whole.then(|| RowSplit {
            rows,
            units,
            uniform: uniform.into(),
            private: private.into(),
            private_bytes,
        })
    }

    /// [`Executable::run_raw`] on rows `lo..hi` only, on this thread: each row step's kernel on
    /// that range, each uniform step's on all its rows (`split` from [`Executable::row_split`]).
    /// With `private` (every range but the first), the shared steps' ys go to that area instead.
    ///
    /// # Safety
    /// As [`Executable::run_raw`]; [`Executable::row_split`] gave `split` for `self`, `lo ≤ hi ≤
    /// rows`, no other thread touches rows `lo..hi` of the buffers, and `arena` (and `private`, of
    /// `split.private_bytes` bytes, 16-aligned) is this thread's alone.
    #[allow(clippy::too_many_arguments)]
    pub(crate) unsafe fn run_rows(
        &self,
        ins: &[*const u8],
        outs: &[*mut u8],
        arena: *mut u8,
        split: &RowSplit,
        private: Option<*mut u8>,
        lo: i64,
        hi: i64,
    ) {
        let ptr = |l: &Loc| match (*l, private) {
            (Loc::Out(k), Some(area)) => match split.private.iter().find(|p| p.0 == k) {
                // SAFETY: the private area holds this output at `at` (`row_split`).
                Some(&(_, at)) => unsafe { area.add(at) },
                // SAFETY: per the contract.
                None => unsafe { self.loc_ptr(l, ins, outs, arena) },
            },
            // SAFETY: per the contract.
            _ => unsafe { self.loc_ptr(l, ins, outs, arena) },
        };
        for (step, &uniform) in self.steps.iter().zip(split.uniform.iter()) {
            // `row_split` admits kernel steps only.
            let Op::Kernel { kernel, rows, .. } = &step.op else { continue };
            let mut table = Table::new();
            table.fill(step, &ptr, &[]);
            let (lo, hi) = if uniform { (0, *rows) } else { (lo, hi) };
            // SAFETY: as in `run_raw`, on one range; a uniform step writes this range's arena only.
            unsafe { self.kernels[*kernel](table.as_ptr(), lo, hi) };
        }
    }

    /// Runs on raw buffers: the core of [`Executable::run`] and of control-flow sub-functions.
    /// Output `k` is written by the step that computes it (`Loc::Out`), and later steps may read it
    /// there; outputs that are parameters, constants or repeats are copied in after the last step.
    ///
    /// # Safety
    /// `ins[i]` must point to a row-major buffer of parameter `i`'s type, `outs[k]` to a writable one
    /// of output `k`'s type (not overlapping any input or the arena), and `arena` to
    /// `self.arena_bytes` writable bytes aligned to 16, used by no one else during the call.
    pub(crate) unsafe fn run_raw(&self, ins: &[*const u8], outs: &[*mut u8], arena: *mut u8) {
        let mut next = 0;
        while next < self.steps.len() {
            match self.pipelines.iter().find(|p| p.first == next) {
                // SAFETY (both arms): per the contract.
                Some(p) if self.threads.count() > 1 => unsafe {
                    self.run_pipeline(p, ins, outs, arena);
                    next = p.scan + 1;
                },
                _ => unsafe {
                    self.run_step(next, ins, outs, arena, None);
                    next += 1;
                },
            }
        }
        // SAFETY: per the contract.
        unsafe { self.copy_outputs(ins, outs, arena) };
    }

    /// Runs step `i` of [`Executable::run_raw`]; `ready` as in [`control::Control::run`] for a
    /// pipelined scan.
    ///
    /// # Safety
    /// As [`Executable::run_raw`], the steps before `i` having run (a pipelined scan's xs rows as
    /// `ready` says).
    unsafe fn run_step(
        &self,
        i: usize,
        ins: &[*const u8],
        outs: &[*mut u8],
        arena: *mut u8,
        ready: Option<&AtomicUsize>,
    ) {
        // SAFETY: per the contract.
        let ptr = |l: &Loc| unsafe { self.loc_ptr(l, ins, outs, arena) };
        // SAFETY: `*const u8` and `*mut u8` have the same layout.
        let ins_mut = unsafe { std::slice::from_raw_parts(ins.as_ptr().cast::<*mut u8>(), ins.len()) };
        let arena_base = [arena];
        let bases: Bases = [ins_mut, outs, &self.const_ptrs, &arena_base];
        let step = &self.steps[i];
        // SAFETY: the plan sized every step's scratch space inside the arena.
        let scratch = unsafe { arena.add(step.scratch) };
        match &step.op {
            Op::Kernel { kernel, rows, chunks, .. } => {
                let mut table = Table::new();
                table.fill_slots(step, &bases, &[]);
                let kernel = self.kernels[*kernel];
                let table = &table;
                // SAFETY: the kernel reads its leaves and writes rows lo..hi of each of its outputs
                // within their types' sizes (indices clamped at compile time), through this table;
                // row ranges are disjoint, so parallel calls write disjoint memory. A member of a
                // multi-output kernel reads an earlier member's output only at rows lo..hi, which
                // this same call wrote before (`grouping::row_local`).
                let rows_of = |lo: i64, hi: i64| unsafe { kernel(table.as_ptr(), lo, hi) };
                self.threads.for_rows(*rows, *chunks, &rows_of);
            }
            Op::SegmentKernel { kernel, rows, chunks, ids, segments, out_bytes } => {
                let flag = AtomicU8::new(0);
                let mut table = Table::new();
                table.fill_slots(step, &bases, &[flag.as_ptr()]);
                let (kernel, table) = (self.kernels[*kernel], &table);
                // SAFETY: as `Op::Kernel`; the outputs are this step's own buffers of
                // `out_bytes`, and ranges own disjoint segments, so parallel calls write
                // disjoint memory (a call that meets another range's segment writes the flag
                // and returns).
                let run = |lo: i64, hi: i64| unsafe { kernel(table.as_ptr(), lo, hi) };
                let zero = || {
                    for (out, &n) in step.outputs.iter().zip(out_bytes.iter()) {
                        // SAFETY: all-zero bytes are 0.0 in f32 and f64; the buffer holds `n`.
                        unsafe { std::ptr::write_bytes(ptr(out), 0, n) };
                    }
                };
                zero();
                let n = *rows as usize;
                if *chunks < 2 || n < 2 * *chunks || out_bytes.len() > 1 {
                    run(0, *rows);
                } else {
                    let ids = ptr(&step.inputs[*ids]).cast_const().cast::<i32>();
                    // SAFETY: the ids are `rows` i32s (the plan's types); `k < rows`.
                    let id = |k: usize| i64::from(unsafe { *ids.add(k) });
                    let cuts = indexing::segment_cuts(n, *chunks, *segments, id);
                    // The kernel derives the same bounds from `ids[lo]`, `ids[hi]` (clamped to
                    // the segments, which keeps disjoint ranges disjoint); inverted ones run
                    // on one thread.
                    if indexing::disjoint(&indexing::owned_segments(&cuts, n, id)) {
                        let ranges = |lo: i64, hi: i64| {
                            for c in lo as usize..hi as usize {
                                run(cuts[c] as i64, cuts[c + 1] as i64);
                            }
                        };
                        self.threads.for_rows(*chunks as i64, *chunks, &ranges);
                    } else {
                        flag.store(1, Ordering::Relaxed);
                    }
                    if flag.load(Ordering::Relaxed) != 0 {
                        zero();
                        run(0, *rows);
                    }
                }
            }
            // SAFETY: operand and output have the planned type and do not overlap.
            Op::Cumulative(c) => unsafe { c.run(ptr(&step.inputs[0]), ptr(&step.outputs[0])) },
            // SAFETY (three arms): operand buffers have the types the plan was built for.
            Op::Dot(d) => unsafe {
                let (l, r, o) = (ptr(&step.inputs[0]), ptr(&step.inputs[1]), ptr(&step.outputs[0]));
                d.run(l, r, o, scratch, &self.threads)
            },
            Op::Control(c) => unsafe { c.run(step, &ptr, scratch, &self.threads, ready) },
            Op::Threefry { n, chunks } => {
                let at = |k: usize| ptr(&step.inputs[k]) as usize;
                let (ins, outs) = (
                    [at(0), at(1), at(2), at(3)],
                    [ptr(&step.outputs[0]) as usize, ptr(&step.outputs[1]) as usize],
                );
                // SAFETY: operand buffers hold `n` u32s each (the plan's types); ranges are
                // disjoint, so parallel calls write disjoint output elements.
                let range = |lo: i64, hi: i64| unsafe { threefry::run(lo as usize, hi as usize, ins, outs) };
                self.threads.for_rows(*n as i64, *chunks, &range);
            }
            // SAFETY (three arms): as above; outputs are fresh arena buffers, never an input's.
            Op::Sort(s) => unsafe {
                s.run(
                    &|j| ptr(&step.inputs[j]).cast_const(),
                    &|j| ptr(&step.outputs[j]),
                    scratch,
                    &self.threads,
                )
            },
            Op::Scatter(s) => unsafe {
                let p = |k: usize| ptr(&step.inputs[k]).cast_const();
                s.run(p(0), p(1), p(2), ptr(&step.outputs[0]))
            },
            Op::SegmentSum(s) => unsafe {
                s.run(
                    ptr(&step.inputs[0]).cast_const(),
                    ptr(&step.inputs[1]).cast_const(),
                    ptr(&step.outputs[0]),
                    &self.threads,
                )
            },
        }
    }

    /// Copies into their buffers the outputs that no step writes there ([`Executable::copied_out`]).
    ///
    /// # Safety
    /// As [`Executable::run_raw`], after the steps ran.
    unsafe fn copy_outputs(&self, ins: &[*const u8], outs: &[*mut u8], arena: *mut u8) {
        for (k, l) in self.outputs.iter().enumerate() {
            if !self.copied_out(k) {
                continue;
            }
            let bytes = self.output_types[k].shape.size() * self.output_types[k].dtype.size_bytes();
            // SAFETY: both buffers have the output's type; `copy` allows any overlap.
            unsafe { std::ptr::copy(self.loc_ptr(l, ins, outs, arena).cast_const(), outs[k], bytes) };
        }
    }
}

/// A row-major copy of `a` if its memory is not already row-major.
fn contiguous_copy(a: &Array) -> Option<Array> {
    let standard = kiln_ir::with_array!(a, x => x.is_standard_layout());
    (!standard).then(|| kiln_ir::with_array!(a, x => x.as_standard_layout().into_owned().into()))
}

/// The first element of a row-major array (bool stored as one byte 0/1).
fn data_ptr(a: &Array) -> *mut u8 {
    kiln_ir::with_array!(a, x => x.as_ptr().cast::<u8>().cast_mut())
}

/// The first element of a row-major array, writable.
fn data_ptr_mut(a: &mut Array) -> *mut u8 {
    kiln_ir::with_array!(a, x => x.as_mut_ptr().cast::<u8>())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `fill_slots` writes, for each kind of location, the pointer `fill` resolves by matching.
    #[test]
    fn slots_resolve_like_locations() {
        let (mut a, mut b, mut c, mut d, mut e) = ([0u8; 8], [0u8; 8], [0u8; 8], [0u8; 8], [0u8; 64]);
        let ins: [*mut u8; 2] = [a.as_mut_ptr(), b.as_mut_ptr()];
        let outs: [*mut u8; 1] = [c.as_mut_ptr()];
        let consts: [*mut u8; 1] = [d.as_mut_ptr()];
        let arena = [e.as_mut_ptr()];
        let bases: Bases = [&ins, &outs, &consts, &arena];
        let resolve = |l: &Loc| match *l {
            Loc::Param(i) => ins[i],
            Loc::Out(k) => outs[k],
            Loc::Const(i) => consts[i],
            Loc::Arena(o) => arena[0].wrapping_add(o),
        };
        let inputs = vec![Loc::Param(1), Loc::Const(0), Loc::Arena(48), Loc::Param(0), Loc::Arena(0)];
        let outputs = vec![Loc::Arena(16), Loc::Out(0)];
        let op = Op::Kernel {
            kernel: 0,
            rows: 1,
            chunks: 1,
            row_local: Box::new([]),
            row_reach: Box::new([]),
            units: 0,
        };
        let step = Step::new(op, inputs, outputs, 0, Traffic::default());
        let mut flag_byte = [7u8; 1];
        let flag = flag_byte.as_mut_ptr();
        let (mut by_loc, mut by_slot) = (Table::new(), Table::new());
        by_loc.fill(&step, &resolve, &[flag]);
        by_slot.fill_slots(&step, &bases, &[flag]);
        let read = |t: &Table, n: usize| -> Vec<*mut u8> {
            // SAFETY: both fills wrote the first 8 slots.
            (0..n).map(|k| unsafe { t.0[k].assume_init() }).collect()
        };
        let expected = [
            ins[1],
            consts[0],
            arena[0].wrapping_add(48),
            ins[0],
            arena[0],
            arena[0].wrapping_add(16),
            outs[0],
            flag,
        ];
        assert_eq!(read(&by_slot, 8), expected);
        assert_eq!(read(&by_loc, 8), expected);
    }
}
