//! The e-class analysis: the type of every class, its value when it is a known constant, whether all
//! its elements are one bit pattern ("uniform"), and cheap facts that guard side-condition rules.

use super::lang::{Node, PrimTable};
use egg::{Analysis, DidMerge, EGraph, Id};
use kiln_ir::{
    Array, BinaryOp, CompareOp, CumulativeOp, DType, IndexMode, Prim, ReduceOp, TensorType, UnaryOp,
    with_array,
};
use smallvec::{SmallVec, smallvec};
use std::collections::HashMap;
use std::sync::Arc;

/// The e-graph of one region.
pub type Graph = EGraph<Node, RegionAnalysis>;

/// Facts proved about every element of a class. Each is a sound under-approximation: `false`/`None`
/// means "not proved", never "false".
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Facts {
    /// No element is NaN (always true for ints and bool).
    pub not_nan: bool,
    /// Every element is finite (always true for ints and bool).
    pub finite: bool,
    /// Every element is `+0.0` or positive, not NaN (sign bit clear); ints: `>= 0`.
    pub sign_clear: bool,
    /// Every element is an integer in `[lo, hi]` (floats: exactly integral, never `-0.0`).
    pub int_range: Option<(i64, i64)>,
    /// Every element is in `[-64, 64]` (not NaN): `exp` of it neither overflows nor underflows.
    pub small: bool,
}

impl Facts {
    /// What is known of any value of `dtype` (ints and bool are never NaN or infinite).
    pub fn of_dtype(dtype: DType) -> Facts {
        let exact = !dtype.is_float();
        let unsigned = matches!(dtype, DType::U32 | DType::Bool);
        Facts {
            not_nan: exact,
            finite: exact,
            sign_clear: unsigned,
            int_range: None,
            small: dtype == DType::Bool,
        }
    }

    /// Both facts hold (the same value proved two ways).
    fn union(self, o: Facts) -> Facts {
        let int_range = match (self.int_range, o.int_range) {
            (Some(a), Some(b)) => Some((a.0.max(b.0), a.1.min(b.1))),
            (a, b) => a.or(b),
        };
        Facts {
            not_nan: self.not_nan || o.not_nan,
            finite: self.finite || o.finite,
            sign_clear: self.sign_clear || o.sign_clear,
            int_range,
            small: self.small || o.small,
        }
    }

    /// Facts true of a value that is either one or the other (select arms, concatenation).
    fn hull(self, o: Facts) -> Facts {
        Facts {
            not_nan: self.not_nan && o.not_nan,
            finite: self.finite && o.finite,
            sign_clear: self.sign_clear && o.sign_clear,
            small: self.small && o.small,
            int_range: match (self.int_range, o.int_range) {
                (Some(a), Some(b)) => Some((a.0.min(b.0), a.1.max(b.1))),
                _ => None,
            },
        }
    }

    /// Facts of a constant, by inspecting its elements.
    pub fn of_array(a: &Array) -> Facts {
        fn floats(xs: impl Iterator<Item = f64> + Clone) -> Facts {
            let not_nan = xs.clone().all(|x| !x.is_nan());
            let finite = xs.clone().all(f64::is_finite);
            let sign_clear = xs.clone().all(|x| !x.is_nan() && x.is_sign_positive());
            let integral = xs
                .clone()
                .all(|x| x.fract() == 0.0 && x.abs() <= EXACT_INT && !(x == 0.0 && x.is_sign_negative()));
            let int_range = (integral && xs.clone().next().is_some()).then(|| {
                let lo = xs.clone().fold(f64::INFINITY, f64::min) as i64;
                let hi = xs.clone().fold(f64::NEG_INFINITY, f64::max) as i64;
                (lo, hi)
            });
            let small = xs.clone().all(|x| x.abs() <= 64.0);
            Facts { not_nan, finite, sign_clear, int_range, small }
        }
        fn ints(dtype: DType, xs: impl Iterator<Item = i64> + Clone) -> Facts {
            let mut f = Facts::of_dtype(dtype);
            let lo = xs.clone().min();
            let hi = xs.max();
            if let (Some(lo), Some(hi)) = (lo, hi) {
                f.int_range = Some((lo, hi));
                f.sign_clear |= lo >= 0;
                f.small = lo >= -64 && hi <= 64;
            }
            f
        }
        match a {
            Array::F32(x) => floats(x.iter().map(|v| *v as f64)),
            Array::F64(x) => floats(x.iter().copied()),
            Array::I32(x) => ints(DType::I32, x.iter().map(|v| *v as i64)),
            Array::U32(x) => ints(DType::U32, x.iter().map(|v| *v as i64)),
            Array::Bool(x) => ints(DType::Bool, x.iter().map(|v| *v as i64)),
        }
    }
}

