//! Control flow run natively over compiled sub-functions: `call`-like primitives, `scan`,
//! `while_loop` and `cond`. Sub-functions are compiled once, to their own [`Executable`]s; a loop
//! reuses preallocated scratch (pointer tables, double-buffered carries, the body's arena), slices
//! `xs` and writes `ys` in place by pointer offsets, so a step allocates nothing.

use super::halo::{self, HaloSplit};
use super::parallel::Threads;
use super::serial::SerialBody;
use super::{Executable, Loc, RowSplit, Step};
use crate::CompileError;
use crate::cost::{self, CostReport, Traffic};
use kiln_ir::{Function, Prim, TensorType};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// Compiles a sub-function; the label names it in the debug dump (`body`, `cond`, `branch1`...).
pub(crate) type SubCompiler<'a> = dyn Fn(&Function, &str) -> Result<Executable, CompileError> + 'a;

fn bytes(t: &TensorType) -> usize {
    t.shape.size() * t.dtype.size_bytes()
}

/// Offsets of regions of the given sizes, each 64-byte aligned, and the total.
fn layout(sizes: impl IntoIterator<Item = usize>) -> (Vec<usize>, usize) {
    let mut offs = Vec::new();
    let mut top = 0;
    for s in sizes {
        offs.push(top);
        top += s.next_multiple_of(64);
    }
    (offs, top)
}

/// Bytes to leave between two buffers of `bytes` bytes (64-byte aligned) that a loop reads and
/// writes in turn (a carry's two buffers), so that they start 2 KiB apart modulo 4 KiB. The CPU
/// guesses whether a load depends on an earlier store from the low 12 address bits, so a store to
/// row `i` of one buffer falsely delays the loads of rows near `i` from the other when the two
/// start a multiple of 4 KiB apart, as W1's two 16 KiB carries did (the step ran about 5 %
/// faster with the pad, minima of alternating runs). Buffers under 4 KiB start less than that
/// apart already, and get no pad.
fn alias_pad(bytes: usize) -> usize {
    match bytes.next_multiple_of(64) {
        b if b < 4096 => 0,
        b => (2048 + 4096 - b % 4096) % 4096,
    }
}

/// The scratch layout common to every control step: pointer tables, two state regions (apart by
/// [`alias_pad`]), sub arenas (one per row range of a split scan, each followed by that range's
/// private area).
pub(crate) struct Frame {
    n_in: usize,
    n_out: usize,
    state_offs: Vec<usize>,
    state_bytes: Vec<usize>,
    /// Bytes of one set of state buffers (the regions at `a` and `b`).
    state_total: usize,
    a: usize,
    b: usize,
    sub: usize,
    /// Bytes of one sub arena and its private area, rounded up to 64; a split scan has one per row
    /// range after `sub`.
    sub_stride: usize,
    /// The body's own arena bytes, rounded up to 64: where a range's private copies of shared
    /// outputs start in its sub arena (`RowSplit::private`).
    arena_stride: usize,
    /// Bytes of a serial scan body's kernel tables ([`SerialBody`]), the frame's last region.
    table_bytes: usize,
    total: usize,
}

impl Frame {
    fn new(n_in: usize, n_out: usize, state: &[TensorType], sub_arena: usize) -> Frame {
        let state_bytes: Vec<usize> = state.iter().map(bytes).collect();
        let (state_offs, state_total) = layout(state_bytes.iter().copied());
        let pad = alias_pad(state_total);
        let (offs, total) = layout([n_in * 8, n_out * 8 + 8, state_total, pad, state_total, sub_arena]);
        let sub_stride = sub_arena.next_multiple_of(64);
        Frame {
            n_in,
            n_out,
            state_offs,
            state_bytes,
            state_total,
            a: offs[2],
            b: offs[4],
            sub: offs[5],
            sub_stride,
            arena_stride: sub_stride,
            table_bytes: 0,
            total,
        }
    }

    /// Adds the kernel tables of a serial scan body after everything else.
    fn with_tables(mut self, bytes: usize) -> Frame {
        self.table_bytes = bytes.next_multiple_of(64);
        self.total += self.table_bytes;
        self
    }

    /// Bytes a range of a scan with halos keeps after its sub arena: its own two sets of state
    /// buffers ([`Control::scan_halo`]).
    fn halo_private(&self) -> usize {
        self.halo_second() + self.state_total
    }

