//! A region: a window of consecutive equations of one function body, loaded into an e-graph and,
//! after rewriting, written back as equations.

use super::analysis::{Graph, RegionAnalysis};
use super::extract::{Cost, CostModel, Selection, eqn_cost, node_cost};
use super::lang::Node;
use super::rules::Term;
use egg::Id;
use kiln_ir::{Array, Eqn, Function, Prim, SrcLoc, Var};
use smallvec::SmallVec;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// A region loaded into an e-graph.
pub struct Loaded {
    /// The e-graph.
    pub graph: Graph,
    /// Outer variables read by the region, by `Node::Input` index.
    pub inputs: Vec<Var>,
    /// Variables defined in the region and used after it, with their classes.
    pub roots: Vec<(Var, Id)>,
    /// The call site of the equation that first defined each class.
    pub locs: HashMap<Id, SrcLoc>,
    /// The cost of the region's equations as written.
    pub cost_before: Cost,
}

/// Loads `eqns` (whose primitives may differ from `f`'s only in simplified sub-functions) into an
/// e-graph. `used_after[v]` says whether variable `v` is read after the window or is an output.
pub fn load(f: &Function, eqns: &[Eqn], used_after: &[bool], model: CostModel) -> Loaded {
    let mut g = Graph::new(RegionAnalysis { model, ..RegionAnalysis::default() });
    let mut env: HashMap<Var, Id> = HashMap::new();
    let consts: HashMap<Var, &Arc<Array>> = f.consts.iter().map(|c| (c.var, &c.value)).collect();
    let mut inputs = vec![];
    let mut locs = HashMap::new();
    // Priced as the extraction prices its selection (`extract::dag_cost`): the equations, and each
    // constant read once. Without the constants, every extraction that still read a large one
    // (W2's 4 KB of scan times) looked costlier than the region and was refused.
    let mut cost_before = Cost::default();
    let mut priced: HashSet<Id> = HashSet::new();
    let mut roots = vec![];
    for eqn in eqns {
        let mut ins: SmallVec<[Id; 3]> = SmallVec::new();
        for v in &eqn.inputs {
            let id = *env.entry(*v).or_insert_with(|| match consts.get(v) {
                Some(value) => {
                    let node = Node::Const(g.analysis.consts.intern((*value).clone()));
                    let id = g.add(node.clone());
                    if priced.insert(id) {
                        cost_before = cost_before + node_cost(&g, id, &node);
                    }
                    id
                }
                None => {
                    inputs.push(*v);
                    g.analysis.inputs.push(f.var_type(*v).clone());
                    g.add(Node::Input(u32::try_from(inputs.len() - 1).expect("fewer than 2^32 inputs")))
                }
            });
            ins.push(id);
        }
        let in_tys: Vec<_> = eqn.inputs.iter().map(|v| f.var_type(*v)).collect();
        let out_tys: Vec<_> = eqn.outputs.iter().map(|v| f.var_type(*v).clone()).collect();
        cost_before = cost_before + eqn_cost(&eqn.prim, &in_tys, &out_tys, model);
        let p = g.analysis.prims.intern(eqn.prim.clone());
        let id = g.add(Node::Op(p, ins));
        if let Some(loc) = &eqn.loc {
            locs.entry(id).or_insert_with(|| loc.clone());
        }
        let outs: Vec<Id> = if eqn.outputs.len() == 1 {
            vec![id]
        } else {
            (0..eqn.outputs.len()).map(|k| g.add(Node::Proj(k as u32, [id]))).collect()
        };
        for (v, o) in eqn.outputs.iter().zip(outs) {
            env.insert(*v, o);
            if used_after[v.index()] {
                roots.push((*v, o));
            }
        }
    }
    g.rebuild();
    Loaded { graph: g, inputs, roots, locs, cost_before }
}

