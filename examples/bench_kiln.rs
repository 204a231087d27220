//! Runs the benchmark workloads (`benches/workloads/`) and prints one `RESULT {json}` line per case
//! with the JAX anchor's field names (`workload, variant, size, compile_ms, run_ms, min_ms, reps,
//! checksum`), for `scripts/compare_table.py` to join with the JAX side.
//!
//! Timing follows `benches/jax/common.py`'s `bench`: `compile_ms` = first call (trace + compile +
//! run) − median steady call; `run_ms` = median of steady calls, taken until at least 10 calls and
//! 1 s (at most 200 calls, and no more than 25 s of calls).
//!
//! Run: `cargo run --release --example bench_kiln [-- --only W1,W5] [--filter grad]`;
//! `--list-workloads` prints the workloads it has (W1,W5,...).

#[path = "../benches/workloads/mod.rs"]
mod workloads;

use std::time::Instant;

const MIN_REPS: usize = 10;
const MAX_REPS: usize = 200;
const MIN_TIME_S: f64 = 1.0;
const BUDGET_S: f64 = 25.0;

struct Options {
    only: Option<Vec<String>>,
    filter: Option<String>,
}

/// `--list-workloads`: prints the workloads this runner has, comma-separated (for the compare script).
fn list_workloads() -> ! {
    let mut names: Vec<&str> = workloads::all_cases().iter().map(|c| c.workload).collect();
    names.dedup();
    println!("{}", names.join(","));
    std::process::exit(0)
}

fn parse_options() -> Options {
    let mut opts = Options { only: None, filter: None };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = || args.next().unwrap_or_else(|| usage(&format!("{a} needs a value")));
        match a.as_str() {
            "--only" => opts.only = Some(value().split(',').map(str::to_owned).collect()),
            "--filter" => opts.filter = Some(value()),
            "--list-workloads" => list_workloads(),
            "-h" | "--help" => usage(""),
            other => usage(&format!("unknown argument {other}")),
        }
    }
    opts
}

fn usage(msg: &str) -> ! {
    eprintln!(
        "{msg}\nusage: bench_kiln [--only W1,W5] [--filter SUBSTRING of 'W1 grad N=64,T=100'] [--list-workloads]"
    );
    std::process::exit(if msg.is_empty() { 0 } else { 2 })
}

fn median(xs: &[f64]) -> f64 {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 { v[n / 2] } else { 0.5 * (v[n / 2 - 1] + v[n / 2]) }
}

fn main() {
    let opts = parse_options();
    for case in workloads::all_cases() {
        let name = format!("{} {} {}", case.workload, case.variant, case.size);
        if opts.only.as_ref().is_some_and(|o| !o.iter().any(|w| w == case.workload))
            || opts.filter.as_ref().is_some_and(|f| !name.contains(f.as_str()))
        {
            continue;
        }
        let mut run = (case.make)();
        let t0 = Instant::now();
        let first_out = run();
        let first = t0.elapsed().as_secs_f64();
        let mut times = Vec::new();
        let mut out;
        loop {
            let t = Instant::now();
            out = run();
            times.push(t.elapsed().as_secs_f64());
            let total: f64 = times.iter().sum();
            if (times.len() >= MIN_REPS && total >= MIN_TIME_S)
                || total >= BUDGET_S
                || times.len() >= MAX_REPS
            {
                break;
            }
        }
        let checksum = workloads::common::checksum(&out);
        // The arena is reused between calls: a steady call must give what the first call gave.
        let stable = checksum == workloads::common::checksum(&first_out);
        if !stable {
            eprintln!("# WARNING {name}: steady-call checksum differs from the first call's");
        }
        let med = median(&times);
        let min = times.iter().copied().fold(f64::INFINITY, f64::min);
        let record = serde_json::json!({
            "workload": case.workload,
            "variant": case.variant,
            "size": case.size,
            "compile_ms": 1e3 * (first - med),
            "first_ms": 1e3 * first,
            "run_ms": 1e3 * med,
            "min_ms": 1e3 * min,
            "reps": times.len(),
            "checksum": checksum,
            "checksum_stable": stable,
            "impl": "kiln",
        });
        println!("RESULT {record}");
        eprintln!(
            "# {:<6} {:<12} {:<22} compile {:8.1} ms  run {:10.3} ms (min {:.3}, n={})",
            case.workload,
            case.variant,
            case.size,
            1e3 * (first - med),
            1e3 * med,
            1e3 * min,
            times.len()
        );
    }
}
