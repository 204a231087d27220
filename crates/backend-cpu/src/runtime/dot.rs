//! `dot_general`: both operands are packed (transposed) into `[batch, m, k]` and `[batch, k, n]` in
//! scratch space, then each batch is one gemm into the `[batch, m, n]` result — which is exactly the
//! result layout (batch dims, lhs free dims, rhs free dims). f32/f64 go through matrixmultiply
//! (blocked, FMA: not bitwise equal to the interpreter's sequential sum; within a reduction
//! tolerance); ints wrap and bool is or-of-ands, both exact in any order. With a
//! `preferred_element_type` other than the operands' dtype, packing converts each element (XLA's
//! `convert`, as the interpreter does before its dot), so the gemm runs in the result dtype.
//!
//! Gemm stays on the calling thread. Measured for f32 784×512×256 on the 2-vCPU dev VM (load 4–5,
//! median of 40, three runs): plain `sgemm` 2.58–2.71 ms; matrixmultiply's `threading` feature with
//! 2 threads 2.14–3.00 ms (0.86–1.27×); two row blocks over a 2-thread rayon pool 2.84–2.94 ms
//! (0.88–0.96×). No reliable gain, and `threading` sizes its pool from `MATMUL_NUM_THREADS`
//! process-wide, so it could not honour `CompileOptions::threads: Some(1)`. Packing costs more
//! here: kiln's whole step took 3.9–4.6 ms (`benches/threads.rs`).

use crate::CompileError;
use kiln_ir::{DType, TensorType};

/// The most dims a packed operand may have (the odometer lives on the stack).
const MAX_RANK: usize = 16;

/// A transposing copy to row-major order of `dims` (source strides permuted alike).
#[derive(Debug, Clone)]
struct Pack {
    dims: Vec<usize>,
    src_strides: Vec<usize>,
    /// The source element dtype and the packed one (equal: a byte copy).
    from: DType,
    to: DType,
}

impl Pack {
    fn new(ty: &TensorType, order: &[usize], to: DType) -> Pack {
        let d = ty.shape.dims();
        let mut strides = vec![1usize; d.len()];
        for k in (0..d.len().saturating_sub(1)).rev() {
            strides[k] = strides[k + 1] * d[k + 1];
        }
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
        let (size, out) = (self.from.size_bytes(), self.to.size_bytes());
        let total: usize = self.dims.iter().product();
        if total == 0 {
            return;
        }
        let rank = self.dims.len();
        let mut ctr = [0usize; MAX_RANK];
        let mut off = 0usize;
        for i in 0..total {
            // SAFETY: `off` is a valid element offset of the source, `i` of the destination.
            unsafe {
                if self.from == self.to {
                    std::ptr::copy_nonoverlapping(src.add(off * size), dst.add(i * out), size);
                } else {
                    convert(self.from, self.to, src.add(off * size), dst.add(i * out));
                }
            }
            // Odometer step, innermost dim first.
            for d in (0..rank).rev() {
                ctr[d] += 1;
                off += self.src_strides[d];
                if ctr[d] < self.dims[d] {
                    break;
                }
                off -= self.src_strides[d] * self.dims[d];
                ctr[d] = 0;
            }
        }
    }
}

/// The static plan of one `dot_general`.
#[derive(Debug, Clone)]
pub(crate) struct DotPlan {
    dtype: DType,
    batch: usize,
    m: usize,
    k: usize,
    n: usize,
    lhs: Pack,
    rhs: Pack,
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
        let lorder = [batch.0, &lf, contracting.0].concat();
        let rorder = [batch.1, contracting.1, &rf].concat();
        Ok(DotPlan {
            dtype,
            batch: size(lhs, batch.0),
            m: size(lhs, &lf),
            k: size(lhs, contracting.0),
            n: size(rhs, &rf),
            lhs: Pack::new(lhs, &lorder, dtype),
            rhs: Pack::new(rhs, &rorder, dtype),
        })
    }

    /// Multiply-adds counted as two operations: `2·batch·m·k·n`.
    pub(crate) fn flops(&self) -> usize {
        2 * self.batch * self.m * self.k * self.n
    }

    /// Scratch bytes: the two packed operands, each 64-byte aligned.
    pub(crate) fn scratch_bytes(&self) -> usize {
        let s = self.dtype.size_bytes();
        (self.batch * self.m * self.k * s).next_multiple_of(64) + self.batch * self.k * self.n * s
    }

    /// # Safety
    /// Operands and output have the planned types; `scratch` has `scratch_bytes()` bytes.
    pub(crate) unsafe fn run(&self, lhs: *const u8, rhs: *const u8, out: *mut u8, scratch: *mut u8) {
        let s = self.dtype.size_bytes();
        let (a, b) =
            (scratch, unsafe { scratch.add((self.batch * self.m * self.k * s).next_multiple_of(64)) });
        let (m, k, n) = (self.m, self.k, self.n);
        // SAFETY: per the contract; each batch addresses its own [m,k], [k,n], [m,n] blocks.
        unsafe {
            self.lhs.run(lhs, a);
            self.rhs.run(rhs, b);
            if k == 0 {
                std::ptr::write_bytes(out, 0, self.batch * m * n * s);
                return;
            }
            if m == 0 || n == 0 {
                return;
            }
            for bi in 0..self.batch {
                let (a, b, c) = (a.add(bi * m * k * s), b.add(bi * k * n * s), out.add(bi * m * n * s));
                let (ki, ni) = (k as isize, n as isize);
                match self.dtype {
                    DType::F32 => matrixmultiply::sgemm(
                        m,
                        k,
                        n,
                        1.0,
                        a.cast(),
                        ki,
                        1,
                        b.cast(),
                        ni,
                        1,
                        0.0,
                        c.cast(),
                        ni,
                        1,
                    ),
                    DType::F64 => matrixmultiply::dgemm(
                        m,
                        k,
                        n,
                        1.0,
                        a.cast(),
                        ki,
                        1,
                        b.cast(),
                        ni,
                        1,
                        0.0,
                        c.cast(),
                        ni,
                        1,
                    ),
                    DType::I32 | DType::U32 => int_gemm(m, k, n, a.cast(), b.cast(), c.cast()),
                    DType::Bool => bool_gemm(m, k, n, a, b, c),
                }
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
/// Row-major `[m,k]`, `[k,n]`, `[m,n]` u32 blocks (i32 wraps identically).
unsafe fn int_gemm(m: usize, k: usize, n: usize, a: *const u32, b: *const u32, c: *mut u32) {
    for i in 0..m {
        for j in 0..n {
            let mut acc = 0u32;
            for p in 0..k {
                // SAFETY: indices within the blocks.
                acc = acc.wrapping_add(unsafe { (*a.add(i * k + p)).wrapping_mul(*b.add(p * n + j)) });
            }
            // SAFETY: as above.
            unsafe { *c.add(i * n + j) = acc };
        }
    }
}

/// # Safety
/// Row-major blocks of 0/1 bytes.
unsafe fn bool_gemm(m: usize, k: usize, n: usize, a: *const u8, b: *const u8, c: *mut u8) {
    for i in 0..m {
        for j in 0..n {
            // SAFETY: indices within the blocks.
            let any = (0..k).any(|p| unsafe { *a.add(i * k + p) & *b.add(p * n + j) } != 0);
            // SAFETY: as above.
            unsafe { *c.add(i * n + j) = u8::from(any) };
        }
    }
}
