//! ns/element of whole JIT kernels through `Executable::run` (output allocation included): an
//! elementwise chain `a*b + c*d - e`, a row sum (`reduce_sum` over the last axis of an (R, C) array),
//! `exp` and `tanh` (and `neg`, the floor: a copy plus `run`'s own costs), at N = 4096 (L1) and 10⁶ (DRAM) elements, f32 and f64.
//! Criterion's throughput is set in elements; ns/element = 1e9 / (elements/s).

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use kiln_backend_cpu::compile;
use kiln_ir::*;
use std::hint::black_box;

/// `n` values of `dt` in [-4, 4) (a golden-ratio sequence, so no two neighbours repeat).
fn input(dt: DType, shape: &[usize], phase: f64) -> Array {
    let n: usize = shape.iter().product();
    let v: Vec<f64> = (0..n).map(|i| 8.0 * ((i as f64 + phase) * 0.618_033_988_75).fract() - 4.0).collect();
    match dt {
        DType::F32 => Array::from_vec(shape, v.iter().map(|&x| x as f32).collect::<Vec<_>>()),
        _ => Array::from_vec(shape, v),
    }
}

/// `a*b + c*d - e` on five rank-1 inputs.
fn chain(dt: DType, n: usize) -> (Function, Vec<Array>) {
    let mut f = Function::new();
    let p: Vec<Var> = (0..5).map(|_| f.add_param(TensorType::new(dt, Shape::new(&[n])))).collect();
    let bin = |f: &mut Function, op, x, y| f.push(Prim::Binary(op), &[x, y], None).unwrap()[0];
    let ab = bin(&mut f, BinaryOp::Mul, p[0], p[1]);
    let cd = bin(&mut f, BinaryOp::Mul, p[2], p[3]);
    let s = bin(&mut f, BinaryOp::Add, ab, cd);
    let r = bin(&mut f, BinaryOp::Sub, s, p[4]);
    f.outputs.push(r);
    (f, (0..5).map(|k| input(dt, &[n], k as f64)).collect())
}

/// Row sums of an (n / 1000, 1000) or (64, 64) array.
fn row_sum(dt: DType, n: usize) -> (Function, Vec<Array>) {
    let shape = if n == 4096 { [64, 64] } else { [n / 1000, 1000] };
    let mut f = Function::new();
    let x = f.add_param(TensorType::new(dt, Shape::new(&shape)));
    let r = f.push(Prim::Reduce { op: ReduceOp::Sum, axes: vec![1] }, &[x], None).unwrap()[0];
    f.outputs.push(r);
    (f, vec![input(dt, &shape, 0.0)])
}

fn unary(op: UnaryOp) -> impl Fn(DType, usize) -> (Function, Vec<Array>) {
    move |dt, n| {
        let mut f = Function::new();
        let x = f.add_param(TensorType::new(dt, Shape::new(&[n])));
        let r = f.push(Prim::Unary(op), &[x], None).unwrap()[0];
        f.outputs.push(r);
        (f, vec![input(dt, &[n], 0.0)])
    }
}

fn bench(c: &mut Criterion) {
    type Make = Box<dyn Fn(DType, usize) -> (Function, Vec<Array>)>;
    let cases: [(&str, Make); 5] = [
        // The floor: one load and one store per element, plus `run`'s own costs.
        ("neg", Box::new(unary(UnaryOp::Neg))),
        ("chain", Box::new(chain)),
        ("row_sum", Box::new(row_sum)),
        ("exp", Box::new(unary(UnaryOp::Exp))),
        ("tanh", Box::new(unary(UnaryOp::Tanh))),
    ];
    for (name, make) in &cases {
        for dt in [DType::F32, DType::F64] {
            for n in [4096usize, 1_000_000] {
                let (f, args) = make(dt, n);
                let exe = compile(&f).expect("compile");
                let mut g = c.benchmark_group(format!("kernels/{name}/{}/n={n}", dt.name()));
                g.throughput(Throughput::Elements(n as u64));
                g.bench_function("jit", |b| b.iter(|| black_box(exe.run(black_box(&args)).unwrap())));
                g.finish();
            }
        }
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(std::time::Duration::from_millis(300))
        .measurement_time(std::time::Duration::from_secs(1))
        .sample_size(20);
    targets = bench
}
criterion_main!(benches);
