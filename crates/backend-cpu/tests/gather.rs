//! The edge-gather kernel (a rank-1 `gather` root, unrolled, with rank-0 leaves read once before
//! the loop), `segment_sum` over runs of equal ids, and row-wise `scatter_add` kernels (a vmapped
//! message sum): exact values by hand, and bitwise against the interpreter, for out-of-range
//! indices (−N−1, −1, N, huge), lengths that leave a loop tail, and row ranges split over threads.

use kiln_backend_cpu::compile;
use kiln_ir::*;

fn push(f: &mut Function, p: Prim, ins: &[Var]) -> Var {
    f.push(p, ins, None).unwrap()[0]
}

/// `gather(table, select(i < zero, i + size, i))` over `e` indices: jnp's negative-index wrap with
/// its rank-0 operands as parameters, the shape the epidemic model traces.
fn wrapped_gather(n: usize, e: usize, mode: IndexMode) -> Function {
    let mut f = Function::new();
    let table = f.add_param(TensorType::new(DType::F32, Shape::new(&[n])));
    let idx = f.add_param(TensorType::new(DType::I32, Shape::new(&[e])));
    let zero = f.add_param(TensorType::scalar(DType::I32));
    let size = f.add_param(TensorType::scalar(DType::I32));
    let bc = || Prim::BroadcastInDim { shape: Shape::new(&[e]), broadcast_dimensions: vec![] };
    let z = push(&mut f, bc(), &[zero]);
    let neg = push(&mut f, Prim::Compare(CompareOp::Lt), &[idx, z]);
    let nb = push(&mut f, bc(), &[size]);
    let up = push(&mut f, Prim::Binary(BinaryOp::Add), &[idx, nb]);
    let w = push(&mut f, Prim::Select, &[neg, up, idx]);
    let g = push(&mut f, Prim::Gather { axis: 0, batch_dims: 0, mode }, &[table, w]);
    f.outputs.push(g);
    f
}

fn bits(a: &Array) -> Vec<u32> {
    a.to_vec::<f32>().expect("f32").iter().map(|x| x.to_bits()).collect()
}

/// Out-of-range indices after the wrap: −N−1 wraps to −1, −1 to N−1, N and i32::MAX stay too large,
/// i32::MIN wraps to a large negative. `Clip` clamps into [0, N−1]; `FillOrDrop` reads NaN.
/// 11 indices: two unrolled groups of 4 and a tail of 3.
#[test]
fn out_of_range_indices_clamp_or_fill() {
    let n = 5usize;
    let table: Vec<f32> = (0..n).map(|i| 10.0 + i as f32).collect();
    let idx: Vec<i32> = vec![0, -6, -1, 5, i32::MAX, i32::MIN, 4, -5, 2, 6, -7];
    // After the wrap: 0, -1, 4, 5, MAX, MIN+5, 4, 0, 2, 6, -2.
    let clip = [10.0, 10.0, 14.0, 14.0, 14.0, 10.0, 14.0, 10.0, 12.0, 14.0, 10.0];
    let fill_ok = [true, false, true, false, false, false, true, true, true, false, false];
    for mode in [IndexMode::Clip, IndexMode::FillOrDrop] {
        let f = wrapped_gather(n, idx.len(), mode);
        let args = [
            Array::from_vec(&[n], table.clone()),
            Array::from_vec(&[idx.len()], idx.clone()),
            Array::scalar(0i32),
            Array::scalar(n as i32),
        ];
        let got = compile(&f).expect("compile").run(&args).expect("run").remove(0);
        let want = eval(&f, &args).expect("interpreter").remove(0);
        assert_eq!(bits(&got), bits(&want), "{mode:?}: JIT vs interpreter");
        let got = got.to_vec::<f32>().unwrap();
        for (k, &g) in got.iter().enumerate() {
            match mode {
                IndexMode::Clip => assert_eq!(g, clip[k], "clip, index {}", idx[k]),
                IndexMode::FillOrDrop if fill_ok[k] => assert_eq!(g, clip[k], "fill, index {}", idx[k]),
                IndexMode::FillOrDrop => assert!(g.is_nan(), "fill, index {}: {g}", idx[k]),
            }
        }
    }
}

