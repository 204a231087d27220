//! The seed program, end to end: trace five steps of 1-D periodic explicit diffusion
//! `u + dt*alpha*(roll(u,1) - 2u + roll(u,-1))` on 64 points, print the IR kiln records, evaluate it
//! with the reference interpreter, then compile the gradient of `sum(u_5²)` with respect to the start
//! and `alpha` to native code (`jit(grad(loss))`) and run it.
//!
//! Run: `cargo run --release --example diffusion`

use kiln::prelude::*;

const N: usize = 64;
const STEPS: usize = 5;

fn step(u: &Tensor, dt: f64, alpha: f64) -> Tensor {
    u + dt * alpha * (u.roll(1, 0) - 2.0 * u + u.roll(-1, 0))
}

fn main() -> Result<(), kiln::Error> {
    let (dt, alpha) = (0.1, 0.5);
    let traced = trace(
        |u0: Tensor| {
            let opts = ScanOptions { length: Some(STEPS), reverse: false };
            scan_with(|u: Tensor, (): ()| (step(&u, dt, alpha), u.sum_all()), u0, (), opts)
        },
        &Tensor::placeholder(DType::F32, &[N]),
    )?;
    println!("# the traced program (kiln IR), {} equations at top level:\n", traced.function.eqns.len());
    println!("{}\n", traced.function);

    // The asymmetric start: a reversed roll or a missing wrap-around would show in the output.
    let mut u0 = vec![0.0f32; N];
    u0[0] = 1.0;
    u0[1] = 0.5;
    u0[N - 1] = -0.25;
    let (u5, totals) = traced.eval(&Tensor::from_vec(&[N], u0))?;
    let u5 = u5.to_vec::<f32>();
    println!("# u after {STEPS} steps (dt = {dt}, alpha = {alpha}); nonzero entries:");
    for (i, x) in u5.iter().enumerate().filter(|(_, x)| **x != 0.0) {
        println!("u[{i:2}] = {x:+.9}");
    }
    println!("\n# total before each step (conserved by the periodic stencil): {:?}", totals.to_vec::<f32>());

    // The gradient of sum(u_5²) with respect to (u_0, alpha), compiled with Cranelift.
    let loss = move |(u0, alpha): (Tensor, Tensor)| {
        let opts = ScanOptions { length: Some(STEPS), reverse: false };
        let (u5, ()) = scan_with(
            |u: Tensor, (): ()| (&u + dt * &alpha * (u.roll(1, 0) - 2.0 * &u + u.roll(-1, 0)), ()),
            u0,
            (),
            opts,
        );
        (&u5 * &u5).sum(All)
    };
    let grad_loss = jit(grad(loss));
    let mut u0 = vec![0.0f32; N];
    u0[0] = 1.0;
    u0[1] = 0.5;
    u0[N - 1] = -0.25;
    let args = (Tensor::from_vec(&[N], u0), Tensor::scalar(alpha as f32));
    let compiled = grad_loss.compiled(&args)?;
    let (du0, dalpha) = grad_loss.call(&args)?;
    println!("\n# jit(grad(sum(u_5^2))): {} top-level native kernels", compiled.executable().kernel_count());
    println!("d loss / d alpha = {:+.7}", dalpha.item::<f32>());
    println!("d loss / d u0[0..3] = {:?}", &du0.to_vec::<f32>()[..3]);
    Ok(())
}
