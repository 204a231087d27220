//! Memory of reverse-mode `scan` under the checkpoint policies (DESIGN §5, issue 3): the floats kept
//! between the forward and the backward pass, counted from the transformed IR for a T = 10⁴-step
//! scan of a 10³-float state, and the peak heap of an eager run measured with a counting allocator.

use kiln_ir::{Function, Prim, Var};
use kiln_trace::methods::All;
use kiln_trace::{ScanOptions, Tensor, scan_with};
use kiln_transform::ad::{Checkpoint, vjp_replay, with_checkpoint};
use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::HashSet;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

/// `System`, counting the bytes currently allocated and their peak.
struct Counting;

static CURRENT: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn grew(n: usize) {
    let now = CURRENT.fetch_add(n, Ordering::SeqCst) + n;
    PEAK.fetch_max(now, Ordering::SeqCst);
}

// SAFETY: every call is forwarded to `System` unchanged; only counters are updated besides.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        CURRENT.fetch_sub(layout.size(), Ordering::SeqCst);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            CURRENT.fetch_sub(layout.size(), Ordering::SeqCst);
            grew(new_size);
        }
        p
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// The tests of this file run one at a time, so the allocator's peak is this test's.
static SERIAL: Mutex<()> = Mutex::new(());

/// `loss(a, b, c0) = Σ c_T²` where `c_{t+1} = c_t + 0.01·tanh(a·c_t + b)`, `c` of `s` floats, by a
/// `t`-step scan. Its step's backward needs `tanh'(a·c + b)` (s floats) and `c` (s floats, for the
/// cotangent of `a`): r = 2·s floats of residuals per step.
fn program(t: usize, s: usize) -> Function {
    let f = |(a, b, c0): (Tensor, Tensor, Tensor)| {
        let opts = ScanOptions { length: Some(t), reverse: false };
        let (c, ()) = scan_with(|c: Tensor, (): ()| (&c + &((&a * &c + &b).tanh() * 0.01), ()), c0, (), opts);
        (&c * &c).sum(All)
    };
    let args = (
        Tensor::placeholder(kiln_ir::DType::F32, &[]),
        Tensor::placeholder(kiln_ir::DType::F32, &[s]),
        Tensor::placeholder(kiln_ir::DType::F32, &[s]),
    );
    kiln_trace::trace(f, &args).expect("traces").function
}

/// The gradient of `f` (a scalar function) as a function, under `policy`.
fn grad_ir(f: &Function, policy: Checkpoint) -> Function {
    with_checkpoint(policy, || {
        kiln_transform::trace_function(&f.param_types(), |args| {
            let (_, cts) = vjp_replay(f, &args, &[Some(Tensor::scalar(1.0f32))]);
            cts.into_iter().map(|c| c.expect("every parameter matters")).collect()
        })
    })
}

fn numel(f: &Function, v: Var) -> usize {
    f.var_type(v).shape.dims().iter().product()
}

/// Floats kept between forward and backward: the outputs of forward (non-reverse) scans read by
/// reverse scans (stacked residuals, saved carries), each value counted once.
fn kept_floats(g: &Function) -> usize {
    let fwd_outs: HashSet<Var> = g
        .eqns
        .iter()
        .filter(|e| matches!(e.prim, Prim::Scan { reverse: false, .. }))
        .flat_map(|e| e.outputs.iter().copied())
        .collect();
    let kept: HashSet<Var> = g
        .eqns
        .iter()
        .filter(|e| matches!(e.prim, Prim::Scan { reverse: true, .. }))
        .flat_map(|e| e.inputs.iter().copied())
        .filter(|v| fwd_outs.contains(v))
        .collect();
    kept.iter().map(|v| numel(g, *v)).sum()
}

