//! `scatter`/`scatter_add` and `segment_sum` as Rust routines, reproducing the interpreter's
//! semantics bit for bit: the operand is viewed as `batch ++ pre ++ [axis] ++ suffix` (flattened to
//! counts), updates are applied in row-major order of `updates` (so with duplicate indices the last
//! `Set` wins and `Add` accumulates in that order), and out-of-range indices clamp (`Clip`) or are
//! dropped (`FillOrDrop`; also `Clip` on an empty axis). Every index is bounds-checked before use.

use super::parallel::Threads;
use crate::CompileError;
use kiln_ir::{DType, IndexMode, ScatterOp, TensorType};
use smallvec::SmallVec;
use std::sync::atomic::{AtomicBool, Ordering};

/// Reads index `k` of an i32/u32 buffer, widened so both clamp alike.
///
/// # Safety
/// `p` holds at least `k + 1` elements of `dtype` (i32 or u32, checked at plan time).
unsafe fn index(dtype: DType, p: *const u8, k: usize) -> i64 {
    // SAFETY: per the contract.
    unsafe {
        match dtype {
            DType::I32 => i64::from(*p.cast::<i32>().add(k)),
            DType::U32 => i64::from(*p.cast::<u32>().add(k)),
            // Unreachable: `index_dtype` rejects the rest at plan time.
            DType::F32 | DType::F64 | DType::Bool => 0,
        }
    }
}

/// Checks that an index operand is i32 or u32.
fn index_dtype(prim: &'static str, t: &TensorType) -> Result<DType, CompileError> {
    match t.dtype {
        DType::I32 | DType::U32 => Ok(t.dtype),
        DType::F32 | DType::F64 | DType::Bool => Err(CompileError::unsupported(prim, "non-integer indices")),
    }
}

/// `dst[i] = dst[i] + src[i]` for `n` elements, with the interpreter's add (ints wrap, bool: or).
///
/// # Safety
/// Both point to `n` elements of `dtype`; they do not overlap.
unsafe fn add_row(dtype: DType, dst: *mut u8, src: *const u8, n: usize) {
    // SAFETY: per the contract.
    unsafe {
        match dtype {
            DType::F32 => (0..n).for_each(|i| *dst.cast::<f32>().add(i) += *src.cast::<f32>().add(i)),
            DType::F64 => (0..n).for_each(|i| *dst.cast::<f64>().add(i) += *src.cast::<f64>().add(i)),
            // i32 wraps exactly like u32.
            DType::I32 | DType::U32 => (0..n).for_each(|i| {
                let d = dst.cast::<u32>().add(i);
                *d = (*d).wrapping_add(*src.cast::<u32>().add(i));
            }),
            DType::Bool => (0..n).for_each(|i| *dst.add(i) |= *src.add(i)),
        }
    }
}

/// Maps an index into `[0, size)`, or `None` where the update is dropped (the interpreter's `resolve`).
#[inline]
fn resolve(i: i64, size: usize, mode: IndexMode) -> Option<usize> {
    let size = i64::try_from(size).ok().filter(|&s| s > 0)?;
    let i = match mode {
        IndexMode::Clip => i.clamp(0, size - 1),
        IndexMode::FillOrDrop => i,
    };
    (0..size).contains(&i).then_some(i as usize)
}

/// The static plan of one `scatter`/`scatter_add`.
#[derive(Debug, Clone)]
pub(crate) struct ScatterPlan {
    op: ScatterOp,
    mode: IndexMode,
    dtype: DType,
    index_dtype: DType,
    batch: usize,
    pre: usize,
    axis: usize,
    suffix: usize,
    idx: usize,
}

