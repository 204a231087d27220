//! One JVP rule per primitive: primal outputs and their tangents from primal inputs and tangents.
//!
//! `tangents[i]` is `None` for a symbolic zero (and always for integer/bool operands); at least one
//! is `Some` (the driver binds the primitive directly otherwise). Rules return one tangent per output,
//! `None` for a zero or a non-float output. Control flow lives in `control.rs`.

use super::control;
use kiln_ir::Prim;
use kiln_trace::Tensor;

/// The JVP rule of `prim`.
pub(crate) fn jvp_rule(
    prim: &Prim,
    primals: &[Tensor],
    tangents: &[Option<Tensor>],
) -> (Vec<Tensor>, Vec<Option<Tensor>>) {
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
        | Prim::Checkpoint { .. } => control::jvp(prim, primals, tangents),
    }
}
