//! Rows for the elementwise primitives, conversions, `iota` and `threefry2x32`.

use super::*;

pub fn unary(op: UnaryOp) -> Vec<Case> {
    let p = Prim::Unary(op);
    let fl = |name: &str, dims: &[usize], x: &[f64], want: &[f64]| floats(name, &p, dims, &[x], want);
    let one = |name: &str, x: Array, want: Array| vec![case1(name, p.clone(), vec![x], want)];
    match op {
        UnaryOp::Neg => [
            fl("zeros and infinities", &[5], &[1.5, -0.0, 0.0, INF, -INF], &[-1.5, 0.0, -0.0, -INF, INF]),
            fl("rank 0", &[], &[2.0], &[-2.0]),
            fl("rank 4", &[1, 2, 1, 2], &[1.0, -2.0, 3.0, -4.0], &[-1.0, 2.0, -3.0, 4.0]),
            fl("empty", &[2, 0, 3], &[], &[]),
            // -x flips only the sign bit, also of a NaN.
            one(
                "nan sign bit",
                f32s(&[1], &[f32::from_bits(0x7fc0_0001)]),
                f32s(&[1], &[f32::from_bits(0xffc0_0001)]),
            ),
            one("i32 wraps at MIN", i32s(&[3], &[i32::MIN, 1, 0]), i32s(&[3], &[i32::MIN, -1, 0])),
            // 2^32 - 5 = MAX - 4.
            one(
                "u32 wraps",
                u32s(&[2, 2], &[0, 1, 5, u32::MAX]),
                u32s(&[2, 2], &[0, u32::MAX, u32::MAX - 4, 1]),
            ),
        ]
        .concat(),
        UnaryOp::Abs => [
            fl("zeros, inf, nan", &[5], &[-0.0, -2.5, -INF, NAN, 3.0], &[0.0, 2.5, INF, NAN, 3.0]),
            fl("rank 3", &[2, 1, 2], &[-1.0, 1.0, -0.5, 0.5], &[1.0, 1.0, 0.5, 0.5]),
            fl("rank 0", &[], &[-0.0], &[0.0]),
            one(
                "i32 MIN stays MIN",
                i32s(&[2, 2], &[i32::MIN, -3, 0, 4]),
                i32s(&[2, 2], &[i32::MIN, 3, 0, 4]),
            ),
            one("u32 identity", u32s(&[], &[u32::MAX]), u32s(&[], &[u32::MAX])),
        ]
        .concat(),
        UnaryOp::Sign => [
            fl(
                "zeros keep their sign, nan stays",
                &[7],
                &[-0.0, 0.0, -3.0, 2.0, NAN, -INF, INF],
                &[-0.0, 0.0, -1.0, 1.0, NAN, -1.0, 1.0],
            ),
            fl("rank 0 tiny negative", &[], &[-1e-30], &[-1.0]),
            one("i32", i32s(&[4], &[-5, 0, 7, i32::MIN]), i32s(&[4], &[-1, 0, 1, -1])),
            one("u32 rank 2", u32s(&[2, 2], &[0, 9, u32::MAX, 1]), u32s(&[2, 2], &[0, 1, 1, 1])),
        ]
        .concat(),
        UnaryOp::Floor => [
            fl(
                "toward -inf",
                &[6],
                &[-1.5, -0.0, 2.75, -INF, NAN, -0.5],
                &[-2.0, -0.0, 2.0, -INF, NAN, -1.0],
            ),
            fl("rank 0", &[], &[0.5], &[0.0]),
            fl("rank 2", &[1, 2], &[3.0, -3.25], &[3.0, -4.0]),
        ]
        .concat(),
        UnaryOp::Ceil => [
            // ceil(-0.5) is -0.0.
            fl("toward +inf", &[5], &[-1.5, -0.5, 2.125, INF, NAN], &[-1.0, -0.0, 3.0, INF, NAN]),
            fl("rank 0", &[], &[0.0], &[0.0]),
            fl("rank 3", &[1, 1, 2], &[-0.0, 4.0], &[-0.0, 4.0]),
        ]
        .concat(),
        UnaryOp::Round => [
            fl(
                "half away from zero",
                &[7],
                &[0.5, -0.5, 1.5, 2.5, -2.5, -0.25, NAN],
                &[1.0, -1.0, 2.0, 3.0, -3.0, -0.0, NAN],
            ),
            fl("rank 0", &[], &[-0.0], &[-0.0]),
            fl("rank 2", &[2, 1], &[INF, 0.75], &[INF, 1.0]),
        ]
        .concat(),
        UnaryOp::RoundEven => [
            fl("half to even", &[6], &[0.5, -0.5, 1.5, 2.5, -2.5, 3.5], &[0.0, -0.0, 2.0, 2.0, -2.0, 4.0]),
            fl("rank 4", &[1, 1, 1, 2], &[-1.5, 0.25], &[-2.0, 0.0]),
            fl("rank 0", &[], &[-INF], &[-INF]),
        ]
        .concat(),
        UnaryOp::Exp => [
            fl("exact points", &[5], &[0.0, -0.0, -INF, INF, NAN], &[1.0, 1.0, 0.0, INF, NAN]),
            // e^-1000 underflows to 0 and e^1000 overflows, in f32 and in f64.
            fl("under/overflow rank 2", &[2, 1], &[-1000.0, 1000.0], &[0.0, INF]),
            // exp(1) correctly rounded is the f64 constant E.
            one("exp(1) f64 rank 0", f64s(&[], &[1.0]), f64s(&[], &[std::f64::consts::E])),
        ]
        .concat(),
        UnaryOp::Expm1 => [
            fl("exact points", &[5], &[0.0, -0.0, -INF, INF, NAN], &[0.0, -0.0, -1.0, INF, NAN]),
            // e^-100 - 1 rounds to -1 in both widths.
            fl("rank 3", &[1, 1, 1], &[-100.0], &[-1.0]),
        ]
        .concat(),
        UnaryOp::Log => [
            fl("exact points", &[6], &[1.0, 0.0, -0.0, -1.0, INF, NAN], &[0.0, -INF, -INF, NAN, INF, NAN]),
            fl("rank 2", &[2, 2], &[1.0, 0.0, INF, -INF], &[0.0, -INF, INF, NAN]),
            // Against std's ln on the same input.
            one("ln 2 rank 0 (std)", f64s(&[], &[2.0]), f64s(&[], &[2f64.ln()])),
        ]
        .concat(),
        UnaryOp::Log1p => [
            fl("exact points", &[6], &[0.0, -0.0, -1.0, INF, -2.0, NAN], &[0.0, -0.0, -INF, INF, NAN, NAN]),
            fl("rank 2", &[1, 2], &[0.0, -1.0], &[0.0, -INF]),
        ]
        .concat(),
        UnaryOp::Sqrt => [
            fl(
                "exact points, sqrt(-0) = -0",
                &[7],
                &[4.0, -0.0, 0.0, INF, -1.0, 2.25, NAN],
                &[2.0, -0.0, 0.0, INF, NAN, 1.5, NAN],
            ),
            fl("rank 0", &[], &[0.0625], &[0.25]),
            fl("rank 4", &[1, 1, 1, 2], &[9.0, 16.0], &[3.0, 4.0]),
            // IEEE sqrt is correctly rounded, and so are the SQRT_2 constants.
            one("sqrt 2 f32", f32s(&[1], &[2.0]), f32s(&[1], &[std::f32::consts::SQRT_2])),
            one("sqrt 2 f64", f64s(&[1], &[2.0]), f64s(&[1], &[std::f64::consts::SQRT_2])),
        ]
        .concat(),
        UnaryOp::Rsqrt => [
            // 1/sqrt(-0) = 1/-0 = -inf.
            fl("exact points", &[6], &[4.0, 0.0, -0.0, INF, 0.25, -1.0], &[0.5, INF, -INF, 0.0, 2.0, NAN]),
            fl("rank 2", &[2, 1], &[16.0, 64.0], &[0.25, 0.125]),
        ]
        .concat(),
        UnaryOp::Sin => [
            fl("exact points", &[5], &[0.0, -0.0, INF, -INF, NAN], &[0.0, -0.0, NAN, NAN, NAN]),
            fl("rank 2", &[1, 2], &[0.0, -0.0], &[0.0, -0.0]),
            // Against std's sin on the same input.
            one("sin 1 rank 0 (std)", f64s(&[], &[1.0]), f64s(&[], &[1f64.sin()])),
        ]
        .concat(),
        UnaryOp::Cos => [
            fl("exact points", &[4], &[0.0, -0.0, INF, NAN], &[1.0, 1.0, NAN, NAN]),
            fl("rank 3", &[1, 1, 2], &[0.0, -0.0], &[1.0, 1.0]),
            one("cos 1 rank 0 (std)", f64s(&[], &[1.0]), f64s(&[], &[1f64.cos()])),
        ]
        .concat(),
        UnaryOp::Tanh => [
            // tanh(30) = 1 - 2e^-60 rounds to 1 in both widths.
            fl(
                "exact points",
                &[7],
                &[0.0, -0.0, INF, -INF, 30.0, -30.0, NAN],
                &[0.0, -0.0, 1.0, -1.0, 1.0, -1.0, NAN],
            ),
            fl("rank 2", &[2, 1], &[INF, -0.0], &[1.0, -0.0]),
        ]
        .concat(),
        UnaryOp::Logistic => [
            fl("exact points", &[5], &[0.0, -0.0, INF, -INF, NAN], &[0.5, 0.5, 1.0, 0.0, NAN]),
            // 1/(1+e^-100) rounds to 1; e^-800 underflows to 0 (no inf/inf).
            fl("saturates, rank 2", &[2, 2], &[100.0, -800.0, 800.0, 0.0], &[1.0, 0.0, 1.0, 0.5]),
            fl("rank 0", &[], &[-0.0], &[0.5]),
        ]
        .concat(),
        UnaryOp::Erf => [
            fl("exact points", &[5], &[0.0, -0.0, INF, -INF, NAN], &[0.0, -0.0, 1.0, -1.0, NAN]),
            // erf(6) = 1 - 2e-17 rounds to 1 in both widths.
            fl("saturates, rank 2", &[1, 2], &[6.0, -6.0], &[1.0, -1.0]),
        ]
        .concat(),
        UnaryOp::ErfInv => [
            fl(
                "exact points",
                &[7],
                &[0.0, -0.0, 1.0, -1.0, 1.5, -1.5, NAN],
                &[0.0, -0.0, INF, -INF, NAN, NAN, NAN],
            ),
            fl("rank 3", &[1, 1, 1], &[1.0], &[INF]),
        ]
        .concat(),
        UnaryOp::IsFinite => [
            one(
                "f32",
                f32s(&[6], &[1.0, INF32, -INF32, NAN32, -0.0, f32::MAX]),
                bools(&[6], &[true, false, false, false, true, true]),
            ),
            one("f64 subnormal rank 0", f64s(&[], &[5e-324]), bools(&[], &[true])),
            one("f64 rank 2", f64s(&[2, 1], &[-INF, f64::MIN]), bools(&[2, 1], &[false, true])),
        ]
        .concat(),
        UnaryOp::Not => [
            one("bool", bools(&[2], &[true, false]), bools(&[2], &[false, true])),
            one("bool rank 0", bools(&[], &[false]), bools(&[], &[true])),
            // !x = -x - 1.
            one("i32 bitwise", i32s(&[3], &[0, -1, 5]), i32s(&[3], &[-1, 0, -6])),
            one(
                "u32 bitwise rank 2",
                u32s(&[1, 2], &[0, 0xf0f0_f0f0]),
                u32s(&[1, 2], &[u32::MAX, 0x0f0f_0f0f]),
            ),
        ]
        .concat(),
    }
}

