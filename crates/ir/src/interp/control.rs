//! Control flow: `scan`, `while_loop`, `cond`. Sub-functions run through [`super::eval_refs`], which
//! checks each call's argument types against the sub-function's parameters.

use crate::{Array, EvalError, Function, TensorType};
use ndarray::{ArrayD, Axis};

/// `scan(consts.., init_carry.., xs..)`: for `t` in `0..length` (descending when `reverse`),
/// `(carry.., y..) = body(consts.., carry.., xs[t]..)`, each `y` stored at row `t` of its stacked
/// output. Returns `(final_carry.., ys..)`; with `length == 0` the initial carry and `[0, ...]` ys.
pub(super) fn scan(
    body: &Function,
    length: usize,
    reverse: bool,
    num_consts: usize,
    num_carry: usize,
    args: &[&Array],
) -> Result<Vec<Array>, EvalError> {
    let (consts, rest) = args.split_at(num_consts);
    let (init, xs) = rest.split_at(num_carry);
    // Preallocated from the body's declared types, so length 0 still gives correctly typed ys.
    let mut ys: Vec<Array> = body.output_types()[num_carry..]
        .iter()
        .map(|t| {
            let dims = [&[length], t.shape.dims()].concat();
            Array::zeros(&TensorType::new(t.dtype, dims))
        })
        .collect();
    let mut carry = owned(init);
    for step in 0..length {
        let t = if reverse { length - 1 - step } else { step };
        let x_t: Vec<Array> = xs.iter().map(|x| row(x, t)).collect();
        let step_args: Vec<&Array> = consts.iter().copied().chain(&carry).chain(&x_t).collect();
        let mut outs = super::eval_refs(body, &step_args)?;
        let y_t = outs.split_off(num_carry);
        carry = outs;
        for (y, y_t) in ys.iter_mut().zip(&y_t) {
            crate::with_array!(y, y => set_row(y, t, y_t));
        }
    }
    carry.extend(ys);
    Ok(carry)
}

/// `while_loop(cond_consts.., body_consts.., init..)`: while `cond(cond_consts.., state..)` is true
/// (and fewer than `max_iters` iterations ran, when given), `state = body(body_consts.., state..)`.
pub(super) fn while_loop(
    cond: &Function,
    body: &Function,
    cond_consts: usize,
    body_consts: usize,
    max_iters: Option<u64>,
    args: &[&Array],
) -> Result<Vec<Array>, EvalError> {
    let (cond_c, rest) = args.split_at(cond_consts);
    let (body_c, init) = rest.split_at(body_consts);
    let mut state = owned(init);
    let mut iters: u64 = 0;
    // The bound is checked first: once it is reached `cond` is not run again (it is pure, so only
    // the work differs).
    while max_iters.is_none_or(|n| iters < n) {
        let cond_args: Vec<&Array> = cond_c.iter().copied().chain(&state).collect();
        if !truth(&super::eval_refs(cond, &cond_args)?[0]) {
            break;
        }
        let body_args: Vec<&Array> = body_c.iter().copied().chain(&state).collect();
        state = super::eval_refs(body, &body_args)?;
        iters += 1;
    }
    Ok(state)
}

/// `cond(index, args..)` (`lax.switch`): runs `branches[clamp(index, 0, n-1)]` on `args`.
pub(super) fn cond(branches: &[Function], args: &[&Array]) -> Result<Vec<Array>, EvalError> {
    let (index, operands) = args.split_first().expect("cond takes an index operand");
    let last = i64::try_from(branches.len()).expect("branch count fits i64") - 1;
    assert!(last >= 0, "cond needs at least one branch");
    let k = usize::try_from(scalar_index(index).clamp(0, last)).expect("clamped into range");
    super::eval_refs(&branches[k], operands)
}

fn owned(xs: &[&Array]) -> Vec<Array> {
    xs.iter().map(|a| (*a).clone()).collect()
}

/// Row `t` of `x` along its leading axis.
fn row(x: &Array, t: usize) -> Array {
    crate::with_array!(x, a => Array::from(a.index_axis(Axis(0), t).to_owned()))
}

/// Writes `src` (same dtype) into row `t` of `dst` along its leading axis.
fn set_row<T: crate::Element>(dst: &mut ArrayD<T>, t: usize, src: &Array) {
    let src = T::view(src).expect("scan body output has its declared dtype");
    dst.index_axis_mut(Axis(0), t).assign(src);
}

