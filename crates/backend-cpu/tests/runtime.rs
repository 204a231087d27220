//! The runtime: thread-count determinism of parallel kernels, the O(n) cumulative routine against the
//! interpreter, sort without per-step allocation, the debug dump, and `cost_report` on hand-computed
//! programs.

mod common;

use kiln_backend_cpu::{CompileOptions, Executable, compile_with, estimate};
use kiln_ir::*;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Counts allocations made by threads that opted in (other tests run in parallel threads).
struct Counting;
static ALLOCS: AtomicUsize = AtomicUsize::new(0);
static BYTES: AtomicUsize = AtomicUsize::new(0);
thread_local! {
    static COUNTED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}
// SAFETY: forwards to the system allocator; the counter has no effect on the memory handed out.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        if COUNTED.with(|c| c.get()) {
            ALLOCS.fetch_add(1, Ordering::Relaxed);
            BYTES.fetch_add(l.size(), Ordering::Relaxed);
        }
        // SAFETY: the caller upholds `alloc`'s contract.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: `p` came from `System.alloc` with layout `l`.
        unsafe { System.dealloc(p, l) }
    }
}
#[global_allocator]
static GLOBAL: Counting = Counting;

/// Allocations made by this thread while `f` runs.
fn allocations(f: impl FnOnce()) -> usize {
    let before = ALLOCS.load(Ordering::Relaxed);
    COUNTED.with(|c| c.set(true));
    f();
    COUNTED.with(|c| c.set(false));
    ALLOCS.load(Ordering::Relaxed) - before
}

/// Bytes allocated by this thread while `f` runs.
fn allocated_bytes(f: impl FnOnce()) -> usize {
    let before = BYTES.load(Ordering::Relaxed);
    COUNTED.with(|c| c.set(true));
    f();
    COUNTED.with(|c| c.set(false));
    BYTES.load(Ordering::Relaxed) - before
}

fn opts(threads: usize, min_task_work: Option<u64>) -> CompileOptions {
    CompileOptions { threads: Some(threads), dump_dir: None, min_task_work, multi_output: true }
}

fn f32s(dims: &[usize], seed: u32) -> Array {
    let n: usize = dims.iter().product();
    // A deterministic spread of values in [-2, 2).
    let v = (0..n as u32).map(|i| ((i.wrapping_mul(2_654_435_761) ^ seed) % 4000) as f32 / 1000.0 - 2.0);
    Array::from_vec(dims, v.collect())
}

fn unary(f: &mut Function, op: UnaryOp, x: Var) -> Var {
    f.push(Prim::Unary(op), &[x], None).unwrap()[0]
}
fn binary(f: &mut Function, op: BinaryOp, x: Var, y: Var) -> Var {
    f.push(Prim::Binary(op), &[x, y], None).unwrap()[0]
}
fn scalar_const(f: &mut Function, v: f32, dims: &[usize]) -> Var {
    let c = f.add_const(Array::from_vec(&[], vec![v]));
    let b = Prim::BroadcastInDim { shape: Shape::new(dims), broadcast_dimensions: vec![] };
    f.push(b, &[c], None).unwrap()[0]
}

/// Runs `f` compiled with 1, 2 and 4 threads (at the default threshold, and splitting every kernel)
/// and checks all results are bitwise equal to each other, and equal to the interpreter's (with the
/// JIT's vmath transcendentals, `common::eval_vmath_bound`) within its reassociation bound for sums
/// over an innermost axis (0, so bitwise, when there is none).
fn same_for_every_thread_count(f: &Function, args: &[Array]) {
    let (want, bound) = common::eval_vmath_bound(f, args);
    let serial = compile_with(f, &opts(1, Some(u64::MAX))).unwrap().run(args).unwrap();
    for (g, w) in serial.iter().zip(&want) {
        let close = g
            .to_f64_vec()
            .iter()
            .zip(w.to_f64_vec())
            .all(|(&a, b)| common::same(a, b) || (a - b).abs() <= bound);
        assert!(close && g.ty() == w.ty(), "serial run differs from the interpreter (bound {bound})");
    }
    for (threads, min) in [(1, None), (2, None), (4, None), (2, Some(0)), (4, Some(0)), (3, Some(1000))] {
        let got = compile_with(f, &opts(threads, min)).unwrap().run(args).unwrap();
        for (g, s) in got.iter().zip(&serial) {
            assert!(g.bitwise_eq(s), "{threads} threads (min task work {min:?}) differ from one thread");
        }
    }
}

/// The plan listing of `f` compiled with `o` (through the dump).
fn plan_text(f: &Function, o: CompileOptions) -> String {
    let dir = tempfile::tempdir().unwrap();
    compile_with(f, &CompileOptions { dump_dir: Some(dir.path().to_path_buf()), ..o }).unwrap();
    let folder = std::fs::read_dir(dir.path()).unwrap().next().unwrap().unwrap().path();
    std::fs::read_to_string(folder.join("plan.txt")).unwrap()
}

#[test]
fn big_elementwise_kernels_give_the_same_bits_for_any_thread_count() {
    // exp(x)*y + x on 600×1000: ~600k elements × 22 units, well above the default threshold.
    let dims = [600, 1000];
    let mut f = Function::new();
    let x = f.add_param(TensorType::new(DType::F32, dims));
    let y = f.add_param(TensorType::new(DType::F32, dims));
    let e = unary(&mut f, UnaryOp::Exp, x);
    let m = binary(&mut f, BinaryOp::Mul, e, y);
    let s = binary(&mut f, BinaryOp::Add, m, x);
    f.outputs.push(s);
    let plan = plan_text(&f, opts(2, None));
    assert!(plan.contains("parallel, 2 tasks"), "the default threshold keeps it serial:\n{plan}");
    assert!(plan_text(&f, opts(1, None)).contains("serial"));
    same_for_every_thread_count(&f, &[f32s(&dims, 1), f32s(&dims, 2)]);
}

#[test]
fn small_kernels_stay_serial() {
    let mut f = Function::new();
    let x = f.add_param(TensorType::new(DType::F32, [100, 10]));
    let y = binary(&mut f, BinaryOp::Mul, x, x);
    f.outputs.push(y);
    let plan = plan_text(&f, opts(4, None));
    assert!(plan.contains("serial") && !plan.contains("parallel,"), "{plan}");
}