pub fn binary(op: BinaryOp) -> Vec<Case> {
    let p = Prim::Binary(op);
    let fl = |name: &str, dims: &[usize], x: &[f64], y: &[f64], want: &[f64]| {
        floats(name, &p, dims, &[x, y], want)
    };
    let two = |name: &str, x: Array, y: Array, want: Array| vec![case1(name, p.clone(), vec![x, y], want)];
    match op {
        BinaryOp::Add => [
            fl(
                "zeros, inf, nan",
                &[6],
                &[1.5, -0.0, -0.0, INF, INF, NAN],
                &[2.25, -0.0, 0.0, -INF, 1.0, 1.0],
                &[3.75, -0.0, 0.0, NAN, INF, NAN],
            ),
            fl("rank 0", &[], &[0.5], &[0.25], &[0.75]),
            fl("rank 4", &[1, 2, 1, 1], &[1.0, 2.0], &[3.0, 4.0], &[4.0, 6.0]),
            fl("empty", &[0], &[], &[], &[]),
            two(
                "i32 wraps",
                i32s(&[3], &[i32::MAX, -3, i32::MIN]),
                i32s(&[3], &[1, 5, -1]),
                i32s(&[3], &[i32::MIN, 2, i32::MAX]),
            ),
            two(
                "u32 wraps rank 2",
                u32s(&[1, 2], &[u32::MAX, 3]),
                u32s(&[1, 2], &[2, 4]),
                u32s(&[1, 2], &[1, 7]),
            ),
        ]
        .concat(),
        BinaryOp::Sub => [
            // -0 - 0 = -0 but -0 - -0 = +0 (an exact zero difference is +0).
            fl(
                "zeros, inf",
                &[5],
                &[0.0, -0.0, -0.0, INF, 5.0],
                &[0.0, 0.0, -0.0, INF, 7.5],
                &[0.0, -0.0, 0.0, NAN, -2.5],
            ),
            fl("rank 3", &[1, 1, 2], &[1.0, 0.5], &[0.25, 2.0], &[0.75, -1.5]),
            two("i32 wraps", i32s(&[2], &[i32::MIN, 3]), i32s(&[2], &[1, 5]), i32s(&[2], &[i32::MAX, -2])),
            two("u32 wraps rank 0", u32s(&[], &[0]), u32s(&[], &[1]), u32s(&[], &[u32::MAX])),
        ]
        .concat(),
        BinaryOp::Mul => [
            fl(
                "zeros, inf, nan",
                &[5],
                &[-0.0, 0.0, -2.0, 3.0, NAN],
                &[3.0, INF, -1.5, -0.0, 0.0],
                &[-0.0, NAN, 3.0, -0.0, NAN],
            ),
            fl("rank 2", &[2, 1], &[0.5, -4.0], &[8.0, 0.25], &[4.0, -1.0]),
            two("f32 overflow", f32s(&[1], &[1e30]), f32s(&[1], &[1e30]), f32s(&[1], &[INF32])),
            two("f64 overflow", f64s(&[1], &[1e200]), f64s(&[1], &[-1e200]), f64s(&[1], &[-INF])),
            // 2^16 * 2^16 = 2^32 wraps to 0.
            two(
                "i32 wraps",
                i32s(&[3], &[65536, -3, i32::MIN]),
                i32s(&[3], &[65536, 4, -1]),
                i32s(&[3], &[0, -12, i32::MIN]),
            ),
            // (2^32 - 1)^2 = 2^64 - 2^33 + 1 = 1 mod 2^32.
            two("u32 wraps rank 0", u32s(&[], &[u32::MAX]), u32s(&[], &[u32::MAX]), u32s(&[], &[1])),
        ]
        .concat(),
        BinaryOp::Div => [
            fl(
                "by zero, signed zeros",
                &[6],
                &[1.0, -1.0, 0.0, 1.0, 7.0, -0.0],
                &[0.0, 0.0, 0.0, -0.0, 2.0, 5.0],
                &[INF, -INF, NAN, -INF, 3.5, -0.0],
            ),
            fl(
                "by infinities rank 2",
                &[2, 2],
                &[1.0, 1.0, 1.0, 1.0],
                &[4.0, -8.0, INF, -INF],
                &[0.25, -0.125, 0.0, -0.0],
            ),
            // Truncation toward zero; x/0 = -1; MIN/-1 = MIN.
            two(
                "i32 signs, zero, MIN/-1",
                i32s(&[8], &[-7, 7, -7, 7, 5, -5, i32::MIN, 0]),
                i32s(&[8], &[2, -2, -2, 2, 0, 0, -1, 0]),
                i32s(&[8], &[-3, -3, 3, 3, -1, -1, i32::MIN, -1]),
            ),
            two("i32 rank 0", i32s(&[], &[-9]), i32s(&[], &[4]), i32s(&[], &[-2])),
            two(
                "u32 by zero is all ones",
                u32s(&[3], &[7, 5, u32::MAX]),
                u32s(&[3], &[2, 0, 1]),
                u32s(&[3], &[3, u32::MAX, u32::MAX]),
            ),
        ]
        .concat(),
        BinaryOp::Rem => [
            // fmod: the result has the dividend's sign; -4 % 2 = -0.
            fl(
                "dividend's sign",
                &[8],
                &[5.5, -5.5, 5.5, -0.0, 1.0, INF, 3.0, -4.0],
                &[2.0, 2.0, -2.0, 1.0, 0.0, 1.0, INF, 2.0],
                &[1.5, -1.5, 1.5, -0.0, NAN, NAN, 3.0, -0.0],
            ),
            fl("rank 3", &[1, 2, 1], &[7.0, -7.0], &[2.5, 2.5], &[2.0, -2.0]),
            two(
                "i32 signs, zero, MIN%-1",
                i32s(&[6], &[-7, 7, -7, 7, 5, i32::MIN]),
                i32s(&[6], &[2, -2, -2, 2, 0, -1]),
                i32s(&[6], &[-1, 1, -1, 1, 5, 0]),
            ),
            two("u32 rank 2", u32s(&[2, 1], &[7, 9]), u32s(&[2, 1], &[3, 0]), u32s(&[2, 1], &[1, 9])),
        ]
        .concat(),
        BinaryOp::Pow => [
            // C pow: x^0 = 1 even for NaN, 1^y = 1 even for NaN, negative base with a non-integer
            // exponent is NaN, 0^-1 = inf, (-0)^3 = -0, (-0)^-1 = -inf.
            fl(
                "special cases",
                &[10],
                &[2.0, 0.0, NAN, 1.0, -8.0, 2.0, 0.0, -0.0, -2.0, -0.0],
                &[3.0, 0.0, 0.0, NAN, 0.5, -1.0, -1.0, 3.0, 2.0, -1.0],
                &[8.0, 1.0, 1.0, 1.0, NAN, 0.5, INF, -0.0, 4.0, -INF],
            ),
            fl("rank 0", &[], &[4.0], &[0.5], &[2.0]),
            fl("rank 2", &[1, 2], &[INF, 10.0], &[-1.0, 2.0], &[0.0, 100.0]),
        ]
        .concat(),
        BinaryOp::Max => [
            // NaN propagates from either side; +0 > -0.
            fl(
                "nan and signed zeros",
                &[6],
                &[NAN, 1.0, -0.0, 0.0, -INF, 2.0],
                &[1.0, NAN, 0.0, -0.0, 3.0, 1.0],
                &[NAN, NAN, 0.0, 0.0, 3.0, 2.0],
            ),
            fl("rank 4", &[1, 1, 1, 2], &[-0.0, -0.0], &[-0.0, -1.0], &[-0.0, -0.0]),
            two("i32", i32s(&[2], &[-5, 3]), i32s(&[2], &[3, -7]), i32s(&[2], &[3, 3])),
            two("u32 rank 0", u32s(&[], &[u32::MAX]), u32s(&[], &[1]), u32s(&[], &[u32::MAX])),
            two(
                "bool is or",
                bools(&[3], &[true, false, false]),
                bools(&[3], &[false, false, true]),
                bools(&[3], &[true, false, true]),
            ),
        ]
        .concat(),
        BinaryOp::Min => [
            fl(
                "nan and signed zeros",
                &[6],
                &[NAN, 1.0, -0.0, 0.0, -INF, 2.0],
                &[1.0, NAN, 0.0, -0.0, 3.0, 1.0],
                &[NAN, NAN, -0.0, -0.0, -INF, 1.0],
            ),
            fl("rank 4", &[1, 1, 1, 2], &[0.0, INF], &[0.0, 5.0], &[0.0, 5.0]),
            two("i32", i32s(&[2], &[-5, 3]), i32s(&[2], &[3, -7]), i32s(&[2], &[-5, -7])),
            two("u32 rank 0", u32s(&[], &[u32::MAX]), u32s(&[], &[1]), u32s(&[], &[1])),
            two(
                "bool is and",
                bools(&[3], &[true, false, true]),
                bools(&[3], &[false, false, true]),
                bools(&[3], &[false, false, true]),
            ),
        ]
        .concat(),
        BinaryOp::Atan2 => {
            // atan2(x, y) with the C99 Annex F special values; the constants are the correctly rounded
            // multiples of pi.
            let x = [0.0, -0.0, 0.0, -0.0, 1.0, INF, -1.0, NAN];
            let y = [1.0, 1.0, -1.0, -1.0, 0.0, INF, -0.0, 1.0];
            use std::{f32::consts as c32, f64::consts as c64};
            let x32 = x.map(|v| v as f32);
            let y32 = y.map(|v| v as f32);
            vec![
                case1(
                    "special values (f32)",
                    p.clone(),
                    vec![f32s(&[8], &x32), f32s(&[8], &y32)],
                    f32s(
                        &[8],
                        &[
                            0.0,
                            -0.0,
                            c32::PI,
                            -c32::PI,
                            c32::FRAC_PI_2,
                            c32::FRAC_PI_4,
                            -c32::FRAC_PI_2,
                            NAN32,
                        ],
                    ),
                ),
                case1(
                    "special values (f64) rank 2",
                    p.clone(),
                    vec![f64s(&[2, 4], &x), f64s(&[2, 4], &y)],
                    f64s(
                        &[2, 4],
                        &[0.0, -0.0, c64::PI, -c64::PI, c64::FRAC_PI_2, c64::FRAC_PI_4, -c64::FRAC_PI_2, NAN],
                    ),
                ),
                case1(
                    "rank 0",
                    p.clone(),
                    vec![f64s(&[], &[-0.0]), f64s(&[], &[-0.0])],
                    f64s(&[], &[-c64::PI]),
                ),
            ]
        }
        // -1 ^ 5 = !5 = -6; MIN ^ -1 = MAX.
        BinaryOp::And => logic(&p, [true, false, false, false], [8, 5, i32::MIN], [0x0f00_0f00, 1]),
        BinaryOp::Or => logic(&p, [true, true, true, false], [14, -1, -1], [0xfff0_fff0, 3]),
        BinaryOp::Xor => logic(&p, [false, true, true, false], [6, -6, i32::MAX], [0xf0f0_f0f0, 2]),
        BinaryOp::ShiftLeft => [
            // Amounts >= 32 and negative amounts (>= 32 as u32) give 0.
            two(
                "i32",
                i32s(&[7], &[1, 1, 1, 1, -1, 3, 5]),
                i32s(&[7], &[0, 31, 32, -1, 4, 33, 2]),
                i32s(&[7], &[1, i32::MIN, 0, 0, -16, 0, 20]),
            ),
            two(
                "u32 rank 2",
                u32s(&[2, 2], &[1, 5, 5, 0x8000_0001]),
                u32s(&[2, 2], &[31, 32, 100, 1]),
                u32s(&[2, 2], &[0x8000_0000, 0, 0, 2]),
            ),
            two("i32 rank 0", i32s(&[], &[3]), i32s(&[], &[3]), i32s(&[], &[24])),
        ]
        .concat(),
        BinaryOp::ShiftRightLogical => [
            // Zero fill: -1 >> 28 = 0xF; -16 >> 2 = 0x3FFF_FFFC = 1073741820; MIN >> 31 = 1.
            two(
                "i32 zero fill",
                i32s(&[6], &[-1, -16, 8, i32::MIN, 7, -1]),
                i32s(&[6], &[28, 2, 32, 31, -1, 0]),
                i32s(&[6], &[15, 1_073_741_820, 0, 1, 0, -1]),
            ),
            two(
                "u32 rank 2",
                u32s(&[2, 2], &[u32::MAX, 256, 256, 3]),
                u32s(&[2, 2], &[31, 4, 32, 1]),
                u32s(&[2, 2], &[1, 16, 0, 1]),
            ),
            two("u32 rank 0", u32s(&[], &[0x8000_0000]), u32s(&[], &[31]), u32s(&[], &[1])),
        ]
        .concat(),
    }
}

