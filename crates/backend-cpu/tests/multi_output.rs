//! Multi-output kernels (`grouping`): kernels with the same outer rows share one step when every
//! read of an earlier member's output is at the reader's own row; results stay bitwise those of
//! one kernel per root for every thread count, including reads that must keep kernels apart (a reversed
//! or transposed read of another member's rows, which a row-split group would race on).

use kiln_backend_cpu::{CompileOptions, compile_with};
use kiln_ir::{Array, Function, eval, parse};

fn opts(threads: usize, multi_output: bool) -> CompileOptions {
    // `min_task_work: Some(0)` splits every kernel with more than one row over the threads.
    CompileOptions { threads: Some(threads), dump_dir: None, min_task_work: Some(0), multi_output }
}

fn f32s(dims: &[usize], seed: u32) -> Array {
    let n: usize = dims.iter().product();
    let v =
        (0..n as u32).map(|i| ((i.wrapping_mul(2654435761) ^ seed) % 1000) as f32 / 100.0 - 5.0).collect();
    Array::from_vec(dims, v)
}

/// Compiles `src` grouped and not; returns (kernels one root each, kernels grouped) after checking
/// that every compilation, over 1–4 threads, gives bitwise the results of the ungrouped serial one,
/// and that those equal the interpreter's (to a few ulps: the JIT's transcendentals are its own).
fn kernels(src: &str, args: &[Array]) -> (usize, usize) {
    let f: Function = parse(src).unwrap_or_else(|e| panic!("{e}\n{src}"));
    let want = compile_with(&f, &opts(1, false)).unwrap().run(args).unwrap();
    for (w, r) in want.iter().zip(eval(&f, args).unwrap()) {
        let (w, r) = (w.to_vec::<f32>().unwrap(), r.to_vec::<f32>().unwrap());
        for (a, b) in w.iter().zip(&r) {
            assert!((a - b).abs() <= 1e-6 * b.abs().max(1.0), "{a} vs interpreter {b}\n{f}");
        }
    }
    let mut counts = (0, 0);
    for threads in 1..=4 {
        for grouped in [false, true] {
            let exe = compile_with(&f, &opts(threads, grouped)).unwrap();
            let got = exe.run(args).unwrap();
            for (w, g) in want.iter().zip(&got) {
                assert!(w.bitwise_eq(g), "threads {threads}, grouped {grouped}:\n{w:?}\n{g:?}\n{f}");
            }
            let n = exe.kernel_count();
            if grouped { counts.1 = n } else { counts.0 = n }
        }
    }
    counts
}

#[test]
fn independent_kernels_with_the_same_rows_share_one() {
    // Two outputs of different widths over the same 64 rows, each its own root: one step.
    let src = "{ lambda x:f32[64,3] y:f32[64,5] . let
        a:f32[64,3] = tanh x
        b:f32[64,5] = mul y y
        c:f32[64] = reduce_sum[axes=(1,)] y
      in (a, b, c) }";
    assert_eq!(kernels(src, &[f32s(&[64, 3], 1), f32s(&[64, 5], 2)]), (3, 1));
}

#[test]
fn a_member_reads_an_earlier_members_output_at_its_own_row() {
    // `a` is an output, so it is materialized; `b` reads it elementwise, `c` through a row
    // broadcast and `d` through a reduction of each row: all at their own row, one kernel.
    let src = "{ lambda x:f32[50,4] y:f32[50,4] . let
        a:f32[50,4] = exp x
        b:f32[50,4] = mul a y
        s:f32[50] = reduce_max[axes=(1,)] a
        t:f32[50,4] = broadcast_in_dim[shape=(50,4) broadcast_dimensions=(0,)] s
        c:f32[50,4] = sub y t
      in (a, b, c) }";
    assert_eq!(kernels(src, &[f32s(&[50, 4], 3), f32s(&[50, 4], 4)]), (4, 1));
}

