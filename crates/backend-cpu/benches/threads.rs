//! Measures the parallel-kernel threshold (`MIN_TASK_UNITS` in `src/cost.rs`): per size, a kernel's
//! time on one thread and split in two row ranges over a 2-thread pool, and the work units the
//! plan estimates for it; for `x*y+1`, `exp(x)` and a random gather `x[i]*y` from a source of 64k
//! (in L2) or 1M f32. Also times f32 gemm 784×512×256 (serial in both configurations: gemm
//! threading did not pay off here, see `src/runtime/dot.rs`).
//!
//! `cargo bench -p kiln-backend-cpu --bench threads` (plain timing, fastest of the repetitions: on
//! a shared VM the other core is often busy, and the fastest run is the one that had it free, which
//! is the case the threshold is about).

use kiln_backend_cpu::{CompileOptions, compile_with};
use kiln_ir::{Array, BinaryOp, DType, Function, Prim, TensorType, UnaryOp};
use std::time::Instant;

/// `x*y + 1` (6 units per element: store, mul, add, three leaf loads) or `exp(x)` (18 units: store,
/// call, load).
fn program(rows: usize, cols: usize, exp: bool) -> (Function, Vec<Array>) {
    let mut f = Function::new();
    let ty = TensorType::new(DType::F32, [rows, cols]);
    let x = f.add_param(ty.clone());
    let data: Vec<f32> = (0..rows * cols).map(|i| (i % 97) as f32 * 0.01).collect();
    let arr = Array::from_vec(&[rows, cols], data);
    if exp {
        let y = f.push(Prim::Unary(UnaryOp::Exp), &[x], None).unwrap()[0];
        f.outputs.push(y);
        return (f, vec![arr]);
    }
    let y = f.add_param(ty);
    let one = f.add_const(Array::from_vec(&[], vec![1.0f32]));
    let b = f
        .push(
            Prim::BroadcastInDim { shape: kiln_ir::Shape::new(&[rows, cols]), broadcast_dimensions: vec![] },
            &[one],
            None,
        )
        .unwrap()[0];
    let m = f.push(Prim::Binary(BinaryOp::Mul), &[x, y], None).unwrap()[0];
    let s = f.push(Prim::Binary(BinaryOp::Add), &[m, b], None).unwrap()[0];
    f.outputs.push(s);
    (f, vec![arr.clone(), arr])
}

/// `x[idx] * y` with `idx` pseudo-random over a source of `src` elements (6 units per element:
/// store, gather, mul, three leaf loads): a gather's unit costs a cache access, not a vector lane.
fn gather_program(rows: usize, cols: usize, src: usize) -> (Function, Vec<Array>) {
    let mut f = Function::new();
    let x = f.add_param(TensorType::new(DType::F32, [src]));
    let idx = f.add_param(TensorType::new(DType::I32, [rows, cols]));
    let y = f.add_param(TensorType::new(DType::F32, [rows, cols]));
    let g = f
        .push(Prim::Gather { axis: 0, batch_dims: 0, mode: kiln_ir::IndexMode::Clip }, &[x, idx], None)
        .unwrap()[0];
    let m = f.push(Prim::Binary(BinaryOp::Mul), &[g, y], None).unwrap()[0];
    f.outputs.push(m);
    let mut state = 0x2545_f491u32;
    let ids: Vec<i32> = (0..rows * cols)
        .map(|_| {
            state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            ((state >> 8) as usize % src) as i32
        })
        .collect();
    let xs = Array::from_vec(&[src], (0..src).map(|i| (i % 89) as f32 * 0.01).collect::<Vec<f32>>());
    let ys = Array::from_vec(
        &[rows, cols],
        (0..rows * cols).map(|i| (i % 97) as f32 * 0.01).collect::<Vec<f32>>(),
    );
    (f, vec![xs, Array::from_vec(&[rows, cols], ids), ys])
}

/// The fastest of `reps` runs, in seconds (after one warm-up).
fn time(reps: usize, mut run: impl FnMut()) -> f64 {
    run();
    let mut ts: Vec<f64> = (0..reps)
        .map(|_| {
            let t = Instant::now();
            run();
            t.elapsed().as_secs_f64()
        })
        .collect();
    ts.sort_by(f64::total_cmp);
    ts[0]
}

/// One thread, or `threads` with every kernel split whatever its size (`min_task_work: Some(0)`).
fn options(threads: usize) -> CompileOptions {
    let min_task_work = if threads == 1 { None } else { Some(0) };
    CompileOptions { threads: Some(threads), dump_dir: None, min_task_work, multi_output: true }
}

/// One table row: `f` on one thread and split in two.
fn row(label: &str, f: &Function, args: &[Array], elements: usize, units_per_element: u64) {
    let one = compile_with(f, &options(1)).unwrap();
    let two = compile_with(f, &options(2)).unwrap();
    let units = units_per_element * elements as u64;
    let reps = (2_000_000 / elements).clamp(15, 400);
    let t1 = time(reps, || drop(one.run(args).unwrap()));
    let t2 = time(reps, || drop(two.run(args).unwrap()));
    println!(
        "{label:<10} {elements:>9} {units:>9} {:>13.1} {:>13.1} {:>8.2} {:>8.3}",
        t1 * 1e6,
        t2 * 1e6,
        t1 / t2,
        t1 * 1e9 / units as f64
    );
}

fn main() {
    println!("kernel      elements     units   1 thread µs  2 threads µs  speedup  ns/unit");
    for exp in [false, true] {
        for rows in [16usize, 32, 64, 128, 256, 512, 1024, 2048, 4096] {
            let (f, args) = program(rows, 1024, exp);
            let (label, units) = if exp { ("exp(x)", 18) } else { ("x*y+1", 6) };
            row(label, &f, &args, rows * 1024, units);
        }
    }
    for (label, src) in [("x[i]*y 64k", 1usize << 16), ("x[i]*y 1M", 1 << 20)] {
        for rows in [16usize, 32, 64, 128, 256, 512, 1024, 2048] {
            let (f, args) = gather_program(rows, 1024, src);
            row(label, &f, &args, rows * 1024, 6);
        }
    }
    let (m, k, n) = (784, 512, 256);
    let mut f = Function::new();
    let a = f.add_param(TensorType::new(DType::F32, [m, k]));
    let b = f.add_param(TensorType::new(DType::F32, [k, n]));
    let dot = Prim::DotGeneral {
        lhs_contracting: vec![1],
        rhs_contracting: vec![0],
        lhs_batch: vec![],
        rhs_batch: vec![],
        preferred_element_type: None,
    };
    let c = f.push(dot, &[a, b], None).unwrap()[0];
    f.outputs.push(c);
    let args = vec![
        Array::from_vec(&[m, k], (0..m * k).map(|i| (i % 13) as f32 * 0.1).collect()),
        Array::from_vec(&[k, n], (0..k * n).map(|i| (i % 7) as f32 * 0.1).collect()),
    ];
    let exe = compile_with(&f, &options(1)).unwrap();
    let t = time(30, || drop(exe.run(&args).unwrap()));
    println!(
        "gemm {m}x{k}x{n} f32 (packing included): {:.3} ms ({:.1} GFLOP/s)",
        t * 1e3,
        2.0 * (m * k * n) as f64 / t * 1e-9
    );
}
