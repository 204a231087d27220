//! `dot_general` as one gemm per batch into the `[batch, m, n]` result — exactly the result layout
//! (batch dims, lhs free dims, rhs free dims). Each operand is read in place with its strides when
//! its free dims and its contracting dims each collapse to one strided axis (the common case: any
//! matmul of row-major or transposed matrices, batch dims anywhere); only otherwise (free or
//! contracting dims interleaved so that no single stride walks them) is it packed into scratch as
//! `[batch, rows, cols]`. matrixmultiply packs its own panels internally, so strides change which
//! elements it copies, never its summation order: results are bitwise the same whether an operand
//! is read in place or packed. f32/f64 go through matrixmultiply (blocked, FMA: not bitwise equal to
//! the interpreter's blocked-pairwise sum; within a reduction tolerance); ints wrap and bool is
//! or-of-ands, both exact in any order. With a `preferred_element_type` other than the operands'
//! dtype, the operand is packed with each element converted (XLA's `convert`, as the interpreter does
//! before its dot), so the gemm runs in the result dtype.
//!
//! Large gemms split their rows (`m`) into contiguous blocks over the executable's threads, one
//! `sgemm` per block: each result element is the same micro-kernel sum over the same `k` blocks
//! as unsplit, so results are bitwise the same for any thread count (the packed `rhs` panels are
//! packed once per block). Measured on the 2-vCPU dev VM: under load 4–5 (other builds on the
//! second core) two row blocks of f32 784×512×256 gave no gain (2.84–2.94 against 2.58–2.71 ms);
//! with the second core free, W5 (`examples/bench_kiln`, alternating 1- and 2-thread runs, best
//! calls) went from 1.58 to 0.99–1.02 ms forward and from 3.61 to 2.37–2.47 ms with its gradient.
//! matrixmultiply's own `threading` feature sizes its pool from `MATMUL_NUM_THREADS` process-wide,
//! so it could not honour `CompileOptions::threads`.

use super::parallel::Threads;
use crate::CompileError;
use kiln_ir::{DType, TensorType};

/// Multiply-adds of a gemm per work unit of [`crate::cost::MIN_TASK_UNITS`] (~0.22 ns): sgemm ran
/// 784×512×256 (103 M multiply-adds) in 1.4–2.6 ms on one core, ~0.02 ns each.
pub(crate) const GEMM_MACS_PER_UNIT: u64 = 10;

/// The most dims a packed operand may have (the odometer lives on the stack).
const MAX_RANK: usize = 16;

/// Row-major element strides of `ty`.
fn row_major_strides(ty: &TensorType) -> Vec<usize> {
    let d = ty.shape.dims();
    let mut strides = vec![1usize; d.len()];
    for k in (0..d.len().saturating_sub(1)).rev() {
        strides[k] = strides[k + 1] * d[k + 1];
    }
    strides
}

/// The one stride that walks `dims` (with these element strides) in row-major order, if there is
/// one: size-1 dims are skipped, and each remaining dim must step exactly over the next one.
fn collapse(dims: &[usize], strides: &[usize]) -> Option<usize> {
    let kept: Vec<(usize, usize)> =
        dims.iter().zip(strides).filter(|(d, _)| **d != 1).map(|(d, s)| (*d, *s)).collect();
    let fits = kept.windows(2).all(|w| w[0].1 == w[1].1 * w[1].0);
    fits.then(|| kept.last().map_or(1, |&(_, s)| s))
}

/// A transposing copy to row-major order of `dims` (source strides permuted alike).
#[derive(Debug, Clone)]
struct Pack {
    dims: Vec<usize>,
    src_strides: Vec<usize>,
    /// The source element dtype and the packed one (equal: a plain copy).
    from: DType,
    to: DType,
}

impl Pack {
    fn new(ty: &TensorType, order: &[usize], to: DType) -> Pack {
        let (d, strides) = (ty.shape.dims(), row_major_strides(ty));
        Pack {
            dims: order.iter().map(|&o| d[o]).collect(),
            src_strides: order.iter().map(|&o| strides[o]).collect(),
            from: ty.dtype,
            to,
        }
    }