    /// Where a range's second set of state buffers starts in that private area.
    fn halo_second(&self) -> usize {
        self.state_total.next_multiple_of(64) + alias_pad(self.state_total)
    }

    /// Where the serial body's kernel tables start.
    fn tables_at(&self) -> usize {
        self.total - self.table_bytes
    }

    /// Makes room for `n` sub arenas (one per row range of a split scan or a scan with halos),
    /// each with `private` more bytes after the body's arena.
    fn set_sub_arenas(&mut self, n: usize, private: usize) {
        self.sub_stride = self.arena_stride + private.next_multiple_of(64);
        self.total = self.sub + n.max(1) * self.sub_stride + self.table_bytes;
    }

    /// # Safety
    /// `scratch` has `self.total` bytes, 16-aligned. The tables alias nothing else.
    unsafe fn tables<'s>(&self, scratch: *mut u8) -> (&'s mut [*const u8], &'s mut [*mut u8], *mut u8) {
        // SAFETY: per the contract; the regions are disjoint (see `new`).
        unsafe {
            let ins = std::slice::from_raw_parts_mut(scratch.cast::<*const u8>(), self.n_in);
            let outs =
                std::slice::from_raw_parts_mut(scratch.add(self.n_in * 8).cast::<*mut u8>(), self.n_out);
            // One spare slot after the output table: the predicate byte of `while_loop`.
            let spare = scratch.add(self.n_in * 8 + self.n_out * 8);
            (ins, outs, spare)
        }
    }
}

/// A scan run as independent row ranges ([`Control::plan_split`]).
pub(crate) struct Split {
    /// The body's row and uniform steps.
    body: RowSplit,
    /// Row ranges, each running the whole loop on one thread.
    chunks: usize,
}

/// A scan run as row ranges with halos, in blocks of steps ([`Control::plan_split`], `runtime::halo`).
pub(crate) struct Halo {
    body: HaloSplit,
    /// Row ranges, each on one thread at a time.
    chunks: usize,
    /// Steps a range runs on its own copy of the carries between two hand-offs.
    block: usize,
}

/// A control-flow step.
pub(crate) enum Control {
    /// `call`, `checkpoint`, `custom_jvp_call`, `custom_vjp_call`: run the primal function.
    Call { body: Executable, frame: Frame },
    /// `lax.scan`.
    Scan {
        body: Executable,
        frame: Frame,
        length: usize,
        reverse: bool,
        nc: usize,
        nk: usize,
        x_bytes: Vec<usize>,
        y_bytes: Vec<usize>,
        /// Row ranges that run the whole loop independently, on threads ([`Control::plan_split`]).
        split: Option<Split>,
        /// Row ranges with halos that meet every few steps, on threads ([`Control::plan_split`]),
        /// where the rows read their neighbours'.
        halo: Option<Halo>,
        /// The body's kernel tables kept across steps, when every body step is a kernel on the
        /// calling thread (used unless the scan is split).
        serial: Option<SerialBody>,
    },
    /// `lax.while_loop` (optionally bounded).
    While { cond: Executable, body: Executable, frame: Frame, cc: usize, bc: usize, max_iters: Option<u64> },
    /// `lax.switch`.
    Cond { branches: Vec<Executable>, frame: Frame },
}

