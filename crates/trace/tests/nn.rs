//! `kiln_trace::nn` composites: eager values against hand-computed numbers (stable forms at the
//! extremes) and errors inside `trace`.

use kiln_ir::DType;
use kiln_trace::{Error, Tensor, nn, trace};

fn f32s(shape: &[usize], v: &[f32]) -> Tensor {
    Tensor::from_vec(shape, v.to_vec())
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

const INF: f32 = f32::INFINITY;

// e^-2 = 0.13533528, e^-1 = 0.36787944; 1 + e^-1 + e^-2 = 1.50321472; ln(1.50321472) = 0.40760596
const S: f32 = 1.503_214_7;
const LN_S: f32 = 0.407_605_96;

#[test]
fn softmax_subtracts_the_max() {
    let x = f32s(&[3], &[1.0, 2.0, 3.0]);
    close(&nn::softmax(&x, 0), &[0.135_335_28 / S, 0.367_879_44 / S, 1.0 / S]);
    // e^1000 overflows; shifted by the max it is [1, 1] / 2
    close(&nn::softmax(&f32s(&[2], &[1000.0, 1000.0]), -1), &[0.5, 0.5]);
    // per row of [[1,2,3],[0,0,0]] along -1; along axis 0 each column of [[0,0],[0,0]] is [.5,.5]
    let m = f32s(&[2, 3], &[1.0, 2.0, 3.0, 0.0, 0.0, 0.0]);
    close(
        &nn::softmax(&m, -1),
        &[0.135_335_28 / S, 0.367_879_44 / S, 1.0 / S, 1.0 / 3.0, 1.0 / 3.0, 1.0 / 3.0],
    );
    close(&nn::softmax(&Tensor::zeros(DType::F32, &[2, 2]), 0), &[0.5; 4]);
    // one -inf entry gets probability 0
    close(&nn::softmax(&f32s(&[2], &[-INF, 0.0]), 0), &[0.0, 1.0]);
}

#[test]
fn log_softmax_values() {
    let x = f32s(&[3], &[1.0, 2.0, 3.0]);
    close(&nn::log_softmax(&x, 0), &[-2.0 - LN_S, -1.0 - LN_S, -LN_S]);
    // [1000, 1000]: log(1/2) each, no overflow
    close(&nn::log_softmax(&f32s(&[2], &[1000.0, 1000.0]), 0), &[-std::f32::consts::LN_2; 2]);
}

#[test]
fn logsumexp_handles_infinities() {
    close(&nn::logsumexp(&f32s(&[3], &[1.0, 2.0, 3.0]), 0), &[3.0 + LN_S]);
    // log-semiring zero: all -inf gives -inf, not NaN
    close(&nn::logsumexp(&f32s(&[2], &[-INF, -INF]), 0), &[-INF]);
    close(&nn::logsumexp(&f32s(&[2], &[-INF, 1.0]), 0), &[1.0]);
    close(&nn::logsumexp(&f32s(&[2], &[INF, 1.0]), 0), &[INF]);
    close(&nn::logsumexp(&f32s(&[2], &[1000.0, 1000.0]), 0), &[1000.0 + std::f32::consts::LN_2]);
    // along axis 0 of zeros (2,2): ln 2 per column; the axis is removed
    let r = nn::logsumexp(&Tensor::zeros(DType::F32, &[2, 2]), 0);
    assert_eq!(r.shape().dims(), &[2]);
    close(&r, &[std::f32::consts::LN_2; 2]);
    close(&nn::logsumexp(&Tensor::zeros(DType::F32, &[2, 2]), kiln_trace::methods::All), &[4f32.ln()]);
    // an empty sum is 0, its log -inf
    close(&nn::logsumexp(&Tensor::zeros(DType::F32, &[0]), 0), &[-INF]);
    let r = nn::logsumexp(&f32s(&[2, 2], &[-INF, -INF, 0.0, 0.0]), -1);
    close(&r, &[-INF, std::f32::consts::LN_2]);
}

#[test]
fn softplus_is_stable_at_both_ends() {
    let y = nn::softplus(&f32s(&[5], &[-100.0, 0.0, 20.0, 50.0, 100.0])).to_vec::<f32>();
    // exp(-100) = 3.72e-44 is subnormal in f32 (spacing 1.4e-45): it must survive, not flush to 0
    assert!(y[0] > 0.0 && (y[0] - 3.72e-44).abs() < 3e-45, "{y:?}");
    assert!((y[1] - std::f32::consts::LN_2).abs() < 1e-7, "{y:?}");
    assert_eq!(&y[2..], &[20.0, 50.0, 100.0]); // x + log1p(e^-x) rounds to x
    close(&nn::softplus(&f32s(&[2], &[INF, -INF])), &[INF, 0.0]);
}

#[test]
fn sigmoid_log_sigmoid_relu() {
    close(
        &nn::sigmoid(&f32s(&[4], &[-548.3162, 0.0, 10.0, 90.0])),
        &[0.0, 0.5, 1.0 / (1.0 + (-10f32).exp()), 1.0],
    );
    let ls = nn::log_sigmoid(&f32s(&[3], &[0.0, -100.0, 100.0])).to_vec::<f32>();
    assert!((ls[0] + std::f32::consts::LN_2).abs() < 1e-7, "{ls:?}");
    assert_eq!(ls[1], -100.0);
    assert!(ls[2] < 0.0 && ls[2] > -1e-43, "{ls:?}"); // -softplus(-100) = -3.7e-44
    close(&nn::relu(&f32s(&[4], &[-2.0, 0.0, 3.0, f32::NAN])), &[0.0, 0.0, 3.0, f32::NAN]);
}

#[test]
fn norm_values() {
    close(&nn::norm(&f32s(&[3], &[3.0, 4.0, 0.0]), 0), &[5.0]);
    close(&nn::norm(&Tensor::zeros(DType::F32, &[3]), 0), &[0.0]);
    close(&nn::norm(&f32s(&[2, 2], &[3.0, 4.0, 6.0, 8.0]), -1), &[5.0, 10.0]);
    close(&nn::norm(&f32s(&[2, 2], &[3.0, 4.0, 6.0, 8.0]), 0), &[45f32.sqrt(), 80f32.sqrt()]);
}

#[test]
fn one_hot_zero_rows_out_of_range() {
    let r = nn::one_hot(&Tensor::from_vec(&[4], vec![0i32, 2, -1, 3]), 3, DType::F32);
    assert_eq!(r.shape().dims(), &[4, 3]);
    close(&r, &[1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]);
    let r = nn::one_hot(&Tensor::scalar(1i32), 2, DType::I32);
    assert_eq!(r.to_vec::<i32>(), vec![0, 1]);
    let r = nn::one_hot(&Tensor::from_vec(&[2, 1], vec![1u32, 0]), 2, DType::Bool);
    assert_eq!(r.shape().dims(), &[2, 1, 2]);
    assert_eq!(r.to_vec::<bool>(), vec![false, true, true, false]);
}

#[test]
fn gumbel_softmax_soft_and_hard() {
    let logits = f32s(&[3], &[1.0, 2.0, 3.0]);
    let zero = f32s(&[3], &[0.0; 3]);
    close(&nn::gumbel_softmax(&logits, &zero, 1.0, false), &[0.135_335_28 / S, 0.367_879_44 / S, 1.0 / S]);
    // tau = 0.5: softmax([2, 4, 6]) = [e^-4, e^-2, 1] / (1 + e^-2 + e^-4) = [.0183156, .1353353, 1] / 1.1536509
    let t = 1.153_650_9;
    close(&nn::gumbel_softmax(&logits, &zero, 0.5, false), &[0.018_315_64 / t, 0.135_335_28 / t, 1.0 / t]);
    // the noise can move the argmax: logits + noise = [4, 2, 3]
    let hard = nn::gumbel_softmax(&logits, &f32s(&[3], &[3.0, 0.0, 0.0]), 1.0, true);
    close(&hard, &[1.0, 0.0, 0.0]);
    let hard =
        nn::gumbel_softmax(&f32s(&[2, 2], &[0.0, 1.0, 1.0, 0.0]), &f32s(&[2, 2], &[0.0; 4]), 1.0, true);
    close(&hard, &[0.0, 1.0, 1.0, 0.0]);
}

#[test]
fn cross_products() {
    close(&nn::cross(&f32s(&[3], &[1.0, 0.0, 0.0]), &f32s(&[3], &[0.0, 1.0, 0.0])), &[0.0, 0.0, 1.0]);
    // (2*6 - 3*5, 3*4 - 1*6, 1*5 - 2*4)
    close(&nn::cross(&f32s(&[3], &[1.0, 2.0, 3.0]), &f32s(&[3], &[4.0, 5.0, 6.0])), &[-3.0, 6.0, -3.0]);
    // a batch of two against one vector: x × z = -y, y × z = x
    let a = f32s(&[2, 3], &[1.0, 0.0, 0.0, 0.0, 1.0, 0.0]);
    let r = nn::cross(&a, &f32s(&[3], &[0.0, 0.0, 1.0]));
    assert_eq!(r.shape().dims(), &[2, 3]);
    close(&r, &[0.0, -1.0, 0.0, 1.0, 0.0, 0.0]);
}

#[test]
fn segment_mean_empty_segments_are_zero() {
    let ids = Tensor::from_vec(&[4], vec![0i32, 0, 2, 2]);
    close(&nn::segment_mean(&f32s(&[4], &[1.0, 2.0, 3.0, 4.0]), &ids, 4), &[1.5, 0.0, 3.5, 0.0]);
    let r = nn::segment_mean(
        &f32s(&[3, 2], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),
        &Tensor::from_vec(&[3], vec![1i32, 1, 0]),
        2,
    );
    close(&r, &[5.0, 6.0, 2.0, 3.0]);
    let r =
        nn::segment_mean(&Tensor::from_vec(&[2], vec![1i32, 2]), &Tensor::from_vec(&[2], vec![0i32, 0]), 1);
    assert_eq!(r.dtype(), DType::F32);
    close(&r, &[1.5]);
}

#[test]
fn composites_trace_and_evaluate() {
    let t = trace(
        |x: Tensor| nn::logsumexp(&nn::log_softmax(&x, -1), -1),
        &Tensor::placeholder(DType::F32, &[2, 3]),
    )
    .unwrap();
    // log_softmax rows sum (in probability) to 1: logsumexp of each row is log 1 = 0
    let out = t.eval(&f32s(&[2, 3], &[1.0, 2.0, 3.0, -INF, 0.0, 5.0])).unwrap();
    let v = out.to_vec::<f32>();
    assert!(v.iter().all(|x| x.abs() < 1e-6), "{v:?}");
}

/// The error `f` records when traced on `args`: names `op` and contains every needle.
#[track_caller]
fn trace_err<A: kiln_trace::Tree>(f: impl FnOnce(A) -> Tensor, args: &A, op: &str, needles: &[&str]) {
    let err = trace(f, args).unwrap_err();
    let Error::Op { op: got, .. } = &err else { panic!("expected an op error, got {err:?}") };
    assert_eq!(got, op, "{err}");
    let msg = err.to_string();
    for n in needles {
        assert!(msg.contains(n), "{msg:?} lacks {n:?}");
    }
}

#[test]
fn errors_name_the_composite() {
    let i = Tensor::placeholder(DType::I32, &[3]);
    let f = |s: &[usize]| Tensor::placeholder(DType::F32, s);
    trace_err(|x: Tensor| nn::softmax(&x, 0), &i, "softmax", &["i32"]);
    trace_err(|x: Tensor| nn::logsumexp(&x, 2), &f(&[2, 3]), "logsumexp", &["axis 2", "(2, 3)"]);
    trace_err(|x: Tensor| nn::norm(&x, [0, 0]), &f(&[2]), "norm", &["repeated"]);
    trace_err(|x: Tensor| nn::softplus(&x), &i, "softplus", &["i32"]);
    trace_err(|x: Tensor| nn::one_hot(&x, 3, DType::F32), &f(&[2]), "one_hot", &["f32"]);
    trace_err(|(a, b): (Tensor, Tensor)| nn::cross(&a, &b), &(f(&[2]), f(&[3])), "cross", &["(2,)", "(3,)"]);
    trace_err(
        |(a, b): (Tensor, Tensor)| nn::cross(&a, &b),
        &(f(&[2, 3]), f(&[3, 3])),
        "cross",
        &["(2, 3)", "(3, 3)"],
    );
    trace_err(
        |(a, b): (Tensor, Tensor)| nn::gumbel_softmax(&a, &b, 1.0, true),
        &(f(&[3]), f(&[2])),
        "gumbel_softmax",
        &["f32[3]", "f32[2]"],
    );
    trace_err(
        |(d, s): (Tensor, Tensor)| nn::segment_mean(&d, &s, 2),
        &(f(&[3]), Tensor::placeholder(DType::I32, &[2])),
        "segment_mean",
        &["(2,)", "(3,)"],
    );
}