/// W2's spring step: `d = x[b] - x[a]` gathered at constant spring ends (rows of 2, scalar
/// members in one row loop), then members reading `d` at their own row straight, squared and
/// summed, and reversed along the row: later members take `d`'s elements from registers where the
/// codegen knows them (`Known` in `codegen/kernel.rs`), with the same bits.
#[test]
fn members_reusing_an_earlier_members_elements_in_registers_are_bitwise() {
    let src = "{ lambda x:f32[8,2] ; a:i32[12] = [0, 1, 2, 3, 4, 5, 6, 0, 1, 2, 3, 4], b:i32[12] = [1, 2, 3, 4, 5, 6, 7, 2, 3, 4, 5, 6] . let
        g1:f32[12,2] = gather[axis=0 batch_dims=0 mode=clip] x b
        g0:f32[12,2] = gather[axis=0 batch_dims=0 mode=clip] x a
        d:f32[12,2] = sub g1 g0
        dd:f32[12,2] = mul d d
        l:f32[12] = reduce_sum[axes=(1,)] dd
        r:f32[12,2] = rev[dimensions=(1,)] d
        q:f32[12,2] = mul r d
      in (d, l, q) }";
    assert_eq!(kernels(src, &[f32s(&[8, 2], 12)]), (3, 1));
}

#[test]
fn reads_of_other_rows_keep_kernels_apart() {
    // `b` reads `a` reversed along the rows and `c` reads it transposed: a task computing rows
    // lo..hi of `b` would read rows that another task writes. Neither joins `a`'s kernel, and
    // both still share one of their own (they read `a` only, ready before them).
    let src = "{ lambda x:f32[40,40] . let
        a:f32[40,40] = exp x
        r:f32[40,40] = rev[dimensions=(0,)] a
        b:f32[40,40] = add r x
        t:f32[40,40] = transpose[permutation=(1,0)] a
        c:f32[40,40] = mul t x
      in (a, b, c) }";
    assert_eq!(kernels(src, &[f32s(&[40, 40], 5)]), (3, 2));
    // A broadcast that spreads one row of `a` over every row of `d`.
    let src = "{ lambda x:f32[30] y:f32[30,30] . let
        a:f32[30] = exp x
        b:f32[30,30] = broadcast_in_dim[shape=(30,30) broadcast_dimensions=(1,)] a
        d:f32[30,30] = add b y
      in (a, d) }";
    assert_eq!(kernels(src, &[f32s(&[30], 6), f32s(&[30, 30], 7)]), (2, 2));
}

#[test]
fn stacks_pads_and_reversals_along_other_axes_read_their_own_row() {
    // W4's step: the new state stacks members' columns along axis 1; row r of the stack is made of
    // rows r of `a` and `b`, so it joins their kernel, as do a pad and a reversal of axis 1 (the
    // stack is an output, so it stays a kernel of its own root).
    let src = "{ lambda x:f32[48,3] y:f32[48,3] ; z:f32[] = 0.5 . let
        a:f32[48,3] = exp x
        b:f32[48,3] = tanh y
        s:f32[48,6] = concatenate[dimension=1] a b
        p:f32[48,5] = pad[low=(0, 1) high=(0, 1) interior=(0, 0)] a z
        r:f32[48,3] = rev[dimensions=(1,)] b
        q:f32[48,3] = mul r x
      in (a, b, s, p, q) }";
    assert_eq!(kernels(src, &[f32s(&[48, 3], 10), f32s(&[48, 3], 11)]), (5, 1));
    // A pad shifting the rows down by one (same row count: row r reads row r − 1) and a reversal
    // of the rows keep `p` and `q` out of `a`'s kernel; they share one of their own.
    let src = "{ lambda x:f32[48,3] y:f32[48,3] ; z:f32[] = 0.5 . let
        a:f32[48,3] = exp x
        b:f32[48,3] = tanh y
        p:f32[48,3] = pad[low=(1, 0) high=(-1, 0) interior=(0, 0)] a z
        r:f32[48,3] = rev[dimensions=(0,)] b
        q:f32[48,3] = mul r x
      in (a, b, p, q) }";
    assert_eq!(kernels(src, &[f32s(&[48, 3], 10), f32s(&[48, 3], 11)]), (4, 2));
}

#[test]
fn different_rows_and_scalars_are_not_grouped() {
    let src = "{ lambda x:f32[16,2] y:f32[8,4] . let
        a:f32[16,2] = tanh x
        b:f32[8,4] = tanh y
        c:f32[] = reduce_sum[axes=(0,1)] x
        d:f32[] = reduce_max[axes=(0,1)] y
      in (a, b, c, d) }";
    assert_eq!(kernels(src, &[f32s(&[16, 2], 8), f32s(&[8, 4], 9)]), (4, 4));
}