impl Control {
    /// Compiles the sub-functions of a control-flow primitive with `compile`.
    pub(crate) fn new(
        prim: &Prim,
        in_types: &[TensorType],
        out_types: &[TensorType],
        compile: &SubCompiler<'_>,
    ) -> Result<Control, CompileError> {
        let call = |fun: &Function| -> Result<Control, CompileError> {
            let body = compile(fun, "body")?;
            let frame = Frame::new(in_types.len(), out_types.len(), &[], body.arena_bytes);
            Ok(Control::Call { body, frame })
        };
        match prim {
            Prim::Call { body } | Prim::Checkpoint { body } => call(body),
            Prim::CustomJvpCall { fun, .. } | Prim::CustomVjpCall { fun, .. } => call(fun),
            Prim::Scan { length, reverse, num_consts, num_carry, body } => {
                let body_exe = compile(body, "body")?;
                let (nc, nk) = (*num_consts, *num_carry);
                let carry = &in_types[nc..nc + nk];
                let slice = |t: &TensorType| bytes(t) / t.shape.dims().first().copied().unwrap_or(1).max(1);
                let serial = body_exe.serial_body();
                let frame = Frame::new(body.params.len(), body.outputs.len(), carry, body_exe.arena_bytes)
                    .with_tables(serial.as_ref().map_or(0, SerialBody::table_bytes));
                Ok(Control::Scan {
                    frame,
                    length: *length,
                    reverse: *reverse,
                    nc,
                    nk,
                    x_bytes: in_types[nc + nk..].iter().map(slice).collect(),
                    y_bytes: out_types[nk..].iter().map(slice).collect(),
                    body: body_exe,
                    split: None,
                    halo: None,
                    serial,
                })
            }
            Prim::WhileLoop { cond, body, cond_consts, body_consts, max_iters } => {
                let (cond, body) = (compile(cond, "cond")?, compile(body, "body")?);
                let state = &in_types[cond_consts + body_consts..];
                let n_in = state.len() + cond_consts.max(body_consts);
                let sub = cond.arena_bytes.max(body.arena_bytes);
                let frame = Frame::new(n_in, state.len(), state, sub);
                Ok(Control::While {
                    cond,
                    body,
                    frame,
                    cc: *cond_consts,
                    bc: *body_consts,
                    max_iters: *max_iters,
                })
            }
            Prim::Cond { branches } => {
                let branches = branches
                    .iter()
                    .enumerate()
                    .map(|(b, f)| compile(f, &format!("branch{b}")))
                    .collect::<Result<Vec<_>, _>>()?;
                let sub = branches.iter().map(|b| b.arena_bytes).max().unwrap_or(0);
                let frame = Frame::new(in_types.len() - 1, out_types.len(), &[], sub);
                Ok(Control::Cond { branches, frame })
            }
            _ => Err(CompileError::Codegen(format!("{} is not control flow", prim.name()))),
        }
    }

    /// Splits a scan whose rows evolve independently over threads for the whole loop, instead of
    /// splitting each step's kernels (per-step hand-offs cost 6–24 µs against bodies of ~10 µs,
    /// so those bodies ran on one thread; W4's batched cart-pole step is one). It applies when
    /// every body step is a kernel over the same rows that reads the carries, and the buffers the
    /// body computes, only in the row it writes ([`Executable::row_split`]): row range `lo..hi` of
    /// step `t + 1` then depends only on rows `lo..hi` of step `t`. Each range gets its own sub
    /// arena, since the body's buffers of different row sizes may share arena bytes. `threads`
    /// and `min_task` as for kernels ([`cost::kernel_chunks`]), on the work of the whole loop; each
    /// range also needs [`cost::MIN_SPLIT_STEP_UNITS`] of work per step (or `min_task`, if lower).
    /// The split path allocates its ranges' pointer tables once per call, not per step.
    ///
    /// Otherwise, a body whose rows read their neighbours' at a fixed distance (a stencil,
    /// [`Executable::halo_split`]) runs as row ranges with halos: the same number of ranges, each
    /// running blocks of steps on its own copy of its rows and `reach` more per step of the block
    /// on each side, and handing its rows over between blocks. The block keeps those extra rows
    /// within a sixteenth of a range's rows (the work they add), and is at most ⌈length / 2⌉
    /// steps: with two blocks at least, a range's last block writes the scan's outputs only after
    /// its neighbours have read the inputs (the plan never gives a scan's inputs and outputs one
    /// buffer; this keeps the halo path from relying on it). Each range's work per block must
    /// reach [`cost::MIN_HALO_BLOCK_UNITS`] (or `min_task`, if lower); where it does not with as
    /// many ranges as for kernels, fewer ranges are tried (longer blocks, more work each).
    pub(crate) fn plan_split(&mut self, threads: usize, min_task: Option<u64>) {
        let Control::Scan { body, frame, length, nc, nk, split, halo, x_bytes, .. } = self else { return };
        *split = body.row_split(*nc, *nk).and_then(|b| {
            let (rows, units) = (b.rows, b.units);
            let whole = cost::kernel_chunks(units.saturating_mul(*length as u64), rows, threads, min_task);
            let step_min = min_task.map_or(cost::MIN_SPLIT_STEP_UNITS, |m| m.min(cost::MIN_SPLIT_STEP_UNITS));
            let chunks = match units.checked_div(step_min) {
                Some(n) => whole.min(usize::try_from(n).unwrap_or(usize::MAX)),
                None => whole,
            };
            (chunks > 1).then_some(Split { body: b, chunks })
        });
        *halo = None;
        if split.is_none() && x_bytes.is_empty() && *length >= 2 {
            *halo = body.halo_split(*nc, *nk).and_then(|b| {
                let most =
                    cost::kernel_chunks(b.units.saturating_mul(*length as u64), b.rows, threads, min_task);
                let block_min =
                    min_task.map_or(cost::MIN_HALO_BLOCK_UNITS, |m| m.min(cost::MIN_HALO_BLOCK_UNITS));
                (2..=most)
                    .rev()
                    .find_map(|chunks| {
                        let block = usize::try_from(b.rows / chunks as i64 / (16 * b.reach))
                            .unwrap_or(0)
                            .min(length.div_ceil(2));
                        let per_block = (b.units / chunks as u64).saturating_mul(block as u64);
                        (block >= 1 && per_block >= block_min).then_some((chunks, block))
                    })
                    .map(|(chunks, block)| Halo { body: b, chunks, block })
            });
        }
        match (split, halo) {
            (Some(s), _) => frame.set_sub_arenas(s.chunks, s.body.private_bytes),
            (None, Some(h)) => frame.set_sub_arenas(h.chunks, frame.halo_private()),
            (None, None) => frame.set_sub_arenas(1, 0),
        }
    }

