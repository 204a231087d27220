//! Rows for the reductions, arg-reductions, prefix scans, sort and `dot_general`.

use super::*;

pub fn reduce(op: ReduceOp) -> Vec<Case> {
    let p = |axes: &[usize]| Prim::Reduce { op, axes: axes.to_vec() };
    let r = |name: &str, axes: &[usize], x: Array, want: Array| case1(name, p(axes), vec![x], want);
    let m = || f32s(&[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    match op {
        ReduceOp::Sum => vec![
            r("rank 2 inner", &[1], m(), f32s(&[2], &[6.0, 15.0])),
            r("rank 2 outer", &[0], m(), f32s(&[3], &[5.0, 7.0, 9.0])),
            r("rank 2 all", &[0, 1], m(), f32s(&[], &[21.0])),
            r("no axes", &[], m(), m()),
            r("rank 0", &[], f64s(&[], &[2.5]), f64s(&[], &[2.5])),
            // Even over no axes each result is folded from the identity +0 (reduce.rs's documented
            // choice, XLA's unoptimized reduce), so -0 becomes +0.
            r("rank 0 -0 folds to +0", &[], f64s(&[], &[-0.0]), f64s(&[], &[0.0])),
            r("empty gives 0", &[0], f32s(&[0, 2], &[]), f32s(&[2], &[0.0, 0.0])),
            // The accumulator starts at +0, and +0 + -0 = +0.
            r("sum of -0 is +0", &[0], f32s(&[2], &[-0.0, -0.0]), f32s(&[], &[0.0])),
            r(
                "nan and inf - inf",
                &[1],
                f32s(&[2, 2], &[1.0, NAN32, INF32, -INF32]),
                f32s(&[2], &[NAN32, NAN32]),
            ),
            r("i32 wraps", &[0], i32s(&[2], &[i32::MAX, 1]), i32s(&[], &[i32::MIN])),
            // MAX + 1 + 5 = 2^32 + 5 = 5 mod 2^32.
            r("u32 wraps", &[0], u32s(&[3], &[u32::MAX, 1, 5]), u32s(&[], &[5])),
            // Everything of 0..4: 6.
            r("rank 4 two axes", &[1, 3], f32_iota(&[1, 2, 1, 2]), f32s(&[1, 1], &[6.0])),
            // Keep axis 1: j = 0 sums 0, 1, 4, 5; j = 1 sums 2, 3, 6, 7.
            r("rank 3 axes in any order", &[2, 0], i32_iota(&[2, 2, 2]), i32s(&[2], &[10, 18])),
        ],
        ReduceOp::Max => vec![
            r(
                "nan propagates, +0 above -0",
                &[1],
                f32s(&[2, 3], &[1.0, NAN32, 3.0, -0.0, 0.0, -INF32]),
                f32s(&[2], &[NAN32, 0.0]),
            ),
            r("empty f32 is -inf", &[0], f32s(&[0], &[]), f32s(&[], &[-INF32])),
            r("empty i32 is MIN", &[0], i32s(&[0], &[]), i32s(&[], &[i32::MIN])),
            r("empty u32 is 0", &[1], u32s(&[2, 0], &[]), u32s(&[2], &[0, 0])),
            r("all -0", &[0], f64s(&[2], &[-0.0, -0.0]), f64s(&[], &[-0.0])),
            r("bool", &[1], bools(&[2, 2], &[true, false, false, false]), bools(&[2], &[true, false])),
            r("rank 3 two axes", &[0, 1], i32_iota(&[2, 2, 2]), i32s(&[2], &[6, 7])),
            r("rank 0", &[], f64s(&[], &[NAN]), f64s(&[], &[NAN])),
            r("rank 4 all", &[0, 1, 2, 3], f32s(&[1, 1, 2, 2], &[1.0, -3.0, 5.0, 2.0]), f32s(&[], &[5.0])),
        ],
        ReduceOp::Min => vec![
            r(
                "nan propagates, -0 below +0",
                &[1],
                f32s(&[2, 3], &[1.0, NAN32, 3.0, 0.0, -0.0, INF32]),
                f32s(&[2], &[NAN32, -0.0]),
            ),
            r("empty f32 is +inf", &[0], f32s(&[0], &[]), f32s(&[], &[INF32])),
            r("empty i32 is MAX", &[0], i32s(&[0], &[]), i32s(&[], &[i32::MAX])),
            r("empty u32 is MAX", &[0], u32s(&[0], &[]), u32s(&[], &[u32::MAX])),
            r("empty bool is true", &[0], bools(&[0], &[]), bools(&[], &[true])),
            r("bool", &[0], bools(&[2], &[false, true]), bools(&[], &[false])),
            r("rank 3", &[2], i32_iota(&[2, 1, 2]), i32s(&[2, 1], &[0, 2])),
            r("rank 0", &[], i32s(&[], &[-4]), i32s(&[], &[-4])),
            r("rank 4 all", &[0, 1, 2, 3], f64s(&[1, 2, 1, 1], &[-1.0, -INF]), f64s(&[], &[-INF])),
        ],
        ReduceOp::Prod => vec![
            r("rank 2 inner", &[1], m(), f32s(&[2], &[6.0, 120.0])),
            r("rank 2 all", &[0, 1], m(), f32s(&[], &[720.0])),
            r("empty gives 1", &[0], f32s(&[0], &[]), f32s(&[], &[1.0])),
            // 2^16 * 2^16 wraps to 0.
            r("i32 wraps", &[0], i32s(&[2], &[65536, 65536]), i32s(&[], &[0])),
            r("i32 signs", &[0], i32s(&[2], &[-2, 3]), i32s(&[], &[-6])),
            // 1 * -0 = -0, * 2 = -0.
            r("-0 kept", &[0], f32s(&[2], &[-0.0, 2.0]), f32s(&[], &[-0.0])),
            r("0 * inf", &[0], f64s(&[2], &[0.0, INF]), f64s(&[], &[NAN])),
            r("rank 0", &[], u32s(&[], &[9]), u32s(&[], &[9])),
            // 0 * 1 * 2 * 3 = 0 and 4 * 5 * 6 * 7 = 840 (keep axis 0 of [2, 1, 2, 2]).
            r("rank 4", &[1, 2, 3], i32_iota(&[2, 1, 2, 2]), i32s(&[2], &[0, 840])),
        ],
    }
}

pub fn arg_reduce(op: ArgOp) -> Vec<Case> {
    let p = |axis, index_dtype| Prim::ArgReduce { op, axis, index_dtype };
    let r = |name: &str, axis: usize, x: Array, want: Array| {
        let d = want.dtype();
        case1(name, p(axis, d), vec![x], want)
    };
    match op {
        ArgOp::Max => vec![
            // Row 0: first of the equal maxima; row 1: the first NaN.
            r(
                "first max, first nan",
                1,
                f32s(&[2, 3], &[1.0, 3.0, 3.0, NAN32, 5.0, NAN32]),
                i32s(&[2], &[1, 0]),
            ),
            // Columns (1, NaN), (3, 5), (3, NaN).
            r("axis 0", 0, f32s(&[2, 3], &[1.0, 3.0, 3.0, NAN32, 5.0, NAN32]), i32s(&[3], &[1, 1, 1])),
            r("u32 indices", 0, f32s(&[3], &[2.0, 7.0, 7.0]), u32s(&[], &[1])),
            // -0 and +0 compare equal: the first wins.
            r("signed zeros tie", 0, f32s(&[2], &[-0.0, 0.0]), i32s(&[], &[0])),
            r("all -inf", 0, f64s(&[2], &[-INF, -INF]), i32s(&[], &[0])),
            r("nan after the max", 0, f32s(&[4], &[1.0, 5.0, NAN32, NAN32]), i32s(&[], &[2])),
            r("i32 rank 3", 2, i32s(&[2, 1, 2], &[3, 4, 9, -1]), i32s(&[2, 1], &[1, 0])),
            r("u32 data", 0, u32s(&[3], &[0, u32::MAX, 1]), i32s(&[], &[1])),
            r("rank 4", 3, f64s(&[1, 1, 1, 3], &[0.5, 2.5, 2.5]), u32s(&[1, 1, 1], &[1])),
        ],
        ArgOp::Min => vec![
            // Row 1: the NaN wins although -inf comes later.
            r(
                "first min, first nan",
                1,
                f32s(&[2, 3], &[3.0, 1.0, 1.0, 5.0, NAN32, -INF32]),
                i32s(&[2], &[1, 1]),
            ),
            // Columns (3, 5), (1, NaN), (1, -inf).
            r("axis 0", 0, f32s(&[2, 3], &[3.0, 1.0, 1.0, 5.0, NAN32, -INF32]), i32s(&[3], &[0, 1, 1])),
            r("signed zeros tie", 0, f32s(&[2], &[0.0, -0.0]), i32s(&[], &[0])),
            r("u32 data, u32 indices", 0, u32s(&[3], &[7, 0, 0]), u32s(&[], &[1])),
            r("i32 rank 3", 2, i32s(&[2, 1, 2], &[3, 4, 9, -1]), i32s(&[2, 1], &[0, 1])),
            r("rank 4", 3, f64s(&[1, 1, 1, 3], &[2.5, 0.5, 0.5]), i32s(&[1, 1, 1], &[1])),
        ],
    }
}

pub fn cumulative(op: CumulativeOp) -> Vec<Case> {
    let p = |axis, reverse| Prim::Cumulative { op, axis, reverse };
    let fwd = |name: &str, axis: usize, x: Array, want: Array| case1(name, p(axis, false), vec![x], want);
    let rev = |name: &str, axis: usize, x: Array, want: Array| case1(name, p(axis, true), vec![x], want);
    let four = || f32s(&[4], &[1.0, 2.0, 3.0, 4.0]);
    let m = || i32s(&[2, 2], &[1, 2, 3, 4]);
    match op {
        CumulativeOp::Sum => vec![
            fwd("forward", 0, four(), f32s(&[4], &[1.0, 3.0, 6.0, 10.0])),
            rev("reverse", 0, four(), f32s(&[4], &[10.0, 9.0, 7.0, 4.0])),
            fwd("rank 2 axis 0", 0, m(), i32s(&[2, 2], &[1, 2, 4, 6])),
            rev("rank 2 axis 1 reverse", 1, m(), i32s(&[2, 2], &[3, 2, 7, 4])),
            fwd("i32 wraps", 0, i32s(&[2], &[i32::MAX, 1]), i32s(&[2], &[i32::MAX, i32::MIN])),
            fwd("nan propagates", 0, f64s(&[3], &[1.0, NAN, 2.0]), f64s(&[3], &[1.0, NAN, NAN])),
            fwd("empty", 0, f32s(&[0], &[]), f32s(&[0], &[])),
            // x[0, j, k] = 2j + k along j: [0, 1], [0+2, 1+3].
            fwd("rank 3", 1, i32_iota(&[1, 2, 2]), i32s(&[1, 2, 2], &[0, 1, 2, 4])),
            rev(
                "rank 4 reverse",
                3,
                f32s(&[1, 1, 2, 2], &[1.0, 2.0, 3.0, 4.0]),
                f32s(&[1, 1, 2, 2], &[3.0, 2.0, 7.0, 4.0]),
            ),
        ],
        CumulativeOp::Prod => vec![
            fwd("forward", 0, four(), f32s(&[4], &[1.0, 2.0, 6.0, 24.0])),
            rev("reverse", 0, four(), f32s(&[4], &[24.0, 24.0, 12.0, 4.0])),
            fwd("i32 wraps", 0, i32s(&[3], &[65536, 65536, 3]), i32s(&[3], &[65536, 0, 0])),
            fwd("rank 2 axis 0", 0, m(), i32s(&[2, 2], &[1, 2, 3, 8])),
            rev(
                "rank 3 reverse",
                2,
                f64s(&[1, 1, 3], &[2.0, -0.5, 4.0]),
                f64s(&[1, 1, 3], &[-4.0, -2.0, 4.0]),
            ),
        ],
        CumulativeOp::Max => vec![
            fwd(
                "nan propagates",
                0,
                f32s(&[5], &[1.0, 3.0, 2.0, NAN32, 5.0]),
                f32s(&[5], &[1.0, 3.0, 3.0, NAN32, NAN32]),
            ),
            rev(
                "reverse",
                0,
                f32s(&[5], &[1.0, 3.0, 2.0, NAN32, 5.0]),
                f32s(&[5], &[NAN32, NAN32, NAN32, NAN32, 5.0]),
            ),
            fwd("bool", 0, bools(&[3], &[false, true, false]), bools(&[3], &[false, true, true])),
            fwd("i32 rank 2 axis 1", 1, i32s(&[2, 2], &[1, -1, -5, 7]), i32s(&[2, 2], &[1, 1, -5, 7])),
            rev("rank 4 reverse", 2, u32s(&[1, 1, 3, 1], &[1, 0, 2]), u32s(&[1, 1, 3, 1], &[2, 2, 2])),
        ],
        CumulativeOp::Min => vec![
            fwd(
                "nan propagates",
                0,
                f32s(&[5], &[3.0, 1.0, 2.0, NAN32, 0.0]),
                f32s(&[5], &[3.0, 1.0, 1.0, NAN32, NAN32]),
            ),
            rev(
                "reverse",
                0,
                f32s(&[5], &[3.0, 1.0, 2.0, NAN32, 0.0]),
                f32s(&[5], &[NAN32, NAN32, NAN32, NAN32, 0.0]),
            ),
            fwd("u32 rank 2 axis 0", 0, u32s(&[2, 2], &[5, 1, 2, 9]), u32s(&[2, 2], &[5, 1, 2, 1])),
            rev("bool reverse", 0, bools(&[3], &[false, true, true]), bools(&[3], &[false, true, true])),
            fwd("rank 3", 2, i32s(&[1, 1, 3], &[4, 6, -2]), i32s(&[1, 1, 3], &[4, 4, -2])),
        ],
    }
}

pub fn sort() -> Vec<Case> {
    let p = |dimension, num_keys| Prim::Sort { dimension, num_keys };
    let neg_nan = f32::from_bits(0xffc0_0000);
    vec![
        // NaN last; -0 and +0 equal, so they keep their input order.
        case(
            "floats, nan last, zeros stable",
            p(0, 1),
            vec![f32s(&[6], &[3.0, NAN32, 0.0, -INF32, -0.0, 1.0])],
            vec![f32s(&[6], &[-INF32, 0.0, -0.0, 1.0, 3.0, NAN32])],
        ),
        case("-0 before +0 stays", p(0, 1), vec![f32s(&[2], &[-0.0, 0.0])], vec![f32s(&[2], &[-0.0, 0.0])]),
        // A negative NaN also sorts last, its bits unchanged.
        case(
            "negative nan last",
            p(0, 1),
            vec![f32s(&[2], &[neg_nan, 1.0])],
            vec![f32s(&[2], &[1.0, neg_nan])],
        ),
        case(
            "one key with a payload, stable",
            p(0, 1),
            vec![i32s(&[4], &[2, 1, 2, 1]), f32s(&[4], &[0.0, 1.0, 2.0, 3.0])],
            vec![i32s(&[4], &[1, 1, 2, 2]), f32s(&[4], &[1.0, 3.0, 0.0, 2.0])],
        ),
        // Keys (1,3), (0,3), (1,2), (0,2) order as (0,2) (0,3) (1,2) (1,3).
        case(
            "two keys",
            p(0, 2),
            vec![i32s(&[4], &[1, 0, 1, 0]), f32s(&[4], &[3.0, 3.0, 2.0, 2.0]), u32s(&[4], &[10, 11, 12, 13])],
            vec![i32s(&[4], &[0, 0, 1, 1]), f32s(&[4], &[2.0, 3.0, 2.0, 3.0]), u32s(&[4], &[13, 11, 12, 10])],
        ),
        case(
            "two keys tied, stable",
            p(0, 2),
            vec![i32s(&[3], &[1, 1, 0]), i32s(&[3], &[5, 5, 5]), i32s(&[3], &[0, 1, 2])],
            vec![i32s(&[3], &[0, 1, 1]), i32s(&[3], &[5, 5, 5]), i32s(&[3], &[2, 0, 1])],
        ),
        case(
            "rank 2 dimension 1",
            p(1, 1),
            vec![i32s(&[2, 3], &[3, 1, 2, 0, -1, 5])],
            vec![i32s(&[2, 3], &[1, 2, 3, -1, 0, 5])],
        ),
        case(
            "rank 2 dimension 0",
            p(0, 1),
            vec![i32s(&[2, 3], &[3, 1, 2, 0, -1, 5])],
            vec![i32s(&[2, 3], &[0, -1, 2, 3, 1, 5])],
        ),
        case(
            "u32 unsigned order",
            p(0, 1),
            vec![u32s(&[3], &[u32::MAX, 0, 7])],
            vec![u32s(&[3], &[0, 7, u32::MAX])],
        ),
        case(
            "bool",
            p(0, 1),
            vec![bools(&[3], &[true, false, true])],
            vec![bools(&[3], &[false, true, true])],
        ),
        case(
            "rank 3",
            p(1, 1),
            vec![f64s(&[1, 3, 1], &[2.0, -1.0, NAN])],
            vec![f64s(&[1, 3, 1], &[-1.0, 2.0, NAN])],
        ),
        case(
            "rank 4 last dimension",
            p(3, 1),
            vec![f32s(&[1, 1, 2, 2], &[4.0, 3.0, 2.0, 1.0])],
            vec![f32s(&[1, 1, 2, 2], &[3.0, 4.0, 1.0, 2.0])],
        ),
        case("empty", p(1, 1), vec![f32s(&[2, 0], &[])], vec![f32s(&[2, 0], &[])]),
    ]
}

pub fn dot_general() -> Vec<Case> {
    // (lhs_contracting, rhs_contracting), (lhs_batch, rhs_batch).
    let p = |c: (&[usize], &[usize]), b: (&[usize], &[usize]), preferred| Prim::DotGeneral {
        lhs_contracting: c.0.to_vec(),
        rhs_contracting: c.1.to_vec(),
        lhs_batch: b.0.to_vec(),
        rhs_batch: b.1.to_vec(),
        preferred_element_type: preferred,
    };
    let none: (&[usize], &[usize]) = (&[], &[]);
    let a = || f32s(&[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    vec![
        // [1,2,3]·[7,9,11] = 58, [1,2,3]·[8,10,12] = 64, [4,5,6]·[7,9,11] = 139, [4,5,6]·[8,10,12] = 154.
        case1(
            "matmul",
            p((&[1], &[0]), none, None),
            vec![a(), f32s(&[3, 2], &[7.0, 8.0, 9.0, 10.0, 11.0, 12.0])],
            f32s(&[2, 2], &[58.0, 64.0, 139.0, 154.0]),
        ),
        // [1-3, 4-6].
        case1(
            "matvec",
            p((&[1], &[0]), none, None),
            vec![a(), f32s(&[3], &[1.0, 0.0, -1.0])],
            f32s(&[2], &[-2.0, -2.0]),
        ),
        // 4 + 10 + 18.
        case1(
            "vector dot to rank 0",
            p((&[0], &[0]), none, None),
            vec![f64s(&[3], &[1.0, 2.0, 3.0]), f64s(&[3], &[4.0, 5.0, 6.0])],
            f64s(&[], &[32.0]),
        ),
        case1(
            "scalars",
            p(none, none, None),
            vec![f64s(&[], &[3.0]), f64s(&[], &[-4.0])],
            f64s(&[], &[-12.0]),
        ),
        // [1,2]·[3,4] = 11 and [5,6]·[7,8] = 83.
        case1(
            "batch matmul",
            p((&[2], &[1]), (&[0], &[0]), None),
            vec![f32s(&[2, 1, 2], &[1.0, 2.0, 5.0, 6.0]), f32s(&[2, 2, 1], &[3.0, 4.0, 7.0, 8.0])],
            f32s(&[2, 1, 1], &[11.0, 83.0]),
        ),
        // 1*5 + 2*6 + 3*7 + 4*8 = 70.
        case1(
            "two contracting dims",
            p((&[0, 1], &[0, 1]), none, None),
            vec![f32s(&[2, 2], &[1.0, 2.0, 3.0, 4.0]), f32s(&[2, 2], &[5.0, 6.0, 7.0, 8.0])],
            f32s(&[], &[70.0]),
        ),
        // Pairs lhs [i, j] with rhs [j, i]: 1*5 + 2*7 + 3*6 + 4*8 = 69.
        case1(
            "two contracting dims crossed",
            p((&[0, 1], &[1, 0]), none, None),
            vec![f32s(&[2, 2], &[1.0, 2.0, 3.0, 4.0]), f32s(&[2, 2], &[5.0, 6.0, 7.0, 8.0])],
            f32s(&[], &[69.0]),
        ),
        case1(
            "outer product",
            p(none, none, None),
            vec![f32s(&[2], &[1.0, 2.0]), f32s(&[3], &[3.0, 4.0, 5.0])],
            f32s(&[2, 3], &[3.0, 4.0, 5.0, 6.0, 8.0, 10.0]),
        ),
        // Columns of [[1,2],[3,4],[5,6]] summed: 9, 12.
        case1(
            "contract the lhs's first dim",
            p((&[0], &[0]), none, None),
            vec![f32s(&[3, 2], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]), f32s(&[3], &[1.0, 1.0, 1.0])],
            f32s(&[2], &[9.0, 12.0]),
        ),
        // out[b, i, 0] = L[i, b] * R[b, 0]: b = 0: 1*5, 3*5; b = 1: 2*6, 4*6.
        case1(
            "batch dim not leading, no contraction",
            p(none, (&[1], &[0]), None),
            vec![f32s(&[2, 2], &[1.0, 2.0, 3.0, 4.0]), f32s(&[2, 1], &[5.0, 6.0])],
            f32s(&[2, 2, 1], &[5.0, 15.0, 12.0, 24.0]),
        ),
        // [[1,2],[3,4]] x [[5,6],[7,8]] = [[19,22],[43,50]].
        case1(
            "rank 4 two batch dims",
            p((&[3], &[2]), (&[0, 1], &[0, 1]), None),
            vec![f64s(&[1, 1, 2, 2], &[1.0, 2.0, 3.0, 4.0]), f64s(&[1, 1, 2, 2], &[5.0, 6.0, 7.0, 8.0])],
            f64s(&[1, 1, 2, 2], &[19.0, 22.0, 43.0, 50.0]),
        ),
        case1(
            "preferred f32 from i32",
            p((&[0], &[0]), none, Some(DType::F32)),
            vec![i32s(&[2], &[1, 2]), i32s(&[2], &[3, 4])],
            f32s(&[], &[11.0]),
        ),
        case1(
            "preferred f64 from f32",
            p((&[0], &[0]), none, Some(DType::F64)),
            vec![f32s(&[1], &[1.5]), f32s(&[1], &[2.0])],
            f64s(&[], &[3.0]),
        ),
        case1(
            "preferred equal to the operands'",
            p((&[0], &[0]), none, Some(DType::I32)),
            vec![i32s(&[2], &[-1, 2]), i32s(&[2], &[3, 4])],
            i32s(&[], &[5]),
        ),
        // 2^16 * 2^16 wraps to 0.
        case1(
            "i32 wraps",
            p((&[0], &[0]), none, None),
            vec![i32s(&[1], &[65536]), i32s(&[1], &[65536])],
            i32s(&[], &[0]),
        ),
        case1(
            "u32",
            p((&[1], &[0]), none, None),
            vec![u32s(&[1, 2], &[2, 3]), u32s(&[2], &[u32::MAX, 1])],
            // 2 * (2^32 - 1) + 3 = 2^33 + 1 = 1 mod 2^32.
            u32s(&[1], &[1]),
        ),
        case1(
            "empty contraction gives zeros",
            p((&[1], &[0]), none, None),
            vec![f32s(&[2, 0], &[]), f32s(&[0, 3], &[])],
            f32s(&[2, 3], &[0.0; 6]),
        ),
        case1(
            "nan and inf * 0",
            p((&[1], &[0]), none, None),
            vec![f32s(&[2, 2], &[NAN32, 1.0, INF32, 1.0]), f32s(&[2], &[0.0, 1.0])],
            f32s(&[2], &[NAN32, NAN32]),
        ),
    ]
}
