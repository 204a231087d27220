//! `jit` end to end: the seed program (64-point periodic diffusion, 5 steps) compiled and compared
//! with the interpreter; one compiled function from 8 threads; O(1) allocations for a 10⁴-step scan;
//! a donated input saves its output's allocation.

use kiln::ir::{Array, eval};
use kiln::prelude::*;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

/// Counts allocations (number and bytes) made by threads that opted in, per thread (other tests
/// run in parallel threads).
struct Counting;
thread_local! {
    static COUNTED: Cell<bool> = const { Cell::new(false) };
    static ALLOCS: Cell<usize> = const { Cell::new(0) };
    static BYTES: Cell<usize> = const { Cell::new(0) };
}
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        if COUNTED.with(|c| c.get()) {
            ALLOCS.with(|n| n.set(n.get() + 1));
            BYTES.with(|n| n.set(n.get() + l.size()));
        }
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        unsafe { System.dealloc(p, l) }
    }
}
#[global_allocator]
static GLOBAL: Counting = Counting;

const N: usize = 64;

fn start() -> Tensor {
    let mut u = vec![0.0f32; N];
    u[0] = 1.0;
    u[1] = 0.5;
    u[63] = -0.25;
    Tensor::from_vec(&[N], u)
}

fn step(u: &Tensor) -> Tensor {
    u + 0.1 * 0.5 * (u.roll(1, 0) - 2.0 * u + u.roll(-1, 0))
}

fn simulate(u: Tensor, steps: usize) -> Tensor {
    scan_with(|u: Tensor, (): ()| (step(&u), ()), u, (), ScanOptions { length: Some(steps), reverse: false })
        .0
}

fn loss(u: Tensor) -> Tensor {
    let u5 = simulate(u, 5);
    (&u5 * &u5).sum(All)
}

fn interpreted<R: Tree>(f: impl FnOnce(Tensor) -> R, x: &Tensor) -> Vec<Array> {
    let traced = trace(f, &Tensor::placeholder(x.dtype(), x.shape().dims())).unwrap();
    eval(&traced.function, &[x.to_array().unwrap()]).unwrap()
}

#[test]
fn jit_of_the_seed_program_matches_the_interpreter() {
    let f = jit(|u: Tensor| simulate(u, 5));
    let got = f.call(&start()).unwrap();
    let want = interpreted(|u| simulate(u, 5), &start());
    assert_eq!(got.to_array().unwrap(), want[0]);
    // u5[0] = 4280801/6400000 by hand (see tests/seed_program.rs).
    assert!((got.to_vec::<f32>()[0] as f64 - 4280801.0 / 6400000.0).abs() < 1e-6);
    let l = jit(loss).call(&start()).unwrap();
    assert_eq!(l.to_array().unwrap(), interpreted(loss, &start())[0]);
}

#[test]
fn jit_of_grad_of_the_seed_loss_matches_the_interpreter() {
    let g = jit(grad(loss));
    let got = g.call(&start()).unwrap();
    let want = interpreted(grad(loss), &start());
    let (a, b) = (got.to_vec::<f32>(), want[0].to_vec::<f32>().unwrap());
    assert!(a.iter().zip(&b).all(|(x, y)| (x - y).abs() <= 1e-5 * y.abs().max(1.0)));
}

#[test]
fn cache_and_wrong_inputs() {
    let f = jit(|u: Tensor| u.exp());
    let a = f.compiled(&start()).unwrap();
    let b = f.compiled(&start()).unwrap();
    assert!(std::sync::Arc::ptr_eq(&a, &b), "same signature, same compiled code");
    // A new shape is a new signature: traced and compiled again.
    let c = f.compiled(&Tensor::from_vec(&[2], vec![0.0f32, 1.0])).unwrap();
    assert!(!std::sync::Arc::ptr_eq(&a, &c));
    // The compiled code refuses arguments of another signature.
    assert!(a.run(&[Array::from_vec(&[3], vec![1.0f32; 3])]).is_err());
    assert!(a.run(&[]).is_err());
    assert!(a.run(&[Array::from_vec(&[N], vec![1.0f64; N])]).is_err());
    // A trace error is an Err, not a panic.
    let bad = jit(|u: Tensor| &u + &Tensor::from_vec(&[3], vec![1.0f32; 3]));
    assert!(bad.call(&start()).is_err());
}

