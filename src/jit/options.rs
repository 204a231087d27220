//! The flags of a [`crate::Jit`] and the one place where they reach the backend.

use crate::Checkpoint;
use kiln_backend_cpu::{CompileError, CompileOptions, Executable};
use kiln_ir::Function;

/// Compilation flags of a jitted function, set with the builder methods of [`crate::Jit`] and
/// [`crate::JitStatic`] (`jit(f).threads(2).fast_math(true)`). Every field is part of the cache key,
/// so the same function with other flags is compiled separately.
///
/// ```
/// use kiln::prelude::*;
/// let f = jit(|x: Tensor| x.exp()).threads(2).fast_math(true).checkpoint_policy(Checkpoint::StoreAll);
/// assert_eq!(
///     *f.options(),
///     JitOptions { threads: Some(2), fast_math: true, checkpoint: Some(Checkpoint::StoreAll), simplify: true }
/// );
/// assert_eq!(JitOptions::default().threads, None); // the backend's choice
/// assert!(JitOptions::default().simplify); // the egg pass runs unless turned off
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct JitOptions {
    /// Worker threads the compiled code may use; `None` lets the backend choose (`KILN_NUM_THREADS`,
    /// else one per core). At most 256: a larger count is clamped. Executables compiled with the same
    /// count share one pool, shut down when the last of them is dropped.
    pub threads: Option<usize>,
    /// Allow reassociation and contraction of float arithmetic (results may differ in the last bits):
    /// enables the fast-math rules of the simplifier (`x*0 → 0`, `x-x → 0`, constant reassociation,
    /// guarded `log(exp x)`/`exp(log x)`).
    pub fast_math: bool,
    /// The reverse-mode `scan` checkpoint policy applied while tracing (see [`crate::with_checkpoint`]);
    /// `None` uses the policy in effect on the calling thread, which then becomes part of the key.
    pub checkpoint: Option<Checkpoint>,
    /// Run the equality-saturation simplifier ([`kiln_transform::simplify()`]) before the backend, and
    /// let the backend form multi-output kernels ([`CompileOptions::multi_output`]), after moving
    /// loop-invariant work out of scans ([`kiln_transform::hoist_scan_invariants`]). Its default
    /// rules are IEEE-exact, so the program's values are unchanged (bit for bit in the reference
    /// interpreter; compiled float sums may round differently where a reduction becomes a kernel of
    /// its own, within the backend's documented bound; and constants are folded by the reference
    /// interpreter, whose `exp`/`log`/`tanh`/`sin`/... and sums are correctly rounded or pairwise
    /// where the compiled vector routines may differ by an ulp, so a folded constant matches eager
    /// code rather than the unsimplified compile); on by default. Off, the program is compiled with
    /// the greedy fusion alone (the benches' baseline).
    pub simplify: bool,
}

impl Default for JitOptions {
    fn default() -> JitOptions {
        JitOptions { threads: None, fast_math: false, checkpoint: None, simplify: true }
    }
}

impl JitOptions {
    /// The options with the checkpoint policy made explicit (the caller's thread policy when unset):
    /// what a trace depends on, hence what the cache key holds.
    pub(crate) fn resolved(&self) -> JitOptions {
        JitOptions { checkpoint: Some(self.checkpoint.unwrap_or_else(crate::checkpoint_policy)), ..*self }
    }

    /// Runs `f` (which traces) under this checkpoint policy.
    pub(crate) fn tracing<T>(&self, f: impl FnOnce() -> T) -> T {
        match self.checkpoint {
            Some(p) => crate::with_checkpoint(p, f),
            None => f(),
        }
    }
}

