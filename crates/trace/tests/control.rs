//! `scan`, `while_loop`, `switch`/`cond`: traced into sub-functions, evaluated by the interpreter, and
//! checked against hand-computed values; closure conversion of captured tracers; structural errors.

use kiln_ir::{DType, Prim};
use kiln_trace::{
    Error, ScanOptions, Tensor, Tree, cond, scan, scan_with, switch, trace, while_loop, while_loop_bounded,
};

fn vec_f32(v: &[f32]) -> Tensor {
    Tensor::from_vec(&[v.len()], v.to_vec())
}

fn running_sum(c: Tensor, x: Tensor) -> (Tensor, Tensor) {
    let s = &c + &x;
    (s.clone(), s)
}

#[test]
fn scan_forward_and_reverse() {
    // ad-cases 18: step(c, x) = (c + x, c + x) from 0 over [1, 2, 3, 4].
    let (c, ys) = scan(running_sum, Tensor::scalar(0.0f32), vec_f32(&[1.0, 2.0, 3.0, 4.0]));
    assert_eq!(c.item::<f32>(), 10.0);
    assert_eq!(ys.to_vec::<f32>(), vec![1.0, 3.0, 6.0, 10.0]);
    let opts = ScanOptions { reverse: true, ..Default::default() };
    let (c, ys) = scan_with(running_sum, Tensor::scalar(0.0f32), vec_f32(&[1.0, 2.0, 3.0, 4.0]), opts);
    assert_eq!(c.item::<f32>(), 10.0);
    // visits 4, 3, 2, 1; ys stored at their input positions
    assert_eq!(ys.to_vec::<f32>(), vec![10.0, 9.0, 7.0, 4.0]);
}

#[test]
fn scan_length_zero_returns_init_and_empty_ys() {
    // ad-cases 22: scan(c, x -> (c + x, c * x), 1.5, zeros(0)) -> carry 1.5, ys shape [0].
    let (c, ys) = scan(
        |c: Tensor, x: Tensor| (&c + &x, &c * &x),
        Tensor::scalar(1.5f32),
        Tensor::zeros(DType::F32, &[0]),
    );
    assert_eq!(c.item::<f32>(), 1.5);
    assert_eq!(ys.shape().dims(), &[0]);
}

#[test]
fn scan_without_xs_uses_the_given_length() {
    let (c, ys) = scan_with(
        |c: Tensor, (): ()| (&c * 2.0, c.clone()),
        Tensor::scalar(1.0f32),
        (),
        ScanOptions { length: Some(4), reverse: false },
    );
    assert_eq!(c.item::<f32>(), 16.0);
    assert_eq!(ys.to_vec::<f32>(), vec![1.0, 2.0, 4.0, 8.0]);
}

#[test]
fn scan_captures_outer_tracers_as_consts() {
    // The body uses `a`, a parameter of the enclosing trace: it becomes a scan const operand.
    let t = trace(
        |(a, xs): (Tensor, Tensor)| {
            scan(|c: Tensor, x: Tensor| (&c + &(&a * &x), c.clone()), Tensor::scalar(0.0f32), xs)
        },
        &(Tensor::placeholder(DType::F32, &[]), Tensor::placeholder(DType::F32, &[3])),
    )
    .unwrap();
    let scan_eqn = t.function.eqns.iter().find(|e| matches!(e.prim, Prim::Scan { .. })).unwrap();
    let Prim::Scan { num_consts, num_carry, length, body, .. } = &scan_eqn.prim else { unreachable!() };
    assert_eq!((*num_consts, *num_carry, *length), (1, 1, 3));
    assert_eq!(body.params.len(), 3); // const a, carry, x
    assert_eq!(scan_eqn.inputs[0], t.function.params[0]);
    // a = 2, xs = [1, 2, 3]: carry 2*(1+2+3) = 12, ys = carries before each step = [0, 2, 6]
    let (c, ys) = t.eval(&(Tensor::scalar(2.0f32), vec_f32(&[1.0, 2.0, 3.0]))).unwrap();
    assert_eq!(c.item::<f32>(), 12.0);
    assert_eq!(ys.to_vec::<f32>(), vec![0.0, 2.0, 6.0]);
}

#[derive(Tree, Clone)]
struct State {
    x: Tensor,
    v: Tensor,
    #[tree(skip)]
    dt: f64,
}

#[test]
fn scan_carries_a_user_struct() {
    // Explicit Euler for x'' = -x with dt = 0.5, 2 steps from (x, v) = (1, 0):
    // step 1: x = 1 + 0.5*0 = 1, v = 0 - 0.5*1 = -0.5; step 2: x = 1 - 0.25 = 0.75, v = -0.5 - 0.5 = -1.
    let s0 = State { x: Tensor::scalar(1.0f32), v: Tensor::scalar(0.0f32), dt: 0.5 };
    let (s, xs) = scan_with(
        |s: State, (): ()| {
            let x = &s.x + &(&s.v * s.dt);
            let v = &s.v - &(&s.x * s.dt);
            (State { x: x.clone(), v, dt: s.dt }, x)
        },
        s0,
        (),
        ScanOptions { length: Some(2), reverse: false },
    );
    assert_eq!((s.x.item::<f32>(), s.v.item::<f32>(), s.dt), (0.75, -1.0, 0.5));
    assert_eq!(xs.to_vec::<f32>(), vec![1.0, 0.75]);
}

