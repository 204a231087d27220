//! Canonical variable numbering: the order in which the printer names variables and the parser
//! assigns ids.

use crate::{ConstDef, Eqn, Function, Var};
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
                    prim: e.prim.map_subfunctions(Function::canonicalize),
                    inputs: e.inputs.iter().map(m).collect(),
                    outputs: e.outputs.iter().map(m).collect(),
                    loc: e.loc.clone(),
                })
                .collect(),
            outputs: self.outputs.iter().map(m).collect(),
        }
    }
}