#[test]
fn one_compiled_function_from_eight_threads() {
    let f = jit(|u: Tensor| simulate(u, 50));
    let compiled = f.compiled(&start()).unwrap();
    let input = [start().to_array().unwrap()];
    let want = compiled.run(&input).unwrap();
    std::thread::scope(|s| {
        for _ in 0..8 {
            s.spawn(|| {
                for _ in 0..20 {
                    assert_eq!(compiled.run(&input).unwrap(), want);
                }
            });
        }
    });
}

#[test]
fn a_long_scan_allocates_o1() {
    let allocs = |steps: usize| {
        let f = jit(move |u: Tensor| simulate(u, steps));
        let compiled = f.compiled(&start()).unwrap();
        let input = [start().to_array().unwrap()];
        compiled.run(&input).unwrap(); // warm: the arena joins the pool
        COUNTED.with(|c| c.set(true));
        let before = ALLOCS.with(Cell::get);
        compiled.run(&input).unwrap();
        let n = ALLOCS.with(Cell::get) - before;
        COUNTED.with(|c| c.set(false));
        n
    };
    let (short, long) = (allocs(10), allocs(10_000));
    // Only this thread counts: the result arrays and argument tables, the same for any length.
    assert_eq!(long, short, "10 steps: {short} allocations, 10⁴ steps: {long}");
    assert!(short <= 10, "{short} allocations per call");
}

#[test]
fn jit_of_vmap_of_grad_matches_eager() {
    // Per-example gradients of a one-layer tanh model, compiled: equal to the eager (interpreted) ones.
    let loss = |(w, x): (Tensor, Tensor)| x.matmul(&w).tanh().square().sum(All);
    let per_example =
        move |(w, xs): (Tensor, Tensor)| vmap(grad_argnums(loss, &[0]), (AxisSpec::NONE, 0), 0)((w, xs)).0;
    let w = Tensor::from_vec(&[2, 3], vec![0.5f64, -0.25, 0.1, 0.3, 0.2, -0.4]);
    let xs = Tensor::from_vec(&[4, 1, 2], vec![1.0f64, 2.0, 0.0, 1.0, -1.0, 0.5, 0.25, -2.0]);
    let eager = per_example((w.clone(), xs.clone()));
    let compiled = jit(per_example).call(&(w, xs)).unwrap();
    assert_eq!(compiled.shape().dims(), &[4, 2, 3]);
    for (a, b) in compiled.to_vec::<f64>().iter().zip(eager.to_vec::<f64>()) {
        assert!((a - b).abs() <= 1e-12 * (1.0 + b.abs()), "{a} vs {b}");
    }
}

#[test]
fn jit_of_grad_through_take_and_segment_sum_matches_eager() {
    // take → gather (its gradient a scatter_add); segment_sum (its gradient a gather).
    // g = x[[4, 0, -1→4, 2, 0]] = [x4, x0, x4, x2, x0]; ids [1, 0, 1, 2, -1] (the last row dropped):
    // s = [x0², 2·x4², x2²]; loss = 1·s0 + 2·s1 + 3·s2 = x0² + 4·x4² + 3·x2²
    // grad = [2·x0, 0, 6·x2, 0, 8·x4] = [2, 0, 18, 0, 40] at x = [1, 2, 3, 4, 5].
    let loss = |x: Tensor| {
        let g = x.take(&Tensor::from_vec(&[5], vec![4i32, 0, -1, 2, 0]), 0);
        let s = (&g * &g).segment_sum(&Tensor::from_vec(&[5], vec![1i32, 0, 1, 2, -1]), 3);
        (&s * &Tensor::from_vec(&[3], vec![1.0f64, 2.0, 3.0])).sum(All)
    };
    let x = Tensor::from_vec(&[5], vec![1.0f64, 2.0, 3.0, 4.0, 5.0]);
    let eager = grad(loss)(x.clone());
    let compiled = jit(grad(loss)).call(&x).unwrap();
    assert_eq!(compiled.to_vec::<f64>(), vec![2.0, 0.0, 18.0, 0.0, 40.0]);
    assert_eq!(compiled.to_array().unwrap(), eager.to_array().unwrap());
}