/// Rows of and/or/xor: `table` is the op on `[T,T,F,F]` and `[T,F,T,F]`, `ints` on i32
/// `[0b1100, -1, MIN]` and `[0b1010, 5, -1]`, `words` on u32 `[0xff00_ff00, 1]` and `[0x0ff0_0ff0, 3]`.
fn logic(p: &Prim, table: [bool; 4], ints: [i32; 3], words: [u32; 2]) -> Vec<Case> {
    let two = |name: &str, x: Array, y: Array, want: Array| case1(name, p.clone(), vec![x, y], want);
    vec![
        two(
            "bool truth table",
            bools(&[4], &[true, true, false, false]),
            bools(&[4], &[true, false, true, false]),
            bools(&[4], &table),
        ),
        // true op false is the table's second entry.
        two("bool rank 0", bools(&[], &[true]), bools(&[], &[false]), bools(&[], &[table[1]])),
        two("i32", i32s(&[3], &[0b1100, -1, i32::MIN]), i32s(&[3], &[0b1010, 5, -1]), i32s(&[3], &ints)),
        two(
            "u32 rank 2",
            u32s(&[1, 2], &[0xff00_ff00, 1]),
            u32s(&[1, 2], &[0x0ff0_0ff0, 3]),
            u32s(&[1, 2], &words),
        ),
    ]
}