impl ScatterPlan {
    /// `ins`: operand, indices, updates (already checked by the shape rule; re-checked here so a bad
    /// plan is an error, never an out-of-bounds access).
    pub(crate) fn new(
        op: ScatterOp,
        axis: usize,
        batch_dims: usize,
        mode: IndexMode,
        ins: &[TensorType],
    ) -> Result<ScatterPlan, CompileError> {
        let [x, indices, updates] = ins else {
            return Err(CompileError::Codegen("scatter takes three operands".into()));
        };
        let (xd, id) = (x.shape.dims(), indices.shape.dims());
        let bad =
            || CompileError::Codegen(format!("scatter: inconsistent shapes {x:?} {indices:?} {updates:?}"));
        if !(batch_dims <= axis
            && axis < xd.len()
            && batch_dims <= id.len()
            && xd[..batch_dims] == id[..batch_dims])
            || updates.dtype != x.dtype
        {
            return Err(bad());
        }
        let prod = |d: &[usize]| d.iter().product::<usize>();
        let p = ScatterPlan {
            op,
            mode,
            dtype: x.dtype,
            index_dtype: index_dtype(op.name(), indices)?,
            batch: prod(&xd[..batch_dims]),
            pre: prod(&xd[batch_dims..axis]),
            axis: xd[axis],
            suffix: prod(&xd[axis + 1..]),
            idx: prod(&id[batch_dims..]),
        };
        if updates.shape.size() != p.batch * p.pre * p.idx * p.suffix {
            return Err(bad());
        }
        Ok(p)
    }

    /// # Safety
    /// Buffers have the planned types; `out` overlaps none of the inputs.
    pub(crate) unsafe fn run(&self, x: *const u8, indices: *const u8, updates: *const u8, out: *mut u8) {
        // SAFETY (two arms): per the contract, with the types matched.
        match (self.op, self.suffix, self.index_dtype, self.dtype) {
            (ScatterOp::Add, 1, DType::I32, DType::F32) => unsafe {
                self.add_scalars::<f32>(x, indices, updates, out)
            },
            (ScatterOp::Add, 1, DType::I32, DType::F64) => unsafe {
                self.add_scalars::<f64>(x, indices, updates, out)
            },
            _ => unsafe { self.run_rows(x, indices, updates, out) },
        }
    }

    /// [`ScatterPlan::run`] for `scatter_add` of scalar rows of `T` with i32 indices (the transpose
    /// of a gather over a graph's edges): the same adds in the same order as [`Self::run_rows`],
    /// typed, so the loop has no per-update dispatch on dtypes (W3's gradient spent about a third
    /// of its time in the generic loop).
    ///
    /// # Safety
    /// As [`ScatterPlan::run`], with `T` the data dtype and i32 indices.
    unsafe fn add_scalars<T: Copy + std::ops::AddAssign>(
        &self,
        x: *const u8,
        indices: *const u8,
        updates: *const u8,
        out: *mut u8,
    ) {
        let (ix, up, o) = (indices.cast::<i32>(), updates.cast::<T>(), out.cast::<T>());
        // SAFETY: per the contract; `resolve` keeps every target inside the operand's axis, and
        // update `k` < batch * pre * idx, index `b * idx + i` < batch * idx.
        unsafe {
            std::ptr::copy(x.cast::<T>(), o, self.batch * self.pre * self.axis);
            let mut k = 0;
            for b in 0..self.batch {
                for p in 0..self.pre {
                    let base = (b * self.pre + p) * self.axis;
                    for i in 0..self.idx {
                        if let Some(a) = resolve(i64::from(*ix.add(b * self.idx + i)), self.axis, self.mode) {
                            *o.add(base + a) += *up.add(k);
                        }
                        k += 1;
                    }
                }
            }
        }
    }