/// Integers up to this magnitude are exact in f32, so integer-valued f32 arithmetic staying inside
/// it is exact (f64 is exact further, but one bound keeps the analysis simple).
pub const EXACT_INT: f64 = 16_777_216.0;

/// What the analysis knows about one class.
#[derive(Clone, Debug)]
pub struct ClassData {
    /// Result types: one for a value, several (or none) for a multi-result primitive's tuple.
    pub tys: SmallVec<[TensorType; 1]>,
    /// The value, when the class is a known constant.
    pub value: Option<Arc<Array>>,
    /// A rank-0 array every element equals bitwise (for a non-empty value), when known.
    pub uniform: Option<Arc<Array>>,
    /// Proved facts.
    pub facts: Facts,
}

impl ClassData {
    /// The type of a value class.
    ///
    /// # Panics
    /// On a tuple class (a rule bug: tuples are only read through `Proj`).
    pub fn ty(&self) -> &TensorType {
        assert_eq!(self.tys.len(), 1, "simplify: a tuple class used as a value");
        &self.tys[0]
    }

    /// True for a single-result class.
    pub fn is_value(&self) -> bool {
        self.tys.len() == 1
    }
}

/// Constants of a region, deduplicated by bits.
#[derive(Default)]
pub struct ConstTable {
    values: Vec<Arc<Array>>,
    index: HashMap<String, u32>,
}

impl ConstTable {
    /// The index of `value`, adding it if no constant has the same dtype, shape and bits.
    pub fn intern(&mut self, value: Arc<Array>) -> u32 {
        let key = bits_key(&value);
        if let Some(i) = self.index.get(&key) {
            return *i;
        }
        self.values.push(value);
        let i = u32::try_from(self.values.len() - 1).expect("fewer than 2^32 constants");
        self.index.insert(key, i);
        i
    }

    /// The constant at `i`.
    pub fn get(&self, i: u32) -> &Arc<Array> {
        &self.values[i as usize]
    }
}

/// A key equal for arrays of equal dtype, shape and bit patterns.
fn bits_key(a: &Array) -> String {
    use std::fmt::Write;
    let mut s = format!("{}", a.ty());
    match a {
        Array::F32(x) => x.iter().for_each(|v| write!(s, ",{:x}", v.to_bits()).unwrap()),
        Array::F64(x) => x.iter().for_each(|v| write!(s, ",{:x}", v.to_bits()).unwrap()),
        Array::I32(x) => x.iter().for_each(|v| write!(s, ",{v}").unwrap()),
        Array::U32(x) => x.iter().for_each(|v| write!(s, ",{v}").unwrap()),
        Array::Bool(x) => x.iter().for_each(|v| write!(s, ",{}", *v as u8).unwrap()),
    }
    s
}

/// The rank-0 array every element of `a` equals bitwise, if `a` is non-empty and uniform.
pub fn uniform_of(a: &Array) -> Option<Arc<Array>> {
    with_array!(a, x => {
        let first = *x.iter().next()?;
        let key = bits_key(&Array::scalar(first));
        x.iter().all(|v| bits_key(&Array::scalar(*v)) == key).then(|| Arc::new(Array::scalar(first)))
    })
}

/// The analysis state of a region: interned primitives and constants, the input types, and the
/// cost model extraction uses.
#[derive(Default)]
pub struct RegionAnalysis {
    /// Interned primitives.
    pub prims: PrimTable,
    /// Interned constants.
    pub consts: ConstTable,
    /// The type of each region input.
    pub inputs: Vec<TensorType>,
    /// How extraction prices results.
    pub model: super::extract::CostModel,
}

impl Analysis<Node> for RegionAnalysis {
    type Data = ClassData;

