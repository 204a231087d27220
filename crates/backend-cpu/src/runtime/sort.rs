//! `sort`: a stable sort of every lane along `dimension`, ordered lexicographically by the first
//! `num_keys` operands, the permutation applied to all operands. Keys are the interpreter's `sort_key`
//! (order-preserving u64s: NaN last, `-0.0` canonicalized to `0.0`), so the (unique, stable) result is
//! bitwise the interpreter's.
//!
//! Lanes with one int or bool key are radix sorted ([`radix_sort`]), long ones split into position
//! ranges over threads; others by a comparison sort with ties broken by position.

use super::parallel::Threads;
use crate::CompileError;
use kiln_ir::{DType, TensorType};

/// The interpreter's float key: `x + 0.0` maps -0.0 to 0.0; NaN last; then the sign-magnitude flip.
fn float_key(x: f64) -> u64 {
    let x = x + 0.0;
    if x.is_nan() {
        return u64::MAX;
    }
    let b = x.to_bits();
    if b >> 63 == 1 { !b } else { b | 1 << 63 }
}

/// The sort key of element `k` of a buffer of `dtype`.
///
/// # Safety
/// `p` holds more than `k` elements of `dtype`.
unsafe fn key(dtype: DType, p: *const u8, k: usize) -> u64 {
    // SAFETY: per the contract.
    unsafe {
        match dtype {
            // f32 → f64 is exact and keeps order and sign.
            DType::F32 => float_key(f64::from(*p.cast::<f32>().add(k))),
            DType::F64 => float_key(*p.cast::<f64>().add(k)),
            // Flip the sign bit so i32::MIN maps to 0.
            DType::I32 => u64::from(*p.cast::<u32>().add(k) ^ 1 << 31),
            DType::U32 => u64::from(*p.cast::<u32>().add(k)),
            DType::Bool => u64::from(*p.add(k)),
        }
    }
}

/// The static plan of one `sort`.
#[derive(Debug, Clone)]
pub(crate) struct SortPlan {
    dtypes: Vec<DType>,
    num_keys: usize,
    outer: usize,
    n: usize,
    inner: usize,
    /// Position ranges a radix-sorted lane is split into over threads (1: serial).
    chunks: usize,
}

/// The most ranges a lane's radix sort is split into (their counters live in scratch).
const MAX_RADIX_CHUNKS: usize = 16;
/// Lanes shorter than this radix sort on one thread: the split's per-range counters and offsets
/// would cost more than they save.
const PARALLEL_RADIX_MIN: usize = 1 << 16;
/// Work units (~0.22 ns, `cost::MIN_TASK_UNITS`) per element of a radix-sorted lane: the key pass,
/// two or three counted scatter passes and the output writes.
const RADIX_UNITS_PER_ELEMENT: u64 = 40;
/// Counters per range: the largest digit's buckets.
const RADIX_BUCKETS: usize = 2048;

impl SortPlan {
    /// `ins`: the operands (equal shapes).
    pub(crate) fn new(
        dimension: usize,
        num_keys: usize,
        ins: &[TensorType],
    ) -> Result<SortPlan, CompileError> {
        let Some(first) = ins.first() else {
            return Err(CompileError::Codegen("sort without operands".into()));
        };
        let d = first.shape.dims();
        if dimension >= d.len()
            || num_keys == 0
            || num_keys > ins.len()
            || ins.iter().any(|t| t.shape != first.shape)
        {
            return Err(CompileError::Codegen(format!("sort: bad operands {ins:?}")));
        }
        Ok(SortPlan {
            dtypes: ins.iter().map(|t| t.dtype).collect(),
            num_keys,
            outer: d[..dimension].iter().product(),
            n: d[dimension],
            inner: d[dimension + 1..].iter().product(),
            chunks: 1,
        })
    }

    /// (work units, positions) of one lane's radix sort, for the thread split
    /// ([`crate::cost::kernel_chunks`]); lanes that do not split report no work.
    pub(crate) fn work(&self) -> (u64, i64) {
        match self.radix_parallel() {
            true => (self.n as u64 * RADIX_UNITS_PER_ELEMENT, self.n as i64),
            false => (0, 1),
        }
    }

