//! `cumsum`/`cumprod`/`cummax`/`cummin` as an O(n) runtime routine.
//!
//! The operand is viewed as `outer × n × inner` (`n` along the scanned axis). Output row `k` (the
//! `inner` elements at position `k` of the axis) is `combine(output row k-1, input row k)`, the first
//! row `combine(identity, input row 0)`; reverse walks `k` downwards. Each lane therefore folds its
//! elements in exactly the interpreter's order, starting from the same identity, so results are
//! bitwise the interpreter's (`0.0 + -0.0` gives `+0.0` in both); rows are contiguous, so the inner
//! loop streams through memory for every axis.

use crate::CompileError;
use kiln_ir::{CumulativeOp, DType, TensorType};

/// An element type with the interpreter's scan semantics (`kiln_ir`'s `Num`).
trait Elem: Copy {
    fn identity(op: CumulativeOp) -> Self;
    fn combine(op: CumulativeOp, acc: Self, x: Self) -> Self;
}

/// The interpreter's total order for float max/min: `-0.0 < 0.0` (NaN is handled before).
fn float_key(x: f64) -> u64 {
    let b = x.to_bits();
    if b >> 63 == 1 { !b } else { b | 1 << 63 }
}

macro_rules! float_elem {
    ($t:ty) => {
        impl Elem for $t {
            fn identity(op: CumulativeOp) -> Self {
                match op {
                    CumulativeOp::Sum => 0.0,
                    CumulativeOp::Prod => 1.0,
                    CumulativeOp::Max => <$t>::NEG_INFINITY,
                    CumulativeOp::Min => <$t>::INFINITY,
                }
            }
            fn combine(op: CumulativeOp, a: Self, x: Self) -> Self {
                // Max/min keep the first NaN met (the accumulator once it is NaN), as the interpreter.
                let key = |v: Self| float_key(f64::from(v));
                let keep = |ge: bool| a.is_nan() || (!x.is_nan() && ge);
                match op {
                    CumulativeOp::Sum => a + x,
                    CumulativeOp::Prod => a * x,
                    CumulativeOp::Max => {
                        if keep(key(a) >= key(x)) {
                            a
                        } else {
                            x
                        }
                    }
                    CumulativeOp::Min => {
                        if keep(key(a) <= key(x)) {
                            a
                        } else {
                            x
                        }
                    }
                }
            }
        }
    };
}
float_elem!(f32);
float_elem!(f64);

macro_rules! int_elem {
    ($t:ty) => {
        impl Elem for $t {
            fn identity(op: CumulativeOp) -> Self {
                match op {
                    CumulativeOp::Sum => 0,
                    CumulativeOp::Prod => 1,
                    CumulativeOp::Max => <$t>::MIN,
                    CumulativeOp::Min => <$t>::MAX,
                }
            }
            fn combine(op: CumulativeOp, a: Self, x: Self) -> Self {
                match op {
                    CumulativeOp::Sum => a.wrapping_add(x),
                    CumulativeOp::Prod => a.wrapping_mul(x),
                    CumulativeOp::Max => a.max(x),
                    CumulativeOp::Min => a.min(x),
                }
            }
        }
    };
}
int_elem!(i32);
int_elem!(u32);

/// Bool as stored: one byte, 0 or 1. Sum is or, product is and; max is or, min is and.
impl Elem for u8 {
    fn identity(op: CumulativeOp) -> Self {
        match op {
            CumulativeOp::Sum | CumulativeOp::Max => 0,
            CumulativeOp::Prod | CumulativeOp::Min => 1,
        }
    }
    fn combine(op: CumulativeOp, a: Self, x: Self) -> Self {
        match op {
            CumulativeOp::Sum | CumulativeOp::Max => a | x,
            CumulativeOp::Prod | CumulativeOp::Min => a & x,
        }
    }
}

/// The static plan of one cumulative op.
#[derive(Debug, Clone)]
pub(crate) struct CumulativePlan {
    op: CumulativeOp,
    dtype: DType,
    reverse: bool,
    outer: usize,
    n: usize,
    inner: usize,
}