#[test]
fn a_kernel_moves_up_past_a_runtime_step_it_does_not_read() {
    // `c` does not read the cumulative sum, so it joins `a`'s kernel above it; `d` reads it and
    // stays below.
    let src = "{ lambda x:f32[32,8] . let
        a:f32[32,8] = exp x
        s:f32[32,8] = cumsum[axis=0 reverse=false] a
        c:f32[32,8] = mul x x
        d:f32[32,8] = add s x
        e:f32[32,8] = tanh x
      in (s, c, d, a, e) }";
    assert_eq!(kernels(src, &[f32s(&[32, 8], 10)]), (4, 2));
}

#[test]
fn the_plan_dump_names_multi_output_kernels() {
    let dir = tempfile::tempdir().unwrap();
    let src =
        "{ lambda x:f32[64,3] y:f32[64,5] . let a:f32[64,3] = tanh x  b:f32[64,5] = mul y y in (a, b) }";
    let f = parse(src).unwrap();
    let o = CompileOptions { dump_dir: Some(dir.path().to_path_buf()), ..opts(1, true) };
    compile_with(&f, &o).unwrap();
    let sub = std::fs::read_dir(dir.path()).unwrap().next().unwrap().unwrap().path();
    let plan = std::fs::read_to_string(sub.join("plan.txt")).unwrap();
    assert!(plan.contains("a kernel with 2 outputs"), "{plan}");
}

#[test]
fn groups_stay_within_the_kernel_operand_limit() {
    // 16 outputs, each the sum of its own 20 parameters: grouped whole, the table would need
    // 16·20 + 16 slots (> 255), so the groups split and every kernel compiles.
    use kiln_ir::{BinaryOp, DType, Prim, TensorType};
    let mut f = Function::new();
    let params: Vec<_> = (0..320).map(|_| f.add_param(TensorType::new(DType::F32, [8]))).collect();
    for chunk in params.chunks(20) {
        let mut acc = chunk[0];
        for &p in &chunk[1..] {
            acc = f.push(Prim::Binary(BinaryOp::Add), &[acc, p], None).unwrap()[0];
        }
        f.outputs.push(acc);
    }
    let args: Vec<Array> = (0..320).map(|k| f32s(&[8], k)).collect();
    let want = eval(&f, &args).unwrap();
    for grouped in [false, true] {
        let exe = compile_with(&f, &opts(2, grouped)).unwrap();
        assert_eq!(exe.kernel_count(), if grouped { 2 } else { 16 });
        assert_eq!(exe.run(&args).unwrap(), want);
    }
}

#[test]
fn segment_sums_of_data_of_one_type_share_one_loop_on_one_thread() {
    // W2's spring forces: `f = k·d` summed by both end points, `f.segment_sum(a) - f.segment_sum(b)`,
    // and (its backward pass) a negated copy summed too. On one thread the three segment kernels
    // are one (the products computed once per row); split over threads they stay apart (a range
    // cut where `a` changes cannot own `b`'s segments). Ids unsorted, repeated, negative and past
    // the end (dropped), every sum also returned.
    let src = "{ lambda k:f32[120] d:f32[120,2] a:i32[120] b:i32[120] . let
        kb:f32[120,2] = broadcast_in_dim[shape=(120,2) broadcast_dimensions=(0,)] k
        f:f32[120,2] = mul kb d
        s:f32[40,2] = segment_sum[num_segments=40] f a
        t:f32[40,2] = segment_sum[num_segments=40] f b
        g:f32[120,2] = neg f
        w:f32[40,2] = segment_sum[num_segments=40] g a
        u:f32[40,2] = sub s t
      in (u, s, t, w) }";
    let f: Function = parse(src).unwrap();
    let ids = |seed: i32| {
        let v: Vec<i32> = (0..120).map(|i| ((i * 37 + seed * 11) % 47) - 3).collect();
        Array::from_vec(&[120], v)
    };
    let args = [f32s(&[120], 1), f32s(&[120, 2], 2), ids(1), ids(2)];
    let want = eval(&f, &args).unwrap();
    let count = |threads: usize, grouped: bool| {
        let exe = compile_with(&f, &opts(threads, grouped)).unwrap();
        for (w, g) in want.iter().zip(exe.run(&args).unwrap()) {
            assert!(w.bitwise_eq(&g), "threads {threads}, grouped {grouped}:\n{w:?}\n{g:?}");
        }
        exe.kernel_count()
    };
    // The difference stays a kernel of its own (it reads both outputs at any row).
    assert_eq!((count(1, false), count(1, true)), (4, 2));
    assert_eq!((count(2, false), count(2, true)), (4, 4));
}