#[test]
fn reductions_over_an_inner_axis_give_the_same_bits_for_any_thread_count() {
    // sum(x * x, axis 1) of 512×2048: each output row folds 2048 products on one thread.
    let dims = [512, 2048];
    let mut f = Function::new();
    let x = f.add_param(TensorType::new(DType::F32, dims));
    let sq = binary(&mut f, BinaryOp::Mul, x, x);
    let r = f.push(Prim::Reduce { op: ReduceOp::Sum, axes: vec![1] }, &[sq], None).unwrap()[0];
    f.outputs.push(r);
    assert!(plan_text(&f, opts(2, None)).contains("parallel, 2 tasks"));
    same_for_every_thread_count(&f, &[f32s(&dims, 3)]);
}

/// A scan of `length` steps over a carry of `dims` whose body is `c*0.5 + sin(c)` (a big kernel).
fn big_scan(length: usize, dims: &[usize]) -> Function {
    let ty = TensorType::new(DType::F32, dims);
    let mut body = Function::new();
    let c = body.add_param(ty.clone());
    let half = scalar_const(&mut body, 0.5, dims);
    let h = binary(&mut body, BinaryOp::Mul, c, half);
    let s = unary(&mut body, UnaryOp::Sin, c);
    let n = binary(&mut body, BinaryOp::Add, h, s);
    body.outputs.push(n);
    let mut f = Function::new();
    let c0 = f.add_param(ty);
    let scan = Prim::Scan { length, reverse: false, num_consts: 0, num_carry: 1, body: Box::new(body) };
    let outs = f.push(scan, &[c0], None).unwrap();
    f.outputs.extend(outs);
    f
}

#[test]
fn a_scan_with_big_kernels_gives_the_same_bits_for_any_thread_count() {
    let dims = [512, 1024];
    let f = big_scan(3, &dims);
    same_for_every_thread_count(&f, &[f32s(&dims, 4)]);
}

/// `op` along `axis` of `x` compiled and interpreted: bitwise equal.
fn check_cumulative(op: CumulativeOp, x: &Array, axis: usize, reverse: bool) {
    let mut f = Function::new();
    let p = f.add_param(x.ty());
    let y = f.push(Prim::Cumulative { op, axis, reverse }, &[p], None).unwrap()[0];
    f.outputs.push(y);
    let want = eval(&f, std::slice::from_ref(x)).unwrap();
    let exe = compile_with(&f, &opts(1, None)).unwrap();
    assert_eq!(exe.kernel_count(), 0, "cumulative ops are runtime steps, not kernels");
    let got = exe.run(std::slice::from_ref(x)).unwrap();
    assert!(
        got[0].bitwise_eq(&want[0]),
        "{} axis {axis} reverse {reverse} on {}:\n jit  {:?}\n want {:?}",
        op.name(),
        x.ty(),
        got[0],
        want[0]
    );
}

/// `n` values of `dt`, with NaN, ±inf and -0.0 among the floats.
fn values(dt: DType, dims: &[usize]) -> Array {
    let n: usize = dims.iter().product();
    let special = [1.5, -0.0, 2.0, f64::NAN, -3.0, f64::INFINITY, 0.0, -1.0, f64::NEG_INFINITY, 0.5, -0.0];
    let f = |i: usize| if i % 7 == 3 { special[i % special.len()] } else { (i % 11) as f64 * 0.37 - 1.6 };
    match dt {
        DType::F32 => Array::from_vec(dims, (0..n).map(|i| f(i) as f32).collect()),
        DType::F64 => Array::from_vec(dims, (0..n).map(f).collect()),
        DType::I32 => Array::from_vec(dims, (0..n).map(|i| (i as i32 * 7919 % 101) - 50).collect()),
        DType::U32 => Array::from_vec(dims, (0..n).map(|i| (i as u32).wrapping_mul(2_654_435_761)).collect()),
        DType::Bool => Array::from_vec(dims, (0..n).map(|i| i % 3 != 0).collect()),
    }
}

#[test]
fn cumulative_ops_match_the_interpreter_bitwise() {
    let shapes: [&[usize]; 7] = [&[1], &[5], &[1000], &[4, 5], &[3, 4, 5], &[2, 1000, 3], &[0, 3]];
    // Bool is not numeric: the shape rule rejects cumulative ops on it.
    for dt in [DType::F32, DType::F64, DType::I32, DType::U32] {
        for dims in shapes {
            let x = values(dt, dims);
            for axis in 0..dims.len() {
                for op in CumulativeOp::ALL {
                    for reverse in [false, true] {
                        check_cumulative(op, &x, axis, reverse);
                    }
                }
            }
        }
    }
}