    /// # Safety
    /// `src` holds the source array, `dst` room for all of it in the packed dtype.
    unsafe fn run(&self, src: *const u8, dst: *mut u8) {
        let total: usize = self.dims.iter().product();
        if total == 0 {
            return;
        }
        // Rank 0 packs one element: an inner run of length 1.
        let (outer, (len, stride)) = match self.dims.split_last() {
            Some((&len, outer)) => (outer, (len, self.src_strides[self.dims.len() - 1])),
            None => (&[][..], (1, 1)),
        };
        let mut ctr = [0usize; MAX_RANK];
        let mut off = 0usize;
        for row in 0..total / len {
            // SAFETY: `off + j·stride` are valid source elements for j < len, `row·len + j` packed ones.
            unsafe {
                let (s, d) =
                    (src.add(off * self.from.size_bytes()), dst.add(row * len * self.to.size_bytes()));
                self.copy_run(s, stride, d, len);
            }
            // Odometer step over the outer dims, innermost first.
            for k in (0..outer.len()).rev() {
                ctr[k] += 1;
                off += self.src_strides[k];
                if ctr[k] < outer[k] {
                    break;
                }
                off -= self.src_strides[k] * outer[k];
                ctr[k] = 0;
            }
        }
    }

    /// Copies (converting) `len` source elements `stride` apart to `len` contiguous ones.
    ///
    /// # Safety
    /// As [`Pack::run`], for this run.
    unsafe fn copy_run(&self, src: *const u8, stride: usize, dst: *mut u8, len: usize) {
        // SAFETY: per the contract; element pointers are aligned to their dtype (arena, constants
        // and arguments are).
        unsafe {
            if self.from != self.to {
                let (fs, ts) = (self.from.size_bytes(), self.to.size_bytes());
                for j in 0..len {
                    convert(self.from, self.to, src.add(j * stride * fs), dst.add(j * ts));
                }
            } else if stride == 1 {
                std::ptr::copy_nonoverlapping(src, dst, len * self.from.size_bytes());
            } else {
                match self.from {
                    DType::F32 | DType::I32 | DType::U32 => gather::<u32>(src, stride, dst, len),
                    DType::F64 => gather::<u64>(src, stride, dst, len),
                    DType::Bool => gather::<u8>(src, stride, dst, len),
                }
            }
        }
    }
}

/// `dst[j] = src[j·stride]` for `j < len`, as `T`s.
///
/// # Safety
/// Both ranges are valid and aligned for `T`.
unsafe fn gather<T: Copy>(src: *const u8, stride: usize, dst: *mut u8, len: usize) {
    let (src, dst) = (src.cast::<T>(), dst.cast::<T>());
    for j in 0..len {
        // SAFETY: per the contract.
        unsafe { *dst.add(j) = *src.add(j * stride) };
    }
}

/// How the gemm reads one operand as `batch` blocks of `rows × cols` (lhs: m × k, rhs: k × n).
#[derive(Debug, Clone)]
enum Operand {
    /// In place: element `(b, i, j)` at `batch_offset(b) + i·row_stride + j·col_stride`, the batch
    /// offset being row-major over `batch_dims` with these strides.
    InPlace { batch_dims: Vec<usize>, batch_strides: Vec<usize>, row_stride: usize, col_stride: usize },
    /// Packed into scratch first, as row-major `[batch, rows, cols]`.
    Packed(Pack),
}

impl Operand {
    /// `ty` read with `batch`, then `rows`, then `cols` dims (in the pairing order), in `dtype`.
    fn new(ty: &TensorType, batch: &[usize], rows: &[usize], cols: &[usize], dtype: DType) -> Operand {
        let (d, strides) = (ty.shape.dims(), row_major_strides(ty));
        let pick = |ds: &[usize], v: &[usize]| -> Vec<usize> { ds.iter().map(|&k| v[k]).collect() };
        let row = collapse(&pick(rows, d), &pick(rows, &strides));
        let col = collapse(&pick(cols, d), &pick(cols, &strides));
        match (row, col) {
            (Some(row_stride), Some(col_stride)) if ty.dtype == dtype => Operand::InPlace {
                batch_dims: pick(batch, d),
                batch_strides: pick(batch, &strides),
                row_stride,
                col_stride,
            },
            _ => Operand::Packed(Pack::new(ty, &[batch, rows, cols].concat(), dtype)),
        }
    }

    fn is_packed(&self) -> bool {
        matches!(self, Operand::Packed(_))
    }
}

/// Where batch `b` of an operand starts and its row and column strides, in elements.
#[derive(Clone, Copy)]
struct Block {
    ptr: *const u8,
    rs: usize,
    cs: usize,
}

