//! Literal constants passed to a `scan` become constants of its body (XLA's while-loop constant
//! sinking). A loop constant (one of a scan's `num_consts` leading operands) that is a constant of
//! the enclosing function reaches the body as a parameter, so what the body's compiler can prove
//! from its values is lost: W2's spring ends, in range by construction, are gathered with index
//! clamps at every step. As a constant of the body the same array is visible to the backend (a
//! gather or segment sum whose indices are constants in range needs no clamp or range check).
//!
//! The body's parameter variable becomes its constant variable (same id, same type, same value), so
//! nothing is renamed; the operand is dropped from the scan. A loop constant that is a literal
//! scalar broadcast (a mask the simplifier decided from integer ranges, a fill) sinks the same
//! way as the scalar and a broadcast at the head of the body that defines the parameter's
//! variable. The simplifier sinks level by level before it simplifies each scan body, so the
//! body's rules see these values (`select` on a mask decided true folds); `while_loop` and `cond`
//! bodies are simplified after their enclosing function too, but nothing sinks into them. Bodies are treated outer to inner, so a
//! constant sunk into a body and passed on to an inner scan sinks further. Values are unchanged bit
//! for bit (every primitive is pure).

use kiln_ir::{Array, ConstDef, Eqn, Function, Prim, Var};
use std::collections::HashMap;
use std::sync::Arc;

/// `f` with every scan's loop constants that are literal constants of the enclosing function, or
/// broadcasts of literal scalars, moved into the scan's body, in nested scans too; and how many
/// operands moved. A constant (or broadcast) no longer read stays in `f` (run [`crate::dce`] to
/// drop it).
///
/// ```
/// use kiln_ir::{Array, BinaryOp, DType, Function, Prim, TensorType, eval};
/// use kiln_transform::sink_scan_constants;
/// // scan over 3 steps of `c' = c + k` with `k` a literal of the enclosing program.
/// let mut body = Function::new();
/// let k = body.add_param(TensorType::new(DType::F32, [2]));
/// let c = body.add_param(TensorType::new(DType::F32, [2]));
/// body.outputs = body.push(Prim::Binary(BinaryOp::Add), &[c, k], None)?.to_vec();
/// let mut f = Function::new();
/// let c0 = f.add_param(TensorType::new(DType::F32, [2]));
/// let k = f.add_const(Array::from_vec(&[2], vec![0.5f32, -1.0]));
/// let scan = Prim::Scan { length: 3, reverse: false, num_consts: 1, num_carry: 1, body: Box::new(body) };
/// f.outputs = f.push(scan, &[k, c0], None)?.to_vec();
/// let (g, moved) = sink_scan_constants(&f);
/// assert_eq!(moved, 1);
/// let Prim::Scan { num_consts, body, .. } = &g.eqns[0].prim else { unreachable!() };
/// assert_eq!((*num_consts, body.params.len(), body.consts.len()), (0, 1, 1));
/// let args = [Array::from_vec(&[2], vec![1.0f32, 2.0])];
/// assert_eq!(eval(&g, &args)?, vec![Array::from_vec(&[2], vec![2.5f32, -1.0])]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn sink_scan_constants(f: &Function) -> (Function, usize) {
    let mut moved = 0;
    let g = sink(f, &mut moved, true);
    (g, moved)
}

/// [`sink_scan_constants`] for the scans of `f` itself, not those inside their bodies: the
/// simplifier sinks level by level, simplifying each body after what it received.
pub(crate) fn sink_one_level(f: &Function) -> (Function, usize) {
    let mut moved = 0;
    let g = sink(f, &mut moved, false);
    (g, moved)
}

/// What a loop constant is in the enclosing function: a literal, or a literal scalar broadcast
/// (a mask the simplifier decided, a zero fill), which the body recomputes from the scalar.
enum LoopConst<'f> {
    Literal(&'f Arc<Array>),
    Splat(&'f Prim, &'f Arc<Array>),
}

fn sink(f: &Function, moved: &mut usize, recurse: bool) -> Function {
    let literal: HashMap<_, &Arc<_>> = f.consts.iter().map(|c| (c.var, &c.value)).collect();
    let mut known: HashMap<Var, LoopConst> =
        literal.iter().map(|(&v, &a)| (v, LoopConst::Literal(a))).collect();
    for e in &f.eqns {
        if let (Prim::BroadcastInDim { .. }, [x]) = (&e.prim, e.inputs.as_slice())
            && let Some(a) = literal.get(x).filter(|a| a.ty().rank() == 0)
        {
            known.insert(e.outputs[0], LoopConst::Splat(&e.prim, a));
        }
    }
    let mut g = f.clone();
    for e in &mut g.eqns {
        if let Prim::Scan { num_consts, body, .. } = &mut e.prim {
            let sinkable: Vec<usize> =
                (0..*num_consts).filter(|&k| known.contains_key(&e.inputs[k])).collect();
            let mut splats = Vec::new();
            for &k in sinkable.iter().rev() {
                let var = body.params.remove(k);
                match known[&e.inputs[k]] {
                    LoopConst::Literal(value) => body.consts.push(ConstDef { var, value: Arc::clone(value) }),
                    LoopConst::Splat(prim, value) => {
                        let scalar = body.add_const(Arc::clone(value));
                        splats.push(Eqn {
                            prim: prim.clone(),
                            inputs: std::iter::once(scalar).collect(),
                            outputs: std::iter::once(var).collect(),
                            loc: None,
                        });
                    }
                }
                e.inputs.remove(k);
            }
            body.eqns.splice(0..0, splats);
            *num_consts -= sinkable.len();
            *moved += sinkable.len();
        }
        if recurse {
            e.prim = e.prim.map_subfunctions(|sub| sink(sub, moved, true));
        }
    }
    g
}

