//! Rows for `stop_gradient` and the primitives with sub-functions, built with small hand-written
//! `Function`s.

use super::*;
use DType::{Bool, F32, F64, I32};

fn add() -> Prim {
    Prim::Binary(BinaryOp::Add)
}
fn mul() -> Prim {
    Prim::Binary(BinaryOp::Mul)
}

/// `x -> x * x` on `t`.
fn square(t: &TensorType) -> Function {
    func(std::slice::from_ref(t), |f, p| vec![push(f, mul(), &[p[0], p[0]])])
}
/// `x -> x + x` on `t`.
fn double(t: &TensorType) -> Function {
    func(std::slice::from_ref(t), |f, p| vec![push(f, add(), &[p[0], p[0]])])
}
/// `x -> -x` on `t`.
fn negate(t: &TensorType) -> Function {
    func(std::slice::from_ref(t), |f, p| vec![push(f, Prim::Unary(UnaryOp::Neg), &[p[0]])])
}

pub fn stop_gradient() -> Vec<Case> {
    let p = || Prim::StopGradient;
    vec![
        case1("rank 0 keeps -0", p(), vec![f32s(&[], &[-0.0])], f32s(&[], &[-0.0])),
        case1(
            "rank 2 keeps nan payload",
            p(),
            vec![f64s(&[2, 2], &[f64::from_bits(0x7ff8_0000_0000_0001), 1.0, -INF, 0.0])],
            f64s(&[2, 2], &[f64::from_bits(0x7ff8_0000_0000_0001), 1.0, -INF, 0.0]),
        ),
        case1("i32 rank 1", p(), vec![i32s(&[2], &[i32::MIN, 3])], i32s(&[2], &[i32::MIN, 3])),
    ]
}

pub fn custom_jvp_call() -> Vec<Case> {
    // fun(x) = x * x; jvp(x, t) = (x * x, (x + x) * t) — only `fun` runs when evaluating.
    let p = |t: TensorType| {
        let jvp = func(&[t.clone(), t.clone()], |f, p| {
            let y = push(f, mul(), &[p[0], p[0]]);
            let two_x = push(f, add(), &[p[0], p[0]]);
            vec![y, push(f, mul(), &[two_x, p[1]])]
        });
        Prim::CustomJvpCall { fun: Box::new(square(&t)), jvp: Box::new(jvp) }
    };
    vec![
        // -0 * -0 = +0.
        case1("rank 1", p(ty(F32, &[2])), vec![f32s(&[2], &[3.0, -0.0])], f32s(&[2], &[9.0, 0.0])),
        case1("rank 0", p(ty(F64, &[])), vec![f64s(&[], &[-2.0])], f64s(&[], &[4.0])),
    ]
}

pub fn custom_vjp_call() -> Vec<Case> {
    // fun(x, y) = x - y; fwd(x, y) = (x - y, y); bwd(y, ct) = (ct, -ct) — only `fun` runs.
    let p = |t: TensorType| {
        let sub = || Prim::Binary(BinaryOp::Sub);
        let fun = func(&[t.clone(), t.clone()], |f, p| vec![push(f, sub(), &[p[0], p[1]])]);
        let fwd = func(&[t.clone(), t.clone()], |f, p| vec![push(f, sub(), &[p[0], p[1]]), p[1]]);
        let bwd =
            func(&[t.clone(), t.clone()], |f, p| vec![p[1], push(f, Prim::Unary(UnaryOp::Neg), &[p[1]])]);
        Prim::CustomVjpCall { fun: Box::new(fun), fwd: Box::new(fwd), bwd: Box::new(bwd) }
    };
    vec![
        // 5 - 2, -0 - 0 = -0, inf - inf = NaN.
        case1(
            "rank 1",
            p(ty(F32, &[3])),
            vec![f32s(&[3], &[5.0, -0.0, INF32]), f32s(&[3], &[2.0, 0.0, INF32])],
            f32s(&[3], &[3.0, -0.0, NAN32]),
        ),
        case1(
            "rank 0",
            p(ty(I32, &[])),
            vec![i32s(&[], &[i32::MIN]), i32s(&[], &[1])],
            i32s(&[], &[i32::MAX]),
        ),
    ]
}