/// A wrapped gather whose `0` and wrap size are constants of the function (the shape the epidemic
/// day has once its literals are sunk into the scan body): the kernel tests the raw index with one
/// unsigned compare and uses it as it is when in range, computing the wrap and the clamp only
/// otherwise. Wrap sizes equal to the table's and larger (where `-1` wraps past the end), and a
/// compare against 2 instead of 0 (not the wrap: 0 and 1 move, so no shortcut); the edge kernel
/// (rank-1 table), the scalar nest (`[5, 2]` rows) and a `segment_sum` consumer; bitwise the
/// interpreter, and by hand for `Clip`.
#[test]
fn wrapped_gathers_with_constant_bounds_match_the_interpreter_and_hand_values() {
    let n = 5usize;
    let idx: Vec<i32> = vec![0, -6, -1, 5, i32::MAX, i32::MIN, 4, -5, 2, 6, -7, 3, -2];
    let ids: Vec<i32> = vec![0, 0, 1, 1, 1, 2, 2, 3, 3, 4, 4, 4, 4];
    let table1: Vec<f32> = (0..n).map(|i| 10.0 + i as f32).collect();
    let table2: Vec<f32> = (0..2 * n).map(|i| 0.5 + i as f32).collect();
    for (below, wrap) in [(0, n as i32), (0, n as i32 + 2), (2, n as i32)] {
        for mode in [IndexMode::Clip, IndexMode::FillOrDrop] {
            let mut f = Function::new();
            let t1 = f.add_param(TensorType::new(DType::F32, Shape::new(&[n])));
            let t2 = f.add_param(TensorType::new(DType::F32, Shape::new(&[n, 2])));
            let i = f.add_param(TensorType::new(DType::I32, Shape::new(&[idx.len()])));
            let zero = f.add_const(Array::scalar(below));
            let size = f.add_const(Array::scalar(wrap));
            let seg = f.add_const(Array::from_vec(&[ids.len()], ids.clone()));
            let bc =
                || Prim::BroadcastInDim { shape: Shape::new(&[idx.len()]), broadcast_dimensions: vec![] };
            let z = push(&mut f, bc(), &[zero]);
            let neg = push(&mut f, Prim::Compare(CompareOp::Lt), &[i, z]);
            let nb = push(&mut f, bc(), &[size]);
            let up = push(&mut f, Prim::Binary(BinaryOp::Add), &[i, nb]);
            let w = push(&mut f, Prim::Select, &[neg, up, i]);
            let g1 = push(&mut f, Prim::Gather { axis: 0, batch_dims: 0, mode }, &[t1, w]);
            let g2 = push(&mut f, Prim::Gather { axis: 0, batch_dims: 0, mode }, &[t2, w]);
            let g3 = push(&mut f, Prim::Gather { axis: 0, batch_dims: 0, mode }, &[t1, w]);
            let s = push(&mut f, Prim::SegmentSum { num_segments: n }, &[g3, seg]);
            f.outputs = vec![g1, g2, s];
            let args = [
                Array::from_vec(&[n], table1.clone()),
                Array::from_vec(&[n, 2], table2.clone()),
                Array::from_vec(&[idx.len()], idx.clone()),
            ];
            let got = compile(&f).expect("compile").run(&args).expect("run");
            let want = eval(&f, &args).expect("interpreter");
            for (k, (g, w)) in got.iter().zip(&want).enumerate() {
                assert_eq!(
                    bits(g),
                    bits(w),
                    "output {k}, below {below}, wrap {wrap}, {mode:?}: JIT vs interpreter"
                );
            }
            assert!(kernel_texts(&f).contains(" ult "), "the in-range test");
            if mode == IndexMode::Clip {
                // The wrap (i32 arithmetic, wrapping), then the clamp into 0..n.
                let at = |i: i32| {
                    (if i < below { i.wrapping_add(wrap) } else { i }).clamp(0, n as i32 - 1) as usize
                };
                let edge: Vec<f32> = idx.iter().map(|&i| table1[at(i)]).collect();
                assert_eq!(got[0].to_vec::<f32>().unwrap(), edge, "below {below}, wrap {wrap}");
                let rows: Vec<f32> =
                    idx.iter().flat_map(|&i| [table2[2 * at(i)], table2[2 * at(i) + 1]]).collect();
                assert_eq!(got[1].to_vec::<f32>().unwrap(), rows, "below {below}, wrap {wrap}");
                let mut sums = vec![0.0f32; n];
                for (&i, &s) in idx.iter().zip(&ids) {
                    sums[s as usize] += table1[at(i)];
                }
                assert_eq!(got[2].to_vec::<f32>().unwrap(), sums, "below {below}, wrap {wrap}");
            }
        }
    }
}

