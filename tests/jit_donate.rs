//! Buffer donation: values equal the non-donating call's (hand-computed), and a donated buffer is
//! reused (same data pointer) exactly where it may be: an output of the same type, the donor held by
//! no one else, row-major, and not read by another output.

use kiln::ir::{Array, DType, Function, Prim, TensorType, UnaryOp};
use kiln::prelude::*;
use kiln_backend_cpu::compile;

fn ptr(t: &Tensor) -> usize {
    kiln::ir::with_array!(&**t.shared().expect("concrete"), a => a.as_ptr() as usize)
}

fn array_ptr(a: &Array) -> usize {
    kiln::ir::with_array!(a, x => x.as_ptr() as usize)
}

fn v32(data: &[f32]) -> Tensor {
    Tensor::from_vec(&[data.len()], data.to_vec())
}

#[test]
fn an_output_of_the_donated_type_takes_its_buffer() {
    let f = jit(|x: Tensor| &x * 2.0 + 1.0).donate(&[0]);
    let x = v32(&[1.0, 2.0, 3.0]);
    let p = ptr(&x);
    let y = f.call_donated(x).unwrap();
    assert_eq!(y.to_vec::<f32>(), vec![3.0, 5.0, 7.0]);
    assert_eq!(ptr(&y), p);
    // A loop that feeds the state back keeps one buffer.
    let step = jit(|(u, dt): (Tensor, Tensor)| &u + &u * &dt).donate(&[0]);
    let mut u = v32(&[1.0, 2.0]);
    let p = ptr(&u);
    for _ in 0..3 {
        u = step.call_donated((u, Tensor::scalar(1.0f32))).unwrap();
        assert_eq!(ptr(&u), p);
    }
    assert_eq!(u.to_vec::<f32>(), vec![8.0, 16.0]);
}

#[test]
fn identity_and_swapped_outputs_keep_their_buffers() {
    let id = jit(|x: Tensor| x).donate(&[0]);
    let x = v32(&[4.0, 5.0]);
    let p = ptr(&x);
    let y = id.call_donated(x).unwrap();
    assert_eq!((y.to_vec::<f32>(), ptr(&y)), (vec![4.0, 5.0], p));

    let swap = jit(|(a, b): (Tensor, Tensor)| (b, a)).donate(&[0, 1]);
    let (a, b) = (v32(&[1.0, 2.0]), v32(&[3.0, 4.0]));
    let (pa, pb) = (ptr(&a), ptr(&b));
    let (c, d) = swap.call_donated((a, b)).unwrap();
    assert_eq!((c.to_vec::<f32>(), d.to_vec::<f32>()), (vec![3.0, 4.0], vec![1.0, 2.0]));
    assert_eq!((ptr(&c), ptr(&d)), (pb, pa));

    // (y + 1, x) with both donated: x stays output 1; y's buffer takes y + 1.
    let f = jit(|(x, y): (Tensor, Tensor)| (&y + 1.0, x)).donate(&[0, 1]);
    let (x, y) = (v32(&[1.0, 2.0]), v32(&[10.0, 20.0]));
    let (px, py) = (ptr(&x), ptr(&y));
    let (s, t) = f.call_donated((x, y)).unwrap();
    assert_eq!((s.to_vec::<f32>(), t.to_vec::<f32>()), (vec![11.0, 21.0], vec![1.0, 2.0]));
    assert_eq!((ptr(&s), ptr(&t)), (py, px));
}

#[test]
fn two_outputs_of_one_donor_get_one_buffer_and_right_values() {
    let f = jit(|x: Tensor| (&x * 2.0, &x * 3.0)).donate(&[0]);
    let x = v32(&[1.0, -1.0]);
    let p = ptr(&x);
    let (a, b) = f.call_donated(x).unwrap();
    assert_eq!((a.to_vec::<f32>(), b.to_vec::<f32>()), (vec![2.0, -2.0], vec![3.0, -3.0]));
    assert_eq!([ptr(&a), ptr(&b)].iter().filter(|&&q| q == p).count(), 1);

    // (x, 2x): x is output 0 itself, so output 1 needs a fresh buffer (x is read at the end).
    let f = jit(|x: Tensor| (x.clone(), &x * 2.0)).donate(&[0]);
    let x = v32(&[1.0, 2.0]);
    let p = ptr(&x);
    let (a, b) = f.call_donated(x).unwrap();
    assert_eq!((a.to_vec::<f32>(), b.to_vec::<f32>()), (vec![1.0, 2.0], vec![2.0, 4.0]));
    assert_eq!(ptr(&a), p);
    assert_ne!(ptr(&b), p);
}