    /// [`ScatterPlan::run`], any dtypes and row sizes.
    ///
    /// # Safety
    /// As [`ScatterPlan::run`].
    unsafe fn run_rows(&self, x: *const u8, indices: *const u8, updates: *const u8, out: *mut u8) {
        let s = self.dtype.size_bytes();
        let row = self.suffix * s;
        // SAFETY: per the contract; every row offset is resolved into the operand's bounds, every
        // update row `k` lies inside `updates` (k < batch * pre * idx), every index read is < batch * idx.
        unsafe {
            std::ptr::copy(x, out, self.batch * self.pre * self.axis * row);
            let mut k = 0;
            for b in 0..self.batch {
                for p in 0..self.pre {
                    for i in 0..self.idx {
                        let a =
                            resolve(index(self.index_dtype, indices, b * self.idx + i), self.axis, self.mode);
                        if let Some(a) = a {
                            let dst = out.add(((b * self.pre + p) * self.axis + a) * row);
                            let src = updates.add(k * row);
                            match self.op {
                                ScatterOp::Set => std::ptr::copy_nonoverlapping(src, dst, row),
                                ScatterOp::Add => add_row(self.dtype, dst, src, self.suffix),
                            }
                        }
                        k += 1;
                    }
                }
            }
        }
    }
}

/// Where `n` segment rows split into `chunks` ranges (`chunks + 1` cut points from 0 to `n`): the
/// nominal cuts `n·c/chunks` moved forward to the next change of id, so that with sorted ids each
/// segment lies in one range, and past rows whose id is outside `0..segments` (dropped rows: a
/// range's bounds come from its first row's id, and a dropped id there would invert its
/// neighbour's, sending the whole sum to one thread — sorted ids with masked rows marked `-1`
/// have them anywhere). `id(k)` is row `k`'s id, called for `k < n` only. Inline for up to 32
/// threads: a call allocates nothing.
pub(crate) fn segment_cuts(
    n: usize,
    chunks: usize,
    segments: usize,
    id: impl Fn(usize) -> i64,
) -> SmallVec<[usize; 33]> {
    let dropped = |k: usize| !(0..segments as i64).contains(&id(k));
    (0..=chunks)
        .map(|c| {
            let mut k = n * c / chunks;
            if k == 0 || k >= n {
                return k.min(n);
            }
            // The last kept id before the cut: its run continues past dropped rows.
            let before = (0..k).rev().find(|&j| !dropped(j)).map(&id);
            while k < n && (dropped(k) || Some(id(k)) == before) {
                k += 1;
            }
            k
        })
        .collect()
}

/// The ids each range between consecutive `cuts` owns: range `c` owns `[first id of range c, first
/// id of range c + 1)`, unbounded below for the first range and above for the last (and for a cut
/// at `n`). `id(k)` is row `k`'s id (`k < n`).
pub(crate) fn owned_segments(
    cuts: &[usize],
    n: usize,
    id: impl Fn(usize) -> i64,
) -> SmallVec<[(i64, i64); 32]> {
    let chunks = cuts.len() - 1;
    let bound = |c: usize| match c {
        0 => i64::MIN,
        c if c == chunks || cuts[c] == n => i64::MAX,
        c => id(cuts[c]),
    };
    (0..chunks).map(|c| (bound(c), bound(c + 1))).collect()
}

/// Whether the ranges of [`owned_segments`] are disjoint: no range's bounds are inverted. (An
/// inverted pair — a cut row whose id exceeds the next cut's, e.g. a dropped out-of-range id
/// between sorted blocks — would let its neighbours own the same segments.)
pub(crate) fn disjoint(owned: &[(i64, i64)]) -> bool {
    owned.iter().all(|&(lo, hi)| lo <= hi)
}

/// The static plan of one `segment_sum`.
///
/// Sequential semantics (the interpreter's): every data row is added to its segment's row in order.
/// With `chunks > 1` the rows are cut into `chunks` ranges at points where the id changes, and each
/// range *owns* the segments from its first id up to the next range's first id. A range adds only
/// rows whose segment it owns, in order; if every row's segment is owned by the range holding it
/// (true whenever the ids are sorted, as a destination-sorted edge list has them), each segment was
/// summed by one range in the sequential order, so the result is bitwise the sequential one for any
/// thread count. Otherwise (unsorted ids) the output is cleared and summed sequentially.
#[derive(Debug, Clone)]
pub(crate) struct SegmentSumPlan {
    dtype: DType,
    index_dtype: DType,
    n: usize,
    row: usize,
    num_segments: usize,
    chunks: usize,
}

