//! Elementwise arithmetic on scalar Cranelift values, per dtype, with the interpreter's exact
//! semantics (IEEE max/min with NaN and signed zeros, XLA's integer division rules, saturating
//! conversions). Every op enum is matched exhaustively.

use super::kernel::{Emitter, R, clif_type};
use crate::CompileError;
use cranelift_codegen::ir::{
    InstBuilder, MemFlagsData, Value,
    condcodes::{FloatCC, IntCC},
    types,
};
use kiln_ir::{BinaryOp, CompareOp, DType, ReduceOp, UnaryOp};

fn ill(prim: &'static str, dt: DType) -> CompileError {
    CompileError::unsupported(prim, format!("on {dt}"))
}

fn fconst(s: &mut Emitter, dt: DType, x: f64) -> Value {
    match dt {
        DType::F32 => s.b.ins().f32const(x as f32),
        _ => s.b.ins().f64const(x),
    }
}

/// The callback name of a float routine for `dt` (`kiln_exp_f32`, ...).
fn callback(name: &'static str, dt: DType) -> &'static str {
    crate::runtime::math::name(name, dt == DType::F64)
}

fn call1(s: &mut Emitter, name: &'static str, dt: DType, x: Value) -> R<Value> {
    s.call(callback(name, dt), clif_type(dt), &[x])
}

fn call2(s: &mut Emitter, name: &'static str, dt: DType, x: Value, y: Value) -> R<Value> {
    s.call(callback(name, dt), clif_type(dt), &[x, y])
}

/// True (i8 1) where `x` is NaN; false for non-floats.
pub(super) fn is_nan(s: &mut Emitter, dt: DType, x: Value) -> Value {
    if dt.is_float() { s.b.ins().fcmp(FloatCC::Unordered, x, x) } else { s.b.ins().iconst(types::I8, 0) }
}

/// The sign bit of a float, as i8 0/1.
fn sign_bit(s: &mut Emitter, dt: DType, x: Value) -> Value {
    let ity = if dt == DType::F32 { types::I32 } else { types::I64 };
    let bits = s.b.ins().bitcast(ity, MemFlagsData::new(), x);
    s.b.ins().icmp_imm_s(IntCC::SignedLessThan, bits, 0)
}

pub(super) fn unary(s: &mut Emitter, op: UnaryOp, dt: DType, x: Value) -> R<Value> {
    let name = op.name();
    if dt.is_float() {
        return Ok(match op {
            UnaryOp::Neg => s.b.ins().fneg(x),
            UnaryOp::Abs => s.b.ins().fabs(x),
            UnaryOp::Sign => {
                // ±0 and NaN stay as they are; everything else is ±1.
                let one = fconst(s, dt, 1.0);
                let signed = s.b.ins().fcopysign(one, x);
                let zero = fconst(s, dt, 0.0);
                let keep = s.b.ins().fcmp(FloatCC::UnorderedOrEqual, x, zero);
                s.b.ins().select(keep, x, signed)
            }
            UnaryOp::Floor => s.b.ins().floor(x),
            UnaryOp::Ceil => s.b.ins().ceil(x),
            UnaryOp::Round => {
                // Half away from zero: trunc, then step away when the dropped part is ≥ 1/2 (x - trunc(x)
                // is exact; inf/NaN give a NaN difference and keep trunc's result).
                let t = s.b.ins().trunc(x);
                let d = s.b.ins().fsub(x, t);
                let ad = s.b.ins().fabs(d);
                let half = fconst(s, dt, 0.5);
                let away = s.b.ins().fcmp(FloatCC::GreaterThanOrEqual, ad, half);
                let one = fconst(s, dt, 1.0);
                let step = s.b.ins().fcopysign(one, x);
                let stepped = s.b.ins().fadd(t, step);
                s.b.ins().select(away, stepped, t)
            }
            UnaryOp::RoundEven => s.b.ins().nearest(x),
            UnaryOp::Sqrt => s.b.ins().sqrt(x),
            UnaryOp::Rsqrt => {
                let r = s.b.ins().sqrt(x);
                let one = fconst(s, dt, 1.0);
                s.b.ins().fdiv(one, r)
            }
            UnaryOp::Exp
            | UnaryOp::Expm1
            | UnaryOp::Log
            | UnaryOp::Log1p
            | UnaryOp::Sin
            | UnaryOp::Cos
            | UnaryOp::Tanh
            | UnaryOp::Logistic => {
                // vmath's element kernel: the vector path's bits at one call per element.
                let func = super::check::tile_func(op).expect("vmath covers this op");
                let sym = super::elem_calls::elem_name(func, dt == DType::F64);
                s.call(sym, clif_type(dt), &[x])?
            }
            UnaryOp::Erf | UnaryOp::ErfInv => call1(s, name, dt, x)?,
            UnaryOp::IsFinite => {
                let a = s.b.ins().fabs(x);
                let inf = fconst(s, dt, f64::INFINITY);
                s.b.ins().fcmp(FloatCC::LessThan, a, inf)
            }
            UnaryOp::Not => return Err(ill(name, dt)),
        });
    }
    Ok(match (op, dt) {
        (UnaryOp::Not, DType::Bool) => s.b.ins().bxor_imm_s(x, 1),
        (UnaryOp::Not, _) if dt.is_int() => s.b.ins().bnot(x),
        (UnaryOp::Neg, DType::I32 | DType::U32) => s.b.ins().ineg(x),
        (UnaryOp::Abs, DType::I32) => {
            let n = s.b.ins().ineg(x);
            let neg = s.b.ins().icmp_imm_s(IntCC::SignedLessThan, x, 0);
            s.b.ins().select(neg, n, x)
        }
        (UnaryOp::Abs, DType::U32) => x,
        (UnaryOp::Sign, DType::I32) => {
            let (m1, p1) = (s.b.ins().iconst(types::I32, -1), s.b.ins().iconst(types::I32, 1));
            let lo = s.b.ins().smax(x, m1);
            s.b.ins().smin(lo, p1)
        }
        (UnaryOp::Sign, DType::U32) => {
            let p1 = s.b.ins().iconst(types::I32, 1);
            s.b.ins().umin(x, p1)
        }
        (
            UnaryOp::Neg
            | UnaryOp::Abs
            | UnaryOp::Sign
            | UnaryOp::Not
            | UnaryOp::Floor
            | UnaryOp::Ceil
            | UnaryOp::Round
            | UnaryOp::RoundEven
            | UnaryOp::Exp
            | UnaryOp::Expm1
            | UnaryOp::Log
            | UnaryOp::Log1p
            | UnaryOp::Sqrt
            | UnaryOp::Rsqrt
            | UnaryOp::Sin
            | UnaryOp::Cos
            | UnaryOp::Tanh
            | UnaryOp::Logistic
            | UnaryOp::Erf
            | UnaryOp::ErfInv
            | UnaryOp::IsFinite,
            _,
        ) => return Err(ill(name, dt)),
    })
}

/// IEEE 754-2019 maximum (`want_max`) or minimum, as the interpreter: a NaN operand gives `x + y`
/// (x86 returns the first NaN operand, as Rust's `+`), equal values pick by sign (+0 > -0).
fn float_max_min(s: &mut Emitter, dt: DType, x: Value, y: Value, want_max: bool) -> Value {
    let nan = s.b.ins().fcmp(FloatCC::Unordered, x, y);
    let sum = s.b.ins().fadd(x, y);
    let eq = s.b.ins().fcmp(FloatCC::Equal, x, y);
    let xneg = sign_bit(s, dt, x);
    let cc = if want_max { FloatCC::GreaterThan } else { FloatCC::LessThan };
    let pick_x = s.b.ins().fcmp(cc, x, y);
    let ordered = s.b.ins().select(pick_x, x, y);
    // Equal: max takes y when x is -0 (y may be +0), min takes x when x is -0.
    let (neg_pick, pos_pick) = if want_max { (y, x) } else { (x, y) };
    let tie = s.b.ins().select(xneg, neg_pick, pos_pick);
    let r = s.b.ins().select(eq, tie, ordered);
    s.b.ins().select(nan, sum, r)
}

pub(super) fn binary(s: &mut Emitter, op: BinaryOp, dt: DType, x: Value, y: Value) -> R<Value> {
    let name = op.name();
    Ok(match dt {
        DType::F32 | DType::F64 => match op {
            BinaryOp::Add => ins(s).fadd(x, y),
            BinaryOp::Sub => ins(s).fsub(x, y),
            BinaryOp::Mul => ins(s).fmul(x, y),
            BinaryOp::Div => ins(s).fdiv(x, y),
            BinaryOp::Rem | BinaryOp::Pow | BinaryOp::Atan2 => call2(s, name, dt, x, y)?,
            BinaryOp::Max => float_max_min(s, dt, x, y, true),
            BinaryOp::Min => float_max_min(s, dt, x, y, false),
            BinaryOp::And
            | BinaryOp::Or
            | BinaryOp::Xor
            | BinaryOp::ShiftLeft
            | BinaryOp::ShiftRightLogical => {
                return Err(ill(name, dt));
            }
        },
        DType::I32 | DType::U32 => {
            let signed = dt == DType::I32;
            match op {
                BinaryOp::Add => ins(s).iadd(x, y),
                BinaryOp::Sub => ins(s).isub(x, y),
                BinaryOp::Mul => ins(s).imul(x, y),
                BinaryOp::Div | BinaryOp::Rem => {
                    // XLA: x/0 = -1 (all ones), x%0 = x; MIN / -1 = MIN, MIN % -1 = 0. Division by a
                    // substituted 1 in those cases never traps and gives exactly that.
                    let zero = ins(s).icmp_imm_s(IntCC::Equal, y, 0);
                    let bad = if signed {
                        let xmin = ins(s).icmp_imm_s(IntCC::Equal, x, i32::MIN as i64);
                        let ym1 = ins(s).icmp_imm_s(IntCC::Equal, y, -1);
                        let ovf = ins(s).band(xmin, ym1);
                        ins(s).bor(zero, ovf)
                    } else {
                        zero
                    };
                    let one = ins(s).iconst(types::I32, 1);
                    let safe = ins(s).select(bad, one, y);
                    let (q, on_zero) = match (op, signed) {
                        (BinaryOp::Div, true) => (ins(s).sdiv(x, safe), ins(s).iconst(types::I32, -1)),
                        (BinaryOp::Div, false) => (ins(s).udiv(x, safe), ins(s).iconst(types::I32, -1)),
                        (_, true) => (ins(s).srem(x, safe), x),
                        (_, false) => (ins(s).urem(x, safe), x),
                    };
                    ins(s).select(zero, on_zero, q)
                }
                BinaryOp::Max if signed => ins(s).smax(x, y),
                BinaryOp::Max => ins(s).umax(x, y),
                BinaryOp::Min if signed => ins(s).smin(x, y),
                BinaryOp::Min => ins(s).umin(x, y),
                BinaryOp::And => ins(s).band(x, y),
                BinaryOp::Or => ins(s).bor(x, y),
                BinaryOp::Xor => ins(s).bxor(x, y),
                BinaryOp::ShiftLeft | BinaryOp::ShiftRightLogical => {
                    // Amounts are read as u32: 32 or more (negative included) give 0.
                    let big = ins(s).icmp_imm_s(IntCC::UnsignedGreaterThanOrEqual, y, 32);
                    let sh = if op == BinaryOp::ShiftLeft { ins(s).ishl(x, y) } else { ins(s).ushr(x, y) };
                    let zero = ins(s).iconst(types::I32, 0);
                    ins(s).select(big, zero, sh)
                }
                BinaryOp::Pow | BinaryOp::Atan2 => return Err(ill(name, dt)),
            }
        }
        DType::Bool => match op {
            BinaryOp::And | BinaryOp::Min => ins(s).band(x, y),
            BinaryOp::Or | BinaryOp::Max => ins(s).bor(x, y),
            BinaryOp::Xor => ins(s).bxor(x, y),
            BinaryOp::Add
            | BinaryOp::Sub
            | BinaryOp::Mul
            | BinaryOp::Div
            | BinaryOp::Rem
            | BinaryOp::Pow
            | BinaryOp::Atan2
            | BinaryOp::ShiftLeft
            | BinaryOp::ShiftRightLogical => return Err(ill(name, dt)),
        },
    })
}

/// A comparison, as i8 0/1: IEEE for floats, signed for i32, unsigned for u32 and bool.
pub(super) fn compare(s: &mut Emitter, op: CompareOp, dt: DType, x: Value, y: Value) -> Value {
    if dt.is_float() {
        let cc = match op {
            CompareOp::Eq => FloatCC::Equal,
            CompareOp::Ne => FloatCC::NotEqual,
            CompareOp::Lt => FloatCC::LessThan,
            CompareOp::Le => FloatCC::LessThanOrEqual,
            CompareOp::Gt => FloatCC::GreaterThan,
            CompareOp::Ge => FloatCC::GreaterThanOrEqual,
        };
        return s.b.ins().fcmp(cc, x, y);
    }
    let signed = dt == DType::I32;
    let cc = match (op, signed) {
        (CompareOp::Eq, _) => IntCC::Equal,
        (CompareOp::Ne, _) => IntCC::NotEqual,
        (CompareOp::Lt, true) => IntCC::SignedLessThan,
        (CompareOp::Le, true) => IntCC::SignedLessThanOrEqual,
        (CompareOp::Gt, true) => IntCC::SignedGreaterThan,
        (CompareOp::Ge, true) => IntCC::SignedGreaterThanOrEqual,
        (CompareOp::Lt, false) => IntCC::UnsignedLessThan,
        (CompareOp::Le, false) => IntCC::UnsignedLessThanOrEqual,
        (CompareOp::Gt, false) => IntCC::UnsignedGreaterThan,
        (CompareOp::Ge, false) => IntCC::UnsignedGreaterThanOrEqual,
    };
    s.b.ins().icmp(cc, x, y)
}

/// `convert_element_type`, as Rust's `as` (float→int truncates and saturates, NaN→0; →bool is `!= 0`).
pub(super) fn convert(s: &mut Emitter, from: DType, to: DType, x: Value) -> Value {
    match (from, to) {
        (a, b) if a == b => x,
        (DType::I32, DType::U32) | (DType::U32, DType::I32) => x,
        (DType::F32, DType::F64) => ins(s).fpromote(types::F64, x),
        (DType::F64, DType::F32) => ins(s).fdemote(types::F32, x),
        (DType::F32 | DType::F64, DType::I32) => ins(s).fcvt_to_sint_sat(types::I32, x),
        (DType::F32 | DType::F64, DType::U32) => ins(s).fcvt_to_uint_sat(types::I32, x),
        (DType::I32, DType::F32 | DType::F64) => ins(s).fcvt_from_sint(clif_type(to), x),
        (DType::U32, DType::F32 | DType::F64) => ins(s).fcvt_from_uint(clif_type(to), x),
        (DType::Bool, _) => {
            let w = ins(s).uextend(types::I32, x);
            if to.is_float() { ins(s).fcvt_from_uint(clif_type(to), w) } else { w }
        }
        (DType::F32 | DType::F64, DType::Bool) => {
            // NaN is true, -0.0 false.
            let zero = fconst(s, from, 0.0);
            ins(s).fcmp(FloatCC::NotEqual, x, zero)
        }
        (DType::I32 | DType::U32, DType::Bool) => ins(s).icmp_imm_s(IntCC::NotEqual, x, 0),
        (DType::F32 | DType::F64 | DType::I32 | DType::U32, _) => unreachable!("all pairs covered above"),
    }
}

/// `bitcast_convert_type` between same-width dtypes.
pub(super) fn bitcast(s: &mut Emitter, from: DType, to: DType, x: Value) -> R<Value> {
    Ok(match (from, to) {
        (a, b) if a == b => x,
        (DType::I32 | DType::U32, DType::I32 | DType::U32) => x,
        (DType::F32, DType::I32 | DType::U32) => s.b.ins().bitcast(types::I32, MemFlagsData::new(), x),
        (DType::I32 | DType::U32, DType::F32) => s.b.ins().bitcast(types::F32, MemFlagsData::new(), x),
        _ => return Err(CompileError::unsupported("bitcast_convert_type", format!("{from} to {to}"))),
    })
}

/// An i64 position converted to `dt` (iota).
pub(super) fn from_index(s: &mut Emitter, i: Value, dt: DType) -> R<Value> {
    Ok(match dt {
        DType::F32 | DType::F64 => s.b.ins().fcvt_from_sint(clif_type(dt), i),
        DType::I32 | DType::U32 => s.b.ins().ireduce(types::I32, i),
        DType::Bool => return Err(ill("iota", dt)),
    })
}

/// What an out-of-range `FillOrDrop` gather reads: NaN, `i32::MIN`, `u32::MAX`, true.
pub(super) fn gather_fill(s: &mut Emitter, dt: DType) -> Value {
    match dt {
        DType::F32 => s.b.ins().f32const(f32::NAN),
        DType::F64 => s.b.ins().f64const(f64::NAN),
        DType::I32 => s.b.ins().iconst(types::I32, i32::MIN as i64),
        DType::U32 => s.b.ins().iconst(types::I32, u32::MAX as i64),
        DType::Bool => s.b.ins().iconst(types::I8, 1),
    }
}

/// The identity a reduction starts from (the interpreter's).
pub(super) fn reduce_identity(s: &mut Emitter, op: ReduceOp, dt: DType) -> Value {
    let ity = clif_type(dt);
    match (dt, op) {
        (DType::F32 | DType::F64, ReduceOp::Sum) => fconst(s, dt, 0.0),
        (DType::F32 | DType::F64, ReduceOp::Prod) => fconst(s, dt, 1.0),
        (DType::F32 | DType::F64, ReduceOp::Max) => fconst(s, dt, f64::NEG_INFINITY),
        (DType::F32 | DType::F64, ReduceOp::Min) => fconst(s, dt, f64::INFINITY),
        (DType::I32 | DType::U32 | DType::Bool, ReduceOp::Sum) => s.b.ins().iconst(ity, 0),
        (DType::I32 | DType::U32 | DType::Bool, ReduceOp::Prod) => s.b.ins().iconst(ity, 1),
        (DType::I32, ReduceOp::Max) => s.b.ins().iconst(ity, i32::MIN as i64),
        (DType::I32, ReduceOp::Min) => s.b.ins().iconst(ity, i32::MAX as i64),
        (DType::U32 | DType::Bool, ReduceOp::Max) => s.b.ins().iconst(ity, 0),
        (DType::U32, ReduceOp::Min) => s.b.ins().iconst(ity, u32::MAX as i64),
        (DType::Bool, ReduceOp::Min) => s.b.ins().iconst(ity, 1),
    }
}

/// `acc op x` as the interpreter's sequential fold: ints wrap, bool sum is or and product is and,
/// float max/min keep the first NaN and order -0 below +0.
pub(super) fn reduce_combine(s: &mut Emitter, op: ReduceOp, dt: DType, acc: Value, x: Value) -> Value {
    match (dt, op) {
        (DType::F32 | DType::F64, ReduceOp::Sum) => ins(s).fadd(acc, x),
        (DType::F32 | DType::F64, ReduceOp::Prod) => ins(s).fmul(acc, x),
        (DType::F32 | DType::F64, ReduceOp::Max | ReduceOp::Min) => {
            // keep acc if acc is NaN, or x is not NaN and key(acc) >= key(x) (<= for min), where the
            // key orders -0 below +0: a > x, or a == x and not (a = -0, x = +0).
            let want_max = op == ReduceOp::Max;
            let acc_nan = is_nan(s, dt, acc);
            let x_nan = is_nan(s, dt, x);
            let cc = if want_max { FloatCC::GreaterThan } else { FloatCC::LessThan };
            let strict = ins(s).fcmp(cc, acc, x);
            let eq = ins(s).fcmp(FloatCC::Equal, acc, x);
            let (an, xn) = (sign_bit(s, dt, acc), sign_bit(s, dt, x));
            // max: the tie fails only for (acc = -0, x = +0); min: only for (acc = +0, x = -0).
            let tie_fails = if want_max {
                let xp = ins(s).bxor_imm_s(xn, 1);
                ins(s).band(an, xp)
            } else {
                let ap = ins(s).bxor_imm_s(an, 1);
                ins(s).band(ap, xn)
            };
            let tie_ok = ins(s).bxor_imm_s(tie_fails, 1);
            let tie = ins(s).band(eq, tie_ok);
            let ge = ins(s).bor(strict, tie);
            let x_ok = ins(s).bxor_imm_s(x_nan, 1);
            let keep_cmp = ins(s).band(x_ok, ge);
            let keep = ins(s).bor(acc_nan, keep_cmp);
            ins(s).select(keep, acc, x)
        }
        (DType::I32 | DType::U32, ReduceOp::Sum) => ins(s).iadd(acc, x),
        (DType::I32 | DType::U32, ReduceOp::Prod) => ins(s).imul(acc, x),
        (DType::I32, ReduceOp::Max) => ins(s).smax(acc, x),
        (DType::I32, ReduceOp::Min) => ins(s).smin(acc, x),
        (DType::U32, ReduceOp::Max) => ins(s).umax(acc, x),
        (DType::U32, ReduceOp::Min) => ins(s).umin(acc, x),
        (DType::Bool, ReduceOp::Sum | ReduceOp::Max) => ins(s).bor(acc, x),
        (DType::Bool, ReduceOp::Prod | ReduceOp::Min) => ins(s).band(acc, x),
    }
}

/// Shorthand for the instruction builder.
fn ins<'s, 'b>(s: &'s mut Emitter<'_, 'b>) -> cranelift_frontend::FuncInstBuilder<'s, 'b> {
    s.b.ins()
}