    /// Splits each radix-sorted lane into `chunks` position ranges over threads (at most
    /// [`MAX_RADIX_CHUNKS`]); other sorts stay serial.
    pub(crate) fn set_chunks(&mut self, chunks: usize) {
        self.chunks = if self.radix_parallel() { chunks.clamp(1, MAX_RADIX_CHUNKS) } else { 1 };
    }

    /// Position ranges per radix-sorted lane (1: serial).
    pub(crate) fn chunks(&self) -> usize {
        self.chunks
    }

    /// Whether lanes radix sort and are long enough to split over threads.
    fn radix_parallel(&self) -> bool {
        self.radix_sortable() && self.n >= PARALLEL_RADIX_MIN
    }

    /// Bytes of scratch [`SortPlan::run`] needs: one lane of keys per key operand, a permutation,
    /// and for a lane that may split, the ranges' counters and key masks.
    pub(crate) fn scratch_bytes(&self) -> usize {
        let split = match self.radix_parallel() {
            true => MAX_RADIX_CHUNKS * (RADIX_BUCKETS * 4 + 16),
            false => 0,
        };
        (self.num_keys * self.n * 8).next_multiple_of(64) + self.n * 8 + split
    }

    /// Sorts without allocating: keys and the permutation live in `scratch`.
    ///
    /// # Safety
    /// `input(j)` and `output(j)` address buffers of operand `j`'s type; no output overlaps any input;
    /// `scratch` has `scratch_bytes()` bytes, 8-aligned, used by no one else during the call.
    pub(crate) unsafe fn run(
        &self,
        input: &dyn Fn(usize) -> *const u8,
        output: &dyn Fn(usize) -> *mut u8,
        scratch: *mut u8,
        threads: &Threads,
    ) {
        let (n, inner) = (self.n, self.inner);
        if n == 0 {
            return;
        }
        // SAFETY: per the contract, the two regions are disjoint parts of `scratch`.
        let (keys, perm) = unsafe {
            (
                std::slice::from_raw_parts_mut(scratch.cast::<u64>(), self.num_keys * n),
                std::slice::from_raw_parts_mut(
                    scratch.add((self.num_keys * n * 8).next_multiple_of(64)).cast::<usize>(),
                    n,
                ),
            )
        };
        for o in 0..self.outer {
            for i in 0..inner {
                // Lane element `k` is at flat position `base + k * inner`.
                let base = o * n * inner + i;
                // SAFETY: base + k * inner < outer * n * inner, the operand's size.
                let lane_key =
                    |j: usize, k: usize| unsafe { key(self.dtypes[j], input(j), base + k * inner) };
                if self.radix_sortable() {
                    // SAFETY: `keys` and `perm` are `n` 8-byte slots each (u64 and usize share a
                    // layout here), the split's counters and masks follow `perm` when it may split.
                    unsafe {
                        const { assert!(size_of::<usize>() == size_of::<u64>()) };
                        let split = scratch.add((self.num_keys * n * 8).next_multiple_of(64) + n * 8);
                        let lane = Lane::new(self, base, input, output);
                        self.radix_lane(&lane, keys.as_mut_ptr(), perm.as_mut_ptr().cast(), split, threads);
                    }
                    continue;
                }
                for (j, lane) in keys.chunks_mut(n).enumerate() {
                    lane.iter_mut().enumerate().for_each(|(k, y)| *y = lane_key(j, k));
                }
                perm.iter_mut().enumerate().for_each(|(k, p)| *p = k);
                // Ties broken by position: the order is total, so the unstable (allocation-free) sort
                // gives the unique stable result: equal keys keep their input order.
                let keys = &*keys;
                perm.sort_unstable_by(|&a, &b| {
                    keys.chunks(n).map(|k| k[a].cmp(&k[b])).find(|c| c.is_ne()).unwrap_or_else(|| a.cmp(&b))
                });
                // SAFETY: `perm` is a permutation of the lane's positions.
                unsafe {
                    let lane = Lane::new(self, base, input, output);
                    let perm: &[usize] = perm;
                    lane.permute(0, n, &|_| false, &|k| perm[k]);
                }
            }
        }
    }