    /// A forward scan that is not split over threads: (its length, the position of its first xs
    /// among the step's inputs). Such a scan can start before its xs are complete
    /// ([`crate::pipeline`]): step `t` waits only for their row `t`.
    pub(crate) fn pipelinable_scan(&self) -> Option<(usize, usize)> {
        match self {
            Control::Scan { length, reverse: false, nc, nk, split: None, halo: None, .. } => {
                Some((*length, nc + nk))
            }
            _ => None,
        }
    }

    /// Whether a step of this control flow runs on several threads.
    pub(crate) fn parallel(&self) -> bool {
        matches!(self, Control::Scan { split: Some(_), .. } | Control::Scan { halo: Some(_), .. })
            || self.subs().iter().any(|(_, x)| x.parallel)
    }

    pub(crate) fn scratch_bytes(&self) -> usize {
        match self {
            Control::Call { frame, .. }
            | Control::Scan { frame, .. }
            | Control::While { frame, .. }
            | Control::Cond { frame, .. } => frame.total,
        }
    }

    /// The sub-executables with their dump labels, for the plan listing.
    pub(crate) fn subs(&self) -> Vec<(String, &Executable)> {
        match self {
            Control::Call { body, .. } | Control::Scan { body, .. } => vec![("body".into(), body)],
            Control::While { cond, body, .. } => vec![("cond".into(), cond), ("body".into(), body)],
            Control::Cond { branches, .. } => {
                branches.iter().enumerate().map(|(b, e)| (format!("branch{b}"), e)).collect()
            }
        }
    }

    /// How often the body runs per execution, in words (for the plan listing).
    pub(crate) fn trips(&self) -> String {
        match self {
            Control::Call { .. } => "once".into(),
            Control::Scan { length, split: None, halo: Some(h), .. } => format!(
                "{length} times, as {} row ranges with halos of {} rows per step that meet every {} steps",
                h.chunks, h.body.reach, h.block
            ),
            Control::Scan { length, split: None, halo: None, serial: None, .. } => format!("{length} times"),
            Control::Scan { length, split: None, halo: None, serial: Some(_), .. } => {
                format!("{length} times, the body's kernel tables kept across steps")
            }
            Control::Scan { length, split: Some(s), .. } => {
                format!("{length} times, rows split into {} ranges that each run the whole loop", s.chunks)
            }
            Control::While { max_iters: Some(n), .. } => format!("until cond is false, at most {n} times"),
            Control::While { max_iters: None, .. } => "until cond is false".into(),
            Control::Cond { .. } => "one branch".into(),
        }
    }

    /// Adds the sub-functions' step counts to `r`; returns the per-execution traffic: the bodies'
    /// (a scan's times its length, a while loop's once, a cond's costlier branch) plus a while loop's
    /// copies of its state in and out.
    pub(crate) fn tally(&self, r: &mut CostReport) -> Traffic {
        let state_copies = |f: &Frame| Traffic::new(4 * f.state_bytes.iter().sum::<usize>(), 0);
        match self {
            Control::Call { body, .. } => body.tally(r),
            // The carries are read in place at the first step and written in place at the last.
            Control::Scan { body, length, .. } => body.tally(r).times(*length),
            Control::While { cond, body, frame, .. } => {
                r.while_loops += 1;
                cond.tally(r).add(body.tally(r)).add(state_copies(frame))
            }
            Control::Cond { branches, .. } => {
                branches.iter().fold(Traffic::default(), |t, b| t.max(b.tally(r)))
            }
        }
    }

