//! Canonical variable numbering: the order in which the printer names variables and the parser
//! assigns ids.

use crate::{ConstDef, Eqn, Function, Prim, Var};
use std::collections::HashMap;

/// Every variable of `f` once, in canonical order: parameters, constants and equation outputs in
/// definition order (a variable defined twice counts at its first definition), then variables that
/// are used but never defined (an invalid function) in order of first use. Ids that do not index
/// `f.vars` come last, so the ids of the others are dense.
pub(crate) fn var_order(f: &Function) -> Vec<Var> {
    let defs =
        f.params.iter().chain(f.consts.iter().map(|c| &c.var)).chain(f.eqns.iter().flat_map(|e| &e.outputs));
    let uses = f.eqns.iter().flat_map(|e| &e.inputs).chain(&f.outputs);
    let mut seen = std::collections::HashSet::new();
    let all: Vec<Var> = defs.chain(uses).copied().filter(|v| seen.insert(*v)).collect();
    let (mut order, invalid): (Vec<Var>, Vec<Var>) = all.into_iter().partition(|v| v.index() < f.vars.len());
    order.extend(invalid);
    order
}

impl Function {
    /// The same function with variables renumbered in the order the printer names them (see the
    /// text module): parameters, constants, then equation outputs, recursively in sub-functions;
    /// unused slots of [`Function::vars`] are dropped. Parsing printed text yields exactly this, so
    /// `parse(&f.to_string()) == Ok(f.canonicalize())`.
    ///
    /// Invalid functions are renumbered too: variables used but never defined follow the defined
    /// ones, and ids outside `vars` get ids past the end of the new table.
    pub fn canonicalize(&self) -> Function {
        let order = var_order(self);
        let map: HashMap<Var, Var> = order.iter().enumerate().map(|(i, v)| (*v, Var(i as u32))).collect();
        let m = |v: &Var| map[v];
        Function {
            vars: order.iter().filter_map(|v| self.vars.get(v.index()).cloned()).collect(),
            params: self.params.iter().map(m).collect(),
            consts: self.consts.iter().map(|c| ConstDef { var: m(&c.var), value: c.value.clone() }).collect(),
            eqns: self
                .eqns
                .iter()
                .map(|e| Eqn {
                    prim: canonical_prim(&e.prim),
                    inputs: e.inputs.iter().map(m).collect(),
                    outputs: e.outputs.iter().map(m).collect(),
                    loc: e.loc.clone(),
                })
                .collect(),
            outputs: self.outputs.iter().map(m).collect(),
        }
    }
}

/// `p` with its sub-functions canonicalized.
fn canonical_prim(p: &Prim) -> Prim {
    let c = |f: &Function| Box::new(f.canonicalize());
    match p {
        Prim::CustomJvpCall { fun, jvp } => Prim::CustomJvpCall { fun: c(fun), jvp: c(jvp) },
        Prim::CustomVjpCall { fun, fwd, bwd } => {
            Prim::CustomVjpCall { fun: c(fun), fwd: c(fwd), bwd: c(bwd) }
        }
        Prim::Scan { length, reverse, num_consts, num_carry, body } => Prim::Scan {
            length: *length,
            reverse: *reverse,
            num_consts: *num_consts,
            num_carry: *num_carry,
            body: c(body),
        },
        Prim::WhileLoop { cond, body, cond_consts, body_consts, max_iters } => Prim::WhileLoop {
            cond: c(cond),
            body: c(body),
            cond_consts: *cond_consts,
            body_consts: *body_consts,
            max_iters: *max_iters,
        },
        Prim::Cond { branches } => {
            Prim::Cond { branches: branches.iter().map(Function::canonicalize).collect() }
        }
        Prim::Call { body } => Prim::Call { body: c(body) },
        Prim::Checkpoint { body } => Prim::Checkpoint { body: c(body) },
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
        | Prim::Sort { .. }
        | Prim::DotGeneral { .. }
        | Prim::Gather { .. }
        | Prim::Scatter { .. }
        | Prim::SegmentSum { .. }
        | Prim::Threefry2x32
        | Prim::StopGradient => p.clone(),
    }
}