    fn make(egraph: &mut Graph, enode: &Node, _id: Id) -> ClassData {
        let a = &egraph.analysis;
        match enode {
            Node::Input(i) => {
                let ty = a.inputs[*i as usize].clone();
                ClassData { facts: Facts::of_dtype(ty.dtype), tys: smallvec![ty], value: None, uniform: None }
            }
            Node::Const(i) => {
                let v = a.consts.get(*i).clone();
                ClassData {
                    tys: smallvec![v.ty()],
                    uniform: uniform_of(&v),
                    facts: Facts::of_array(&v),
                    value: Some(v),
                }
            }
            Node::Proj(k, [t]) => {
                let ty = egraph[*t].data.tys[*k as usize].clone();
                ClassData { facts: Facts::of_dtype(ty.dtype), tys: smallvec![ty], value: None, uniform: None }
            }
            Node::Op(p, xs) => {
                let prim = a.prims.get(*p);
                let args: Vec<&ClassData> = xs.iter().map(|x| &egraph[*x].data).collect();
                let in_tys: Vec<TensorType> = args.iter().flat_map(|d| d.tys.iter().cloned()).collect();
                let tys: SmallVec<[TensorType; 1]> = kiln_ir::output_types(prim, &in_tys)
                    .expect("simplify: nodes are type-checked before they are added")
                    .into_iter()
                    .collect();
                let facts = match tys.as_slice() {
                    [ty] => Facts::of_dtype(ty.dtype).union(transfer(prim, &args, ty)),
                    _ => Facts::default(),
                };
                let uniform = if tys.len() == 1 && tys[0].shape.size() > 0 {
                    uniform_through(prim, &args)
                } else {
                    None
                };
                ClassData { tys, value: None, uniform, facts }
            }
        }
    }

    fn merge(&mut self, a: &mut ClassData, b: ClassData) -> DidMerge {
        debug_assert_eq!(a.tys, b.tys, "simplify: merged classes of different types");
        let mut changed_a = false;
        let mut changed_b = false;
        for (mine, theirs) in [(&mut a.value, &b.value), (&mut a.uniform, &b.uniform)] {
            match (mine.is_some(), theirs.is_some()) {
                (false, true) => {
                    *mine = theirs.clone();
                    changed_a = true;
                }
                (true, false) => changed_b = true,
                _ => {}
            }
        }
        let facts = a.facts.union(b.facts);
        changed_a |= facts != a.facts;
        changed_b |= facts != b.facts;
        a.facts = facts;
        DidMerge(changed_a, changed_b)
    }
}

/// The uniform element of a structural op's result, from its operand's.
fn uniform_through(prim: &Prim, args: &[&ClassData]) -> Option<Arc<Array>> {
    match prim {
        Prim::BroadcastInDim { .. }
        | Prim::Reshape { .. }
        | Prim::Transpose { .. }
        | Prim::Rev { .. }
        | Prim::Slice { .. }
        | Prim::StopGradient => args[0].uniform.clone(),
        Prim::Unary(_)
        | Prim::Binary(_)
        | Prim::Compare(_)
        | Prim::Select
        | Prim::Clamp
        | Prim::ConvertElementType { .. }
        | Prim::BitcastConvertType { .. }
        | Prim::Iota { .. }
        | Prim::DynamicSlice { .. }
        | Prim::DynamicUpdateSlice
        | Prim::Concatenate { .. }
        | Prim::Pad { .. }
        | Prim::Reduce { .. }
        | Prim::ArgReduce { .. }
        | Prim::Cumulative { .. }
        | Prim::Sort { .. }
        | Prim::DotGeneral { .. }
        | Prim::Gather { .. }
        | Prim::Scatter { .. }
        | Prim::SegmentSum { .. }
        | Prim::Threefry2x32
        | Prim::CustomJvpCall { .. }
        | Prim::CustomVjpCall { .. }
        | Prim::Scan { .. }
        | Prim::WhileLoop { .. }
        | Prim::Cond { .. }
        | Prim::Call { .. }
        | Prim::Checkpoint { .. } => None,
    }
}

/// Interval arithmetic on integer ranges, kept only while exact (|bound| <= 2^24).
fn range_op(a: Option<(i64, i64)>, b: Option<(i64, i64)>, f: impl Fn(i64, i64) -> i64) -> Option<(i64, i64)> {
    let (a, b) = (a?, b?);
    let corners = [f(a.0, b.0), f(a.0, b.1), f(a.1, b.0), f(a.1, b.1)];
    let lo = *corners.iter().min()?;
    let hi = *corners.iter().max()?;
    (lo as f64 >= -EXACT_INT && hi as f64 <= EXACT_INT).then_some((lo, hi))
}

