//! Scans whose rows evolve independently (a `vmap`ped step: every body kernel reads the carries
//! only in the row it writes) run as row ranges, each range looping over all steps on its own
//! thread (`Control::plan_split`). Results must be bitwise those of one thread, and the
//! interpreter's up to the JIT's own transcendentals; a body that reads another row of its carry
//! must not be split.

use kiln_backend_cpu::{CompileOptions, compile_with};
use kiln_ir::{Array, Function, eval, parse};

/// `min_task_work: Some(0)`: every scan the analysis accepts is split over the threads.
fn opts(threads: usize) -> CompileOptions {
    CompileOptions { threads: Some(threads), dump_dir: None, min_task_work: Some(0), multi_output: true }
}

fn f32s(dims: &[usize], seed: u32, scale: f32) -> Array {
    let n: usize = dims.iter().product();
    let v = (0..n as u32)
        .map(|i| (((i.wrapping_mul(2654435761) ^ seed) % 1000) as f32 / 500.0 - 1.0) * scale)
        .collect();
    Array::from_vec(dims, v)
}

/// The plan listing of `f` compiled on `threads` threads.
fn plan_text(f: &Function, threads: usize) -> String {
    let dir = tempfile::tempdir().unwrap();
    compile_with(f, &CompileOptions { dump_dir: Some(dir.path().to_path_buf()), ..opts(threads) }).unwrap();
    let folder = std::fs::read_dir(dir.path()).unwrap().next().unwrap().unwrap().path();
    std::fs::read_to_string(folder.join("plan.txt")).unwrap()
}

/// Runs `src` on 1–4 threads: every result bitwise the one-thread one, which is within `tol`
/// (relative) of the interpreter's. Returns whether the 2-thread plan split the scan.
fn check(src: &str, args: &[Array], tol: f32) -> bool {
    let f: Function = parse(src).unwrap_or_else(|e| panic!("{e}\n{src}"));
    let want = compile_with(&f, &opts(1)).unwrap().run(args).unwrap();
    for (w, r) in want.iter().zip(eval(&f, args).unwrap()) {
        let (w, r) = (w.to_vec::<f32>().unwrap(), r.to_vec::<f32>().unwrap());
        assert_eq!(w.len(), r.len());
        for (a, b) in w.iter().zip(&r) {
            assert!((a - b).abs() <= tol * b.abs().max(1.0), "{a} vs interpreter {b}\n{f}");
        }
    }
    for threads in 2..=4 {
        let got = compile_with(&f, &opts(threads)).unwrap().run(args).unwrap();
        for (w, g) in want.iter().zip(&got) {
            assert!(w.bitwise_eq(g), "{threads} threads differ from one:\n{w:?}\n{g:?}");
        }
    }
    assert!(!plan_text(&f, 1).contains("rows split"), "one thread never splits");
    let split = plan_text(&f, 2).contains("rows split into 2 ranges");
    assert_eq!(plan_text(&f, 3).contains("rows split into 3 ranges"), split);
    split
}

/// A cart-pole-like step `vmap`ped over 37 environments (W4's shape): a policy `tanh(w·s + b)`
/// (a matrix-vector `dot_general` reading each state row), the state's columns sliced out,
/// `sin`/`cos`, an xs column added, and the new state stacked back along axis 1; ys: one value
/// per environment and step.
fn policy_step(reverse: bool) -> String {
    format!(
        "{{ lambda w:f32[4] b:f32[] s0:f32[37,4] xs:f32[30,37] . let
    fin:f32[37,4] ys:f32[30,37] = scan[length=30 reverse={reverse} num_consts=2 num_carry=1 body={{ lambda w:f32[4] b:f32[] s:f32[37,4] x:f32[37] . let
        d:f32[37] = dot_general[lhs_contracting=(0,) rhs_contracting=(1,) lhs_batch=() rhs_batch=() preferred_element_type=none] w s
        bb:f32[37] = broadcast_in_dim[shape=(37,) broadcast_dimensions=()] b
        u:f32[37] = add d bb
        a:f32[37] = tanh u
        c0:f32[37,1] = slice[start=(0, 0) limit=(37, 1) strides=(1, 1)] s
        c1:f32[37,1] = slice[start=(0, 1) limit=(37, 2) strides=(1, 1)] s
        c2:f32[37,1] = slice[start=(0, 2) limit=(37, 3) strides=(1, 1)] s
        c3:f32[37,1] = slice[start=(0, 3) limit=(37, 4) strides=(1, 1)] s
        p0:f32[37] = reshape[new_sizes=(37,)] c0
        p1:f32[37] = reshape[new_sizes=(37,)] c1
        p2:f32[37] = reshape[new_sizes=(37,)] c2
        p3:f32[37] = reshape[new_sizes=(37,)] c3
        sn:f32[37] = sin p2
        cs:f32[37] = cos p2
        q0:f32[37] = add p0 p1
        f1:f32[37] = mul a cs
        q1:f32[37] = add p1 f1
        q2:f32[37] = add p2 p3
        g:f32[37] = mul sn x
        q3:f32[37] = sub p3 g
        r0:f32[37,1] = reshape[new_sizes=(37, 1)] q0
        r1:f32[37,1] = reshape[new_sizes=(37, 1)] q1
        r2:f32[37,1] = reshape[new_sizes=(37, 1)] q2
        r3:f32[37,1] = reshape[new_sizes=(37, 1)] q3
        s2:f32[37,4] = concatenate[dimension=1] r0 r1 r2 r3
        y:f32[37] = mul a p0
      in (s2, y) }}] w b s0 xs
  in (fin, ys) }}"
    )
}