/// W2's spring lengths: the gather `d = x[b] − x[a]` over rows of 2 and the squared lengths of
/// `d`'s rows are both scalar members (rows shorter than a vector) of one kernel; they share one
/// loop over the springs, the second reading each row of `d` right after it is stored. Bitwise the
/// ungrouped kernels over 1–4 threads (rows split), with indices out of range too; the dumped
/// kernel has one loop over the rows where the ungrouped pair has two.
#[test]
fn scalar_members_over_the_same_rows_share_one_loop() {
    let src = "{ lambda x:f32[9,2] a:i32[31] b:i32[31] . let
        p:f32[31,2] = gather[axis=0 batch_dims=0 mode=clip] x b
        q:f32[31,2] = gather[axis=0 batch_dims=0 mode=clip] x a
        d:f32[31,2] = sub p q
        s:f32[31,2] = mul d d
        n:f32[31] = reduce_sum[axes=(1,)] s
      in (d, n) }";
    let ids = |seed: i32| Array::from_vec(&[31], (0..31).map(|i| (i * seed) % 13 - 2).collect::<Vec<i32>>());
    assert_eq!(kernels(src, &[f32s(&[9, 2], 12), ids(5), ids(7)]), (2, 1));
    assert_eq!(row_loops(src, false), 2);
    assert_eq!(row_loops(src, true), 1);
}

/// How many loops over the rows the kernels of `src` compiled on one thread have: each compares
/// the row counter with the kernel's `hi` argument (`v2`).
fn row_loops(src: &str, grouped: bool) -> usize {
    let f = parse(src).unwrap();
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("kiln-row-runs-{}-{call}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let o = CompileOptions { dump_dir: Some(dir.clone()), ..opts(1, grouped) };
    compile_with(&f, &o).unwrap();
    let folder = std::fs::read_dir(&dir).unwrap().next().unwrap().unwrap().path();
    let mut text = String::new();
    for entry in std::fs::read_dir(&folder).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "clif") {
            text.push_str(std::fs::read_to_string(&path).unwrap().split("; machine code").next().unwrap());
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    text.lines().filter(|l| l.contains("icmp slt") && l.trim_end().ends_with(", v2")).count()
}

/// A scalar member after a vector one joins the scalar run before it when it reads none of the
/// members it moves past (W2's backward step: the squared-length cotangent reads the gathered
/// rows, not the division between them); one that reads the vector member's output stays after
/// it. Bitwise the ungrouped kernels over 1–4 threads either way.
#[test]
fn a_scalar_member_moves_up_to_an_earlier_run_past_members_it_does_not_read() {
    // `d` and `n` are scalar (rows of 2), `w` is a vector member (rows of 12) between them.
    let moves = "{ lambda x:f32[9,2] i:i32[40] y:f32[40,12] z:f32[12] . let
        d:f32[40,2] = gather[axis=0 batch_dims=0 mode=clip] x i
        zb:f32[40,12] = broadcast_in_dim[shape=(40,12) broadcast_dimensions=(1,)] z
        w:f32[40,12] = mul y zb
        s:f32[40,2] = mul d d
        n:f32[40] = reduce_sum[axes=(1,)] s
      in (d, w, n) }";
    let ids = Array::from_vec(&[40], (0..40).map(|k| (k * 7) % 11 - 1).collect::<Vec<i32>>());
    let args = [f32s(&[9, 2], 13), ids, f32s(&[40, 12], 14), f32s(&[12], 15)];
    assert_eq!(kernels(moves, &args), (3, 1));
    // Ungrouped: the two scalar kernels' loops and the vector kernel's (which compare with `hi`
    // once per unrolled and remainder loop); grouped: one scalar loop fewer.
    assert_eq!(row_loops(moves, true), row_loops(moves, false) - 1);
    let stays = "{ lambda x:f32[9,2] i:i32[40] y:f32[40,12] z:f32[12] . let
        d:f32[40,2] = gather[axis=0 batch_dims=0 mode=clip] x i
        zb:f32[40,12] = broadcast_in_dim[shape=(40,12) broadcast_dimensions=(1,)] z
        w:f32[40,12] = mul y zb
        t:f32[40] = reduce_max[axes=(1,)] w
        b:f32[40,2] = broadcast_in_dim[shape=(40,2) broadcast_dimensions=(0,)] t
        s:f32[40,2] = mul d b
      in (d, w, s) }";
    assert_eq!(kernels(stays, &args), (4, 1));
    assert_eq!(row_loops(stays, true), row_loops(stays, false));
}

