//! Static cost estimates: the work of a kernel (which decides whether it runs in parallel) and the
//! per-call totals of [`CostReport`].

use kiln_ir::{BinaryOp, Function, Prim, UnaryOp, Var};
use std::fmt;
use std::time::Duration;

/// Work units a parallel task must carry at least; below it a kernel stays on the calling thread.
///
/// One unit ≈ one element operation of a kernel (a load, an add, a store; see [`KernelWork`]).
/// Measured with `cargo bench -p kiln-backend-cpu --bench threads` on the 2-vCPU dev VM, each kernel
/// on one thread and split in two row ranges over a 2-thread pool (rayon's injection and wake-up
/// cost 6–24 µs per split). First under load 4–5 (medians): serial kernels ran at 0.19–0.31 ns per
/// unit; below 0.8M units per task a split was 7–46 % slower in every run, from ~1M units per task
/// the medians scattered around 1.0× (0.63–2.63×). Again on 2026-12-03, quiet host, vectorized tiles
/// (fastest of the repetitions): 0.04–0.05 ns per unit in cache, ~0.1 beyond L2, yet the break-even
/// in units barely moved, since the split's fixed cost fell too: `x*y+1` 0.8M units 1.25×, 1.6M
/// 0.87×, 3.1M 1.46×, 6.3M 2.0×; `exp` ≤ 1.0× up to 2.4M, 1.8× from 9.4M. So a split needs ~1M
/// units per task (2²⁰). A random gather costs 0.23–1.0 ns per unit (6–20× an arithmetic unit) but
/// split in two gained only 0.8–1.6× at any size with its source in L2 (1.2–2.4× from a 4 MB
/// source), so gathers are not weighted up. A dedicated many-core machine may want ~10× less:
/// [`CompileOptions::min_task_work`](crate::CompileOptions) overrides it.
pub(crate) const MIN_TASK_UNITS: u64 = 1 << 20;

/// The least work per step of each row range of a split scan (`Control::plan_split`), or
/// [`CompileOptions::min_task_work`](crate::CompileOptions) where that is lower. Each range pays a fixed cost per
/// step (its pointer tables, the kernels' prologues), and the loop's end waits for the slower
/// range. Measured on W4's cart-pole step (`examples/bench_kiln`, alternating 1- and 2-thread
/// runs): B = 1024 (~100 k units per range and step) ran 1.6–1.9× faster split in two, B = 64
/// (~6.5 k) 0.9–1.15×, with a wider spread.
pub(crate) const MIN_SPLIT_STEP_UNITS: u64 = 1 << 15;

/// The least work of each row range per block of a scan with halos (`Control::plan_split`): the
/// ranges meet once per block, which costs about a microsecond (a core-to-core round trip of
/// ~0.5 µs measured on 2-core VMs, and the rows copied in and out), so a block is made ~30 µs of work
/// at least.
pub(crate) const MIN_HALO_BLOCK_UNITS: u64 = 1 << 17;

/// Units of a per-element call into Rust (`exp`, `sin`, `pow`...): `exp(x)` on f32 measured
/// 3.2 ns per element (same bench) against ~0.22 ns per unit of plain arithmetic: ≈ 16 (on
/// 2026-12-03, with the vectorized tiles, 0.67 ns against 0.04: still ≈ 17).
const CALL_UNITS: u64 = 16;

/// The cost of evaluating one primitive once inside a kernel.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct EvalCost {
    /// Work units (see [`MIN_TASK_UNITS`]).
    units: u64,
    /// Arithmetic operations counted as flops.
    flops: u64,
}

const fn cost(units: u64, flops: u64) -> EvalCost {
    EvalCost { units, flops }
}

fn unary_cost(op: UnaryOp) -> EvalCost {
    match op {
        UnaryOp::Exp
        | UnaryOp::Expm1
        | UnaryOp::Log
        | UnaryOp::Log1p
        | UnaryOp::Sin
        | UnaryOp::Cos
        | UnaryOp::Tanh
        | UnaryOp::Logistic
        | UnaryOp::Erf
        | UnaryOp::ErfInv => cost(CALL_UNITS, 1),
        UnaryOp::Neg
        | UnaryOp::Abs
        | UnaryOp::Sign
        | UnaryOp::Floor
        | UnaryOp::Ceil
        | UnaryOp::Round
        | UnaryOp::RoundEven
        | UnaryOp::Sqrt
        | UnaryOp::Rsqrt
        | UnaryOp::IsFinite
        | UnaryOp::Not => cost(1, 1),
    }
}

