//! The reference interpreter: what every primitive means, on `ndarray`, with XLA's semantics at the
//! edges (clamped gather/dynamic_slice indices, dropped out-of-range scatter updates, NaN-propagating
//! max/min, C-style integer division and remainder, `-0.0` kept).
//!
//! [`eval_prim`] checks operand types with the shape rule first, so the per-family modules may assume
//! well-typed operands.

mod control;
mod elementwise;

pub use elementwise::erf_inv;
mod indexing;
mod reduce;
mod structural;

use crate::{Array, EvalError, Function, Prim, Var, output_types};

/// Runs `f` on `args` (one host array per parameter).
///
/// # Errors
/// [`EvalError::Arguments`] when the arguments' count or types differ from the parameters'; a
/// [`EvalError::Type`] if an equation is ill-typed (the function was not verified);
/// [`EvalError::OutOfMemory`] when a result is too large to allocate.
pub fn eval(f: &Function, args: &[Array]) -> Result<Vec<Array>, EvalError> {
    let refs: Vec<&Array> = args.iter().collect();
    eval_refs(f, &refs)
}

/// [`eval`] on borrowed arguments.
pub(crate) fn eval_refs(f: &Function, args: &[&Array]) -> Result<Vec<Array>, EvalError> {
    let expected = f.param_types();
    let got: Vec<_> = args.iter().map(|a| a.ty()).collect();
    if expected != got {
        return Err(EvalError::Arguments { expected: expected.len(), expected_types: expected, got });
    }
    let mut env: Vec<Option<Array>> = vec![None; f.vars.len()];
    for (p, a) in f.params.iter().zip(args) {
        env[p.index()] = Some((*a).clone());
    }
    for c in &f.consts {
        env[c.var.index()] = Some((*c.value).clone());
    }
    for eqn in &f.eqns {
        let ins: Vec<&Array> = eqn.inputs.iter().map(|v| get(&env, *v)).collect();
        let outs = eval_prim(&eqn.prim, &ins)?;
        for (v, a) in eqn.outputs.iter().zip(outs) {
            env[v.index()] = Some(a);
        }
    }
    Ok(f.outputs.iter().map(|v| get(&env, *v).clone()).collect())
}

/// Primitive applications made by the interpreter in this process (see [`interpreter_calls`]).
static PRIM_EVALS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// How many primitives the interpreter has applied in this process ([`eval`] and [`eval_prim`],
/// eager tensor operations included). Compiled code never calls the interpreter: tests check that this
/// count stays put while it runs.
pub fn interpreter_calls() -> u64 {
    PRIM_EVALS.load(std::sync::atomic::Ordering::Relaxed)
}

/// Applies one primitive to host arrays.
///
/// # Errors
/// The shape rule's [`crate::TypeError`] when the operands do not fit; [`EvalError::OutOfMemory`]
/// when a result is too large to allocate.
pub fn eval_prim(prim: &Prim, args: &[&Array]) -> Result<Vec<Array>, EvalError> {
    PRIM_EVALS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let types: Vec<_> = args.iter().map(|a| a.ty()).collect();
    for ty in output_types(prim, &types)? {
        ty.check_allocatable().map_err(|message| EvalError::OutOfMemory { prim: prim.name(), message })?;
    }
    let one = |a: Array| Ok(vec![a]);
    match prim {
        Prim::Unary(op) => one(elementwise::unary(*op, args[0])),
        Prim::Binary(op) => one(elementwise::binary(*op, args[0], args[1])),
        Prim::Compare(op) => one(elementwise::compare(*op, args[0], args[1])),
        Prim::Select => one(elementwise::select(args[0], args[1], args[2])),
        Prim::Clamp => one(elementwise::clamp(args[0], args[1], args[2])),
        Prim::ConvertElementType { dtype } => one(elementwise::convert(args[0], *dtype)),
        Prim::BitcastConvertType { dtype } => one(elementwise::bitcast(args[0], *dtype)),
        Prim::Iota { dtype, shape, dimension } => one(elementwise::iota(*dtype, shape, *dimension)),
        Prim::Threefry2x32 => Ok(elementwise::threefry2x32(args[0], args[1], args[2], args[3])),
        Prim::BroadcastInDim { shape, broadcast_dimensions } => {
            one(structural::broadcast_in_dim(args[0], shape, broadcast_dimensions))
        }
        Prim::Reshape { new_sizes } => one(structural::reshape(args[0], new_sizes)),
        Prim::Transpose { permutation } => one(structural::transpose(args[0], permutation)),
        Prim::Rev { dimensions } => one(structural::rev(args[0], dimensions)),
        Prim::Slice { start, limit, strides } => one(structural::slice(args[0], start, limit, strides)),
        Prim::DynamicSlice { slice_sizes } => {
            one(structural::dynamic_slice(args[0], &args[1..], slice_sizes))
        }
        Prim::DynamicUpdateSlice => one(structural::dynamic_update_slice(args[0], args[1], &args[2..])),
        Prim::Concatenate { dimension } => one(structural::concatenate(args, *dimension)),
        Prim::Pad { low, high, interior } => one(structural::pad(args[0], args[1], low, high, interior)),
        Prim::Reduce { op, axes } => one(reduce::reduce(*op, args[0], axes)),
        Prim::ArgReduce { op, axis, index_dtype } => {
            one(reduce::arg_reduce(*op, args[0], *axis, *index_dtype))
        }
        Prim::Cumulative { op, axis, reverse } => one(reduce::cumulative(*op, args[0], *axis, *reverse)),
        Prim::Sort { dimension, num_keys } => Ok(reduce::sort(args, *dimension, *num_keys)),
        Prim::DotGeneral {
            lhs_contracting,
            rhs_contracting,
            lhs_batch,
            rhs_batch,
            preferred_element_type,
        } => one(reduce::dot_general(
            args[0],
            args[1],
            (lhs_contracting, rhs_contracting),
            (lhs_batch, rhs_batch),
            *preferred_element_type,
        )),
        Prim::Gather { axis, batch_dims, mode } => {
            one(indexing::gather(args[0], args[1], *axis, *batch_dims, *mode))
        }
        Prim::Scatter { op, axis, batch_dims, mode } => {
            one(indexing::scatter(*op, args[0], args[1], args[2], *axis, *batch_dims, *mode))
        }
        Prim::SegmentSum { num_segments } => one(indexing::segment_sum(args[0], args[1], *num_segments)),
        Prim::StopGradient => one(args[0].clone()),
        Prim::CustomJvpCall { fun, .. } => eval_refs(fun, args),
        Prim::CustomVjpCall { fun, .. } => eval_refs(fun, args),
        Prim::Call { body } => eval_refs(body, args),
        Prim::Checkpoint { body } => eval_refs(body, args),
        Prim::Scan { length, reverse, num_consts, num_carry, body } => {
            control::scan(body, *length, *reverse, *num_consts, *num_carry, args)
        }
        Prim::WhileLoop { cond, body, cond_consts, body_consts, max_iters } => {
            control::while_loop(cond, body, *cond_consts, *body_consts, *max_iters, args)
        }
        Prim::Cond { branches } => control::cond(branches, args),
    }
}

fn get(env: &[Option<Array>], v: Var) -> &Array {
    env[v.index()].as_ref().expect("variable used before definition (unverified function)")
}
