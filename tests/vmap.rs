//! End-to-end `vmap`: control flow with batched and unbatched values, indexing with batched indices,
//! the IR of `vmap(|x| x @ W)`, randomness with a batch of keys, axis specs for user structs, nested
//! vmap, `out_axes`, `axis_size`, the axis-size error (ad-cases.json case 25), and compositions with
//! `grad`.

use kiln::prelude::*;
use kiln::{AxisSpec, axis, lax, random, unmapped};

fn f32s(shape: &[usize], v: &[f32]) -> Tensor {
    Tensor::from_vec(shape, v.to_vec())
}

fn prim_names(f: &kiln::ir::Function) -> Vec<&'static str> {
    f.eqns.iter().map(|e| e.prim.name()).collect()
}

#[test]
fn scan_with_batched_and_unbatched_carries() {
    // carry (a, count): a += x (batched through xs), count += 1 (never batched); y = a.
    let f = |(a0, xs): (Tensor, Tensor)| {
        scan(
            |(a, c): (Tensor, Tensor), x: Tensor| {
                let a = &a + &x;
                ((a.clone(), &c + 1.0), a)
            },
            (a0, Tensor::scalar(0.0f32)),
            xs,
        )
    };
    let xs = f32s(&[2, 3], &[1.0, 2.0, 3.0, 10.0, 20.0, 30.0]);
    let ((a, c), ys) = vmap(f, (AxisSpec::NONE, 0), 0)((Tensor::scalar(0.5f32), xs.clone()));
    // lane 0: 0.5+1+2+3 = 6.5; lane 1: 0.5+10+20+30 = 60.5; count 3 in both (broadcast by out_axes 0).
    assert_eq!(a.to_vec::<f32>(), vec![6.5, 60.5]);
    assert_eq!(c.to_vec::<f32>(), vec![3.0, 3.0]);
    assert_eq!(ys.to_vec::<f32>(), vec![1.5, 3.5, 6.5, 10.5, 30.5, 60.5]);
    // Traced: the scan stays one scan whose count carry is unbatched (f32[] in the body).
    let traced = trace(
        |(a0, xs): (Tensor, Tensor)| vmap(f, (AxisSpec::NONE, 0), (0, None, 0))((a0, xs)),
        &(Tensor::scalar(0.5f32), xs),
    )
    .expect("traces");
    let scans: Vec<_> = traced.function.eqns.iter().filter(|e| e.prim.name() == "scan").collect();
    assert_eq!(scans.len(), 1);
    let body = &scans[0].prim.subfunctions()[0];
    assert_eq!(body.param_types()[1].to_string(), "f32[]");
}

#[test]
fn while_loop_lanes_finish_at_different_iterations() {
    // Double v until it reaches 10, counting steps: 1 → 16 in 4 steps, 3 → 12 in 2, 20 stays (0 steps).
    let f = |v: Tensor| {
        while_loop(
            |(v, _): &(Tensor, Tensor)| v.lt(&Tensor::scalar(10.0f32)),
            |(v, n): (Tensor, Tensor)| (&v * 2.0, &n + &Tensor::scalar(1i32)),
            (v, Tensor::scalar(0i32)),
        )
    };
    let (v, n) = vmap(f, 0, 0)(f32s(&[3], &[1.0, 3.0, 20.0]));
    assert_eq!(v.to_vec::<f32>(), vec![16.0, 12.0, 20.0]);
    assert_eq!(n.to_vec::<i32>(), vec![4, 2, 0]);
}

#[test]
fn cond_with_batched_and_unbatched_predicate() {
    let f = |(p, x): (Tensor, Tensor)| cond(&p, |x: Tensor| &x * 2.0, |x: Tensor| &x - 1.0, x);
    let x = f32s(&[3], &[1.0, 2.0, 3.0]);
    // Batched predicate: per lane 2x or x-1.
    let p = Tensor::from_vec(&[3], vec![true, false, true]);
    assert_eq!(vmap(f, 0, 0)((p, x.clone())).to_vec::<f32>(), vec![2.0, 1.0, 6.0]);
    // Unbatched predicate: one cond of batched branches.
    let out = vmap(f, (AxisSpec::NONE, 0), 0)((Tensor::scalar(false), x));
    assert_eq!(out.to_vec::<f32>(), vec![0.0, 1.0, 2.0]);
}

