//! Times an ensemble of K noise seeds of the GradABM COVID model through `jit` on the Franklin
//! County, MA population (70,916 agents, 499,982 directed edges, 56 days): K = 1 as the plain
//! unbatched `simulate`, and `vmap` over K keys (model and parameters shared,
//! `epi::calibrate::ensemble_mean`) for K = 4 and 16 — plus the vmapped program at K = 1, which
//! shows the cost of the batched rules alone. Prints milliseconds per seed-day (best of 3 calls; wall
//! time, and CPU time of all threads, which a busy shared machine disturbs less) and each compiled
//! program's `cost_report()`.
//!
//! `cargo run --release -p kiln-sims --example ensemble_timing [unbatched|vmap] [grad] [K...]`
//! (default K: 1 4 16; `unbatched` / `vmap` time only the plain or only the vmapped programs, for
//! profiling; `grad` times `value_and_grad` of `mean(deaths²)` instead of the forward run);
//! `KILN_DUMP=<dir>` writes each compiled program's IR and plan.

use kiln::prelude::*;
use kiln_sims::epi::calibrate::ensemble_mean;
use kiln_sims::epi::{CovidModel, CovidParams, Daily, Population, UpdateForm};
use std::time::Instant;

const DAYS: usize = 56;

/// CPU seconds (user + system, all threads) this process has used, from `/proc/self/stat`
/// (Linux; clock ticks of 10 ms): on a shared machine it varies far less than wall time.
fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the parenthesized command name; utime and stime are fields 14 and 15.
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?;
    Some(ticks / 100.0)
}

/// The best wall and the best CPU seconds of `runs` calls of `f`.
fn best_of<T>(runs: usize, mut f: impl FnMut() -> T) -> (f64, Option<f64>) {
    let mut best = (f64::INFINITY, None::<f64>);
    for _ in 0..runs {
        let (t, c) = (Instant::now(), cpu_seconds());
        std::hint::black_box(f());
        let cpu = c.zip(cpu_seconds()).map(|(a, b)| b - a);
        best.0 = best.0.min(t.elapsed().as_secs_f64());
        best.1 = match (best.1, cpu) {
            (Some(x), Some(y)) => Some(x.min(y)),
            (x, y) => x.or(y),
        };
    }
    best
}

/// The K members' curves, `f32[K, days]` each, `vmap`ped over the keys with the model shared.
fn per_member(m: &CovidModel, p: &CovidParams, keys: &Tensor) -> Daily {
    let per_key = vmap(
        |(m, p, k): (CovidModel, CovidParams, Tensor)| m.simulate(&p, &k),
        (AxisSpec::NONE, AxisSpec::NONE, 0),
        0,
    );
    per_key((m.clone(), p.clone(), keys.clone()))
}

fn report(
    label: &str,
    k: usize,
    args: &(CovidModel, CovidParams, Tensor),
    what: &str,
    f: impl Fn(&(CovidModel, CovidParams, Tensor)) -> kiln::Result<(f32, String)>,
) -> kiln::Result<()> {
    let t = Instant::now();
    let (total, cost) = f(args)?;
    let first = t.elapsed().as_secs_f64();
    let (run, cpu) = best_of(3, || f(args).unwrap());
    let per = |s: f64| s / (k * DAYS) as f64 * 1e3;
    let cpu = cpu.map_or(String::new(), |c| format!(", CPU {:.3} ms/seed-day", per(c)));
    println!(
        "{label:<22} K={k:<3} {:>7.3} ms/seed-day{cpu}  ({run:.3} s per call, first call {first:.2} s); \
         {what} {total:.1}\n    {cost}",
        per(run),
    );
    Ok(())
}

type Args = (CovidModel, CovidParams, Tensor);

/// `program`'s daily curves, or with `grad` the loss `mean(deaths²)` and its gradient in the
/// parameters (as a calibration epoch computes them), through `jit`; reports the sum of the
/// infections (or the loss) and the cost report.
fn timed(
    label: &str,
    k: usize,
    grad: bool,
    args: &Args,
    program: impl Fn(&CovidModel, &CovidParams, &Tensor) -> Daily + Copy,
) -> kiln::Result<()> {
    let cost = |c: std::sync::Arc<kiln::Compiled>| c.executable().cost_report().to_string();
    if grad {
        let f = jit(move |(m, p, k): Args| {
            value_and_grad(|(p,): (CovidParams,)| program(&m, &p, &k).deaths.square().mean_all())((p,))
        });
        report(&format!("value_and_grad {label}"), k, args, "loss", |a| {
            let (loss, _) = f.call(a)?;
            Ok((loss.item::<f32>(), cost(f.compiled(a)?)))
        })
    } else {
        let f = jit(move |(m, p, k): Args| program(&m, &p, &k));
        report(label, k, args, "mean infections", |a| {
            Ok((f.call(a)?.infections.sum(All).item::<f32>(), cost(f.compiled(a)?)))
        })
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    // `unbatched` / `vmap`: only the plain K = 1 program, or only the vmapped ones (for profiling).
    let only = args.first().filter(|a| *a == "unbatched" || *a == "vmap").cloned();
    if only.is_some() {
        args.remove(0);
    }
    let grad = args.first().is_some_and(|a| a == "grad");
    if grad {
        args.remove(0);
    }
    let ks: Vec<usize> = args.iter().map(|s| s.parse()).collect::<Result<_, _>>()?;
    let ks = if ks.is_empty() { vec![1, 4, 16] } else { ks };
    let pop = Population::franklin_county()?;
    println!("{} agents, {} directed edges, {DAYS} days", pop.num_agents(), pop.network.num_edges());
    let model = CovidModel::new(&pop, DAYS, UpdateForm::KeepGrad);
    let params = CovidParams::constant(DAYS, 2.5, 0.02, 0.5);
    for &k in &ks {
        let keys = kiln::random::split(&kiln::random::key(7u32), k);
        let args = (model.clone(), params.clone(), keys.clone());
        if k == 1 && only.as_deref() != Some("vmap") {
            let one = (model.clone(), params.clone(), keys.index(0));
            timed("jit(simulate)", 1, grad, &one, |m, p, k| m.simulate(p, k))?;
        }
        match (only.as_deref(), k) {
            (Some("unbatched"), _) => {}
            (_, 1) => timed("jit(vmap(simulate))", 1, grad, &args, per_member)?,
            _ => timed("jit(ensemble_mean)", k, grad, &args, ensemble_mean)?,
        }
    }
    Ok(())
}