/// Adds `t` to the e-graph, type-checking every new node; `None` if a node does not type-check (a
/// rule's right-hand side that does not fit is dropped rather than trusted).
pub fn add_term(g: &mut Graph, t: &Term) -> Option<Id> {
    match t {
        Term::Class(id) => Some(*id),
        Term::Const(a) => {
            let i = g.analysis.consts.intern(Arc::new(a.clone()));
            Some(g.add(Node::Const(i)))
        }
        Term::Op(prim, args) => {
            let ids: SmallVec<[Id; 3]> = args.iter().map(|a| add_term(g, a)).collect::<Option<_>>()?;
            let tys: Vec<_> = ids.iter().map(|i| g[*i].data.tys.first().cloned()).collect::<Option<_>>()?;
            if ids.iter().any(|i| !g[*i].data.is_value()) {
                return None;
            }
            let outs = kiln_ir::output_types(prim, &tys).ok()?;
            if outs.len() != 1 {
                return None;
            }
            let p = g.analysis.prims.intern(prim.clone());
            Some(g.add(Node::Op(p, ids)))
        }
    }
}

/// Writes a region back into `out`: the selected program when `sel` is given, else `eqns` as they
/// were. `map` takes old variables to `out`'s (inputs must be mapped; roots get mapped here);
/// `const_vars` shares constants between regions.
pub struct Writer<'a> {
    /// The function being built.
    pub out: &'a mut Function,
    /// Old variable → new variable.
    pub map: &'a mut HashMap<Var, Var>,
    /// Constant data (by address) → its variable in `out`.
    pub const_vars: &'a mut HashMap<*const Array, Var>,
    /// The input function's constants.
    pub consts: &'a HashMap<Var, Arc<Array>>,
}

impl Writer<'_> {
    /// The new variable of an old one (constants are added to `out` on first use).
    pub fn var(&mut self, v: Var) -> Var {
        if let Some(n) = self.map.get(&v) {
            return *n;
        }
        let value = self.consts.get(&v).expect("simplify: a variable read before its definition").clone();
        let n = self.constant(value);
        self.map.insert(v, n);
        n
    }

    fn constant(&mut self, value: Arc<Array>) -> Var {
        let key = Arc::as_ptr(&value);
        if let Some(v) = self.const_vars.get(&key) {
            return *v;
        }
        let v = self.out.add_const(value);
        self.const_vars.insert(key, v);
        v
    }

    /// Copies `eqns` unchanged (but for variable names).
    pub fn copy(&mut self, eqns: &[Eqn]) {
        for e in eqns {
            let ins: Vec<Var> = e.inputs.iter().map(|v| self.var(*v)).collect();
            let outs = self.out.push(e.prim.clone(), &ins, e.loc.clone()).expect("a verified equation");
            for (o, n) in e.outputs.iter().zip(outs) {
                self.map.insert(*o, n);
            }
        }
    }

    /// Emits the selected program of `r` and maps its roots.
    pub fn emit(&mut self, r: &Loaded, sel: &Selection) {
        let mut done: HashMap<Id, SmallVec<[Var; 2]>> = HashMap::new();
        for (v, id) in &r.roots {
            let vars = self.emit_class(r, sel, r.graph.find(*id), &mut done);
            self.map.insert(*v, vars[0]);
        }
    }

    fn emit_class(
        &mut self,
        r: &Loaded,
        sel: &Selection,
        id: Id,
        done: &mut HashMap<Id, SmallVec<[Var; 2]>>,
    ) -> SmallVec<[Var; 2]> {
        if let Some(vs) = done.get(&id) {
            return vs.clone();
        }
        let g = &r.graph;
        let vars: SmallVec<[Var; 2]> = match &sel[&id] {
            Node::Input(i) => SmallVec::from_elem(self.var(r.inputs[*i as usize]), 1),
            Node::Const(i) => SmallVec::from_elem(self.constant(g.analysis.consts.get(*i).clone()), 1),
            Node::Proj(k, [t]) => {
                let tuple = self.emit_class(r, sel, g.find(*t), done);
                SmallVec::from_elem(tuple[*k as usize], 1)
            }
            Node::Op(p, xs) => {
                let mut ins = vec![];
                for x in xs {
                    ins.push(self.emit_class(r, sel, g.find(*x), done)[0]);
                }
                let prim: Prim = g.analysis.prims.get(*p).clone();
                self.out.push(prim, &ins, r.locs.get(&id).cloned()).expect("extracted nodes are type-checked")
            }
        };
        done.insert(id, vars.clone());
        vars
    }
}
