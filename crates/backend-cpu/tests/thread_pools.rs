//! Thread pools of `CompileOptions::threads` (one test in its own binary: it counts the process's
//! OS threads, which other tests running alongside would change).
//!
//! Regressions: every distinct thread count built a pool that lived for the rest of the process
//! (compiling with n = 2..=40 and dropping every executable left 820 threads), and `threads:
//! Some(20000)` aborted the process ("failed to set up alternative stack guard page") while rayon
//! spawned the pool.

use kiln_backend_cpu::{CompileOptions, compile_with};
use kiln_ir::{Array, BinaryOp, DType, Function, Prim, TensorType};
use std::time::{Duration, Instant};

/// The process's OS threads (Linux: `/proc/self/status`).
fn os_threads() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("Threads:")).unwrap();
    line["Threads:".len()..].trim().parse().unwrap()
}

/// Waits up to 30 s for the thread count to fall to `at_most` (pool threads exit asynchronously
/// after their pool is dropped); returns the last count seen.
fn settle(at_most: usize) -> usize {
    let start = Instant::now();
    loop {
        let n = os_threads();
        if n <= at_most || start.elapsed() > Duration::from_secs(30) {
            return n;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `x * x + x` over f32[4096]: large enough, with `min_task_work: Some(0)`, to run on the pool.
fn program() -> (Function, Array) {
    let mut f = Function::new();
    let x = f.add_param(TensorType::new(DType::F32, [4096]));
    let sq = f.push(Prim::Binary(BinaryOp::Mul), &[x, x], None).unwrap()[0];
    let y = f.push(Prim::Binary(BinaryOp::Add), &[sq, x], None).unwrap()[0];
    f.outputs.push(y);
    (f, Array::from_vec(&[4096], (0..4096).map(|i| i as f32 * 0.25).collect()))
}

#[test]
fn pools_end_with_their_executables_and_huge_counts_are_clamped() {
    let (f, x) = program();
    let expect: Vec<f32> = (0..4096).map(|i| i as f32 * 0.25).map(|v| v * v + v).collect();
    let opts = |n| CompileOptions { threads: Some(n), min_task_work: Some(0), ..CompileOptions::default() };
    let before = os_threads();

    // A count far beyond what the OS can spawn runs on a clamped pool (256 threads), and right.
    let exe = compile_with(&f, &opts(20_000)).unwrap();
    assert_eq!(exe.run(std::slice::from_ref(&x)).unwrap()[0], Array::from_vec(&[4096], expect.clone()));
    let with_pool = os_threads();
    assert!(with_pool <= before + 256, "{before} threads before, {with_pool} with the pool");
    drop(exe);

    // Many distinct counts, each executable dropped before the next: the pools go with them.
    for n in 2..=40 {
        let exe = compile_with(&f, &opts(n)).unwrap();
        assert_eq!(
            exe.run(std::slice::from_ref(&x)).unwrap()[0],
            Array::from_vec(&[4096], expect.clone()),
            "{n}"
        );
    }
    let after = settle(before + 4);
    assert!(after <= before + 4, "{before} threads before, {after} after dropping every executable");

    // Two executables with the same count share one pool, which outlives the first one dropped.
    // (Threads of the dropped pools may still be exiting, so the count can only fall meanwhile.)
    let a = compile_with(&f, &opts(3)).unwrap();
    let with_a = os_threads();
    let b = compile_with(&f, &opts(3)).unwrap();
    let with_b = os_threads();
    assert!(with_b <= with_a, "{with_a} threads with one 3-thread executable, {with_b} with two");
    drop(a);
    assert_eq!(b.run(std::slice::from_ref(&x)).unwrap()[0], Array::from_vec(&[4096], expect));
}
