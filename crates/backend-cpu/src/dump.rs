//! The debug dump (`KILN_DUMP=<dir>` or [`CompileOptions::dump_dir`](crate::CompileOptions)): per
//! compiled function, a folder `<dir>/<NNN>-<hash>/` with
//! * `ir.kir` — the function's text form;
//! * `plan.txt` — each step (kernels with their symbol — the name a profile shows, see
//!   `codegen::Jit::symbol` — root, inlined equations, leaves, output, rows, work estimate and
//!   whether they run in parallel; runtime steps), buffer offsets and the arena size;
//! * `kernel<k>.clif` — kernel `k`'s Cranelift IR (codegen keeps the text when a dump is asked for);
//! * one sub-folder per control-flow body (`step<s>-<prim>-<label>/`), with the same files.
//!
//! Writing is best effort: the first failure is reported on stderr, and compilation goes on.

use crate::runtime::{Executable, Loc, Op};
use kiln_ir::{Function, Var};
use std::fmt::Write as _;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// Numbers the dumps of this process, in compilation order.
static COUNTER: AtomicUsize = AtomicUsize::new(0);
/// Set once a dump failure has been reported.
static REPORTED: AtomicBool = AtomicBool::new(false);

/// The folder for a new top-level dump under `dir`: `<NNN>-<hash of the IR text>`.
pub(crate) fn new_folder(dir: &Path, f: &Function) -> PathBuf {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    f.to_string().hash(&mut h);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    dir.join(format!("{n:03}-{:08x}", h.finish() as u32))
}

/// Writes one executable's dump into `folder` (created; control-flow bodies write theirs into
/// sub-folders when they are compiled). Never fails: the first error is reported on stderr.
pub(crate) fn write(folder: &Path, f: &Function, plan: &str, clif: &[Option<String>]) {
    let result = (|| -> std::io::Result<()> {
        std::fs::create_dir_all(folder)?;
        std::fs::write(folder.join("ir.kir"), format!("{f}\n"))?;
        std::fs::write(folder.join("plan.txt"), plan)?;
        for (k, text) in clif.iter().enumerate() {
            if let Some(text) = text {
                std::fs::write(folder.join(format!("kernel{k}.clif")), text)?;
            }
        }
        Ok(())
    })();
    if let Err(e) = result
        && !REPORTED.swap(true, Ordering::Relaxed)
    {
        eprintln!("kiln: cannot write the KILN_DUMP dump to {}: {e} (compilation goes on)", folder.display());
    }
}

/// The sub-folder of a control-flow body's dump: `step<s>-<prim>-<label>`.
pub(crate) fn sub_folder(folder: &Path, step: usize, prim: &str, label: &str) -> PathBuf {
    folder.join(format!("step{step}-{prim}-{label}"))
}

/// Builds `plan.txt`.
pub(crate) struct PlanText {
    out: String,
}

fn var(f: &Function, v: Var) -> String {
    format!("v{}:{}", v.index(), f.var_type(v))
}

fn vars(f: &Function, vs: &[Var]) -> String {
    vs.iter().map(|&v| var(f, v)).collect::<Vec<_>>().join(", ")
}

/// One equation: `#i name(inputs) -> outputs  @ file:line`.
fn eqn(f: &Function, i: usize) -> String {
    let e = &f.eqns[i];
    let ins: Vec<String> = e.inputs.iter().map(|v| format!("v{}", v.index())).collect();
    let mut s = format!("#{i} {}({}) -> {}", e.prim.name(), ins.join(", "), vars(f, &e.outputs));
    if let Some(loc) = &e.loc {
        let _ = write!(s, "  @ {loc}");
    }
    s
}

fn loc(l: &Loc) -> String {
    match l {
        Loc::Param(i) => format!("param {i}"),
        Loc::Const(i) => format!("const {i}"),
        Loc::Arena(o) => format!("arena+{o}"),
        Loc::Out(k) => format!("output {k}"),
    }
}

impl PlanText {
    pub(crate) fn new(f: &Function) -> PlanText {
        PlanText {
            out: format!(
                "plan of {} equations, {} params, {} constants\n\n",
                f.eqns.len(),
                f.params.len(),
                f.consts.len()
            ),
        }
    }

    /// A kernel step: its root, inlined equations (in program order), leaves and output.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn kernel(
        &mut self,
        f: &Function,
        step: usize,
        k: usize,
        symbol: &str,
        root: usize,
        inlined: &[usize],
        leaves: &[Var],
        rows: i64,
        work: u64,
        chunks: usize,
    ) {
        let o = &mut self.out;
        let _ = writeln!(o, "step {step}: kernel {k} ({symbol})");
        let _ = writeln!(o, "  root     {}", eqn(f, root));
        for &i in inlined {
            let _ = writeln!(o, "  inlined  {}", eqn(f, i));
        }
        let _ = writeln!(o, "  leaves   {}", vars(f, leaves));
        let _ = writeln!(o, "  output   {}", vars(f, &f.eqns[root].outputs));
        let par = if chunks > 1 { format!("parallel, {chunks} tasks") } else { "serial".into() };
        let _ = writeln!(o, "  rows {rows}, work {work} units, {par}");
    }

    /// A runtime step.
    pub(crate) fn runtime(&mut self, f: &Function, step: usize, i: usize, note: &str) {
        let _ = writeln!(self.out, "step {step}: runtime {}", eqn(f, i));
        if !note.is_empty() {
            let _ = writeln!(self.out, "  {note}");
        }
    }

    /// The buffers of step `s` (after placement).
    pub(crate) fn buffers(&mut self, s: usize, ins: &[Loc], outs: &[Loc], scratch: (usize, usize)) {
        let list = |ls: &[Loc]| ls.iter().map(loc).collect::<Vec<_>>().join(", ");
        let o = &mut self.out;
        let _ = write!(o, "step {s} buffers: in [{}] out [{}]", list(ins), list(outs));
        if scratch.1 > 0 {
            let _ = write!(o, " scratch arena+{} ({} bytes)", scratch.0, scratch.1);
        }
        o.push('\n');
    }

    /// Separates the step list from the buffer list.
    pub(crate) fn section(&mut self, title: &str) {
        let _ = writeln!(self.out, "\n{title}");
    }

    /// The closing summary.
    pub(crate) fn finish(mut self, exe: &Executable, outputs: &[Loc]) -> String {
        let list = outputs.iter().map(loc).collect::<Vec<_>>().join(", ");
        let _ = writeln!(self.out, "\noutputs [{list}]\narena {} bytes", exe.arena_bytes);
        let threads = exe.threads.count();
        let _ = writeln!(self.out, "threads {threads}");
        let parallel = exe
            .steps
            .iter()
            .filter(|s| {
                matches!(s.op, Op::Kernel { chunks: 2.., .. } | Op::SegmentKernel { chunks: 2.., .. })
            })
            .count();
        let _ = writeln!(self.out, "{parallel} parallel kernel steps\n{}", exe.cost_report());
        self.out
    }
}
