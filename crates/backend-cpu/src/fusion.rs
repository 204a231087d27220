//! Greedy producer→consumer fusion: decides, per equation, whether it is computed inline inside the
//! kernel of its consumer, is the root of a kernel (its result materialized in a buffer), or runs as a
//! runtime step (gemm, sort, most scatters, cumulative scans, control flow).
//!
//! The rule (deliberately simple; the equality-saturation pass improves on it later): an equation a
//! kernel can express as "value at an output index" is inlined into its consumer when its result has
//! exactly one use and that use is itself in a kernel; broadcasts and iotas, which cost nothing to
//! recompute, and mask logic (comparisons and bool and/or/not, see [`duplicable`]) are inlined into
//! every kernel consumer. Cheap elementwise ops ([`recomputable`]: add, mul, min, select, compare,
//! convert...) read by several consumers are recomputed in each of them too, within a budget: every
//! equation carries an evaluation count, how many times it would run per element of its result summed
//! over all kernels (the sum over its uses of the user's count — 1 for a root — times [`reads`]).
//! Such an op is inlined only while its count stays at most [`RECOMPUTE_LIMIT`]; past it, it is
//! materialized and counts restart at 1 below it. Nor is it recomputed when that would make one
//! of its single-use producers (a transcendental, a layout change) a kernel of its own
//! ([`recompute_walk`]): that trades one kernel for another, worth it only when the new root is
//! smaller (a value before its broadcast); nor when re-reading its inputs in every consumer kernel
//! moves more bytes than writing and reading it back ([`recompute_pays`]). A chain of values each
//! read twice therefore materializes every third value instead of growing as 2ⁿ, and the total
//! work of the recomputed ops is at most `RECOMPUTE_LIMIT` times their work materialized. A value
//! read by three quaternion formulas, or one that the simplifier's CSE merged from copies, is no
//! longer a round trip through memory. An op reading a single array and broadcasts, none of them
//! recomputed ([`leaf_fed`]: `ct · c` in W1's adjoint stencil), may be evaluated up to
//! [`LEAF_FED_LIMIT`] times: each evaluation is one op and one load, where its materialized result
//! costs a kernel and a load per read anyway. A `pad` counts one evaluation of its operand per output row, not
//! per output element (the kernel evaluates it only inside its columns). A gather that reads its
//! table at least once per table element on average (a message gather over a graph's edges) takes
//! only single-array producers inline
//! ([`scattered_ok`]): each inlined operand array would add one random-access read per gathered
//! element. Reductions are always kernel roots (inlining
//! them would recompute a whole loop per consumer element), and so are `dot_general`s with a small
//! contracting size ([`SMALL_DOT_CONTRACTION`]) and either few multiply-adds ([`SMALL_DOT_MAX_MACS`]),
//! a vector operand or no contraction at all (an outer product), and matrix-vector ones of at most
//! [`TINY_DOT_MACS`] multiply-adds and one pairwise block (256) of contraction, where their in-order
//! sum is the interpreter's; the others are gemm runtime steps. A `segment_sum` of scalar rows is a kernel root with its data's
//! producers fused in ([`segment_kernel`]): message passing as one pass over the edges; so is a
//! row-wise `scatter_add` ([`scatter_kernel`], a vmapped message sum), one row per lane.

use kiln_ir::{Function, Prim};

/// How an equation is executed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Role {
    /// Computed inside the kernel of its (only) consumer, never materialized.
    Inline,
    /// The root of a JIT kernel that writes its result to a buffer.
    Kernel,
    /// A runtime step (Rust routine or control flow over compiled sub-functions).
    Runtime,
}

/// What kind of lowering a primitive has — the one table that says where each primitive goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Lowering {
    /// An index map or elementwise op: cheap, any consumer may recompute it.
    Inlinable,
    /// Expressible in a kernel, but only as a root (it loops over an axis).
    RootOnly,
    /// A runtime step.
    Runtime,
}

/// The largest contracting size (product of the contracting dimensions) at which a `dot_general`
/// is a kernel root — each output element an in-order sum over the contracting indices, producers
/// fused in — instead of a gemm runtime step, whose operand packing and call cost dominate such
/// small products (a 4-element dot per environment, a `[120,10]·[10]` per scan step).
pub(crate) const SMALL_DOT_CONTRACTION: usize = 16;

/// The most multiply-adds (output elements × contracting size) a small-contraction dot may have and
/// still be a kernel, unless it is a matrix-vector or an outer product (no reuse for gemm to win
/// back): the kernel's per-element scalar sum loses to gemm on a real matrix product.
/// Measured on W5's backward `[256,10]·[512,10]ᵀ` (1.3 M multiply-adds): as a kernel it took about a
/// quarter of the 8 ms step (`perf`), more than the 784×512×256 gemm that precedes it per flop.
pub(crate) const SMALL_DOT_MAX_MACS: usize = 1 << 18;