#[test]
fn floats_kept_by_the_transformed_ir() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (t, s) = (10_000usize, 1_000usize);
    let f = program(t, s);
    let store_all = kept_floats(&grad_ir(&f, Checkpoint::StoreAll));
    // StoreAll stacks every step's residuals: T·r floats with r the per-step residual size.
    assert_eq!(store_all % t, 0, "StoreAll keeps [T, ..] stacks, got {store_all} floats");
    let r = store_all / t;
    // By hand r = 2·s (tanh' and c); allow one more state-sized value for a different VJP rule.
    assert!((s..=3 * s).contains(&r), "r = {r} floats per step");
    assert!(store_all <= t * r + s, "StoreAll keeps {store_all} > T·r + state = {}", t * r + s);

    // Auto stores everything here: T·r = 2·10⁷ floats = 80 MB ≤ AUTO_STORE_ALL_BYTES.
    assert_eq!(kept_floats(&grad_ir(&f, Checkpoint::Auto)), store_all);
    let auto = kept_floats(&grad_ir(&f, Checkpoint::Sqrt));
    let sqrt_t = 100; // √10⁴
    let bound = 4 * sqrt_t * r.max(s);
    println!(
        "floats kept for T = {t}, state = {s}: StoreAll {store_all} (r = {r}), Auto {auto} (bound {bound})"
    );
    assert!(auto <= bound, "Auto keeps {auto} floats > 4·√T·max(r, state) = {bound}");
    // Exactly the ⌈√T⌉ = 100 segment-start carries: 100 · 1000.
    assert_eq!(auto, 100 * s);
    let every = kept_floats(&grad_ir(&f, Checkpoint::Every(1000)));
    // 10 segment-start carries of s floats.
    assert_eq!(every, 10 * s);
}

/// Peak bytes allocated (above those live before) while `run` runs.
fn peak_of<R>(run: impl FnOnce() -> R) -> (usize, R) {
    let base = CURRENT.load(Ordering::SeqCst);
    PEAK.store(base, Ordering::SeqCst);
    let r = run();
    (PEAK.load(Ordering::SeqCst) - base, r)
}

#[test]
fn eager_peak_heap_auto_below_store_all() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (t, s) = (400usize, 200usize);
    let f = program(t, s);
    let a = Tensor::scalar(0.5f32);
    let b = Tensor::from_vec(&[s], (0..s).map(|i| (i as f32 / s as f32) - 0.5).collect());
    let c0 = Tensor::from_vec(&[s], (0..s).map(|i| ((i * 7) % 13) as f32 / 13.0).collect());
    let args = [a, b, c0];
    let run = |policy| {
        with_checkpoint(policy, || {
            let (_, cts) = vjp_replay(&f, &args, &[Some(Tensor::scalar(1.0f32))]);
            cts.into_iter().map(|c| c.expect("nonzero").to_vec::<f32>()).collect::<Vec<_>>()
        })
    };
    let (store_all, g_store) = peak_of(|| run(Checkpoint::StoreAll));
    let (auto, g_auto) = peak_of(|| run(Checkpoint::Sqrt));
    println!("peak heap of the eager VJP, T = {t}, state = {s}: StoreAll {store_all} B, Sqrt {auto} B");
    // Same gradients either way (the same f32 operations in the same order per step).
    assert_eq!(g_store, g_auto);
    // StoreAll stacks T·r = 400·400 f32 = 640 000 B of residuals; Sqrt keeps 20 carries (16 000 B)
    // and one 20-step segment's residuals (32 000 B).
    assert!(store_all >= 4 * t * 2 * s, "StoreAll peak {store_all} B below its residuals");
    assert!(3 * auto < store_all, "Sqrt peak {auto} B is not well below StoreAll's {store_all} B");
}

#[test]
fn auto_checkpoints_only_above_its_memory_budget() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // T = 10⁴ steps of a 5·10⁴-float state: residuals ≈ T·2·s·4 B = 4 GB > AUTO_STORE_ALL_BYTES,
    // so Auto saves the ⌈√T⌉ = 100 segment-start carries, like Sqrt (the IR is built, never run).
    let (t, s) = (10_000usize, 50_000usize);
    assert!(t * 2 * s * 4 > kiln_transform::ad::AUTO_STORE_ALL_BYTES);
    let f = program(t, s);
    assert_eq!(kept_floats(&grad_ir(&f, Checkpoint::Auto)), 100 * s);
    assert_eq!(kept_floats(&grad_ir(&f, Checkpoint::Sqrt)), 100 * s);
}
