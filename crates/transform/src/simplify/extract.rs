//! The cost model and a DAG-aware extractor.
//!
//! Cost is lexicographic: bytes materialized first, then flops, then node count (which makes every
//! operation cost something, so extraction never picks a cycle). The extractor chooses one node per
//! class bottom-up with a worklist (only parents of improved classes are revisited, so it is linear
//! in practice, unlike egg's re-sweeping `Extractor`), then prices the chosen program as a DAG —
//! every class once, however many consumers share it — which is the number the caller compares with
//! the input's to refuse a costlier result.

use super::analysis::Graph;
use super::lang::Node;
use egg::{Id, Language};
use kiln_ir::{Prim, TensorType, UnaryOp};
use std::collections::{HashMap, HashSet};
use std::ops::Add;

/// The price of a program: bytes of every value it materializes, arithmetic operations, nodes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Cost {
    /// Bytes written to results (every equation result counts, constants count their data).
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

/// The cost of one equation `prim(ins) -> outs` (the larger of its input and output element counts
/// times the per-element operations).
pub fn eqn_cost(prim: &Prim, ins: &[&TensorType], outs: &[TensorType]) -> Cost {
    let elems =
        ins.iter().map(|t| t.shape.size()).chain(outs.iter().map(|t| t.shape.size())).max().unwrap_or(0);
    Cost { bytes: outs.iter().map(bytes).sum(), flops: flops_per_element(prim) * elems as u64, nodes: 1 }
}

/// The cost of one e-node alone.
pub fn node_cost(g: &Graph, id: Id, node: &Node) -> Cost {
    match node {
        Node::Input(_) => Cost::default(),
        Node::Const(i) => {
            let c = g.analysis.consts.get(*i);
            Cost { bytes: bytes(&c.ty()), flops: 0, nodes: 1 }
        }
        Node::Proj(..) => Cost { nodes: 1, ..Cost::default() },
        Node::Op(p, xs) => {
            let ins: Vec<&TensorType> = xs.iter().flat_map(|x| g[*x].data.tys.iter()).collect();
            eqn_cost(g.analysis.prims.get(*p), &ins, &g[id].data.tys)
        }
    }
}

/// One chosen node per reachable class.
pub type Selection = HashMap<Id, Node>;

/// Chooses a node per class (bottom-up by tree cost, worklist-driven) and returns the choice for
/// every class reachable from `roots`.
pub fn extract(g: &Graph, roots: &[Id]) -> Selection {
    let mut parents: HashMap<Id, Vec<Id>> = HashMap::new();
    let mut costs: HashMap<Id, Vec<Cost>> = HashMap::new();
    for class in g.classes() {
        let own: Vec<Cost> = class.nodes.iter().map(|n| node_cost(g, class.id, n)).collect();
        costs.insert(class.id, own);
        for n in &class.nodes {
            for c in n.children() {
                parents.entry(g.find(*c)).or_default().push(class.id);
            }
        }
    }
    let mut best: HashMap<Id, (Cost, usize)> = HashMap::new();
    let mut queue: Vec<Id> = g.classes().map(|c| c.id).collect();
    queue.sort();
    let mut queued: HashSet<Id> = queue.iter().copied().collect();
    while let Some(id) = queue.pop() {
        queued.remove(&id);
        let class = &g[id];
        let mut improved = false;
        for (i, n) in class.nodes.iter().enumerate() {
            let mut total = costs[&id][i];
            let mut ready = true;
            for c in n.children() {
                match best.get(&g.find(*c)) {
                    Some((cc, _)) => total = total + *cc,
                    None => {
                        ready = false;
                        break;
                    }
                }
            }
            if ready && best.get(&id).is_none_or(|(b, _)| total < *b) {
                best.insert(id, (total, i));
                improved = true;
            }
        }
        if improved {
            for p in parents.get(&id).into_iter().flatten() {
                if queued.insert(*p) {
                    queue.push(*p);
                }
            }
        }
    }
    let mut sel = Selection::new();
    let mut stack: Vec<Id> = roots.iter().map(|r| g.find(*r)).collect();
    while let Some(id) = stack.pop() {
        if sel.contains_key(&id) {
            continue;
        }
        let (_, i) = best[&id];
        let node = g[id].nodes[i].clone();
        stack.extend(node.children().iter().map(|c| g.find(*c)));
        sel.insert(id, node);
    }
    sel
}

/// The cost of the selected program as a DAG: each class once.
pub fn dag_cost(g: &Graph, sel: &Selection) -> Cost {
    sel.iter().map(|(id, n)| node_cost(g, *id, n)).fold(Cost::default(), Add::add)
}