#[test]
fn scan_carry_dtype_change_is_an_error_naming_the_component_and_types() {
    // ad-cases 23 (a): init int32 0, body returns c + 0.5 x in f32.
    let line = line!() + 3;
    let err = trace(
        |xs: Tensor| {
            scan(|c: Tensor, x: Tensor| (c.astype(DType::F32) + &x * 0.5, x), Tensor::scalar(0i32), xs)
        },
        &Tensor::placeholder(DType::F32, &[3]),
    )
    .unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("scan") && msg.contains("carry") && msg.contains("i32[]") && msg.contains("f32[]"),
        "{msg}"
    );
    let Error::Op { at, .. } = &err else { panic!("{err:?}") };
    assert_eq!(at.as_ref().unwrap().line, line);
}

#[test]
fn scan_carry_shape_change_is_an_error() {
    let err = trace(
        |xs: Tensor| scan(|c: Tensor, x: Tensor| (c.broadcast_to(&[2]), x), Tensor::scalar(0.0f32), xs),
        &Tensor::placeholder(DType::F32, &[3]),
    )
    .unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("carry") && msg.contains("f32[2]") && msg.contains("f32[]"), "{msg}");
}

#[test]
fn error_inside_a_scan_body_points_at_the_body_line() {
    let line = line!() + 3;
    let err = trace(
        |xs: Tensor| {
            scan(|c: Tensor, x: Tensor| (&c + &x.broadcast_to(&[5]), x), Tensor::zeros(DType::F32, &[4]), xs)
        },
        &Tensor::placeholder(DType::F32, &[3, 2]),
    )
    .unwrap_err();
    let Error::Op { op, at, .. } = &err else { panic!("{err:?}") };
    assert_eq!(op, "broadcast_to");
    assert_eq!(at.as_ref().unwrap().line, line);
}

#[test]
fn while_loop_runs_until_the_condition_fails() {
    // Collatz-like: while x < 100: x = 3x + 1, from 1: 4, 13, 40, 121.
    let out = while_loop(
        |x: &Tensor| x.lt(&Tensor::scalar(100.0f32)),
        |x: Tensor| &x * 3.0 + 1.0,
        Tensor::scalar(1.0f32),
    );
    assert_eq!(out.item::<f32>(), 121.0);
    let bounded = while_loop_bounded(
        |x: &Tensor| x.lt(&Tensor::scalar(100.0f32)),
        |x: Tensor| &x * 3.0 + 1.0,
        Tensor::scalar(1.0f32),
        2,
    );
    assert_eq!(bounded.item::<f32>(), 13.0);
}

#[test]
fn while_loop_condition_must_be_a_bool_scalar() {
    let err = trace(
        |x: Tensor| while_loop(|x: &Tensor| x.clone(), |x: Tensor| x, x),
        &Tensor::placeholder(DType::F32, &[]),
    )
    .unwrap_err();
    assert!(err.to_string().contains("bool[]"), "{err}");
}

#[test]
fn switch_clamps_the_index_and_cond_picks_a_branch() {
    let x = Tensor::scalar(3.0f32);
    let pick = |i: i32| -> f32 {
        switch(
            &Tensor::scalar(i),
            vec![Box::new(|x: Tensor| &x + 1.0), Box::new(|x: Tensor| &x * 10.0), Box::new(|x: Tensor| -x)],
            x.clone(),
        )
        .item()
    };
    assert_eq!(pick(-1), 4.0); // clamped to branch 0
    assert_eq!(pick(0), 4.0);
    assert_eq!(pick(1), 30.0);
    assert_eq!(pick(2), -3.0);
    assert_eq!(pick(7), -3.0); // clamped to branch 2
    let y: Tensor = cond(&Tensor::scalar(true), |x: Tensor| &x * 2.0, |x: Tensor| &x * 0.5, x.clone());
    assert_eq!(y.item::<f32>(), 6.0);
    let y: Tensor = cond(&Tensor::scalar(false), |x: Tensor| &x * 2.0, |x: Tensor| &x * 0.5, x);
    assert_eq!(y.item::<f32>(), 1.5);
}

#[test]
fn cond_branches_capturing_different_outer_values() {
    let t = trace(
        |(p, a, b, x): (Tensor, Tensor, Tensor, Tensor)| {
            cond(&p, |x: Tensor| &x * &a, |x: Tensor| &x + &b, x)
        },
        &(
            Tensor::placeholder(DType::Bool, &[]),
            Tensor::placeholder(DType::F32, &[]),
            Tensor::placeholder(DType::F32, &[]),
            Tensor::placeholder(DType::F32, &[2]),
        ),
    )
    .unwrap();
    let x = vec_f32(&[1.0, 2.0]);
    let args = |p: bool| (Tensor::scalar(p), Tensor::scalar(10.0f32), Tensor::scalar(0.5f32), x.clone());
    assert_eq!(t.eval(&args(true)).unwrap().to_vec::<f32>(), vec![10.0, 20.0]);
    assert_eq!(t.eval(&args(false)).unwrap().to_vec::<f32>(), vec![1.5, 2.5]);
}

#[test]
fn cond_branches_with_different_outputs_are_an_error() {
    let err = trace(
        |x: Tensor| {
            cond(&Tensor::scalar(true), |x: Tensor| x.clone(), |x: Tensor| x.broadcast_to(&[2, 3]), x)
        },
        &Tensor::placeholder(DType::F32, &[3]),
    )
    .unwrap_err();
    assert!(err.to_string().contains("true_fun") && err.to_string().contains("cond"), "{err}");
    // Same structure (one tensor each), other types: the message gives the types only.
    assert!(
        err.to_string().contains("true_fun returns types [f32[3]] but false_fun returns types [f32[2,3]]"),
        "{err}"
    );
}
