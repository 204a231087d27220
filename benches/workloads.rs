//! Criterion benchmarks of the workload suite (`benches/workloads/`): one benchmark per case
//! (steady-state run time of the compiled program), after printing each case's compile time (first
//! call − one steady call). Small samples, so the whole suite finishes in a few minutes.
//!
//! Run: `cargo bench --bench workloads [-- FILTER]` (e.g. `-- "W1/grad"`). The JAX comparison table
//! comes from `scripts/compare_jax.sh`, not from here.

#[path = "workloads/mod.rs"]
mod workloads;

use criterion::{Criterion, criterion_group, criterion_main};
use std::time::{Duration, Instant};

fn bench(c: &mut Criterion) {
    for case in workloads::all_cases() {
        let id = format!("{}/{}/{}", case.workload, case.variant, case.size);
        let mut run = (case.make)();
        let t0 = Instant::now();
        run();
        let first = t0.elapsed();
        let t1 = Instant::now();
        run();
        let steady = t1.elapsed();
        eprintln!("{id}: compile {:.1} ms", 1e3 * first.saturating_sub(steady).as_secs_f64());
        // Slow cases (≳100 ms per call) get the minimum sample count and a short window.
        let slow = steady > Duration::from_millis(100);
        let mut group = c.benchmark_group(case.workload);
        group
            .sample_size(10)
            .warm_up_time(Duration::from_millis(if slow { 200 } else { 500 }))
            .measurement_time(Duration::from_secs(if slow { 4 } else { 2 }));
        group.bench_function(format!("{}/{}", case.variant, case.size), |b| b.iter(&mut run));
        group.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
