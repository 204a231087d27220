//! Compilation options: thread count, the debug dump directory, the parallel threshold and
//! multi-output kernels.

use std::path::PathBuf;

/// How [`compile_with`](crate::compile_with) builds and runs an [`Executable`](crate::Executable).
///
/// `CompileOptions::default()` reads the environment ([`CompileOptions::from_env`]); a literal with
/// every field set (or `CompileOptions { threads: Some(1), ..Default::default() }`) does not depend on
/// it except through the fields left at their defaults.
///
/// ```
/// use kiln_backend_cpu::CompileOptions;
/// let serial = CompileOptions { threads: Some(1), dump_dir: None, min_task_work: None, multi_output: true };
/// assert_eq!(serial.threads, Some(1));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CompileOptions {
    /// Worker threads for kernels whose estimated work is above the parallel threshold:
    /// `None` (or `Some(0)`) = rayon's global pool (one thread per core, or `RAYON_NUM_THREADS`);
    /// `Some(1)` = never spawn, every kernel runs on the calling thread; `Some(n)` = a pool of `n`
    /// threads (at most 256: a larger `n` is clamped, as each thread reserves a stack), shared
    /// process-wide by the executables compiled with `n` and shut down when the last of them is
    /// dropped. Results are bitwise the same for every value.
    pub threads: Option<usize>,
    /// Where to write the debug dump of every compiled function (`<dir>/<NNN>-<hash>/`: `ir.kir`,
    /// `plan.txt`, `kernel<k>.clif`), or `None` for no dump. Failing to write it is reported once on
    /// stderr and never fails compilation.
    pub dump_dir: Option<PathBuf>,
    /// Estimated work units (≈ element operations) each parallel task must carry: a kernel is split
    /// into at most `work / min_task_work` row ranges, so one below it runs serially. `None` = the
    /// default measured on the development VM (2²⁰ units ≈ 250 µs; see `cost.rs`); a many-core
    /// machine may want ~10× less. `Some(0)` splits every kernel with more than one row.
    pub min_task_work: Option<u64>,
    /// Group kernels with the same number of outer rows into multi-output kernels (one step, one
    /// dispatch; see the crate docs). `true` by default; kiln's `jit` turns it off with
    /// `simplify(false)`, which keeps the greedy one-root-per-kernel fusion as the benches'
    /// baseline. Results are bitwise the same either way.
    pub multi_output: bool,
}

impl CompileOptions {
    /// Options from the environment: `dump_dir` from `KILN_DUMP` (unset or empty: no dump),
    /// `threads` from `KILN_NUM_THREADS` (unset, empty or not a number: `None`), `multi_output`
    /// off when `KILN_MULTI_OUTPUT` is `0` (for side-by-side runs), else on.
    pub fn from_env() -> CompileOptions {
        let dump_dir = std::env::var_os("KILN_DUMP").filter(|s| !s.is_empty()).map(PathBuf::from);
        let threads = std::env::var("KILN_NUM_THREADS").ok().and_then(|s| s.trim().parse().ok());
        let multi_output = std::env::var("KILN_MULTI_OUTPUT").map_or(true, |s| s.trim() != "0");
        CompileOptions { threads, dump_dir, min_task_work: None, multi_output }
    }
}

impl Default for CompileOptions {
    /// [`CompileOptions::from_env`].
    fn default() -> CompileOptions {
        CompileOptions::from_env()
    }
}
