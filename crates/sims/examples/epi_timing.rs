//! Times the GradABM COVID model through `jit` on the Franklin County, MA population (70,916 agents,
//! 499,982 directed edges): compile time, seconds per simulated day (56-day forward), and the 56-day
//! forward + backward of `mean(deaths²)` (as `shared/anchors/gradabm/gradabm_jax.py` measures).
//!
//! `cargo run --release -p kiln-sims --example epi_timing [synthetic N]`

use kiln::prelude::*;
use kiln_sims::epi::{CovidModel, CovidParams, Population, UpdateForm};
use std::time::Instant;

const DAYS: usize = 56;

fn best_of<T>(runs: usize, mut f: impl FnMut() -> T) -> f64 {
    (0..runs)
        .map(|_| {
            let t = Instant::now();
            std::hint::black_box(f());
            t.elapsed().as_secs_f64()
        })
        .fold(f64::INFINITY, f64::min)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let pop = match args.get(1).map(String::as_str) {
        Some("synthetic") => Population::synthetic(args.get(2).map_or(Ok(100_000), |s| s.parse())?, 1),
        _ => Population::franklin_county()?,
    };
    println!("{} agents, {} directed edges, {DAYS} days", pop.num_agents(), pop.network.num_edges());
    let params = CovidParams::constant(DAYS, 2.5, 0.02, 0.5);
    for form in [UpdateForm::Reference, UpdateForm::KeepGrad] {
        let model = CovidModel::new(&pop, DAYS, form);
        let fwd = jit(|(m, p, k): (CovidModel, CovidParams, Tensor)| m.simulate(&p, &k));
        let key = |s: u32| kiln::random::key(s);
        let t = Instant::now();
        let d = fwd.call(&(model.clone(), params.clone(), key(0)))?;
        let first = t.elapsed().as_secs_f64();
        let run = best_of(3, || fwd.call(&(model.clone(), params.clone(), key(1))).unwrap());
        let vg = jit(|(m, p, k): (CovidModel, CovidParams, Tensor)| {
            value_and_grad(|(p,): (CovidParams,)| m.simulate(&p, &k).deaths.square().mean_all())((p,))
        });
        let t = Instant::now();
        let (_, g) = vg.call(&(model.clone(), params.clone(), key(0)))?;
        let first_vg = t.elapsed().as_secs_f64();
        let run_vg = best_of(3, || vg.call(&(model.clone(), params.clone(), key(1))).unwrap());
        println!(
            "{form:?}: forward {:.2} ms/day ({run:.3} s / {DAYS} days; first call incl. compile {first:.2} s); \
             fwd+bwd {run_vg:.3} s (first call {first_vg:.2} s); infections {:.0}, deaths {:.1}; \
             dloss/dR0 {:.4}, dloss/dm {:.1}, dloss/dinit {:.4}",
            run / DAYS as f64 * 1e3,
            d.infections.sum(All).item::<f32>(),
            d.deaths.sum(All).item::<f32>(),
            g.0.r0.sum(All).item::<f32>(),
            g.0.mortality.sum(All).item::<f32>(),
            g.0.initial_pct.item::<f32>(),
        );
    }
    Ok(())
}
