//! Benchmarks of the front half of the pipeline on the seed program (64-point periodic diffusion, 5
//! steps as a `scan`): tracing to IR, interpreting it, tracing + differentiating it, and
//! `jit(grad(loss))` compile and run. Run: `cargo bench --bench trace`.

use criterion::{Criterion, criterion_group, criterion_main};
use kiln::prelude::*;
use std::hint::black_box;

const N: usize = 64;

fn loss((u0, alpha): (Tensor, Tensor)) -> Tensor {
    let opts = ScanOptions { length: Some(5), reverse: false };
    let step = |u: Tensor, (): ()| (&u + 0.1 * &alpha * (u.roll(1, 0) - 2.0 * &u + u.roll(-1, 0)), ());
    let (u5, ()) = scan_with(step, u0, (), opts);
    (&u5 * &u5).sum(All)
}

fn inputs() -> (Tensor, Tensor) {
    let mut u = vec![0.0f32; N];
    u[0] = 1.0;
    u[1] = 0.5;
    u[N - 1] = -0.25;
    (Tensor::from_vec(&[N], u), Tensor::scalar(0.5f32))
}

fn bench(c: &mut Criterion) {
    let shapes = (Tensor::placeholder(DType::F32, &[N]), Tensor::placeholder(DType::F32, &[]));
    c.bench_function("trace seed loss", |b| b.iter(|| trace(loss, black_box(&shapes)).unwrap()));
    let traced = trace(loss, &shapes).unwrap();
    c.bench_function("interpret seed loss", |b| b.iter(|| traced.eval(black_box(&inputs())).unwrap()));
    c.bench_function("trace grad of seed loss", |b| {
        b.iter(|| trace(grad(loss), black_box(&shapes)).unwrap())
    });
    c.bench_function("jit(grad) compile", |b| {
        b.iter(|| jit(grad(loss)).compiled(black_box(&inputs())).unwrap())
    });
    let g = jit(grad(loss));
    g.call(&inputs()).unwrap();
    c.bench_function("jit(grad) run", |b| b.iter(|| g.call(black_box(&inputs())).unwrap()));
}

criterion_group!(benches, bench);
criterion_main!(benches);