/// The most multiply-adds of a matrix-vector `dot_general` that is a kernel root whatever its
/// contracting size: gemm's call and packing cost more than the whole product, and a
/// matrix-vector product has no operand reuse for gemm's blocking to win back. W4's backward scan step accumulates
/// `[64]·[64,4] → [4]` (256 multiply-adds); as a gemm step it took 18 % of the gradient (`perf`:
/// packing 10 %, the micro-kernel 7 %).
pub(crate) const TINY_DOT_MACS: usize = 4096;

fn lowering(f: &Function, e: &kiln_ir::Eqn) -> Lowering {
    match &e.prim {
        Prim::DotGeneral { lhs_contracting, rhs_contracting, lhs_batch, rhs_batch, .. } => {
            let (lhs, rhs) = (f.var_type(e.inputs[0]), f.var_type(e.inputs[1]));
            let k: usize = lhs_contracting.iter().map(|&d| lhs.shape[d]).product();
            let macs = f.var_type(e.outputs[0]).shape.size().saturating_mul(k);
            // A matrix-vector product: one operand has no free axes.
            let vector_side = lhs.rank() == lhs_contracting.len() + lhs_batch.len()
                || rhs.rank() == rhs_contracting.len() + rhs_batch.len();
            // A matrix-vector product has no operand reuse for gemm's blocking to win back, so a
            // small contraction stays a kernel however many rows it has: W2's batched spring
            // actuation `[256·120, 10]·[10]` spent 27 % of its step packing the matrix for gemm.
            // An outer product (k = 1: no contraction, or one of size 1) is a product per element,
            // nothing for gemm to block.
            // A kernel sums each element's products in order (the interpreter's fold); past one
            // pairwise block the interpreter sums them blocked-pairwise, so longer contractions are
            // gemm steps (within a reduction tolerance of it, as any gemm).
            let in_one_block = k as i64 <= crate::codegen::pairwise::BLOCK;
            if k <= SMALL_DOT_CONTRACTION && (macs <= SMALL_DOT_MAX_MACS || vector_side || k == 1)
                || vector_side && macs <= TINY_DOT_MACS && in_one_block
            {
                Lowering::RootOnly
            } else {
                Lowering::Runtime
            }
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
        | Prim::StopGradient => Lowering::Inlinable,
        Prim::Reduce { .. } | Prim::ArgReduce { .. } => Lowering::RootOnly,
        Prim::SegmentSum { .. } if segment_kernel(f, e) => Lowering::RootOnly,
        Prim::Scatter { .. } if scatter_kernel(f, e) => Lowering::RootOnly,
        // A prefix scan is O(n) as a routine that reuses the previous output row, but O(n²) as a
        // kernel computing each element independently.
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
        | Prim::Checkpoint { .. } => Lowering::Runtime,
    }
}

/// The most elements per row (the product of `data`'s trailing dimensions) of a segment kernel:
/// each row's values are computed, then added to its segment's row, fully unrolled.
pub(crate) const SEGMENT_ROW_MAX: usize = 16;

/// Whether the `segment_sum` `e` is a kernel root — message passing in one pass over the rows,
/// its data's producers (an edge gather and the elementwise work on it) fused in, each row's values
/// added to its segment as they are computed (`codegen::kernel`'s `segment_rows`) — rather than the
/// runtime routine reading a materialized data array: rows of at most [`SEGMENT_ROW_MAX`] f32 or
/// f64 elements (scalar messages, or small vectors such as 2-D/3-D forces), with i32 ids, not
/// empty. The ids stay a materialized leaf ([`segment_ids`]): the runtime reads them to cut the
/// rows into ranges that own disjoint segments. On the GradABM day at 100 k agents the gathered
/// `[7 N]` messages were written and read back once a day: about a fifth of the day; on W2's
/// mass-spring step the runtime routine summing `[120, 2]` spring forces was 23 % (`perf`).
pub(crate) fn segment_kernel(f: &Function, e: &kiln_ir::Eqn) -> bool {
    use kiln_ir::DType;
    let Prim::SegmentSum { .. } = e.prim else { return false };
    let (data, ids) = (f.var_type(e.inputs[0]), f.var_type(e.inputs[1]));
    let row: usize = data.shape.dims().iter().skip(1).product();
    data.rank() >= 1
        && data.shape.size() > 0
        && row <= SEGMENT_ROW_MAX
        && matches!(data.dtype, DType::F32 | DType::F64)
        && ids.dtype == DType::I32
}

/// Whether the `scatter` `e` is a kernel root: a `scatter_add` into axis 1 with one index per
/// update row, `operand [B, M, ..]`, `updates [B, S, ..]` and `indices [B, S]` (one batch
/// dimension: the per-example `segment_sum` that `vmap` makes of a shared graph) or `[S]` (the
/// transpose of a vmapped `take` of shared indices, W2's batched backward), rows of at most
/// [`SEGMENT_ROW_MAX`] f32 or f64 elements, `M ≥ 1`. Row `b` of the output is operand row `b` with
/// the updates of row `b` added in order (`codegen::kernel`'s `scatter_rows`): the rows are
/// independent, so the kernel splits over threads by rows, and a scan body of such kernels can
/// split by rows (`Executable::row_split`). The updates' producers (a gathered message and the
/// work on it) are fused in, as in [`segment_kernel`]. Other scatters are runtime steps.
pub(crate) fn scatter_kernel(f: &Function, e: &kiln_ir::Eqn) -> bool {
    use kiln_ir::{DType, ScatterOp};
    let Prim::Scatter { op: ScatterOp::Add, axis: 1, batch_dims, .. } = e.prim else { return false };
    let (x, ids) = (f.var_type(e.inputs[0]), f.var_type(e.inputs[1]));
    let row: usize = x.shape.dims().iter().skip(2).product();
    x.rank() >= 2
        && x.shape.size() > 0
        && batch_dims <= 1
        && ids.rank() == batch_dims + 1
        && row <= SEGMENT_ROW_MAX
        && matches!(x.dtype, DType::F32 | DType::F64)
        && matches!(ids.dtype, DType::I32 | DType::U32)
}

/// The rows of a scatter into `axis ≥ 1`: the output's elements before that axis, each of which
/// reads the shared indices once (`batch_dims` 0, see [`scatter_kernel`]).
fn scattered_rows(f: &Function, e: &kiln_ir::Eqn) -> u64 {
    let Prim::Scatter { axis, .. } = e.prim else { return 1 };
    f.var_type(e.outputs[0]).shape.dims()[..axis].iter().product::<usize>() as u64
}

/// Whether `e` reads `v` as the ids of a `segment_sum`, which are never inlined (see
/// [`segment_kernel`]).
fn segment_ids(e: &kiln_ir::Eqn, v: kiln_ir::Var) -> bool {
    matches!(e.prim, Prim::SegmentSum { .. }) && e.inputs.get(1) == Some(&v)
}

/// Whether `e` evaluates its operand `slot` more than once per element of that operand (see the
/// module doc: the codegen's index maps).
fn rereads(f: &Function, e: &kiln_ir::Eqn, slot: usize) -> bool {
    let size = |v: kiln_ir::Var| f.var_type(v).shape.size();
    let grows = size(e.outputs[0]) > size(e.inputs[slot]);
    match &e.prim {
        // Elementwise, including rank-0 operands of select/clamp broadcast to the output.
        Prim::Unary(_)
        | Prim::Binary(_)
        | Prim::Compare(_)
        | Prim::Select
        | Prim::Clamp
        | Prim::ConvertElementType { .. }
        | Prim::BitcastConvertType { .. }
        | Prim::BroadcastInDim { .. } => grows,
        // The update is read (clamped) at every output index.
        Prim::DynamicUpdateSlice => grows || slot == 1,
        Prim::Concatenate { .. } => e.inputs.len() > 1,
        Prim::Pad { .. } => grows,
        Prim::Gather { .. } => slot == 0,
        // Each operand element is read once per free index of the other operand.
        Prim::DotGeneral { .. } => dot_free_size(f, e, slot) > 1,
        // A scatter kernel with indices shared by every row reads each index once per row.
        Prim::Scatter { batch_dims: 0, axis: 1.., .. } if slot == 1 => scattered_rows(f, e) > 1,
        // One read per operand element at most.
        Prim::Iota { .. }
        | Prim::Reshape { .. }
        | Prim::Transpose { .. }
        | Prim::Rev { .. }
        | Prim::Slice { .. }
        | Prim::DynamicSlice { .. }
        | Prim::Reduce { .. }
        | Prim::ArgReduce { .. }
        | Prim::Cumulative { .. }
        | Prim::StopGradient
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
        | Prim::Checkpoint { .. } => false,
    }
}

/// The free size (neither contracting nor batch) of the *other* operand of the `dot_general` `e`:
/// how many times each element of operand `slot` is read.
fn dot_free_size(f: &Function, e: &kiln_ir::Eqn, slot: usize) -> usize {
    let Prim::DotGeneral { lhs_contracting, rhs_contracting, lhs_batch, rhs_batch, .. } = &e.prim else {
        return 1;
    };
    let (other, c, b) = if slot == 0 {
        (e.inputs[1], rhs_contracting, rhs_batch)
    } else {
        (e.inputs[0], lhs_contracting, lhs_batch)
    };
    let t = f.var_type(other);
    (0..t.rank()).filter(|d| !c.contains(d) && !b.contains(d)).map(|d| t.shape[d]).product()
}

/// How many times `e` evaluates its operand `slot` per element of that operand, rounded up, at
/// least 1: the multiplier of an inlined producer's evaluation count (see the module doc). Follows
/// the codegen's index maps like [`rereads`], counting how often instead of whether.
fn reads(f: &Function, e: &kiln_ir::Eqn, slot: usize) -> u64 {
    let size = |v: kiln_ir::Var| f.var_type(v).shape.size() as u64;
    // Output elements per operand element: every output index evaluates the operand once.
    let per_output = || size(e.outputs[0]).div_ceil(size(e.inputs[slot]).max(1)).max(1);
    match &e.prim {
        Prim::Unary(_)
        | Prim::Binary(_)
        | Prim::Compare(_)
        | Prim::Select
        | Prim::Clamp
        | Prim::ConvertElementType { .. }
        | Prim::BitcastConvertType { .. }
        | Prim::BroadcastInDim { .. }
        | Prim::DynamicUpdateSlice
        | Prim::Concatenate { .. }
        | Prim::Gather { .. } => per_output(),
        // The operand of a pad with no interior padding on its last axis is evaluated only inside
        // its own columns (`codegen::vwalk::vpad` splits the rows there; the padding columns are
        // the pad value), so per output row, not per output element; the scalar loops at segment
        // edges evaluate it (clamped) at a few more columns. Rows of the padding, along the other
        // axes, evaluate it too.
        Prim::Pad { interior, .. }
            if slot == 0
                && interior.last().is_some_and(|&i| i == 0)
                && f.var_type(e.inputs[0]).dtype != kiln_ir::DType::Bool =>
        {
            let rows = |v: kiln_ir::Var| {
                let t = f.var_type(v);
                (t.shape.size() / t.shape.dims().last().copied().unwrap_or(1).max(1)) as u64
            };
            rows(e.outputs[0]).div_ceil(rows(e.inputs[0]).max(1)).max(1)
        }
        Prim::Pad { .. } => per_output(),
        Prim::DotGeneral { .. } => dot_free_size(f, e, slot).max(1) as u64,
        Prim::Scatter { batch_dims: 0, axis: 1.., .. } if slot == 1 => scattered_rows(f, e),
        Prim::Iota { .. }
        | Prim::Reshape { .. }
        | Prim::Transpose { .. }
        | Prim::Rev { .. }
        | Prim::Slice { .. }
        | Prim::DynamicSlice { .. }
        | Prim::Reduce { .. }
        | Prim::ArgReduce { .. }
        | Prim::Cumulative { .. }
        | Prim::StopGradient
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
        | Prim::Checkpoint { .. } => 1,
    }
}

/// The most evaluations per result element, over all kernels, of a [`recomputable`] op inlined into
/// several consumers (see the module doc). Recomputing costs a few arithmetic ops (and reads of its
/// operands, which its consumers often read anyway); materializing costs a kernel launch, a
/// write and a read back per consumer.
pub(crate) const RECOMPUTE_LIMIT: u64 = 4;

/// Whether `e` is a cheap elementwise op worth recomputing in several consumer kernels rather than
/// materializing: plain arithmetic, min/max, compare, select, clamp and conversions — not the
/// [`costly`] ones (transcendentals, divisions).
fn recomputable(e: &kiln_ir::Eqn) -> bool {
    match &e.prim {
        Prim::Unary(_) | Prim::Binary(_) => !costly(&e.prim),
        Prim::Compare(_)
        | Prim::Select
        | Prim::Clamp
        | Prim::ConvertElementType { .. }
        | Prim::BitcastConvertType { .. } => true,
        Prim::Iota { .. }
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
        | Prim::StopGradient
        | Prim::DotGeneral { .. }
        | Prim::Reduce { .. }
        | Prim::ArgReduce { .. }
        | Prim::Cumulative { .. }
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
        | Prim::Checkpoint { .. } => false,
    }
}

/// The most evaluations per result element of a [`leaf_fed`] op recomputed in several consumers:
/// each costs one arithmetic op and the load of its one array operand, which replaces the load of
/// the materialized result, so recomputing saves a kernel and a write-and-read-back of the result.
/// W1's gradient step reads `ct · c` at five offsets (its adjoint stencil): a kernel of its own
/// was a tenth of the step. W3's backward day evaluates `t - t_inf` 11 times per element over its
/// kernels once the simplifier has merged the copies the gradient made (at 8, that merged value
/// was materialized, 400 KB written and read back per day, and the simplified program refused).
pub(crate) const LEAF_FED_LIMIT: u64 = 16;

/// Whether `e` reads at most one array that is not a broadcast, and only values no kernel will
/// recompute: parameters, constants, results of kernel roots and runtime steps, and broadcasts
/// of those (recomputed from an index in every kernel, see [`duplicable`]).
fn leaf_fed(f: &Function, producer: &[Option<usize>], e: &kiln_ir::Eqn) -> bool {
    let fixed =
        |v: kiln_ir::Var| producer[v.index()].is_none_or(|p| lowering(f, &f.eqns[p]) != Lowering::Inlinable);
    let broadcast = |v: kiln_ir::Var| {
        producer[v.index()].is_some_and(|p| {
            let pe = &f.eqns[p];
            matches!(pe.prim, Prim::BroadcastInDim { .. }) && pe.inputs.iter().all(|&w| fixed(w))
        })
    };
    let arrays = e.inputs.iter().filter(|&&v| f.var_type(v).rank() > 0 && !broadcast(v)).count();
    arrays <= 1 && e.inputs.iter().all(|&v| fixed(v) || broadcast(v))
}

/// How far [`recompute_walk`] follows single-use producers before assuming the worst.
const FORCED_DEPTH: usize = 8;

/// What recomputing a value in each of its consumers costs beyond materializing it (see
/// [`recompute_walk`], [`recompute_pays`]).
#[derive(Default)]
struct Recompute {
    /// Bytes of the producers that would become kernel roots (`u64::MAX`: past [`FORCED_DEPTH`]).
    forced: u64,
    /// The materialized arrays one evaluation reads (parameters, roots, runtime results, forced
    /// producers; rank-0 values are registers), each once, with the bytes read from it (a column
    /// sliced from a `[40, 2]` array reads half of it).
    leaves: Vec<(kiln_ir::Var, u64)>,
}

/// The use graph [`recompute_walk`] follows.
struct Uses<'a> {
    f: &'a Function,
    /// The equation computing each variable (none for parameters and constants).
    producer: &'a [Option<usize>],
    /// Operand slots reading each variable.
    uses: &'a [usize],
    is_output: &'a [bool],
}