pub fn compare(op: CompareOp) -> Vec<Case> {
    let p = Prim::Compare(op);
    // Each data set lists its results for [eq, ne, lt, le, gt, ge].
    let k = match op {
        CompareOp::Eq => 0,
        CompareOp::Ne => 1,
        CompareOp::Lt => 2,
        CompareOp::Le => 3,
        CompareOp::Gt => 4,
        CompareOp::Ge => 5,
    };
    let row = |name: &str, x: Array, y: Array, want: [&[bool]; 6]| {
        let dims = x.shape().dims().to_vec();
        case1(name, p.clone(), vec![x, y], bools(&dims, want[k]))
    };
    // Pairs (1,2), (NaN,NaN), (-0,0), (1,1), (-inf,NaN), (2,1).
    let fx = [1.0, NAN32, -0.0, 1.0, -INF32, 2.0];
    let fy = [2.0, NAN32, 0.0, 1.0, NAN32, 1.0];
    vec![
        row(
            "f32 ieee: nan unordered, -0 == 0",
            f32s(&[6], &fx),
            f32s(&[6], &fy),
            [
                &[false, false, true, true, false, false],
                &[true, true, false, false, true, true],
                &[true, false, false, false, false, false],
                &[true, false, true, true, false, false],
                &[false, false, false, false, false, true],
                &[false, false, true, true, false, true],
            ],
        ),
        // Pairs (-1,1), (5,5), (0,-3), (MIN,MAX).
        row(
            "i32 rank 2",
            i32s(&[2, 2], &[-1, 5, 0, i32::MIN]),
            i32s(&[2, 2], &[1, 5, -3, i32::MAX]),
            [
                &[false, true, false, false],
                &[true, false, true, true],
                &[true, false, false, true],
                &[true, true, false, true],
                &[false, false, true, false],
                &[false, true, true, false],
            ],
        ),
        // Unsigned: MAX > 0.
        row(
            "u32 rank 0",
            u32s(&[], &[u32::MAX]),
            u32s(&[], &[0]),
            [&[false], &[true], &[false], &[false], &[true], &[true]],
        ),
        // false < true: pairs (F,T), (T,T).
        row(
            "bool rank 3",
            bools(&[1, 1, 2], &[false, true]),
            bools(&[1, 1, 2], &[true, true]),
            [&[false, true], &[true, false], &[true, false], &[true, true], &[false, false], &[false, true]],
        ),
        row(
            "f64 rank 4 -0 vs 0",
            f64s(&[1, 1, 1, 1], &[-0.0]),
            f64s(&[1, 1, 1, 1], &[0.0]),
            [&[true], &[false], &[false], &[true], &[false], &[true]],
        ),
    ]
}

