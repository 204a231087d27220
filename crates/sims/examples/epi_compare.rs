//! kiln's side of the GradABM speed comparison with `shared/anchors/gradabm/gradabm_jax.py`: for
//! generated county populations (Middlesex, MA's age mix scaled to N agents, the 25011-fitted
//! contact generator: about 7.05 N directed edges) it prints compile time, seconds per simulated day
//! (56-day forward under `jit`), the 56-day forward + backward of `mean(deaths²)` (`jit(grad)`, as the
//! JAX script measures), and the peak resident memory of the gradient (`VmHWM`, reset before it).
//!
//! `cargo run --release -p kiln-sims --example epi_compare [N ...] [--keep-grad] [--days T]
//! [--store-all | --sqrt]` (the gradient's scan checkpointing; default `Checkpoint::Auto`)
//! (default N: 100000 1000000). Run each N in its own process for a clean memory peak.
//! `benches/epi/epi_compare.py` runs it and the JAX script alternately and reports medians.

use kiln::prelude::*;
use kiln_sims::epi::{CovidModel, CovidParams, Population, UpdateForm};
use std::time::Instant;

fn best_of<T>(runs: usize, mut f: impl FnMut() -> T) -> f64 {
    (0..runs)
        .map(|_| {
            let t = Instant::now();
            std::hint::black_box(f());
            t.elapsed().as_secs_f64()
        })
        .fold(f64::INFINITY, f64::min)
}

/// Peak resident set size since the last reset, in GB (Linux `VmHWM`; NaN elsewhere).
fn peak_rss_gb() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(f64::NAN, |kb| kb * 1024.0 / 1e9)
}

/// Resets `VmHWM` to the current RSS (writing 5 to `clear_refs`, Linux ≥ 4.0).
fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut sizes = Vec::new();
    let (mut form, mut days) = (UpdateForm::Reference, 56usize);
    let mut policy = kiln::Checkpoint::Auto;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--keep-grad" => form = UpdateForm::KeepGrad,
            "--days" => days = args.next().ok_or("--days needs a value")?.parse()?,
            "--store-all" => policy = kiln::Checkpoint::StoreAll,
            "--sqrt" => policy = kiln::Checkpoint::Sqrt,
            n => sizes.push(n.parse::<f64>()? as u64),
        }
    }
    if sizes.is_empty() {
        sizes = vec![100_000, 1_000_000];
    }
    let params = CovidParams::constant(days, 2.5, 0.02, 0.5);
    let key = |s: u32| kiln::random::key(s);
    for n in sizes {
        let t = Instant::now();
        let pop = Population::county_scaled(25017, n, 1)?;
        let build = t.elapsed().as_secs_f64();
        let model = CovidModel::new(&pop, days, form);
        println!(
            "N = {n}, {} directed edges, {days} days, {form:?} (population built in {build:.2} s)",
            pop.network.num_edges()
        );

        let fwd = jit(|(m, p, k): (CovidModel, CovidParams, Tensor)| m.simulate(&p, &k));
        let args = (model.clone(), params.clone(), key(0));
        let t = Instant::now();
        fwd.compiled(&args)?;
        let compile_fwd = t.elapsed().as_secs_f64();
        let d = fwd.call(&args)?;
        let run = best_of(3, || fwd.call(&(model.clone(), params.clone(), key(1))).unwrap());
        println!(
            "  forward:  compile {compile_fwd:.2} s, {:.2} ms/day ({run:.3} s for {days} days); \
             infections {:.0}, deaths {:.1}",
            run / days as f64 * 1e3,
            d.infections.sum(All).item::<f32>(),
            d.deaths.sum(All).item::<f32>()
        );

        let vg = jit(|(m, p, k): (CovidModel, CovidParams, Tensor)| {
            value_and_grad(|(p,): (CovidParams,)| m.simulate(&p, &k).deaths.square().mean_all())((p,))
        })
        .checkpoint_policy(policy);
        reset_peak_rss();
        let base = peak_rss_gb();
        let t = Instant::now();
        vg.compiled(&args)?;
        let compile_vg = t.elapsed().as_secs_f64();
        let (_, g) = vg.call(&args)?;
        let run_vg = best_of(2, || vg.call(&(model.clone(), params.clone(), key(1))).unwrap());
        let peak = peak_rss_gb();
        println!(
            "  fwd+bwd:  compile {compile_vg:.2} s, {run_vg:.3} s for {days} days; peak RSS {peak:.2} GB \
             (RSS before {base:.2} GB); dloss/dR0 {:.4}, dloss/dm {:.2}, dloss/dinit {:.4}",
            g.0.r0.sum(All).item::<f32>(),
            g.0.mortality.sum(All).item::<f32>(),
            g.0.initial_pct.item::<f32>()
        );
    }
    Ok(())
}