/// Addresses of one call's buffers, as integers so parallel tasks may share them.
#[derive(Clone, Copy)]
struct SegmentBuffers {
    data: usize,
    ids: usize,
    out: usize,
}

/// Rows between checks of the shared "not partitionable" flag.
const ABORT_CHECK_ROWS: usize = 1 << 12;

impl SegmentSumPlan {
    /// `ins`: data `[n, ...]` and ids `[n]`.
    pub(crate) fn new(num_segments: usize, ins: &[TensorType]) -> Result<SegmentSumPlan, CompileError> {
        let [data, ids] = ins else {
            return Err(CompileError::Codegen("segment_sum takes two operands".into()));
        };
        let d = data.shape.dims();
        if d.is_empty() || ids.shape.size() != d[0] {
            return Err(CompileError::Codegen(format!("segment_sum: inconsistent shapes {data:?} {ids:?}")));
        }
        Ok(SegmentSumPlan {
            dtype: data.dtype,
            index_dtype: index_dtype("segment_sum", ids)?,
            n: d[0],
            row: d[1..].iter().product(),
            num_segments,
            chunks: 1,
        })
    }

    /// Work units of one call (per data row: the id, the row's reads and adds) and its rows, for
    /// [`crate::cost::kernel_chunks`].
    pub(crate) fn work(&self) -> (u64, i64) {
        ((self.n * (2 + 2 * self.row)) as u64, self.n as i64)
    }

    /// How many ranges the rows are split into.
    pub(crate) fn chunks(&self) -> usize {
        self.chunks
    }

    /// Sets how many ranges the rows are split into.
    pub(crate) fn set_chunks(&mut self, chunks: usize) {
        self.chunks = chunks.max(1);
    }

    /// # Safety
    /// Buffers have the planned types; `out` overlaps none of the inputs.
    pub(crate) unsafe fn run(&self, data: *const u8, ids: *const u8, out: *mut u8, threads: &Threads) {
        let bufs = SegmentBuffers { data: data as usize, ids: ids as usize, out: out as usize };
        let out_bytes = self.num_segments * self.row * self.dtype.size_bytes();
        // SAFETY: per the contract. All-zero bytes are 0, 0.0 and false in every dtype.
        unsafe { std::ptr::write_bytes(out, 0, out_bytes) };
        if self.chunks < 2 || self.n < 2 * self.chunks {
            // SAFETY: per the contract; one range owns every segment.
            unsafe { self.add_rows(bufs, 0, self.n, (i64::MIN, i64::MAX), None) };
            return;
        }
        // SAFETY: `k < n`, the ids' length.
        let id = |k: usize| unsafe { index(self.index_dtype, ids, k) };
        let cuts = segment_cuts(self.n, self.chunks, self.num_segments, id);
        let owned = owned_segments(&cuts, self.n, id);
        let stray = AtomicBool::new(!disjoint(&owned));
        if !stray.load(Ordering::Relaxed) {
            let ranges = |lo: i64, hi: i64| {
                for c in lo as usize..hi as usize {
                    // SAFETY: per the contract; ranges own disjoint id intervals, so they write
                    // disjoint segments.
                    unsafe { self.add_rows(bufs, cuts[c], cuts[c + 1], owned[c], Some(&stray)) };
                }
            };
            // `for_rows` over `chunks` rows hands each task whole chunk indices.
            threads.for_rows(self.chunks as i64, self.chunks, &ranges);
        }
        if stray.load(Ordering::Relaxed) {
            // SAFETY: per the contract.
            unsafe {
                std::ptr::write_bytes(out, 0, out_bytes);
                self.add_rows(bufs, 0, self.n, (i64::MIN, i64::MAX), None);
            }
        }
    }