/// The static plan of one `dot_general`.
#[derive(Debug, Clone)]
pub(crate) struct DotPlan {
    dtype: DType,
    batch: usize,
    m: usize,
    k: usize,
    n: usize,
    lhs: Operand,
    rhs: Operand,
    /// Row blocks of each batch's gemm, over threads (1: on the calling thread).
    chunks: usize,
}

impl DotPlan {
    pub(crate) fn new(
        lhs: &TensorType,
        rhs: &TensorType,
        contracting: (&[usize], &[usize]),
        batch: (&[usize], &[usize]),
        preferred: Option<DType>,
    ) -> Result<DotPlan, CompileError> {
        let dtype = preferred.unwrap_or(lhs.dtype);
        if lhs.rank() > MAX_RANK || rhs.rank() > MAX_RANK {
            return Err(CompileError::unsupported("dot_general", "rank over 16"));
        }
        let free = |rank: usize, c: &[usize], b: &[usize]| -> Vec<usize> {
            (0..rank).filter(|d| !c.contains(d) && !b.contains(d)).collect()
        };
        let (lf, rf) = (free(lhs.rank(), contracting.0, batch.0), free(rhs.rank(), contracting.1, batch.1));
        let size = |t: &TensorType, ds: &[usize]| ds.iter().map(|&d| t.shape[d]).product::<usize>();
        Ok(DotPlan {
            dtype,
            batch: size(lhs, batch.0),
            m: size(lhs, &lf),
            k: size(lhs, contracting.0),
            n: size(rhs, &rf),
            lhs: Operand::new(lhs, batch.0, &lf, contracting.0, dtype),
            rhs: Operand::new(rhs, batch.1, contracting.1, &rf, dtype),
            chunks: 1,
        })
    }

    /// (work units, rows) for the thread split: multiply-adds over [`GEMM_MACS_PER_UNIT`], and `m`.
    pub(crate) fn work(&self) -> (u64, i64) {
        let macs = (self.batch * self.m * self.k * self.n) as u64;
        (macs / GEMM_MACS_PER_UNIT, self.m as i64)
    }

    /// Splits each batch's rows into `chunks` blocks over threads.
    pub(crate) fn set_chunks(&mut self, chunks: usize) {
        self.chunks = chunks.max(1);
    }

    /// Row blocks per batch (1: serial).
    pub(crate) fn chunks(&self) -> usize {
        self.chunks
    }

    /// The rows `m` of a single gemm whose operands are both read in place (then
    /// [`DotPlan::run_rows`] computes any block of its rows), else `None`.
    pub(crate) fn row_block_rows(&self) -> Option<usize> {
        (self.batch == 1 && !self.lhs.is_packed() && !self.rhs.is_packed() && self.k > 0).then_some(self.m)
    }

    /// Rows `lo..hi` of the result of a plan with [`DotPlan::row_block_rows`]: the same
    /// micro-kernel sums as [`DotPlan::run`] computes for them (bitwise the same).
    ///
    /// # Safety
    /// As [`DotPlan::run`]; `row_block_rows()` is `Some(m)` and `lo ≤ hi ≤ m`.
    pub(crate) unsafe fn run_rows(&self, lhs: *const u8, rhs: *const u8, out: *mut u8, lo: usize, hi: usize) {
        let a = self.block(&self.lhs, lhs, lhs, 0, self.m, self.k);
        let b = self.block(&self.rhs, rhs, rhs, 0, self.k, self.n);
        if self.n > 0 && lo < hi {
            // SAFETY: per the contract (one batch, operands in place).
            unsafe { self.gemm_rows(a, b, out, lo, hi) };
        }
    }

    /// Multiply-adds counted as two operations: `2·batch·m·k·n`.
    pub(crate) fn flops(&self) -> usize {
        2 * self.batch * self.m * self.k * self.n
    }

    /// Bytes of the packed copies of the operands that are not read in place.
    fn packed(&self) -> (usize, usize) {
        let s = self.dtype.size_bytes();
        let lhs = if self.lhs.is_packed() { self.batch * self.m * self.k * s } else { 0 };
        let rhs = if self.rhs.is_packed() { self.batch * self.k * self.n * s } else { 0 };
        (lhs, rhs)
    }

    /// Bytes written and read again by packing (0 when both operands are read in place).
    pub(crate) fn packing_bytes(&self) -> usize {
        let (l, r) = self.packed();
        2 * (l + r)
    }

    /// Scratch bytes: the packed operands, each 64-byte aligned (0 when both are read in place).
    pub(crate) fn scratch_bytes(&self) -> usize {
        let (l, r) = self.packed();
        l.next_multiple_of(64) + r
    }