    /// Whether lanes sort by [`radix_sort`]: one key of at most 32 bits (ints and bools, whose
    /// `key` is below 2^32), positions below 2^32.
    fn radix_sortable(&self) -> bool {
        self.num_keys == 1
            && matches!(self.dtypes[0], DType::I32 | DType::U32 | DType::Bool)
            && u32::try_from(self.n).is_ok()
    }

    /// Radix sorts the lane (operand 0 the key) in `a`/`b` (`n` words each), split into
    /// `self.chunks` position ranges over `threads` (counters and masks in `split`, else on the
    /// stack), then writes every operand's sorted lane: the key and an iota payload (argsort's
    /// positions) from the sorted words in order, the other operands gathered through the
    /// permutation.
    ///
    /// # Safety
    /// As [`SortPlan::run`]; `split` has the split's scratch when the plan may split.
    unsafe fn radix_lane(&self, lane: &Lane, a: *mut u64, b: *mut u64, split: *mut u8, threads: &Threads) {
        let (n, chunks) = (self.n, self.chunks);
        let (mut counts, mut masks) = ([0u32; RADIX_BUCKETS], [0u64; 2]);
        let (counts, masks) = match chunks {
            1 => (counts.as_mut_ptr(), masks.as_mut_ptr()),
            // SAFETY: the split's scratch holds both (see `scratch_bytes`).
            _ => unsafe {
                (split.cast::<u32>(), split.add(MAX_RADIX_CHUNKS * RADIX_BUCKETS * 4).cast::<u64>())
            },
        };
        let (dt, p, at) = (self.dtypes[0], lane.input[0], lane.at());
        // SAFETY: `at(k)` is inside operand 0 for k < n.
        let key = move |k: usize| unsafe { key(dt, p as *const u8, at(k)) };
        // SAFETY: per the contract.
        let sorted = unsafe { radix_sort(a, b, n, &key, chunks, counts, masks, threads) } as usize;
        // SAFETY (below): `sorted` holds the n sorted words; ranges write disjoint positions.
        let word = move |k: usize| unsafe { *(sorted as *const u64).add(k) };
        // SAFETY: the lane's buffers are the plan's, n < 2^32.
        let iota = (1..self.dtypes.len())
            .map(|j| unsafe { lane.is_iota(j) })
            .collect::<smallvec::SmallVec<[bool; 4]>>();
        let write = |lo: i64, hi: i64| {
            let (lo, hi) = (lo as usize, hi as usize);
            // SAFETY: positions `lo..hi` of the lane, disjoint from other ranges'; the words map
            // positions into `0..n`.
            unsafe {
                lane.write_keys(lo, hi, &word);
                for (j, _) in iota.iter().enumerate().filter(|(_, t)| **t) {
                    lane.write_positions(j + 1, lo, hi, &word);
                }
                lane.permute(lo, hi, &|j| j == 0 || iota[j - 1], &|k| {
                    (word(k) & u64::from(u32::MAX)) as usize
                });
            }
        };
        threads.for_rows(n as i64, chunks, &write);
    }
}

/// One lane of every operand of a sort: where its elements are, as addresses (shareable across
/// threads). Element `k` of operand `j`'s lane is at element offset `base + k·inner`.
struct Lane {
    dtypes: smallvec::SmallVec<[DType; 4]>,
    input: smallvec::SmallVec<[usize; 4]>,
    output: smallvec::SmallVec<[usize; 4]>,
    base: usize,
    inner: usize,
    n: usize,
}

impl Lane {
    fn new(
        plan: &SortPlan,
        base: usize,
        input: &dyn Fn(usize) -> *const u8,
        output: &dyn Fn(usize) -> *mut u8,
    ) -> Lane {
        let ops = 0..plan.dtypes.len();
        Lane {
            dtypes: plan.dtypes.iter().copied().collect(),
            input: ops.clone().map(|j| input(j) as usize).collect(),
            output: ops.map(|j| output(j) as usize).collect(),
            base,
            inner: plan.inner,
            n: plan.n,
        }
    }

    /// Element offset of lane position `k`.
    fn at(&self) -> impl Fn(usize) -> usize + Copy + Send + Sync + use<> {
        let (base, inner) = (self.base, self.inner);
        move |k| base + k * inner
    }