/// Walks the producers that would follow `e` into every consumer if `e`, evaluated `count` times
/// per element, were recomputed rather than materialized: single-use inlinable producers that are
/// [`duplicable`] or [`recomputable`] within [`RECOMPUTE_LIMIT`]. A producer that cannot follow is
/// forced to become a kernel root: one that is inlined into `e`'s kernel when `e` is
/// materialized — unless it is a root whatever `e` becomes, a [`costly`] producer that `e`'s kernel
/// would evaluate more than once per element (`repeated`: below a growing broadcast). Recomputing
/// `e` then saves its kernel but adds another (on the ant's substep, recomputing regardless took
/// 191 → 209 kernels). Collects those forced bytes and the arrays an evaluation of `elems`
/// elements of `e` reads (an index remap such as a slice evaluates its operand only where it
/// reads it); producers with other uses are decided on their own, and are taken as read through
/// their inputs where they are cheap enough to be recomputed themselves (`shared`: no forced
/// bytes below them).
#[allow(clippy::too_many_arguments)]
fn recompute_walk(
    g: &Uses,
    e: &kiln_ir::Eqn,
    count: u64,
    repeated: bool,
    shared: bool,
    elems: u64,
    depth: usize,
    acc: &mut Recompute,
) {
    let f = g.f;
    let leaf = |acc: &mut Recompute, v: kiln_ir::Var, elems: u64| {
        let t = f.var_type(v);
        if t.rank() == 0 {
            return;
        }
        let read = elems.saturating_mul(t.dtype.size_bytes() as u64);
        match acc.leaves.iter_mut().find(|(w, _)| *w == v) {
            Some((_, b)) => *b = (*b).max(read),
            None => acc.leaves.push((v, read)),
        }
    };
    for (k, &v) in e.inputs.iter().enumerate() {
        // Each evaluated element reads at most one element of each operand (a broadcast reads
        // its smaller operand whole).
        let elems = elems.min(f.var_type(v).shape.size() as u64);
        let Some(p) = g.producer[v.index()] else {
            leaf(acc, v, elems);
            continue;
        };
        let pe = &f.eqns[p];
        // Materialized whatever `e` becomes.
        if lowering(f, pe) != Lowering::Inlinable || g.is_output[v.index()] {
            leaf(acc, v, elems);
            continue;
        }
        let repeated = repeated || rereads(f, e, k);
        let c = count.saturating_mul(reads(f, e, k));
        if shared || g.uses[v.index()] != 1 {
            // Decided on its own: read through its inputs if it is likely recomputed.
            if depth > 0 && (duplicable(f, pe) || recomputable(pe)) {
                recompute_walk(g, pe, c, repeated, true, elems, depth - 1, acc);
            } else {
                leaf(acc, v, elems);
            }
            continue;
        }
        let follows = duplicable(f, pe) || (recomputable(pe) && c <= RECOMPUTE_LIMIT);
        if repeated && costly(&pe.prim) {
            leaf(acc, v, elems);
        } else if !follows {
            acc.forced = acc.forced.saturating_add(f.var_type(v).bytes() as u64);
            leaf(acc, v, elems);
        } else if depth == 0 {
            acc.forced = u64::MAX;
        } else {
            recompute_walk(g, pe, c, repeated, false, elems, depth - 1, acc);
        }
    }
}

