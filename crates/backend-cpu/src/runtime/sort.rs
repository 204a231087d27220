//! `sort`: a stable sort of every lane along `dimension`, ordered lexicographically by the first
//! `num_keys` operands, the permutation applied to all operands. Keys are the interpreter's `sort_key`
//! (order-preserving u64s: NaN last, `-0.0` canonicalized to `0.0`), so the (unique, stable) result is
//! bitwise the interpreter's.

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
}

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
        })
    }

    /// Bytes of scratch [`SortPlan::run`] needs: one lane of keys per key operand, and a permutation.
    pub(crate) fn scratch_bytes(&self) -> usize {
        (self.num_keys * self.n * 8).next_multiple_of(64) + self.n * 8
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
                    const { assert!(size_of::<usize>() == size_of::<u64>()) };
                    // SAFETY: `perm` is `n` 8-byte slots, aligned for usize, so for u64 too.
                    let spare = unsafe { std::slice::from_raw_parts_mut(perm.as_mut_ptr().cast::<u64>(), n) };
                    // The key operand's pointer fetched once, not through `input` per element.
                    let (p, dt) = (input(0), self.dtypes[0]);
                    // SAFETY: as `lane_key`.
                    let sorted =
                        radix_sort_lane(&mut keys[..n], spare, |k| unsafe { key(dt, p, base + k * inner) });
                    // SAFETY: as below; the words hold every key, and every position, in order.
                    unsafe {
                        self.write_sorted_keys(base, sorted, output(0));
                        // `argsort`'s payload, the positions themselves, is written from the words
                        // in order too (a gather through the permutation is a random read each).
                        let positions =
                            |j: usize| j > 0 && self.write_positions_if_iota(j, base, sorted, input, output);
                        self.permute_lane(
                            &|j| j == 0 || positions(j),
                            base,
                            |k| (sorted[k] & u64::from(u32::MAX)) as usize,
                            input,
                            output,
                        )
                    };
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
                unsafe { self.permute_lane(&|_| false, base, |k| perm[k], input, output) };
            }
        }
    }

    /// Whether lanes sort by [`radix_sort_lane`]: one key of at most 32 bits (ints and bools, whose
    /// `key` is below 2^32), positions below 2^32.
    fn radix_sortable(&self) -> bool {
        self.num_keys == 1
            && matches!(self.dtypes[0], DType::I32 | DType::U32 | DType::Bool)
            && u32::try_from(self.n).is_ok()
    }

    /// The radix sort's key operand, lane at `base`, from its sorted words: the high half is the
    /// `key`, which is the value itself for u32 and bool and the value with its sign bit flipped for
    /// i32 — written in order rather than gathered from the input.
    ///
    /// # Safety
    /// As [`SortPlan::run`]; `dst` is operand 0's output, whose lanes hold `sorted.len()` elements.
    unsafe fn write_sorted_keys(&self, base: usize, sorted: &[u64], dst: *mut u8) {
        let inner = self.inner;
        // SAFETY (each arm): position `base + k·inner` lies in the lane, in the output's size.
        match self.dtypes[0] {
            DType::I32 | DType::U32 => {
                let flip = if self.dtypes[0] == DType::I32 { 1u32 << 31 } else { 0 };
                for (k, w) in sorted.iter().enumerate() {
                    unsafe { *dst.cast::<u32>().add(base + k * inner) = (w >> 32) as u32 ^ flip };
                }
            }
            DType::Bool => {
                for (k, w) in sorted.iter().enumerate() {
                    unsafe { *dst.add(base + k * inner) = (w >> 32) as u8 };
                }
            }
            DType::F32 | DType::F64 => unreachable!("float keys are not radix sorted"),
        }
    }

    /// When operand `j`'s lane at `base` holds its own positions `0, 1, ..., n-1` as i32 or u32 (an
    /// iota along the sorted dimension: `argsort`'s payload), writes its sorted lane — the
    /// positions in the words' low halves — and returns true. A lane that is not one is usually
    /// told apart at its first elements.
    ///
    /// # Safety
    /// As [`SortPlan::run`]; `sorted` holds the lane's `n` sorted words.
    unsafe fn write_positions_if_iota(
        &self,
        j: usize,
        base: usize,
        sorted: &[u64],
        input: &dyn Fn(usize) -> *const u8,
        output: &dyn Fn(usize) -> *mut u8,
    ) -> bool {
        if !matches!(self.dtypes[j], DType::I32 | DType::U32) {
            return false;
        }
        let (src, dst, inner) = (input(j).cast::<u32>(), output(j).cast::<u32>(), self.inner);
        // SAFETY (both loops): lane positions `base + k·inner`, inside the operand's size; n < 2^32
        // (radix sorted), so positions fit u32 and, below 2^31, equal their i32 bits.
        if !(0..self.n).all(|k| unsafe { *src.add(base + k * inner) } as usize == k) {
            return false;
        }
        for (k, w) in sorted.iter().enumerate() {
            unsafe { *dst.add(base + k * inner) = *w as u32 };
        }
        true
    }

    /// Writes the lanes at `base` of the operands not `done` in sorted order: output position `k`
    /// takes input position `from(k)`.
    ///
    /// # Safety
    /// As [`SortPlan::run`]; `from` maps `0..n` into `0..n`.
    unsafe fn permute_lane(
        &self,
        done: &dyn Fn(usize) -> bool,
        base: usize,
        from: impl Fn(usize) -> usize,
        input: &dyn Fn(usize) -> *const u8,
        output: &dyn Fn(usize) -> *mut u8,
    ) {
        /// `dst[base + k·inner] = src[base + from(k)·inner]` as `T`s (a typed copy: a byte copy of
        /// run-time length would be a `memcpy` call per element).
        ///
        /// # Safety
        /// As `permute_lane`, for an operand of `T`-sized elements.
        unsafe fn copy<T: Copy>(
            src: *const u8,
            dst: *mut u8,
            n: usize,
            base: usize,
            inner: usize,
            from: &impl Fn(usize) -> usize,
        ) {
            let (src, dst) = (src.cast::<T>(), dst.cast::<T>());
            for k in 0..n {
                // SAFETY: both positions lie inside the lane, inside the operand's size.
                unsafe { *dst.add(base + k * inner) = *src.add(base + from(k) * inner) };
            }
        }
        let (n, inner) = (self.n, self.inner);
        for (j, &dt) in self.dtypes.iter().enumerate().filter(|&(j, _)| !done(j)) {
            let (src, dst) = (input(j), output(j));
            // SAFETY: per the contract; buffers are aligned to their dtype.
            unsafe {
                match dt {
                    DType::F32 | DType::I32 | DType::U32 => copy::<u32>(src, dst, n, base, inner, &from),
                    DType::F64 => copy::<u64>(src, dst, n, base, inner, &from),
                    DType::Bool => copy::<u8>(src, dst, n, base, inner, &from),
                }
            }
        }
    }
}

