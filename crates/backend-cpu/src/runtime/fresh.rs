//! Result arrays allocated without zero-filling.
//!
//! `run_raw` writes every element of every output: kernels cover all rows of their output, the
//! runtime routines every element of theirs (gemm with `k = 0` and `segment_sum` zero-fill, scatter
//! copies its operand first), control flow copies or writes all of its outputs, and outputs that are
//! parameters, constants or repeats are copied in by the final loop. Zeroing a result first would be
//! wasted work on every call (a memset, or the page faults of a fresh mapping, for a 4 MB gradient at
//! N = 10⁶). So results start as `MaybeUninit` and are only assumed initialized after `run_raw`.
//!
//! Debug builds (every test) fill them with a canary instead — 0xA5 bytes for numbers, `true` for
//! bool — so a step that failed to write part of its output shows up as wrong values against the
//! interpreter, not as zeros that might pass.

use kiln_ir::{Array, DType, Element, TensorType};
use std::mem::MaybeUninit;

/// The element storage of one result, of its dtype.
pub(crate) enum Fresh {
    F32(Box<[MaybeUninit<f32>]>),
    F64(Box<[MaybeUninit<f64>]>),
    I32(Box<[MaybeUninit<i32>]>),
    U32(Box<[MaybeUninit<u32>]>),
    Bool(Box<[MaybeUninit<bool>]>),
}

/// `n` elements, uninitialized (release) or the canary (debug).
fn storage<T: Element>(n: usize, canary: T) -> Box<[MaybeUninit<T>]> {
    let mut b = Box::new_uninit_slice(n);
    if cfg!(debug_assertions) {
        b.iter_mut().for_each(|x| {
            x.write(canary);
        });
    }
    b
}

/// The canary as a number of each width: every byte 0xA5 (a NaN-free, recognisable pattern).
const A5: u64 = 0xA5A5_A5A5_A5A5_A5A5;

impl Fresh {
    /// Storage for a result of type `ty`.
    pub(crate) fn new(ty: &TensorType) -> Fresh {
        let n = ty.shape.size();
        match ty.dtype {
            DType::F32 => Fresh::F32(storage(n, f32::from_bits(A5 as u32))),
            DType::F64 => Fresh::F64(storage(n, f64::from_bits(A5))),
            DType::I32 => Fresh::I32(storage(n, A5 as i32)),
            DType::U32 => Fresh::U32(storage(n, A5 as u32)),
            DType::Bool => Fresh::Bool(storage(n, true)),
        }
    }

    /// The first element, for `run_raw` to write.
    pub(crate) fn ptr(&mut self) -> *mut u8 {
        match self {
            Fresh::F32(b) => b.as_mut_ptr().cast(),
            Fresh::F64(b) => b.as_mut_ptr().cast(),
            Fresh::I32(b) => b.as_mut_ptr().cast(),
            Fresh::U32(b) => b.as_mut_ptr().cast(),
            Fresh::Bool(b) => b.as_mut_ptr().cast(),
        }
    }

    /// The result array of shape `ty`.
    ///
    /// # Safety
    /// Every element has been written since [`Fresh::new`] (bool ones as 0 or 1).
    pub(crate) unsafe fn finish(self, ty: &TensorType) -> Array {
        let dims = ty.shape.dims();
        // SAFETY (every arm): per the contract.
        unsafe {
            match self {
                Fresh::F32(b) => Array::from_vec(dims, b.assume_init().into_vec()),
                Fresh::F64(b) => Array::from_vec(dims, b.assume_init().into_vec()),
                Fresh::I32(b) => Array::from_vec(dims, b.assume_init().into_vec()),
                Fresh::U32(b) => Array::from_vec(dims, b.assume_init().into_vec()),
                Fresh::Bool(b) => Array::from_vec(dims, b.assume_init().into_vec()),
            }
        }
    }
}
