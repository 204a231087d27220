//! Test runner for the W2 and W4 workloads (bench2's branch; `examples/bench_kiln.rs` runs the
//! whole suite): times each case as the JAX anchor's `bench` does and prints one `RESULT {json}`
//! line per case, then, given the JAX side's output, checks the checksums.
//!
//! ```sh
//! cargo run --release --example bench_w24 [-- --only W2,W4] [--match grad] [--jax jax.txt] [--max-reps N]
//! ```
//! `--jax FILE`: lines `RESULT {json}` printed by the anchors (`w2_massspring.py`, `w4_rollout.py`);
//! each kiln row is joined on (workload, variant, size) and its checksum compared (sum|x| and the
//! first element at rtol 1e-4), printing `OK` or `MISMATCH`; the exit status is 1 on a mismatch.
//!
//! compile_ms = first call − median steady call; run_ms = median of ≥ 10 steady calls taking ≥ 1 s
//! together (at most 20 s of steady calls).

#[path = "../benches/workloads/mod.rs"]
mod workloads;

use serde_json::{Value, json};
use std::time::Instant;
use workloads::common::checksum;

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1).cloned())
}

fn median(xs: &[f64]) -> f64 {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 { v[n / 2] } else { 0.5 * (v[n / 2 - 1] + v[n / 2]) }
}

/// The JAX rows of `path` (lines `RESULT {json}`), if given.
fn jax_rows(path: Option<String>) -> Vec<Value> {
    let Some(path) = path else { return Vec::new() };
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("--jax {path}: {e}"));
    text.lines()
        .filter_map(|l| l.strip_prefix("RESULT "))
        .map(|l| serde_json::from_str(l).expect("a JSON record"))
        .collect()
}

/// Compares sum|x| and the first element of every leaf at rtol 1e-4; `None` if the shapes differ.
fn agrees(kiln: &[[f64; 3]], jax: &Value) -> Option<bool> {
    let jax = jax.as_array()?;
    if jax.len() != kiln.len() {
        return None;
    }
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-4 * b.abs().max(a.abs());
    Some(kiln.iter().zip(jax).all(|(k, j)| {
        let j: Vec<f64> =
            j.as_array().map(|v| v.iter().filter_map(Value::as_f64).collect()).unwrap_or_default();
        j.len() == 3 && close(k[1], j[1]) && close(k[2], j[2])
    }))
}

fn main() {
    let only: Option<Vec<String>> = arg("--only").map(|s| s.split(',').map(str::to_string).collect());
    let filter = arg("--match");
    let jax = jax_rows(arg("--jax"));
    let max_reps: usize = arg("--max-reps").map_or(200, |s| s.parse().expect("--max-reps N"));
    let mut mismatches = 0;
    let cases = workloads::w2::cases().into_iter().chain(workloads::w4::cases());
    for case in cases {
        if only.as_ref().is_some_and(|o| !o.iter().any(|w| w == case.workload)) {
            continue;
        }
        let name = format!("{} {} {}", case.workload, case.variant, case.size);
        if filter.as_ref().is_some_and(|f| !name.contains(f.as_str())) {
            continue;
        }
        let mut run = (case.make)();
        let t0 = Instant::now();
        let mut out = run();
        let first = t0.elapsed().as_secs_f64();
        let mut times = Vec::new();
        while times.len() < max_reps {
            let t = Instant::now();
            out = run();
            times.push(t.elapsed().as_secs_f64());
            let total: f64 = times.iter().sum();
            if (times.len() >= 10 && total >= 1.0) || total >= 20.0 {
                break;
            }
        }
        let med = median(&times);
        let min = times.iter().copied().fold(f64::INFINITY, f64::min);
        let sums = checksum(&out);
        let rec = json!({
            "workload": case.workload, "variant": case.variant, "size": case.size,
            "compile_ms": 1e3 * (first - med), "run_ms": 1e3 * med, "min_ms": 1e3 * min,
            "reps": times.len(), "checksum": sums,
        });
        println!("RESULT {rec}");
        let row = jax.iter().find(|r| {
            r["workload"] == case.workload && r["variant"] == case.variant && r["size"] == case.size.as_str()
        });
        if let Some(row) = row {
            let verdict = match agrees(&sums, &row["checksum"]) {
                Some(true) => "OK",
                _ => {
                    mismatches += 1;
                    "MISMATCH"
                }
            };
            eprintln!(
                "# {name:<40} kiln compile {:8.1} ms run {:9.3} ms | JAX compile {:8.1} ms run {:9.3} ms | \
                 kiln/JAX run {:.2} | checksum {verdict}: kiln {:?} JAX {}",
                1e3 * (first - med),
                1e3 * med,
                row["compile_ms"].as_f64().unwrap_or(f64::NAN),
                row["run_ms"].as_f64().unwrap_or(f64::NAN),
                med * 1e3 / row["run_ms"].as_f64().unwrap_or(f64::NAN),
                sums,
                row["checksum"],
            );
        }
    }
    if mismatches > 0 {
        eprintln!("{mismatches} checksum MISMATCH(es)");
        std::process::exit(1);
    }
}
