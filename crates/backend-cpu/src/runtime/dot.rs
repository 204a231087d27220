//! `dot_general`: both operands are packed (transposed) into `[batch, m, k]` and `[batch, k, n]` in
//! scratch space, then each batch is one gemm into the `[batch, m, n]` result — which is exactly the
//! result layout (batch dims, lhs free dims, rhs free dims). f32/f64 go through matrixmultiply
//! (blocked, FMA: not bitwise equal to the interpreter's sequential sum; within a reduction
//! tolerance); ints wrap and bool is or-of-ands, both exact in any order.

use crate::CompileError;
use kiln_ir::{DType, TensorType};

/// The most dims a packed operand may have (the odometer lives on the stack).
const MAX_RANK: usize = 16;

/// A transposing copy to row-major order of `dims` (source strides permuted alike).
#[derive(Debug, Clone)]
struct Pack {
    dims: Vec<usize>,
    src_strides: Vec<usize>,
}

impl Pack {
    fn new(ty: &TensorType, order: &[usize]) -> Pack {
        let d = ty.shape.dims();
        let mut strides = vec![1usize; d.len()];
        for k in (0..d.len().saturating_sub(1)).rev() {
            strides[k] = strides[k + 1] * d[k + 1];
        }
        Pack {
            dims: order.iter().map(|&o| d[o]).collect(),
            src_strides: order.iter().map(|&o| strides[o]).collect(),
        }
    }

    /// # Safety
    /// `src` holds the source array, `dst` room for all of it; elements are `size` bytes.
    unsafe fn run(&self, src: *const u8, dst: *mut u8, size: usize) {
        let total: usize = self.dims.iter().product();
        if total == 0 {
            return;
        }
        let rank = self.dims.len();
        let mut ctr = [0usize; MAX_RANK];
        let mut off = 0usize;
        for i in 0..total {
            // SAFETY: `off` is a valid element offset of the source, `i` of the destination.
            unsafe { std::ptr::copy_nonoverlapping(src.add(off * size), dst.add(i * size), size) };
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
        if preferred.is_some_and(|p| p != lhs.dtype) {
            return Err(CompileError::unsupported(
                "dot_general",
                "preferred_element_type differing from the operands'",
            ));
        }
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
            dtype: lhs.dtype,
            batch: size(lhs, batch.0),
            m: size(lhs, &lf),
            k: size(lhs, contracting.0),
            n: size(rhs, &rf),
            lhs: Pack::new(lhs, &lorder),
            rhs: Pack::new(rhs, &rorder),
        })
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
            self.lhs.run(lhs, a, s);
            self.rhs.run(rhs, b, s);
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