pub fn select() -> Vec<Case> {
    let p = || Prim::Select;
    vec![
        case1(
            "elementwise keeps -0 and nan",
            p(),
            vec![
                bools(&[4], &[false, false, true, true]),
                f32s(&[4], &[1.0, 2.0, 3.0, -0.0]),
                f32s(&[4], &[-0.0, NAN32, 6.0, 7.0]),
            ],
            f32s(&[4], &[-0.0, NAN32, 3.0, -0.0]),
        ),
        case1(
            "scalar true on rank 3",
            p(),
            vec![bools(&[], &[true]), i32s(&[2, 1, 2], &[1, 2, 3, 4]), i32s(&[2, 1, 2], &[5, 6, 7, 8])],
            i32s(&[2, 1, 2], &[1, 2, 3, 4]),
        ),
        case1(
            "scalar false on rank 3",
            p(),
            vec![bools(&[], &[false]), i32s(&[2, 1, 2], &[1, 2, 3, 4]), i32s(&[2, 1, 2], &[5, 6, 7, 8])],
            i32s(&[2, 1, 2], &[5, 6, 7, 8]),
        ),
        case1(
            "rank 0",
            p(),
            vec![bools(&[], &[false]), f64s(&[], &[1.0]), f64s(&[], &[2.0])],
            f64s(&[], &[2.0]),
        ),
        case1(
            "bool arms rank 2",
            p(),
            vec![
                bools(&[2, 2], &[true, false, false, true]),
                bools(&[2, 2], &[true; 4]),
                bools(&[2, 2], &[false; 4]),
            ],
            bools(&[2, 2], &[true, false, false, true]),
        ),
        case1(
            "u32 rank 4",
            p(),
            vec![
                bools(&[1, 1, 1, 2], &[true, false]),
                u32s(&[1, 1, 1, 2], &[1, 2]),
                u32s(&[1, 1, 1, 2], &[3, 4]),
            ],
            u32s(&[1, 1, 1, 2], &[1, 4]),
        ),
        case1("empty", p(), vec![bools(&[0], &[]), f32s(&[0], &[]), f32s(&[0], &[])], f32s(&[0], &[])),
    ]
}

