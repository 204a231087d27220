//! `jax.numpy`-style methods: eager values (through the interpreter) against hand-computed numbers,
//! and error cases inside `trace` (the message names the op and the user's shapes).

use kiln_ir::{DType, IndexMode};
use kiln_trace::methods::All;
use kiln_trace::{Error, Tensor, trace};
use std::collections::HashMap;

fn f32s(shape: &[usize], v: &[f32]) -> Tensor {
    Tensor::from_vec(shape, v.to_vec())
}

fn i32s(shape: &[usize], v: &[i32]) -> Tensor {
    Tensor::from_vec(shape, v.to_vec())
}

fn dims(t: &Tensor) -> Vec<usize> {
    t.shape().dims().to_vec()
}

/// Equal within 1e-6 relative (NaN equals NaN, infinities equal themselves).
#[track_caller]
fn close(got: &Tensor, want: &[f32]) {
    let g = got.to_vec::<f32>();
    assert_eq!(g.len(), want.len(), "got {g:?}, want {want:?}");
    for (a, b) in g.iter().zip(want) {
        let ok = (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= 1e-6 * b.abs().max(1.0);
        assert!(ok, "got {g:?}, want {want:?}");
    }
}

/// The error `f` records when traced on `args`; asserts it names `op` and contains every `needle`.
#[track_caller]
fn trace_err<A: kiln_trace::Tree>(
    f: impl FnOnce(A) -> Tensor,
    args: &A,
    op: &str,
    needles: &[&str],
) -> String {
    let err = trace(f, args).unwrap_err();
    let Error::Op { op: got, .. } = &err else { panic!("expected an op error, got {err:?}") };
    assert_eq!(got, op, "{err}");
    let msg = err.to_string();
    for n in needles {
        assert!(msg.contains(n), "{msg:?} lacks {n:?}");
    }
    msg
}

fn ph(shape: &[usize]) -> Tensor {
    Tensor::placeholder(DType::F32, shape)
}

// ---------------------------------------------------------------- reductions

fn m23() -> Tensor {
    f32s(&[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
}

#[test]
fn sum_over_axes_negative_and_all() {
    let x = m23();
    close(&x.sum(0), &[5.0, 7.0, 9.0]);
    close(&x.sum(-1), &[6.0, 15.0]);
    close(&x.sum([0, 1]), &[21.0]);
    close(&x.sum([-1, 0]), &[21.0]);
    assert_eq!(dims(&x.sum_all()), Vec::<usize>::new());
    close(&x.sum_all(), &[21.0]);
    close(&x.sum(All), &[21.0]);
    close(&x.sum(vec![1]), &[6.0, 15.0]);
    close(&x.sum(&[1][..]), &[6.0, 15.0]);
}

#[test]
fn keepdims_keeps_size_one_axes() {
    let x = m23();
    let s = x.sum_keepdims(1);
    assert_eq!(dims(&s), vec![2, 1]);
    close(&s, &[6.0, 15.0]);
    assert_eq!(dims(&x.max_keepdims(All)), vec![1, 1]);
    close(&x.max_keepdims(All), &[6.0]);
    assert_eq!(dims(&x.mean_keepdims(0)), vec![1, 3]);
    close(&x.mean_keepdims(0), &[2.5, 3.5, 4.5]);
}

#[test]
fn mean_max_min_prod_var() {
    let x = m23();
    close(&x.mean(-1), &[2.0, 5.0]);
    close(&x.mean_all(), &[3.5]);
    close(&x.max(0), &[4.0, 5.0, 6.0]);
    close(&x.min(1), &[1.0, 4.0]);
    close(&x.prod(1), &[6.0, 120.0]); // 1*2*3, 4*5*6
    close(&x.prod_all(), &[720.0]);
    close(&x.max_all(), &[6.0]);
    close(&x.min_all(), &[1.0]);
    // var([1,2,3,4]) = (2.25 + 0.25 + 0.25 + 2.25) / 4 = 1.25
    close(&f32s(&[4], &[1.0, 2.0, 3.0, 4.0]).var(0), &[1.25]);
    // rows of m23 are 1,2,3 and 4,5,6: var = (1 + 0 + 1) / 3 each
    close(&x.var(1), &[2.0 / 3.0, 2.0 / 3.0]);
    close(&x.var_all(), &[35.0 / 12.0]); // var(1..=6) = (36-1)/12
}

#[test]
fn mean_of_ints_is_f32_and_sum_of_bools_counts() {
    let m = i32s(&[2], &[1, 2]).mean(0);
    assert_eq!(m.dtype(), DType::F32);
    close(&m, &[1.5]);
    let b = Tensor::from_vec(&[3], vec![true, false, true]);
    let s = b.sum(0);
    assert_eq!(s.dtype(), DType::I32);
    assert_eq!(s.item::<i32>(), 2);
    assert_eq!(i32s(&[3], &[2, -3, 4]).prod_all().item::<i32>(), -24);
}

#[test]
fn reductions_nan_inf_and_empty() {
    let x = f32s(&[3], &[1.0, f32::NAN, 3.0]);
    assert!(x.max(0).item::<f32>().is_nan());
    assert!(x.min(0).item::<f32>().is_nan());
    assert!(x.sum(0).item::<f32>().is_nan());
    close(&f32s(&[2], &[f32::NEG_INFINITY, 1.0]).max(0), &[1.0]);
    close(&f32s(&[2], &[f32::INFINITY, f32::NEG_INFINITY]).min(0), &[f32::NEG_INFINITY]);
    let e = Tensor::zeros(DType::F32, &[0, 3]);
    close(&e.sum(0), &[0.0, 0.0, 0.0]);
    close(&e.prod(0), &[1.0, 1.0, 1.0]);
    assert_eq!(dims(&e.sum(1)), vec![0]);
    assert!(e.mean(0).to_vec::<f32>().iter().all(|v| v.is_nan())); // 0 / 0
}

#[test]
fn reductions_rank0_and_rank4() {
    let s = Tensor::scalar(2.5f32);
    close(&s.sum(All), &[2.5]);
    close(&s.max_all(), &[2.5]);
    // x[a,0,b,c] = 4a + 2b + c; summing axes 1 and -1 leaves [[0+1, 2+3], [4+5, 6+7]]
    let x = Tensor::from_vec(&[2, 1, 2, 2], (0..8).map(|v| v as f32).collect());
    let r = x.sum([1, -1]);
    assert_eq!(dims(&r), vec![2, 2]);
    close(&r, &[1.0, 5.0, 9.0, 13.0]);
}

#[test]
fn argmax_argmin_first_occurrence_and_nan() {
    let x = f32s(&[2, 3], &[1.0, 5.0, 5.0, 7.0, 2.0, 7.0]);
    let a = x.argmax(1);
    assert_eq!(a.dtype(), DType::I32);
    assert_eq!(a.to_vec::<i32>(), vec![1, 0]);
    assert_eq!(x.argmax(-1).to_vec::<i32>(), vec![1, 0]);
    // columns (1,7), (5,2), (5,7)
    assert_eq!(x.argmin(0).to_vec::<i32>(), vec![0, 1, 0]);
    assert_eq!(x.argmax_all().item::<i32>(), 3); // flat [1,5,5,7,2,7]
    assert_eq!(x.argmin_all().item::<i32>(), 0);
    assert_eq!(f32s(&[3], &[1.0, f32::NAN, 3.0]).argmax(0).item::<i32>(), 1);
    assert_eq!(f32s(&[3], &[1.0, f32::NAN, -3.0]).argmin(0).item::<i32>(), 1);
    assert_eq!(Tensor::from_vec(&[3], vec![false, true, true]).argmax(0).item::<i32>(), 1);
}

#[test]
fn cumulative_scans_forward_and_reverse() {
    let x = f32s(&[4], &[1.0, 2.0, 3.0, 4.0]);
    close(&x.cumsum(0, false), &[1.0, 3.0, 6.0, 10.0]);
    close(&x.cumsum(-1, true), &[10.0, 9.0, 7.0, 4.0]);
    close(&f32s(&[3], &[2.0, 0.0, 3.0]).cumprod(0, false), &[2.0, 0.0, 0.0]);
    close(&f32s(&[3], &[2.0, 0.5, 3.0]).cumprod(0, true), &[3.0, 1.5, 3.0]);
    close(&f32s(&[5], &[1.0, 3.0, 2.0, 5.0, 4.0]).cummax(0, false), &[1.0, 3.0, 3.0, 5.0, 5.0]);
    close(&f32s(&[3], &[3.0, 1.0, 2.0]).cummin(0, true), &[1.0, 1.0, 2.0]);
    close(&f32s(&[3], &[1.0, f32::NAN, 3.0]).cummax(0, false), &[1.0, f32::NAN, f32::NAN]);
    // along axis -2 of [[1,2],[3,4]]
    close(&f32s(&[2, 2], &[1.0, 2.0, 3.0, 4.0]).cumsum(-2, false), &[1.0, 2.0, 4.0, 6.0]);
    let b = Tensor::from_vec(&[3], vec![true, false, true]).cumsum(0, false);
    assert_eq!(b.to_vec::<i32>(), vec![1, 1, 2]);
}

#[test]
fn sort_and_argsort() {
    let x = f32s(&[6], &[3.0, f32::NAN, 0.0, -0.0, f32::NEG_INFINITY, 1.0]);
    let s = x.sort(0).to_vec::<f32>();
    assert_eq!(s[0], f32::NEG_INFINITY);
    // 0.0 and -0.0 compare equal (as in JAX), so the stable sort keeps their input order.
    assert!(s[1] == 0.0 && s[1].is_sign_positive(), "{s:?}");
    assert!(s[2] == 0.0 && s[2].is_sign_negative(), "{s:?}");
    assert_eq!(&s[3..5], &[1.0, 3.0]);
    assert!(s[5].is_nan());
    // stable: the two 1s keep their order (positions 1 then 3)
    assert_eq!(f32s(&[4], &[3.0, 1.0, 2.0, 1.0]).argsort(0).to_vec::<i32>(), vec![1, 3, 2, 0]);
    let m = f32s(&[2, 2], &[3.0, 1.0, 2.0, 4.0]);
    close(&m.sort(0), &[2.0, 1.0, 3.0, 4.0]);
    close(&m.sort(-1), &[1.0, 3.0, 2.0, 4.0]);
    assert_eq!(m.argsort(-1).to_vec::<i32>(), vec![1, 0, 0, 1]);
}

// ---------------------------------------------------------------- shape ops

#[test]
fn reshape_with_inferred_dim_and_flatten() {
    let x = m23();
    let r = x.reshape(&[3, -1]);
    assert_eq!(dims(&r), vec![3, 2]);
    close(&r, &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    assert_eq!(dims(&x.reshape(&[-1])), vec![6]);
    assert_eq!(dims(&x.reshape(&[1, 2, 1, 3])), vec![1, 2, 1, 3]);
    assert_eq!(dims(&x.flatten()), vec![6]);
    assert_eq!(dims(&Tensor::scalar(1.0f32).flatten()), vec![1]);
    assert_eq!(dims(&Tensor::scalar(1.0f32).reshape(&[])), Vec::<usize>::new());
    assert_eq!(dims(&Tensor::zeros(DType::F32, &[0, 4]).reshape(&[2, 0, 8])), vec![2, 0, 8]);
}

#[test]
fn transpose_t_swapaxes_moveaxis() {
    let x = m23();
    close(&x.t(), &[1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
    close(&x.transpose([1, 0]), &[1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
    close(&x.transpose([-1, 0]), &[1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
    close(&x.transpose(All), &[1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
    close(&f32s(&[3], &[1.0, 2.0, 3.0]).t(), &[1.0, 2.0, 3.0]);
    // x3[i,j,k] = 12i + 4j + k
    let x3 = Tensor::from_vec(&[2, 3, 4], (0..24).map(|v| v as f32).collect());
    let p = x3.transpose([2, 0, 1]); // p[k,i,j] = x3[i,j,k]
    assert_eq!(dims(&p), vec![4, 2, 3]);
    let pv = p.to_vec::<f32>();
    assert_eq!(pv[6 + 2], 9.0); // p[1,0,2] = x3[0,2,1]
    assert_eq!(pv[3 * 6 + 3], 15.0); // p[3,1,0] = x3[1,0,3]
    assert_eq!(dims(&x3.swapaxes(0, -1)), vec![4, 3, 2]);
    let m = x3.moveaxis(0, -1); // m[j,k,i] = x3[i,j,k]
    assert_eq!(dims(&m), vec![3, 4, 2]);
    assert_eq!(m.to_vec::<f32>()[(4 + 2) * 2 + 1], 18.0); // m[1,2,1] = x3[1,1,2]
    assert_eq!(dims(&x3.moveaxis(-1, 0)), vec![4, 2, 3]);
    assert_eq!(dims(&x3.t()), vec![4, 3, 2]);
}

#[test]
fn expand_dims_and_squeeze() {
    let v = f32s(&[3], &[1.0, 2.0, 3.0]);
    assert_eq!(dims(&v.expand_dims(0)), vec![1, 3]);
    assert_eq!(dims(&v.expand_dims(-1)), vec![3, 1]);
    assert_eq!(dims(&v.expand_dims([0, 2])), vec![1, 3, 1]);
    assert_eq!(dims(&v.expand_dims([-1, 0])), vec![1, 3, 1]);
    assert_eq!(dims(&Tensor::scalar(1.0f32).expand_dims(0)), vec![1]);
    let w = v.expand_dims([0, 2]);
    assert_eq!(dims(&w.squeeze_all()), vec![3]);
    assert_eq!(dims(&w.squeeze(-1)), vec![1, 3]);
    assert_eq!(dims(&w.squeeze([0, 2])), vec![3]);
    close(&w.squeeze(All), &[1.0, 2.0, 3.0]);
    assert_eq!(dims(&Tensor::zeros(DType::F32, &[1, 1]).squeeze_all()), Vec::<usize>::new());
}

#[test]
fn roll_wraps_around_like_jnp_roll() {
    let x = f32s(&[5], &[0.0, 1.0, 2.0, 3.0, 4.0]);
    close(&x.roll(1, 0), &[4.0, 0.0, 1.0, 2.0, 3.0]); // jnp.roll([0,1,2,3,4], 1)
    close(&x.roll(-1, 0), &[1.0, 2.0, 3.0, 4.0, 0.0]);
    close(&x.roll(7, -1), &[3.0, 4.0, 0.0, 1.0, 2.0]); // 7 = 2 mod 5
    close(&x.roll(-6, 0), &[1.0, 2.0, 3.0, 4.0, 0.0]); // -6 = -1 mod 5
    close(&x.roll(5, 0), &[0.0, 1.0, 2.0, 3.0, 4.0]);
    close(&m23().roll(1, 1), &[3.0, 1.0, 2.0, 6.0, 4.0, 5.0]);
    close(&m23().roll(1, 0), &[4.0, 5.0, 6.0, 1.0, 2.0, 3.0]);
    assert_eq!(dims(&Tensor::zeros(DType::F32, &[0]).roll(3, 0)), vec![0]);
}

#[test]
fn flip_concatenate_stack() {
    close(&f32s(&[3], &[1.0, 2.0, 3.0]).flip(0), &[3.0, 2.0, 1.0]);
    let m = f32s(&[2, 2], &[1.0, 2.0, 3.0, 4.0]);
    close(&m.flip(All), &[4.0, 3.0, 2.0, 1.0]);
    close(&m.flip(-1), &[2.0, 1.0, 4.0, 3.0]);
    let b = f32s(&[2, 1], &[5.0, 6.0]);
    let c = Tensor::concatenate(&[m.clone(), b], -1);
    assert_eq!(dims(&c), vec![2, 3]);
    close(&c, &[1.0, 2.0, 5.0, 3.0, 4.0, 6.0]);
    close(&Tensor::concatenate(&[m.clone(), m.clone()], 0), &[1.0, 2.0, 3.0, 4.0, 1.0, 2.0, 3.0, 4.0]);
    let (a1, a2) = (f32s(&[2], &[1.0, 2.0]), f32s(&[2], &[3.0, 4.0]));
    let s0 = Tensor::stack(&[a1.clone(), a2.clone()], 0);
    assert_eq!(dims(&s0), vec![2, 2]);
    close(&s0, &[1.0, 2.0, 3.0, 4.0]);
    close(&Tensor::stack(&[a1.clone(), a2.clone()], -1), &[1.0, 3.0, 2.0, 4.0]);
    let s = Tensor::stack(&[Tensor::scalar(1.0f32), Tensor::scalar(2.0f32)], 0);
    close(&s, &[1.0, 2.0]);
}

#[test]
fn slice_axis_has_python_semantics() {
    let x = Tensor::from_vec(&[6], (0..6).map(|v| v as f32).collect());
    close(&x.slice_axis(0, Some(1), Some(5), 2), &[1.0, 3.0]);
    close(&x.slice_axis(0, None, None, -1), &[5.0, 4.0, 3.0, 2.0, 1.0, 0.0]);
    close(&x.slice_axis(0, Some(-2), None, 1), &[4.0, 5.0]);
    close(&x.slice_axis(0, Some(4), Some(0), -2), &[4.0, 2.0]);
    close(&x.slice_axis(0, Some(-100), Some(100), 1), &[0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
    close(&x.slice_axis(0, None, None, 4), &[0.0, 4.0]);
    close(&x.slice_axis(0, Some(10), None, -3), &[5.0, 2.0]);
    // Steps at the ends of i64 (Python: x[::-(2**63)] == [5.0], x[1::2**63-1] == [1.0]): the length
    // arithmetic overflowed (an empty result, or "slice [1, 7) does not fit" naming bounds never given).
    close(&x.slice_axis(0, None, None, i64::MIN), &[5.0]);
    close(&x.slice_axis(0, Some(1), None, i64::MAX), &[1.0]);
    close(&x.slice_axis(0, Some(-1), Some(-100), i64::MIN + 1), &[5.0]);
    assert_eq!(dims(&x.slice_axis(0, Some(5), Some(2), 1)), vec![0]);
    let m = m23();
    close(&m.slice_axis(-1, Some(1), None, 1), &[2.0, 3.0, 5.0, 6.0]);
    close(&m.slice_axis(0, None, None, -1), &[4.0, 5.0, 6.0, 1.0, 2.0, 3.0]);
}

#[test]
fn index_wraps_negative() {
    let x = f32s(&[3, 2], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let r = x.index(-1);
    assert_eq!(dims(&r), vec![2]);
    close(&r, &[5.0, 6.0]);
    close(&x.index(1), &[3.0, 4.0]);
    close(&x.index_axis(1, -1), &[2.0, 4.0, 6.0]);
    let s = f32s(&[3], &[7.0, 8.0, 9.0]).index(-3);
    assert_eq!(dims(&s), Vec::<usize>::new());
    close(&s, &[7.0]);
}

#[test]
fn pad_tile_repeat() {
    close(&f32s(&[2], &[1.0, 2.0]).pad(&[(1, 2)], 9.0), &[9.0, 1.0, 2.0, 9.0, 9.0]);
    let p = f32s(&[1, 2], &[1.0, 2.0]).pad(&[(0, 1), (1, 0)], 0.0);
    assert_eq!(dims(&p), vec![2, 3]);
    close(&p, &[0.0, 1.0, 2.0, 0.0, 0.0, 0.0]);
    // The pad value takes the tensor's dtype (documented): truncated toward zero on integers.
    let i = Tensor::from_vec(&[1], vec![5i32]);
    assert_eq!(i.pad(&[(1, 1)], 2.7).to_vec::<i32>(), vec![2, 5, 2]);
    assert_eq!(i.pad(&[(1, 0)], -2.7).to_vec::<i32>(), vec![-2, 5]);
    let v = f32s(&[2], &[1.0, 2.0]);
    close(&v.tile(&[2]), &[1.0, 2.0, 1.0, 2.0]);
    let t = v.tile(&[2, 1]);
    assert_eq!(dims(&t), vec![2, 2]);
    close(&t, &[1.0, 2.0, 1.0, 2.0]);
    let m = f32s(&[2, 2], &[1.0, 2.0, 3.0, 4.0]);
    // tile [[1,2],[3,4]] by (1, 2): each row twice side by side
    close(&m.tile(&[1, 2]), &[1.0, 2.0, 1.0, 2.0, 3.0, 4.0, 3.0, 4.0]);
    close(&v.repeat(2, 0), &[1.0, 1.0, 2.0, 2.0]);
    close(&m.repeat(2, 1), &[1.0, 1.0, 2.0, 2.0, 3.0, 3.0, 4.0, 4.0]);
    close(&m.repeat(2, -2), &[1.0, 2.0, 1.0, 2.0, 3.0, 4.0, 3.0, 4.0]);
}

#[test]
fn clip_and_like_constructors() {
    close(&f32s(&[4], &[-2.0, 0.5, 3.0, f32::NAN]).clip(0.0, 1.0), &[0.0, 0.5, 1.0, f32::NAN]);
    assert_eq!(i32s(&[3], &[-5, 2, 9]).clip(0.0, 4.0).to_vec::<i32>(), vec![0, 2, 4]);
    let x = m23();
    close(&x.zeros_like(), &[0.0; 6]);
    close(&x.ones_like(), &[1.0; 6]);
    let f = x.full_like(2.5);
    assert_eq!(dims(&f), vec![2, 3]);
    close(&f, &[2.5; 6]);
    assert_eq!(i32s(&[2], &[1, 2]).full_like(7.9).to_vec::<i32>(), vec![7, 7]);
}

#[test]
fn arange_linspace_eye_iota() {
    assert_eq!(Tensor::arange(5, DType::I32).to_vec::<i32>(), vec![0, 1, 2, 3, 4]);
    close(&Tensor::arange_step(0.0, 1.0, 0.25, DType::F32), &[0.0, 0.25, 0.5, 0.75]);
    // ceil((0 - 5) / -2) = 3 elements
    assert_eq!(Tensor::arange_step(5.0, 0.0, -2.0, DType::I32).to_vec::<i32>(), vec![5, 3, 1]);
    assert_eq!(dims(&Tensor::arange_step(1.0, 0.0, 1.0, DType::F32)), vec![0]);
    close(&Tensor::linspace(0.0, 1.0, 5, DType::F32), &[0.0, 0.25, 0.5, 0.75, 1.0]);
    close(&Tensor::linspace(2.0, 3.0, 1, DType::F32), &[2.0]);
    assert_eq!(dims(&Tensor::linspace(0.0, 1.0, 0, DType::F32)), vec![0]);
    // Integers round down, as jnp.linspace (JAX 0.10.2): truncation gave [-1, 0, 0, 0, 1] and
    // [-3, -2, -1, 0].
    assert_eq!(Tensor::linspace(-1.0, 1.0, 5, DType::I32).to_vec::<i32>(), vec![-1, -1, 0, 0, 1]);
    assert_eq!(Tensor::linspace(-3.5, 0.0, 4, DType::I32).to_vec::<i32>(), vec![-4, -3, -2, 0]);
    assert_eq!(Tensor::linspace(0.0, 10.0, 4, DType::I32).to_vec::<i32>(), vec![0, 3, 6, 10]);
    close(&Tensor::eye(3, DType::F32), &[1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]);
    assert_eq!(Tensor::iota(DType::I32, &[2, 3], 1).to_vec::<i32>(), vec![0, 1, 2, 0, 1, 2]);
    assert_eq!(Tensor::iota(DType::I32, &[2, 3], -2).to_vec::<i32>(), vec![0, 0, 0, 1, 1, 1]);
}

// ---------------------------------------------------------------- linalg

#[test]
fn dot_follows_jnp_dot() {
    let a = f32s(&[3], &[1.0, 2.0, 3.0]);
    let r = a.dot(&f32s(&[3], &[4.0, 5.0, 6.0]));
    assert_eq!(dims(&r), Vec::<usize>::new());
    close(&r, &[32.0]); // 4 + 10 + 18
    let m = f32s(&[2, 2], &[1.0, 2.0, 3.0, 4.0]);
    close(&m.dot(&f32s(&[2, 2], &[5.0, 6.0, 7.0, 8.0])), &[19.0, 22.0, 43.0, 50.0]);
    close(&m.dot(&f32s(&[2], &[1.0, 1.0])), &[3.0, 7.0]);
    close(&f32s(&[2], &[1.0, 1.0]).dot(&m), &[4.0, 6.0]);
    close(&Tensor::scalar(2.0f32).dot(&f32s(&[2], &[1.0, 2.0])), &[2.0, 4.0]);
    // (2,1,2)·(2,3) -> (2,1,3)
    let a3 = f32s(&[2, 1, 2], &[1.0, 0.0, 0.0, 1.0]);
    let b = f32s(&[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let r = a3.dot(&b);
    assert_eq!(dims(&r), vec![2, 1, 3]);
    close(&r, &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
}

#[test]
fn matmul_2d_and_1d_promotion() {
    let a = m23();
    let b = f32s(&[3, 2], &[7.0, 8.0, 9.0, 10.0, 11.0, 12.0]);
    // [1*7+2*9+3*11, 1*8+2*10+3*12; 4*7+5*9+6*11, 4*8+5*10+6*12]
    close(&a.matmul(&b), &[58.0, 64.0, 139.0, 154.0]);
    let v = f32s(&[3], &[1.0, 0.0, 1.0]);
    let r = a.matmul(&v);
    assert_eq!(dims(&r), vec![2]);
    close(&r, &[4.0, 10.0]);
    let r = v.matmul(&b);
    assert_eq!(dims(&r), vec![2]);
    close(&r, &[18.0, 20.0]); // rows 0 + 2 of b
    close(&v.matmul(&v), &[2.0]);
    // (3,) @ (2,3,2): the vector against each batch matrix
    let bb = f32s(&[2, 3, 2], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 2.0, 4.0, 6.0, 8.0, 10.0, 12.0]);
    let r = v.matmul(&bb);
    assert_eq!(dims(&r), vec![2, 2]);
    close(&r, &[6.0, 8.0, 12.0, 16.0]);
    // (2,2,3) @ (3,)
    let r = bb.reshape(&[2, 2, 3]).matmul(&v);
    assert_eq!(dims(&r), vec![2, 2]);
    close(&r, &[1.0 + 3.0, 4.0 + 6.0, 2.0 + 6.0, 8.0 + 12.0]);
}

#[test]
fn matmul_broadcasts_batch_dims() {
    // a: (2,1,2,2) = [I, 2I]; b: (3,2,2) = [[k,1],[0,k]] for k = 0,1,2  ->  (2,3,2,2) = a[i] @ b[k]
    let a = f32s(&[2, 1, 2, 2], &[1.0, 0.0, 0.0, 1.0, 2.0, 0.0, 0.0, 2.0]);
    let b = f32s(&[3, 2, 2], &[0.0, 1.0, 0.0, 0.0, 1.0, 1.0, 0.0, 1.0, 2.0, 1.0, 0.0, 2.0]);
    let r = a.matmul(&b);
    assert_eq!(dims(&r), vec![2, 3, 2, 2]);
    #[rustfmt::skip]
    close(&r, &[
        0.0, 1.0, 0.0, 0.0,  1.0, 1.0, 0.0, 1.0,  2.0, 1.0, 0.0, 2.0,
        0.0, 2.0, 0.0, 0.0,  2.0, 2.0, 0.0, 2.0,  4.0, 2.0, 0.0, 4.0,
    ]);
    // (2,2,3) @ (3,2): a batch against one matrix
    let r = Tensor::stack(&[m23(), m23()], 0).matmul(&f32s(&[3, 2], &[7.0, 8.0, 9.0, 10.0, 11.0, 12.0]));
    assert_eq!(dims(&r), vec![2, 2, 2]);
    close(&r, &[58.0, 64.0, 139.0, 154.0, 58.0, 64.0, 139.0, 154.0]);
}

#[test]
fn outer_and_inner() {
    let o = f32s(&[2], &[1.0, 2.0]).outer(&f32s(&[3], &[3.0, 4.0, 5.0]));
    assert_eq!(dims(&o), vec![2, 3]);
    close(&o, &[3.0, 4.0, 5.0, 6.0, 8.0, 10.0]);
    let m = f32s(&[2, 2], &[1.0, 2.0, 3.0, 4.0]);
    // inner(m, I)[i, j] = Σ_k m[i,k] I[j,k] = m[i,j]
    close(&m.inner(&Tensor::eye(2, DType::F32)), &[1.0, 2.0, 3.0, 4.0]);
    close(&f32s(&[2], &[1.0, 2.0]).inner(&f32s(&[2], &[3.0, 4.0])), &[11.0]);
}

// ---------------------------------------------------------------- indexing

#[test]
fn take_wraps_negative_then_clamps() {
    let x = f32s(&[3], &[10.0, 20.0, 30.0]);
    // -1 -> 2; 3, 5 clamp to 2; -5 -> -2 clamps to 0; -3 -> 0
    let idx = i32s(&[7], &[0, 2, -1, 3, 5, -5, -3]);
    close(&x.take(&idx, 0), &[10.0, 30.0, 30.0, 30.0, 30.0, 10.0, 10.0]);
    let r = m23().take(&i32s(&[1, 2], &[2, 0]), 1);
    assert_eq!(dims(&r), vec![2, 1, 2]);
    close(&r, &[3.0, 1.0, 6.0, 4.0]);
    let s = x.take(&Tensor::scalar(-2i32), -1);
    assert_eq!(dims(&s), Vec::<usize>::new());
    close(&s, &[20.0]);
    close(&x.take(&Tensor::from_vec(&[2], vec![7u32, 1]), 0), &[30.0, 20.0]);
    close(
        &x.take_with_mode(&i32s(&[3], &[5, -1, -4]), 0, IndexMode::FillOrDrop),
        &[f32::NAN, 30.0, f32::NAN],
    );
}

/// The index operand of every `gather`/`scatter` in `f`, evaluated from the given index argument
/// (`f`'s parameter 1) by the interpreter: only the equations the indices depend on run, so the
/// (placeholder-sized) array parameter 0 is never allocated.
fn index_operands(f: &kiln_ir::Function, idx: &kiln_ir::Array) -> Vec<kiln_ir::Array> {
    use kiln_ir::Prim;
    let mut env: std::collections::HashMap<kiln_ir::Var, kiln_ir::Array> = HashMap::new();
    env.insert(f.params[1], idx.clone());
    for c in &f.consts {
        env.insert(c.var, (*c.value).clone());
    }
    let mut out = Vec::new();
    for e in &f.eqns {
        if let Prim::Gather { .. } | Prim::Scatter { .. } = e.prim {
            out.push(env[&e.inputs[1]].clone());
        }
        let Some(args) = e.inputs.iter().map(|v| env.get(v)).collect::<Option<Vec<_>>>() else { continue };
        for (v, a) in e.outputs.iter().zip(kiln_ir::eval_prim(&e.prim, &args).unwrap()) {
            env.insert(*v, a);
        }
    }
    out
}

#[test]
fn negative_indices_wrap_exactly_on_axes_longer_than_i32_max() {
    // Regression: `-1` on an axis of 2^31 + 100 elements read element 2^31 - 2 (i32::MAX - 1): the
    // axis length was saturated to i32::MAX. Past i32::MAX the i32 indices become u32 and wrap there.
    let idx = kiln_ir::Array::from_vec(&[5], vec![-1i32, 0, 7, i32::MIN, i32::MAX]);
    let ix = || Tensor::placeholder(DType::I32, &[5]);
    for n in [(1usize << 31) + 100, 1 << 32] {
        let want: Vec<u32> =
            [n - 1, 0, 7, n - (1 << 31), i32::MAX as usize].iter().map(|&i| i as u32).collect();
        let ops: [(&str, Box<dyn Fn(&Tensor, &Tensor) -> Tensor>); 4] = [
            ("take", Box::new(|x, i| x.take(i, 0))),
            ("take_along_axis", Box::new(|x, i| x.take_along_axis(i, 0))),
            ("at_add", Box::new(|x, i| x.at_add(i, &Tensor::scalar(1.0f32)))),
            ("at_set", Box::new(|x, i| x.at_set(i, &Tensor::scalar(1.0f32)))),
        ];
        for (name, op) in ops {
            let traced = trace(|(x, i): (Tensor, Tensor)| op(&x, &i), &(ph(&[n]), ix())).unwrap();
            let got = index_operands(&traced.function, &idx);
            assert_eq!(got.len(), 1, "{name}");
            assert_eq!(got[0].to_vec::<u32>().unwrap(), want, "{name}, axis of {n}");
        }
    }
    // Within i32 range nothing changes: i32 indices, `i + n` for negative ones.
    let traced = trace(|(x, i): (Tensor, Tensor)| x.take(&i, 0), &(ph(&[10]), ix())).unwrap();
    let got = index_operands(&traced.function, &idx);
    assert_eq!(got[0].to_vec::<i32>().unwrap(), vec![9, 0, 7, i32::MIN + 10, i32::MAX]);
    // Past 2^32, a wrapped i32 index may not fit u32: a clear error, u32 indices still work.
    let huge = (1usize << 32) + 1;
    let needles = ["too long for i32 indices", "methods.rs"];
    trace_err(|(x, i): (Tensor, Tensor)| x.take(&i, 0), &(ph(&[huge]), ix()), "take", &needles);
    let u = Tensor::placeholder(DType::U32, &[5]);
    assert!(trace(|(x, i): (Tensor, Tensor)| x.take(&i, 0), &(ph(&[huge]), u)).is_ok());
}

#[test]
fn integer_positions_past_their_dtype_are_errors_not_wrapped_indices() {
    // Regression: `argsort`, `argmax`/`argmin` and an integer `iota` on an axis longer than 2^31
    // numbered its positions with wrapped i32 values (silently wrong indices). Each is now refused
    // naming the op, the count and the caller's line; exactly 2^31 positions (0..=i32::MAX) still fit.
    let long = (1usize << 31) + 100;
    let needles = ["cannot number the 2147483748 positions along axis 0", "methods.rs"];
    trace_err(|x: Tensor| x.argsort(0), &ph(&[long]), "argsort", &needles);
    trace_err(|x: Tensor| x.argmax(0), &ph(&[long]), "argmax", &needles);
    trace_err(|x: Tensor| x.argmin(0), &ph(&[long]), "argmin", &needles);
    let needles = ["i32 values cannot number the 2147483748 positions along dimension 1", "methods.rs"];
    trace_err(|_: Tensor| Tensor::iota(DType::I32, &[2, long], 1), &ph(&[1]), "iota", &needles);
    // u32 positions go to 2^32, floats anywhere; the fitting sizes trace to the expected types.
    let needles = ["u32 values cannot number the 4294967297 positions along dimension 0"];
    trace_err(|_: Tensor| Tensor::iota(DType::U32, &[(1 << 32) + 1], 0), &ph(&[1]), "iota", &needles);
    let fits: [(&str, &dyn Fn(Tensor) -> Tensor); 4] = [
        ("argsort", &|x| x.argsort(0)),
        ("argmax", &|x| x.argmax(0)),
        ("i32 iota", &|_| Tensor::iota(DType::I32, &[1 << 31], 0)),
        ("f32 iota", &|_| Tensor::iota(DType::F32, &[long], 0)),
    ];
    for (name, f) in fits {
        let traced = trace(f, &ph(&[1 << 31])).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(traced.function.outputs.len(), 1, "{name}");
    }
    // arange/linspace convert their f64 values: past the integer dtype they saturated silently.
    let needles = ["values from 0 to 2147483648 do not fit i32", "methods.rs"];
    trace_err(|_: Tensor| Tensor::arange((1 << 31) + 1, DType::I32), &ph(&[1]), "arange", &needles);
    let needles = ["values from -1 to 1 do not fit u32"];
    trace_err(|_: Tensor| Tensor::linspace(-1.0, 1.0, 3, DType::U32), &ph(&[1]), "linspace", &needles);
    assert_eq!(Tensor::arange_step(-2.0, 2.0, 1.0, DType::I32).to_vec::<i32>(), vec![-2, -1, 0, 1]);
    assert_eq!(Tensor::linspace(-0.5, 4.0, 4, DType::U32).to_vec::<u32>(), vec![0, 1, 2, 4]);
    // And small arrays still sort and pick as before.
    let x = f32s(&[4], &[3.0, 1.0, 2.0, 1.0]);
    assert_eq!(x.argsort(0).to_vec::<i32>(), vec![1, 3, 2, 0]);
    assert_eq!(x.argmax(0).item::<i32>(), 0);
}

#[test]
fn take_along_axis_sorts_and_broadcasts() {
    let x = f32s(&[2, 3], &[10.0, 30.0, 20.0, 60.0, 40.0, 50.0]);
    close(&x.take_along_axis(&x.argsort(1), 1), &[10.0, 20.0, 30.0, 40.0, 50.0, 60.0]);
    // (1,2) indices broadcast over the rows; -1 is the last column
    let r = x.take_along_axis(&i32s(&[1, 2], &[0, -1]), -1);
    assert_eq!(dims(&r), vec![2, 2]);
    close(&r, &[10.0, 20.0, 60.0, 50.0]);
    let r = x.take_along_axis(&i32s(&[1, 3], &[1, 0, 1]), 0);
    assert_eq!(dims(&r), vec![1, 3]);
    close(&r, &[60.0, 30.0, 50.0]);
    close(&x.take_along_axis(&i32s(&[2, 1], &[9, -9]), 1), &[20.0, 60.0]); // clamped
}

#[test]
fn at_add_accumulates_duplicates_and_drops_out_of_range() {
    let x = Tensor::zeros(DType::F32, &[3]);
    let r = x.at_add(&i32s(&[5], &[0, 2, 2, 1, 2]), &f32s(&[5], &[0.1, 0.2, 0.3, 0.4, 0.5]));
    close(&r, &[0.1, 0.4, 1.0]); // 0.2 + 0.3 + 0.5 = 1.0
    // -1 -> 2; 3 dropped; -4 -> -1 dropped; 0 kept
    let r = x.at_add(&i32s(&[4], &[-1, 3, -4, 0]), &f32s(&[4], &[1.0, 2.0, 3.0, 4.0]));
    close(&r, &[4.0, 0.0, 1.0]);
    // a row update broadcast from a scalar
    let r = Tensor::zeros(DType::F32, &[3, 2]).at_add(&i32s(&[1], &[1]), &Tensor::scalar(5.0f32));
    close(&r, &[0.0, 0.0, 5.0, 5.0, 0.0, 0.0]);
    let r = f32s(&[3], &[1.0, 2.0, 3.0]).at_set(&i32s(&[3], &[0, -1, 7]), &f32s(&[3], &[9.0, 8.0, 6.0]));
    close(&r, &[9.0, 2.0, 8.0]);
    let r = f32s(&[3], &[1.0, 2.0, 3.0]).at_set(&Tensor::scalar(1i32), &Tensor::scalar(0.0f32));
    close(&r, &[1.0, 0.0, 3.0]);
}

#[test]
fn segment_sum_drops_out_of_range_ids() {
    let r = f32s(&[4], &[1.0, 2.0, 3.0, 4.0]).segment_sum(&i32s(&[4], &[0, 0, 2, -1]), 3);
    close(&r, &[3.0, 0.0, 3.0]);
    let loc = i32s(&[5], &[0, 2, 2, 1, 2]);
    close(&f32s(&[5], &[0.1, 0.2, 0.3, 0.4, 0.5]).segment_sum(&loc, 3), &[0.1, 0.4, 1.0]);
    let r = f32s(&[3, 2], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]).segment_sum(&i32s(&[3], &[1, 1, 0]), 2);
    close(&r, &[5.0, 6.0, 4.0, 6.0]);
}

// ---------------------------------------------------------------- misc elementwise

#[test]
fn square_reciprocal_sigmoid_relu() {
    close(&f32s(&[2], &[-3.0, 0.5]).square(), &[9.0, 0.25]);
    close(&f32s(&[3], &[4.0, -0.5, 0.0]).reciprocal(), &[0.25, -2.0, f32::INFINITY]);
    // Integer division for ints, as documented (it was refused as "a float scalar (1.0) divides ...").
    let ints = Tensor::from_vec(&[4], vec![2i32, 1, -1, -3]);
    assert_eq!(ints.reciprocal().to_vec::<i32>(), vec![0, 1, -1, 0]);
    close(&f32s(&[3], &[0.0, -200.0, 200.0]).sigmoid(), &[0.5, 0.0, 1.0]);
    close(&f32s(&[4], &[-1.0, 0.0, 2.0, f32::NAN]).relu(), &[0.0, 0.0, 2.0, f32::NAN]);
    assert_eq!(i32s(&[2], &[-3, 3]).relu().to_vec::<i32>(), vec![0, 3]);
}

// ---------------------------------------------------------------- traced use

#[test]
fn methods_trace_and_evaluate() {
    let t = trace(
        |x: Tensor| {
            let g = x.matmul(&x.t()); // Gram matrix (2,2)
            let s = g.sum_keepdims(-1); // row sums (2,1)
            (&g / &s).roll(1, 0).flatten()
        },
        &ph(&[2, 3]),
    )
    .unwrap();
    let out = t.eval(&m23()).unwrap();
    // g = [[14, 32], [32, 77]]; rows / sums 46 and 109; rows swapped by the roll
    close(&out, &[32.0 / 109.0, 77.0 / 109.0, 14.0 / 46.0, 32.0 / 46.0]);
}

// ---------------------------------------------------------------- errors inside trace

#[test]
fn axis_errors_name_the_op_and_shape() {
    let msg = trace_err(|x: Tensor| x.sum(2), &ph(&[3, 4]), "sum", &["axis 2 out of range for shape (3, 4)"]);
    assert!(msg.starts_with("sum: "), "{msg}");
    trace_err(|x: Tensor| x.mean(-3), &ph(&[3, 4]), "mean", &["axis -3", "(3, 4)"]);
    trace_err(|x: Tensor| x.max([1, -1]), &ph(&[3, 4]), "max", &["repeated axis"]);
    trace_err(|x: Tensor| x.argmax(1), &ph(&[3]), "argmax", &["axis 1", "(3,)"]);
    trace_err(|x: Tensor| x.cumsum(-2, false), &ph(&[3]), "cumsum", &["(3,)"]);
    trace_err(|x: Tensor| x.sort(0), &ph(&[]), "sort", &["()"]);
    trace_err(|x: Tensor| x.flip(5), &ph(&[2, 2]), "flip", &["(2, 2)"]);
}

#[test]
fn empty_reductions_without_identity_are_errors() {
    trace_err(|x: Tensor| x.max(0), &ph(&[0, 3]), "max", &["zero-size", "(0, 3)"]);
    trace_err(|x: Tensor| x.min_all(), &ph(&[2, 0]), "min", &["(2, 0)"]);
    trace_err(|x: Tensor| x.argmax(0), &ph(&[0]), "argmax", &["empty", "(0,)"]);
    trace_err(|x: Tensor| x.argmin_all(), &ph(&[0, 2]), "argmin", &["(0, 2)"]);
}

#[test]
fn shape_op_errors_quote_the_users_shapes() {
    trace_err(|x: Tensor| x.reshape(&[5, -1]), &ph(&[3, 4]), "reshape", &["(3, 4)", "(5, -1)"]);
    trace_err(|x: Tensor| x.reshape(&[-1, -1]), &ph(&[3, 4]), "reshape", &["one unknown"]);
    trace_err(|x: Tensor| x.reshape(&[7]), &ph(&[3, 4]), "reshape", &["(3, 4)", "(7,)"]);
    trace_err(|x: Tensor| x.transpose([0, 0]), &ph(&[2, 3]), "transpose", &["(2, 3)"]);
    trace_err(|x: Tensor| x.transpose([0]), &ph(&[2, 3]), "transpose", &["not a permutation", "(2, 3)"]);
    trace_err(|x: Tensor| x.squeeze(1), &ph(&[1, 3]), "squeeze", &["axis 1", "size 3", "(1, 3)"]);
    trace_err(|x: Tensor| x.expand_dims(3), &ph(&[2]), "expand_dims", &["axis 3", "(2,)"]);
    trace_err(|x: Tensor| x.swapaxes(0, 2), &ph(&[2, 3]), "swapaxes", &["(2, 3)"]);
    trace_err(|x: Tensor| x.roll(1, 1), &ph(&[4]), "roll", &["axis 1", "(4,)"]);
    trace_err(|x: Tensor| x.slice_axis(0, None, None, 0), &ph(&[4]), "slice_axis", &["step cannot be zero"]);
    trace_err(|x: Tensor| x.index(3), &ph(&[3, 2]), "index", &["index 3", "size 3", "(3, 2)"]);
    trace_err(|x: Tensor| x.index(-4), &ph(&[3]), "index", &["index -4"]);
    trace_err(|x: Tensor| x.index(0), &ph(&[]), "index", &["()"]);
    trace_err(|x: Tensor| x.pad(&[(1, 1), (1, 1), (1, 1)], 0.0), &ph(&[2, 2]), "pad", &["(2, 2)"]);
    trace_err(|x: Tensor| x.repeat(2, 1), &ph(&[2]), "repeat", &["(2,)"]);
    let b = Tensor::placeholder(DType::Bool, &[2]);
    trace_err(|x: Tensor| x.clip(0.0, 1.0), &b, "clip", &["bool"]);
}

#[test]
fn concatenate_and_stack_errors() {
    trace_err(
        |(a, b): (Tensor, Tensor)| Tensor::concatenate(&[a, b], 1),
        &(ph(&[2, 2]), ph(&[3, 1])),
        "concatenate",
        &["(2, 2)", "(3, 1)", "f32[2,2]", "f32[3,1]"],
    );
    trace_err(
        |(a, b): (Tensor, Tensor)| Tensor::concatenate(&[a, b], 0),
        &(ph(&[2]), Tensor::placeholder(DType::I32, &[2])),
        "concatenate",
        &["f32", "i32"],
    );
    trace_err(|a: Tensor| Tensor::concatenate(&[a], 0), &ph(&[]), "concatenate", &["zero-dimensional"]);
    trace_err(|a: Tensor| Tensor::concatenate(&[a.clone(), a], 2), &ph(&[2, 2]), "concatenate", &["axis 2"]);
    trace_err(
        |(a, b): (Tensor, Tensor)| Tensor::stack(&[a, b], 0),
        &(ph(&[2]), ph(&[3])),
        "stack",
        &["f32[2]", "f32[3]"],
    );
    trace_err(|a: Tensor| Tensor::stack(&[a.clone(), a], 2), &ph(&[2]), "stack", &["axis 2"]);
}

#[test]
fn linalg_errors_name_the_op_and_both_shapes() {
    let line = line!() + 1;
    let f = |(a, b): (Tensor, Tensor)| a.matmul(&b);
    let err = trace(f, &(ph(&[2, 3]), ph(&[4, 5]))).unwrap_err();
    let msg = err.to_string();
    assert!(msg.starts_with("matmul: ") && msg.contains("(2, 3)") && msg.contains("(4, 5)"), "{msg}");
    assert!(msg.contains(&format!("methods.rs:{line}:")), "{msg}");
    trace_err(
        |(a, b): (Tensor, Tensor)| a.matmul(&b),
        &(ph(&[2, 2, 2]), ph(&[3, 2, 2])),
        "matmul",
        &["batch", "(2, 2, 2)", "(3, 2, 2)"],
    );
    trace_err(|(a, b): (Tensor, Tensor)| a.matmul(&b), &(ph(&[]), ph(&[2])), "matmul", &["at least one"]);
    trace_err(|(a, b): (Tensor, Tensor)| a.matmul(&b), &(ph(&[3]), ph(&[2])), "matmul", &["(3,)", "(2,)"]);
    trace_err(|(a, b): (Tensor, Tensor)| a.dot(&b), &(ph(&[2, 3]), ph(&[2])), "dot", &["(2, 3)", "(2,)"]);
    trace_err(|(a, b): (Tensor, Tensor)| a.inner(&b), &(ph(&[2, 3]), ph(&[2])), "inner", &["(2, 3)", "(2,)"]);
    trace_err(
        |(a, b): (Tensor, Tensor)| a.matmul(&b),
        &(ph(&[2, 2]), Tensor::placeholder(DType::F64, &[2, 2])),
        "matmul",
        &["f32", "f64"],
    );
}

#[test]
fn indexing_errors() {
    let fi = Tensor::placeholder(DType::F32, &[2]);
    trace_err(
        |(x, i): (Tensor, Tensor)| x.take(&i, 0),
        &(ph(&[3]), fi.clone()),
        "take",
        &["indices dtype f32"],
    );
    let ii = Tensor::placeholder(DType::I32, &[2]);
    trace_err(|(x, i): (Tensor, Tensor)| x.take(&i, 1), &(ph(&[3]), ii.clone()), "take", &["axis 1", "(3,)"]);
    trace_err(|(x, i): (Tensor, Tensor)| x.take(&i, 0), &(ph(&[0]), ii.clone()), "take", &["empty axis"]);
    trace_err(
        |(x, i): (Tensor, Tensor)| x.take_along_axis(&i, 0),
        &(ph(&[2, 3]), ii.clone()),
        "take_along_axis",
        &["(2,)", "(2, 3)", "ranks"],
    );
    trace_err(
        |(x, i): (Tensor, Tensor)| x.take_along_axis(&i, 1),
        &(ph(&[2, 3]), Tensor::placeholder(DType::I32, &[3, 1])),
        "take_along_axis",
        &["(2, 3)", "(3, 1)"],
    );
    trace_err(
        |(x, i, u): (Tensor, Tensor, Tensor)| x.at_add(&i, &u),
        &(ph(&[3]), ii.clone(), ph(&[3])),
        "at_add",
        &["(3,)", "(2,)"],
    );
    trace_err(
        |(x, i, u): (Tensor, Tensor, Tensor)| x.at_set(&i, &u),
        &(ph(&[3]), ii.clone(), Tensor::placeholder(DType::I32, &[2])),
        "at_set",
        &["i32", "f32"],
    );
    trace_err(
        |(x, i): (Tensor, Tensor)| x.segment_sum(&i, 4),
        &(ph(&[3]), ii.clone()),
        "segment_sum",
        &["(2,)", "(3,)"],
    );
}

#[test]
fn constructor_errors() {
    trace_err(|_x: Tensor| Tensor::arange_step(0.0, 1.0, 0.0, DType::F32), &ph(&[1]), "arange", &["step"]);
    trace_err(|_x: Tensor| Tensor::iota(DType::I32, &[2, 3], 2), &ph(&[1]), "iota", &["axis 2", "(2, 3)"]);
    trace_err(|_x: Tensor| Tensor::iota(DType::I32, &[], 0), &ph(&[1]), "iota", &["rank >= 1"]);
}

#[test]
fn eager_misuse_panics_with_the_op_and_shape() {
    let x = m23();
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| x.sum(2)));
    let payload = r.unwrap_err();
    let msg = payload.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(msg.contains("sum: axis 2 out of range for shape (2, 3)"), "{msg}");
}

#[test]
fn traced_functions_verify_and_match_eager_values() {
    // Each staged program passes the IR verifier (trace runs it in debug builds) and evaluates to the
    // eager result, which the tests above pin to hand-computed numbers.
    let x = f32s(&[2, 3], &[10.0, 30.0, 20.0, 60.0, 40.0, 50.0]);
    let f = |x: Tensor| {
        let idx = Tensor::from_vec(&[5], vec![0i32, 1, 1, -1, 9]);
        let parts = vec![
            x.take_along_axis(&x.argsort(-1), -1).flatten(),
            x.take(&idx, 1).flatten(),
            Tensor::zeros(DType::F32, &[2]).at_add(&idx, &Tensor::scalar(1.0f32).broadcast_to(&[5])),
            x.roll(-1, 1).tile(&[1, 2]).repeat(2, 0).flatten(),
            x.slice_axis(1, None, None, -2).cumsum(0, true).flatten(),
            x.matmul(&Tensor::stack(&[x.t(), x.t()], 0)).sum_all().reshape(&[1]),
            x.mean_keepdims(0).squeeze_all().pad(&[(1, 0)], -1.0),
        ];
        Tensor::concatenate(&parts, 0)
    };
    let eager = f(x.clone()).to_vec::<f32>();
    let traced = trace(f, &ph(&[2, 3])).unwrap();
    assert_eq!(traced.eval(&x).unwrap().to_vec::<f32>(), eager);
    // at_add above: indices 0, 1, 1, -1 -> 1, 9 dropped: [1, 3]
    assert_eq!(&eager[16..18], &[1.0, 3.0]);
}
