//! GradABM COVID model speed (the issue-7 targets, against `shared/anchors/gradabm/gradabm_jax.py`):
//! the 56-day forward (`jit`) and forward + backward of `mean(deaths²)` (`jit(grad)`) on a generated
//! Middlesex-mix population of 100k agents (about 0.7 M directed edges); set `EPI_BENCH_1M=1` to add
//! 1 M agents / 7 M edges (minutes per sample). Divide the forward by 56 for seconds per day.
//!
//! `cargo bench -p kiln-sims --bench epi`

use criterion::{Criterion, criterion_group, criterion_main};
use kiln::prelude::*;
use kiln_sims::epi::{CovidModel, CovidParams, Population, UpdateForm};

const DAYS: usize = 56;

fn bench_size(c: &mut Criterion, n: u64) {
    let pop = Population::county_scaled(25017, n, 1).expect("bundled age table");
    let model = CovidModel::new(&pop, DAYS, UpdateForm::Reference);
    let params = CovidParams::constant(DAYS, 2.5, 0.02, 0.5);
    let args = (model, params, kiln::random::key(1u32));
    let fwd = jit(|(m, p, k): (CovidModel, CovidParams, Tensor)| m.simulate(&p, &k));
    let vg = jit(|(m, p, k): (CovidModel, CovidParams, Tensor)| {
        value_and_grad(|(p,): (CovidParams,)| m.simulate(&p, &k).deaths.square().mean_all())((p,))
    });
    fwd.call(&args).expect("forward compiles");
    vg.call(&args).expect("gradient compiles");
    let mut g = c.benchmark_group(format!("epi_covid_{n}"));
    g.sample_size(10);
    g.bench_function("forward_56_days", |b| b.iter(|| fwd.call(&args).unwrap()));
    g.bench_function("forward_backward_56_days", |b| b.iter(|| vg.call(&args).unwrap()));
    g.finish();
}

fn epi(c: &mut Criterion) {
    bench_size(c, 100_000);
    if std::env::var_os("EPI_BENCH_1M").is_some() {
        bench_size(c, 1_000_000);
    }
}

criterion_group!(benches, epi);
criterion_main!(benches);