pub fn scan() -> Vec<Case> {
    let s = ty(F32, &[]);
    // body(c, x) = (c + x, c): a running sum that emits the carry before each step.
    let running = || func(&[s.clone(), s.clone()], |f, p| vec![push(f, add(), &[p[0], p[1]]), p[0]]);
    let p = |length, reverse, num_consts, num_carry, body: Function| Prim::Scan {
        length,
        reverse,
        num_consts,
        num_carry,
        body: Box::new(body),
    };
    let v2 = ty(F32, &[2]);
    // body(k, c, x) = (c + x * k, c) on f32[2].
    let scaled = func(&[v2.clone(), v2.clone(), v2.clone()], |f, p| {
        let xk = push(f, mul(), &[p[2], p[0]]);
        vec![push(f, add(), &[p[1], xk]), p[1]]
    });
    let i = ty(I32, &[]);
    vec![
        // c: 0 -> 1 -> 3 -> 6; ys are the carries before each step: 0, 1, 3.
        case(
            "forward",
            p(3, false, 0, 1, running()),
            vec![f32s(&[], &[0.0]), f32s(&[3], &[1.0, 2.0, 3.0])],
            vec![f32s(&[], &[6.0]), f32s(&[3], &[0.0, 1.0, 3.0])],
        ),
        // From the end: t = 2 sees c = 0 (-> 3), t = 1 sees 3 (-> 5), t = 0 sees 5 (-> 6).
        case(
            "reverse",
            p(3, true, 0, 1, running()),
            vec![f32s(&[], &[0.0]), f32s(&[3], &[1.0, 2.0, 3.0])],
            vec![f32s(&[], &[6.0]), f32s(&[3], &[5.0, 3.0, 0.0])],
        ),
        case(
            "length 0",
            p(0, false, 0, 1, running()),
            vec![f32s(&[], &[-0.0]), f32s(&[0], &[])],
            vec![f32s(&[], &[-0.0]), f32s(&[0], &[])],
        ),
        // k = [10, -1], c0 = [0, 0]: t = 0 emits [0, 0], c = [10, -2]; t = 1 emits [10, -2],
        // c = [10 + 3*10, -2 + 4*-1] = [40, -6].
        case(
            "const and rank 2 xs",
            p(2, false, 1, 1, scaled),
            vec![f32s(&[2], &[10.0, -1.0]), f32s(&[2], &[0.0, 0.0]), f32s(&[2, 2], &[1.0, 2.0, 3.0, 4.0])],
            vec![f32s(&[2], &[40.0, -6.0]), f32s(&[2, 2], &[0.0, 0.0, 10.0, -2.0])],
        ),
        // No xs: c doubles three times, 1 -> 8.
        case("carry only", p(3, false, 0, 1, double(&i)), vec![i32s(&[], &[1])], vec![i32s(&[], &[8])]),
    ]
}

pub fn while_loop() -> Vec<Case> {
    let i = ty(I32, &[]);
    // cond(limit, i) = i < limit; body(step, i) = i + step.
    let lt = func(&[i.clone(), i.clone()], |f, p| vec![push(f, Prim::Compare(CompareOp::Lt), &[p[1], p[0]])]);
    let step = func(&[i.clone(), i.clone()], |f, p| vec![push(f, add(), &[p[1], p[0]])]);
    // The same with the limit 5 and step 1 as constants.
    let lt5 = func(std::slice::from_ref(&i), |f, p| {
        let five = f.add_const(i32s(&[], &[5]));
        vec![push(f, Prim::Compare(CompareOp::Lt), &[p[0], five])]
    });
    let inc = func(std::slice::from_ref(&i), |f, p| {
        let one = f.add_const(i32s(&[], &[1]));
        vec![push(f, add(), &[p[0], one])]
    });
    let p = |cond: &Function, body: &Function, cond_consts, body_consts, max_iters| Prim::WhileLoop {
        cond: Box::new(cond.clone()),
        body: Box::new(body.clone()),
        cond_consts,
        body_consts,
        max_iters,
    };
    // State (n, v): cond(n, v) = n < 3 (n is i32, v is f32[2]); body(n, v) = (n + 1, v + v).
    let v = ty(F32, &[2]);
    let pair_cond = func(&[i.clone(), v.clone()], |f, p| {
        let three = f.add_const(i32s(&[], &[3]));
        vec![push(f, Prim::Compare(CompareOp::Lt), &[p[0], three])]
    });
    let pair_body = func(&[i.clone(), v.clone()], |f, p| {
        let one = f.add_const(i32s(&[], &[1]));
        vec![push(f, add(), &[p[0], one]), push(f, add(), &[p[1], p[1]])]
    });
    let n = |x: i32| i32s(&[], &[x]);
    vec![
        case1("counts to 5", p(&lt5, &inc, 0, 0, None), vec![n(0)], n(5)),
        case1("max_iters stops it", p(&lt5, &inc, 0, 0, Some(3)), vec![n(0)], n(3)),
        case1("max_iters 0", p(&lt5, &inc, 0, 0, Some(0)), vec![n(0)], n(0)),
        case1("cond false at once", p(&lt5, &inc, 0, 0, None), vec![n(7)], n(7)),
        // Operands (limit 10, step 4, i 0): 0, 4, 8, 12.
        case1("cond and body consts", p(&lt, &step, 1, 1, None), vec![n(10), n(4), n(0)], n(12)),
        // Three doublings: [1, -0] -> [8, -0] (-0 + -0 = -0).
        case(
            "rank 1 state",
            p(&pair_cond, &pair_body, 0, 0, None),
            vec![n(0), f32s(&[2], &[1.0, -0.0])],
            vec![n(3), f32s(&[2], &[8.0, -0.0])],
        ),
        // Bounded at 2 of the 3 iterations.
        case(
            "rank 1 state bounded",
            p(&pair_cond, &pair_body, 0, 0, Some(2)),
            vec![n(0), f32s(&[2], &[1.0, -0.0])],
            vec![n(2), f32s(&[2], &[4.0, -0.0])],
        ),
    ]
}

