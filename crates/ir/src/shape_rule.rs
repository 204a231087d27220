//! One shape/dtype rule per primitive (JAX's abstract evaluation).

use crate::{Prim, TensorType, TypeError};

/// The types of `prim`'s results when applied to operands of types `inputs`.
///
/// # Errors
/// A [`TypeError`] naming the primitive and the operand types when the operands do not fit (wrong
/// count, dtype, rank or size, or parameters that do not fit the operands).
pub fn output_types(prim: &Prim, inputs: &[TensorType]) -> Result<Vec<TensorType>, TypeError> {
    let _ = (prim, inputs);
    todo!("shape rules")
}
