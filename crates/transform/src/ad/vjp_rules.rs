//! One direct VJP rule per primitive: the cotangent of each input from the primal inputs, the primal
//! outputs and the output cotangents.
//!
//! `cts[i]` is `None` for a symbolic zero; at least one is `Some` (the driver skips the equation
//! otherwise). Rules return one cotangent per input, `None` for a zero or a non-float input, and
//! multiply cotangents by local derivatives with `safe_mul` (see the `ad` module docs on `where`
//! safety). Control flow lives in `control.rs`.

use super::control;
use kiln_ir::Prim;
use kiln_trace::Tensor;

/// The VJP rule of `prim`.
pub(crate) fn vjp_rule(
    prim: &Prim,
    ins: &[Tensor],
    outs: &[Tensor],
    cts: &[Option<Tensor>],
) -> Vec<Option<Tensor>> {
    match prim {
        Prim::Unary(op) => todo!("{op:?}"),
        Prim::Binary(op) => todo!("{op:?}"),
        Prim::Compare(op) => todo!("{op:?}"),
        Prim::Select => todo!(),
        Prim::Clamp => todo!(),
        Prim::ConvertElementType { .. } => todo!(),
        Prim::BitcastConvertType { .. } => todo!(),
        Prim::Iota { .. } => todo!(),
        Prim::BroadcastInDim { .. } => todo!(),
        Prim::Reshape { .. } => todo!(),
        Prim::Transpose { .. } => todo!(),
        Prim::Rev { .. } => todo!(),
        Prim::Slice { .. } => todo!(),
        Prim::DynamicSlice { .. } => todo!(),
        Prim::DynamicUpdateSlice => todo!(),
        Prim::Concatenate { .. } => todo!(),
        Prim::Pad { .. } => todo!(),
        Prim::Reduce { .. } => todo!(),
        Prim::ArgReduce { .. } => todo!(),
        Prim::Cumulative { .. } => todo!(),
        Prim::Sort { .. } => todo!(),
        Prim::DotGeneral { .. } => todo!(),
        Prim::Gather { .. } => todo!(),
        Prim::Scatter { .. } => todo!(),
        Prim::SegmentSum { .. } => todo!(),
        Prim::Threefry2x32 => todo!(),
        Prim::StopGradient => todo!(),
        Prim::CustomJvpCall { .. }
        | Prim::CustomVjpCall { .. }
        | Prim::Scan { .. }
        | Prim::WhileLoop { .. }
        | Prim::Cond { .. }
        | Prim::Call { .. }
        | Prim::Checkpoint { .. } => control::vjp(prim, ins, outs, cts),
    }
}