fn policy_args() -> Vec<Array> {
    vec![
        Array::from_vec(&[4], vec![0.5f32, 1.0, 2.0, -0.3]),
        Array::scalar(0.1f32),
        f32s(&[37, 4], 7, 0.1),
        f32s(&[30, 37], 9, 0.01),
    ]
}

#[test]
fn a_vmapped_step_splits_its_rows_over_threads_for_the_whole_loop() {
    for reverse in [false, true] {
        assert!(check(&policy_step(reverse), &policy_args(), 1e-5), "reverse {reverse}: not split");
    }
}

#[test]
fn a_body_reading_another_row_of_its_carry_is_not_split() {
    // The carry's rows shift by one each step (`rev` along axis 0 in the body): row r of step
    // t + 1 reads row 36 - r of step t, which another range owns.
    let shifted = policy_step(false).replace(
        "q0:f32[37] = add p0 p1",
        "v0:f32[37] = rev[dimensions=(0,)] p1\n        q0:f32[37] = add p0 v0",
    );
    // (Mixing rows makes the state grow, and the JIT's transcendentals' last-bit differences
    // with it.)
    assert!(!check(&shifted, &policy_args(), 1e-4));
    // A column sum over the batch scaling every row: each row reads all rows. (The sum is a
    // kernel of its own, over 4 rows, so the body's kernels also differ in rows; the `rev` above
    // and the axis-0 gather below are the same-rows cases.)
    let summed = "{ lambda s0:f32[37,4] . let
    fs:f32[37,4] = scan[length=20 reverse=false num_consts=0 num_carry=1 body={ lambda s:f32[37,4] . let
        m:f32[4] = reduce_sum[axes=(0,)] s
        mb:f32[37,4] = broadcast_in_dim[shape=(37, 4) broadcast_dimensions=(1,)] m
        h:f32[37,4] = mul s mb
        z:f32[37,4] = sin h
      in (z) }] s0
  in (fs) }";
    assert!(!check(summed, &[f32s(&[37, 4], 3, 0.5)], 1e-4));
}

#[test]
fn xs_and_constants_may_be_read_anywhere_but_a_passed_through_carry_keeps_the_loop_whole() {
    // xs and scan constants are only read: a reversed read of them does not stop the split.
    let src = "{ lambda k:f32[37] s0:f32[37] xs:f32[12,37] . let
    fs:f32[37] ys:f32[12,37] = scan[length=12 reverse=false num_consts=1 num_carry=1 body={ lambda k:f32[37] s:f32[37] x:f32[37] . let
        xr:f32[37] = rev[dimensions=(0,)] x
        kr:f32[37] = rev[dimensions=(0,)] k
        a:f32[37] = mul s kr
        b:f32[37] = add a xr
        c:f32[37] = tanh b
      in (c, b) }] k s0 xs
  in (fs, ys) }";
    let args = [f32s(&[37], 1, 1.0), f32s(&[37], 2, 1.0), f32s(&[12, 37], 3, 1.0)];
    assert!(check(src, &args, 1e-5));
    // A carry returned unchanged is copied in after the body's steps, over all rows at once.
    let through = "{ lambda s0:f32[37] u0:f32[37] . let
    fs:f32[37] fu:f32[37] = scan[length=9 reverse=false num_consts=0 num_carry=2 body={ lambda s:f32[37] u:f32[37] . let
        a:f32[37] = mul s u
        c:f32[37] = tanh a
      in (c, u) }] s0 u0
  in (fs, fu) }";
    assert!(!check(through, &[f32s(&[37], 4, 1.0), f32s(&[37], 5, 1.0)], 1e-5));
}

