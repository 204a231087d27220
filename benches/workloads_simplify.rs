//! The egg simplifier and multi-output kernels against the frozen greedy baseline (one kernel per
//! root, `.simplify(false)`) on the workload suite (issue 6): per case, the simplifier's own time
//! on the traced program (regions, stop reasons, rules fired with counts, cost before/after), the
//! rules that fired in `jit`'s own pipeline (which runs the simplifier after its scan rewrites),
//! those that would fire with fast math, and the scatter-adds `sort_scan_scatters` rewrites; then
//! the program compiled with `.simplify(true)` and `.simplify(false)`: compile time, kernels and
//! bytes moved per call (`cost_report()`), and the best run time of a few calls. A plain `main`
//! (no criterion) so that the whole table takes a few minutes.
//!
//! Run: `cargo bench --bench workloads_simplify [-- FILTER]` (FILTER: a substring of
//! `W1/grad/N=4096,T=1000`-style names). The largest sizes (W1 and W3 at N = 10⁶) are skipped unless
//! `KILN_BENCH_ALL=1`.

#[path = "workloads/mod.rs"]
mod workloads;

use std::time::{Duration, Instant};
use workloads::common::{LAST, SIMPLIFY};

/// Runs of each compiled program; the best is reported.
const RUNS: usize = 5;

struct Side {
    compile: Duration,
    kernels: usize,
    bytes: u64,
    run: Duration,
}

fn side(case: &workloads::Case, simplify: bool) -> (Side, kiln::ir::Function, Option<kiln::SimplifyOutcome>) {
    SIMPLIFY.set(simplify);
    let mut run = (case.make)();
    let t0 = Instant::now();
    run();
    let first = t0.elapsed();
    let mut best = Duration::MAX;
    for _ in 0..RUNS {
        let t = Instant::now();
        run();
        best = best.min(t.elapsed());
    }
    let (trace, exe) = LAST.take().expect("the runner records what it compiled");
    let function = trace();
    let cost = exe.executable().cost_report();
    let s = Side {
        compile: first.saturating_sub(best),
        kernels: cost.kernels,
        bytes: cost.bytes_moved,
        run: best,
    };
    (s, function, exe.simplify_outcome().cloned())
}

/// `name×count, ...` of a report's rules, or `none`.
fn rules_line(report: &kiln::transform::SimplifyReport) -> String {
    let fired: Vec<String> = report.rules_fired().iter().map(|(k, v)| format!("{k}×{v}")).collect();
    if fired.is_empty() { "none".to_string() } else { fired.join(", ") }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn main() {
    let filter = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    let all = std::env::var("KILN_BENCH_ALL").is_ok_and(|v| v == "1");
    for case in workloads::all_cases() {
        let name = format!("{}/{}/{}", case.workload, case.variant, case.size);
        if filter.as_ref().is_some_and(|f| !name.contains(f.as_str())) || (!all && name.contains("N=1000000"))
        {
            continue;
        }
        let (greedy, _, _) = side(&case, false);
        let (egg, function, outcome) = side(&case, true);
        let live = kiln::transform::dce(&function);
        let (_, report) = kiln::transform::simplify(&live, &kiln::transform::SimplifyOptions::default());
        let (mut before, mut after, mut accepted) = (0u64, 0u64, 0);
        let mut stops = std::collections::BTreeMap::new();
        for r in &report.regions {
            before += r.cost_before.bytes;
            after += if r.accepted { r.cost_after.bytes } else { r.cost_before.bytes };
            accepted += usize::from(r.accepted);
            *stops.entry(format!("{:?}", r.stop)).or_insert(0) += 1;
        }
        println!("{name}");
        println!(
            "  egg: {:.2} ms, {} regions ({} accepted, stops {:?}), materialized bytes {} -> {}",
            ms(report.time),
            report.regions.len(),
            accepted,
            stops,
            before,
            after
        );
        println!("  rules (traced program): {}", rules_line(&report));
        // jit runs the simplifier after loop-invariant code motion and the other scan rewrites,
        // which expose more (hoisted invariants folded to literals, column-split carries).
        let outcome = outcome.expect("the egg side compiles with the simplifier");
        println!(
            "  rules (jit's pipeline, {}): {}",
            if outcome.kept { "simplified program kept" } else { "input kept" },
            rules_line(&outcome.report)
        );
        // Fast math is opt-in (`.fast_math(true)`); what its rules would do to the traced program.
        let fast = kiln::transform::SimplifyOptions { fast_math: true, ..Default::default() };
        println!(
            "  rules with fast math (traced program): {}",
            rules_line(&kiln::transform::simplify(&live, &fast).1)
        );
        // Before LICM: scatter-adds with loop-invariant indices made sorted segment sums (`jit`
        // keeps that form where the backend estimates it no costlier).
        println!("  scatter-adds made segment sums: {}", kiln::transform::sort_scan_scatters(&live).1);
        for (label, s) in [("greedy (.simplify(false))", &greedy), ("egg    (.simplify(true)) ", &egg)] {
            println!(
                "  {label}: compile {:8.1} ms, {:4} kernels, {:12} B moved/call, run {:9.3} ms",
                ms(s.compile),
                s.kernels,
                s.bytes,
                ms(s.run)
            );
        }
    }
}