#[test]
fn an_output_that_reads_the_donor_out_of_order_is_right() {
    // roll reads x[i-1] for output i: the donated buffer must only be written after it is read.
    let f = jit(|x: Tensor| x.roll(1, 0) * 10.0).donate(&[0]);
    let x = v32(&[1.0, 2.0, 3.0, 4.0]);
    let p = ptr(&x);
    let y = f.call_donated(x).unwrap();
    assert_eq!(y.to_vec::<f32>(), vec![40.0, 10.0, 20.0, 30.0]);
    assert_eq!(ptr(&y), p);
}

#[test]
fn shared_undonated_or_other_typed_inputs_are_not_reused() {
    let f = jit(|x: Tensor| &x + 1.0).donate(&[0]);
    // Still held by the caller: read in place, left intact.
    let x = v32(&[1.0, 2.0]);
    let y = f.call_donated(x.clone()).unwrap();
    assert_eq!((y.to_vec::<f32>(), x.to_vec::<f32>()), (vec![2.0, 3.0], vec![1.0, 2.0]));
    assert_ne!(ptr(&y), ptr(&x));
    // Not in argnums.
    let g = jit(|(a, b): (Tensor, Tensor)| (&a + &b, &b - &a)).donate(&[1]);
    let (a, b) = (v32(&[1.0, 2.0]), v32(&[5.0, 7.0]));
    let (pa, pb) = (ptr(&a), ptr(&b));
    let (s, d) = g.call_donated((a, b)).unwrap();
    assert_eq!((s.to_vec::<f32>(), d.to_vec::<f32>()), (vec![6.0, 9.0], vec![4.0, 5.0]));
    assert_eq!(ptr(&s), pb);
    assert!(ptr(&d) != pa && ptr(&d) != pb);
    // Another shape or dtype.
    let h = jit(|x: Tensor| (x.sum(All), x.astype(DType::F64))).donate(&[0]);
    let x = v32(&[1.0, 2.0, 3.0]);
    let p = ptr(&x);
    let (s, c) = h.call_donated(x).unwrap();
    assert_eq!((s.item::<f32>(), c.to_vec::<f64>()), (6.0, vec![1.0, 2.0, 3.0]));
    assert!(ptr(&s) != p && ptr(&c) != p);
}

#[test]
fn a_donated_call_inside_a_trace_is_staged() {
    let f = jit(|x: Tensor| x.square()).donate(&[0]);
    let g = grad(|x: Tensor| f.call_donated(x).unwrap().sum(All))(v32(&[1.0, -3.0]));
    assert_eq!(g.to_vec::<f32>(), vec![2.0, -6.0]);
}

/// exp on `ty` as a compiled executable.
fn exp_program(ty: TensorType) -> kiln_backend_cpu::Executable {
    let mut f = Function::new();
    let x = f.add_param(ty);
    let y = f.push(Prim::Unary(UnaryOp::Exp), &[x], None).unwrap()[0];
    f.outputs = vec![y];
    compile(&f).unwrap()
}

/// The JIT's f64 `exp` is within 1 ulp of std's (the vmath tiles, `kiln_backend_cpu::vmath`).
fn assert_close(got: &[f64], want: &[f64]) {
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(want) {
        assert!((g - w).abs() <= 2.0 * f64::EPSILON * w.abs(), "got {got:?}, want {want:?}");
    }
}

#[test]
fn backend_run_donating_reuses_row_major_buffers_only() {
    let exe = exp_program(TensorType::new(DType::F64, [3, 2]));
    let data: Vec<f64> = (0..6).map(|i| i as f64 / 4.0).collect();
    let want: Vec<f64> = data.iter().map(|x| x.exp()).collect();
    // Row-major and donated: reused.
    let a = Array::from_vec(&[3, 2], data.clone());
    let p = array_ptr(&a);
    let out = exe.run_donating(vec![a], &[true]).unwrap();
    assert_close(&out[0].to_vec::<f64>().unwrap(), &want);
    assert_eq!(array_ptr(&out[0]), p);
    // Not donated: not reused.
    let a = Array::from_vec(&[3, 2], data.clone());
    let p = array_ptr(&a);
    let out = exe.run_donating(vec![a], &[false]).unwrap();
    assert_close(&out[0].to_vec::<f64>().unwrap(), &want);
    assert_ne!(array_ptr(&out[0]), p);
    // A transposed (column-major) array of the right type: read through a copy, not reused.
    let t = ndarray::ArrayD::from_shape_vec(ndarray::IxDyn(&[2, 3]), vec![0.0, 0.5, 1.0, 0.25, 0.75, 1.25])
        .unwrap()
        .reversed_axes();
    let a = Array::F64(t);
    let p = array_ptr(&a);
    let out = exe.run_donating(vec![a], &[true]).unwrap();
    assert_close(&out[0].to_vec::<f64>().unwrap(), &want);
    assert_ne!(array_ptr(&out[0]), p);
    // Wrong types are refused as by `run`.
    let e = exe.run_donating(vec![Array::from_vec(&[6], data)], &[true]).unwrap_err();
    assert_eq!(e.expected, vec![TensorType::new(DType::F64, [3, 2])]);
}
