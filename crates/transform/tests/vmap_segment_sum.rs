//! `vmap` of `segment_sum` with the segment ids shared (an ensemble over one contact network): the
//! batched values equal the reference interpreter looped over the batch (and hand-computed sums),
//! and the batch dimension stays where the data has it — leading data gives a leading result, so a
//! gather → segment_sum → elementwise chain batched at 0 contains no `transpose` at all (the layout
//! flip to `[segments, K]` made every downstream kernel strided and unvectorized).

use kiln_ir::{Array, DType, Function, Prim, TensorType, eval};
use kiln_trace::{Tensor, lax};
use kiln_transform::batching::{Batched, batch_function, batch_replay};
use kiln_transform::trace_function;

fn ty(dtype: DType, dims: &[usize]) -> TensorType {
    TensorType::new(dtype, dims)
}

fn f32s(a: &Array) -> Vec<f32> {
    a.to_vec::<f32>().expect("f32 array")
}

/// Row `k` of a lead-batched f32 array of rows of `len`.
fn row(a: &[f32], k: usize, len: usize) -> Array {
    Array::from_vec(&[len], a[k * len..(k + 1) * len].to_vec())
}

fn prims(f: &Function) -> Vec<&'static str> {
    f.eqns.iter().map(|e| e.prim.name()).collect()
}

#[test]
fn segment_sum_of_lead_batched_data_stays_lead_batched_with_hand_sums() {
    // ids -1 and 3 are out of range for 3 segments: dropped, as segment_sum drops them.
    let f = trace_function(&[ty(DType::F32, &[5]), ty(DType::I32, &[5])], |xs| {
        vec![lax::segment_sum(&xs[0], &xs[1], 3)]
    });
    let (b, out_batched) = batch_function(&f, &[true, false], 2, &[]);
    assert_eq!(out_batched, vec![true]);
    assert_eq!(
        b.outputs.iter().map(|&v| b.var_type(v).clone()).collect::<Vec<_>>(),
        vec![ty(DType::F32, &[2, 3])]
    );
    assert!(!prims(&b).contains(&"transpose"), "batched IR moves the batch: {:?}", prims(&b));
    // One scatter_add of the lanes' rows into axis 1, the ids shared (JAX's batching; the CPU
    // backend runs it as a kernel over the lanes).
    assert!(!prims(&b).contains(&"segment_sum"), "{:?}", prims(&b));
    let sc = b.eqns.iter().find(|e| matches!(e.prim, Prim::Scatter { .. })).expect("one scatter_add");
    let mode = kiln_ir::IndexMode::FillOrDrop;
    assert_eq!(sc.prim, Prim::Scatter { op: kiln_ir::ScatterOp::Add, axis: 1, batch_dims: 0, mode });
    assert_eq!(b.var_type(sc.inputs[1]).clone(), ty(DType::I32, &[5]));

    let data: Vec<f32> = vec![1.0, 2.0, 3.0, 4.0, 5.0, 10.0, 20.0, 30.0, 40.0, 50.0];
    let ids = Array::from_vec(&[5], vec![0i32, 2, 2, -1, 3]);
    let got = eval(&b, &[Array::from_vec(&[2, 5], data.clone()), ids.clone()]).expect("evaluates");
    assert_eq!(f32s(&got[0]), vec![1.0, 0.0, 5.0, 10.0, 0.0, 50.0]);
    // The unbatched program on each lane gives the same rows.
    for k in 0..2 {
        let lane = eval(&f, &[row(&data, k, 5), ids.clone()]).expect("evaluates");
        assert_eq!(f32s(&lane[0]), f32s(&got[0])[k * 3..(k + 1) * 3]);
    }
}

#[test]
fn segment_sum_with_the_batch_behind_the_segments_stays_one_segment_sum() {
    let f = trace_function(&[ty(DType::F32, &[4, 2]), ty(DType::I32, &[4])], |xs| {
        vec![lax::segment_sum(&xs[0], &xs[1], 2)]
    });
    // data f32[4, 2] batched at 1 with 3 lanes: f32[4, 3, 2]; the result keeps the batch at 1.
    let b = trace_function(&[ty(DType::F32, &[4, 3, 2]), ty(DType::I32, &[4])], |xs| {
        let args = [Batched::new(xs[0].clone(), 1), Batched::unbatched(xs[1].clone())];
        let out = batch_replay(&f, &args, 3);
        assert_eq!(out[0].bdim, Some(1));
        vec![out[0].value.clone()]
    });
    assert_eq!(prims(&b), vec!["segment_sum"]);
    let data: Vec<f32> = (0..24).map(|i| i as f32).collect();
    let ids = Array::from_vec(&[4], vec![1i32, 0, 1, 1]);
    let got = f32s(&eval(&b, &[Array::from_vec(&[4, 3, 2], data.clone()), ids.clone()]).expect("runs")[0]);
    // Lane k is data[:, k, :]; segment 0 gets row 1, segment 1 rows 0, 2, 3.
    for k in 0..3 {
        let lane: Vec<f32> = (0..4).flat_map(|e| [data[e * 6 + k * 2], data[e * 6 + k * 2 + 1]]).collect();
        let want = f32s(&eval(&f, &[Array::from_vec(&[4, 2], lane.clone()), ids.clone()]).expect("runs")[0]);
        let hand = vec![lane[2], lane[3], lane[0] + lane[4] + lane[6], lane[1] + lane[5] + lane[7]];
        assert_eq!(want, hand);
        let got_k: Vec<f32> = (0..2).flat_map(|s| [got[s * 6 + k * 2], got[s * 6 + k * 2 + 1]]).collect();
        assert_eq!(got_k, want, "lane {k}");
    }
}

