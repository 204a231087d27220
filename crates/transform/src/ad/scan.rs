//! AD of `scan`: JVP as a scan over (primal, tangent) carries; reverse mode as a reverse scan over
//! stored residuals, with checkpointing by default (DESIGN §5).

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

/// The JVP of a `scan`.
pub(super) fn jvp(
    prim: &Prim,
    primals: &[Tensor],
    tangents: &[Option<Tensor>],
) -> (Vec<Tensor>, Vec<Option<Tensor>>) {
    todo!("{} {primals:?} {tangents:?}", prim.name())
}

/// The VJP of a `scan`.
pub(super) fn vjp(
    prim: &Prim,
    ins: &[Tensor],
    outs: &[Tensor],
    cts: &[Option<Tensor>],
) -> Vec<Option<Tensor>> {
    todo!("{} {ins:?} {outs:?} {cts:?}", prim.name())
}