pub fn clamp() -> Vec<Case> {
    let p = || Prim::Clamp;
    vec![
        // max(-0, 0) = +0; NaN propagates.
        case1(
            "scalar bounds, nan, -0",
            p(),
            vec![f32s(&[], &[0.0]), f32s(&[6], &[-1.0, 0.5, 2.0, NAN32, -0.0, INF32]), f32s(&[], &[1.0])],
            f32s(&[6], &[0.0, 0.5, 1.0, NAN32, 0.0, 1.0]),
        ),
        case1(
            "array bounds i32 rank 2",
            p(),
            vec![
                i32s(&[2, 2], &[0, 0, 5, -3]),
                i32s(&[2, 2], &[-4, 3, 7, -10]),
                i32s(&[2, 2], &[1, 2, 6, -1]),
            ],
            i32s(&[2, 2], &[0, 2, 6, -3]),
        ),
        // lo > hi: min(max(0, 2), 1) = 1.
        case1(
            "lo above hi rank 0",
            p(),
            vec![f64s(&[], &[2.0]), f64s(&[], &[0.0]), f64s(&[], &[1.0])],
            f64s(&[], &[1.0]),
        ),
        case1(
            "u32 scalar lo, array hi, rank 3",
            p(),
            vec![u32s(&[], &[2]), u32s(&[1, 2, 1], &[1, 9]), u32s(&[1, 2, 1], &[5, 5])],
            u32s(&[1, 2, 1], &[2, 5]),
        ),
        case1(
            "rank 4",
            p(),
            vec![f32s(&[], &[-1.0]), f32s(&[1, 1, 1, 2], &[-INF32, 0.25]), f32s(&[], &[1.0])],
            f32s(&[1, 1, 1, 2], &[-1.0, 0.25]),
        ),
    ]
}

