//! Criterion benchmarks of the workload suite (`benches/workloads/`): one benchmark per case, the
//! steady-state run time of the compiled program; each case's compile time (first call − one steady
//! call, JAX's definition) is printed when the case starts. Flat sampling with 10 samples keeps the
//! whole suite to a few minutes (the slowest case, W1 grad at N = 10⁶, runs about 10 times).
//!
//! Run: `cargo bench --bench workloads [-- FILTER]`, e.g. `-- W1/grad`. Cases that do not match the
//! filter are never compiled. The JAX comparison table comes from `scripts/compare_jax.sh`.

#[path = "workloads/mod.rs"]
mod workloads;

use criterion::{Criterion, SamplingMode, criterion_group, criterion_main};
use std::time::{Duration, Instant};

fn bench(c: &mut Criterion) {
    for case in workloads::all_cases() {
        let mut group = c.benchmark_group(case.workload);
        group
            .sample_size(10)
            .sampling_mode(SamplingMode::Flat)
            .warm_up_time(Duration::from_millis(500))
            .measurement_time(Duration::from_secs(3));
        let id = format!("{}/{}", case.variant, case.size);
        // Criterion calls the routine several times (warm-up, samples) and only for ids that pass
        // the filter: the program is built and compiled lazily, once.
        let mut runner: Option<Box<dyn FnMut() -> Vec<kiln::ir::Array>>> = None;
        group.bench_function(&id, |b| {
            let run = runner.get_or_insert_with(|| {
                let mut run = (case.make)();
                let t0 = Instant::now();
                run();
                let first = t0.elapsed();
                let t1 = Instant::now();
                run();
                let compile = first.saturating_sub(t1.elapsed());
                eprintln!("{}/{id}: compile {:.1} ms", case.workload, 1e3 * compile.as_secs_f64());
                run
            });
            b.iter(run)
        });
        group.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
