//! Dead-code elimination: drop equations none of whose outputs reach the function's outputs (every
//! primitive is pure), recursively inside sub-functions, and constants nobody uses.

use kiln_ir::Function;

/// A copy of `f` without dead equations and unused constants (parameters are kept: they are the
/// signature). Sub-functions are cleaned too (their signatures are kept).
pub fn dce(f: &Function) -> Function {
    let mut live = vec![false; f.vars.len()];
    for v in &f.outputs {
        live[v.index()] = true;
    }
    let mut keep = vec![false; f.eqns.len()];
    for (i, eqn) in f.eqns.iter().enumerate().rev() {
        if eqn.outputs.iter().any(|v| live[v.index()]) {
            keep[i] = true;
            for v in &eqn.inputs {
                live[v.index()] = true;
            }
        }
    }
    let mut out = f.clone();
    out.eqns = f
        .eqns
        .iter()
        .zip(&keep)
        .filter(|(_, k)| **k)
        .map(|(e, _)| {
            let mut e = e.clone();
            e.prim = e.prim.map_subfunctions(dce);
            e
        })
        .collect();
    out.consts.retain(|c| live[c.var.index()]);
    out
}
