//! Scan bodies whose rows read their neighbours' (a stencil: `roll`, shifted slices) as row
//! ranges with halos, so that threads run many steps between two hand-offs.
//!
//! A step of W1's heat equation (`u + c·(roll(u, 1) − 2u + roll(u, −1))` on 4096 points) takes
//! about 0.8 µs; handing rows to another core and back costs about 0.5 µs on the machines we
//! measured, so splitting each step over threads loses. Temporal blocking (overlapped tiling)
//! instead: each row range copies its rows and `block · reach` more on each side, then runs
//! `block` steps on its own copy, each step computing `reach` fewer rows on each side than the
//! one before, so that the last one is exact on the range's own rows. The ranges meet only
//! between blocks. The extra rows are recomputed by both neighbours: the block is chosen so that
//! they are a small part of a range's rows (`control::Control::plan_split`).

use super::{Executable, Loc, Op, Table};
use std::collections::HashMap;

/// How a scan body runs as row ranges with halos ([`Executable::halo_split`]).
#[derive(Clone, Debug)]
pub(crate) struct HaloSplit {
    /// The body steps' rows (the carries' outer axis).
    pub(crate) rows: i64,
    /// Work units of one call of the body.
    pub(crate) units: u64,
    /// Rows, on each side of a range, that one scan step reads of the carries beyond the rows it
    /// writes (at least 1).
    pub(crate) reach: i64,
    /// Per body step: rows on each side it computes beyond the carries' range, for later steps
    /// of the same body that read its output shifted.
    pub(crate) extra: Box<[i64]>,
}

impl Executable {
    /// For a scan body (`consts` scan constants, then `carries` carries, as parameters; no xs):
    /// `Some(split)` when every step is a kernel over the same `rows ≥ 2` rows that reads the
    /// carries, and the buffers earlier steps of the body wrote, only at a fixed cyclic distance
    /// from the row it writes (`Op::Kernel::row_reach`), at least one of them at a distance ≥ 1
    /// (without any, [`Executable::row_split`] applies); the scan constants it may read anywhere.
    /// Every output is a carry written by its step. Rows `lo..hi` of the carries after `b` steps
    /// then depend only on rows `lo − b·reach .. hi + b·reach` (mod rows) before them.
    pub(crate) fn halo_split(&self, consts: usize, carries: usize) -> Option<HaloSplit> {
        if self.outputs.len() != carries || (0..carries).any(|k| self.copied_out(k)) {
            return None;
        }
        let n = match self.steps.first()?.op {
            Op::Kernel { rows, .. } => rows,
            _ => return None,
        };
        // The latest step that wrote each location, and per step the shifted reads of its inputs:
        // (input's producer, or None for a carry; reach).
        let mut writer: HashMap<(u8, usize), usize> = HashMap::new();
        let mut reads: Vec<Vec<(Option<usize>, i64)>> = Vec::with_capacity(self.steps.len());
        let mut units = 0u64;
        for (i, step) in self.steps.iter().enumerate() {
            let Op::Kernel { rows, row_reach, units: u, .. } = &step.op else { return None };
            if *rows != n || n < 2 {
                return None;
            }
            units = units.saturating_add(*u);
            let mut step_reads = Vec::new();
            for (l, reach) in step.inputs.iter().zip(row_reach.iter()) {
                // A member of a multi-output kernel reads an earlier member's output only in its
                // own row (`grouping`): the rows this step computes anyway.
                if step.outputs.iter().any(|o| key(o) == key(l)) {
                    continue;
                }
                let producer = match *l {
                    Loc::Const(_) => continue,
                    Loc::Param(p) if p < consts => continue,
                    Loc::Param(p) if p < consts + carries => None,
                    Loc::Param(_) => return None,
                    Loc::Arena(_) | Loc::Out(_) => Some(*writer.get(&key(l))?),
                };
                step_reads.push((producer, i64::try_from((*reach)?).ok()?));
            }
            reads.push(step_reads);
            for l in &step.outputs {
                writer.insert(key(l), i);
            }
        }
        // Backwards: a step computes the rows its readers need, and a carry's rows at least.
        let mut extra = vec![0i64; self.steps.len()];
        let mut reach = 0;
        for i in (0..self.steps.len()).rev() {
            for &(producer, r) in &reads[i] {
                match producer {
                    Some(p) => extra[p] = extra[p].max(extra[i] + r),
                    None => reach = i64::max(reach, extra[i] + r),
                }
            }
        }
        (reach >= 1).then(|| HaloSplit { rows: n, units, reach, extra: extra.into() })
    }

