//! Static cost estimates: the work of a kernel (which decides whether it runs in parallel) and the
//! per-call totals of [`CostReport`].

use kiln_ir::{BinaryOp, Function, Prim, UnaryOp};
use std::fmt;
use std::time::Duration;

/// Work units a parallel task must carry at least; below it a kernel stays on the calling thread.
///
/// One unit ≈ one element operation of a kernel (a load, an add, a store; see [`KernelWork`]).
/// Measured with `cargo run --release -p kiln-backend-cpu --example threshold` on the 2-vCPU dev VM
/// (shared, load ~2–4): a serial `x*y+1` kernel (5 units/element) ran at ~0.25 ns per unit, and
/// splitting it over 2 threads first paid off at ~400k elements (~2M units, ~0.5 ms serial), where
/// tasks of ~1M units (~250 µs) outweigh rayon's injection and wake-up latency (6–24 µs) and the
/// chance that the other vCPU is busy (`shared/research/tech-cranelift-egg.md` §6: joins of < 50 µs
/// per half almost never ran in parallel here). On a dedicated many-core machine this could be ~10×
/// lower.
pub(crate) const MIN_TASK_UNITS: u64 = 1 << 20;

/// Units of a per-element call into Rust (`exp`, `sin`, `pow`...): measured at ~8 ns per element
/// against ~0.25 ns per unit of simple arithmetic (same example), rounded to 32.
const CALL_UNITS: u64 = 32;

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
        Prim::ArgReduce { .. } => cost(2, 1),
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
    let out = f.var_type(e.outputs[0]).shape.size() as u64;
    let in_dims = |k: usize| f.var_type(e.inputs[k]).shape.dims().to_vec();
    let loop_len: u64 = match &e.prim {
        Prim::Reduce { axes, .. } => axes.iter().map(|&a| in_dims(0)[a] as u64).product(),
        Prim::ArgReduce { axis, .. } => in_dims(0)[*axis] as u64,
        _ => 1,
    };
    let per_eval = std::iter::once(root).chain(inlined.iter().copied()).map(|i| eval_cost(&f.eqns[i].prim));
    let (units, flops) = per_eval.fold((leaves as u64, 0), |(u, fl), c| (u + c.units, fl + c.flops));
    KernelWork {
        units: out.saturating_mul(1 + units.saturating_mul(loop_len)),
        flops: out.saturating_mul(flops.saturating_mul(loop_len)),
    }
}

/// How many tasks a kernel of `work` over `rows` outer rows is split into with `threads` threads:
/// 1 (serial) unless every task gets at least [`MIN_TASK_UNITS`].
pub(crate) fn kernel_chunks(work: u64, rows: i64, threads: usize) -> usize {
    let by_work = usize::try_from(work / MIN_TASK_UNITS).unwrap_or(usize::MAX);
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