/// One epidemic-day-like step: gather a per-agent value at the edges' sources, sum it into the
/// destinations, `1 − exp(−λ)`, and combine with a per-agent noise (`log u`).
fn day(n: usize, e: usize) -> Function {
    let types = [ty(DType::F32, &[n]), ty(DType::I32, &[e]), ty(DType::I32, &[e]), ty(DType::F32, &[n])];
    trace_function(&types, |xs| {
        let (factor, src, dst, u) = (&xs[0], &xs[1], &xs[2], &xs[3]);
        let pressure = lax::segment_sum(&lax::gather(factor, src, 0, 0, kiln_ir::IndexMode::Clip), dst, n);
        let p = &Tensor::scalar(1.0f32) - &(-&pressure).exp();
        vec![&p + &u.log()]
    })
}

#[test]
fn a_batched_gather_segment_sum_chain_has_no_transpose_and_matches_the_loop() {
    let (n, e, k) = (4, 6, 3);
    let f = day(n, e);
    let (b, out_batched) = batch_function(&f, &[true, false, false, true], k, &[]);
    assert_eq!(out_batched, vec![true]);
    assert!(!prims(&b).contains(&"transpose"), "batched IR moves the batch: {:?}", prims(&b));
    for eq in &b.eqns {
        for &v in &eq.outputs {
            let dims = b.var_type(v).shape.dims().to_vec();
            assert!(dims.len() < 2 || dims[0] == k, "{} gives {dims:?}: batch not leading", eq.prim.name());
        }
    }
    let factor: Vec<f32> = (0..k * n).map(|i| 0.05 * i as f32).collect();
    let u: Vec<f32> = (0..k * n).map(|i| 0.1 + 0.07 * i as f32).collect();
    let src = Array::from_vec(&[e], vec![1i32, 2, 0, 3, 3, 1]);
    let dst = Array::from_vec(&[e], vec![0i32, 0, 1, 2, 3, 3]);
    let args = [
        Array::from_vec(&[k, n], factor.clone()),
        src.clone(),
        dst.clone(),
        Array::from_vec(&[k, n], u.clone()),
    ];
    let got = f32s(&eval(&b, &args).expect("runs")[0]);
    for lane in 0..k {
        let want = f32s(
            &eval(&f, &[row(&factor, lane, n), src.clone(), dst.clone(), row(&u, lane, n)]).expect("runs")[0],
        );
        assert_eq!(&got[lane * n..(lane + 1) * n], &want[..], "lane {lane}");
        // Hand check of agent 0: λ = factor[1] + factor[2].
        let lam = factor[lane * n + 1] + factor[lane * n + 2];
        let hand = 1.0 - (-lam).exp() + u[lane * n].ln();
        assert!((want[0] - hand).abs() < 1e-6, "lane {lane}: {} vs {hand}", want[0]);
    }
}

#[test]
fn segment_sum_with_per_lane_ids_equals_each_lane_bitwise() {
    // Both data and ids batched, i32 and u32 ids; ids past the segments (3, 7, u32 huge) are dropped
    // in their own lane, never landing in the next lane's segments.
    for dt in [DType::I32, DType::U32] {
        let f = trace_function(&[ty(DType::F32, &[4, 2]), ty(dt, &[4])], |xs| {
            vec![lax::segment_sum(&xs[0], &xs[1], 3)]
        });
        let (b, _) = batch_function(&f, &[true, true], 3, &[]);
        assert!(prims(&b).contains(&"scatter_add") && !prims(&b).contains(&"segment_sum"), "{:?}", prims(&b));
        let data: Vec<f32> = (0..24).map(|i| i as f32 * 1.5 - 7.0).collect();
        let raw: Vec<i64> = vec![0, 2, 3, 2, 1, 1, 7, 0, 2, 0, 0, -1];
        let ids = match dt {
            DType::I32 => Array::from_vec(&[3, 4], raw.iter().map(|&x| x as i32).collect::<Vec<_>>()),
            _ => Array::from_vec(&[3, 4], raw.iter().map(|&x| x as u32).collect::<Vec<_>>()),
        };
        let got = eval(&b, &[Array::from_vec(&[3, 4, 2], data.clone()), ids.clone()]).expect("evaluates");
        for k in 0..3 {
            let lane_ids = match dt {
                DType::I32 => {
                    Array::from_vec(&[4], ids.to_vec::<i32>().unwrap()[k * 4..(k + 1) * 4].to_vec())
                }
                _ => Array::from_vec(&[4], ids.to_vec::<u32>().unwrap()[k * 4..(k + 1) * 4].to_vec()),
            };
            let lane_data = Array::from_vec(&[4, 2], data[k * 8..(k + 1) * 8].to_vec());
            let lane = eval(&f, &[lane_data, lane_ids]).expect("evaluates");
            let want: Vec<u32> = f32s(&lane[0]).iter().map(|x| x.to_bits()).collect();
            let have: Vec<u32> = f32s(&got[0])[k * 6..(k + 1) * 6].iter().map(|x| x.to_bits()).collect();
            assert_eq!(have, want, "{dt:?} lane {k}");
        }
    }
}