fn binary_cost(op: BinaryOp) -> EvalCost {
    match op {
        BinaryOp::Pow | BinaryOp::Atan2 | BinaryOp::Rem => cost(CALL_UNITS, 1),
        BinaryOp::Add
        | BinaryOp::Sub
        | BinaryOp::Mul
        | BinaryOp::Div
        | BinaryOp::Max
        | BinaryOp::Min
        | BinaryOp::And
        | BinaryOp::Or
        | BinaryOp::Xor
        | BinaryOp::ShiftLeft
        | BinaryOp::ShiftRightLogical => cost(1, 1),
    }
}

/// One evaluation of `prim` inside a kernel: for a reduction, one step of its loop.
fn eval_cost(prim: &Prim) -> EvalCost {
    match prim {
        Prim::Unary(op) => unary_cost(*op),
        Prim::Binary(op) => binary_cost(*op),
        Prim::Compare(_) | Prim::Select | Prim::Clamp | Prim::Reduce { .. } => cost(1, 1),
        // A segment kernel's add into its segment (a load, an add and a store per data row).
        Prim::SegmentSum { .. } | Prim::Scatter { .. } => cost(2, 1),
        Prim::ArgReduce { .. } => cost(2, 1),
        // A small dot_general kernel (fusion's `SMALL_DOT_CONTRACTION`, `TINY_DOT_MACS`): one
        // multiply-add per step.
        Prim::DotGeneral { .. } => cost(2, 2),
        Prim::ConvertElementType { .. } | Prim::BitcastConvertType { .. } => cost(1, 0),
        // Index maps with clamps or selects.
        Prim::DynamicSlice { .. }
        | Prim::DynamicUpdateSlice
        | Prim::Concatenate { .. }
        | Prim::Pad { .. }
        | Prim::Gather { .. } => cost(1, 0),
        // Pure index arithmetic, folded into the loads.
        Prim::Iota { .. }
        | Prim::BroadcastInDim { .. }
        | Prim::Reshape { .. }
        | Prim::Transpose { .. }
        | Prim::Rev { .. }
        | Prim::Slice { .. }
        | Prim::StopGradient => cost(0, 0),
        // Runtime steps never reach a kernel.
        Prim::Cumulative { .. }
        | Prim::Sort { .. }
        | Prim::Threefry2x32
        | Prim::CustomJvpCall { .. }
        | Prim::CustomVjpCall { .. }
        | Prim::Scan { .. }
        | Prim::WhileLoop { .. }
        | Prim::Cond { .. }
        | Prim::Call { .. }
        | Prim::Checkpoint { .. } => cost(0, 0),
    }
}

/// The estimated work of one kernel over its whole output.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct KernelWork {
    /// Work units: per output element, 1 (the store) + (Σ unit costs of the fused equations + one
    /// per leaf load) × the root's loop length (the reduced elements for a reduction, else 1).
    pub(crate) units: u64,
    /// Flops: per output element, Σ flops of the fused equations × the loop length.
    pub(crate) flops: u64,
}

/// The work of the kernel rooted at `f.eqns[root]` whose inlined equations are `inlined` and whose
/// leaves are `leaves` in number.
pub(crate) fn kernel_work(f: &Function, root: usize, inlined: &[usize], leaves: usize) -> KernelWork {
    let e = &f.eqns[root];
    // A segment kernel loops over its data rows, not its output.
    let in_dims = |k: usize| f.var_type(e.inputs[k]).shape.dims().to_vec();
    // The root's loop: the elements it loops over, and the steps per element (the reduced
    // elements of a reduction, else 1).
    let (looped, loop_len): (Var, u64) = match &e.prim {
        Prim::SegmentSum { .. } => (e.inputs[0], 1),
        // A scatter kernel copies its operand, then adds every update: the updates dominate.
        Prim::Scatter { .. } => (e.inputs[2], 1),
        Prim::Reduce { axes, .. } => (e.outputs[0], axes.iter().map(|&a| in_dims(0)[a] as u64).product()),
        Prim::ArgReduce { axis, .. } => (e.outputs[0], in_dims(0)[*axis] as u64),
        Prim::DotGeneral { lhs_contracting, .. } => {
            (e.outputs[0], lhs_contracting.iter().map(|&a| in_dims(0)[a] as u64).product())
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
        | Prim::Gather { .. }
        | Prim::StopGradient => (e.outputs[0], 1),
        // Runtime steps are never kernel roots; counted as one pass over their output.
        Prim::Cumulative { .. }
        | Prim::Sort { .. }
        | Prim::Threefry2x32
        | Prim::CustomJvpCall { .. }
        | Prim::CustomVjpCall { .. }
        | Prim::Scan { .. }
        | Prim::WhileLoop { .. }
        | Prim::Cond { .. }
        | Prim::Call { .. }
        | Prim::Checkpoint { .. } => (e.outputs[0], 1),
    };
    let out = f.var_type(looped).shape.size() as u64;
    let per_eval = std::iter::once(root).chain(inlined.iter().copied()).map(|i| eval_cost(&f.eqns[i].prim));
    let (units, flops) = per_eval.fold((leaves as u64, 0), |(u, fl), c| (u + c.units, fl + c.flops));
    KernelWork {
        units: out.saturating_mul(1 + units.saturating_mul(loop_len)),
        flops: out.saturating_mul(flops.saturating_mul(loop_len)),
    }
}

/// How many tasks a kernel of `work` over `rows` outer rows is split into with `threads` threads:
/// 1 (serial) unless every task gets at least `min_task` units ([`MIN_TASK_UNITS`] by default).
pub(crate) fn kernel_chunks(work: u64, rows: i64, threads: usize, min_task: Option<u64>) -> usize {
    let by_work = match min_task.unwrap_or(MIN_TASK_UNITS) {
        0 => usize::MAX,
        m => usize::try_from(work / m).unwrap_or(usize::MAX),
    };
    by_work.min(threads).min(rows.max(1) as usize).max(1)
}

/// Per-call traffic and arithmetic of one step, or of a whole executable.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Traffic {
    /// Bytes read plus bytes written.
    pub(crate) bytes: u64,
    /// Arithmetic operations.
    pub(crate) flops: u64,
}