/// Compiles `f` for `opts`: dead equations are dropped first (`grad` leaves the unused forward pass
/// that computed the loss value; JAX's DCE does the same), then, with `opts.simplify`, scan carries
/// with a short last axis whose new values the body can compute column by column are carried as
/// their columns ([`kiln_transform::split_scan_carry_columns`]) where the backend estimates that
/// no costlier, loop constants
/// that a product reads with strided lanes are transposed before their loops
/// ([`kiln_transform::transpose_scan_dot_constants`]), loop-invariant
/// equations move out of scans where the backend estimates it pays ([`hoist_verdict`]), after
/// scatter-adds with loop-invariant indices became segment sums (over indices sorted once where
/// their updates can be permuted; [`kiln_transform::sort_scan_scatters`]) where the backend estimates
/// that no costlier, a scan body's carry-independent work runs for all steps before its loop where
/// [`xs_work_verdict`] approves ([`kiln_transform::precompute_scan_xs_work`]), scan outputs that
/// pass an xs slice through read that xs ([`kiln_transform::reuse_scan_xs_echoes`]), and the egg
/// simplifier runs (`opts.fast_math` enables its fast-math rules)
/// under both [`kiln_transform::CostModel`]s — the fused-costs extraction is taken where the
/// backend estimates it strictly cheaper than the every-result one ([`fused_cheaper`]) — and its
/// program is kept if the backend estimates it no costlier than the input ([`backend_verdict`]),
/// then literal loop constants are sunk into scan bodies ([`kiln_transform::sink_scan_constants`])
/// and the backend compiles (multi-output kernels with `opts.simplify`) with `opts.threads` (or
/// `KILN_NUM_THREADS`) and `KILN_DUMP` from the environment. With `KILN_DUMP` set,
/// `<dir>/simplify-<n>.txt` holds the IR before and after, the simplifier's report and the
/// verdicts. Returns the executable and, with `opts.simplify`, what the simplifier did.
pub(crate) fn backend_compile(
    f: &Function,
    opts: &JitOptions,
) -> Result<(Executable, Option<SimplifyOutcome>), CompileError> {
    let env = CompileOptions::from_env();
    // `simplify(false)` is the frozen greedy baseline: one root per kernel, no multi-output kernels.
    let options = CompileOptions {
        threads: opts.threads.or(env.threads),
        multi_output: opts.simplify && env.multi_output,
        ..env
    };
    let mut live = kiln_transform::dce(f);
    if opts.simplify {
        // Carries with a short last axis whose new values can be computed column by column are
        // carried as their columns (exact; the loop's kernels read and write contiguous lanes),
        // where the backend estimates the result no costlier (W2's gradient keeps whole residuals
        // for the backward pass, so its forward loop would compute both).
        let (split, mut split_carries) = kiln_transform::split_scan_carry_columns(&live);
        if split_carries > 0 && no_costlier(&split, &live) {
            live = split;
        } else {
            split_carries = 0;
        }
        // Loop constants that a product reads with strided lanes are transposed once, before the
        // loop (exact; the transpose is one pass over what the loop reads at every step).
        let (transposed, dot_transposes) = kiln_transform::transpose_scan_dot_constants(&live);
        live = transposed;
        // Loop-invariant work moves out of scans, scan by scan where the backend estimates the
        // hoisted loop cheaper (`hoist_verdict`). Scatter-adds with loop-invariant indices may
        // first become segment sums, over indices sorted once where the updates allow (exact); that form is kept only if
        // the backend estimates it, hoisted, no costlier than the scatters hoisted (a sort left
        // in a loop whose hoisting was refused would run at every step).
        let (plain, mut hoist) = kiln_transform::hoist_scan_invariants(&live, &hoist_verdict);
        let (sorted, mut sorted_scatters) = kiln_transform::sort_scan_scatters(&live);
        live = plain;
        if sorted_scatters > 0 {
            let (hoisted, sorted_hoist) = kiln_transform::hoist_scan_invariants(&sorted, &hoist_verdict);
            if no_costlier(&hoisted, &live) {
                (live, hoist) = (hoisted, sorted_hoist);
            } else {
                sorted_scatters = 0;
            }
        }
        // A scan body's carry-independent work runs for all steps before the loop, where the
        // backend estimates the body fewer kernels and the precomputed arrays stay small
        // (`xs_work_verdict`), and where the result still plans.
        // The rewrite must still plan where its input did: batching adds a dimension (a rank-16
        // product in the body would become a rank-17 one, past the backend's limit).
        let (fissioned, mut xs_work) = kiln_transform::precompute_scan_xs_work(&live, &xs_work_verdict);
        if xs_work.scans > 0
            && kiln_backend_cpu::estimate(&fissioned).is_err()
            && kiln_backend_cpu::estimate(&live).is_ok()
        {
            xs_work.refused += xs_work.scans;
            (xs_work.moved, xs_work.scans) = (0, 0);
        } else {
            live = fissioned;
        }
        // Scan outputs that only pass an xs slice through are that xs (exact; W2's gradient saved
        // its precomputed actuation and sines again as residuals, a copy per step).
        let (echoless, xs_echoes) = kiln_transform::reuse_scan_xs_echoes(&live);
        live = echoless;
        // Extraction under both cost models (every result written, or only kernel roots'): the
        // backend's estimate picks the fused-costs program only where it is strictly cheaper.
        let run = |cost_model| {
            let sopts = kiln_transform::SimplifyOptions {
                fast_math: opts.fast_math,
                cost_model,
                ..Default::default()
            };
            kiln_transform::simplify(&live, &sopts)
        };
        let (every, every_report) = run(kiln_transform::CostModel::EveryResult);
        let (fused, fused_report) = run(kiln_transform::CostModel::Fused);
        let (take_fused, models, estimate) = fused_cheaper(&fused, &every);
        let (simplified, report) = if take_fused { (fused, fused_report) } else { (every, every_report) };
        let (keep, mut verdict) = backend_verdict(&live, estimate);
        verdict.push_str(&format!(
            "\ncost models: the {} extraction is the simplified program above ({models})",
            if take_fused { "fused-costs" } else { "every-result" }
        ));
        verdict.push_str(&format!(
            "\nloop-invariant code motion (before the simplifier): {} equations out of {} scans ({} scans refused); \
             {sorted_scatters} scatter-adds with loop-invariant indices made segment sums; \
             {split_carries} scan carries carried as their columns; \
             {dot_transposes} loop constants of products transposed before their loops; \
             carry-independent work: {} equations computed for all steps before {} scans ({} scans refused); \
             {xs_echoes} scan outputs that passed an xs slice through read that xs instead",
            hoist.hoisted, hoist.scans, hoist.refused, xs_work.moved, xs_work.scans, xs_work.refused
        ));
        // Literal loop constants become constants of their loop bodies, where the backend sees
        // their values (indices in range need no clamps). After the simplifier, which folds the
        // hoisted invariants into literals; exact, and no change to the estimates above.
        let (simplified, sunk) = kiln_transform::sink_scan_constants(&simplified);
        let (input, _) = kiln_transform::sink_scan_constants(&live);
        verdict.push_str(&format!(
            "\nloop constants sunk into scan bodies: {} by the simplifier, {sunk} after it",
            report.sunk
        ));
        if let Some(dir) = &options.dump_dir {
            dump_simplify(dir, &live, &simplified, &report, &verdict);
        }
        live = input;
        if keep {
            // `estimate` stops before code generation; should the simplified program fail there
            // (an operand limit, say), the input is compiled instead.
            if let Ok(exe) = kiln_backend_cpu::compile_with(&simplified, &options) {
                return Ok((exe, Some(SimplifyOutcome { report, kept: true })));
            }
        }
        let exe = kiln_backend_cpu::compile_with(&live, &options)?;
        return Ok((exe, Some(SimplifyOutcome { report, kept: false })));
    }
    Ok((kiln_backend_cpu::compile_with(&live, &options)?, None))
}

