//! Compiled code never calls the interpreter: the interpreter's call counter stays put while
//! `jit(grad(loss))` of the seed program (a `scan`, rolls, reductions) and a 10⁴-step scan run.
//! (Its own test binary: other tests' eager operations would move the process-wide counter.)

use kiln::ir::interpreter_calls;
use kiln::prelude::*;

fn step(u: &Tensor) -> Tensor {
    u + 0.05 * (u.roll(1, 0) - 2.0 * u + u.roll(-1, 0))
}

fn simulate(u: Tensor, steps: usize) -> Tensor {
    let opts = ScanOptions { length: Some(steps), reverse: false };
    scan_with(|u: Tensor, _: ()| (step(&u), ()), u, (), opts).0
}

fn loss(u: Tensor) -> Tensor {
    simulate(u, 5).square().sum(All)
}

#[test]
fn compiled_runs_make_no_interpreter_calls() {
    let u = Tensor::from_vec(&[64], (0..64).map(|i| (i as f32 / 9.0).sin()).collect());
    let g = jit(grad(loss));
    // Trace + compile first: tracing and the simplifier's constant folding may use the interpreter.
    let compiled = g.compiled(&u).unwrap();
    let long = jit(|u: Tensor| simulate(u, 10_000));
    let long_exe = long.compiled(&u).unwrap();
    let args = [u.to_array().unwrap()];
    let before = interpreter_calls();
    let out = compiled.run(&args).unwrap();
    assert_eq!(interpreter_calls(), before, "jit(grad) called the interpreter while running");
    long_exe.run(&args).unwrap();
    assert_eq!(interpreter_calls(), before, "the 10⁴-step scan called the interpreter");
    // And the compiled gradient is the gradient: d/du Σ(M⁵u)² = 2 (M⁵)ᵀ M⁵ u, checked against the
    // interpreter (eager grad) once, after the counted runs.
    let eager = grad(loss)(u.clone()).to_vec::<f32>();
    let jitted = out[0].to_vec::<f32>().unwrap();
    for (a, b) in jitted.iter().zip(&eager) {
        assert!((a - b).abs() <= 1e-5 * b.abs().max(1.0), "{a} vs {b}");
    }
}