pub fn convert() -> Vec<Case> {
    let p = |dtype| Prim::ConvertElementType { dtype };
    use DType::{Bool, F32, F64, I32, U32};
    vec![
        // Truncate toward zero, saturate, NaN -> 0.
        case1(
            "f32 -> i32",
            p(I32),
            vec![f32s(&[8], &[NAN32, INF32, -INF32, -2.7, 2.7, 3e9, -0.0, -2_147_483_648.0])],
            i32s(&[8], &[0, i32::MAX, i32::MIN, -2, 2, i32::MAX, 0, i32::MIN]),
        ),
        case1(
            "f32 -> u32",
            p(U32),
            vec![f32s(&[4], &[-1.5, 3.9, 5e9, NAN32])],
            u32s(&[4], &[0, 3, u32::MAX, 0]),
        ),
        case1("f64 -> i32 rank 0", p(I32), vec![f64s(&[], &[-1e300])], i32s(&[], &[i32::MIN])),
        // 2^24 + 1 ties to even 2^24; MAX = 2^31 - 1 rounds to 2^31.
        case1(
            "i32 -> f32 rounds to nearest",
            p(F32),
            vec![i32s(&[2, 2], &[16_777_217, -1, i32::MAX, 0])],
            f32s(&[2, 2], &[16_777_216.0, -1.0, 2_147_483_648.0, 0.0]),
        ),
        case1("u32 -> i32 keeps bits", p(I32), vec![u32s(&[2], &[u32::MAX, 7])], i32s(&[2], &[-1, 7])),
        case1("i32 -> u32 keeps bits rank 0", p(U32), vec![i32s(&[], &[-1])], u32s(&[], &[u32::MAX])),
        case1(
            "f64 -> f32 overflow, underflow, -0",
            p(F32),
            vec![f64s(&[6], &[1e40, -1e40, 1.5, -0.0, 1e-50, -1e-50])],
            f32s(&[6], &[INF32, -INF32, 1.5, -0.0, 0.0, -0.0]),
        ),
        // Widening is exact: 0.1f32 is 13421773 * 2^-27 (the division below is exact).
        case1(
            "f32 -> f64 rank 3",
            p(F64),
            vec![f32s(&[1, 1, 2], &[0.1, NAN32])],
            f64s(&[1, 1, 2], &[13_421_773.0 / 134_217_728.0, NAN]),
        ),
        case1(
            "f32 -> bool is x != 0",
            p(Bool),
            vec![f32s(&[4], &[0.0, -0.0, NAN32, 2.0])],
            bools(&[4], &[false, false, true, true]),
        ),
        case1("bool -> f32", p(F32), vec![bools(&[2], &[true, false])], f32s(&[2], &[1.0, 0.0])),
        case1("bool -> i32 rank 0", p(I32), vec![bools(&[], &[true])], i32s(&[], &[1])),
        case1("i32 -> bool", p(Bool), vec![i32s(&[2], &[0, -5])], bools(&[2], &[false, true])),
        case1("u32 -> f64 exact", p(F64), vec![u32s(&[1], &[u32::MAX])], f64s(&[1], &[4_294_967_295.0])),
        case1(
            "f32 -> f32 rank 4 keeps -0",
            p(F32),
            vec![f32s(&[1, 1, 1, 1], &[-0.0])],
            f32s(&[1, 1, 1, 1], &[-0.0]),
        ),
    ]
}