/// What `jit`'s simplifier did to one compiled program ([`crate::Compiled::simplify_outcome`]).
#[derive(Clone, Debug)]
pub struct SimplifyOutcome {
    /// The report of the extraction that was compared with the input (rules fired per region,
    /// stop reasons, costs, time), run after loop-invariant code motion and the other scan
    /// rewrites, so it lists what fires in `jit`'s own pipeline.
    pub report: kiln_transform::SimplifyReport,
    /// True if the simplified program was compiled; false if the backend estimated it costlier
    /// than the input (or it did not compile) and the input was compiled instead.
    pub kept: bool,
}

/// Whether to compile the simplifier's program rather than the input, by the backend's own estimate
/// of both ([`kiln_backend_cpu::estimate`]: fusion included, no code generated): kept unless it moves
/// more bytes per call, or as many and more flops. The simplifier prices e-nodes, not kernels: on
/// W4's forward at B = 64 its choice moved 18.2 MB per call where the input moved 14.9 MB once fused.
/// Also says why, for the dump. `simplified`: the simplifier program's estimate.
fn backend_verdict(live: &Function, simplified: Estimate) -> (bool, String) {
    match (kiln_backend_cpu::estimate(live), simplified) {
        (Ok(a), Ok(b)) => {
            let keep = cost(&b) <= cost(&a);
            let what = if keep { "simplified program kept" } else { "input kept (simplified costs more)" };
            let line = |r: &kiln_backend_cpu::CostReport| {
                format!("{} kernels, {} bytes, {} flops", r.kernels, r.bytes_moved, r.flops)
            };
            (keep, format!("{what}: backend estimate before {}; after {}", line(&a), line(&b)))
        }
        (Ok(_), Err(e)) => (false, format!("input kept: the simplified program does not plan ({e})")),
        (Err(e), _) => (true, format!("simplified program kept: the input does not plan ({e})")),
    }
}