#[test]
fn a_donated_input_saves_the_outputs_allocation() {
    // One step of the seed program on 2^16 points (256 KiB of f32): the result takes u's buffer.
    let f = jit(|u: Tensor| step(&u)).donate(&[0]);
    let big = || Tensor::from_vec(&[1 << 16], (0..1 << 16).map(|i| (i % 7) as f32).collect());
    let bytes = |donate: bool| {
        let u = big();
        let want = step(&u).to_vec::<f32>();
        f.call_donated(big()).unwrap(); // warm: compiled, arena pooled
        COUNTED.with(|c| c.set(true));
        let before = BYTES.with(Cell::get);
        let out = if donate { f.call_donated(u).unwrap() } else { f.call(&u).unwrap() };
        let n = BYTES.with(Cell::get) - before;
        COUNTED.with(|c| c.set(false));
        assert_eq!(out.to_vec::<f32>(), want);
        n
    };
    let (kept, donated) = (bytes(false), bytes(true));
    // The output's 256 KiB, less a few words of bookkeeping for the donation.
    assert!(donated + (1 << 18) <= kept + 256, "donated call: {donated} bytes, plain call: {kept} bytes");
}

#[test]
fn a_result_too_large_to_exist_is_an_error_not_a_wrapped_size() {
    // Regression: `[2^63, 2]` f32 wrapped to a zero-size buffer, so this sum "computed" 0.
    let f = jit(|x: Tensor| x.broadcast_to(&[1usize << 63, 2]).sum(All));
    let err = f.call(&Tensor::scalar(1f32)).unwrap_err().to_string();
    assert!(
        err.contains("broadcast_in_dim") && err.contains("too many elements") && err.contains("jit.rs"),
        "{err}"
    );
}

/// Regression (a helper's hunt): a long fused chain (a Rust loop unrolling `sin` 8000 times) made
/// code generation recurse once per fused op and overflow the stack — the process aborted. Fusion
/// now stops a kernel's inlined depth at `MAX_FUSION_DEPTH`. Run on a spawned thread with the
/// default 2 MiB stack, where 2000 ops already aborted; the values are the interpreter's.
#[test]
fn a_long_fused_chain_compiles_on_a_default_thread() {
    let chain = |x: Tensor| (0..3000).fold(x, |y, _| y.sin() * 1.0001);
    std::thread::spawn(move || {
        let x = Tensor::from_vec(&[4], vec![0.5f32, 1.0, -2.0, 3.0]);
        let got = jit(chain).call(&x).unwrap();
        let want = &interpreted(chain, &x)[0];
        for (g, w) in got.to_vec::<f32>().iter().zip(want.to_vec::<f32>().unwrap()) {
            assert!((g - w).abs() <= 1e-5 * w.abs().max(1e-3), "jit {g}, interpreter {w}");
        }
    })
    .join()
    .unwrap();
}

/// Regression: a kernel may have at most 255 operands, and fusion built one of any size, so a chain
/// of 260 steps each with its own scalar (`y·1.0001 + i·1e-9`, one constant operand per step) was
/// refused ("cannot lower `add` yet (kernel with over 255 operands)"). The fusion depth bound
/// splits such chains; the values are the interpreter's.
#[test]
fn a_chain_with_a_scalar_per_step_is_not_refused_for_its_operand_count() {
    let chain = |x: Tensor| (0..300).fold(x, |y, i| &y * 1.0001 + i as f64 * 1e-9);
    let x = Tensor::from_vec(&[4], vec![0.5f32, 1.0, -2.0, 3.0]);
    let got = jit(chain).call(&x).unwrap();
    let want = &interpreted(chain, &x)[0];
    assert!(got.to_array().unwrap().bitwise_eq(want), "{got:?} vs {want:?}");
}