    /// Whether operand `j`'s lane holds its own positions `0, 1, ..., n-1` as i32 or u32 (an iota
    /// along the sorted dimension: `argsort`'s payload); a lane that is not one is usually told
    /// apart at its first elements.
    ///
    /// # Safety
    /// The lane's buffers are the plan's; n < 2^32 (radix sorted), so positions fit u32 and, below
    /// 2^31, equal their i32 bits.
    unsafe fn is_iota(&self, j: usize) -> bool {
        let (src, at) = (self.input[j] as *const u32, self.at());
        matches!(self.dtypes[j], DType::I32 | DType::U32)
            // SAFETY: lane positions are inside the operand.
            && (0..self.n).all(|k| unsafe { *src.add(at(k)) } as usize == k)
    }

    /// Positions `lo..hi` of the key operand's sorted lane from the sorted words: the high half is
    /// the `key`, the value itself for u32 and bool, the value with its sign bit flipped for i32.
    ///
    /// # Safety
    /// The lane's buffers are the plan's; `lo ≤ hi ≤ n`; `word(k)` is sorted word `k`.
    unsafe fn write_keys(&self, lo: usize, hi: usize, word: &dyn Fn(usize) -> u64) {
        let (dst, at) = (self.output[0] as *mut u8, self.at());
        // SAFETY (each arm): lane positions are inside the output.
        match self.dtypes[0] {
            DType::I32 | DType::U32 => {
                let flip = if self.dtypes[0] == DType::I32 { 1u32 << 31 } else { 0 };
                for k in lo..hi {
                    unsafe { *dst.cast::<u32>().add(at(k)) = (word(k) >> 32) as u32 ^ flip };
                }
            }
            DType::Bool => {
                for k in lo..hi {
                    unsafe { *dst.add(at(k)) = (word(k) >> 32) as u8 };
                }
            }
            DType::F32 | DType::F64 => unreachable!("float keys are not radix sorted"),
        }
    }

    /// Positions `lo..hi` of an iota operand `j`'s sorted lane: the words' low halves.
    ///
    /// # Safety
    /// As [`Lane::write_keys`], with operand `j` an i32 or u32 iota.
    unsafe fn write_positions(&self, j: usize, lo: usize, hi: usize, word: &dyn Fn(usize) -> u64) {
        let (dst, at) = (self.output[j] as *mut u32, self.at());
        for k in lo..hi {
            // SAFETY: lane positions are inside the output.
            unsafe { *dst.add(at(k)) = word(k) as u32 };
        }
    }

    /// Positions `lo..hi` of the sorted lanes of the operands not `done`: output position `k` takes
    /// input position `from(k)`.
    ///
    /// # Safety
    /// The lane's buffers are the plan's; `lo ≤ hi ≤ n`; `from` maps into `0..n`.
    unsafe fn permute(
        &self,
        lo: usize,
        hi: usize,
        done: &dyn Fn(usize) -> bool,
        from: &dyn Fn(usize) -> usize,
    ) {
        /// `dst[at(k)] = src[at(from(k))]` as `T`s (a typed copy: a byte copy of run-time length
        /// would be a `memcpy` call per element).
        ///
        /// # Safety
        /// As `permute`, for an operand of `T`-sized elements.
        unsafe fn copy<T: Copy>(
            (src, dst): (usize, usize),
            (lo, hi): (usize, usize),
            at: impl Fn(usize) -> usize,
            from: &dyn Fn(usize) -> usize,
        ) {
            let (src, dst) = (src as *const T, dst as *mut T);
            for k in lo..hi {
                // SAFETY: both positions lie inside the lane, inside the operand's size.
                unsafe { *dst.add(at(k)) = *src.add(at(from(k))) };
            }
        }
        for (j, &dt) in self.dtypes.iter().enumerate().filter(|&(j, _)| !done(j)) {
            let (io, range, at) = ((self.input[j], self.output[j]), (lo, hi), self.at());
            // SAFETY: per the contract; buffers are aligned to their dtype.
            unsafe {
                match dt {
                    DType::F32 | DType::I32 | DType::U32 => copy::<u32>(io, range, at, from),
                    DType::F64 => copy::<u64>(io, range, at, from),
                    DType::Bool => copy::<u8>(io, range, at, from),
                }
            }
        }
    }
}