/// The rank-0 leaves are real inputs, read at run time (not baked in at compile time): the same
/// executable with a different wrap size gives the other answer.
#[test]
fn rank0_leaves_are_read_per_call() {
    let (n, idx) = (4usize, vec![-1i32, 1, -2, 3, 0]);
    let f = wrapped_gather(n, idx.len(), IndexMode::Clip);
    let exe = compile(&f).expect("compile");
    let table = Array::from_vec(&[n], vec![1.0f32, 2.0, 3.0, 4.0]);
    let run = |zero: i32, size: i32| {
        let args = [
            table.clone(),
            Array::from_vec(&[idx.len()], idx.clone()),
            Array::scalar(zero),
            Array::scalar(size),
        ];
        exe.run(&args).unwrap().remove(0).to_vec::<f32>().unwrap()
    };
    // size 4: -1 → 3, -2 → 2.
    assert_eq!(run(0, 4), vec![4.0, 2.0, 3.0, 4.0, 1.0]);
    // size 2: -1 → 1, -2 → 0.
    assert_eq!(run(0, 2), vec![2.0, 2.0, 1.0, 4.0, 1.0]);
    // zero = 2: indices below 2 get + 4: -1 → 3, 1 → 5 (clamped to 3), 0 → 4 (clamped to 3).
    assert_eq!(run(2, 4), vec![4.0, 4.0, 3.0, 4.0, 4.0]);
}

/// A message gather big enough to run on several threads (row ranges whose ends are not multiples
/// of the unroll), with ~1 % out-of-range indices: bitwise the interpreter's, and every in-range
/// value equal to the table entry by hand.
#[test]
fn large_edge_gather_matches_interpreter() {
    let (n, e) = (100_003usize, 700_021usize);
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let table: Vec<f32> = (0..n).map(|i| i as f32 * 0.25 - 7.0).collect();
    let idx: Vec<i32> = (0..e)
        .map(|_| {
            let r = next();
            match r % 100 {
                0 => -(n as i32) - 1 - (r >> 40) as i32 % 1000,
                1 => n as i32 + (r >> 40) as i32 % 1000,
                _ => (r >> 20) as i32 % (2 * n as i32) - n as i32,
            }
        })
        .collect();
    for mode in [IndexMode::Clip, IndexMode::FillOrDrop] {
        let f = wrapped_gather(n, e, mode);
        let args = [
            Array::from_vec(&[n], table.clone()),
            Array::from_vec(&[e], idx.clone()),
            Array::scalar(0i32),
            Array::scalar(n as i32),
        ];
        let got = compile(&f).expect("compile").run(&args).expect("run").remove(0);
        let want = eval(&f, &args).expect("interpreter").remove(0);
        assert_eq!(bits(&got), bits(&want), "{mode:?}");
        let got = got.to_vec::<f32>().unwrap();
        for (k, &i) in idx.iter().enumerate() {
            let w = if i < 0 { i + n as i32 } else { i };
            if (0..n as i32).contains(&w) {
                assert_eq!(got[k], table[w as usize], "{mode:?}, edge {k}, index {i}");
            }
        }
    }
}

fn segment_sum_fn(dt: DType, e: usize, segments: usize) -> Function {
    let mut f = Function::new();
    let data = f.add_param(TensorType::new(dt, Shape::new(&[e])));
    let ids = f.add_param(TensorType::new(DType::I32, Shape::new(&[e])));
    let s = push(&mut f, Prim::SegmentSum { num_segments: segments }, &[data, ids]);
    f.outputs.push(s);
    f
}

/// Runs of equal ids: sorted runs, a segment revisited after others, dropped
/// ids (−1, 4, huge) inside and between runs; sums by hand (exact in binary) and bitwise the
/// interpreter's, f32 and f64.
#[test]
fn segment_sum_runs_by_hand() {
    let ids = vec![0i32, 0, 0, 2, 2, -1, 2, 1, 4, 0, 3, i32::MAX, 3];
    let data = [1.0, 2.0, 4.0, 0.5, 0.25, 100.0, 8.0, -3.0, 100.0, 16.0, -0.0, 100.0, -0.0];
    // Segment 0: 1 + 2 + 4, then 16 after other segments; 3: -0 + -0 (0 + -0 + -0 = +0).
    let want = [23.0, -3.0, 8.75, 0.0];
    for dt in [DType::F32, DType::F64] {
        let f = segment_sum_fn(dt, ids.len(), 4);
        let d = match dt {
            DType::F32 => Array::from_vec(&[ids.len()], data.iter().map(|&x| x as f32).collect::<Vec<_>>()),
            _ => Array::from_vec(&[ids.len()], data.to_vec()),
        };
        let args = [d, Array::from_vec(&[ids.len()], ids.clone())];
        let got = compile(&f).expect("compile").run(&args).expect("run").remove(0).to_f64_vec();
        let interp = eval(&f, &args).expect("interpreter").remove(0).to_f64_vec();
        assert_eq!(got, want, "{dt:?}");
        let b = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(b(&got), b(&interp), "{dt:?} vs interpreter");
        assert_eq!(b(&got), b(&want), "{dt:?}: signs of zeros");
    }
}