#[test]
fn scatter_add_with_batched_indices_and_unbatched_updates() {
    let upd = f32s(&[2], &[1.0, 2.0]);
    let f = move |idx: Tensor| Tensor::zeros(DType::F32, &[4]).at_add(&idx, &upd);
    let idx = Tensor::from_vec(&[2, 2], vec![0i32, 1, 3, 3]);
    // lane 0: [1, 2, 0, 0]; lane 1: both updates at 3 accumulate to 3.
    assert_eq!(vmap(f, 0, 0)(idx).to_vec::<f32>(), vec![1.0, 2.0, 0.0, 0.0, 0.0, 0.0, 0.0, 3.0]);
}

#[test]
fn gather_and_dynamic_slice_with_batched_indices() {
    let x = f32s(&[4], &[10.0, 11.0, 12.0, 13.0]);
    let xc = x.clone();
    let take = vmap(move |i: Tensor| xc.take(&i, 0), 0, 0);
    assert_eq!(take(Tensor::from_vec(&[2, 1], vec![3i32, 1])).to_vec::<f32>(), vec![13.0, 11.0]);
    // dynamic_slice with a batched start (clamped to [0, 4-2] = 2 for the start 7).
    let ds = vmap(move |s: Tensor| lax::dynamic_slice(&x, &[s], &[2]), 0, 0);
    assert_eq!(ds(Tensor::from_vec(&[2], vec![1i32, 7])).to_vec::<f32>(), vec![11.0, 12.0, 12.0, 13.0]);
}

#[test]
fn matmul_with_unbatched_w_is_one_dot_general_without_broadcast() {
    let xb = Tensor::from_vec(&[4, 3], (0..12).map(|i| i as f32).collect());
    let w = Tensor::from_vec(&[3, 2], (0..6).map(|i| i as f32).collect());
    let k = Tensor::scalar(1.0f32);
    let f = |(x, w, k): (Tensor, Tensor, Tensor)| &x.matmul(&w) + &k;
    let g = vmap(f, (0, AxisSpec::NONE, AxisSpec::NONE), 0);
    // Case 25 (c): rows of arange(12).reshape(4,3) @ arange(6).reshape(3,2) + 1.
    assert_eq!(
        g((xb.clone(), w.clone(), k.clone())).to_vec::<f32>(),
        vec![11., 14., 29., 41., 47., 68., 65., 95.]
    );
    let traced = trace(
        |(x, w): (Tensor, Tensor)| {
            vmap(|(x, w): (Tensor, Tensor)| x.matmul(&w), (0, AxisSpec::NONE), 0)((x, w))
        },
        &(xb, w),
    )
    .expect("traces");
    let names = prim_names(&traced.function);
    assert_eq!(names.iter().filter(|n| **n == "dot_general").count(), 1, "{}", traced.function);
    assert!(!names.contains(&"broadcast_in_dim"), "{}", traced.function);
}

#[test]
fn random_sampling_with_a_batch_of_keys_equals_per_key_sampling() {
    let keys: Vec<Tensor> = [0u32, 1, 42].iter().map(|&s| random::key(s)).collect();
    let batch = Tensor::stack(&keys, 0);
    let sample = |k: Tensor| random::normal(&k, &[5], DType::F32);
    let got = vmap(sample, 0, 0)(batch.clone());
    let want = Tensor::stack(&keys.iter().map(|k| sample(k.clone())).collect::<Vec<_>>(), 0);
    assert_eq!(got.to_vec::<f32>(), want.to_vec::<f32>());
    // Keys batched along the last axis, samples stacked along the last axis.
    let got_t = vmap(sample, -1, -1)(batch.t());
    assert_eq!(got_t.to_vec::<f32>(), want.t().to_vec::<f32>());
}