    /// A scan's loop with the pointer tables `ins`/`outs`: the step's inputs and outputs are
    /// `input(k)`/`output(k)`, the carry buffers in `scratch`'s frame, the body's arena at `arena`.
    /// `rows`: only that row range of every body step (a split scan; with the range's private
    /// area for shared outputs unless it is the first range), else the whole body.
    ///
    /// # Safety
    /// As [`Control::run`]; with `rows`, the body is one [`Executable::row_split`] accepted and no
    /// other thread uses `arena` or touches these rows.
    unsafe fn scan_loop(
        &self,
        ins: &mut [*const u8],
        outs: &mut [*mut u8],
        input: &dyn Fn(usize) -> *mut u8,
        output: &dyn Fn(usize) -> *mut u8,
        scratch: *mut u8,
        arena: *mut u8,
        rows: Option<(&RowSplit, Option<*mut u8>, i64, i64)>,
        ready: Option<&AtomicUsize>,
    ) {
        let Control::Scan { body, frame, length, reverse, nc, nk, x_bytes, y_bytes, serial, .. } = self
        else {
            return;
        };
        // The serial tables, filled once for this loop (not for row ranges: their steps differ).
        let tables = match (serial, rows) {
            (Some(sb), None) => {
                // SAFETY: the frame's table region, used by this loop alone.
                let t = unsafe { scratch.add(frame.tables_at()) };
                // SAFETY: as above; `sb` was built from `body`.
                unsafe { sb.fill(body, t, arena) };
                Some((sb, t))
            }
            _ => None,
        };
        // The first step reads the initial carries where they are and the last writes the final
        // ones into the step's outputs; steps in between alternate between the two carry buffers.
        // The body writes its carries and ys in place (`Loc::Out`), so a step copies nothing but
        // outputs that are inputs (an identity carry `c -> c`).
        // SAFETY (whole body): every pointer below addresses a planned buffer or the scratch frame.
        unsafe {
            let (mut cur, mut nxt) = (scratch.add(frame.a), scratch.add(frame.b));
            for (k, p) in ins[..nc + nk].iter_mut().enumerate() {
                *p = input(k);
            }
            // The xs and ys slices of the first step; each later step moves them by one slice
            // (resolving the buffers again at every step showed in W2's gradient, 13 per step).
            let first = if *reverse { length - 1 } else { 0 };
            for (k, xb) in x_bytes.iter().enumerate() {
                ins[nc + nk + k] = input(nc + nk + k).add(first * xb);
            }
            for (k, yb) in y_bytes.iter().enumerate() {
                outs[nk + k] = output(nk + k).add(first * yb);
            }
            for t in 0..*length {
                let last = t + 1 == *length;
                for k in 0..*nk {
                    outs[k] = if last { output(k) } else { nxt.add(frame.state_offs[k]) };
                }
                if t > 0 {
                    for (k, &xb) in x_bytes.iter().enumerate() {
                        let p = ins[nc + nk + k];
                        ins[nc + nk + k] = if *reverse { p.wrapping_sub(xb) } else { p.wrapping_add(xb) };
                    }
                    for (k, &yb) in y_bytes.iter().enumerate() {
                        let p = outs[nk + k];
                        outs[nk + k] = if *reverse { p.wrapping_sub(yb) } else { p.wrapping_add(yb) };
                    }
                }
                if let Some(ready) = ready {
                    // A pipelined producer computes the xs in blocks of rows (`runtime::pipeline`).
                    wait_for(ready, t + 1);
                }
                match (rows, tables) {
                    (None, Some((sb, t))) => sb.run(body, t, ins, outs, arena),
                    (None, None) => body.run_raw(ins, outs, arena),
                    (Some((split, private, lo, hi)), _) => {
                        body.run_rows(ins, outs, arena, split, private, lo, hi)
                    }
                }
                std::mem::swap(&mut cur, &mut nxt);
                for k in 0..*nk {
                    ins[nc + k] = cur.add(frame.state_offs[k]);
                }
            }
        }
    }