pub fn cond() -> Vec<Case> {
    let p = |t: &TensorType| Prim::Cond { branches: vec![double(t), square(t), negate(t)] };
    let v = ty(F32, &[2]);
    let s = ty(F64, &[]);
    let x = || f32s(&[2], &[3.0, -0.0]);
    let k = |i: i32| i32s(&[], &[i]);
    vec![
        // Branch 0 doubles: [6, -0]; branch 1 squares: [9, +0]; branch 2 negates: [-3, +0].
        case1("index 0", p(&v), vec![k(0), x()], f32s(&[2], &[6.0, -0.0])),
        case1("index 1", p(&v), vec![k(1), x()], f32s(&[2], &[9.0, 0.0])),
        case1("index 2", p(&v), vec![k(2), x()], f32s(&[2], &[-3.0, 0.0])),
        case1("negative index clamps to 0", p(&v), vec![k(-5), x()], f32s(&[2], &[6.0, -0.0])),
        case1("large index clamps to the last", p(&v), vec![k(99), x()], f32s(&[2], &[-3.0, 0.0])),
        case1("rank 0 operand", p(&s), vec![k(1), f64s(&[], &[-1.5])], f64s(&[], &[2.25])),
        case1(
            "single branch",
            Prim::Cond { branches: vec![negate(&ty(I32, &[1, 1]))] },
            vec![k(3), i32s(&[1, 1], &[4])],
            i32s(&[1, 1], &[-4]),
        ),
    ]
}

pub fn call() -> Vec<Case> {
    // body(x, y) = (x * y, x).
    let p = |t: TensorType| {
        let body = func(&[t.clone(), t.clone()], |f, p| vec![push(f, mul(), &[p[0], p[1]]), p[0]]);
        Prim::Call { body: Box::new(body) }
    };
    // A body with no parameters returning a constant and a comparison of constants.
    let consts = func(&[], |f, _| {
        let c = f.add_const(f32s(&[2], &[1.0, -0.0]));
        let z = f.add_const(f32s(&[2], &[0.0, 0.0]));
        vec![c, push(f, Prim::Compare(CompareOp::Eq), &[c, z])]
    });
    vec![
        case(
            "two outputs rank 2",
            p(ty(F32, &[2, 2])),
            vec![f32s(&[2, 2], &[1.0, -2.0, 0.5, -0.0]), f32s(&[2, 2], &[3.0, 4.0, 4.0, 5.0])],
            vec![f32s(&[2, 2], &[3.0, -8.0, 2.0, -0.0]), f32s(&[2, 2], &[1.0, -2.0, 0.5, -0.0])],
        ),
        case(
            "rank 0 i32 wraps",
            p(ty(I32, &[])),
            vec![i32s(&[], &[65536]), i32s(&[], &[65536])],
            vec![i32s(&[], &[0]), i32s(&[], &[65536])],
        ),
        // -0 == 0 is true.
        case(
            "no operands, constants",
            Prim::Call { body: Box::new(consts) },
            vec![],
            vec![f32s(&[2], &[1.0, -0.0]), bools(&[2], &[false, true])],
        ),
    ]
}

pub fn checkpoint() -> Vec<Case> {
    // body(x) = x + [1, 2].
    let shifted = func(&[ty(F32, &[2])], |f, p| {
        let c = f.add_const(f32s(&[2], &[1.0, 2.0]));
        vec![push(f, add(), &[p[0], c])]
    });
    // body(b) = not b.
    let not = func(&[ty(Bool, &[])], |f, p| vec![push(f, Prim::Unary(UnaryOp::Not), &[p[0]])]);
    vec![
        case1(
            "rank 1 with a constant",
            Prim::Checkpoint { body: Box::new(shifted) },
            vec![f32s(&[2], &[-0.0, 3.0])],
            f32s(&[2], &[1.0, 5.0]),
        ),
        case1(
            "rank 0 square",
            Prim::Checkpoint { body: Box::new(square(&ty(F64, &[]))) },
            vec![f64s(&[], &[-3.0])],
            f64s(&[], &[9.0]),
        ),
        case1(
            "rank 0 bool",
            Prim::Checkpoint { body: Box::new(not) },
            vec![bools(&[], &[true])],
            bools(&[], &[false]),
        ),
    ]
}
