//! Outputs written in place by the step computing them (`Loc::Out`): scan bodies writing their carries
//! into the loop's carry buffers and their `ys` into the stacked result, outputs that alias inputs
//! (identity and swapped carries), repeated outputs, and donation when the donated buffer is still
//! read by the step writing the output. Every result is compared bitwise with the interpreter (adds
//! and multiplies of small floats only, so there is no tolerance to argue about).

use kiln_backend_cpu::{CompileOptions, compile_with};
use kiln_ir::*;

fn opts() -> CompileOptions {
    CompileOptions { threads: Some(1), dump_dir: None, min_task_work: None, multi_output: true }
}

fn f32s(dims: &[usize], seed: u32) -> Array {
    let n: usize = dims.iter().product();
    let v = (0..n as u32).map(|i| ((i.wrapping_mul(2_654_435_761) ^ seed) % 64) as f32 / 8.0 - 4.0);
    Array::from_vec(dims, v.collect())
}

fn binary(f: &mut Function, op: BinaryOp, x: Var, y: Var) -> Var {
    f.push(Prim::Binary(op), &[x, y], None).unwrap()[0]
}

fn ty(dims: &[usize]) -> TensorType {
    TensorType::new(DType::F32, dims)
}

/// Compiles and runs `f` on `args` (twice: the second call reuses the pooled arena) and checks each
/// result is bitwise the interpreter's.
fn check(f: &Function, args: &[Array]) {
    let want = eval(f, args).unwrap();
    let exe = compile_with(f, &opts()).unwrap();
    for call in 0..2 {
        let got = exe.run(args).unwrap();
        assert_eq!(got.len(), want.len());
        for (k, (g, w)) in got.iter().zip(&want).enumerate() {
            assert!(g.bitwise_eq(w), "call {call}, output {k}:\n jit  {g:?}\n want {w:?}\n{f}");
        }
    }
}

/// `scan(body)` over `carry` initial values and `xs`, returning every output of the scan.
fn scan_of(
    body: Function,
    length: usize,
    reverse: bool,
    carry: &[TensorType],
    xs: &[TensorType],
) -> Function {
    let num_carry = carry.len();
    let mut f = Function::new();
    let params: Vec<Var> = carry.iter().chain(xs).map(|t| f.add_param(t.clone())).collect();
    let scan = Prim::Scan { length, reverse, num_consts: 0, num_carry, body: Box::new(body) };
    let outs = f.push(scan, &params, None).unwrap();
    f.outputs.extend(outs);
    f
}

#[test]
fn an_identity_carry_that_is_also_a_y_keeps_its_value() {
    // c -> (c, c): the carry never changes and every y is the initial carry.
    for length in [0, 1, 2, 5] {
        let mut body = Function::new();
        let c = body.add_param(ty(&[3]));
        body.outputs = vec![c, c];
        let f = scan_of(body, length, false, &[ty(&[3])], &[]);
        check(&f, &[f32s(&[3], 1)]);
    }
}

#[test]
fn swapped_carries_alternate() {
    // (a, b) -> (b, a) with y = a + b: odd and even lengths end on different buffers.
    for length in [0, 1, 2, 3, 4, 7] {
        let mut body = Function::new();
        let (a, b) = (body.add_param(ty(&[4])), body.add_param(ty(&[4])));
        let s = binary(&mut body, BinaryOp::Add, a, b);
        body.outputs = vec![b, a, s];
        let f = scan_of(body, length, false, &[ty(&[4]), ty(&[4])], &[]);
        check(&f, &[f32s(&[4], 2), f32s(&[4], 3)]);
    }
}

#[test]
fn a_computed_carry_next_to_a_passed_through_one() {
    // (a, b) -> (a + b, a): Fibonacci-like; one carry written in place, one copied from an input.
    let mut body = Function::new();
    let (a, b) = (body.add_param(ty(&[2, 3])), body.add_param(ty(&[2, 3])));
    let s = binary(&mut body, BinaryOp::Add, a, b);
    body.outputs = vec![s, a];
    let f = scan_of(body, 6, false, &[ty(&[2, 3]), ty(&[2, 3])], &[]);
    check(&f, &[f32s(&[2, 3], 4), f32s(&[2, 3], 5)]);
}