impl Traffic {
    pub(crate) fn new(bytes: usize, flops: usize) -> Traffic {
        Traffic { bytes: bytes as u64, flops: flops as u64 }
    }
    pub(crate) fn add(self, o: Traffic) -> Traffic {
        Traffic { bytes: self.bytes.saturating_add(o.bytes), flops: self.flops.saturating_add(o.flops) }
    }
    pub(crate) fn times(self, n: usize) -> Traffic {
        Traffic { bytes: self.bytes.saturating_mul(n as u64), flops: self.flops.saturating_mul(n as u64) }
    }
    pub(crate) fn max(self, o: Traffic) -> Traffic {
        Traffic { bytes: self.bytes.max(o.bytes), flops: self.flops.max(o.flops) }
    }
}

/// Static counts and per-call estimates of a compiled function ([`Executable::cost_report`]).
///
/// Counts include the steps of control-flow sub-functions (each compiled once). Per-call estimates
/// multiply a `scan` body by its length, take the costlier branch of a `cond`, and count a
/// `while_loop` as **one** iteration of its condition and body (the trip count is only known at
/// run time; [`CostReport::while_loops`] says how many such loops there are).
///
/// ```
/// use kiln_backend_cpu::compile;
/// use kiln_ir::{BinaryOp, DType, Function, Prim, TensorType};
/// let mut f = Function::new();
/// let x = f.add_param(TensorType::new(DType::F32, [1000]));
/// let y = f.push(Prim::Binary(BinaryOp::Mul), &[x, x], None)?[0];
/// f.outputs.push(y);
/// let report = compile(&f)?.cost_report();
/// assert_eq!(report.kernels, 1);
/// assert_eq!(report.flops, 1000);
/// println!("{report}");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// [`Executable::cost_report`]: crate::Executable::cost_report
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CostReport {
    /// JIT kernels, those of control-flow bodies included.
    pub kernels: usize,
    /// Runtime steps (gemm, sort, scatter, cumulative, threefry, control flow...), those of
    /// control-flow bodies included.
    pub runtime_steps: usize,
    /// Bytes read plus bytes written per call by every step (a kernel reads each of its leaves once
    /// and writes its output; gemm also counts packing its operands), plus the copy of each result
    /// into the returned arrays.
    pub bytes_moved: u64,
    /// Arithmetic operations per call: one per elementwise op per element, one per reduced element,
    /// `2·m·k·n` per matrix product; integer hashing (threefry) counts its adds, rotations and xors.
    pub flops: u64,
    /// `while_loop`s, each counted as one iteration in `bytes_moved` and `flops`.
    pub while_loops: usize,
    /// Bytes of the arena (intermediate buffers and scratch) each concurrent call uses.
    pub arena_bytes: usize,
    /// Wall time `compile`/`compile_with` took, sub-functions included.
    pub compile_time: Duration,
}

impl fmt::Display for CostReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} kernels, {} runtime steps; per call: {} bytes moved, {} flops",
            self.kernels, self.runtime_steps, self.bytes_moved, self.flops
        )?;
        if self.while_loops > 0 {
            write!(f, " (each of {} while loops counted as one iteration)", self.while_loops)?;
        }
        write!(
            f,
            "; arena {} bytes; compiled in {:.3} ms",
            self.arena_bytes,
            self.compile_time.as_secs_f64() * 1e3
        )
    }
}