/// A stable sort of one lane by a key below 2^32 (`key(k)` for position `k < n`, `n ≤ 2^32`):
/// least-significant-digit radix sort of `key << 32 | k` on the key's digits of 11, 11 and 10 bits
/// (2048 counters fit in L1), skipping digits that are equal in every element (keys below 2^22 take
/// two passes). Returns the sorted words (in `a` or `b`, each `n` long): the same order as the
/// comparison sort with ties by position, in O(n) per non-constant digit.
fn radix_sort_lane<'a>(a: &'a mut [u64], b: &'a mut [u64], key: impl Fn(usize) -> u64) -> &'a [u64] {
    const DIGITS: [(u32, usize); 3] = [(0, 2048), (11, 2048), (22, 1024)];
    let n = a.len();
    let mut counts = [[0usize; 2048]; 3];
    for (k, w) in a.iter_mut().enumerate() {
        let x = key(k);
        *w = x << 32 | k as u64;
        for (c, &(shift, size)) in counts.iter_mut().zip(&DIGITS) {
            c[(x >> shift) as usize & (size - 1)] += 1;
        }
    }
    let (mut src, mut dst) = (a, b);
    for (c, &(shift, size)) in counts.iter().zip(&DIGITS) {
        let c = &c[..size];
        if c.contains(&n) {
            continue; // every element has the same digit here: the pass would copy
        }
        let mut next = [0usize; 2048];
        let mut sum = 0;
        for (slot, &count) in next.iter_mut().zip(c) {
            *slot = sum;
            sum += count;
        }
        let shift = 32 + shift;
        for &w in src.iter() {
            let digit = (w >> shift) as usize & (size - 1);
            dst[next[digit]] = w;
            next[digit] += 1;
        }
        std::mem::swap(&mut src, &mut dst);
    }
    src
}
