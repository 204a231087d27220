//! Elementwise arithmetic on vector values (f32x4, f64x2, i32x4; bools as lane-width masks), with
//! exactly the scalar code's semantics ([`super::scalar`]): the same IEEE max/min rules built from
//! compares and `bitselect`, and, where x86 has no vector instruction (integer division, per-lane
//! shifts, erf, pow, ...), the scalar code applied lane by lane. Every op enum is matched exhaustively.

use super::kernel::{Emitter, R};
use super::scalar;
use crate::CompileError;
use cranelift_codegen::ir::{
    ConstantData, Endianness, InstBuilder, MemFlagsData, Type, Value,
    condcodes::{FloatCC, IntCC},
    types,
};
use kiln_ir::{BinaryOp, CompareOp, DType, ReduceOp, UnaryOp};

fn ill(prim: &'static str, dt: DType) -> CompileError {
    CompileError::unsupported(prim, format!("on {dt} (vector path)"))
}

/// Bitcasts between vector types of one width (lane order is memory order).
pub(super) fn bits() -> MemFlagsData {
    MemFlagsData::new().with_endianness(Endianness::Little)
}

impl Emitter<'_, '_> {
    /// A splatted float constant of `dt`'s vector type.
    fn vfconst(&mut self, dt: DType, x: f64) -> Value {
        let c = match dt {
            DType::F32 => self.b.ins().f32const(x as f32),
            _ => self.b.ins().f64const(x),
        };
        let ty = self.vty(dt);
        self.b.ins().splat(ty, c)
    }

    /// A splatted integer constant of type `ty` (a vector of i32 or i64 lanes).
    fn viconst(&mut self, ty: Type, x: i64) -> Value {
        let c = self.b.ins().iconst(ty.lane_type(), x);
        self.b.ins().splat(ty, c)
    }

    /// The integer vector type of `v`'s lane width.
    fn int_ty(&self, v: Value) -> Type {
        let ty = self.b.func.dfg.value_type(v);
        ty.as_int()
    }

    fn as_int(&mut self, v: Value) -> Value {
        let ity = self.int_ty(v);
        if ity == self.b.func.dfg.value_type(v) { v } else { self.b.ins().bitcast(ity, bits(), v) }
    }

    /// Lanes where `mask` is all ones take `a`, the others `b`.
    pub(super) fn vselect(&mut self, mask: Value, a: Value, b: Value) -> Value {
        let ty = self.b.func.dfg.value_type(a);
        let m = if self.b.func.dfg.value_type(mask) == ty {
            mask
        } else {
            self.b.ins().bitcast(ty, bits(), mask)
        };
        self.b.ins().bitselect(m, a, b)
    }

    /// Mask of the lanes whose sign bit is set.
    fn vsign_bit(&mut self, x: Value) -> Value {
        let i = self.as_int(x);
        let zero = self.viconst(self.int_ty(x), 0);
        self.b.ins().icmp(IntCC::SignedLessThan, i, zero)
    }

    /// `|one|` with `x`'s sign, lane by lane (vector `fcopysign` is not lowered on every x64 level).
    fn vcopysign(&mut self, dt: DType, one: f64, x: Value) -> Value {
        let ity = self.int_ty(x);
        let sign_mask = if dt == DType::F32 { i32::MIN as i64 } else { i64::MIN };
        let m = self.viconst(ity, sign_mask);
        let xi = self.as_int(x);
        let sign = self.b.ins().band(xi, m);
        let mag = self.vfconst(dt, one.abs());
        let magi = self.as_int(mag);
        let r = self.b.ins().bor(sign, magi);
        let ty = self.vty(dt);
        self.b.ins().bitcast(ty, bits(), r)
    }

    /// Applies the scalar code to each lane (`args` are vectors of `dt`; the result has `out`'s type).
    fn per_lane(
        &mut self,
        out: DType,
        args: &[Value],
        op: &mut dyn FnMut(&mut Self, &[Value]) -> R<Value>,
    ) -> R<Value> {
        let ty = self.vty(out);
        let mut acc: Option<Value> = None;
        for l in 0..self.lanes() {
            let xs: Vec<Value> = args.iter().map(|&a| self.b.ins().extractlane(a, l as u8)).collect();
            let y = op(self, &xs)?;
            acc = Some(match acc {
                None => self.b.ins().splat(ty, y),
                Some(v) => self.b.ins().insertlane(v, y, l as u8),
            });
        }
        acc.ok_or_else(|| CompileError::Codegen("vector with no lanes".into()))
    }