/// Found by the random programs (seed 238): a scalar member read the output of a collapsed member
/// (its own copy of the function, variables renumbered) and, compared by variable, looked
/// independent of it: it moved up past it and read that output before it was written. The
/// program is built in the generator's order (parameters between equations), which gave the
/// clash; the erf_inv member is collapsed, the gathers after it read its result.
#[test]
fn a_scalar_member_never_moves_past_a_collapsed_member() {
    let ty = |dt, dims: &[usize]| kiln_ir::TensorType::new(dt, kiln_ir::Shape::new(dims));
    let (f64_, i32_) = (kiln_ir::DType::F64, kiln_ir::DType::I32);
    let mut f = Function::new();
    let push = |f: &mut Function, p: kiln_ir::Prim, ins: &[kiln_ir::Var]| f.push(p, ins, None).unwrap()[0];
    let a = f.add_param(ty(f64_, &[1, 1]));
    let t = push(&mut f, kiln_ir::Prim::Transpose { permutation: vec![1, 0] }, &[a]);
    let b = f.add_param(ty(f64_, &[1, 1]));
    let g = push(&mut f, kiln_ir::Prim::Binary(kiln_ir::BinaryOp::Div), &[b, t]);
    let c = f.add_param(ty(f64_, &[1, 1]));
    let h = push(&mut f, kiln_ir::Prim::Compare(kiln_ir::CompareOp::Gt), &[g, c]);
    let i = push(&mut f, kiln_ir::Prim::Select, &[h, g, c]);
    let j = push(&mut f, kiln_ir::Prim::Unary(kiln_ir::UnaryOp::ErfInv), &[i]);
    let k = push(&mut f, kiln_ir::Prim::Unary(kiln_ir::UnaryOp::Neg), &[j]);
    let d = f.add_param(ty(i32_, &[3, 1]));
    let gather = |axis| kiln_ir::Prim::Gather { axis, batch_dims: 0, mode: kiln_ir::IndexMode::Clip };
    let l = push(&mut f, gather(1), &[k, d]);
    let e = f.add_param(ty(i32_, &[3]));
    let m = push(&mut f, gather(2), &[l, e]);
    f.outputs = vec![m];
    // b / a = 0.25 > c: erf_inv(0.25) = 0.2253..., negated, in all nine elements.
    let args = [
        Array::from_vec(&[1, 1], vec![2.0f64]),
        Array::from_vec(&[1, 1], vec![0.5f64]),
        Array::from_vec(&[1, 1], vec![0.1f64]),
        Array::from_vec(&[3, 1], vec![-1i32, -1, -7]),
        Array::from_vec(&[3], vec![1i32, 0, 0]),
    ];
    let want = eval(&f, &args).unwrap().remove(0);
    let expected = -0.225_312_055_012_178_1f64;
    assert!(want.to_vec::<f64>().unwrap().iter().all(|&x| (x - expected).abs() < 1e-12), "{want:?}");
    for threads in 1..=2 {
        for grouped in [false, true] {
            let got = compile_with(&f, &opts(threads, grouped)).unwrap().run(&args).unwrap().remove(0);
            let got = got.to_vec::<f64>().unwrap();
            assert!(
                got.iter().all(|&x| (x - expected).abs() < 1e-12),
                "{threads} threads, grouped {grouped}: {got:?}"
            );
        }
    }
}
