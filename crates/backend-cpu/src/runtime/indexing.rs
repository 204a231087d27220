//! `scatter`/`scatter_add` and `segment_sum` as Rust routines, reproducing the interpreter's
//! semantics bit for bit: the operand is viewed as `batch ++ pre ++ [axis] ++ suffix` (flattened to
//! counts), updates are applied in row-major order of `updates` (so with duplicate indices the last
//! `Set` wins and `Add` accumulates in that order), and out-of-range indices clamp (`Clip`) or are
//! dropped (`FillOrDrop`; also `Clip` on an empty axis). Every index is bounds-checked before use.

use crate::CompileError;
use kiln_ir::{DType, IndexMode, ScatterOp, TensorType};

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

/// The static plan of one `segment_sum`.
#[derive(Debug, Clone)]
pub(crate) struct SegmentSumPlan {
    dtype: DType,
    index_dtype: DType,
    n: usize,
    row: usize,
    num_segments: usize,
}

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
        })
    }

    /// # Safety
    /// Buffers have the planned types; `out` overlaps none of the inputs.
    pub(crate) unsafe fn run(&self, data: *const u8, ids: *const u8, out: *mut u8) {
        let s = self.dtype.size_bytes();
        // SAFETY: per the contract; ids are checked against `num_segments` before use.
        unsafe {
            // All-zero bytes are 0, 0.0 and false in every dtype.
            std::ptr::write_bytes(out, 0, self.num_segments * self.row * s);
            for i in 0..self.n {
                // Negative and too-large ids are dropped (never clamped).
                let id = index(self.index_dtype, ids, i);
                let Some(seg) = usize::try_from(id).ok().filter(|&g| g < self.num_segments) else { continue };
                add_row(self.dtype, out.add(seg * self.row * s), data.add(i * self.row * s), self.row);
            }
        }
    }
}