#[cfg(test)]
mod tests {
    use super::*;
    use kiln_ir::{Array, BinaryOp, DType, IndexMode, ReduceOp, Shape, TensorType, eval, verify};

    /// A loop constant that is a literal scalar broadcast (what the simplifier makes of a mask it
    /// decided) sinks as the scalar and a broadcast at the head of the body; values unchanged.
    #[test]
    fn a_broadcast_of_a_literal_scalar_sinks_as_a_broadcast_in_the_body() {
        let ty = TensorType::new(DType::F32, [3]);
        let mut body = Function::new();
        let k = body.add_param(ty.clone());
        let c = body.add_param(ty.clone());
        body.outputs = body.push(Prim::Binary(BinaryOp::Mul), &[c, k], None).unwrap().to_vec();
        let mut f = Function::new();
        let x = f.add_param(ty);
        let half = f.add_const(Array::scalar(-0.5f32));
        let bcast = Prim::BroadcastInDim { shape: Shape::from([3]), broadcast_dimensions: vec![] };
        let kb = f.push(bcast, &[half], None).unwrap()[0];
        let scan =
            Prim::Scan { length: 4, reverse: false, num_consts: 1, num_carry: 1, body: Box::new(body) };
        f.outputs = f.push(scan, &[kb, x], None).unwrap().to_vec();
        let (g, moved) = sink_scan_constants(&f);
        assert_eq!(moved, 1);
        verify(&g).unwrap();
        let Prim::Scan { num_consts: 0, body, .. } = &g.eqns[1].prim else { panic!("the scan kept it: {g}") };
        assert_eq!(
            (body.params.len(), body.consts.len(), body.eqns[0].prim.name()),
            (1, 1, "broadcast_in_dim")
        );
        let args = [Array::from_vec(&[3], vec![16.0f32, -0.0, f32::NAN])];
        let (a, b) = (eval(&f, &args).unwrap(), eval(&g, &args).unwrap());
        assert!(a[0].bitwise_eq(&b[0]));
        // Four steps of x·(-0.5): 16 → 1, -0.0 → -0.0 (NaN stays NaN).
        assert_eq!(b[0].to_vec::<f32>().unwrap()[..2], [1.0, -0.0]);
    }

    /// A scan whose body gathers from its carry with a literal index array of the outer program,
    /// inside an outer scan that passes the literal on: both levels sink it, the values stay.
    #[test]
    fn nested_scans_sink_a_literal_index_array_and_keep_values() {
        let idx_ty = TensorType::new(DType::I32, [3]);
        let x_ty = TensorType::new(DType::F32, [4]);
        let mut inner = Function::new();
        let idx = inner.add_param(idx_ty.clone());
        let x = inner.add_param(x_ty.clone());
        let gather = Prim::Gather { axis: 0, batch_dims: 0, mode: IndexMode::Clip };
        let g = inner.push(gather, &[x, idx], None).unwrap()[0];
        let s = inner.push(Prim::Reduce { op: ReduceOp::Sum, axes: vec![0] }, &[g], None).unwrap()[0];
        let sb = inner.push(
            Prim::BroadcastInDim { shape: Shape::from([4]), broadcast_dimensions: vec![] },
            &[s],
            None,
        );
        let x2 = inner.push(Prim::Binary(BinaryOp::Add), &[x, sb.unwrap()[0]], None).unwrap()[0];
        inner.outputs = vec![x2];
        let mut outer = Function::new();
        let idx = outer.add_param(idx_ty);
        let x = outer.add_param(x_ty.clone());
        let scan =
            Prim::Scan { length: 2, reverse: false, num_consts: 1, num_carry: 1, body: Box::new(inner) };
        outer.outputs = outer.push(scan, &[idx, x], None).unwrap().to_vec();
        let mut f = Function::new();
        let x = f.add_param(x_ty);
        // Out-of-range and negative ids too: the clamp is the backend's call, not this pass's.
        let idx = f.add_const(Array::from_vec(&[3], vec![3i32, -1, 7]));
        let scan =
            Prim::Scan { length: 3, reverse: false, num_consts: 1, num_carry: 1, body: Box::new(outer) };
        f.outputs = f.push(scan, &[idx, x], None).unwrap().to_vec();

        let (g, moved) = sink_scan_constants(&f);
        assert_eq!(moved, 2);
        verify(&g).unwrap();
        let Prim::Scan { num_consts: 0, body: outer, .. } = &g.eqns[0].prim else {
            panic!("outer scan kept its constant")
        };
        let Prim::Scan { num_consts: 0, body: inner, .. } = &outer.eqns[0].prim else {
            panic!("inner scan kept it")
        };
        assert_eq!(inner.consts.len(), 1);
        let args = [Array::from_vec(&[4], vec![1.0f32, -2.0, 0.5, 4.0])];
        let (a, b) = (eval(&f, &args).unwrap(), eval(&g, &args).unwrap());
        assert!(a[0].bitwise_eq(&b[0]));
        // Clipped ids [3, 0, 3]: each of the 3 × 2 steps adds x[3] + x[0] + x[3] to every element
        // (9, 36, 144, 576, 2304, 9216: all exact in f32).
        assert_eq!(b[0].to_vec::<f32>().unwrap(), vec![12286.0, 12283.0, 12285.5, 12289.0]);
    }
}