/// A stable sort of `n ≤ u32::MAX` positions by a key below 2^32 (`key(k)`): least-significant-digit
/// radix sort of the words `key << 32 | k` on the key's digits of 11, 11 and 10 bits, skipping digits
/// equal in every key (keys below 2^22 take two passes). Returns `a` or `b`, whichever holds the
/// sorted words: the order of the comparison sort with ties by position.
///
/// The positions are cut into `chunks` ranges, each a task on `threads`: a range fills its words
/// and key masks, then per digit counts its digits (`counts`, `RADIX_BUCKETS` per range) and
/// scatters its words to offsets that put range `c`'s words of a bucket after ranges `< c`'s —
/// so every pass, hence the result, is the same for any `chunks`.
///
/// # Safety
/// `a`, `b` hold `n` words each; `counts` holds `chunks · RADIX_BUCKETS` u32s and `masks` `2·chunks`
/// u64s; none is used by anyone else during the call; `key` reads only for `k < n`.
#[allow(clippy::too_many_arguments)]
unsafe fn radix_sort(
    a: *mut u64,
    b: *mut u64,
    n: usize,
    key: &(dyn Fn(usize) -> u64 + Sync),
    chunks: usize,
    counts: *mut u32,
    masks: *mut u64,
    threads: &Threads,
) -> *mut u64 {
    const DIGITS: [(u32, usize); 3] = [(0, 2048), (11, 2048), (22, 1024)];
    let range = |c: usize| (n * c / chunks, n * (c + 1) / chunks);
    let (counts, masks) = (counts as usize, masks as usize);
    let for_ranges = |f: &(dyn Fn(usize) + Sync)| {
        threads.for_rows(chunks as i64, chunks, &|lo, hi| (lo as usize..hi as usize).for_each(f))
    };
    // SAFETY (every task below): range `c` touches positions `range(c)` of the word arrays and its
    // own counters and masks; the offsets give each word of a pass its own destination.
    let (wa, wb) = (a as usize, b as usize);
    for_ranges(&|c| {
        let (lo, hi) = range(c);
        let (mut or, mut and) = (0u64, u64::MAX);
        for k in lo..hi {
            let x = key(k);
            unsafe { *(wa as *mut u64).add(k) = x << 32 | k as u64 };
            (or, and) = (or | x, and & x);
        }
        unsafe { *(masks as *mut u64).add(2 * c) = or };
        unsafe { *(masks as *mut u64).add(2 * c + 1) = and };
    });
    let (mut or, mut and) = (0u64, u64::MAX);
    for c in 0..chunks {
        // SAFETY: written above.
        unsafe {
            (or, and) = (or | *(masks as *const u64).add(2 * c), and & *(masks as *const u64).add(2 * c + 1))
        };
    }
    let (mut src, mut dst) = (wa, wb);
    for (shift, size) in DIGITS {
        if ((or ^ and) >> shift) as usize & (size - 1) == 0 {
            continue; // every key has the same digit here: the pass would copy
        }
        let digit = move |w: u64| (w >> (32 + shift)) as usize & (size - 1);
        let mine = move |c: usize| (counts as *mut u32).wrapping_add(c * RADIX_BUCKETS);
        for_ranges(&|c| {
            let (lo, hi) = range(c);
            let count = mine(c);
            unsafe { std::ptr::write_bytes(count, 0, size) };
            for k in lo..hi {
                unsafe { *count.add(digit(*(src as *const u64).add(k))) += 1 };
            }
        });
        // Offsets, bucket-major: bucket `d` of range `c` starts after every smaller bucket and after
        // bucket `d` of the ranges before `c`. `n ≤ u32::MAX`, so they fit.
        let mut start = 0u32;
        for d in 0..size {
            for c in 0..chunks {
                // SAFETY: range `c`'s counters, counted above.
                unsafe {
                    let slot = mine(c).add(d);
                    (*slot, start) = (start, start + *slot);
                }
            }
        }
        for_ranges(&|c| {
            let (lo, hi) = range(c);
            let next = mine(c);
            for k in lo..hi {
                unsafe {
                    let w = *(src as *const u64).add(k);
                    let slot = next.add(digit(w));
                    *(dst as *mut u64).add(*slot as usize) = w;
                    *slot += 1;
                }
            }
        });
        std::mem::swap(&mut src, &mut dst);
    }
    src as *mut u64
}