/// The most inlined equations on one path from a kernel's root down to its leaves. Code generation
/// walks a kernel's fused expression recursively, so an unbounded chain (8000 `sin`s unrolled by a
/// Rust loop) overflowed the thread's stack and aborted the process; past this depth an equation
/// becomes a kernel root. The workloads' kernels are within it (their plans did not change).
pub(crate) const MAX_FUSION_DEPTH: usize = 64;

/// How many distinct consumer kernels [`assign`] tracks per inlined equation (more count as that
/// many: the byte test below only gets stricter with more kernels).
const ROOTS_KEPT: usize = 8;

/// Whether recomputing a value of `own` bytes in each of `kernels` consumer kernels moves fewer
/// bytes than materializing it. Materialized, it is written once and read by each kernel, and its
/// inputs are read once; recomputed, each kernel reads the inputs ([`Recompute::leaves`]; an upper
/// bound: a kernel that reads some of them anyway gets them for free, and evaluations within one
/// kernel share its loads), and any forced producers are written once and read by the same kernels
/// (so the smaller side wins: a value before a broadcast that `e` reads, say). On W3's backward
/// step, a product of six arrays read by two members of one kernel was recomputed in both: 2.4 MB
/// more per day than materializing it.
fn recompute_pays(r: &Recompute, own: u64, kernels: u64) -> bool {
    let leaves: u64 = r.leaves.iter().map(|(_, b)| b).sum();
    (r.forced == 0 || r.forced < own)
        && kernels.saturating_sub(1).saturating_mul(leaves) <= kernels.saturating_add(1).saturating_mul(own)
}