    /// A split scan ([`Control::plan_split`]): each row range runs the whole loop with its own
    /// pointer tables and sub arena; the carry buffers and `ys` are shared, each range touching
    /// only its rows. `ins_at`/`outs_at`: the step's buffer addresses.
    ///
    /// # Safety
    /// As [`Control::run`].
    unsafe fn scan_split(
        &self,
        sp: &Split,
        ins_at: &[usize],
        outs_at: &[usize],
        scratch: *mut u8,
        threads: &Threads,
    ) {
        let Control::Scan { frame, .. } = self else { return };
        let base = scratch as usize;
        let (rows, chunks) = (sp.body.rows, sp.chunks as i64);
        let ranges = |c0: i64, c1: i64| {
            for c in c0..c1 {
                let (lo, hi) = (rows * c / chunks, rows * (c + 1) / chunks);
                let mut ins = vec![std::ptr::null::<u8>(); frame.n_in];
                let mut outs = vec![std::ptr::null_mut::<u8>(); frame.n_out];
                let scratch = base as *mut u8;
                // SAFETY: range `c`'s sub arena (and its private area) lies inside the frame
                // (`plan_split`); the body's row steps read and write the shared buffers only in
                // rows `lo..hi`, which no other range touches, and its shared steps write whole ys
                // only in range 0, the other ranges writing their private copies
                // (`Executable::row_split`).
                unsafe {
                    let arena = scratch.add(frame.sub + c as usize * frame.sub_stride);
                    let private = (c > 0).then(|| arena.add(frame.arena_stride));
                    self.scan_loop(
                        &mut ins,
                        &mut outs,
                        &|k| ins_at[k] as *mut u8,
                        &|k| outs_at[k] as *mut u8,
                        scratch,
                        arena,
                        Some((&sp.body, private, lo, hi)),
                        None,
                    );
                }
            }
        };
        threads.for_rows(chunks, sp.chunks, &ranges);
    }

    /// A scan with halos ([`Control::plan_split`], `runtime::halo`): range `c` runs block `m`
    /// (steps `m·block ..`) on its own copy of the carries once both its neighbours have finished
    /// block `m − 1`. It reads its rows and halo from the shared state buffers of block `m` (`a`
    /// and `b` in turn; the scan's inputs for block 0) and writes its own rows to the other one
    /// (the scan's outputs after the last block). Neighbours are thus at most one block apart: a
    /// range overwrites rows in a shared buffer only after its neighbours have read them. Any
    /// thread may run any range's next block, so no range waits for a thread busy elsewhere.
    ///
    /// # Safety
    /// As [`Control::run`].
    unsafe fn scan_halo(
        &self,
        h: &Halo,
        ins_at: &[usize],
        outs_at: &[usize],
        scratch: *mut u8,
        threads: &Threads,
    ) {
        let Control::Scan { length, .. } = self else { return };
        let blocks = length.div_ceil(h.block);
        let done: Vec<AtomicUsize> = (0..h.chunks).map(|_| AtomicUsize::new(0)).collect();
        let busy: Vec<AtomicBool> = (0..h.chunks).map(|_| AtomicBool::new(false)).collect();
        let stop = AtomicBool::new(false);
        let base = scratch as usize;
        let worker = |w: i64, _: i64| {
            let mut spins = 0u32;
            loop {
                if stop.load(Ordering::Acquire) {
                    return;
                }
                let (mut finished, mut ran) = (true, false);
                // Its own range first: that range's copy is in this thread's cache.
                for c in (0..h.chunks).map(|i| (w as usize + i) % h.chunks) {
                    let m = done[c].load(Ordering::Acquire);
                    if m == blocks {
                        continue;
                    }
                    finished = false;
                    let (left, right) = ((c + h.chunks - 1) % h.chunks, (c + 1) % h.chunks);
                    let ready = |n: usize| done[n].load(Ordering::Acquire) >= m;
                    if !ready(left) || !ready(right) || busy[c].swap(true, Ordering::Acquire) {
                        continue;
                    }
                    // Another thread may have run block m between the load and the claim.
                    if done[c].load(Ordering::Acquire) == m {
                        let guard = StopOnUnwind(&stop);
                        // SAFETY: range c is this thread's until released; its neighbours have
                        // finished block m - 1 and wait for this one before writing again.
                        unsafe { self.halo_block(h, c, m, ins_at, outs_at, base as *mut u8) };
                        std::mem::forget(guard);
                        done[c].store(m + 1, Ordering::Release);
                        ran = true;
                    }
                    busy[c].store(false, Ordering::Release);
                }
                if finished {
                    return;
                }
                if ran {
                    spins = 0;
                } else if spins < 1 << 12 {
                    std::hint::spin_loop();
                    spins += 1;
                } else {
                    std::thread::yield_now();
                }
            }
        };
        threads.for_rows(h.chunks as i64, h.chunks, &worker);
    }