    pub(super) fn vunary(&mut self, op: UnaryOp, dt: DType, x: Value) -> R<Value> {
        let name = op.name();
        if dt.is_float() {
            return Ok(match op {
                UnaryOp::Neg => self.b.ins().fneg(x),
                UnaryOp::Abs => self.b.ins().fabs(x),
                UnaryOp::Sign => {
                    let zero = self.vfconst(dt, 0.0);
                    let nan = self.b.ins().fcmp(FloatCC::Unordered, x, x);
                    let z = self.b.ins().fcmp(FloatCC::Equal, x, zero);
                    let keep = self.b.ins().bor(nan, z);
                    let signed = self.vcopysign(dt, 1.0, x);
                    self.vselect(keep, x, signed)
                }
                UnaryOp::Floor => self.b.ins().floor(x),
                UnaryOp::Ceil => self.b.ins().ceil(x),
                UnaryOp::Round => {
                    let t = self.b.ins().trunc(x);
                    let d = self.b.ins().fsub(x, t);
                    let ad = self.b.ins().fabs(d);
                    let half = self.vfconst(dt, 0.5);
                    let away = self.b.ins().fcmp(FloatCC::GreaterThanOrEqual, ad, half);
                    let step = self.vcopysign(dt, 1.0, x);
                    let stepped = self.b.ins().fadd(t, step);
                    self.vselect(away, stepped, t)
                }
                UnaryOp::RoundEven => self.b.ins().nearest(x),
                UnaryOp::Sqrt => self.b.ins().sqrt(x),
                UnaryOp::Rsqrt => {
                    let r = self.b.ins().sqrt(x);
                    let one = self.vfconst(dt, 1.0);
                    self.b.ins().fdiv(one, r)
                }
                UnaryOp::Exp
                | UnaryOp::Expm1
                | UnaryOp::Log
                | UnaryOp::Log1p
                | UnaryOp::Sin
                | UnaryOp::Cos
                | UnaryOp::Tanh
                | UnaryOp::Logistic
                | UnaryOp::Erf
                | UnaryOp::ErfInv => self.per_lane(dt, &[x], &mut |s, a| scalar::unary(s, op, dt, a[0]))?,
                UnaryOp::IsFinite => {
                    let a = self.b.ins().fabs(x);
                    let inf = self.vfconst(dt, f64::INFINITY);
                    self.b.ins().fcmp(FloatCC::LessThan, a, inf)
                }
                UnaryOp::Not => return Err(ill(name, dt)),
            });
        }
        let ty = self.b.func.dfg.value_type(x);
        Ok(match (op, dt) {
            (UnaryOp::Not, _) if dt.is_int() || dt == DType::Bool => self.b.ins().bnot(x),
            (UnaryOp::Neg, DType::I32 | DType::U32) => self.b.ins().ineg(x),
            (UnaryOp::Abs, DType::I32) => self.b.ins().iabs(x),
            (UnaryOp::Abs, DType::U32) => x,
            (UnaryOp::Sign, DType::I32) => {
                let (m1, p1) = (self.viconst(ty, -1), self.viconst(ty, 1));
                let lo = self.b.ins().smax(x, m1);
                self.b.ins().smin(lo, p1)
            }
            (UnaryOp::Sign, DType::U32) => {
                let p1 = self.viconst(ty, 1);
                self.b.ins().umin(x, p1)
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

    /// IEEE maximum/minimum with the scalar code's NaN and ±0 rules (see `scalar::float_max_min`).
    fn vfloat_max_min(&mut self, x: Value, y: Value, want_max: bool) -> Value {
        let nan = self.b.ins().fcmp(FloatCC::Unordered, x, y);
        let sum = self.b.ins().fadd(x, y);
        let eq = self.b.ins().fcmp(FloatCC::Equal, x, y);
        let xneg = self.vsign_bit(x);
        let cc = if want_max { FloatCC::GreaterThan } else { FloatCC::LessThan };
        let pick_x = self.b.ins().fcmp(cc, x, y);
        let ordered = self.vselect(pick_x, x, y);
        let (neg_pick, pos_pick) = if want_max { (y, x) } else { (x, y) };
        let tie = self.vselect(xneg, neg_pick, pos_pick);
        let r = self.vselect(eq, tie, ordered);
        self.vselect(nan, sum, r)
    }

    pub(super) fn vbinary(&mut self, op: BinaryOp, dt: DType, x: Value, y: Value) -> R<Value> {
        let name = op.name();
        let lanewise =
            |s: &mut Self| s.per_lane(dt, &[x, y], &mut |s, a| scalar::binary(s, op, dt, a[0], a[1]));
        Ok(match dt {
            DType::F32 | DType::F64 => match op {
                BinaryOp::Add => self.b.ins().fadd(x, y),
                BinaryOp::Sub => self.b.ins().fsub(x, y),
                BinaryOp::Mul => self.b.ins().fmul(x, y),
                BinaryOp::Div => self.b.ins().fdiv(x, y),
                BinaryOp::Rem | BinaryOp::Pow | BinaryOp::Atan2 => lanewise(self)?,
                BinaryOp::Max => self.vfloat_max_min(x, y, true),
                BinaryOp::Min => self.vfloat_max_min(x, y, false),
                BinaryOp::And
                | BinaryOp::Or
                | BinaryOp::Xor
                | BinaryOp::ShiftLeft
                | BinaryOp::ShiftRightLogical => return Err(ill(name, dt)),
            },
            DType::I32 | DType::U32 => {
                let signed = dt == DType::I32;
                match op {
                    BinaryOp::Add => self.b.ins().iadd(x, y),
                    BinaryOp::Sub => self.b.ins().isub(x, y),
                    BinaryOp::Mul => self.b.ins().imul(x, y),
                    // No vector division on x86; Cranelift's vector shifts take one scalar amount.
                    BinaryOp::Div | BinaryOp::Rem | BinaryOp::ShiftLeft | BinaryOp::ShiftRightLogical => {
                        lanewise(self)?
                    }
                    BinaryOp::Max if signed => self.b.ins().smax(x, y),
                    BinaryOp::Max => self.b.ins().umax(x, y),
                    BinaryOp::Min if signed => self.b.ins().smin(x, y),
                    BinaryOp::Min => self.b.ins().umin(x, y),
                    BinaryOp::And => self.b.ins().band(x, y),
                    BinaryOp::Or => self.b.ins().bor(x, y),
                    BinaryOp::Xor => self.b.ins().bxor(x, y),
                    BinaryOp::Pow | BinaryOp::Atan2 => return Err(ill(name, dt)),
                }
            }
            DType::Bool => match op {
                BinaryOp::And | BinaryOp::Min => self.b.ins().band(x, y),
                BinaryOp::Or | BinaryOp::Max => self.b.ins().bor(x, y),
                BinaryOp::Xor => self.b.ins().bxor(x, y),
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

    /// A comparison of non-bool vectors, as a lane-width mask: the scalar condition codes, which
    /// Cranelift's `fcmp`/`icmp` apply lane by lane.
    pub(super) fn vcompare(&mut self, op: CompareOp, dt: DType, x: Value, y: Value) -> Value {
        scalar::compare(self, op, dt, x, y)
    }

    /// `convert_element_type` between same-width dtypes (bools are masks), as the scalar code.
    pub(super) fn vconvert(&mut self, from: DType, to: DType, x: Value) -> R<Value> {
        let ty = self.vty(to);
        Ok(match (from, to) {
            (a, b) if a == b => x,
            (DType::I32, DType::U32) | (DType::U32, DType::I32) => x,
            (DType::F32, DType::I32) => self.b.ins().fcvt_to_sint_sat(ty, x),
            (DType::F32, DType::U32) => self.b.ins().fcvt_to_uint_sat(ty, x),
            (DType::I32, DType::F32) => self.b.ins().fcvt_from_sint(ty, x),
            (DType::U32, DType::F32) => self.b.ins().fcvt_from_uint(ty, x),
            (DType::Bool, DType::F32 | DType::F64) => {
                let (one, zero) = (self.vfconst(to, 1.0), self.vfconst(to, 0.0));
                self.vselect(x, one, zero)
            }
            (DType::Bool, DType::I32 | DType::U32) => {
                let one = self.viconst(ty, 1);
                self.b.ins().band(x, one)
            }
            (DType::F32 | DType::F64, DType::Bool) => {
                // NaN is true, -0.0 false.
                let zero = self.vfconst(from, 0.0);
                self.b.ins().fcmp(FloatCC::NotEqual, x, zero)
            }
            (DType::I32 | DType::U32, DType::Bool) => {
                let zero = self.viconst(self.int_ty(x), 0);
                self.b.ins().icmp(IntCC::NotEqual, x, zero)
            }
            (DType::F32 | DType::F64 | DType::I32 | DType::U32 | DType::Bool, _) => {
                return Err(CompileError::unsupported(
                    "convert_element_type",
                    format!("{from} to {to} on the vector path (lane widths differ)"),
                ));
            }
        })
    }

    /// `bitcast_convert_type` between same-width dtypes.
    pub(super) fn vbitcast(&mut self, to: DType, x: Value) -> Value {
        let ty = self.vty(to);
        if self.b.func.dfg.value_type(x) == ty { x } else { self.b.ins().bitcast(ty, bits(), x) }
    }

    /// `iota` along the innermost axis: lanes `j, j+1, ...` converted to `dt` as the scalar code does.
    pub(super) fn viota(&mut self, dt: DType, j: Value) -> R<Value> {
        let lanes = self.lanes();
        Ok(match dt {
            DType::I32 | DType::U32 | DType::F32 => {
                let j32 = self.b.ins().ireduce(types::I32, j);
                let base = self.b.ins().splat(types::I32X4, j32);
                let steps: Vec<u8> = (0..4i32).flat_map(|k| k.to_le_bytes()).collect();
                let c = self.b.func.dfg.constants.insert(ConstantData::from(steps));
                let k = self.b.ins().vconst(types::I32X4, c);
                let v = self.b.ins().iadd(base, k);
                if dt == DType::F32 { self.b.ins().fcvt_from_sint(types::F32X4, v) } else { v }
            }
            DType::F64 => {
                // j and j + 1 are exact in f64 (indices are far below 2⁵³).
                let jf = self.b.ins().fcvt_from_sint(types::F64, j);
                let base = self.b.ins().splat(types::F64X2, jf);
                let steps: Vec<u8> = (0..lanes).flat_map(|k| (k as f64).to_le_bytes()).collect();
                let c = self.b.func.dfg.constants.insert(ConstantData::from(steps));
                let k = self.b.ins().vconst(types::F64X2, c);
                self.b.ins().fadd(base, k)
            }
            DType::Bool => return Err(ill("iota", dt)),
        })
    }

    /// `acc op x` lane by lane, as `scalar::reduce_combine` (first NaN kept, -0 below +0).
    pub(super) fn vcombine(&mut self, op: ReduceOp, dt: DType, acc: Value, x: Value) -> Value {
        match (dt, op) {
            (DType::F32 | DType::F64, ReduceOp::Sum) => self.b.ins().fadd(acc, x),
            (DType::F32 | DType::F64, ReduceOp::Prod) => self.b.ins().fmul(acc, x),
            (DType::F32 | DType::F64, ReduceOp::Max | ReduceOp::Min) => {
                let want_max = op == ReduceOp::Max;
                let acc_nan = self.b.ins().fcmp(FloatCC::Unordered, acc, acc);
                let x_ok = self.b.ins().fcmp(FloatCC::Ordered, x, x);
                let cc = if want_max { FloatCC::GreaterThan } else { FloatCC::LessThan };
                let strict = self.b.ins().fcmp(cc, acc, x);
                let eq = self.b.ins().fcmp(FloatCC::Equal, acc, x);
                let (an, xn) = (self.vsign_bit(acc), self.vsign_bit(x));
                // max: the tie fails only for (acc = -0, x = +0); min: only for (acc = +0, x = -0).
                let tie_fails =
                    if want_max { self.b.ins().band_not(an, xn) } else { self.b.ins().band_not(xn, an) };
                let tie = self.b.ins().band_not(eq, tie_fails);
                let ge = self.b.ins().bor(strict, tie);
                let keep_cmp = self.b.ins().band(x_ok, ge);
                let keep = self.b.ins().bor(acc_nan, keep_cmp);
                self.vselect(keep, acc, x)
            }
            (DType::I32 | DType::U32, ReduceOp::Sum) => self.b.ins().iadd(acc, x),
            (DType::I32 | DType::U32, ReduceOp::Prod) => self.b.ins().imul(acc, x),
            (DType::I32, ReduceOp::Max) => self.b.ins().smax(acc, x),
            (DType::I32, ReduceOp::Min) => self.b.ins().smin(acc, x),
            (DType::U32, ReduceOp::Max) => self.b.ins().umax(acc, x),
            (DType::U32, ReduceOp::Min) => self.b.ins().umin(acc, x),
            (DType::Bool, ReduceOp::Sum | ReduceOp::Max) => self.b.ins().bor(acc, x),
            (DType::Bool, ReduceOp::Prod | ReduceOp::Min) => self.b.ins().band(acc, x),
        }
    }
}