/// A comparison's value (0 or 1) where the operands' integer ranges decide it for every element
/// (`lt(x, 0)` on indices known to be non-negative: JAX's negative-index wrap of in-range indices).
/// Integer ranges of floats hold only integral, non-NaN values (the transfer table keeps them
/// only where that holds), so NaN and -0.0 never reach here.
fn decided(op: CompareOp, a: Option<(i64, i64)>, b: Option<(i64, i64)>) -> Option<i64> {
    let ((al, ah), (bl, bh)) = (a?, b?);
    let (always, never) = match op {
        CompareOp::Lt => (ah < bl, al >= bh),
        CompareOp::Le => (ah <= bl, al > bh),
        CompareOp::Gt => (al > bh, ah <= bl),
        CompareOp::Ge => (al >= bh, ah < bl),
        CompareOp::Eq => (al == ah && bl == bh && al == bl, ah < bl || bh < al),
        CompareOp::Ne => (ah < bl || bh < al, al == ah && bl == bh && al == bl),
    };
    if always {
        Some(1)
    } else if never {
        Some(0)
    } else {
        None
    }
}

/// A bool every element of which is `v` (0 or 1).
fn decided_bool(v: i64) -> Facts {
    Facts { not_nan: true, finite: true, sign_clear: true, small: true, int_range: Some((v, v)) }
}