    /// One line for the plan listing: sizes and which operands are packed.
    pub(crate) fn describe(&self) -> String {
        let how = |o: &Operand| if o.is_packed() { "packed" } else { "in place" };
        let split = if self.chunks > 1 { format!(", rows in {} blocks", self.chunks) } else { String::new() };
        format!(
            "gemm {}×[{}×{}]·[{}×{}]: lhs {}, rhs {}{split}",
            self.batch,
            self.m,
            self.k,
            self.k,
            self.n,
            how(&self.lhs),
            how(&self.rhs)
        )
    }

    /// Batch `bi` of `op`, whose data starts at `base` (or, packed, at `packed`).
    fn block(
        &self,
        op: &Operand,
        base: *const u8,
        packed: *const u8,
        bi: usize,
        rows: usize,
        cols: usize,
    ) -> Block {
        let s = self.dtype.size_bytes();
        match op {
            Operand::Packed(_) => Block { ptr: packed.wrapping_add(bi * rows * cols * s), rs: cols, cs: 1 },
            Operand::InPlace { batch_dims, batch_strides, row_stride, col_stride } => {
                let (mut rest, mut off) = (bi, 0);
                for (d, st) in batch_dims.iter().zip(batch_strides).rev() {
                    off += (rest % d) * st;
                    rest /= d;
                }
                Block { ptr: base.wrapping_add(off * s), rs: *row_stride, cs: *col_stride }
            }
        }
    }

    /// # Safety
    /// Operands and output have the planned types; `scratch` has `scratch_bytes()` bytes.
    pub(crate) unsafe fn run(
        &self,
        lhs: *const u8,
        rhs: *const u8,
        out: *mut u8,
        scratch: *mut u8,
        threads: &Threads,
    ) {
        let s = self.dtype.size_bytes();
        let (m, k, n) = (self.m, self.k, self.n);
        let (pa, pb) = (scratch, scratch.wrapping_add(self.packed().0.next_multiple_of(64)));
        // SAFETY (whole body): per the contract; each batch addresses its own [m,k], [k,n] operand
        // blocks (strided in place, or packed in scratch) and [m,n] result block.
        unsafe {
            if let Operand::Packed(p) = &self.lhs {
                p.run(lhs, pa);
            }
            if let Operand::Packed(p) = &self.rhs {
                p.run(rhs, pb);
            }
            if k == 0 {
                std::ptr::write_bytes(out, 0, self.batch * m * n * s);
                return;
            }
            if m == 0 || n == 0 {
                return;
            }
            for bi in 0..self.batch {
                let a = self.block(&self.lhs, lhs, pa, bi, m, k);
                let b = self.block(&self.rhs, rhs, pb, bi, k, n);
                let c = out.add(bi * m * n * s);
                if self.chunks < 2 {
                    self.gemm_rows(a, b, c, 0, m);
                    continue;
                }
                // Blocks of rows `lo..hi`: disjoint result rows, operands only read.
                let (ap, bp, cp) = (a.ptr as usize, b.ptr as usize, c as usize);
                let (ars, acs, brs, bcs) = (a.rs, a.cs, b.rs, b.cs);
                let rows = |lo: i64, hi: i64| {
                    let a = Block { ptr: ap as *const u8, rs: ars, cs: acs };
                    let b = Block { ptr: bp as *const u8, rs: brs, cs: bcs };
                    // As above (SAFETY of the whole body): rows `lo..hi` of this batch's blocks.
                    self.gemm_rows(a, b, cp as *mut u8, lo as usize, hi as usize);
                };
                threads.for_rows(m as i64, self.chunks, &rows);
            }
        }
    }