    /// Adds data rows `lo..hi` into their segments, in order; out-of-range ids are dropped. Rows
    /// whose id lies outside `owned` (half-open) are not added: they raise `stray` (checked every
    /// [`ABORT_CHECK_ROWS`] rows to give up early), which `None` never expects.
    ///
    /// # Safety
    /// As [`SegmentSumPlan::run`]; no other task writes segments in `owned`.
    unsafe fn add_rows(
        &self,
        bufs: SegmentBuffers,
        lo: usize,
        hi: usize,
        owned: (i64, i64),
        stray: Option<&AtomicBool>,
    ) {
        let (data, out) = (bufs.data as *const u8, bufs.out as *mut u8);
        let (s, row, segments) = (self.dtype.size_bytes(), self.row, self.num_segments);
        // SAFETY (all arms): per the contract; `g < num_segments`, `r < n`.
        match (self.dtype, row, self.index_dtype) {
            // The message-passing cases, typed so the loop has no per-row dispatch.
            (DType::F32, 1, DType::I32) => unsafe {
                sum_typed::<i32>(bufs, lo, hi, owned, stray, segments, |g, r| {
                    *out.cast::<f32>().add(g) += *data.cast::<f32>().add(r)
                })
            },
            (DType::F64, 1, DType::I32) => unsafe {
                sum_typed::<i32>(bufs, lo, hi, owned, stray, segments, |g, r| {
                    *out.cast::<f64>().add(g) += *data.cast::<f64>().add(r)
                })
            },
            (_, _, DType::I32) => unsafe {
                sum_typed::<i32>(bufs, lo, hi, owned, stray, segments, |g, r| {
                    add_row(self.dtype, out.add(g * row * s), data.add(r * row * s), row)
                })
            },
            (_, _, DType::U32 | DType::F32 | DType::F64 | DType::Bool) => unsafe {
                sum_typed::<u32>(bufs, lo, hi, owned, stray, segments, |g, r| {
                    add_row(self.dtype, out.add(g * row * s), data.add(r * row * s), row)
                })
            },
        }
    }
}

