//! AD of control flow and calls: `while_loop`, `cond`, `call`, `checkpoint`, `custom_jvp_call`,
//! `custom_vjp_call` here; `scan` (with checkpointing) in `scan.rs`.

use super::scan;
use kiln_ir::Prim;
use kiln_trace::Tensor;

/// The JVP of a control-flow primitive.
pub(super) fn jvp(
    prim: &Prim,
    primals: &[Tensor],
    tangents: &[Option<Tensor>],
) -> (Vec<Tensor>, Vec<Option<Tensor>>) {
    match prim {
        Prim::Scan { .. } => scan::jvp(prim, primals, tangents),
        Prim::WhileLoop { .. } => todo!(),
        Prim::Cond { .. } => todo!(),
        Prim::Call { .. } => todo!(),
        Prim::Checkpoint { .. } => todo!(),
        Prim::CustomJvpCall { .. } => todo!(),
        Prim::CustomVjpCall { .. } => todo!(),
        _ => unreachable!("{} is not a control-flow primitive", prim.name()),
    }
}

/// The VJP of a control-flow primitive.
pub(super) fn vjp(
    prim: &Prim,
    ins: &[Tensor],
    outs: &[Tensor],
    cts: &[Option<Tensor>],
) -> Vec<Option<Tensor>> {
    match prim {
        Prim::Scan { .. } => scan::vjp(prim, ins, outs, cts),
        Prim::WhileLoop { .. } => todo!(),
        Prim::Cond { .. } => todo!(),
        Prim::Call { .. } => todo!(),
        Prim::Checkpoint { .. } => todo!(),
        Prim::CustomJvpCall { .. } => todo!(),
        Prim::CustomVjpCall { .. } => todo!(),
        _ => unreachable!("{} is not a control-flow primitive", prim.name()),
    }
}