pub fn bitcast() -> Vec<Case> {
    let p = |dtype| Prim::BitcastConvertType { dtype };
    use DType::{F32, F64, I32, U32};
    let nan_payload = f32::from_bits(0x7fc0_0001);
    vec![
        case1(
            "f32 -> u32",
            p(U32),
            vec![f32s(&[4], &[1.0, -0.0, INF32, -2.0])],
            u32s(&[4], &[0x3f80_0000, 0x8000_0000, 0x7f80_0000, 0xc000_0000]),
        ),
        // A NaN with a payload survives (compared bit for bit: it is not the canonical NaN).
        case1(
            "u32 -> f32 nan payload rank 0",
            p(F32),
            vec![u32s(&[], &[0x7fc0_0001])],
            f32s(&[], &[nan_payload]),
        ),
        case1(
            "i32 -> f32 rank 2",
            p(F32),
            vec![i32s(&[2, 2], &[0, -1, 0x7f80_0000, i32::MIN])],
            f32s(&[2, 2], &[0.0, f32::from_bits(u32::MAX), INF32, -0.0]),
        ),
        // 0xC000_0000 as i32 = -2^30.
        case1("f32 -> i32", p(I32), vec![f32s(&[1], &[-2.0])], i32s(&[1], &[-1_073_741_824])),
        case1("u32 -> i32", p(I32), vec![u32s(&[1], &[u32::MAX])], i32s(&[1], &[-1])),
        case1(
            "f64 -> f64 rank 3",
            p(F64),
            vec![f64s(&[1, 2, 1], &[-0.0, f64::from_bits(0x7ff0_0000_0000_0001)])],
            f64s(&[1, 2, 1], &[-0.0, f64::from_bits(0x7ff0_0000_0000_0001)]),
        ),
    ]
}

pub fn iota() -> Vec<Case> {
    let p = |dtype, dims: &[usize], dimension| Prim::Iota { dtype, shape: dims.into(), dimension };
    use DType::{F32, F64, I32, U32};
    vec![
        case1("i32 rank 1", p(I32, &[3], 0), vec![], i32s(&[3], &[0, 1, 2])),
        // Element [i, j, k] is j.
        case1(
            "f32 rank 3 middle dimension",
            p(F32, &[2, 3, 2], 1),
            vec![],
            f32s(&[2, 3, 2], &[0.0, 0.0, 1.0, 1.0, 2.0, 2.0, 0.0, 0.0, 1.0, 1.0, 2.0, 2.0]),
        ),
        case1("u32 rank 2 dimension 0", p(U32, &[2, 2], 0), vec![], u32s(&[2, 2], &[0, 0, 1, 1])),
        case1(
            "f64 rank 4 last dimension",
            p(F64, &[1, 2, 1, 2], 3),
            vec![],
            f64s(&[1, 2, 1, 2], &[0.0, 1.0, 0.0, 1.0]),
        ),
        case1("empty", p(I32, &[0, 2], 1), vec![], i32s(&[0, 2], &[])),
    ]
}

/// A known answer: `(key, counter, output)`.
type Kat = ([u32; 2], [u32; 2], [u32; 2]);

pub fn threefry2x32() -> Vec<Case> {
    let p = || Prim::Threefry2x32;
    // Random123's known-answer vectors for threefry2x32_20: (key, counter) -> output.
    let zeros = ([0, 0], [0, 0], [0x6b20_0159, 0x99ba_4efe]);
    let ones = ([u32::MAX; 2], [u32::MAX; 2], [0x1cb9_96fc, 0xbb00_2be7]);
    let pi = ([0x1319_8a2e, 0x0370_7344], [0x243f_6a88, 0x85a3_08d3], [0xc492_3a9c, 0x483d_f7a0]);
    let lanes = |name: &str, dims: &[usize], vs: &[Kat]| {
        let col = |f: &dyn Fn(&Kat) -> u32| u32s(dims, &vs.iter().map(f).collect::<Vec<_>>());
        case(
            name,
            p(),
            vec![col(&|v| v.0[0]), col(&|v| v.0[1]), col(&|v| v.1[0]), col(&|v| v.1[1])],
            vec![col(&|v| v.2[0]), col(&|v| v.2[1])],
        )
    };
    vec![
        lanes("zeros rank 0", &[], &[zeros]),
        lanes("three vectors rank 1", &[3], &[ones, pi, zeros]),
        lanes("rank 2", &[2, 2], &[zeros, ones, pi, zeros]),
        lanes("empty", &[0], &[]),
    ]
}
