//! AD of control flow and calls: `scan` (JVP; reverse mode by a reverse scan with checkpointing),
//! `while_loop`, `cond`, `call`, `checkpoint`, `custom_jvp_call`, `custom_vjp_call`.

use kiln_ir::Prim;
use kiln_trace::Tensor;

/// How the reverse mode of a `scan` keeps what the backward pass needs (DESIGN §5).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Checkpoint {
    /// Save the carry every ⌈√T⌉ steps and recompute the steps between (the default).
    #[default]
    Auto,
    /// Save the carry every `k` steps.
    Every(usize),
    /// Save every step's residuals.
    StoreAll,
}

/// The JVP of a control-flow primitive.
pub(super) fn jvp(
    prim: &Prim,
    primals: &[Tensor],
    tangents: &[Option<Tensor>],
) -> (Vec<Tensor>, Vec<Option<Tensor>>) {
    todo!("{} {primals:?} {tangents:?}", prim.name())
}

/// The VJP of a control-flow primitive.
pub(super) fn vjp(
    prim: &Prim,
    ins: &[Tensor],
    outs: &[Tensor],
    cts: &[Option<Tensor>],
) -> Vec<Option<Tensor>> {
    todo!("{} {ins:?} {outs:?} {cts:?}", prim.name())
}