/// The loop of [`SegmentSumPlan::add_rows`] for ids of type `I` (`i32` or `u32`, checked at plan
/// time): `add(segment, row)` for rows `lo..hi` with an id in `0..segments`, in order; such an id
/// outside `owned` raises `stray` and stops (see `add_rows`). Dropped ids are never strays.
///
/// # Safety
/// `bufs.ids` holds at least `hi` ids of type `I`; `add` is safe to call for such rows.
#[inline(always)]
unsafe fn sum_typed<I: Copy + Into<i64>>(
    bufs: SegmentBuffers,
    lo: usize,
    hi: usize,
    owned: (i64, i64),
    stray: Option<&AtomicBool>,
    segments: usize,
    mut add: impl FnMut(usize, usize),
) {
    let ids = bufs.ids as *const I;
    let mut k = lo;
    while k < hi {
        if stray.is_some_and(|f| f.load(Ordering::Relaxed)) {
            return;
        }
        let end = hi.min(k + ABORT_CHECK_ROWS);
        for r in k..end {
            // SAFETY: `r < hi`, per the contract.
            let id: i64 = unsafe { *ids.add(r) }.into();
            // Negative and too-large ids are dropped (never clamped), before the ownership check:
            // a dropped row writes nothing, so it cannot race wherever it lies.
            let Some(g) = usize::try_from(id).ok().filter(|&g| g < segments) else { continue };
            if (id < owned.0 || id >= owned.1)
                && let Some(f) = stray
            {
                f.store(true, Ordering::Relaxed);
                return;
            }
            add(g, r);
        }
        k = end;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The invariants the parallel segment sum relies on, over 20,000 generated id lists (sorted
    /// kept ids with dropped ids — −1, `segments`, i64 extremes — anywhere, 0 to 5 segments, 1 to
    /// 8 ranges of at least two rows): cuts run from 0 to n without going back, no owned range is inverted, and every
    /// kept row lies in a range that owns its id (so no range raises `stray` on sorted ids).
    #[test]
    fn cuts_partition_sorted_ids_with_dropped_rows_anywhere() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = |m: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % m
        };
        for _ in 0..20_000 {
            // At least two rows per range, as `SegmentSumPlan::run` asks before it splits.
            let (segments, chunks) = (next(6) as usize, 1 + next(8) as usize);
            let n = 2 * chunks + next(40) as usize;
            let mut kept = 0i64;
            let ids: Vec<i64> = (0..n)
                .map(|_| match next(6) {
                    0 => -1,
                    1 => [segments as i64, i64::MIN, i64::MAX][next(3) as usize],
                    _ if segments == 0 => -1,
                    _ => {
                        kept = (kept + next(2) as i64).min(segments as i64 - 1);
                        kept
                    }
                })
                .collect();
            let id = |k: usize| ids[k];
            let cuts = segment_cuts(n, chunks, segments, id);
            assert_eq!((cuts[0], cuts[chunks]), (0, n), "{ids:?} {chunks}: {cuts:?}");
            assert!(cuts.windows(2).all(|w| w[0] <= w[1]), "{ids:?} {chunks}: {cuts:?}");
            let owned = owned_segments(&cuts, n, id);
            assert!(disjoint(&owned), "{ids:?} {chunks}: {cuts:?} {owned:?}");
            for c in 0..chunks {
                for r in cuts[c]..cuts[c + 1] {
                    let g = ids[r];
                    if (0..segments as i64).contains(&g) {
                        assert!(
                            owned[c].0 <= g && g < owned[c].1,
                            "{ids:?} {chunks}: row {r} in {c}, {owned:?}"
                        );
                    }
                }
            }
        }
    }

    /// A dropped id inside a range that does not own low segments (the `-1` of row 5 in the
    /// second of two ranges owning `2..`) is skipped, not a stray: the range keeps its thread
    /// (before, it raised `stray` and the whole sum ran again on one thread). A kept id outside
    /// the range's segments still is one.
    #[test]
    fn dropped_ids_are_never_strays() {
        let ids = [0i32, 0, 1, 1, 2, -1, 2, 2, 7];
        let bufs = SegmentBuffers { data: 0, ids: ids.as_ptr() as usize, out: 0 };
        let stray = AtomicBool::new(false);
        let mut added = Vec::new();
        // SAFETY: `ids` holds 9 ids; `add` only records.
        unsafe { sum_typed::<i32>(bufs, 4, 9, (2, i64::MAX), Some(&stray), 3, |g, r| added.push((g, r))) };
        assert!(!stray.load(Ordering::Relaxed));
        assert_eq!(added, [(2, 4), (2, 6), (2, 7)]);
        let mut added = Vec::new();
        // SAFETY: as above.
        unsafe { sum_typed::<i32>(bufs, 0, 9, (2, i64::MAX), Some(&stray), 3, |g, r| added.push((g, r))) };
        assert!(stray.load(Ordering::Relaxed), "id 0 of row 0 is kept and not owned");
        assert!(added.is_empty());
    }

    /// Sorted ids with dropped rows (`-1`, and one past the segments) around the nominal cut of
    /// two ranges: the cut moves past them and past the run of its id, and the owned ranges stay
    /// disjoint (before, a `-1` at the cut inverted the first range's bounds).
    #[test]
    fn cuts_skip_dropped_ids() {
        let ids = [0i64, 0, 1, -1, -1, 1, 2, 9, 2, 3];
        let id = |k: usize| ids[k];
        let cuts = segment_cuts(ids.len(), 2, 5, id);
        assert_eq!(cuts.as_slice(), [0, 6, 10]);
        let owned = owned_segments(&cuts, ids.len(), id);
        assert_eq!(owned.as_slice(), [(i64::MIN, 2), (2, i64::MAX)]);
        assert!(disjoint(&owned));
        // Every cut in range, none on a dropped row, for 1 to 5 ranges.
        for chunks in 1..=5 {
            let cuts = segment_cuts(ids.len(), chunks, 5, id);
            assert!(cuts.iter().all(|&k| k == 0 || k == ids.len() || (0..5).contains(&ids[k])), "{cuts:?}");
            assert!(disjoint(&owned_segments(&cuts, ids.len(), id)), "{chunks} ranges: {cuts:?}");
        }
    }
}