impl CumulativePlan {
    /// `x`: the operand (the output has its type).
    pub(crate) fn new(
        op: CumulativeOp,
        axis: usize,
        reverse: bool,
        x: &TensorType,
    ) -> Result<CumulativePlan, CompileError> {
        let d = x.shape.dims();
        if axis >= d.len() {
            return Err(CompileError::Codegen(format!("{}: axis {axis} out of range for {x}", op.name())));
        }
        Ok(CumulativePlan {
            op,
            dtype: x.dtype,
            reverse,
            outer: d[..axis].iter().product(),
            n: d[axis],
            inner: d[axis + 1..].iter().product(),
        })
    }

    /// Elements of the operand (= of the output).
    pub(crate) fn elements(&self) -> usize {
        self.outer * self.n * self.inner
    }

    /// # Safety
    /// `x` and `out` hold `elements()` elements of the planned dtype, aligned for it, and do not overlap.
    pub(crate) unsafe fn run(&self, x: *const u8, out: *mut u8) {
        let len = self.elements();
        // SAFETY: per the contract.
        unsafe {
            match self.dtype {
                DType::F32 => self.scan::<f32>(slice(x, len), slice_mut(out, len)),
                DType::F64 => self.scan::<f64>(slice(x, len), slice_mut(out, len)),
                DType::I32 => self.scan::<i32>(slice(x, len), slice_mut(out, len)),
                DType::U32 => self.scan::<u32>(slice(x, len), slice_mut(out, len)),
                DType::Bool => self.scan::<u8>(slice(x, len), slice_mut(out, len)),
            }
        }
    }

    /// Dispatches on the op once, so the inner loop is specialized to it.
    fn scan<T: Elem>(&self, x: &[T], out: &mut [T]) {
        match self.op {
            CumulativeOp::Sum => self.scan_with(x, out, |a, v| T::combine(CumulativeOp::Sum, a, v)),
            CumulativeOp::Prod => self.scan_with(x, out, |a, v| T::combine(CumulativeOp::Prod, a, v)),
            CumulativeOp::Max => self.scan_with(x, out, |a, v| T::combine(CumulativeOp::Max, a, v)),
            CumulativeOp::Min => self.scan_with(x, out, |a, v| T::combine(CumulativeOp::Min, a, v)),
        }
    }

    fn scan_with<T: Elem>(&self, x: &[T], out: &mut [T], combine: impl Fn(T, T) -> T) {
        let (n, inner) = (self.n, self.inner);
        let first = T::identity(self.op);
        if n == 0 || inner == 0 {
            return;
        }
        let lane = n * inner;
        for (xs, ys) in x.chunks_exact(lane).zip(out.chunks_exact_mut(lane)) {
            let row = |k: usize| k * inner..(k + 1) * inner;
            let order: &mut dyn Iterator<Item = usize> =
                if self.reverse { &mut (0..n).rev() } else { &mut (0..n) };
            let mut prev: Option<usize> = None;
            for k in order {
                match prev {
                    None => {
                        for (y, &v) in ys[row(k)].iter_mut().zip(&xs[row(k)]) {
                            *y = combine(first, v);
                        }
                    }
                    Some(p) => {
                        // Rows `p` and `k` are disjoint: split so both can be borrowed.
                        let (acc, cur) = if p < k {
                            let (a, b) = ys.split_at_mut(k * inner);
                            (&a[row(p)], &mut b[..inner])
                        } else {
                            let (a, b) = ys.split_at_mut(p * inner);
                            (&b[..inner], &mut a[row(k)])
                        };
                        for ((y, &a), &v) in cur.iter_mut().zip(acc).zip(&xs[row(k)]) {
                            *y = combine(a, v);
                        }
                    }
                }
                prev = Some(k);
            }
        }
    }
}

/// # Safety
/// `p` addresses `len` initialized, aligned `T`s.
unsafe fn slice<'a, T>(p: *const u8, len: usize) -> &'a [T] {
    // SAFETY: per the contract.
    unsafe { std::slice::from_raw_parts(p.cast::<T>(), len) }
}

/// # Safety
/// `p` addresses `len` aligned `T`s that nothing else accesses during the borrow.
unsafe fn slice_mut<'a, T>(p: *mut u8, len: usize) -> &'a mut [T] {
    // SAFETY: per the contract.
    unsafe { std::slice::from_raw_parts_mut(p.cast::<T>(), len) }
}
