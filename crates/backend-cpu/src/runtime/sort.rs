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
                for (j, lane) in keys.chunks_mut(n).enumerate() {
                    let p = input(j);
                    // SAFETY: base + k * inner < outer * n * inner, the operand's size.
                    lane.iter_mut()
                        .enumerate()
                        .for_each(|(k, y)| *y = unsafe { key(self.dtypes[j], p, base + k * inner) });
                }
                perm.iter_mut().enumerate().for_each(|(k, p)| *p = k);
                // Ties broken by position: the order is total, so the unstable (allocation-free) sort
                // gives the unique stable result: equal keys keep their input order.
                let keys = &*keys;
                perm.sort_unstable_by(|&a, &b| {
                    keys.chunks(n).map(|k| k[a].cmp(&k[b])).find(|c| c.is_ne()).unwrap_or_else(|| a.cmp(&b))
                });
                for (j, &dt) in self.dtypes.iter().enumerate() {
                    let s = dt.size_bytes();
                    let (src, dst) = (input(j), output(j));
                    for (k, &from) in perm.iter().enumerate() {
                        // SAFETY: both positions lie inside the lane, inside the operand's size.
                        unsafe {
                            std::ptr::copy_nonoverlapping(
                                src.add((base + from * inner) * s),
                                dst.add((base + k * inner) * s),
                                s,
                            )
                        };
                    }
                }
            }
        }
    }
}