    /// Rows `lo..hi` of one batch's `[m, n]` result block `c` from the `[m, k]` block `a` and the
    /// `[k, n]` block `b`.
    ///
    /// # Safety
    /// The blocks address the planned operands and result; `lo ≤ hi ≤ m`.
    unsafe fn gemm_rows(&self, a: Block, b: Block, c: *mut u8, lo: usize, hi: usize) {
        let (k, n, s) = (self.k, self.n, self.dtype.size_bytes());
        let a = Block { ptr: a.ptr.wrapping_add(lo * a.rs * s), ..a };
        let c = c.wrapping_add(lo * n * s);
        let m = hi - lo;
        let (ars, acs, brs, bcs) = (a.rs as isize, a.cs as isize, b.rs as isize, b.cs as isize);
        let ni = n as isize;
        // matrixmultiply's `sgemm` and `dgemm` take the same arguments in their element type.
        macro_rules! float_gemm {
            ($gemm:path) => {
                $gemm(m, k, n, 1.0, a.ptr.cast(), ars, acs, b.ptr.cast(), brs, bcs, 0.0, c.cast(), ni, 1)
            };
        }
        // SAFETY: per the contract.
        unsafe {
            match self.dtype {
                DType::F32 => float_gemm!(matrixmultiply::sgemm),
                DType::F64 => float_gemm!(matrixmultiply::dgemm),
                DType::I32 | DType::U32 => int_gemm((m, k, n), a, b, c.cast()),
                DType::Bool => bool_gemm((m, k, n), a, b, c),
            }
        }
    }
}

/// A value of any dtype, wide enough to convert exactly where the target can hold it (the
/// interpreter's `Scalar`).
enum Scalar {
    F(f64),
    I(i64),
    B(bool),
}

/// Converts one element as XLA's `convert` (and the interpreter): float→int truncates and saturates
/// (NaN→0), int→int wraps, int→float rounds once, →bool is `!= 0`, bool→number is 0/1.
///
/// # Safety
/// `src` holds one `from` element, `dst` room for one `to` element.
unsafe fn convert(from: DType, to: DType, src: *const u8, dst: *mut u8) {
    // SAFETY: per the contract.
    unsafe {
        let v = match from {
            DType::F32 => Scalar::F(f64::from(*src.cast::<f32>())),
            DType::F64 => Scalar::F(*src.cast::<f64>()),
            DType::I32 => Scalar::I(i64::from(*src.cast::<i32>())),
            DType::U32 => Scalar::I(i64::from(*src.cast::<u32>())),
            DType::Bool => Scalar::B(*src != 0),
        };
        match to {
            DType::F32 => {
                *dst.cast::<f32>() = match v {
                    Scalar::F(x) => x as f32,
                    Scalar::I(i) => i as f32,
                    Scalar::B(b) => f32::from(u8::from(b)),
                }
            }
            DType::F64 => {
                *dst.cast::<f64>() = match v {
                    Scalar::F(x) => x,
                    Scalar::I(i) => i as f64,
                    Scalar::B(b) => f64::from(u8::from(b)),
                }
            }
            DType::I32 => {
                *dst.cast::<i32>() = match v {
                    Scalar::F(x) => x as i32,
                    Scalar::I(i) => i as i32,
                    Scalar::B(b) => i32::from(b),
                }
            }
            DType::U32 => {
                *dst.cast::<u32>() = match v {
                    Scalar::F(x) => x as u32,
                    Scalar::I(i) => i as u32,
                    Scalar::B(b) => u32::from(b),
                }
            }
            DType::Bool => {
                *dst = u8::from(match v {
                    Scalar::F(x) => x != 0.0,
                    Scalar::I(i) => i != 0,
                    Scalar::B(b) => b,
                })
            }
        }
    }
}

/// # Safety
/// `a`, `b`: strided `[m,k]`, `[k,n]` u32 blocks (i32 wraps identically); `c` row-major `[m,n]`.
unsafe fn int_gemm((m, k, n): (usize, usize, usize), a: Block, b: Block, c: *mut u32) {
    let (pa, pb) = (a.ptr.cast::<u32>(), b.ptr.cast::<u32>());
    for i in 0..m {
        for j in 0..n {
            let mut acc = 0u32;
            for p in 0..k {
                // SAFETY: indices within the blocks.
                let (x, y) = unsafe { (*pa.add(i * a.rs + p * a.cs), *pb.add(p * b.rs + j * b.cs)) };
                acc = acc.wrapping_add(x.wrapping_mul(y));
            }
            // SAFETY: as above.
            unsafe { *c.add(i * n + j) = acc };
        }
    }
}

/// # Safety
/// As [`int_gemm`], for blocks of 0/1 bytes.
unsafe fn bool_gemm((m, k, n): (usize, usize, usize), a: Block, b: Block, c: *mut u8) {
    for i in 0..m {
        for j in 0..n {
            // SAFETY: indices within the blocks.
            let any = (0..k)
                .any(|p| unsafe { *a.ptr.add(i * a.rs + p * a.cs) & *b.ptr.add(p * b.rs + j * b.cs) } != 0);
            // SAFETY: as above.
            unsafe { *c.add(i * n + j) = u8::from(any) };
        }
    }
}