/// The value of a `bool[]` predicate.
fn truth(pred: &Array) -> bool {
    match pred {
        Array::Bool(a) => *a.iter().next().expect("predicate is a bool scalar"),
        Array::F32(_) | Array::F64(_) | Array::I32(_) | Array::U32(_) => {
            unreachable!("while_loop cond returns bool[] (the shape rule checks), got {}", pred.ty())
        }
    }
}

/// An integer scalar index widened to `i64` (so huge u32 values clamp high, not negative).
fn scalar_index(index: &Array) -> i64 {
    let first = |v: Option<i64>| v.expect("index is a scalar");
    match index {
        Array::I32(a) => first(a.iter().next().map(|&i| i64::from(i))),
        Array::U32(a) => first(a.iter().next().map(|&i| i64::from(i))),
        Array::F32(_) | Array::F64(_) | Array::Bool(_) => {
            unreachable!("cond index is an integer scalar (the shape rule checks), got {}", index.ty())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{DType, IndexMode, Prim, ScatterOp, Var};

    fn f32s(shape: &[usize], data: &[f32]) -> Array {
        Array::from_vec(shape, data.to_vec())
    }
    fn f32_scalar(x: f32) -> Array {
        Array::scalar(x)
    }
    fn ty(dtype: DType, shape: &[usize]) -> TensorType {
        TensorType::new(dtype, shape)
    }
    /// A function with the given parameter types returning the parameters picked by `outputs`
    /// (no equations, so it runs without the shape rules).
    fn select_params(params: &[TensorType], outputs: &[usize]) -> Function {
        let mut f = Function::new();
        let ps: Vec<Var> = params.iter().map(|t| f.add_param(t.clone())).collect();
        f.outputs = outputs.iter().map(|&i| ps[i]).collect();
        f
    }
    fn run_scan(
        body: &Function,
        length: usize,
        reverse: bool,
        nc: usize,
        ncarry: usize,
        args: &[Array],
    ) -> Vec<Array> {
        let refs: Vec<&Array> = args.iter().collect();
        scan(body, length, reverse, nc, ncarry, &refs).unwrap()
    }

    #[test]
    fn scan_shift_forward_and_reverse() {
        // body(c, x) = (x, c): the carry becomes x_t and y_t is the previous carry.
        let s = ty(DType::F32, &[]);
        let body = select_params(&[s.clone(), s], &[1, 0]);
        let args = [f32_scalar(0.), f32s(&[4], &[1., 2., 3., 4.])];
        let out = run_scan(&body, 4, false, 0, 1, &args);
        assert_eq!(out, vec![f32_scalar(4.), f32s(&[4], &[0., 1., 2., 3.])]);
        // Reverse: t = 3, 2, 1, 0 -> y[3] = 0, y[2] = 4, y[1] = 3, y[0] = 2; final carry x[0] = 1.
        let out = run_scan(&body, 4, true, 0, 1, &args);
        assert_eq!(out, vec![f32_scalar(1.), f32s(&[4], &[2., 3., 4., 0.])]);
    }

    #[test]
    fn scan_consts_and_row_slices() {
        // body(k: i32[], c: f32[2], x: f32[2]) = (x, k, c), xs (3,2), init c = [0,0], k = 7.
        let body =
            select_params(&[ty(DType::I32, &[]), ty(DType::F32, &[2]), ty(DType::F32, &[2])], &[2, 0, 1]);
        let args = [Array::scalar(7i32), f32s(&[2], &[0., 0.]), f32s(&[3, 2], &[1., 2., 3., 4., 5., 6.])];
        let out = run_scan(&body, 3, false, 1, 1, &args);
        let expected = vec![
            f32s(&[2], &[5., 6.]),
            Array::from_vec(&[3], vec![7i32, 7, 7]),
            f32s(&[3, 2], &[0., 0., 1., 2., 3., 4.]),
        ];
        assert_eq!(out, expected);
    }

    #[test]
    fn scan_length_zero() {
        // body(c: f32[2], x: f32[]) = (c, c): returns init and an empty f32[0,2].
        let body = select_params(&[ty(DType::F32, &[2]), ty(DType::F32, &[])], &[0, 0]);
        let out = run_scan(&body, 0, false, 0, 1, &[f32s(&[2], &[1., 2.]), f32s(&[0], &[])]);
        assert_eq!(out, vec![f32s(&[2], &[1., 2.]), f32s(&[0, 2], &[])]);
        let out = run_scan(&body, 0, true, 0, 1, &[f32s(&[2], &[1., 2.]), f32s(&[0], &[])]);
        assert_eq!(out, vec![f32s(&[2], &[1., 2.]), f32s(&[0, 2], &[])]);
    }

    #[test]
    fn scan_no_xs_and_bad_body_types() {
        // No xs, two carries swapped each step: after 3 steps (a, b) -> (b, a).
        let s = ty(DType::F32, &[]);
        let body = select_params(&[s.clone(), s.clone()], &[1, 0]);
        let out = run_scan(&body, 3, false, 0, 2, &[f32_scalar(1.), f32_scalar(2.)]);
        assert_eq!(out, vec![f32_scalar(2.), f32_scalar(1.)]);
        // A body whose carry output changes type fails at the second step's argument check.
        let body = select_params(&[s.clone(), ty(DType::I32, &[])], &[1]);
        let xs = Array::from_vec(&[2], vec![1i32, 2]);
        let refs = [&f32_scalar(0.), &xs];
        assert!(matches!(scan(&body, 2, false, 0, 1, &refs), Err(EvalError::Arguments { .. })));
    }

    #[test]
    fn cond_clamps_index() {
        // b0(a, b) = (a, b); b1 = (b, a); b2 = (b, b).
        let s = ty(DType::F32, &[]);
        let ps = [s.clone(), s];
        let branches =
            [select_params(&ps, &[0, 1]), select_params(&ps, &[1, 0]), select_params(&ps, &[1, 1])];
        let (a, b) = (f32_scalar(1.), f32_scalar(2.));
        let run = |index: Array| cond(&branches, &[&index, &a, &b]).unwrap();
        assert_eq!(run(Array::scalar(-1i32)), vec![a.clone(), b.clone()]);
        assert_eq!(run(Array::scalar(0i32)), vec![a.clone(), b.clone()]);
        assert_eq!(run(Array::scalar(1i32)), vec![b.clone(), a.clone()]);
        assert_eq!(run(Array::scalar(2i32)), vec![b.clone(), b.clone()]);
        assert_eq!(run(Array::scalar(5i32)), vec![b.clone(), b.clone()]);
        assert_eq!(run(Array::scalar(i32::MIN)), vec![a.clone(), b.clone()]);
        // One branch: every index picks it.
        assert_eq!(cond(&branches[1..2], &[&Array::scalar(7i32), &a, &b]).unwrap(), vec![b.clone(), a]);
    }

    /// State (b0, b1, b2: bool[], v0, v1, v2: f32[]); cond = b0; body rotates both triples left, so the
    /// f32 triple records how many iterations ran without any arithmetic.
    fn rotation() -> (Function, Function) {
        let (b, f) = (ty(DType::Bool, &[]), ty(DType::F32, &[]));
        let state = [b.clone(), b.clone(), b, f.clone(), f.clone(), f];
        // cond(b0, b1, b2, v0, v1, v2) = b0; body rotates both triples left.
        (select_params(&state, &[0]), select_params(&state, &[1, 2, 0, 4, 5, 3]))
    }

    #[test]
    fn while_loop_unbounded_and_bounded() {
        let (c, body) = rotation();
        let init = [
            Array::scalar(true),
            Array::scalar(true),
            Array::scalar(false),
            f32_scalar(1.),
            f32_scalar(2.),
            f32_scalar(3.),
        ];
        let refs: Vec<&Array> = init.iter().collect();
        let vals = |out: &[Array]| out[3..].iter().map(|a| a.to_f64_vec()[0]).collect::<Vec<_>>();
        // (T,T,F) -> (T,F,T) -> (F,T,T): stops after 2 iterations; values rotate twice.
        let out = while_loop(&c, &body, 0, 0, None, &refs).unwrap();
        assert_eq!(out[..3], [Array::scalar(false), Array::scalar(true), Array::scalar(true)]);
        assert_eq!(vals(&out), [3., 1., 2.]);
        // A bound above the natural count changes nothing; below it, stops early; 0 runs nothing.
        assert_eq!(while_loop(&c, &body, 0, 0, Some(10), &refs).unwrap(), out);
        assert_eq!(vals(&while_loop(&c, &body, 0, 0, Some(1), &refs).unwrap()), [2., 3., 1.]);
        assert_eq!(while_loop(&c, &body, 0, 0, Some(0), &refs).unwrap(), init.to_vec());
    }

    #[test]
    fn while_loop_consts_routing() {
        // cond(cc: bool[], v0, v1, v2) = cc (always true here: only max_iters stops it);
        // body(bk: f32[], v0, v1, v2) = (v1, v2, bk).
        let (b, f) = (ty(DType::Bool, &[]), ty(DType::F32, &[]));
        let c = select_params(&[b, f.clone(), f.clone(), f.clone()], &[0]);
        let body = select_params(&[f.clone(), f.clone(), f.clone(), f], &[2, 3, 0]);
        let args = [Array::scalar(true), f32_scalar(9.), f32_scalar(1.), f32_scalar(2.), f32_scalar(3.)];
        let refs: Vec<&Array> = args.iter().collect();
        // (1,2,3) -> (2,3,9) -> (3,9,9)
        let out = while_loop(&c, &body, 1, 1, Some(2), &refs).unwrap();
        assert_eq!(out, vec![f32_scalar(3.), f32_scalar(9.), f32_scalar(9.)]);
        // cond false from the start: state returned unchanged.
        let args = [Array::scalar(false), f32_scalar(9.), f32_scalar(1.), f32_scalar(2.), f32_scalar(3.)];
        let refs: Vec<&Array> = args.iter().collect();
        let out = while_loop(&c, &body, 1, 1, None, &refs).unwrap();
        assert_eq!(out, vec![f32_scalar(1.), f32_scalar(2.), f32_scalar(3.)]);
    }

    // The tests below run equations inside the bodies, so they need the shape rules (branch
    // `shape-rules`). They use only this branch's primitives: `scatter_add` with index [0] on
    // f32[1] values is `c + x`, and `gather` from a table is a lookup.

    /// body(c: f32[1], x: f32[1]) = (c + x, c + x), the sum written as scatter_add(c, [0], x).
    fn running_sum_body() -> Function {
        let mut f = Function::new();
        let c = f.add_param(ty(DType::F32, &[1]));
        let x = f.add_param(ty(DType::F32, &[1]));
        let zero = f.add_const(Array::from_vec(&[1], vec![0i32]));
        let add = Prim::Scatter { op: ScatterOp::Add, axis: 0, batch_dims: 0, mode: IndexMode::Clip };
        let s = f.push(add, &[c, zero, x], None).unwrap()[0];
        f.outputs = vec![s, s];
        f
    }

    #[test]
    fn scan_running_sum_forward_and_reverse() {
        let body = running_sum_body();
        let args = [f32s(&[1], &[0.]), f32s(&[4, 1], &[1., 2., 3., 4.])];
        // Forward: 1, 1+2 = 3, 3+3 = 6, 6+4 = 10.
        let out = run_scan(&body, 4, false, 0, 1, &args);
        assert_eq!(out, vec![f32s(&[1], &[10.]), f32s(&[4, 1], &[1., 3., 6., 10.])]);
        // Reverse: t=3: 4; t=2: 4+3 = 7; t=1: 7+2 = 9; t=0: 9+1 = 10; ys at their positions.
        let out = run_scan(&body, 4, true, 0, 1, &args);
        assert_eq!(out, vec![f32s(&[1], &[10.]), f32s(&[4, 1], &[10., 9., 7., 4.])]);
    }

    #[test]
    fn while_loop_counter_with_table_lookups() {
        // cond(lt3: bool[5], i: i32[]) = lt3[i]; body(succ: i32[5], i) = succ[i] (i + 1, capped at 4).
        let gather = Prim::Gather { axis: 0, batch_dims: 0, mode: IndexMode::Clip };
        let mut c = Function::new();
        let table = c.add_param(ty(DType::Bool, &[5]));
        let i = c.add_param(ty(DType::I32, &[]));
        c.outputs = vec![c.push(gather.clone(), &[table, i], None).unwrap()[0]];
        let mut body = Function::new();
        let succ = body.add_param(ty(DType::I32, &[5]));
        let i = body.add_param(ty(DType::I32, &[]));
        body.outputs = vec![body.push(gather, &[succ, i], None).unwrap()[0]];

        let lt3 = Array::from_vec(&[5], vec![true, true, true, false, false]);
        let succ = Array::from_vec(&[5], vec![1i32, 2, 3, 4, 4]);
        let run = |start: i32, max: Option<u64>| {
            let start = Array::scalar(start);
            while_loop(&c, &body, 1, 1, max, &[&lt3, &succ, &start]).unwrap()
        };
        // 0 -> 1 -> 2 -> 3 (lt3[3] is false).
        assert_eq!(run(0, None), vec![Array::scalar(3i32)]);
        assert_eq!(run(0, Some(2)), vec![Array::scalar(2i32)]);
        assert_eq!(run(4, None), vec![Array::scalar(4i32)]);
    }
}