#[derive(Tree, Clone)]
struct Params {
    w: Tensor,
    b: Tensor,
}

#[test]
fn in_axes_for_a_user_struct_as_one_value_or_the_same_struct_of_axes() {
    let f = |(p, x): (Params, Tensor)| &(&p.w * &x).sum(All) + &p.b;
    let w = f32s(&[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let x = f32s(&[3], &[1.0, 0.0, -1.0]);
    // The same struct of axes: w mapped along axis 0, b shared.
    let spec = AxisSpec::tree(&Params { w: axis(0), b: unmapped() });
    let p = Params { w: w.clone(), b: Tensor::scalar(0.5f32) };
    // lane 0: 1 - 3 + 0.5 = -1.5; lane 1: 4 - 6 + 0.5 = -1.5 ... use a distinct x to tell lanes apart below.
    assert_eq!(
        vmap(f, (spec.clone(), AxisSpec::NONE), 0)((p.clone(), x.clone())).to_vec::<f32>(),
        vec![-1.5, -1.5]
    );
    let x2 = f32s(&[3], &[1.0, 1.0, 0.0]);
    // lane 0: 1 + 2 + 0.5 = 3.5; lane 1: 4 + 5 + 0.5 = 9.5.
    assert_eq!(vmap(f, (spec, AxisSpec::NONE), 0)((p, x2.clone())).to_vec::<f32>(), vec![3.5, 9.5]);
    // One value for every field: w along axis 1 (columns) and b along axis 1 too.
    let p2 = Params { w: w.t(), b: f32s(&[1, 2], &[10.0, 20.0]) };
    // w.t() is [3, 2]; column j is row j of w. lane 0: 3 + 10 = 13; lane 1: 9 + 20 = 29.
    assert_eq!(vmap(f, (1, AxisSpec::NONE), 0)((p2, x2)).to_vec::<f32>(), vec![13.0, 29.0]);
}

#[test]
fn nested_vmap_out_axes_and_axis_size() {
    // Outer product by vmap(vmap(mul)).
    let a = f32s(&[2], &[1.0, 2.0]);
    let b = f32s(&[3], &[1.0, 10.0, 100.0]);
    let inner = |(x, y): (Tensor, Tensor)| &x * &y;
    let outer = vmap(
        move |(x, y): (Tensor, Tensor)| vmap(inner, (AxisSpec::NONE, 0), 0)((x, y)),
        (0, AxisSpec::NONE),
        0,
    );
    assert_eq!(outer((a.clone(), b.clone())).to_vec::<f32>(), vec![1., 10., 100., 2., 20., 200.]);
    // out_axes 1: the transpose.
    let outer_t = vmap(
        move |(x, y): (Tensor, Tensor)| vmap(inner, (AxisSpec::NONE, 0), 0)((x, y)),
        (0, AxisSpec::NONE),
        1,
    );
    assert_eq!(outer_t((a.clone(), b)).to_vec::<f32>(), vec![1., 2., 10., 20., 100., 200.]);
    // No mapped argument: axis_size gives the batch; the unbatched result is broadcast.
    let c = kiln::vmap_sized(|x: Tensor| &x + 1.0, AxisSpec::NONE, 0, 3)(Tensor::scalar(1.0f32));
    assert_eq!(c.to_vec::<f32>(), vec![2.0, 2.0, 2.0]);
}

#[test]
fn mapped_axes_of_different_sizes_are_an_error_naming_each_argument() {
    // Case 25 (a): h(a, b) = sum(a) + sum(b), in_axes (0, 1), X f32[10,4], U f32[10,2].
    let h = |(a, b): (Tensor, Tensor)| &a.sum(All) + &b.sum(All);
    let (x, u) = (Tensor::ones(DType::F32, &[10, 4]), Tensor::ones(DType::F32, &[10, 2]));
    let err =
        trace(|(x, u): (Tensor, Tensor)| vmap(h, (0, 1), 0)((x, u)), &(x, u)).expect_err("sizes differ");
    let msg = err.to_string();
    for part in [
        "argument leaf 0",
        "f32[10,4]",
        "size 10 along axis 0",
        "argument leaf 1",
        "f32[10,2]",
        "size 2 along axis 1",
    ] {
        assert!(msg.contains(part), "{part:?} missing from: {msg}");
    }
    // Case 25 (b): rec(depth, scale, xt, xl) = xl * scale + depth with in_axes (None, None, 0, 0), depth an
    // int: sizes 7 and 2 are named, no crash.
    let rec = |(depth, scale, _xt, xl): (Tensor, Tensor, Tensor, Tensor)| {
        &(&xl * &scale) + &depth.astype(DType::F32)
    };
    let args = (
        Tensor::scalar(0i32),
        Tensor::scalar(1.0f32),
        Tensor::ones(DType::F32, &[7]),
        Tensor::ones(DType::F32, &[2]),
    );
    let err = trace(
        |a: (Tensor, Tensor, Tensor, Tensor)| vmap(rec, (AxisSpec::NONE, AxisSpec::NONE, 0, 0), 0)(a),
        &args,
    )
    .expect_err("sizes differ");
    let msg = err.to_string();
    assert!(msg.contains("size 7") && msg.contains("size 2"), "{msg}");
    // An axis out of range is an error too.
    let err = trace(|x: Tensor| vmap(|x: Tensor| x, 1, 0)(x), &Tensor::ones(DType::F32, &[3]))
        .expect_err("bad axis");
    assert!(err.to_string().contains("in_axes 1 is out of range"), "{err}");
}

/// Two-layer MLP loss of one example.
fn mlp_loss((w1, w2, x, y): (Tensor, Tensor, Tensor, Tensor)) -> Tensor {
    let h = x.matmul(&w1).tanh();
    let out = h.matmul(&w2);
    (&out - &y).square().sum(All)
}

#[test]
fn per_example_gradients_of_an_mlp_by_vmap_of_grad() {
    let w1 = Tensor::from_vec(&[3, 4], (0..12).map(|i| (i as f32 - 5.0) * 0.1).collect());
    let w2 = Tensor::from_vec(&[4, 2], (0..8).map(|i| (i as f32 - 3.0) * 0.2).collect());
    let xs = Tensor::from_vec(&[5, 3], (0..15).map(|i| (i as f32) * 0.3 - 2.0).collect());
    let ys = Tensor::from_vec(&[5, 2], (0..10).map(|i| (i as f32) * 0.1).collect());
    let per_ex = vmap(grad(mlp_loss), (AxisSpec::NONE, AxisSpec::NONE, 0, 0), (0, 0, 0, 0));
    let (g1, g2, _, _) = per_ex((w1.clone(), w2.clone(), xs.clone(), ys.clone()));
    for i in 0..5i64 {
        let (e1, e2, _, _) = grad(mlp_loss)((w1.clone(), w2.clone(), xs.index(i), ys.index(i)));
        let close = |a: &Tensor, b: &Tensor| {
            a.to_vec::<f32>()
                .iter()
                .zip(b.to_vec::<f32>())
                .all(|(p, q)| (p - q).abs() <= 1e-5 * q.abs().max(1.0))
        };
        assert!(close(&g1.index(i), &e1) && close(&g2.index(i), &e2), "example {i}");
    }
}

#[test]
fn grad_of_a_sum_of_vmapped_outputs() {
    // d/dx Σ_b sin(x_b) = cos(x_b).
    let f = |x: Tensor| vmap(|x: Tensor| x.sin(), 0, 0)(x).sum(All);
    let x = f32s(&[3], &[0.0, 1.0, 2.0]);
    let g = grad(f)(x.clone());
    let want = x.cos();
    assert_eq!(g.to_vec::<f32>(), want.to_vec::<f32>());
}