#[test]
fn an_output_read_by_a_later_step_and_repeated() {
    // c, x -> n = c*x; m = n + c (reads n where it was written: the next carry buffer);
    // outputs (n, n, m): carry n, ys n (a repeat, copied at the end of the body) and m.
    for reverse in [false, true] {
        let mut body = Function::new();
        let (c, x) = (body.add_param(ty(&[5])), body.add_param(ty(&[5])));
        let n = binary(&mut body, BinaryOp::Mul, c, x);
        let m = binary(&mut body, BinaryOp::Add, n, c);
        body.outputs = vec![n, n, m];
        let f = scan_of(body, 4, reverse, &[ty(&[5])], &[ty(&[4, 5])]);
        check(&f, &[f32s(&[5], 6), f32s(&[4, 5], 7)]);
    }
}

#[test]
fn a_nested_scan_writes_into_the_outer_body_outputs() {
    // Inner: c -> (c * 0.5 + 1, c); outer: c -> inner scan of 3 steps, ys = inner ys.
    let mut inner = Function::new();
    let c = inner.add_param(ty(&[2]));
    let half = inner.add_const(Array::from_vec(&[2], vec![0.5f32, 0.5]));
    let one = inner.add_const(Array::from_vec(&[2], vec![1.0f32, 1.0]));
    let h = binary(&mut inner, BinaryOp::Mul, c, half);
    let n = binary(&mut inner, BinaryOp::Add, h, one);
    inner.outputs = vec![n, c];
    let mut outer = Function::new();
    let oc = outer.add_param(ty(&[2]));
    let scan = Prim::Scan { length: 3, reverse: false, num_consts: 0, num_carry: 1, body: Box::new(inner) };
    let outs = outer.push(scan, &[oc], None).unwrap();
    outer.outputs = outs.to_vec();
    let f = scan_of(outer, 4, false, &[ty(&[2])], &[]);
    check(&f, &[f32s(&[2], 8)]);
}

#[test]
fn a_donated_input_read_by_the_step_writing_its_output() {
    // y = rev(x) + x: the kernel writing y reads x at other indices, so y cannot be computed in x's
    // buffer directly; it is computed aside and copied into x's buffer.
    let mut f = Function::new();
    let x = f.add_param(ty(&[1000]));
    let r = f.push(Prim::Rev { dimensions: vec![0] }, &[x], None).unwrap()[0];
    let y = binary(&mut f, BinaryOp::Add, r, x);
    f.outputs = vec![y];
    let exe = compile_with(&f, &opts()).unwrap();
    let arg = f32s(&[1000], 9);
    let want = eval(&f, std::slice::from_ref(&arg)).unwrap();
    let before = arg.as_array::<f32>().unwrap().as_ptr();
    let got = exe.run_donating(vec![arg], &[true]).unwrap();
    assert!(got[0].bitwise_eq(&want[0]));
    assert_eq!(got[0].as_array::<f32>().unwrap().as_ptr(), before, "x's buffer is reused");
}

#[test]
fn a_donated_input_last_read_before_its_output_is_written() {
    // s = sum(x) (one kernel), y = s + z (a later kernel): x is dead when y is written, so y is
    // written straight into x's buffer.
    let mut f = Function::new();
    let x = f.add_param(ty(&[64]));
    let z = f.add_param(ty(&[64]));
    let s = f.push(Prim::Reduce { op: ReduceOp::Sum, axes: vec![0] }, &[x], None).unwrap()[0];
    let b =
        f.push(Prim::BroadcastInDim { shape: Shape::new(&[64]), broadcast_dimensions: vec![] }, &[s], None);
    let y = binary(&mut f, BinaryOp::Add, b.unwrap()[0], z);
    f.outputs = vec![y];
    let exe = compile_with(&f, &opts()).unwrap();
    let (xa, za) = (f32s(&[64], 10), f32s(&[64], 11));
    let want = eval(&f, &[xa.clone(), za.clone()]).unwrap();
    let before = xa.as_array::<f32>().unwrap().as_ptr();
    let got = exe.run_donating(vec![xa, za], &[true, false]).unwrap();
    assert!(got[0].bitwise_eq(&want[0]));
    assert_eq!(got[0].as_array::<f32>().unwrap().as_ptr(), before, "x's buffer is reused");
}
