//! Running a pipelined chain ([`crate::pipeline`]): the chain's steps in blocks of rows on one
//! thread, the scan on another, each loop step waiting only for its own xs row.

use super::{Bases, Executable, Op, Table};
use std::sync::atomic::{AtomicUsize, Ordering};

/// The member steps of `first..scan` computed in blocks of `block` rows while step `scan` (a
/// forward scan) runs, the other steps of that range first (see [`crate::pipeline::find`]).
#[derive(Clone, Debug)]
pub(crate) struct Pipeline {
    /// The range's first step (a member, or a step run before the chain).
    pub(crate) first: usize,
    /// The scan's step, the range's last.
    pub(crate) scan: usize,
    /// The scan's length: the rows of every member's results.
    pub(crate) rows: usize,
    /// Rows per block published at once.
    pub(crate) block: usize,
    /// Per step of `first..scan`: a chain member.
    pub(crate) members: Box<[bool]>,
}

/// Rows per block: the loop's first step waits for one block, and each block costs a call per
/// chain step (a gemm call packs its rhs again).
const BLOCKS: usize = 16;

impl Pipeline {
    /// The runtime's form of a chain found by [`crate::pipeline::find`].
    pub(crate) fn new(c: &crate::pipeline::Chain) -> Pipeline {
        Pipeline {
            first: c.first,
            scan: c.scan,
            rows: c.rows,
            block: c.rows.div_ceil(BLOCKS).max(1),
            members: c.members.clone(),
        }
    }
}

/// The call's buffer tables, sent to the thread running the other half.
#[derive(Clone, Copy)]
struct Buffers {
    ins: *const *const u8,
    n_in: usize,
    outs: *const *mut u8,
    n_out: usize,
    arena: *mut u8,
}

/// Should the producer unwind (a bug: its steps are JIT kernels and gemm row blocks), marks every
/// row ready, so that the loop waiting for its rows ends and `join` passes the panic on, instead
/// of the loop waiting forever.
struct PublishAllOnUnwind<'a>(&'a AtomicUsize);

impl Drop for PublishAllOnUnwind<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.store(usize::MAX, Ordering::Release);
        }
    }
}

// SAFETY: the two halves touch disjoint memory but for the xs rows, which the producer writes
// before publishing them (release) and the scan reads after seeing them (acquire).
unsafe impl Send for Buffers {}
unsafe impl Sync for Buffers {}

impl Executable {
    /// Runs steps `p.first..=p.scan`: the steps that are not members, then the scan on this
    /// thread while another thread of the pool computes the members block by block, publishing the
    /// rows done (rayon's `join` runs the first closure here and offers the second to the pool;
    /// should no thread take it, the scan's first wait runs it here, whole).
    ///
    /// # Safety
    /// As [`Executable::run_raw`], the steps before `p.first` having run.
    pub(crate) unsafe fn run_pipeline(
        &self,
        p: &Pipeline,
        ins: &[*const u8],
        outs: &[*mut u8],
        arena: *mut u8,
    ) {
        for i in (p.first..p.scan).filter(|&i| !p.members[i - p.first]) {
            // SAFETY: per the contract; the steps before `i` that it reads have run (it reads no
            // member's result, `pipeline::find`).
            unsafe { self.run_step(i, ins, outs, arena, None) };
        }
        let ready = AtomicUsize::new(0);
        let buffers =
            Buffers { ins: ins.as_ptr(), n_in: ins.len(), outs: outs.as_ptr(), n_out: outs.len(), arena };
        let produce = || {
            let _unwinding = PublishAllOnUnwind(&ready);
            let b = buffers;
            // SAFETY: the caller's tables outlive both halves (`join` returns after them).
            let (ins, outs) = unsafe {
                (std::slice::from_raw_parts(b.ins, b.n_in), std::slice::from_raw_parts(b.outs, b.n_out))
            };
            // SAFETY: `*const u8` and `*mut u8` have the same layout.
            let ins_mut = unsafe { std::slice::from_raw_parts(ins.as_ptr().cast::<*mut u8>(), ins.len()) };
            let arena_base = [b.arena];
            let bases: Bases = [ins_mut, outs, &self.const_ptrs, &arena_base];
            let mut lo = 0;
            while lo < p.rows {
                let hi = (lo + p.block).min(p.rows);
                let members = self.steps[p.first..p.scan].iter().zip(&p.members).filter(|(_, m)| **m);
                for (step, _) in members {
                    // SAFETY: the plan made these steps kernels over `rows` rows or in-place gemms
                    // with `rows` result rows, reading their chain operands only in rows `lo..hi`,
                    // which earlier steps of this block wrote (`pipeline::find`).
                    unsafe {
                        match &step.op {
                            Op::Kernel { kernel, .. } => {
                                let mut table = Table::new();
                                table.fill_slots(step, &bases, &[]);
                                self.kernels[*kernel](table.as_ptr(), lo as i64, hi as i64);
                            }
                            Op::Dot(d) => {
                                let at = |l| self.loc_ptr(l, ins, outs, b.arena);
                                let (l, r) = (at(&step.inputs[0]), at(&step.inputs[1]));
                                d.run_rows(l, r, at(&step.outputs[0]), lo, hi);
                            }
                            _ => unreachable!("pipeline::find takes kernels and gemms only"),
                        }
                    }
                }
                ready.store(hi, Ordering::Release);
                lo = hi;
            }
        };
        let consume = || {
            let b = buffers;
            // SAFETY: as above; the scan reads xs row `t` only once `ready` exceeds `t`.
            unsafe {
                let (ins, outs) =
                    (std::slice::from_raw_parts(b.ins, b.n_in), std::slice::from_raw_parts(b.outs, b.n_out));
                self.run_step(p.scan, ins, outs, b.arena, Some(&ready));
            }
        };
        // The loop stays on this thread (with its results in this core's caches for the steps
        // after it: W2's backward loop reads the forward loop's residuals); it runs the producer
        // itself if no other thread has taken it (`control::wait_for`).
        self.threads.join(consume, produce);
    }
}
