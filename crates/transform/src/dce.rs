//! Dead-code elimination: drop equations none of whose outputs reach the function's outputs (every
//! primitive is pure), recursively inside sub-functions, and constants nobody uses.

use kiln_ir::{Function, Prim};

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
            dce_subfunctions(&mut e.prim);
            e
        })
        .collect();
    out.consts.retain(|c| live[c.var.index()]);
    out
}

fn dce_subfunctions(prim: &mut Prim) {
    match prim {
        Prim::CustomJvpCall { fun, jvp } => {
            **fun = dce(fun);
            **jvp = dce(jvp);
        }
        Prim::CustomVjpCall { fun, fwd, bwd } => {
            **fun = dce(fun);
            **fwd = dce(fwd);
            **bwd = dce(bwd);
        }
        Prim::Scan { body, .. } | Prim::Call { body } | Prim::Checkpoint { body } => **body = dce(body),
        Prim::WhileLoop { cond, body, .. } => {
            **cond = dce(cond);
            **body = dce(body);
        }
        Prim::Cond { branches } => {
            for b in branches {
                *b = dce(b);
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
        | Prim::Reduce { .. }
        | Prim::ArgReduce { .. }
        | Prim::Cumulative { .. }
        | Prim::Sort { .. }
        | Prim::DotGeneral { .. }
        | Prim::Gather { .. }
        | Prim::Scatter { .. }
        | Prim::SegmentSum { .. }
        | Prim::Threefry2x32
        | Prim::StopGradient => {}
    }
}