/// Whether `e`'s operand `slot` is read at data-dependent positions at least once per element of
/// that operand on average: the table of a gather whose result is no smaller than the table.
fn scatters(f: &Function, e: &kiln_ir::Eqn, slot: usize) -> bool {
    let size = |v: kiln_ir::Var| f.var_type(v).shape.size();
    matches!(e.prim, Prim::Gather { .. }) && slot == 0 && size(e.outputs[0]) >= size(e.inputs[0])
}

/// Whether `e` may be inlined where its result is read at scattered positions: it reads at most one
/// array (rank-0 operands are registers), so inlining keeps one random-access read per element.
/// On the GradABM day at 1 M agents, the per-agent infectiousness (two table lookups, a select and a
/// product over four agent arrays) inlined into the 7 M-edge gather made that kernel 64 % of the
/// day (`perf`); materialized, the gather reads one array.
fn scattered_ok(f: &Function, e: &kiln_ir::Eqn) -> bool {
    e.inputs.iter().filter(|&&v| f.var_type(v).shape.size() > 1).count() <= 1
}

/// Too costly to recompute per read: transcendentals (a call or polynomial each) and divisions.
fn costly(prim: &Prim) -> bool {
    use kiln_ir::{BinaryOp as B, UnaryOp as U};
    if let Prim::Unary(op) = prim {
        return match op {
            U::Exp
            | U::Expm1
            | U::Log
            | U::Log1p
            | U::Sqrt
            | U::Rsqrt
            | U::Sin
            | U::Cos
            | U::Tanh
            | U::Logistic
            | U::Erf
            | U::ErfInv => true,
            U::Neg
            | U::Abs
            | U::Sign
            | U::Floor
            | U::Ceil
            | U::Round
            | U::RoundEven
            | U::IsFinite
            | U::Not => false,
        };
    }
    if let Prim::Binary(op) = prim {
        return match op {
            B::Div | B::Rem | B::Pow | B::Atan2 => true,
            B::Add
            | B::Sub
            | B::Mul
            | B::Max
            | B::Min
            | B::And
            | B::Or
            | B::Xor
            | B::ShiftLeft
            | B::ShiftRightLogical => false,
        };
    }
    false
}