    /// Block `m` of range `c` of a scan with halos ([`Control::scan_halo`]).
    ///
    /// # Safety
    /// As [`Control::run`]; range `c`'s sub arena and private buffers are this thread's, and its
    /// neighbours have finished block `m − 1` and not started block `m + 1`.
    unsafe fn halo_block(
        &self,
        h: &Halo,
        c: usize,
        m: usize,
        ins_at: &[usize],
        outs_at: &[usize],
        scratch: *mut u8,
    ) {
        let Control::Scan { body, frame, length, nc, nk, .. } = self else { return };
        let (rows, reach) = (h.body.rows, h.body.reach);
        let (lo, hi) = (rows * c as i64 / h.chunks as i64, rows * (c as i64 + 1) / h.chunks as i64);
        let steps = (length - m * h.block).min(h.block) as i64;
        let last = (m + 1) * h.block >= *length;
        let row_bytes = |k: usize| frame.state_bytes[k] / rows as usize;
        let mut ins = vec![std::ptr::null::<u8>(); frame.n_in];
        let mut outs = vec![std::ptr::null_mut::<u8>(); frame.n_out];
        // SAFETY (whole body): range c's sub arena and private area lie inside the frame
        // (`plan_split`), the shared buffers too; each copy stays inside its buffers (`copy_rows`).
        unsafe {
            let arena = scratch.add(frame.sub + c * frame.sub_stride);
            let mut cur = arena.add(frame.arena_stride);
            let mut nxt = cur.add(frame.halo_second());
            let shared = |b: usize| scratch.add(if b.is_multiple_of(2) { frame.a } else { frame.b });
            for k in 0..*nk {
                let src =
                    if m == 0 { ins_at[nc + k] as *const u8 } else { shared(m).add(frame.state_offs[k]) };
                let span = (lo - steps * reach, hi + steps * reach, rows);
                halo::copy_rows(src, cur.add(frame.state_offs[k]), row_bytes(k), span);
            }
            for (k, p) in ins[..*nc].iter_mut().enumerate() {
                *p = ins_at[k] as *const u8;
            }
            for s in 0..steps {
                for k in 0..*nk {
                    ins[nc + k] = cur.add(frame.state_offs[k]);
                    outs[k] = nxt.add(frame.state_offs[k]);
                }
                body.run_halo(&ins, &outs, arena, &h.body, (lo, hi, (steps - 1 - s) * reach));
                std::mem::swap(&mut cur, &mut nxt);
            }
            for (k, &out) in outs_at[..*nk].iter().enumerate() {
                let dst = if last { out as *mut u8 } else { shared(m + 1).add(frame.state_offs[k]) };
                halo::copy_rows(cur.add(frame.state_offs[k]), dst, row_bytes(k), (lo, hi, rows));
            }
        }
    }

