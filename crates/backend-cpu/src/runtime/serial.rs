//! Scan bodies made only of kernels that run on the calling thread (W2's single robot: three
//! kernels over 120 springs and 40 masses per step) run with their kernels' pointer tables kept
//! for the whole loop. [`Executable::run_raw`] rebuilds each kernel's table at every step and
//! dispatches on the step's kind: 9 % of W2's single-robot forward pass on one thread (profile of
//! 2026-12-02), 3 % this way. Here the tables are filled once per loop, and each step only
//! rewrites the entries naming the body's inputs and outputs (the carries, xs and ys, which move
//! every step) before calling the kernels in order: W2's forward 1.20 → 1.14 ms (one thread,
//! fastest calls of alternating processes). The kernels, their arguments and their order are
//! [`Executable::run_raw`]'s, so results are bitwise the same.

use super::{Executable, Op};

/// A body's kernel steps with their table layout ([`Executable::serial_body`]).
pub(crate) struct SerialBody {
    steps: Box<[SerialStep]>,
    /// Table entries that point into the body's inputs or outputs, rewritten every step.
    varying: Box<[Varying]>,
    /// Table entries in all (each step's inputs, outputs and segment flag), plus one whose
    /// first byte is the segment kernels' flag.
    entries: usize,
    /// Whether some output is copied in after the kernels ([`Executable::copied_out`]).
    copies: bool,
}

struct SerialStep {
    /// Index into the body's kernels (not the function: an estimate plans without compiling).
    kernel: usize,
    rows: i64,
    /// The step's first entry in the tables.
    first: usize,
    /// A segment kernel's outputs (entry, bytes), zeroed before it runs.
    zero: Box<[(usize, usize)]>,
}

struct Varying {
    entry: usize,
    /// An output of the body (else an input).
    output: bool,
    index: usize,
}

impl Executable {
    /// The body's steps as a [`SerialBody`] when each is a kernel on the calling thread (one row
    /// range); `None` otherwise (a runtime routine, control flow, or a kernel split over threads).
    pub(crate) fn serial_body(&self) -> Option<SerialBody> {
        let mut steps = Vec::with_capacity(self.steps.len());
        let mut varying = Vec::new();
        let mut entries = 0;
        for step in &self.steps {
            let (kernel, rows, zero) = match &step.op {
                Op::Kernel { kernel, rows, chunks: 1, .. } => (*kernel, *rows, Vec::new()),
                Op::SegmentKernel { kernel, rows, chunks: 1, out_bytes, .. } => {
                    let first_out = entries + step.inputs.len();
                    let zero = out_bytes.iter().enumerate().map(|(k, &b)| (first_out + k, b)).collect();
                    (*kernel, *rows, zero)
                }
                _ => return None,
            };
            for (j, slot) in step.slots.iter().enumerate() {
                if slot.list < 2 {
                    varying.push(Varying { entry: entries + j, output: slot.list == 1, index: slot.index });
                }
            }
            steps.push(SerialStep { kernel, rows, first: entries, zero: zero.into() });
            entries += step.slots.len() + usize::from(matches!(step.op, Op::SegmentKernel { .. }));
        }
        let copies = (0..self.outputs.len()).any(|k| self.copied_out(k));
        Some(SerialBody { steps: steps.into(), varying: varying.into(), entries, copies })
    }
}

impl SerialBody {
    /// Bytes of the tables ([`SerialBody::fill`]).
    pub(crate) fn table_bytes(&self) -> usize {
        (self.entries + 1) * 8
    }

    /// Fills every entry for a loop over `body` with this call's constants and `arena` (the
    /// entries naming inputs and outputs are rewritten by each [`SerialBody::run`]).
    ///
    /// # Safety
    /// `tables` is 8-aligned with [`SerialBody::table_bytes`] bytes, used by nothing else during
    /// the loop; `body` is the executable this was built from.
    pub(crate) unsafe fn fill(&self, body: &Executable, tables: *mut u8, arena: *mut u8) {
        let t = tables.cast::<*mut u8>();
        // SAFETY: entries lie inside `tables` (per the contract and `serial_body`'s layout).
        unsafe {
            let flag = t.add(self.entries).cast::<u8>();
            for (step, s) in body.steps.iter().zip(&self.steps) {
                for (j, slot) in step.slots.iter().enumerate() {
                    let base = match slot.list {
                        2 => body.const_ptrs[slot.index],
                        3 => arena,
                        _ => std::ptr::null_mut(),
                    };
                    *t.add(s.first + j) = base.wrapping_add(slot.offset);
                }
                if matches!(step.op, Op::SegmentKernel { .. }) {
                    *t.add(s.first + step.slots.len()) = flag;
                }
            }
        }
    }

    /// One run of the body: the input and output entries rewritten, then each kernel on all its
    /// rows (a segment kernel's outputs zeroed first), then the outputs that are copied in
    /// ([`Executable::copy_outputs`]).
    ///
    /// # Safety
    /// As [`Executable::run_raw`], with `tables` filled by [`SerialBody::fill`] for this `body`
    /// and `arena`.
    pub(crate) unsafe fn run(
        &self,
        body: &Executable,
        tables: *mut u8,
        ins: &[*const u8],
        outs: &[*mut u8],
        arena: *mut u8,
    ) {
        let t = tables.cast::<*mut u8>();
        // SAFETY: per the contract; one range over all rows owns every segment, so no segment
        // kernel writes its flag (as `run_raw` runs a one-range segment kernel).
        unsafe {
            for v in &self.varying {
                *t.add(v.entry) = if v.output { outs[v.index] } else { ins[v.index].cast_mut() };
            }
            for s in &self.steps {
                for &(entry, bytes) in &s.zero {
                    std::ptr::write_bytes(*t.add(entry), 0, bytes);
                }
                (body.kernels[s.kernel])(t.add(s.first).cast_const(), 0, s.rows);
            }
            if self.copies {
                body.copy_outputs(ins, outs, arena);
            }
        }
    }
}