/// How every verdict here orders two estimates: bytes moved per call first, then flops.
fn cost(r: &kiln_backend_cpu::CostReport) -> (u64, u64) {
    (r.bytes_moved, r.flops)
}

/// Whether the backend estimates `a` no costlier than `b` ([`cost`]; false if either does not plan).
fn no_costlier(a: &Function, b: &Function) -> bool {
    match (kiln_backend_cpu::estimate(a), kiln_backend_cpu::estimate(b)) {
        (Ok(a), Ok(b)) => cost(&a) <= cost(&b),
        _ => false,
    }
}

/// The backend's estimate of a program (an error where it does not plan).
type Estimate = Result<kiln_backend_cpu::CostReport, CompileError>;

/// Whether the backend estimates the fused-costs extraction `fused` strictly cheaper than the
/// every-result one `every` ([`cost`]; false if `fused` does not plan, true if only `every` does
/// not), the two estimates for the dump, and the chosen program's estimate (for
/// [`backend_verdict`], which would otherwise plan it again).
fn fused_cheaper(fused: &Function, every: &Function) -> (bool, String, Estimate) {
    let line = |r: &Estimate| match r {
        Ok(r) => format!("{} kernels, {} bytes, {} flops", r.kernels, r.bytes_moved, r.flops),
        Err(e) => format!("does not plan ({e})"),
    };
    let (ea, eb) = (kiln_backend_cpu::estimate(fused), kiln_backend_cpu::estimate(every));
    let better = match (&ea, &eb) {
        (Ok(x), Ok(y)) => cost(x) < cost(y),
        (Ok(_), Err(_)) => true,
        (Err(_), _) => false,
    };
    let models = format!("fused-costs program: {}; every-result program: {}", line(&ea), line(&eb));
    (better, models, if better { ea } else { eb })
}

/// Whether a scan's loop-invariant equations move out of it ([`kiln_transform::hoist_scan_invariants`]):
/// when the backend estimates the hoisted form (the scan alone, before and after) to move fewer
/// bytes per call, or as many and fewer flops. A hoisted value is read from memory at every step;
/// recomputed, it may have been free (fused into its consumer).
fn hoist_verdict(before: &Function, after: &Function) -> bool {
    match (kiln_backend_cpu::estimate(before), kiln_backend_cpu::estimate(after)) {
        (Ok(a), Ok(b)) => cost(&b) < cost(&a),
        _ => false,
    }
}

/// The most bytes of arrays one scan's carry-independent work may precompute
/// ([`xs_work_verdict`]): they are written once and read back step by step, so they should stay in
/// the core's L2 (W2's single rollout needs 480 KB, its 256-robot batch would need 123 MB). At
/// 4 MiB the backward scans of W2's single-robot gradient (3.1 MB) and W4's gradient at B = 64
/// (3.3 MB) moved too: W4's gradient got slower (one thread, minima of alternating runs: 2.07 ->
/// 2.24 ms) and W2's no faster.
const XS_WORK_MAX_BYTES: u64 = 1 << 20;

/// Whether a scan's carry-independent work runs for all steps before the loop
/// ([`kiln_transform::precompute_scan_xs_work`]): when the largest array the precomputation may
/// hold (the precomputed arrays together, or one intermediate) takes at most
/// [`XS_WORK_MAX_BYTES`] and the backend estimates the new body fewer kernels than the old. The
/// estimate prices bytes and flops, not the fixed cost of running a kernel at every step (40-60 ns
/// each, measured on W2's body), which is what the move saves; the extra bytes are the precomputed
/// arrays, written once and read once.
fn xs_work_verdict(body: &Function, new_body: &Function, bytes: u64) -> bool {
    if bytes > XS_WORK_MAX_BYTES {
        return false;
    }
    match (kiln_backend_cpu::estimate(body), kiln_backend_cpu::estimate(new_body)) {
        (Ok(a), Ok(b)) => b.kernels < a.kernels,
        _ => false,
    }
}