/// A destination-sorted edge list of 500k edges over 70k segments (split over threads) and the
/// same edges shuffled: both bitwise the interpreter's sequential sums.
#[test]
fn segment_sum_large_sorted_and_unsorted() {
    let (e, segments) = (500_009usize, 70_001usize);
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let data: Vec<f32> = (0..e).map(|_| (next() >> 40) as f32 / (1u64 << 24) as f32 - 0.5).collect();
    let mut ids: Vec<i32> = (0..e).map(|_| (next() % segments as u64) as i32).collect();
    ids.sort_unstable();
    let f = segment_sum_fn(DType::F32, e, segments);
    let exe = compile(&f).expect("compile");
    for order in ["sorted", "sorted with dropped rows", "shuffled"] {
        if order == "sorted with dropped rows" {
            // Masked rows marked -1 (as a sorted scatter's out-of-range destinations are), one
            // past the segments, some at the middle, where two threads would cut.
            let mut masked = ids.clone();
            for k in (3..e).step_by(7) {
                masked[k] = -1;
            }
            masked[e / 2 - 1..e / 2 + 2].copy_from_slice(&[-1, -1, segments as i32]);
            let args = [Array::from_vec(&[e], data.clone()), Array::from_vec(&[e], masked)];
            let got = exe.run(&args).expect("run").remove(0);
            let want = eval(&f, &args).expect("interpreter").remove(0);
            assert_eq!(bits(&got), bits(&want), "{order}");
            continue;
        }
        if order == "shuffled" {
            for k in (1..e).rev() {
                ids.swap(k, (next() % (k as u64 + 1)) as usize);
            }
        }
        let args = [Array::from_vec(&[e], data.clone()), Array::from_vec(&[e], ids.clone())];
        let got = exe.run(&args).expect("run").remove(0);
        let want = eval(&f, &args).expect("interpreter").remove(0);
        assert_eq!(bits(&got), bits(&want), "{order}");
    }
}

/// `scatter_add(operand [B, M, ..], ids, updates [B, S, ..])` into axis 1 with `2 * u` as the
/// updates (computed in the kernel): `ids [B, S]` with one batch dimension (what `vmap` makes of
/// `segment_sum`), or with `shared` `ids [S]` for every row (the transpose of a vmapped `take`).
struct ScatterCase {
    dt: DType,
    idt: DType,
    mode: IndexMode,
    shared: bool,
    inner: Vec<usize>,
}

impl ScatterCase {
    fn id_dims(&self, b: usize, s: usize) -> Vec<usize> {
        if self.shared { vec![s] } else { vec![b, s] }
    }

    fn function(&self, b: usize, m: usize, s: usize) -> Function {
        let mut f = Function::new();
        let od: Vec<usize> = [b, m].iter().chain(&self.inner).copied().collect();
        let ud: Vec<usize> = [b, s].iter().chain(&self.inner).copied().collect();
        let x = f.add_param(TensorType::new(self.dt, Shape::new(&od)));
        let ids = f.add_param(TensorType::new(self.idt, Shape::new(&self.id_dims(b, s))));
        let u = f.add_param(TensorType::new(self.dt, Shape::new(&ud)));
        let twice = push(&mut f, Prim::Binary(BinaryOp::Add), &[u, u]);
        let batch_dims = usize::from(!self.shared);
        let sc = Prim::Scatter { op: ScatterOp::Add, axis: 1, batch_dims, mode: self.mode };
        let out = push(&mut f, sc, &[x, ids, twice]);
        f.outputs.push(out);
        f
    }
}