    /// Runs the body once on rows `lo − ext .. hi + ext` (mod rows) of the carries, each step on
    /// `split.extra` rows more on each side, with all rows of a step computed once when they
    /// cover the whole axis; on this thread, with `arena` this range's own.
    ///
    /// # Safety
    /// As [`Executable::run_raw`]; [`Executable::halo_split`] gave `split` for `self`; the carries
    /// (`ins`) hold valid rows on `split.reach` more rows on each side than this call computes,
    /// and no other thread touches `outs` or `arena`.
    pub(crate) unsafe fn run_halo(
        &self,
        ins: &[*const u8],
        outs: &[*mut u8],
        arena: *mut u8,
        split: &HaloSplit,
        (lo, hi, ext): (i64, i64, i64),
    ) {
        // SAFETY: per the contract.
        let ptr = |l: &Loc| unsafe { self.loc_ptr(l, ins, outs, arena) };
        for (step, &extra) in self.steps.iter().zip(split.extra.iter()) {
            // `halo_split` admits kernel steps only.
            let Op::Kernel { kernel, .. } = &step.op else { continue };
            let mut table = Table::new();
            table.fill(step, &ptr, &[]);
            let kernel = self.kernels[*kernel];
            for (a, b) in cyclic(lo - ext - extra, hi + ext + extra, split.rows) {
                // SAFETY: rows a..b lie in 0..rows; the kernel reads and writes within its
                // buffers' sizes; its inputs are valid on the rows it reads (the contract).
                unsafe { kernel(table.as_ptr(), a, b) };
            }
        }
    }
}

/// A location as a map key (arena buffers by offset, as the plan places them).
fn key(l: &Loc) -> (u8, usize) {
    match *l {
        Loc::Param(i) => (0, i),
        Loc::Out(k) => (1, k),
        Loc::Const(i) => (2, i),
        Loc::Arena(o) => (3, o),
    }
}

/// Rows `a..b` (a may be negative, b above `n`) taken mod `n`, as at most two ranges inside
/// `0..n`; all of `0..n` when they span `n` rows or more.
pub(crate) fn cyclic(a: i64, b: i64, n: i64) -> impl Iterator<Item = (i64, i64)> {
    let (lo, len) = (a.rem_euclid(n), (b - a).clamp(0, n));
    let first = (lo, (lo + len).min(n));
    let second = (0, lo + len - n);
    [first, second].into_iter().filter(|(x, y)| x < y)
}

/// Copies rows `a..b` (mod the rows of a buffer of `row_bytes`-byte rows; see [`cyclic`]) from
/// `src` to the same rows of `dst`.
///
/// # Safety
/// Both buffers hold `n` rows of `row_bytes` bytes, and do not overlap.
pub(crate) unsafe fn copy_rows(src: *const u8, dst: *mut u8, row_bytes: usize, (a, b, n): (i64, i64, i64)) {
    for (x, y) in cyclic(a, b, n) {
        let (at, len) = (x as usize * row_bytes, (y - x) as usize * row_bytes);
        // SAFETY: rows x..y lie inside both buffers (the contract).
        unsafe { std::ptr::copy_nonoverlapping(src.add(at), dst.add(at), len) };
    }
}

#[cfg(test)]
mod tests {
    use super::cyclic;

    #[test]
    fn cyclic_ranges_wrap_and_cover() {
        let v = |a, b| cyclic(a, b, 10).collect::<Vec<_>>();
        assert_eq!(v(2, 5), [(2, 5)]);
        assert_eq!(v(-3, 4), [(7, 10), (0, 4)]);
        assert_eq!(v(8, 13), [(8, 10), (0, 3)]);
        assert_eq!(v(-1, 11), [(9, 10), (0, 9)]);
        assert_eq!(v(-5, 20), [(5, 10), (0, 5)]);
        assert_eq!(v(3, 3), []);
    }
}
