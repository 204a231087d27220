//! The cost model and a DAG-aware extractor.
//!
//! Cost is lexicographic: bytes materialized first (which results count is the [`CostModel`]:
//! every result, or only those of kernel roots and runtime steps), then flops, then node count
//! (equations and constants, as the region as written is priced: a multi-result equation's
//! projections are free). The extractor chooses one node per class bottom-up, finalizing a class
//! only after its children (so it never picks a cycle), each e-node priced once (Knuth's algorithm: O(n log n) in
//! the e-graph's size, unlike egg's re-sweeping `Extractor` or a worklist that re-prices
//! ancestors), then prices the chosen program as a DAG — every class once, however many consumers
//! share it — which is the number the caller compares with the input's to refuse a costlier
//! result.

use super::analysis::Graph;
use super::lang::Node;
use egg::{Id, Language};
use kiln_ir::{Prim, TensorType, UnaryOp};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::ops::Add;
use std::time::Instant;

/// The price of a program: bytes of every value it materializes, arithmetic operations, nodes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Cost {
    /// Bytes written to results (those the [`CostModel`] counts; constants count their data).
    pub bytes: u64,
    /// Arithmetic operations, weighted (transcendentals 10, divisions and roots 4, others 1).
    pub flops: u64,
    /// Equations and constants.
    pub nodes: u64,
}

impl Add for Cost {
    type Output = Cost;
    fn add(self, o: Cost) -> Cost {
        Cost {
            bytes: self.bytes.saturating_add(o.bytes),
            flops: self.flops.saturating_add(o.flops),
            nodes: self.nodes.saturating_add(o.nodes),
        }
    }
}

impl std::fmt::Display for Cost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} B, {} flops, {} nodes", self.bytes, self.flops, self.nodes)
    }
}

fn bytes(t: &TensorType) -> u64 {
    (t.shape.size() * t.dtype.size_bytes()) as u64
}

/// Operations per element of a primitive (an exhaustive table; layout ops are free).
fn flops_per_element(p: &Prim) -> u64 {
    match p {
        Prim::Unary(op) => match op {
            UnaryOp::Exp
            | UnaryOp::Expm1
            | UnaryOp::Log
            | UnaryOp::Log1p
            | UnaryOp::Sin
            | UnaryOp::Cos
            | UnaryOp::Tanh
            | UnaryOp::Logistic
            | UnaryOp::Erf
            | UnaryOp::ErfInv => 10,
            UnaryOp::Sqrt | UnaryOp::Rsqrt => 4,
            UnaryOp::Neg
            | UnaryOp::Abs
            | UnaryOp::Sign
            | UnaryOp::Floor
            | UnaryOp::Ceil
            | UnaryOp::Round
            | UnaryOp::RoundEven
            | UnaryOp::IsFinite
            | UnaryOp::Not => 1,
        },
        Prim::Binary(op) => match op {
            kiln_ir::BinaryOp::Div | kiln_ir::BinaryOp::Rem => 4,
            kiln_ir::BinaryOp::Pow | kiln_ir::BinaryOp::Atan2 => 10,
            kiln_ir::BinaryOp::Add
            | kiln_ir::BinaryOp::Sub
            | kiln_ir::BinaryOp::Mul
            | kiln_ir::BinaryOp::Max
            | kiln_ir::BinaryOp::Min
            | kiln_ir::BinaryOp::And
            | kiln_ir::BinaryOp::Or
            | kiln_ir::BinaryOp::Xor
            | kiln_ir::BinaryOp::ShiftLeft
            | kiln_ir::BinaryOp::ShiftRightLogical => 1,
        },
        Prim::Compare(_)
        | Prim::Select
        | Prim::Clamp
        | Prim::ConvertElementType { .. }
        | Prim::Reduce { .. }
        | Prim::ArgReduce { .. }
        | Prim::Cumulative { .. }
        | Prim::SegmentSum { .. }
        | Prim::Scatter { .. } => 1,
        Prim::Sort { .. } | Prim::Threefry2x32 | Prim::DotGeneral { .. } => 20,
        Prim::CustomJvpCall { .. }
        | Prim::CustomVjpCall { .. }
        | Prim::Scan { .. }
        | Prim::WhileLoop { .. }
        | Prim::Cond { .. }
        | Prim::Call { .. }
        | Prim::Checkpoint { .. } => 100,
        Prim::BitcastConvertType { .. }
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
        | Prim::StopGradient => 0,
    }
}