/// Writes the simplifier's before/after IR and report next to the backend's dump (best effort: a
/// failure to write is reported on stderr and compilation goes on).
fn dump_simplify(
    dir: &std::path::Path,
    before: &Function,
    after: &Function,
    report: &kiln_transform::SimplifyReport,
    verdict: &str,
) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static COUNT: AtomicUsize = AtomicUsize::new(0);
    let n = COUNT.fetch_add(1, Ordering::Relaxed);
    let text =
        format!("# before\n{before:#}\n\n# after\n{after:#}\n\n# report\n{report}\n# verdict\n{verdict}\n");
    let path = dir.join(format!("simplify-{n:03}.txt"));
    if let Err(e) = std::fs::create_dir_all(dir).and_then(|_| std::fs::write(&path, text)) {
        eprintln!("kiln: cannot write the simplify dump {}: {e}", path.display());
    }
}

#[cfg(test)]
mod tests {
    use super::backend_verdict;
    use kiln_ir::{BinaryOp, DType, Function, Prim, TensorType, UnaryOp};

    /// `x * 2` over `f32[1000]`, plus `exp` of it materialized for `extra` more consumers.
    fn program(extra: usize) -> Function {
        let mut f = Function::new();
        let x = f.add_param(TensorType::new(DType::F32, [1000]));
        let y = f.push(Prim::Binary(BinaryOp::Add), &[x, x], None).unwrap()[0];
        f.outputs.push(y);
        if extra > 0 {
            let e = f.push(Prim::Unary(UnaryOp::Exp), &[x], None).unwrap()[0];
            for _ in 0..extra {
                let s = f.push(Prim::Unary(UnaryOp::Log), &[e], None).unwrap()[0];
                f.outputs.push(s);
            }
        }
        f
    }

    /// A scan body's product over rank-16 operands that reads only the scanned input: vmapped
    /// before the loop it would be rank 17, past the backend's limit, so the precomputation is
    /// refused and the program compiles as it did without it (the same values as the interpreter).
    #[test]
    fn precomputed_scan_work_that_would_not_plan_is_refused() {
        let ones = |n: usize| vec!["2"; n].join(",");
        let dims = (1..16).map(|d| d.to_string()).collect::<Vec<_>>().join(",");
        let src = format!(
            "{{ lambda w:f32[{o}] c:f32[2,2] xs:f32[3,{o}] . let
                d:f32[2,2] = scan[length=3 reverse=false num_consts=1 num_carry=1 body={{ lambda w:f32[{o}] c:f32[2,2] x:f32[{o}] . let
                    p:f32[2,2] = dot_general[lhs_contracting=({dims}) rhs_contracting=({dims}) lhs_batch=() rhs_batch=() preferred_element_type=none] w x
                    t:f32[2,2] = tanh p
                    n:f32[2,2] = add c t
                  in (n,) }}] w c xs
              in (d,) }}",
            o = ones(16)
        );
        let f = kiln_ir::parse(&src).unwrap_or_else(|e| panic!("{e}\n{src}"));
        kiln_ir::verify(&f).unwrap();
        let (moved, report) = kiln_transform::precompute_scan_xs_work(&f, &|_, _, _| true);
        assert_eq!(report.scans, 1, "the transform alone moves the product");
        assert!(kiln_backend_cpu::estimate(&moved).is_err(), "and that program does not plan");
        let (exe, _) =
            super::backend_compile(&f, &super::JitOptions::default()).expect("compiles without the move");
        let s16 = [2usize; 16];
        let args = [
            kiln_ir::Array::from_vec(&s16, vec![0.5f32; 1 << 16]),
            kiln_ir::Array::from_vec(&[2, 2], vec![0.25f32, -1.0, 0.0, 2.0]),
            kiln_ir::Array::from_vec(
                &[3, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2],
                (0..3 << 16).map(|i| (i % 7) as f32 - 3.0).collect::<Vec<_>>(),
            ),
        ];
        let got = exe.run(&args).unwrap();
        let want = kiln_ir::eval(&f, &args).unwrap();
        assert_eq!(got[0].to_vec::<f32>(), want[0].to_vec::<f32>());
    }

    #[test]
    fn the_backend_estimate_decides_which_program_is_compiled() {
        // One kernel (8 KB moved) against a program that also materializes exp(x) for two logs:
        // the costlier "simplified" program is refused, a cheaper or equal one kept.
        let (cheap, costly) = (program(0), program(2));
        let verdict = |live: &Function, simplified: &Function| {
            backend_verdict(live, kiln_backend_cpu::estimate(simplified))
        };
        let (keep, why) = verdict(&cheap, &costly);
        assert!(!keep, "{why}");
        assert!(why.contains("input kept") && why.contains("8000 bytes"), "{why}");
        assert!(verdict(&costly, &cheap).0);
        assert!(verdict(&cheap, &cheap).0);
    }
}