#[test]
fn gathers_along_another_axis_read_their_own_row() {
    // A `vmap`ped `take` (axis 1, indices shared by every row) and a per-row one (batch_dims 1):
    // row-local, so split. A gather of whole rows (axis 0) reads other rows: not split.
    let body = |g: &str| {
        format!(
            "{{ lambda i:i32[3] j:i32[37,2] k:i32[37] s0:f32[37,5] . let
    fs:f32[37,5] ys:f32[9,37,5] = scan[length=9 reverse=false num_consts=3 num_carry=1 body={{ lambda i:i32[3] j:i32[37,2] k:i32[37] s:f32[37,5] . let
        {g}
        h:f32[37,2] = gather[axis=1 batch_dims=1 mode=clip] s j
        c:f32[37,5] = concatenate[dimension=1] g h
        t:f32[37,5] = sin c
        u:f32[37,5] = add s t
      in (u, c) }}] i j k s0
  in (fs, ys) }}"
        )
    };
    let args = [
        Array::from_vec(&[3], vec![4i32, 0, 2]),
        Array::from_vec(&[37, 2], (0..74).map(|n| (n * 7 % 5) as i32).collect::<Vec<_>>()),
        Array::from_vec(&[37], (0..37).map(|n| (n * 11 % 37) as i32).collect::<Vec<_>>()),
        f32s(&[37, 5], 6, 1.0),
    ];
    assert!(check(&body("g:f32[37,3] = gather[axis=1 batch_dims=0 mode=clip] s i"), &args, 1e-5));
    let rows = "p:f32[37,5] = gather[axis=0 batch_dims=0 mode=clip] s k
        g:f32[37,3] = slice[start=(0, 0) limit=(37, 3) strides=(1, 1)] p";
    assert!(!check(&body(rows), &args, 1e-4));
}

#[test]
fn row_wise_scatter_adds_keep_their_rows() {
    // A vmapped message sum (`scatter_add` into axis 1, ids per row or shared by every row, W2's
    // batched spring forces and their transpose) adds into the row it reads: split. A scatter into
    // axis 0 (rows into other rows) is a runtime step: not split. (The carry shrinks by 1/8 per
    // step, so the JIT's `sin`, within an ulp of the interpreter's, stays within the tolerance.)
    let body = |sc: &str| {
        format!(
            "{{ lambda i:i32[6] j:i32[37,6] s0:f32[37,4,2] . let
    fs:f32[37,4,2] ys:f32[9,37,4,2] = scan[length=9 reverse=false num_consts=2 num_carry=1 body={{ lambda i:i32[6] j:i32[37,6] s:f32[37,4,2] ; c:f32[] = 0.125 . let
        g:f32[37,6,2] = gather[axis=1 batch_dims=0 mode=clip] s i
        m:f32[37,6,2] = sin g
        {sc}
        h:f32[37,4,2] = broadcast_in_dim[shape=(37, 4, 2) broadcast_dimensions=()] c
        u:f32[37,4,2] = mul a h
      in (u, a) }}] i j s0
  in (fs, ys) }}"
        )
    };
    let args = [
        Array::from_vec(&[6], vec![3i32, 0, 2, 2, 1, 7]),
        Array::from_vec(&[37, 6], (0..222).map(|n| (n * 7 % 6) as i32 - 1).collect::<Vec<_>>()),
        f32s(&[37, 4, 2], 8, 1.0),
    ];
    let own = "a:f32[37,4,2] = scatter_add[axis=1 batch_dims=1 mode=fill] s j m";
    let shared = "a:f32[37,4,2] = scatter_add[axis=1 batch_dims=0 mode=clip] s i m";
    assert!(check(&body(own), &args, 1e-5));
    assert!(check(&body(shared), &args, 1e-5));
    let rows = "r:i32[37,1] = slice[start=(0, 0) limit=(37, 1) strides=(1, 1)] j
        q:i32[37] = reshape[new_sizes=(37,)] r
        w:f32[37,4,2] = cos s
        a:f32[37,4,2] = scatter_add[axis=0 batch_dims=0 mode=fill] s q w";
    assert!(!check(&body(rows), &args, 1e-5));
}