/// The facts of a single-result primitive's value from its operands' (an exhaustive table).
fn transfer(prim: &Prim, args: &[&ClassData], ty: &TensorType) -> Facts {
    let none = Facts::default();
    let f = |i: usize| args[i].facts;
    let same = |i: usize| if args[i].is_value() { args[i].facts } else { none };
    match prim {
        Prim::Unary(op) => {
            let x = f(0);
            match op {
                UnaryOp::Neg => Facts {
                    not_nan: x.not_nan,
                    finite: x.finite,
                    sign_clear: false,
                    small: x.small && ty.dtype.is_float(),
                    // Unsigned negation wraps, and so does i32's of i32::MIN; float negation of
                    // 0 gives -0.0 (not "integral" here).
                    int_range: match x.int_range {
                        Some(_) if ty.dtype == DType::U32 => None,
                        Some((l, _)) if ty.dtype == DType::I32 && l <= i32::MIN as i64 => None,
                        Some((l, h)) if ty.dtype.is_float() && l <= 0 && h >= 0 => None,
                        Some((l, h)) => Some((-h, -l)),
                        None => None,
                    },
                },
                // |x| of integral values in [l, h] lies in [0, max(-l, h)] (or the mirrored
                // range); `abs` never makes -0.0, so the result stays "integral".
                UnaryOp::Abs if ty.dtype.is_float() => Facts {
                    sign_clear: x.not_nan,
                    int_range: x.int_range.map(|(l, h)| match (l >= 0, h <= 0) {
                        (true, _) => (l, h),
                        (false, true) => (-h, -l),
                        (false, false) => (0, (-l).max(h)),
                    }),
                    ..x
                },
                UnaryOp::Abs => none,
                UnaryOp::Exp => Facts { not_nan: x.not_nan, sign_clear: x.not_nan, ..none },
                UnaryOp::Logistic => Facts {
                    not_nan: x.not_nan,
                    finite: x.not_nan,
                    sign_clear: x.not_nan,
                    small: x.not_nan,
                    int_range: None,
                },
                UnaryOp::Sqrt => Facts {
                    not_nan: x.sign_clear,
                    finite: x.sign_clear && x.finite,
                    sign_clear: x.sign_clear,
                    ..none
                },
                UnaryOp::Tanh | UnaryOp::Erf => {
                    Facts { not_nan: x.not_nan, finite: x.not_nan, small: x.not_nan, ..none }
                }
                UnaryOp::Sin | UnaryOp::Cos => {
                    Facts { not_nan: x.finite, finite: x.finite, small: x.finite, ..none }
                }
                UnaryOp::Floor | UnaryOp::Ceil | UnaryOp::Round | UnaryOp::RoundEven => {
                    Facts { not_nan: x.not_nan, finite: x.finite, int_range: x.int_range, ..none }
                }
                UnaryOp::Sign
                | UnaryOp::Expm1
                | UnaryOp::Log
                | UnaryOp::Log1p
                | UnaryOp::Rsqrt
                | UnaryOp::ErfInv
                | UnaryOp::IsFinite => none,
                // Logical not of a bool decided everywhere (an in-range check of constant ids).
                UnaryOp::Not => match x.int_range {
                    Some((v, w)) if ty.dtype == DType::Bool && v == w => decided_bool(1 - v),
                    _ => none,
                },
            }
        }
        Prim::Binary(op) => {
            let (a, b) = (f(0), f(1));
            let ints = |r: Option<(i64, i64)>| Facts {
                not_nan: r.is_some(),
                finite: r.is_some(),
                int_range: r,
                ..none
            };
            match op {
                // Saturating: ranges of clamped u32 values reach 2^32, and their products overflow
                // i64 (a panic in debug builds); a saturated corner fails `range_op`'s bound.
                BinaryOp::Add => ints(range_op(a.int_range, b.int_range, i64::saturating_add)),
                BinaryOp::Sub if ty.dtype != DType::U32 => {
                    ints(range_op(a.int_range, b.int_range, i64::saturating_sub))
                }
                // 0 * -1 = -0.0 in floats: only non-negative float ranges stay "integral".
                BinaryOp::Mul
                    if ty.dtype.is_float()
                        && !(a.int_range.is_some_and(|r| r.0 >= 0)
                            && b.int_range.is_some_and(|r| r.0 >= 0)) =>
                {
                    none
                }
                BinaryOp::Mul => ints(range_op(a.int_range, b.int_range, i64::saturating_mul)),
                BinaryOp::Max => Facts {
                    not_nan: a.not_nan && b.not_nan,
                    finite: a.finite && b.finite,
                    sign_clear: (a.sign_clear || b.sign_clear) && a.not_nan && b.not_nan,
                    small: a.small && b.small,
                    int_range: range_op(a.int_range, b.int_range, i64::max),
                },
                BinaryOp::Min => Facts {
                    not_nan: a.not_nan && b.not_nan,
                    finite: a.finite && b.finite,
                    sign_clear: a.sign_clear && b.sign_clear,
                    small: a.small && b.small,
                    int_range: range_op(a.int_range, b.int_range, i64::min),
                },
                // Bools decided everywhere: `0 <= i && i < n` on ids in range (the transpose of a
                // segment sum masks by it).
                BinaryOp::And | BinaryOp::Or if ty.dtype == DType::Bool => {
                    let (x, y) = (a.int_range, b.int_range);
                    let (absorbing, neutral) = if *op == BinaryOp::And { (0, 1) } else { (1, 0) };
                    if x == Some((absorbing, absorbing)) || y == Some((absorbing, absorbing)) {
                        decided_bool(absorbing)
                    } else if x == Some((neutral, neutral)) && y == Some((neutral, neutral)) {
                        decided_bool(neutral)
                    } else {
                        none
                    }
                }
                BinaryOp::Sub
                | BinaryOp::Div
                | BinaryOp::Rem
                | BinaryOp::Pow
                | BinaryOp::Atan2
                | BinaryOp::And
                | BinaryOp::Or
                | BinaryOp::Xor
                | BinaryOp::ShiftLeft
                | BinaryOp::ShiftRightLogical => none,
            }
        }
        Prim::Select => f(1).hull(f(2)),
        Prim::Clamp if !ty.dtype.is_float() => {
            // `min(max(x, lo), hi)`: `hi` where an element's `lo` exceeds its `hi`.
            let r = match (f(0).int_range, f(2).int_range) {
                (Some(lo), Some(hi)) => Some((lo.0.min(hi.0), hi.1)),
                _ => None,
            };
            Facts { int_range: r, sign_clear: r.is_some_and(|r| r.0 >= 0), ..none }
        }
        Prim::ConvertElementType { .. } => {
            let x = f(0);
            let from = args[0].ty().dtype;
            if from.is_float() {
                none
            } else {
                let r = x.int_range.filter(|r| r.0 as f64 >= -EXACT_INT && r.1 as f64 <= EXACT_INT);
                let r = if from == DType::Bool { Some((0, 1)) } else { r };
                let r = match ty.dtype {
                    // `x != 0`, not `x`.
                    DType::Bool => Some(match r {
                        Some((0, 0)) => (0, 0),
                        Some((l, h)) if l > 0 || h < 0 => (1, 1),
                        _ => (0, 1),
                    }),
                    // Negative i32 values keep their bits: huge u32 ones.
                    DType::U32 => r.filter(|r| r.0 >= 0),
                    DType::I32 | DType::F32 | DType::F64 => r,
                };
                let small = r.is_some_and(|r| r.0 >= -64 && r.1 <= 64);
                Facts {
                    not_nan: true,
                    finite: true,
                    sign_clear: r.is_some_and(|r| r.0 >= 0),
                    int_range: r,
                    small,
                }
            }
        }
        Prim::Iota { shape, dimension, .. } => {
            let n = shape.dims()[*dimension] as i64;
            // A float iota holds its indices exactly only up to 2^24 (f32): past that they round,
            // f32(16777219) = 16777220 > n - 1.
            let exact = !ty.dtype.is_float() || (n - 1) as f64 <= EXACT_INT;
            Facts {
                not_nan: true,
                finite: true,
                sign_clear: true,
                int_range: (n > 0 && exact).then_some((0, n - 1)),
                small: n <= 65,
            }
        }
        Prim::BroadcastInDim { .. }
        | Prim::Reshape { .. }
        | Prim::Transpose { .. }
        | Prim::Rev { .. }
        | Prim::Slice { .. }
        | Prim::DynamicSlice { .. }
        | Prim::StopGradient => same(0),
        Prim::DynamicUpdateSlice | Prim::Pad { .. } => f(0).hull(f(1)),
        Prim::Concatenate { .. } => args.iter().map(|a| a.facts).reduce(Facts::hull).unwrap_or(none),
        Prim::Reduce { op: ReduceOp::Max | ReduceOp::Min, .. }
        | Prim::Cumulative { op: CumulativeOp::Max | CumulativeOp::Min, .. }
            if args[0].ty().shape.size() > 0 =>
        {
            Facts { int_range: None, ..f(0) }
        }
        // Clipped indices read operand elements, but from an empty axis the fill value (NaN,
        // the integer minimum, true), which the operand's facts say nothing about.
        Prim::Gather { mode: IndexMode::Clip, axis, .. } if args[0].ty().shape.dims()[*axis] > 0 => f(0),
        Prim::ArgReduce { axis, .. } => {
            let n = args[0].ty().shape.dims()[*axis] as i64;
            Facts {
                not_nan: true,
                finite: true,
                sign_clear: true,
                int_range: (n > 0).then_some((0, n - 1)),
                small: n <= 65,
            }
        }
        Prim::Compare(op) => match decided(*op, f(0).int_range, f(1).int_range) {
            Some(v) => decided_bool(v),
            None => none,
        },
        Prim::Clamp
        | Prim::BitcastConvertType { .. }
        | Prim::Reduce { .. }
        | Prim::Cumulative { .. }
        | Prim::Gather { .. } => none,
        Prim::Sort { .. }
        | Prim::DotGeneral { .. }
        | Prim::Scatter { .. }
        | Prim::SegmentSum { .. }
        | Prim::Threefry2x32
        | Prim::CustomJvpCall { .. }
        | Prim::CustomVjpCall { .. }
        | Prim::Scan { .. }
        | Prim::WhileLoop { .. }
        | Prim::Cond { .. }
        | Prim::Call { .. }
        | Prim::Checkpoint { .. } => none,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An i32 class the analysis proves to hold `i32::MIN` (`clamp(m, p, m)`): its negation wraps
    /// back to `i32::MIN`, so no range may be claimed (`(2³¹, 2³¹)` was, found by review, which
    /// `decided_by_range` could have written as a saturated `i32::MAX`). Other negations keep it.
    #[test]
    fn i32_negation_claims_no_range_that_wraps() {
        let ty = TensorType::new(DType::I32, kiln_ir::Shape::new(&[100]));
        let class = |lo: i64, hi: i64| ClassData {
            facts: Facts { int_range: Some((lo, hi)), ..Facts::of_dtype(DType::I32) },
            tys: smallvec![ty.clone()],
            value: None,
            uniform: None,
        };
        let neg = Prim::Unary(UnaryOp::Neg);
        let min = i32::MIN as i64;
        assert_eq!(transfer(&neg, &[&class(min, min)], &ty).int_range, None);
        assert_eq!(transfer(&neg, &[&class(min, 7)], &ty).int_range, None);
        assert_eq!(transfer(&neg, &[&class(min + 1, 7)], &ty).int_range, Some((-7, -min - 1)));
    }
}
