//! The interpreter allocates no more than its results (plus a little): `eval_prim` checks that the
//! results can be allocated before it runs, so a temporary larger than the results is memory that
//! check never asked for. Regression: `iota` built a `usize` index array first (8 bytes per
//! element, twice a u32 result) and `threefry2x32` an array of `(u32, u32)` pairs before its two
//! results, and `concatenate` copied its (already row-major) result once more; an eager
//! `random::split` of 4·10⁹ keys passed the check for its 16 GB result and then aborted the process
//! allocating the 32 GB temporary.
//!
//! Reductions copied their whole operand into reduction order (a temporary the size of the operand
//! for a result that may be one number); they now read it in place, or through a buffer of one
//! output element's inputs.
//!
//! A counting global allocator measures each call's peak above what was live before it. Not covered:
//! `sort` and `dot_general`, whose temporaries (sort keys, packed operands) are bounded by the
//! operands.

use kiln_ir::{ArgOp, Array, BinaryOp, CumulativeOp, DType, Prim, ReduceOp, Shape, UnaryOp, eval_prim};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to the system allocator and only counts bytes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, forwarded.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let live = LIVE.fetch_add(layout.size(), Ordering::SeqCst) + layout.size();
            PEAK.fetch_max(live, Ordering::SeqCst);
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract, forwarded.
        unsafe { System.dealloc(p, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::SeqCst);
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// One test at a time: the harness runs tests on several threads, and another test's allocations
/// would count in this one's peak. Each test holds this for its whole body.
static SERIAL: Mutex<()> = Mutex::new(());

fn alone() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Bytes allocated by `eval_prim(prim, args)` at its peak, above what was live before, and the
/// bytes of its results.
fn peak_and_result_bytes(prim: &Prim, args: &[&Array]) -> (usize, usize) {
    let before = LIVE.load(Ordering::SeqCst);
    PEAK.store(before, Ordering::SeqCst);
    let outs = eval_prim(prim, args).unwrap();
    let peak = PEAK.load(Ordering::SeqCst) - before;
    let result: usize = outs.iter().map(|a| a.ty().bytes()).sum();
    (peak, result)
}

/// Room for bookkeeping (shape vectors, the result list), far below the 4 MiB results.
const SLACK: usize = 64 << 10;

const N: usize = 1 << 20;

#[test]
fn iota_allocates_only_its_result() {
    let _alone = alone();
    for dtype in [DType::F32, DType::F64, DType::I32, DType::U32] {
        for dimension in [0, 1] {
            let prim = Prim::Iota { dtype, shape: Shape::new(&[N / 4, 4]), dimension };
            let (peak, result) = peak_and_result_bytes(&prim, &[]);
            assert!(peak <= result + SLACK, "iota {dtype} dim {dimension}: peak {peak} B for {result} B");
        }
    }
}

#[test]
fn threefry_allocates_only_its_two_results() {
    let _alone = alone();
    let words = |seed: u32| Array::from_vec(&[N], (0..N as u32).map(|i| i.wrapping_mul(seed)).collect());
    let (k0, k1, x0, x1) = (words(3), words(5), words(7), words(11));
    let (peak, result) = peak_and_result_bytes(&Prim::Threefry2x32, &[&k0, &k1, &x0, &x1]);
    assert_eq!(result, 2 * 4 * N);
    assert!(peak <= result + SLACK, "threefry2x32: peak {peak} B for {result} B");
}

#[test]
fn elementwise_ops_allocate_only_their_result() {
    let _alone = alone();
    let x = Array::from_vec(&[N], (0..N).map(|i| i as f32 * 1e-3).collect());
    for prim in [
        Prim::Unary(UnaryOp::Exp),
        Prim::Unary(UnaryOp::Log),
        Prim::ConvertElementType { dtype: DType::I32 },
        Prim::ConvertElementType { dtype: DType::F64 },
    ] {
        let (peak, result) = peak_and_result_bytes(&prim, &[&x]);
        assert!(peak <= result + SLACK, "{prim:?}: peak {peak} B for {result} B");
    }
}

#[test]
fn structural_ops_allocate_only_their_result() {
    let _alone = alone();
    let x = Array::from_vec(&[N / 512, 512], (0..N).map(|i| i as f32).collect());
    let row = Array::from_vec(&[512], (0..512).map(|i| i as f32).collect());
    let (rows, cols) = (N / 512, 512);
    let mut over = Vec::new();
    for (prim, args) in [
        (Prim::Binary(BinaryOp::Add), vec![&x, &x]),
        (Prim::Transpose { permutation: vec![1, 0] }, vec![&x]),
        (Prim::Rev { dimensions: vec![0, 1] }, vec![&x]),
        (
            Prim::BroadcastInDim { shape: Shape::new(&[rows, cols]), broadcast_dimensions: vec![1] },
            vec![&row],
        ),
        (Prim::Concatenate { dimension: 0 }, vec![&x, &x]),
        (Prim::Cumulative { op: CumulativeOp::Sum, axis: 1, reverse: false }, vec![&x]),
    ] {
        let (peak, result) = peak_and_result_bytes(&prim, &args);
        if peak > result + SLACK {
            over.push(format!("{prim:?}: peak {peak} B for {result} B"));
        }
    }
    assert!(over.is_empty(), "{over:#?}");
}

#[test]
fn reductions_allocate_only_their_result_and_one_run() {
    let _alone = alone();
    let (rows, cols) = (N / 512, 512);
    // x[i, j] = 512 i + j, exact in i32: column sums 512·Σi + rows·j, row sums 512·cols·i + Σj.
    let x = Array::from_vec(&[rows, cols], (0..N as i32).collect());
    let sum_rows = (rows * (rows - 1) / 2) as i32;
    let sum_cols = (cols * (cols - 1) / 2) as i32;
    let reduce = |op, axes: &[usize]| Prim::Reduce { op, axes: axes.to_vec() };
    let expect_col_sums: Vec<i32> = (0..cols as i32).map(|j| 512 * sum_rows + rows as i32 * j).collect();
    let expect_row_sums: Vec<i32> = (0..rows as i32).map(|i| 512 * cols as i32 * i + sum_cols).collect();
    let f = Array::from_vec(&[rows, cols], (0..N).map(|i| i as f32 * 1e-3).collect());
    let mut over = Vec::new();
    for (prim, arg, expect) in [
        (reduce(ReduceOp::Sum, &[0]), &x, Some(Array::from_vec(&[cols], expect_col_sums))),
        (reduce(ReduceOp::Sum, &[1]), &x, Some(Array::from_vec(&[rows], expect_row_sums))),
        (
            reduce(ReduceOp::Max, &[0]),
            &x,
            Some(Array::from_vec(&[cols], ((N - cols) as i32..N as i32).collect())),
        ),
        (reduce(ReduceOp::Sum, &[0, 1]), &f, None),
        (reduce(ReduceOp::Sum, &[0]), &f, None),
        (Prim::ArgReduce { op: ArgOp::Max, axis: 0, index_dtype: DType::I32 }, &f, None),
    ] {
        let (peak, result) = peak_and_result_bytes(&prim, &[arg]);
        if peak > result + SLACK {
            over.push(format!("{prim:?}: peak {peak} B for {result} B"));
        }
        if let Some(expect) = expect {
            assert_eq!(eval_prim(&prim, &[arg]).unwrap()[0], expect, "{prim:?}");
        }
    }
    assert!(over.is_empty(), "{over:#?}");
}
