//! ns/element of each vmath tile function (best level of this CPU, called on tiles of 256 as JIT code
//! does) against a scalar std loop (`f32::exp` per element), at 4096 (L1) and 10⁶ (DRAM) elements.
//! Criterion's throughput is set in elements; ns/element = 1e9 / (elements/s).

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use kiln_backend_cpu::vmath::{Func, table};
use std::hint::black_box;

const TILE: usize = 256;

fn std_f32(f: Func) -> fn(f32) -> f32 {
    match f {
        Func::Exp => f32::exp,
        Func::Expm1 => f32::exp_m1,
        Func::Log => f32::ln,
        Func::Log1p => f32::ln_1p,
        Func::Sin => f32::sin,
        Func::Cos => f32::cos,
        Func::Tanh => f32::tanh,
        Func::Logistic => |x| 1.0 / (1.0 + (-x).exp()),
    }
}

fn std_f64(f: Func) -> fn(f64) -> f64 {
    match f {
        Func::Exp => f64::exp,
        Func::Expm1 => f64::exp_m1,
        Func::Log => f64::ln,
        Func::Log1p => f64::ln_1p,
        Func::Sin => f64::sin,
        Func::Cos => f64::cos,
        Func::Tanh => f64::tanh,
        Func::Logistic => |x| 1.0 / (1.0 + (-x).exp()),
    }
}

/// Inputs in each function's interesting range (positive for log).
fn input(f: Func, n: usize) -> Vec<f64> {
    (0..n)
        .map(|i| {
            let u = (i as f64 * 0.618_033_988_75).fract();
            match f {
                Func::Log | Func::Log1p => 0.01 + 100.0 * u,
                Func::Sin | Func::Cos => 200.0 * u - 100.0,
                Func::Exp | Func::Expm1 | Func::Tanh | Func::Logistic => 40.0 * u - 20.0,
            }
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let t = table();
    println!("vmath level: {:?}", t.level);
    for n in [4096usize, 1_000_000] {
        for f in Func::ALL {
            let mut g = c.benchmark_group(format!("vmath/{f:?}/n={n}"));
            g.throughput(Throughput::Elements(n as u64));
            let x64 = input(f, n);
            let x32: Vec<f32> = x64.iter().map(|&x| x as f32).collect();
            let mut y64 = vec![0.0f64; n];
            let mut y32 = vec![0.0f32; n];
            g.bench_function(BenchmarkId::new("f32", "tile"), |b| {
                b.iter(|| {
                    for (s, d) in x32.chunks(TILE).zip(y32.chunks_mut(TILE)) {
                        t.map_f32(f, black_box(s), d);
                    }
                })
            });
            let sf = std_f32(f);
            g.bench_function(BenchmarkId::new("f32", "std"), |b| {
                b.iter(|| {
                    for (d, &s) in y32.iter_mut().zip(black_box(&x32)) {
                        *d = sf(s);
                    }
                })
            });
            g.bench_function(BenchmarkId::new("f64", "tile"), |b| {
                b.iter(|| {
                    for (s, d) in x64.chunks(TILE).zip(y64.chunks_mut(TILE)) {
                        t.map_f64(f, black_box(s), d);
                    }
                })
            });
            let sf = std_f64(f);
            g.bench_function(BenchmarkId::new("f64", "std"), |b| {
                b.iter(|| {
                    for (d, &s) in y64.iter_mut().zip(black_box(&x64)) {
                        *d = sf(s);
                    }
                })
            });
            g.finish();
        }
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(10).warm_up_time(std::time::Duration::from_millis(200))
        .measurement_time(std::time::Duration::from_millis(500));
    targets = bench
}
criterion_main!(benches);