fn plan_of(f: &Function, threads: usize) -> String {
    let dir = std::env::temp_dir().join(format!("kiln-scatter-plan-{}-{threads}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let opts = kiln_backend_cpu::CompileOptions {
        dump_dir: Some(dir.clone()),
        threads: Some(threads),
        min_task_work: Some(0),
        ..Default::default()
    };
    kiln_backend_cpu::compile_with(f, &opts).unwrap();
    let folder = std::fs::read_dir(&dir).unwrap().next().unwrap().unwrap().path();
    let text = std::fs::read_to_string(folder.join("plan.txt")).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    text
}

#[test]
fn row_wise_scatter_adds_are_row_kernels_bitwise_equal_to_the_interpreter() {
    // Per row: duplicates accumulate in update order, out-of-range ids (negative, M, huge) are
    // clamped (Clip) or dropped (FillOrDrop), the operand is kept where nothing lands; scalar and
    // [2]-vector rows, i32 and u32 ids per row and i32 ids shared by all rows, f32 and f64, on 1
    // and 3 threads (rows split).
    let (b, m, s) = (7, 5, 13);
    let odd = [0i64, 4, -1, 5, 2, 2, 1000, -6, 3, i32::MAX as i64, 4, 0, 1];
    for dt in [DType::F32, DType::F64] {
        for mode in [IndexMode::Clip, IndexMode::FillOrDrop] {
            for inner in [vec![], vec![2]] {
                for (idt, shared) in [(DType::I32, false), (DType::U32, false), (DType::I32, true)] {
                    let case = ScatterCase { dt, idt, mode, shared, inner: inner.clone() };
                    let f = case.function(b, m, s);
                    let plan = plan_of(&f, 3);
                    let kernel = plan.contains("root     #1 scatter_add") && plan.contains("0 runtime steps");
                    assert!(kernel, "{plan}");
                    let row: usize = inner.iter().product();
                    let vals = |n: usize, seed: usize| -> Vec<f64> {
                        (0..n)
                            .map(|i| (((i * 7 + seed) % 11) as f64 - 5.0) * 0.375 + 1e-3 * i as f64)
                            .collect()
                    };
                    let arr = |dims: &[usize], v: Vec<f64>| match dt {
                        DType::F32 => Array::from_vec(dims, v.iter().map(|&x| x as f32).collect::<Vec<_>>()),
                        _ => Array::from_vec(dims, v),
                    };
                    let od: Vec<usize> = [b, m].iter().chain(&inner).copied().collect();
                    let ud: Vec<usize> = [b, s].iter().chain(&inner).copied().collect();
                    let id_dims = case.id_dims(b, s);
                    let n_ids: usize = id_dims.iter().product();
                    let raw: Vec<i64> = (0..n_ids).map(|k| odd[(k + k / s) % odd.len()]).collect();
                    let ids = match idt {
                        DType::I32 => {
                            Array::from_vec(&id_dims, raw.iter().map(|&i| i as i32).collect::<Vec<_>>())
                        }
                        _ => Array::from_vec(&id_dims, raw.iter().map(|&i| i as u32).collect::<Vec<_>>()),
                    };
                    let args = [arr(&od, vals(b * m * row, 1)), ids, arr(&ud, vals(b * s * row, 2))];
                    let want = eval(&f, &args).unwrap();
                    for threads in [1, 3] {
                        let opts = kiln_backend_cpu::CompileOptions {
                            threads: Some(threads),
                            min_task_work: Some(0),
                            ..Default::default()
                        };
                        let got = kiln_backend_cpu::compile_with(&f, &opts).unwrap().run(&args).unwrap();
                        let what =
                            format!("{dt:?} {mode:?} {inner:?} {idt:?} shared {shared}, {threads} threads");
                        assert!(got[0].bitwise_eq(&want[0]), "{what}");
                    }
                }
            }
        }
    }
}

#[test]
fn row_wise_scatter_add_by_hand() {
    // Two rows, M = 3, updates 2u: row 0 adds 1, 2, 4 at ids 2, 2, 0; row 1 adds 8 at id 5
    // (dropped), 16 at id 1 and 64 at id -1 (dropped), onto an operand of 100s. With the ids
    // shared (2, 2, 0 for both rows), row 1 adds 8 and 16 at id 2 and 64 at id 0.
    let case = |shared| ScatterCase {
        dt: DType::F32,
        idt: DType::I32,
        mode: IndexMode::FillOrDrop,
        shared,
        inner: vec![],
    };
    let x = Array::from_vec(&[2, 3], vec![100.0f32; 6]);
    let u = Array::from_vec(&[2, 3], vec![0.5f32, 1.0, 2.0, 4.0, 8.0, 32.0]);
    let own = Array::from_vec(&[2, 3], vec![2, 2, 0, 5, 1, -1]);
    let got = compile(&case(false).function(2, 3, 3)).unwrap().run(&[x.clone(), own, u.clone()]).unwrap();
    assert_eq!(got[0].to_vec::<f32>().unwrap(), vec![104.0, 100.0, 103.0, 100.0, 116.0, 100.0]);
    let shared = Array::from_vec(&[3], vec![2, 2, 0]);
    let got = compile(&case(true).function(2, 3, 3)).unwrap().run(&[x, shared, u]).unwrap();
    assert_eq!(got[0].to_vec::<f32>().unwrap(), vec![104.0, 100.0, 103.0, 164.0, 100.0, 124.0]);
}

#[test]
fn shared_scatter_indices_computed_in_the_step_are_computed_once() {
    // Indices shared by every row are read once per row: a costly producer (`i % 6`, a division)
    // would be evaluated 7 times per index inline, so it is a kernel of its own.
    let mut f = Function::new();
    let x = f.add_param(TensorType::new(DType::F32, Shape::new(&[7, 5])));
    let i = f.add_param(TensorType::new(DType::I32, Shape::new(&[13])));
    let u = f.add_param(TensorType::new(DType::F32, Shape::new(&[7, 13])));
    let six = f.add_const(Array::scalar(6i32));
    let bc = Prim::BroadcastInDim { shape: Shape::new(&[13]), broadcast_dimensions: vec![] };
    let sixes = push(&mut f, bc, &[six]);
    let ids = push(&mut f, Prim::Binary(BinaryOp::Rem), &[i, sixes]);
    let sc = Prim::Scatter { op: ScatterOp::Add, axis: 1, batch_dims: 0, mode: IndexMode::FillOrDrop };
    let out = push(&mut f, sc, &[x, ids, u]);
    f.outputs.push(out);
    let plan = plan_of(&f, 1);
    assert!(plan.contains("root     #1 rem"), "{plan}");
    let args = [
        Array::from_vec(&[7, 5], (0..35).map(|k| k as f32).collect::<Vec<_>>()),
        Array::from_vec(&[13], (0..13).map(|k| k * 5 - 9).collect::<Vec<_>>()),
        Array::from_vec(&[7, 13], (0..91).map(|k| 0.5 * k as f32).collect::<Vec<_>>()),
    ];
    let got = compile(&f).unwrap().run(&args).unwrap();
    assert!(got[0].bitwise_eq(&eval(&f, &args).unwrap()[0]));
}

#[test]
fn row_wise_scatter_adds_with_no_updates_or_no_rows_match_the_interpreter() {
    // No updates per row (S = 0): the kernel copies the operand. No rows (B = 0) or no segments
    // (M = 0): not a kernel, the runtime routine; all equal to the interpreter, none panics.
    for (b, m, s) in [(4, 3, 0), (0, 3, 5), (4, 0, 5), (0, 0, 0)] {
        for shared in [false, true] {
            let case = ScatterCase {
                dt: DType::F32,
                idt: DType::I32,
                mode: IndexMode::FillOrDrop,
                shared,
                inner: vec![2],
            };
            let f = case.function(b, m, s);
            let ids: Vec<i32> =
                (0..case.id_dims(b, s).iter().product::<usize>()).map(|k| k as i32 % 4 - 1).collect();
            let args = [
                Array::from_vec(&[b, m, 2], (0..b * m * 2).map(|k| k as f32).collect::<Vec<_>>()),
                Array::from_vec(&case.id_dims(b, s), ids),
                Array::from_vec(&[b, s, 2], (0..b * s * 2).map(|k| 0.25 * k as f32).collect::<Vec<_>>()),
            ];
            let got = compile(&f).unwrap().run(&args).unwrap();
            assert!(got[0].bitwise_eq(&eval(&f, &args).unwrap()[0]), "B {b} M {m} S {s} shared {shared}");
        }
    }
}

/// Every kernel's Cranelift IR (the dump's `kernel*.clif`, machine code after it) of `f` compiled
/// on one thread.
fn kernel_texts(f: &Function) -> String {
    // One folder per call: tests run at once in one process.
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("kiln-const-index-{}-{call}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let opts = kiln_backend_cpu::CompileOptions {
        dump_dir: Some(dir.clone()),
        threads: Some(1),
        ..Default::default()
    };
    kiln_backend_cpu::compile_with(f, &opts).unwrap();
    let folder = std::fs::read_dir(&dir).unwrap().next().unwrap().unwrap().path();
    let mut text = String::new();
    for entry in std::fs::read_dir(&folder).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "clif") {
            let clif = std::fs::read_to_string(&path).unwrap();
            text.push_str(clif.split("; machine code").next().unwrap());
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    text
}

/// Gathers from a `[5, 2]` table (rows of 2: the scalar nest) and a `[5]` one (the unrolled edge
/// kernel) with a constant index array, and two sibling segment sums (one serial kernel) over
/// constant ids: constants all in range compile without index clamps or range checks, constants
/// with one id out of range (−1, or 5) keep them; both bitwise the interpreter, and by hand.
#[test]
fn constant_indices_in_range_need_no_clamps_and_out_of_range_ones_keep_them() {
    let table2: Vec<f32> = (0..10).map(|i| i as f32 + 0.5).collect();
    let table1: Vec<f32> = (0..5).map(|i| 10.0 + i as f32).collect();
    let in_range = vec![4i32, 0, 2, 2, 1, 3, 0];
    for (ids, clamps) in
        [(in_range.clone(), false), (vec![4, 0, 2, -1, 1, 3, 0], true), (vec![4, 0, 5, 2, 1, 3, 0], true)]
    {
        for mode in [IndexMode::Clip, IndexMode::FillOrDrop] {
            let mut f = Function::new();
            let t2 = f.add_param(TensorType::new(DType::F32, Shape::new(&[5, 2])));
            let t1 = f.add_param(TensorType::new(DType::F32, Shape::new(&[5])));
            let idx = f.add_const(Array::from_vec(&[ids.len()], ids.clone()));
            let g2 = push(&mut f, Prim::Gather { axis: 0, batch_dims: 0, mode }, &[t2, idx]);
            let g1 = push(&mut f, Prim::Gather { axis: 0, batch_dims: 0, mode }, &[t1, idx]);
            f.outputs = vec![g2, g1];
            let args = [Array::from_vec(&[5, 2], table2.clone()), Array::from_vec(&[5], table1.clone())];
            let got = compile(&f).unwrap().run(&args).unwrap();
            let want = eval(&f, &args).unwrap();
            for (g, w) in got.iter().zip(&want) {
                assert_eq!(bits(g), bits(w), "{ids:?} {mode:?}");
            }
            let text = kernel_texts(&f);
            assert_eq!(text.contains("smin"), clamps, "{ids:?} {mode:?}:\n{text}");
            if ids == in_range {
                let row = |i: usize| [table2[2 * ids[i] as usize], table2[2 * ids[i] as usize + 1]];
                let rows: Vec<f32> = (0..ids.len()).flat_map(row).collect();
                assert_eq!(got[0].to_vec::<f32>().unwrap(), rows);
                let edge: Vec<f32> = ids.iter().map(|&i| 10.0 + i as f32).collect();
                assert_eq!(got[1].to_vec::<f32>().unwrap(), edge);
            }
        }
        // Two segment sums of one data array by constant ids: one kernel, one loop.
        let mut f = Function::new();
        let data = f.add_param(TensorType::new(DType::F32, Shape::new(&[ids.len()])));
        let a = f.add_const(Array::from_vec(&[ids.len()], ids.clone()));
        let b = f.add_const(Array::from_vec(&[ids.len()], in_range.clone()));
        let sa = push(&mut f, Prim::SegmentSum { num_segments: 5 }, &[data, a]);
        let sb = push(&mut f, Prim::SegmentSum { num_segments: 5 }, &[data, b]);
        f.outputs = vec![sa, sb];
        let values: Vec<f32> = (0..ids.len()).map(|i| 1.0 + i as f32 * 0.25).collect();
        let args = [Array::from_vec(&[ids.len()], values.clone())];
        let got = compile(&f).unwrap().run(&args).unwrap();
        let want = eval(&f, &args).unwrap();
        for (g, w) in got.iter().zip(&want) {
            assert_eq!(bits(g), bits(w), "segment sums by {ids:?}");
        }
        let mut by_hand = vec![0.0f32; 5];
        for (&i, &v) in in_range.iter().zip(&values) {
            by_hand[i as usize] += v;
        }
        assert_eq!(got[1].to_vec::<f32>().unwrap(), by_hand);
        // The in-range member adds without a check; one with an id out of range keeps its
        // unsigned `id < 5` test.
        let text = kernel_texts(&f);
        assert!(text.contains("; root segment_sum (equation 1)"), "one kernel:\n{text}");
        assert_eq!(text.contains(" ult "), clamps, "{ids:?}:\n{text}");
    }
}

/// A row-wise `scatter_add` with a constant index array shared by the rows: in range it compiles
/// without clamp or range check (the by-hand values of `row_wise_scatter_add_by_hand`), with an
/// index of 3 (past `M = 3`) it keeps them; both modes, bitwise the interpreter.
#[test]
fn constant_scatter_indices_in_range_need_no_checks() {
    let x = Array::from_vec(&[2, 3], vec![100.0f32; 6]);
    let u = Array::from_vec(&[2, 3], vec![0.5f32, 1.0, 2.0, 4.0, 8.0, 32.0]);
    for (ids, checked) in [(vec![2i32, 2, 0], false), (vec![2, 3, 0], true)] {
        for mode in [IndexMode::Clip, IndexMode::FillOrDrop] {
            let mut f = Function::new();
            let xv = f.add_param(TensorType::new(DType::F32, Shape::new(&[2, 3])));
            let uv = f.add_param(TensorType::new(DType::F32, Shape::new(&[2, 3])));
            let idv = f.add_const(Array::from_vec(&[3], ids.clone()));
            let twice = push(&mut f, Prim::Binary(BinaryOp::Add), &[uv, uv]);
            let sc = Prim::Scatter { op: ScatterOp::Add, axis: 1, batch_dims: 0, mode };
            let out = push(&mut f, sc, &[xv, idv, twice]);
            f.outputs.push(out);
            let args = [x.clone(), u.clone()];
            let got = compile(&f).unwrap().run(&args).unwrap().remove(0);
            assert!(got.bitwise_eq(&eval(&f, &args).unwrap()[0]), "{ids:?} {mode:?}");
            if !checked {
                assert_eq!(got.to_vec::<f32>().unwrap(), vec![104.0, 100.0, 103.0, 164.0, 100.0, 124.0]);
            }
            let text = kernel_texts(&f);
            assert!(text.contains("; root scatter_add"), "{text}");
            assert_eq!(text.contains(" ult "), checked, "{ids:?} {mode:?}:\n{text}");
        }
    }
}

/// Unsigned indices take the same one-compare fast path: values from 2³¹ up (negative if read as
/// `i32`) and `u32::MAX` are too large, never wrapped; on a rank-1 table, on `[5, 2]` rows and
/// along axis 1 of a `[2, 5]` table; bitwise the interpreter, and by hand (clamp to 4, or NaN).
#[test]
fn unsigned_indices_past_i32_are_out_of_range() {
    let n = 5usize;
    let idx: Vec<u32> = vec![0, 4, 5, 1 << 31, u32::MAX, 3, 1, (1 << 31) - 1, 7, 2];
    let e = idx.len();
    let t1: Vec<f32> = (0..n).map(|i| 10.0 + i as f32).collect();
    let t2: Vec<f32> = (0..2 * n).map(|i| 0.5 + i as f32).collect();
    for mode in [IndexMode::Clip, IndexMode::FillOrDrop] {
        let mut f = Function::new();
        let a = f.add_param(TensorType::new(DType::F32, Shape::new(&[n])));
        let b = f.add_param(TensorType::new(DType::F32, Shape::new(&[n, 2])));
        let c = f.add_param(TensorType::new(DType::F32, Shape::new(&[2, n])));
        let i = f.add_param(TensorType::new(DType::U32, Shape::new(&[e])));
        let g1 = push(&mut f, Prim::Gather { axis: 0, batch_dims: 0, mode }, &[a, i]);
        let g2 = push(&mut f, Prim::Gather { axis: 0, batch_dims: 0, mode }, &[b, i]);
        let g3 = push(&mut f, Prim::Gather { axis: 1, batch_dims: 0, mode }, &[c, i]);
        f.outputs = vec![g1, g2, g3];
        let args = [
            Array::from_vec(&[n], t1.clone()),
            Array::from_vec(&[n, 2], t2.clone()),
            Array::from_vec(&[2, n], t2.clone()),
            Array::from_vec(&[e], idx.clone()),
        ];
        let got = compile(&f).expect("compile").run(&args).expect("run");
        let want = eval(&f, &args).expect("interpreter");
        for (k, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(bits(g), bits(w), "output {k}, {mode:?}: JIT vs interpreter");
        }
        let at = |i: u32| (i as usize).min(n - 1);
        let ok = |i: u32| (i as usize) < n;
        let pick = |i: u32, v: f32| if mode == IndexMode::Clip || ok(i) { v } else { f32::NAN };
        let edge: Vec<f32> = idx.iter().map(|&i| pick(i, t1[at(i)])).collect();
        let rows: Vec<f32> =
            idx.iter().flat_map(|&i| [pick(i, t2[2 * at(i)]), pick(i, t2[2 * at(i) + 1])]).collect();
        let cols: Vec<f32> = (0..2)
            .flat_map(|r| idx.iter().map(move |&i| (r, i)))
            .map(|(r, i)| pick(i, t2[r * n + at(i)]))
            .collect();
        let same = |x: &Array, y: &[f32]| {
            let x = x.to_vec::<f32>().unwrap();
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| p == q || (p.is_nan() && q.is_nan()))
        };
        assert!(same(&got[0], &edge), "{mode:?}: {:?}", got[0]);
        assert!(same(&got[1], &rows), "{mode:?}: {:?}", got[1]);
        assert!(same(&got[2], &cols), "{mode:?}: {:?}", got[2]);
    }
}