/// Which results extraction counts as written to memory (the "bytes materialized" of [`Cost`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum CostModel {
    /// Every result but broadcasts and iotas, which every consumer kernel recomputes from an index:
    /// fusion may inline the others, but the model assumes not, which steers extraction away from
    /// forms with more elementwise intermediates.
    #[default]
    EveryResult,
    /// Only the results of kernel roots and runtime steps (`fused_into_consumers` is false):
    /// elementwise and index-remapping work is taken as computed inside its consumers' kernels. An
    /// outer product (a kernel root) then costs more than the product of broadcasts it equals,
    /// which fuses into its consumer; `jit` simplifies under both models and compiles whichever
    /// program the backend's own estimate prefers.
    Fused,
}

/// Whether the backend's fusion computes `prim` inside its consumers' kernels (its
/// `Lowering::Inlinable`; broadcasts and iotas in every consumer) rather than as a kernel root or
/// runtime step (reductions, products, sorts, scatters, segment sums, random bits, control flow).
/// Fusion still materializes some of the former (a costly value read by several kernels), which no
/// [`CostModel`] predicts: the whole-program verdict in `jit` compares the backend's estimates.
fn fused_into_consumers(prim: &Prim) -> bool {
    match prim {
        Prim::BroadcastInDim { .. }
        | Prim::Iota { .. }
        | Prim::Unary(_)
        | Prim::Binary(_)
        | Prim::Compare(_)
        | Prim::Select
        | Prim::Clamp
        | Prim::ConvertElementType { .. }
        | Prim::BitcastConvertType { .. }
        | Prim::Reshape { .. }
        | Prim::Transpose { .. }
        | Prim::Rev { .. }
        | Prim::Slice { .. }
        | Prim::DynamicSlice { .. }
        | Prim::DynamicUpdateSlice
        | Prim::Concatenate { .. }
        | Prim::Pad { .. }
        | Prim::Gather { .. }
        | Prim::StopGradient => true,
        Prim::DotGeneral { .. }
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

/// Whether `model` counts `prim`'s result as written to memory.
fn materializes(prim: &Prim, model: CostModel) -> bool {
    match model {
        CostModel::EveryResult => !matches!(prim, Prim::BroadcastInDim { .. } | Prim::Iota { .. }),
        CostModel::Fused => !fused_into_consumers(prim),
    }
}

/// The cost of one equation `prim(ins) -> outs` under `model` (the larger of its input and output
/// element counts times the per-element operations). Broadcasts and iotas materialize nothing in
/// either model: the backend recomputes them in every consumer's kernel (an index, no load), so a
/// constant folded into a broadcast-sized array would cost more than the broadcast of its scalar,
/// not less.
pub fn eqn_cost(prim: &Prim, ins: &[&TensorType], outs: &[TensorType], model: CostModel) -> Cost {
    let elems =
        ins.iter().map(|t| t.shape.size()).chain(outs.iter().map(|t| t.shape.size())).max().unwrap_or(0);
    let bytes = if materializes(prim, model) { outs.iter().map(bytes).sum() } else { 0 };
    Cost { bytes, flops: flops_per_element(prim) * elems as u64, nodes: 1 }
}

/// The cost of one e-node alone (under the graph's [`CostModel`]).
pub fn node_cost(g: &Graph, id: Id, node: &Node) -> Cost {
    match node {
        Node::Input(_) => Cost::default(),
        Node::Const(i) => {
            // A rank-0 constant is a register in every kernel reading it (loaded once per call).
            let t = g.analysis.consts.get(*i).ty();
            Cost { bytes: if t.rank() == 0 { 0 } else { bytes(&t) }, flops: 0, nodes: 1 }
        }
        // Free, as the region as written prices it (`region::load`): one equation, many results.
        Node::Proj(..) => Cost::default(),
        Node::Op(p, xs) => {
            let ins: Vec<&TensorType> = xs.iter().flat_map(|x| g[*x].data.tys.iter()).collect();
            eqn_cost(g.analysis.prims.get(*p), &ins, &g[id].data.tys, g.analysis.model)
        }
    }
}

/// One chosen node per reachable class.
pub type Selection = HashMap<Id, Node>;

/// What one extraction did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExtractWork {
    /// Work units: e-nodes priced, child→parent notifications and heap pops. Each e-node is priced
    /// at most once and each child edge notified once, so this is at most about
    /// `(2 + children per node) × e-nodes` (the regression tests assert a small multiple).
    pub visits: usize,
}

/// Why an extraction gave up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExtractError {
    /// `deadline` passed before every class was priced.
    Deadline,
}

