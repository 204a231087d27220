//! `kiln::chunked_vmap`: the chunked, threaded batch equals `vmap` evaluated eagerly by the reference
//! interpreter (and hand-computed values), for chunk sizes that do and do not divide the batch, any
//! thread count, mapped axes other than 0, unmapped arguments and outputs, a `scan` inside; bad
//! arguments are errors naming `chunked_vmap` and the caller's line.

use kiln::prelude::*;
use kiln::{AxisSpec, chunked_vmap};

fn iota(shape: &[usize], scale: f64) -> Tensor {
    let n: usize = shape.iter().product();
    Tensor::from_vec(shape, (0..n).map(|i| (i as f64 * scale).sin()).collect::<Vec<f64>>())
}

/// Per example: `x [3]`, `w [3, 2]` shared, `h [2]` → (tanh(x·w) + h, Σx², the shared `w` summed).
fn per_example((x, w, h): (Tensor, Tensor, Tensor)) -> (Tensor, Tensor, Tensor) {
    ((x.matmul(&w)).tanh() + &h, (&x * &x).sum(All), w.sum(All))
}

#[test]
fn chunks_equal_eager_vmap_for_every_chunk_size_and_thread_count() {
    let b = 11;
    let xs = iota(&[b, 3], 0.7);
    let w = iota(&[3, 2], 1.3);
    let hs = iota(&[2, b], 0.4); // mapped along axis 1
    let args = (xs, w, hs);
    let in_axes = (0, AxisSpec::NONE, 1);
    let out_axes = (1, 0, AxisSpec::NONE); // first output batched along axis 1: [2, B]
    let want = vmap(per_example, in_axes.clone(), out_axes.clone())(args.clone());
    let want: Vec<Vec<f64>> = [&want.0, &want.1, &want.2].iter().map(|t| t.to_vec::<f64>()).collect();
    assert_eq!(want[1][4], (0..3).map(|j| ((12 + j) as f64 * 0.7).sin().powi(2)).sum::<f64>());
    for chunk in [1, 3, 4, 11, 64] {
        for threads in [1, 2, 0] {
            let f =
                chunked_vmap(per_example, in_axes.clone(), out_axes.clone()).chunk(chunk).threads(threads);
            let got = f.call(&args).unwrap();
            assert_eq!(got.0.shape().dims(), &[2, b]);
            assert_eq!(got.1.shape().dims(), &[b]);
            assert_eq!(got.2.shape().dims(), &[] as &[usize]);
            for (g, w) in [&got.0, &got.1, &got.2].iter().zip(&want) {
                let err = g.to_vec::<f64>().iter().zip(w).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
                assert!(err < 1e-14, "chunk {chunk}, threads {threads}: |Δ| {err:e}");
            }
        }
    }
}

#[test]
fn a_scan_per_example_equals_the_reference_interpreter() {
    // Per example: 20 steps of a damped oscillator from its own (x, v), with a shared step size.
    let step = |(s, dt): (Tensor, Tensor)| {
        let (out, ()) = scan_with(
            |s: Tensor, (): ()| {
                let (x, v) = (s.index(0), s.index(1));
                let a = -(&x) - 0.1 * &v;
                let v = &v + &dt * &a;
                let x = &x + &dt * &v;
                (Tensor::stack(&[x, v], 0), ())
            },
            s,
            (),
            ScanOptions { length: Some(20), reverse: false },
        );
        out
    };
    let s0 = iota(&[7, 2], 0.9);
    let dt = Tensor::scalar(0.05f64);
    let want = vmap(step, (0, AxisSpec::NONE), 0)((s0.clone(), dt.clone())).to_vec::<f64>();
    let got = chunked_vmap(step, (0, AxisSpec::NONE), 0).chunk(3).call(&(s0, dt)).unwrap().to_vec::<f64>();
    let err = got.iter().zip(&want).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
    assert!(err < 1e-14, "|Δ| {err:e}");
    // One hand-checked step of env 0 would be x1 = x0 + dt·(v0 + dt·(−x0 − 0.1 v0)); the scan's
    // 20 steps keep |x|, |v| bounded by the initial energy.
    assert!(got.iter().all(|v| v.abs() < 2.0));
}

#[test]
fn results_are_bitwise_the_same_for_any_thread_count() {
    let f = |x: Tensor| (x.exp() * 0.5 + x.sin()).sum(All);
    let xs = iota(&[100, 17], 0.11).astype(DType::F32);
    let one = chunked_vmap(f, 0, 0).chunk(7).threads(1).call(&xs).unwrap().to_vec::<f32>();
    let two = chunked_vmap(f, 0, 0).chunk(7).threads(2).call(&xs).unwrap().to_vec::<f32>();
    assert_eq!(one, two);
    let want = vmap(f, 0, 0)(xs).to_vec::<f32>();
    for (a, b) in one.iter().zip(&want) {
        assert!((a - b).abs() <= 1e-5 * b.abs().max(1.0), "{a} vs {b}");
    }
}

