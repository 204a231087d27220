//! Control flow: `scan`, `while_loop`, `cond`.

use crate::{Array, EvalError, Function};

pub(super) fn scan(
    body: &Function,
    length: usize,
    reverse: bool,
    num_consts: usize,
    num_carry: usize,
    args: &[&Array],
) -> Result<Vec<Array>, EvalError> {
    todo!("{body:?} {length} {reverse} {num_consts} {num_carry} {args:?}")
}
pub(super) fn while_loop(
    cond: &Function,
    body: &Function,
    cond_consts: usize,
    body_consts: usize,
    max_iters: Option<u64>,
    args: &[&Array],
) -> Result<Vec<Array>, EvalError> {
    todo!("{cond:?} {body:?} {cond_consts} {body_consts} {max_iters:?} {args:?}")
}
pub(super) fn cond(branches: &[Function], args: &[&Array]) -> Result<Vec<Array>, EvalError> {
    todo!("{branches:?} {args:?}")
}