#[test]
fn cumulative_ops_on_hand_computed_values() {
    let run = |op, x: Vec<f32>, reverse| {
        let x = Array::from_vec(&[x.len()], x);
        let mut f = Function::new();
        let p = f.add_param(x.ty());
        let y = f.push(Prim::Cumulative { op, axis: 0, reverse }, &[p], None).unwrap()[0];
        f.outputs.push(y);
        match &compile_with(&f, &opts(1, None)).unwrap().run(&[x]).unwrap()[0] {
            Array::F32(a) => a.iter().copied().collect::<Vec<f32>>(),
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(run(CumulativeOp::Sum, vec![1.0, 2.0, 3.0], false), [1.0, 3.0, 6.0]);
    assert_eq!(run(CumulativeOp::Sum, vec![1.0, 2.0, 3.0], true), [6.0, 5.0, 3.0]);
    assert_eq!(run(CumulativeOp::Prod, vec![2.0, 3.0, 4.0], false), [2.0, 6.0, 24.0]);
    assert_eq!(run(CumulativeOp::Max, vec![1.0, 3.0, 2.0], false), [1.0, 3.0, 3.0]);
    assert_eq!(run(CumulativeOp::Min, vec![1.0, 3.0, 0.5], true), [0.5, 0.5, 0.5]);
    let nan = run(CumulativeOp::Max, vec![1.0, f32::NAN, 5.0], false);
    assert!(nan[0] == 1.0 && nan[1].is_nan() && nan[2].is_nan(), "NaN propagates: {nan:?}");
    // 0.0 + -0.0 is +0.0: the scan starts from the identity, as the interpreter.
    assert!(run(CumulativeOp::Sum, vec![-0.0], false)[0].is_sign_positive());
}

/// A scan of `length` steps whose body sorts its f32[64] carry negated (so every step reorders).
fn sorting_scan(length: usize) -> Function {
    let ty = TensorType::new(DType::F32, [64]);
    let mut body = Function::new();
    let c = body.add_param(ty.clone());
    let n = unary(&mut body, UnaryOp::Neg, c);
    let s = body.push(Prim::Sort { dimension: 0, num_keys: 1 }, &[n], None).unwrap()[0];
    body.outputs.push(s);
    let mut f = Function::new();
    let c0 = f.add_param(ty);
    let scan = Prim::Scan { length, reverse: false, num_consts: 0, num_carry: 1, body: Box::new(body) };
    let outs = f.push(scan, &[c0], None).unwrap();
    f.outputs.extend(outs);
    f
}

#[test]
fn a_sort_in_a_scan_allocates_nothing_per_step() {
    let x = f32s(&[64], 5);
    let per_call = |length: usize| {
        let f = sorting_scan(length);
        let exe: Executable = compile_with(&f, &opts(1, None)).unwrap();
        let want = eval(&f, std::slice::from_ref(&x)).unwrap();
        let got = exe.run(std::slice::from_ref(&x)).unwrap(); // warm: the arena is now pooled
        assert!(got[0].bitwise_eq(&want[0]), "sort scan of {length} steps differs from the interpreter");
        allocations(|| drop(exe.run(std::slice::from_ref(&x)).unwrap()))
    };
    let (short, long) = (per_call(3), per_call(3000));
    assert_eq!(short, long, "a 3000-step scan allocated {long} times per call, a 3-step one {short}");
}

/// Integer and bool keys sort by a radix sort (`runtime/sort.rs`): stable, so a payload of positions
/// shows ties in input order; extremes, many duplicates, lanes along an outer and an inner axis,
/// and a constant high byte (a skipped pass) all give the interpreter's comparison sort bit for bit.
#[test]
fn integer_keys_radix_sort_as_the_interpreters_stable_sort() {
    let n = 3001usize;
    let hash = |i: usize, seed: u32| (i as u32).wrapping_mul(2_654_435_761) ^ seed;
    let i32_keys: Vec<i32> = (0..n)
        .map(|i| match i % 7 {
            0 => i32::MIN,
            1 => i32::MAX,
            2 => -1,
            _ => (hash(i, 3) % 50) as i32 - 25,
        })
        .collect();
    let u32_keys: Vec<u32> = (0..n).map(|i| if i % 5 == 0 { u32::MAX } else { hash(i, 9) >> 8 }).collect();
    let small: Vec<i32> = (0..n).map(|i| (hash(i, 1) % 100_000) as i32).collect(); // top byte constant
    let bools: Vec<bool> = (0..n).map(|i| hash(i, 4) % 3 == 0).collect();
    let positions = Array::from_vec(&[n], (0..n as i32).collect::<Vec<_>>());
    let cases = [
        Array::from_vec(&[n], i32_keys.clone()),
        Array::from_vec(&[n], u32_keys),
        Array::from_vec(&[n], small),
        Array::from_vec(&[n], bools),
    ];
    let sort = |keys: &Array, payload: &Array, dimension: usize| {
        let mut f = Function::new();
        let (k, p) = (f.add_param(keys.ty()), f.add_param(payload.ty()));
        f.outputs = f.push(Prim::Sort { dimension, num_keys: 1 }, &[k, p], None).unwrap().to_vec();
        let args = [keys.clone(), payload.clone()];
        let want = eval(&f, &args).unwrap();
        let got = compile_with(&f, &opts(2, None)).unwrap().run(&args).unwrap();
        for (g, w) in got.iter().zip(&want) {
            assert!(g.bitwise_eq(w), "sort of {} keys along {dimension}: {g:?} against {w:?}", keys.ty());
        }
        // Lanes of 2^16 positions and more split into ranges over threads (every split forced
        // here): the same bits for 2, 3 and 16 ranges.
        for threads in [2, 3, 16] {
            let split = compile_with(&f, &opts(threads, Some(0))).unwrap().run(&args).unwrap();
            for (g, w) in split.iter().zip(&want) {
                assert!(g.bitwise_eq(w), "{threads} threads, {} keys along {dimension}", keys.ty());
            }
        }
        got
    };
    // The positions payload (argsort's iota) is written from the sort's words; an int payload that
    // is not one (its last element differs) is permuted like any other.
    let almost: Vec<i32> = (0..n as i32).map(|i| if i == n as i32 - 1 { 0 } else { i }).collect();
    let almost = Array::from_vec(&[n], almost);
    for keys in &cases {
        sort(keys, &positions, 0);
        sort(keys, &almost, 0);
    }
    // By hand: ties keep input order, i32::MIN first.
    let got = sort(
        &Array::from_vec(&[5], vec![3i32, -1, 3, i32::MIN, -1]),
        &Array::from_vec(&[5], vec![0i32, 1, 2, 3, 4]),
        0,
    );
    assert_eq!(got[0].to_vec::<i32>().unwrap(), [i32::MIN, -1, -1, 3, 3]);
    assert_eq!(got[1].to_vec::<i32>().unwrap(), [3, 1, 4, 0, 2]);
    // Lanes: [3, 1000] along its last axis, [1000, 3] along its first (strided lanes), f32 payload.
    let keys: Vec<i32> = i32_keys[..3000].to_vec();
    let payload = f32s(&[3000], 7).to_vec::<f32>().unwrap();
    sort(&Array::from_vec(&[3, 1000], keys.clone()), &Array::from_vec(&[3, 1000], payload.clone()), 1);
    sort(&Array::from_vec(&[1000, 3], keys.clone()), &Array::from_vec(&[1000, 3], payload.clone()), 0);
    // Long lanes (split over threads): 70000 positions, one with an outer and an inner stride.
    let long = |n: usize| -> Vec<i32> { (0..n).map(|i| (hash(i, 5) % 20_000) as i32 - 10_000).collect() };
    let big = Array::from_vec(&[70_000], long(70_000));
    sort(&big, &Array::from_vec(&[70_000], (0..70_000).collect::<Vec<i32>>()), 0);
    sort(&big, &Array::from_vec(&[70_000], f32s(&[70_000], 3).to_vec::<f32>().unwrap()), 0);
    let wide = Array::from_vec(&[2, 70_000, 2], long(280_000));
    sort(&wide, &Array::from_vec(&[2, 70_000, 2], f32s(&[280_000], 4).to_vec::<f32>().unwrap()), 1);
    // Lanes with both an outer and an inner stride: [2, 500, 3] along its middle axis.
    sort(&Array::from_vec(&[2, 500, 3], keys), &Array::from_vec(&[2, 500, 3], payload), 1);
}

#[test]
fn the_dump_holds_the_ir_the_plan_and_the_bodies() {
    let dir = tempfile::tempdir().unwrap();
    let f = big_scan(2, &[4, 8]);
    let o = CompileOptions {
        threads: Some(1),
        dump_dir: Some(dir.path().to_path_buf()),
        min_task_work: None,
        multi_output: true,
    };
    compile_with(&f, &o).unwrap();
    let folders: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(folders.len(), 1, "one folder per compiled function: {folders:?}");
    let top = &folders[0];
    let ir = std::fs::read_to_string(top.join("ir.kir")).unwrap();
    assert_eq!(ir.trim(), f.to_string().trim());
    assert!(parse(&ir).is_ok(), "ir.kir parses back");
    let plan = std::fs::read_to_string(top.join("plan.txt")).unwrap();
    assert!(plan.contains("runtime #0 scan") && plan.contains("runs 2 times"), "{plan}");
    let body = top.join("step0-scan-body");
    let body_plan = std::fs::read_to_string(body.join("plan.txt")).unwrap();
    assert!(body_plan.contains("kernel 0") && body_plan.contains("root     #"), "{body_plan}");
    assert!(body_plan.contains("inlined  #") && body_plan.contains("arena"), "{body_plan}");
    assert!(std::fs::read_to_string(body.join("ir.kir")).unwrap().contains("sin"));
    // Each kernel step names its symbol (`kiln<module>_kernel<k>`, as a profile shows it), the
    // one its Cranelift IR file is headed with.
    let line = body_plan.lines().find(|l| l.contains(": kernel 0 (")).expect("kernel 0's line");
    let symbol = line.split('(').nth(1).and_then(|r| r.strip_suffix(')')).expect("a symbol");
    assert!(symbol.starts_with("kiln") && symbol.ends_with("_kernel0"), "{line}");
    let clif = std::fs::read_to_string(body.join("kernel0.clif")).unwrap();
    assert!(clif.starts_with(&format!("; {symbol}:")), "{}", &clif[..clif.len().min(200)]);
}

/// Two executables' kernels have different symbols (a profile tells them apart).
#[test]
fn kernel_symbols_differ_between_executables() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let first_symbol = |dir: &std::path::Path| {
        let o = CompileOptions {
            threads: Some(1),
            dump_dir: Some(dir.to_path_buf()),
            min_task_work: None,
            multi_output: true,
        };
        compile_with(&big_scan(1, &[2]), &o).unwrap();
        let top = std::fs::read_dir(dir).unwrap().next().unwrap().unwrap().path();
        let plan = std::fs::read_to_string(top.join("step0-scan-body").join("plan.txt")).unwrap();
        let line = plan.lines().find(|l| l.contains(": kernel 0 (")).expect("kernel 0's line").to_owned();
        line.split('(').nth(1).unwrap().trim_end_matches(')').to_owned()
    };
    assert_ne!(first_symbol(a.path()), first_symbol(b.path()));
}

#[test]
fn a_dump_that_cannot_be_written_does_not_fail_compilation() {
    let file = tempfile::NamedTempFile::new().unwrap();
    // A folder inside a regular file cannot be created.
    let o = CompileOptions {
        threads: Some(1),
        dump_dir: Some(file.path().join("sub")),
        min_task_work: None,
        multi_output: true,
    };
    let f = big_scan(1, &[2]);
    let exe = compile_with(&f, &o).expect("compiles despite the dump failing");
    let x = Array::from_vec(&[2], vec![1.0f32, 2.0]);
    assert!(exe.run(std::slice::from_ref(&x)).unwrap()[0].bitwise_eq(&eval(&f, &[x]).unwrap()[0]));
}

#[test]
fn cost_report_of_x_times_y_plus_one() {
    let dims = [1000];
    let mut f = Function::new();
    let x = f.add_param(TensorType::new(DType::F32, dims));
    let y = f.add_param(TensorType::new(DType::F32, dims));
    let one = scalar_const(&mut f, 1.0, &dims);
    let m = binary(&mut f, BinaryOp::Mul, x, y);
    let s = binary(&mut f, BinaryOp::Add, m, one);
    f.outputs.push(s);
    let r = compile_with(&f, &opts(1, None)).unwrap().cost_report();
    assert_eq!((r.kernels, r.runtime_steps, r.while_loops), (1, 0, 0));
    // One fused kernel: reads x, y (4000 bytes each) and the f32 constant (4), writes its 4000 bytes
    // straight into the returned array.
    assert_eq!(r.bytes_moved, 4000 + 4000 + 4 + 4000);
    assert_eq!(r.flops, 2 * 1000, "a mul and an add per element");
    assert_eq!(r.arena_bytes, 4032, "the output's spill slot for donation, rounded up to 64 bytes");
    assert!(r.compile_time.as_nanos() > 0);
    let text = r.to_string();
    assert!(
        text.contains("1 kernels") && text.contains("12004 bytes") && text.contains("2000 flops"),
        "{text}"
    );
}

#[test]
fn cost_report_multiplies_a_scan_body_by_its_length() {
    // 10 steps of c*0.5 + sin(c) on f32[100].
    let r = compile_with(&big_scan(10, &[100]), &opts(1, None)).unwrap().cost_report();
    assert_eq!((r.kernels, r.runtime_steps), (1, 1), "the body's kernel and the scan step");
    // Per step: the kernel reads c (400) and 0.5 (4) and writes 400 straight into the next carry
    // buffer (the last step into the returned array). Nothing else is copied.
    assert_eq!(r.bytes_moved, 10 * (400 + 4 + 400));
    assert_eq!(r.flops, 10 * 100 * 3, "mul, sin, add per element per step");
    // `estimate` gives the same counts without generating code (the scan body included).
    let e = estimate(&big_scan(10, &[100])).unwrap();
    assert_eq!(
        (e.kernels, e.runtime_steps, e.bytes_moved, e.flops),
        (r.kernels, r.runtime_steps, r.bytes_moved, r.flops)
    );
}

#[test]
fn cost_report_counts_gemm_flops() {
    // Contracting size 20 > SMALL_DOT_CONTRACTION (16): a gemm step, not a kernel.
    let mut f = Function::new();
    let a = f.add_param(TensorType::new(DType::F32, [3, 20]));
    let b = f.add_param(TensorType::new(DType::F32, [20, 5]));
    let dot = Prim::DotGeneral {
        lhs_contracting: vec![1],
        rhs_contracting: vec![0],
        lhs_batch: vec![],
        rhs_batch: vec![],
        preferred_element_type: None,
    };
    let c = f.push(dot, &[a, b], None).unwrap()[0];
    f.outputs.push(c);
    let r = compile_with(&f, &opts(1, None)).unwrap().cost_report();
    assert_eq!((r.kernels, r.runtime_steps, r.flops), (0, 1, 2 * 3 * 20 * 5));
    // Row-major operands read in place by the gemm (240 + 400), the 60-byte product written in place.
    assert_eq!(r.bytes_moved, 240 + 400 + 60);
}

#[test]
fn steady_calls_reuse_the_arena_and_allocate_only_their_results() {
    // cumsum(x) (a runtime step into a 1 MiB arena buffer), then * 2 (a kernel into the result).
    let n = 1 << 18;
    let mut f = Function::new();
    let x = f.add_param(TensorType::new(DType::F32, [n]));
    let c =
        f.push(Prim::Cumulative { op: CumulativeOp::Sum, axis: 0, reverse: false }, &[x], None).unwrap()[0];
    let two = scalar_const(&mut f, 2.0, &[n]);
    let y = binary(&mut f, BinaryOp::Mul, c, two);
    f.outputs.push(y);
    let exe = compile_with(&f, &opts(1, None)).unwrap();
    let arena = exe.cost_report().arena_bytes;
    assert!(arena >= 4 * n, "the cumsum buffer lives in the arena ({arena} bytes)");
    let arg = f32s(&[n], 12);
    let want = eval(&f, std::slice::from_ref(&arg)).unwrap();
    let first =
        allocated_bytes(|| assert!(exe.run(std::slice::from_ref(&arg)).unwrap()[0].bitwise_eq(&want[0])));
    let steady =
        allocated_bytes(|| assert!(exe.run(std::slice::from_ref(&arg)).unwrap()[0].bitwise_eq(&want[0])));
    assert!(first >= arena + 4 * n, "the first call allocates the arena and the result ({first} bytes)");
    assert!(
        steady < 4 * n + 4096,
        "a steady call allocates its 1 MiB result and a few words ({steady} bytes)"
    );
}

/// `segment_sum` of `data` by `ids` into `segments`, as a one-equation function.
fn segment_sum_fn(data: &Array, ids: &Array, segments: usize) -> Function {
    let mut f = Function::new();
    let d = f.add_param(data.ty());
    let i = f.add_param(ids.ty());
    let out = f.push(Prim::SegmentSum { num_segments: segments }, &[d, i], None).unwrap();
    f.outputs = out.to_vec();
    f
}

#[test]
fn segment_sums_over_sorted_and_unsorted_ids_give_the_same_bits_for_any_thread_count() {
    // Destination-sorted edges as a graph has them: runs of equal ids of varied length (some
    // segments empty, one run long enough to swallow a nominal cut), out-of-range ids at both ends.
    let n = 20_000;
    let mut sorted: Vec<i32> = (0..n as i32).map(|k| if k < 5 { -1 } else { (k / 7) * 2 }).collect();
    sorted[6_000..12_000].iter_mut().for_each(|i| *i = 1_700);
    sorted[n - 3..].iter_mut().for_each(|i| *i = 9_999);
    let unsorted: Vec<i32> = (0..n as i32).map(|k| (k * 7919) % 2_900 - 3).collect();
    for ids in [sorted, unsorted] {
        let ids = Array::from_vec(&[n], ids);
        for data in [f32s(&[n], 3), f32s(&[n, 3], 5)] {
            let f = segment_sum_fn(&data, &ids, 2_900);
            let args = [data, ids.clone()];
            same_for_every_thread_count(&f, &args);
            // The interpreter adds rows in order: bitwise equal, not just close.
            let want = eval(&f, &args).unwrap();
            let got = compile_with(&f, &opts(4, Some(0))).unwrap().run(&args).unwrap();
            assert!(got[0].bitwise_eq(&want[0]));
        }
    }
}

#[test]
fn segment_sums_by_hand_with_forced_splits() {
    // ids [0,0,1,1,1,3,3,5(dropped: 4 segments)] over [1..8]: [1+2, 3+4+5, 0, 6+7] = [3, 12, 0, 13].
    let data = Array::from_vec(&[8], vec![1.0f32, 2., 3., 4., 5., 6., 7., 8.]);
    let ids = Array::from_vec(&[8], vec![0i32, 0, 1, 1, 1, 3, 3, 5]);
    let f = segment_sum_fn(&data, &ids, 4);
    for threads in [2, 3, 4] {
        let got =
            compile_with(&f, &opts(threads, Some(0))).unwrap().run(&[data.clone(), ids.clone()]).unwrap();
        assert_eq!(got[0], Array::from_vec(&[4], vec![3.0f32, 12., 0., 13.]));
    }
}

/// Message passing `segment_sum(table[wrap(src)] * w[e] * -1.5, dst)`: `table: [nodes]` of `dt`,
/// `src`, `dst`: i32 `[edges]`, with jnp's negative-index wrap `select(src < 0, src + nodes, src)`.
fn message_pass_fn(dt: DType, nodes: usize, edges: usize, segments: usize) -> Function {
    let mut f = Function::new();
    let table = f.add_param(TensorType::new(dt, Shape::new(&[nodes])));
    let src = f.add_param(TensorType::new(DType::I32, Shape::new(&[edges])));
    let dst = f.add_param(TensorType::new(DType::I32, Shape::new(&[edges])));
    let w = f.add_param(TensorType::new(dt, Shape::new(&[edges])));
    let push = |f: &mut Function, p: Prim, ins: &[Var]| f.push(p, ins, None).unwrap()[0];
    let zero = f.add_const(Array::from_vec(&[], vec![0i32]));
    let n = f.add_const(Array::from_vec(&[], vec![nodes as i32]));
    let bc = || Prim::BroadcastInDim { shape: Shape::new(&[edges]), broadcast_dimensions: vec![] };
    let z = push(&mut f, bc(), &[zero]);
    let nb = push(&mut f, bc(), &[n]);
    let neg = push(&mut f, Prim::Compare(CompareOp::Lt), &[src, z]);
    let up = push(&mut f, Prim::Binary(BinaryOp::Add), &[src, nb]);
    let idx = push(&mut f, Prim::Select, &[neg, up, src]);
    let g = push(&mut f, Prim::Gather { axis: 0, batch_dims: 0, mode: IndexMode::Clip }, &[table, idx]);
    let gw = push(&mut f, Prim::Binary(BinaryOp::Mul), &[g, w]);
    let k = f.add_const(match dt {
        DType::F32 => Array::scalar(-1.5f32),
        _ => Array::scalar(-1.5f64),
    });
    let kb = push(&mut f, bc(), &[k]);
    let m = push(&mut f, Prim::Binary(BinaryOp::Mul), &[gw, kb]);
    let out = push(&mut f, Prim::SegmentSum { num_segments: segments }, &[m, dst]);
    f.outputs.push(out);
    f
}

#[test]
fn message_passing_is_one_kernel_bitwise_equal_to_the_interpreter_for_any_ids_and_threads() {
    // 3 000 edges into 500 segments: destination-sorted (a CSR graph, with dropped ids -2 and 500
    // at the ends), the same ids unsorted (every parallel range meets another's segment: the
    // kernel falls back to one thread), and sources that are negative (wrapped) or past the end
    // (clipped). Messages include NaN, inf (also inf·0 = NaN) and -0.0 (0 times -1).
    let (nodes, edges, segments) = (400usize, 3_000usize, 500usize);
    let mut sorted: Vec<i32> = (0..edges as i32).map(|k| (k * 499 / edges as i32).min(499)).collect();
    sorted[..3].iter_mut().for_each(|i| *i = -2);
    sorted[edges - 4..].iter_mut().for_each(|i| *i = 500);
    let mut unsorted = sorted.clone();
    unsorted.reverse();
    let src: Vec<i32> = (0..edges as i32).map(|k| (k * 7919) % 450 - 30).collect();
    for dt in [DType::F32, DType::F64] {
        let mut table: Vec<f64> = (0..nodes).map(|i| ((i * 37) % 100) as f64 / 25.0 - 2.0).collect();
        table[3] = f64::NAN;
        table[4] = f64::INFINITY;
        table[5] = 0.0;
        let w: Vec<f64> = (0..edges).map(|k| if k % 11 == 0 { -1.0 } else { (k % 5) as f64 * 0.5 }).collect();
        let arr = |v: &[f64]| -> Array {
            match dt {
                DType::F32 => Array::from_vec(&[v.len()], v.iter().map(|&x| x as f32).collect::<Vec<_>>()),
                _ => Array::from_vec(&[v.len()], v.to_vec()),
            }
        };
        let f = message_pass_fn(dt, nodes, edges, segments);
        for dst in [&sorted, &unsorted] {
            let args = [
                arr(&table),
                Array::from_vec(&[edges], src.clone()),
                Array::from_vec(&[edges], dst.clone()),
                arr(&w),
            ];
            let want = eval(&f, &args).unwrap();
            for (threads, min) in [(1, None), (2, Some(0)), (3, Some(0)), (4, Some(0))] {
                let exe = compile_with(&f, &opts(threads, min)).unwrap();
                let r = exe.cost_report();
                assert_eq!(
                    (r.kernels, r.runtime_steps),
                    (1, 0),
                    "{dt:?}: gather, muls and segment_sum in one kernel"
                );
                let e = estimate(&f).unwrap();
                assert_eq!((e.kernels, e.bytes_moved, e.flops), (r.kernels, r.bytes_moved, r.flops));
                let got = exe.run(&args).unwrap();
                assert!(
                    got[0].bitwise_eq(&want[0]),
                    "{dt:?}, {threads} threads: {:?} vs {:?}",
                    got[0],
                    want[0]
                );
            }
        }
    }
}

/// `segment_sum(x + 0, ids)` with `x: f32[n]`, `ids: i32[n]`: a segment kernel with a fused producer.
fn fused_segment_sum_fn(n: usize, segments: usize) -> Function {
    let mut f = Function::new();
    let x = f.add_param(TensorType::new(DType::F32, Shape::new(&[n])));
    let ids = f.add_param(TensorType::new(DType::I32, Shape::new(&[n])));
    let z = scalar_const(&mut f, 0.0, &[n]);
    let m = binary(&mut f, BinaryOp::Add, x, z);
    f.outputs = f.push(Prim::SegmentSum { num_segments: segments }, &[m, ids], None).unwrap().to_vec();
    f
}

/// `segment_sum(x[a] - x[b], ids)` with `x: dt[nodes, ..row]`, `a`, `b`, `ids: i32[edges]`: the
/// mass-spring / GNN shape, a vector message per edge gathered from both ends.
fn vector_message_fn(dt: DType, nodes: usize, edges: usize, row: &[usize], segments: usize) -> Function {
    let mut f = Function::new();
    let table: Vec<usize> = [nodes].iter().chain(row).copied().collect();
    let x = f.add_param(TensorType::new(dt, Shape::new(&table)));
    let a = f.add_param(TensorType::new(DType::I32, Shape::new(&[edges])));
    let b = f.add_param(TensorType::new(DType::I32, Shape::new(&[edges])));
    let ids = f.add_param(TensorType::new(DType::I32, Shape::new(&[edges])));
    let gather = Prim::Gather { axis: 0, batch_dims: 0, mode: kiln_ir::IndexMode::Clip };
    let xa = f.push(gather.clone(), &[x, a], None).unwrap()[0];
    let xb = f.push(gather, &[x, b], None).unwrap()[0];
    let m = binary(&mut f, BinaryOp::Sub, xa, xb);
    f.outputs = f.push(Prim::SegmentSum { num_segments: segments }, &[m, ids], None).unwrap().to_vec();
    f
}

#[test]
fn vector_valued_segment_rows_are_one_kernel_bitwise_equal_to_the_interpreter() {
    // Rows of 2, 3 and 2×2 elements (and 17, past `SEGMENT_ROW_MAX`: the runtime routine), sorted,
    // unsorted and out-of-range ids, NaN/inf in the table, f32 and f64, 1–4 threads.
    let (nodes, edges, segments) = (60usize, 700usize, 50usize);
    let mut sorted: Vec<i32> = (0..edges as i32).map(|k| k * 50 / edges as i32).collect();
    sorted[0] = -1;
    sorted[edges - 1] = 50;
    let unsorted: Vec<i32> = sorted.iter().rev().copied().collect();
    let a: Vec<i32> = (0..edges as i32).map(|k| (k * 31) % 70 - 5).collect();
    let b: Vec<i32> = (0..edges as i32).map(|k| (k * 17 + 3) % nodes as i32).collect();
    for (row, kernel) in [(vec![2], true), (vec![3], true), (vec![2, 2], true), (vec![17], false)] {
        for dt in [DType::F32, DType::F64] {
            let n: usize = nodes * row.iter().product::<usize>();
            let mut v: Vec<f64> = (0..n).map(|i| ((i * 37) % 101) as f64 / 25.0 - 2.0).collect();
            v[7] = f64::NAN;
            v[20] = f64::INFINITY;
            let dims: Vec<usize> = [nodes].iter().chain(&row).copied().collect();
            let table = match dt {
                DType::F32 => Array::from_vec(&dims, v.iter().map(|&x| x as f32).collect::<Vec<_>>()),
                _ => Array::from_vec(&dims, v),
            };
            let f = vector_message_fn(dt, nodes, edges, &row, segments);
            for ids in [&sorted, &unsorted] {
                let args = [
                    table.clone(),
                    Array::from_vec(&[edges], a.clone()),
                    Array::from_vec(&[edges], b.clone()),
                    Array::from_vec(&[edges], ids.clone()),
                ];
                let want = eval(&f, &args).unwrap();
                for (threads, min) in [(1, None), (2, Some(0)), (4, Some(0))] {
                    let exe = compile_with(&f, &opts(threads, min)).unwrap();
                    let r = exe.cost_report();
                    let steps = if kernel { (1, 0) } else { (1, 1) };
                    assert_eq!((r.kernels, r.runtime_steps), steps, "rows {row:?}");
                    let got = exe.run(&args).unwrap();
                    assert!(got[0].bitwise_eq(&want[0]), "{dt:?}, rows {row:?}, {threads} threads");
                }
            }
        }
    }
    // By hand: rows [1, 10] - [0, 0] and [2, 20] - [0, 0] into segment 1, [3, 30] into segment 0.
    let f = vector_message_fn(DType::F32, 4, 3, &[2], 2);
    let x = Array::from_vec(&[4, 2], vec![0.0f32, 0., 1., 10., 2., 20., 3., 30.]);
    let i = |v: Vec<i32>| Array::from_vec(&[3], v);
    let got = compile_with(&f, &opts(1, None)).unwrap().run(&[
        x,
        i(vec![1, 2, 3]),
        i(vec![0; 3]),
        i(vec![1, 1, 0]),
    ]);
    assert_eq!(got.unwrap()[0], Array::from_vec(&[2, 2], vec![3.0f32, 30., 3., 30.]));
}

#[test]
fn segment_kernels_by_hand() {
    // A fused `x + 0` over [1..8]: ids [0,0,1,1,1,3,3,5 (dropped)] into 4 segments give
    // [1+2, 3+4+5, 0, 6+7] = [3, 12, 0, 13]; a negative id is dropped too; unsorted ids (every
    // parallel range meets another's segment) give the sequential sums.
    let f = fused_segment_sum_fn(8, 4);
    let data = Array::from_vec(&[8], vec![1.0f32, 2., 3., 4., 5., 6., 7., 8.]);
    for (ids, want) in [
        (vec![0i32, 0, 1, 1, 1, 3, 3, 5], vec![3.0f32, 12., 0., 13.]),
        (vec![-1i32, 0, 1, 1, 1, 3, 3, 3], vec![2.0f32, 12., 0., 21.]),
        (vec![3i32, 3, 1, 0, 1, 1, 0, 9], vec![11.0f32, 14., 0., 3.]),
    ] {
        for threads in [1, 2, 3, 4] {
            let exe = compile_with(&f, &opts(threads, Some(0))).unwrap();
            assert_eq!(exe.cost_report().kernels, 1);
            let got = exe.run(&[data.clone(), Array::from_vec(&[8], ids.clone())]).unwrap();
            assert_eq!(got[0], Array::from_vec(&[4], want.clone()), "ids {ids:?}, {threads} threads");
        }
    }
}

#[test]
fn segment_kernels_with_dropped_ids_between_sorted_blocks_sum_sequentially() {
    // Regression: a range whose first id is out of range (≥ segments) owned nothing after
    // clamping, and the ranges on both sides then owned the same segments and added into them at
    // once, with no fallback. Ids [0]*m ++ [1]*m ++ [0]*m into 1 segment over 3 threads: the 1s are
    // dropped, out[0] = 2m exactly (every data value 1).
    let m = 200_000;
    let f = fused_segment_sum_fn(3 * m, 1);
    let ids_v: Vec<i32> = (0..3 * m).map(|k| i32::from(k / m == 1)).collect();
    let args = [Array::from_vec(&[3 * m], vec![1.0f32; 3 * m]), Array::from_vec(&[3 * m], ids_v)];
    for threads in [2, 3, 4] {
        for _ in 0..5 {
            let got = compile_with(&f, &opts(threads, Some(0))).unwrap().run(&args).unwrap();
            assert_eq!(got[0], Array::from_vec(&[1], vec![(2 * m) as f32]), "{threads} threads");
        }
    }
    // By hand, 4 threads: ids [0,0,9,9,0,0,0,0] into 4 segments: [1+2+5+6+7+8, 0, 0, 0].
    let g = fused_segment_sum_fn(8, 4);
    let args = [
        Array::from_vec(&[8], vec![1.0f32, 2., 3., 4., 5., 6., 7., 8.]),
        Array::from_vec(&[8], vec![0i32, 0, 9, 9, 0, 0, 0, 0]),
    ];
    let got = compile_with(&g, &opts(4, Some(0))).unwrap().run(&args).unwrap();
    assert_eq!(got[0], Array::from_vec(&[4], vec![29.0f32, 0., 0., 0.]));
    // No rows at all: every segment is 0.
    let e = fused_segment_sum_fn(0, 3);
    let empty = [Array::from_vec(&[0], Vec::<f32>::new()), Array::from_vec(&[0], Vec::<i32>::new())];
    let got = compile_with(&e, &opts(2, Some(0))).unwrap().run(&empty).unwrap();
    assert_eq!(got[0], Array::from_vec(&[3], vec![0.0f32; 3]));
}

#[test]
fn a_stop_gradient_read_by_several_kernels_shares_its_operands_buffer() {
    // sg(x) * 2 and sg(x) + 1 as outputs: two kernels, no third one copying x for the
    // stop_gradient (which is not cheap elementwise work to recompute, so it is materialized).
    let mut f = Function::new();
    let x = f.add_param(TensorType::new(DType::F32, Shape::new(&[1000])));
    let s = f.push(Prim::StopGradient, &[x], None).unwrap()[0];
    let two = scalar_const(&mut f, 2.0, &[1000]);
    let one = scalar_const(&mut f, 1.0, &[1000]);
    let a = binary(&mut f, BinaryOp::Mul, s, two);
    let b = binary(&mut f, BinaryOp::Add, s, one);
    f.outputs = vec![a, b];
    let args = [f32s(&[1000], 9)];
    // One kernel per root (grouped, the two would share one multi-output kernel).
    let exe = compile_with(&f, &CompileOptions { multi_output: false, ..opts(1, None) }).unwrap();
    assert_eq!(exe.cost_report().kernels, 2);
    let got = exe.run(&args).unwrap();
    let xs = args[0].to_vec::<f32>().unwrap();
    assert_eq!(got[0], Array::from_vec(&[1000], xs.iter().map(|v| v * 2.0).collect::<Vec<_>>()));
    assert_eq!(got[1], Array::from_vec(&[1000], xs.iter().map(|v| v + 1.0).collect::<Vec<_>>()));
}

#[test]
fn threefry_over_many_elements_gives_the_same_bits_for_any_thread_count() {
    // 20 000 counters under two keys: split over threads, every element equals the interpreter's.
    let n = 20_000;
    let u = |v: Vec<u32>| Array::from_vec(&[n], v);
    let args = [
        u(vec![0x1234_5678; n]),
        u((0..n as u32).map(|i| i / 1000).collect()),
        u((0..n as u32).collect()),
        u((0..n as u32).map(|i| i.wrapping_mul(2_654_435_761)).collect()),
    ];
    let mut f = Function::new();
    let ps: Vec<Var> = args.iter().map(|a| f.add_param(a.ty())).collect();
    f.outputs = f.push(Prim::Threefry2x32, &ps, None).unwrap().to_vec();
    same_for_every_thread_count(&f, &args);
    // JAX's threefry2x32 test vector: key (0x13198a2e, 0x03707344), counts (0x243f6a88, 0x85a308d3)
    // → (0xc4923a9c, 0x483df7a0).
    let one = |v: u32| Array::from_vec(&[1], vec![v]);
    let kat = [one(0x1319_8a2e), one(0x0370_7344), one(0x243f_6a88), one(0x85a3_08d3)];
    let mut g = Function::new();
    let ps: Vec<Var> = kat.iter().map(|a| g.add_param(a.ty())).collect();
    g.outputs = g.push(Prim::Threefry2x32, &ps, None).unwrap().to_vec();
    let got = compile_with(&g, &opts(2, Some(0))).unwrap().run(&kat).unwrap();
    assert_eq!((got[0].clone(), got[1].clone()), (one(0xc492_3a9c), one(0x483d_f7a0)));
}

#[test]
fn a_function_that_fails_verification_is_refused_not_compiled() {
    // A slice declared `[37]` where it gives `[37, 1]`: the backend trusts declared types, so it
    // must refuse (it used to compile this and compute wrong numbers), at the top and in a body.
    let top = "{ lambda j:i32[37,6] . let
        r:i32[37] = slice[start=(0, 0) limit=(37, 1) strides=(1, 1)] j
      in (r) }";
    let body = "{ lambda j:i32[37,6] . let
    y:i32[2,37] = scan[length=2 reverse=false num_consts=1 num_carry=0 body={ lambda j:i32[37,6] . let
        r:i32[37] = slice[start=(0, 0) limit=(37, 1) strides=(1, 1)] j
      in (r) }] j
  in (y) }";
    for (src, at) in [(top, "eqn 0 (slice)"), (body, "eqn 0 (scan) > body > eqn 0 (slice)")] {
        let f: Function = parse(src).unwrap();
        for err in [compile_with(&f, &opts(1, None)).err(), estimate(&f).err()] {
            let msg = err.expect("refused").to_string();
            assert!(msg.contains(at) && msg.contains("declared i32[37] but slice gives i32[37,1]"), "{msg}");
        }
    }
}