/// Cheap enough to recompute in every consumer kernel: broadcasts and iotas, vector-friendly slices
/// and reshapes, and mask logic
/// (comparisons, not/and/or/xor, is_finite giving bools). Recomputing a mask such as relu's
/// `x > 0` from the float it tests keeps it out of memory, and a kernel with a bool leaf or output
/// cannot take the vector path (`codegen::vector`): on W5's grad the materialized relu mask and
/// the two scalar selects reading it took about a fifth of the step (`perf`).
fn duplicable(f: &Function, e: &kiln_ir::Eqn) -> bool {
    use kiln_ir::{BinaryOp as B, DType, UnaryOp as U};
    let mask = f.var_type(e.outputs[0]).dtype == DType::Bool;
    match &e.prim {
        Prim::BroadcastInDim { .. } | Prim::Iota { .. } => true,
        // Index remaps that keep a consumer on the vector path (`codegen::check`): a stride-1 slice
        // of the last axis, a reshape keeping the last dimension. Recomputed, they cost an address
        // per read; materialized, a kernel each. Small-vector math (a component `x[..., k:k+1]` of
        // a `[..., 3]` value read by several products) made such slices about 1 in 5 kernels of
        // the ant's physics step.
        Prim::Slice { strides, .. } => strides.last().is_none_or(|&s| s == 1),
        Prim::Reshape { .. } => {
            let last = |v: kiln_ir::Var| f.var_type(v).shape.dims().last().copied();
            let non_unit = |v: kiln_ir::Var| -> Vec<usize> {
                f.var_type(v).shape.dims().iter().copied().filter(|&n| n != 1).collect()
            };
            // Or one dropping unit axes only (`[B, 1] → [B]`, a column `x[:, k:k+1]` read as a
            // vector): the same elements in the same order. The vector check does not take such a
            // reshape itself; consumers vectorize when `collapse` rewrites the kernel (W4's columns).
            last(e.inputs[0]) == last(e.outputs[0])
                || last(e.outputs[0]) != Some(1) && non_unit(e.inputs[0]) == non_unit(e.outputs[0])
        }
        Prim::Compare(_) => mask,
        Prim::Unary(U::Not | U::IsFinite) | Prim::Binary(B::And | B::Or | B::Xor) => mask,
        // Arithmetic, and everything that moves or combines data beyond an index remap.
        Prim::Unary(_)
        | Prim::Binary(_)
        | Prim::Select
        | Prim::Clamp
        | Prim::ConvertElementType { .. }
        | Prim::BitcastConvertType { .. }
        | Prim::Transpose { .. }
        | Prim::Rev { .. }
        | Prim::DynamicSlice { .. }
        | Prim::DynamicUpdateSlice
        | Prim::Concatenate { .. }
        | Prim::Pad { .. }
        | Prim::Gather { .. }
        | Prim::Reduce { .. }
        | Prim::ArgReduce { .. }
        | Prim::DotGeneral { .. }
        | Prim::Cumulative { .. }
        | Prim::Sort { .. }
        | Prim::Scatter { .. }
        | Prim::SegmentSum { .. }
        | Prim::Threefry2x32
        | Prim::StopGradient
        | Prim::CustomJvpCall { .. }
        | Prim::CustomVjpCall { .. }
        | Prim::Scan { .. }
        | Prim::WhileLoop { .. }
        | Prim::Cond { .. }
        | Prim::Call { .. }
        | Prim::Checkpoint { .. } => false,
    }
}