#[test]
fn specialized_reports_chunks_and_rejects_another_batch_size() {
    let f = chunked_vmap(|x: Tensor| &x * 2.0, 0, 0).chunk(4);
    let spec = f.specialize(&Tensor::zeros(DType::F32, &[10, 2])).unwrap();
    assert_eq!((spec.batch_size(), spec.chunk_size(), spec.chunks()), (10, 4, 3));
    let x = Tensor::from_vec(&[10, 2], (0..20).map(|v| v as f32).collect());
    assert_eq!(spec.call(&x).unwrap().to_vec::<f32>(), (0..20).map(|v| 2.0 * v as f32).collect::<Vec<_>>());
    let err = spec.call(&Tensor::zeros(DType::F32, &[9, 2])).unwrap_err().to_string();
    assert!(err.starts_with("chunked_vmap: compiled for arguments"), "{err}");
    assert!(err.contains("batch size 10") && err.contains("f32[9,2]"), "{err}");
    assert!(err.contains("tests/chunked_vmap.rs"), "{err}");
    // A batch smaller than the chunk is one chunk of its own size.
    let small = f.specialize(&Tensor::zeros(DType::F32, &[3, 2])).unwrap();
    assert_eq!((small.chunk_size(), small.chunks()), (3, 1));
}

#[test]
fn bad_axes_are_errors_at_the_call_site() {
    let f = chunked_vmap(|(x, y): (Tensor, Tensor)| &x + &y, (0, 0), 0);
    let err = f.call(&(Tensor::zeros(DType::F32, &[5]), Tensor::zeros(DType::F32, &[4]))).unwrap_err();
    let err = err.to_string();
    assert!(err.starts_with("chunked_vmap: mapped axes have different sizes"), "{err}");
    assert!(err.contains("argument leaf 1 of type f32[4] has size 4 along axis 0"), "{err}");
    assert!(err.contains("tests/chunked_vmap.rs"), "{err}");

    let none = chunked_vmap(|x: Tensor| x * 2.0, AxisSpec::NONE, 0);
    let err = none.call(&Tensor::zeros(DType::F32, &[5])).unwrap_err().to_string();
    assert!(err.contains("no argument is mapped"), "{err}");

    let range = chunked_vmap(|x: Tensor| x * 2.0, 2, 0);
    let err = range.call(&Tensor::zeros(DType::F32, &[5, 3])).unwrap_err().to_string();
    assert!(err.contains("in_axes 2 is out of range for argument leaf 0 of type f32[5,3]"), "{err}");

    let spec = chunked_vmap(|x: Tensor| x * 2.0, (0, 0), 0);
    let err = spec.call(&Tensor::zeros(DType::F32, &[5])).unwrap_err().to_string();
    assert!(err.contains("2 element specs for 1 elements"), "{err}");
}

/// Regression: out_axes errors came from the vmap chunked_vmap runs inside, named `vmap`, "at
/// src/chunked.rs", with one chunk's operand types (f32[2,2] for an f32[4,2] argument).
#[test]
fn bad_out_axes_are_errors_at_the_call_site_with_the_users_types() {
    let x = Tensor::zeros(DType::F32, &[4, 2]);
    let range = chunked_vmap(|x: Tensor| x.sum(All), 0, 3).chunk(2);
    let unmapped = chunked_vmap(|x: Tensor| x * 2.0, 0, AxisSpec::NONE).chunk(2);
    let count = chunked_vmap(|x: Tensor| x.sum(All), 0, (0, 0)).chunk(2);
    let line = line!() + 2;
    let errors = [
        range.call(&x).unwrap_err().to_string(),
        unmapped.call(&x).unwrap_err().to_string(),
        count.call(&x).unwrap_err().to_string(),
    ];
    let wants = [
        "out_axes 3 is out of range for output leaf 0 of type f32[] batched",
        "out_axes is None for output leaf 0 (f32[2]), but it depends on the batch",
        "out_axes gives 2 element specs for 1 elements",
    ];
    for (k, (err, want)) in errors.iter().zip(wants).enumerate() {
        let at = format!("(operands: f32[4,2]) at tests/chunked_vmap.rs:{}:", line + k as u32);
        assert!(err.starts_with(&format!("chunked_vmap: {want}")) && err.contains(&at), "{err}");
    }
    // Inside a trace it is vmap on the whole batch; its errors are still chunked_vmap's, here.
    let line = line!() + 1;
    let err = trace(|x: Tensor| range.call(&x).unwrap(), &x).unwrap_err().to_string();
    assert!(err.starts_with("chunked_vmap: out_axes 3 is out of range"), "{err}");
    assert!(err.contains(&format!("(operands: f32[4,2]) at tests/chunked_vmap.rs:{line}:")), "{err}");
}

#[test]
fn inside_a_trace_it_is_vmap() {
    let inner = chunked_vmap(|x: Tensor| (&x * &x).sum(All), 0, 0).chunk(2);
    let outer = jit(|x: Tensor| inner.call(&x).unwrap() + 1.0);
    let x = Tensor::from_vec(&[3, 2], vec![1.0f64, 2.0, 3.0, 4.0, 5.0, 6.0]);
    assert_eq!(outer.call(&x).unwrap().to_vec::<f64>(), vec![6.0, 26.0, 62.0]);
    let g = grad(|x: Tensor| inner.call(&x).unwrap().sum(All))(x);
    assert_eq!(g.to_vec::<f64>(), vec![2.0, 4.0, 6.0, 8.0, 10.0, 12.0]);
}