/// Chooses a node per class, minimizing tree cost, and returns the choice for every class
/// reachable from `roots` with the work done.
///
/// Knuth's generalization of Dijkstra's algorithm: the tree cost of a node is its own cost plus its
/// children's, which is never below any child's (costs are non-negative, sums saturate), so the
/// cheapest pending node in a min-heap is final when popped. An e-node is priced once, when its last
/// child class is finalized; a class is finalized once. Cost: O((nodes + edges) log nodes),
/// whatever the sharing or the depth. (The worklist it replaces re-priced every ancestor of a class
/// each time the class got cheaper, which took minutes on a 20-step reacher gradient.)
///
/// # Errors
/// [`ExtractError::Deadline`] if `deadline` passes (checked every 1024 heap pops).
///
/// # Panics
/// Only on a kiln bug: every root must be derivable (it is: the region as written is in the graph).
pub fn extract(
    g: &Graph,
    roots: &[Id],
    deadline: Option<Instant>,
) -> Result<(Selection, ExtractWork), ExtractError> {
    // Dense numbering: class k, and its nodes at node_start[k]..node_start[k + 1].
    let classes: Vec<Id> = g.classes().map(|c| c.id).collect();
    let dense: HashMap<Id, usize> = classes.iter().enumerate().map(|(k, id)| (*id, k)).collect();
    let mut node_start = Vec::with_capacity(classes.len() + 1);
    let mut node_class = vec![];
    let mut own = vec![];
    let mut pending = vec![];
    // parents[k]: the nodes that read class k, once per occurrence (matching `pending`).
    let mut parents: Vec<Vec<u32>> = vec![vec![]; classes.len()];
    for (k, id) in classes.iter().enumerate() {
        node_start.push(node_class.len());
        for n in &g[*id].nodes {
            let at = u32::try_from(node_class.len()).expect("fewer than 2^32 e-nodes");
            for c in n.children() {
                parents[dense[&g.find(*c)]].push(at);
            }
            node_class.push(k);
            own.push(node_cost(g, *id, n));
            pending.push(n.children().len());
        }
    }
    node_start.push(node_class.len());
    let node_of = |at: usize| {
        let k = node_class[at];
        (k, &g[classes[k]].nodes[at - node_start[k]])
    };

    let mut work = ExtractWork::default();
    let mut best: Vec<Option<(Cost, usize)>> = vec![None; classes.len()];
    let mut heap: BinaryHeap<Reverse<(Cost, usize)>> =
        (0..own.len()).filter(|at| pending[*at] == 0).map(|at| Reverse((own[at], at))).collect();
    work.visits += heap.len();
    while let Some(Reverse((cost, at))) = heap.pop() {
        work.visits += 1;
        if work.visits % 1024 == 0 && deadline.is_some_and(|d| Instant::now() > d) {
            return Err(ExtractError::Deadline);
        }
        let (k, _) = node_of(at);
        if best[k].is_some() {
            continue;
        }
        best[k] = Some((cost, at - node_start[k]));
        for &p in &parents[k] {
            let p = p as usize;
            work.visits += 1;
            pending[p] -= 1;
            if pending[p] == 0 {
                let (_, n) = node_of(p);
                let total = n
                    .children()
                    .iter()
                    .fold(own[p], |t, c| t + best[dense[&g.find(*c)]].expect("every child is finalized").0);
                work.visits += 1;
                heap.push(Reverse((total, p)));
            }
        }
    }

    let mut sel = Selection::new();
    let mut stack: Vec<Id> = roots.iter().map(|r| g.find(*r)).collect();
    while let Some(id) = stack.pop() {
        if sel.contains_key(&id) {
            continue;
        }
        let (_, i) = best[dense[&id]].expect("simplify: a root class with no finite program");
        let node = g[id].nodes[i].clone();
        stack.extend(node.children().iter().map(|c| g.find(*c)));
        sel.insert(id, node);
    }
    Ok((sel, work))
}

/// The cost of the selected program as a DAG: each class once.
pub fn dag_cost(g: &Graph, sel: &Selection) -> Cost {
    sel.iter().map(|(id, n)| node_cost(g, *id, n)).fold(Cost::default(), Add::add)
}