/// The role of every equation of `f`, indexed like `f.eqns`.
pub(crate) fn assign(f: &Function) -> Vec<Role> {
    // Consumers of each variable (an equation once per operand slot), and whether it is an output.
    let mut consumers: Vec<Vec<usize>> = vec![Vec::new(); f.vars.len()];
    for (i, e) in f.eqns.iter().enumerate() {
        for v in &e.inputs {
            consumers[v.index()].push(i);
        }
    }
    let mut is_output = vec![false; f.vars.len()];
    for v in &f.outputs {
        is_output[v.index()] = true;
    }
    // The equation computing each variable (none for parameters and constants), and its use count.
    let mut producer = vec![None; f.vars.len()];
    for (i, e) in f.eqns.iter().enumerate() {
        for v in &e.outputs {
            producer[v.index()] = Some(i);
        }
    }
    let uses: Vec<usize> = consumers.iter().map(Vec::len).collect();
    let mut roles = vec![Role::Runtime; f.eqns.len()];
    // `repeated[i]`: an inlined equation is evaluated more than once per element of its output.
    let mut repeated = vec![false; f.eqns.len()];
    // `copied[i]`: an inlined equation recomputed in several consumers (directly or because its
    // consumer is); its producers may be inlined only if they are duplicable too, or recomputable
    // within the evaluation budget.
    let mut copied = vec![false; f.eqns.len()];
    // `scattered[i]`: an inlined equation whose result is read at data-dependent positions (see
    // [`scatters`]), directly or through inlined consumers.
    let mut scattered = vec![false; f.eqns.len()];
    // `evals[i]`: evaluations per element of the result over all kernels (see the module doc); 1 for
    // a kernel root or runtime step, which computes each element once.
    let mut evals = vec![1u64; f.eqns.len()];
    // `roots[i]`: the kernel roots an inlined equation is computed in (at most `ROOTS_KEPT`).
    let mut roots: Vec<Vec<usize>> = vec![Vec::new(); f.eqns.len()];
    // `depth[i]`: inlined equations from a kernel root down to `i` (0 for a root or runtime step).
    let mut depth = vec![0usize; f.eqns.len()];
    // Consumers come after producers, so walking backwards decides every consumer first.
    for i in (0..f.eqns.len()).rev() {
        let e = &f.eqns[i];
        roles[i] = match lowering(f, e) {
            Lowering::Runtime => Role::Runtime,
            Lowering::RootOnly => Role::Kernel,
            Lowering::Inlinable => {
                let out = e.outputs[0];
                let users = &consumers[out.index()];
                let in_kernel = |&u: &usize| roles[u] != Role::Runtime && !segment_ids(&f.eqns[u], out);
                // Sum over the uses; `users` lists a consumer once per slot, consecutively.
                let mut count = 0u64;
                for (j, &u) in users.iter().enumerate() {
                    if j > 0 && users[j - 1] == u {
                        continue;
                    }
                    let ue = &f.eqns[u];
                    let base = if roles[u] == Role::Inline { evals[u] } else { 1 };
                    for (k, _) in ue.inputs.iter().enumerate().filter(|&(_, v)| *v == out) {
                        count = count.saturating_add(base.saturating_mul(reads(f, ue, k)));
                    }
                }
                // The kernels that would compute it, were it inlined.
                let mut kernels: Vec<usize> = Vec::new();
                for &u in users {
                    let of_u =
                        if roles[u] == Role::Inline { roots[u].as_slice() } else { std::slice::from_ref(&u) };
                    for r in of_u {
                        if kernels.len() < ROOTS_KEPT && !kernels.contains(r) {
                            kernels.push(*r);
                        }
                    }
                }
                let inline = !is_output[out.index()]
                    && !users.is_empty()
                    && users.iter().all(in_kernel)
                    && ((users.len() == 1 && !copied[users[0]])
                        || duplicable(f, e)
                        || (recomputable(e) && count <= RECOMPUTE_LIMIT && {
                            let mut r = Recompute::default();
                            let g = Uses { f, producer: &producer, uses: &uses, is_output: &is_output };
                            let elems = f.var_type(out).shape.size() as u64;
                            recompute_walk(&g, e, count, false, false, elems, FORCED_DEPTH, &mut r);
                            recompute_pays(&r, f.var_type(out).bytes() as u64, kernels.len() as u64)
                        })
                        || (recomputable(e) && count <= LEAF_FED_LIMIT && leaf_fed(f, &producer, e)));
                // Evaluated more than once per element inside the consumer's kernel?
                repeated[i] = inline
                    && users.iter().any(|&u| {
                        let ue = &f.eqns[u];
                        let inherited = roles[u] == Role::Inline && repeated[u];
                        inherited || ue.inputs.iter().enumerate().any(|(k, v)| *v == out && rereads(f, ue, k))
                    });
                scattered[i] = inline
                    && users.iter().any(|&u| {
                        let ue = &f.eqns[u];
                        let inherited = roles[u] == Role::Inline && scattered[u];
                        inherited
                            || ue.inputs.iter().enumerate().any(|(k, v)| *v == out && scatters(f, ue, k))
                    });
                let below = users.iter().map(|&u| if roles[u] == Role::Inline { depth[u] } else { 0 }).max();
                depth[i] = below.unwrap_or(0) + 1;
                if inline
                    && !(repeated[i] && costly(&e.prim))
                    && (!scattered[i] || scattered_ok(f, e))
                    && depth[i] <= MAX_FUSION_DEPTH
                {
                    copied[i] = users.len() > 1 || users.iter().any(|&u| copied[u]);
                    evals[i] = count;
                    roots[i] = kernels;
                    Role::Inline
                } else {
                    // A root: its producers are evaluated once per its element, in order.
                    depth[i] = 0;
                    repeated[i] = false;
                    scattered[i] = false;
                    Role::Kernel
                }
            }
        };
    }
    roles
}