    /// # Safety
    /// The step's buffers have the planned types and `scratch` has `scratch_bytes()` bytes.
    ///
    /// With `ready` (a pipelined forward scan, [`Control::pipelinable_scan`]), step `t` of the
    /// loop first waits until `ready` exceeds `t`: the xs rows up to it are written.
    pub(crate) unsafe fn run(
        &self,
        step: &Step,
        ptr: &dyn Fn(&Loc) -> *mut u8,
        scratch: *mut u8,
        threads: &Threads,
        ready: Option<&AtomicUsize>,
    ) {
        let input = |k: usize| ptr(&step.inputs[k]);
        let output = |k: usize| ptr(&step.outputs[k]);
        // SAFETY (whole body): every pointer below addresses a planned buffer or the scratch frame.
        unsafe {
            match self {
                Control::Call { body, frame } => {
                    let (ins, outs, _) = frame.tables(scratch);
                    ins.iter_mut().enumerate().for_each(|(k, p)| *p = input(k));
                    outs.iter_mut().enumerate().for_each(|(k, p)| *p = output(k));
                    body.run_raw(ins, outs, scratch.add(frame.sub));
                }
                Control::Scan { frame, length, nc, nk, split, halo, .. } => {
                    if *length == 0 {
                        for k in 0..*nk {
                            std::ptr::copy_nonoverlapping(input(nc + k), output(k), frame.state_bytes[k]);
                        }
                        return;
                    }
                    // The buffers' addresses, for the threads (allocated only on these paths).
                    let at = || -> (Vec<usize>, Vec<usize>) {
                        let ins = (0..step.inputs.len()).map(|k| input(k) as usize).collect();
                        (ins, (0..step.outputs.len()).map(|k| output(k) as usize).collect())
                    };
                    if let Some(h) = halo {
                        let (ins_at, outs_at) = at();
                        self.scan_halo(h, &ins_at, &outs_at, scratch, threads);
                        return;
                    }
                    let Some(sp) = split else {
                        let (ins, outs, _) = frame.tables(scratch);
                        self.scan_loop(
                            ins,
                            outs,
                            &input,
                            &output,
                            scratch,
                            scratch.add(frame.sub),
                            None,
                            ready,
                        );
                        return;
                    };
                    let (ins_at, outs_at) = at();
                    self.scan_split(sp, &ins_at, &outs_at, scratch, threads);
                }
                Control::While { cond, body, frame, cc, bc, max_iters } => {
                    let (ins, outs, pred) = frame.tables(scratch);
                    let ns = frame.state_offs.len();
                    let (mut cur, mut nxt) = (scratch.add(frame.a), scratch.add(frame.b));
                    for k in 0..ns {
                        std::ptr::copy_nonoverlapping(
                            input(cc + bc + k),
                            cur.add(frame.state_offs[k]),
                            frame.state_bytes[k],
                        );
                    }
                    let mut iters = 0u64;
                    // The bound is checked first: once reached, `cond` is not run again (the interpreter's order).
                    while max_iters.is_none_or(|n| iters < n) {
                        for k in 0..*cc {
                            ins[k] = input(k);
                        }
                        for k in 0..ns {
                            ins[cc + k] = cur.add(frame.state_offs[k]);
                        }
                        let pred_out = [pred];
                        cond.run_raw(&ins[..cc + ns], &pred_out, scratch.add(frame.sub));
                        if *pred == 0 {
                            break;
                        }
                        for k in 0..*bc {
                            ins[k] = input(cc + k);
                        }
                        for k in 0..ns {
                            ins[bc + k] = cur.add(frame.state_offs[k]);
                            outs[k] = nxt.add(frame.state_offs[k]);
                        }
                        body.run_raw(&ins[..bc + ns], outs, scratch.add(frame.sub));
                        std::mem::swap(&mut cur, &mut nxt);
                        iters += 1;
                    }
                    for k in 0..ns {
                        std::ptr::copy_nonoverlapping(
                            cur.add(frame.state_offs[k]),
                            output(k),
                            frame.state_bytes[k],
                        );
                    }
                }
                Control::Cond { branches, frame } => {
                    let (ins, outs, _) = frame.tables(scratch);
                    let index = *input(0).cast::<i32>();
                    let b = (index.max(0) as usize).min(branches.len() - 1);
                    ins.iter_mut().enumerate().for_each(|(k, p)| *p = input(k + 1));
                    outs.iter_mut().enumerate().for_each(|(k, p)| *p = output(k));
                    branches[b].run_raw(ins, outs, scratch.add(frame.sub));
                }
            }
        }
    }
}

/// Raises its flag if dropped while unwinding: a range whose block panicked never advances, and the
/// other workers of [`Control::scan_halo`] then stop waiting for it (rayon passes the panic on).
struct StopOnUnwind<'a>(&'a AtomicBool);

impl Drop for StopOnUnwind<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
    }
}

/// Waits until `ready` is at least `n` (acquiring what the producer wrote before it said so):
/// spinning first (a block of rows takes microseconds, and a sleeping pool thread as long to take
/// the producer), then running the job on top of this thread's rayon queue (the producer, if no
/// other thread took it; else a job queued before the call, when the call itself runs inside a
/// rayon job), else yielding the core.
fn wait_for(ready: &AtomicUsize, n: usize) {
    let mut spins = 0u32;
    while ready.load(Ordering::Acquire) < n {
        if spins < 1 << 12 {
            std::hint::spin_loop();
            spins += 1;
        } else if !matches!(rayon::yield_local(), Some(rayon::Yield::Executed)) {
            std::thread::yield_now();
        }
    }
}