#[test]
fn steps_shared_by_every_row_are_computed_whole_by_each_range() {
    // W2's actuation: `sin(ω·t + φ)` of the step's xs, the same for every row, feeding a per-row
    // matrix-vector product and saved as a ys (a gradient's residual). Each range computes the
    // shared `[10]` itself, the first range writing the ys: split, bitwise. The same shape
    // computed from the carry (a row sum) would read every row: not split.
    let body = |shared: &str| {
        format!(
            "{{ lambda p:f32[10] w:f32[37,4,10] s0:f32[37,4] ts:f32[9] . let
    fs:f32[37,4] ys:f32[9,37,4] qs:f32[9,10] = scan[length=9 reverse=false num_consts=2 num_carry=1 body={{ lambda p:f32[10] w:f32[37,4,10] s:f32[37,4] t:f32[] . let
        {shared}
        a:f32[37,4] = dot_general[lhs_contracting=(2,) rhs_contracting=(0,) lhs_batch=() rhs_batch=() preferred_element_type=none] w q
        b:f32[37,4] = tanh a
        c:f32[37,4] = mul s b
        u:f32[37,4] = sin c
      in (u, a, q) }}] p w s0 ts
  in (fs, ys, qs) }}"
        )
    };
    let args = [f32s(&[10], 1, 3.0), f32s(&[37, 4, 10], 2, 0.5), f32s(&[37, 4], 3, 1.0), f32s(&[9], 4, 2.0)];
    let from_xs = "tb:f32[10] = broadcast_in_dim[shape=(10,) broadcast_dimensions=()] t
        r:f32[10] = add tb p
        q:f32[10] = sin r";
    assert!(check(&body(from_xs), &args, 1e-5));
    // The shared values are a kernel of their own (10 rows) inside the split body.
    let f: Function = parse(&body(from_xs)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    compile_with(&f, &CompileOptions { dump_dir: Some(dir.path().to_path_buf()), ..opts(2) }).unwrap();
    let folder = std::fs::read_dir(dir.path()).unwrap().next().unwrap().unwrap().path();
    let body_plan = std::fs::read_dir(&folder)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.is_dir())
        .map(|d| std::fs::read_to_string(d.join("plan.txt")).unwrap())
        .expect("a body plan");
    assert!(body_plan.contains("root     #2 sin") && body_plan.contains("rows 10,"), "{body_plan}");
    let from_carry = "z:f32[4] = reduce_sum[axes=(0,)] s
        r:f32[10] = pad[low=(0,) high=(6,) interior=(0,)] z t
        q:f32[10] = sin r";
    assert!(!check(&body(from_carry), &args, 1e-5));
}

#[test]
fn by_default_a_range_needs_enough_work_per_step() {
    // The policy step at 37 rows is a few µs per step: split only when forced (above). At 4096
    // rows each of two ranges has ~50 k units per step (over `MIN_SPLIT_STEP_UNITS`).
    let plan = |rows: usize| {
        let src = policy_step(false).replace("37", &rows.to_string());
        let f: Function = parse(&src).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let o = CompileOptions {
            threads: Some(2),
            dump_dir: Some(dir.path().to_path_buf()),
            min_task_work: None,
            multi_output: true,
        };
        compile_with(&f, &o).unwrap();
        let folder = std::fs::read_dir(dir.path()).unwrap().next().unwrap().unwrap().path();
        std::fs::read_to_string(folder.join("plan.txt")).unwrap()
    };
    assert!(!plan(37).contains("rows split"));
    assert!(plan(4096).contains("rows split into 2 ranges"));
}

#[test]
fn carries_of_several_ranks_single_steps_and_carry_free_scans_split() {
    // Two carries ([37, 3] and [37]) and ys of both kinds, for 1 and 7 steps.
    let body = |length: usize| {
        format!(
            "{{ lambda s0:f32[37,3] v0:f32[37] xs:f32[{length},37] . let
    fs:f32[37,3] fv:f32[37] ys:f32[{length},37,3] zs:f32[{length},37] = scan[length={length} reverse=false num_consts=0 num_carry=2 body={{ lambda s:f32[37,3] v:f32[37] x:f32[37] . let
        r:f32[37] = reduce_sum[axes=(1,)] s
        w:f32[37] = add v r
        vb:f32[37,3] = broadcast_in_dim[shape=(37, 3) broadcast_dimensions=(0,)] w
        t:f32[37,3] = tanh vb
        u:f32[37,3] = add s t
        y:f32[37] = mul w x
      in (u, y, t, w) }}] s0 v0 xs
  in (fs, fv, ys, zs) }}"
        )
    };
    for length in [1, 7] {
        let args = [f32s(&[37, 3], 1, 1.0), f32s(&[37], 2, 1.0), f32s(&[length, 37], 3, 1.0)];
        assert!(check(&body(length), &args, 1e-5), "length {length}");
    }
    // No carry: the steps are independent (ys only), here in reverse.
    let free = "{ lambda xs:f32[5,37] . let
    ys:f32[5,37] = scan[length=5 reverse=true num_consts=0 num_carry=0 body={ lambda x:f32[37] . let
        e:f32[37] = exp x
      in (e) }] xs
  in (ys) }";
    assert!(check(free, &[f32s(&[5, 37], 4, 1.0)], 1e-6));
}

#[test]
fn an_empty_batch_runs_and_is_not_split() {
    // No environments: the loop runs on empty rows, as the interpreter does, with nothing to split.
    let src = policy_step(false).replace("37", "0");
    let args = [
        Array::from_vec(&[4], vec![0.5f32, 1.0, 2.0, -0.3]),
        Array::scalar(0.1f32),
        f32s(&[0, 4], 7, 0.1),
        f32s(&[30, 0], 9, 0.01),
    ];
    assert!(!check(&src, &args, 1e-5));
}
