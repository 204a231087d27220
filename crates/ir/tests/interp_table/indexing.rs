//! Rows for `gather`, `scatter`/`scatter_add` and `segment_sum`.

use super::*;

/// Gather rows, each with its result under `Clip` (indices clamped) and under `FillOrDrop` (NaN,
/// `i32::MIN`, `u32::MAX`, true read out of range).
pub fn gather(mode: IndexMode) -> Vec<Case> {
    let p = |axis, batch_dims| Prim::Gather { axis, batch_dims, mode };
    let g = |name: &str, axis: usize, batch_dims: usize, x: Array, idx: Array, clip: Array, fill: Array| {
        let want = match mode {
            IndexMode::Clip => clip,
            IndexMode::FillOrDrop => fill,
        };
        case1(name, p(axis, batch_dims), vec![x, idx], want)
    };
    vec![
        // Indices 2, -3 (clamps to 0), 99 (clamps to 3), 0.
        g(
            "rank 1 out of range both sides",
            0,
            0,
            f32s(&[4], &[10.0, 20.0, 30.0, 40.0]),
            i32s(&[4], &[2, -3, 99, 0]),
            f32s(&[4], &[30.0, 10.0, 40.0, 10.0]),
            f32s(&[4], &[30.0, NAN32, NAN32, 10.0]),
        ),
        g(
            "i32 data fills MIN",
            0,
            0,
            i32s(&[2], &[5, 6]),
            i32s(&[3], &[1, 2, -1]),
            i32s(&[3], &[6, 6, 5]),
            i32s(&[3], &[6, i32::MIN, i32::MIN]),
        ),
        // A u32 index above i32::MAX is large, not negative.
        g(
            "u32 data and indices fill MAX",
            0,
            0,
            u32s(&[2], &[1, 2]),
            u32s(&[2], &[4_000_000_000, 0]),
            u32s(&[2], &[2, 1]),
            u32s(&[2], &[u32::MAX, 1]),
        ),
        g(
            "bool data fills true",
            0,
            0,
            bools(&[2], &[false, false]),
            i32s(&[1], &[5]),
            bools(&[1], &[false]),
            bools(&[1], &[true]),
        ),
        g(
            "rank 2 rows",
            0,
            0,
            f64s(&[3, 2], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),
            i32s(&[2], &[1, 5]),
            f64s(&[2, 2], &[3.0, 4.0, 5.0, 6.0]),
            f64s(&[2, 2], &[3.0, 4.0, NAN, NAN]),
        ),
        g(
            "rank 2 columns, scalar index",
            1,
            0,
            f32s(&[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),
            i32s(&[], &[-1]),
            f32s(&[2], &[1.0, 4.0]),
            f32s(&[2], &[NAN32, NAN32]),
        ),
        // out[b, i] = x[b, idx[b, i]]: x[0, 0], x[0, 2], x[1, 1], x[1, -1 -> 0].
        g(
            "batch_dims 1",
            1,
            1,
            f32s(&[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),
            i32s(&[2, 2], &[0, 2, 1, -1]),
            f32s(&[2, 2], &[1.0, 3.0, 5.0, 4.0]),
            f32s(&[2, 2], &[1.0, 3.0, 5.0, NAN32]),
        ),
        // x[a, b, c] = 6a + 3b + c; out[a, b] = x[a, b, idx[a, b]]: x[0,0,2], x[0,1,0], x[1,0,1], x[1,1,7 -> 2].
        g(
            "batch_dims 2",
            2,
            2,
            f32_iota(&[2, 2, 3]),
            i32s(&[2, 2], &[2, 0, 1, 7]),
            f32s(&[2, 2], &[2.0, 3.0, 7.0, 11.0]),
            f32s(&[2, 2], &[2.0, 3.0, 7.0, NAN32]),
        ),
        // x[i, j, k] = 6i + 2j + k; out[i, n, k] = x[i, idx[n], k] with idx [2, 3 -> 2].
        g(
            "rank 3 middle axis",
            1,
            0,
            f32_iota(&[2, 3, 2]),
            i32s(&[2], &[2, 3]),
            f32s(&[2, 2, 2], &[4.0, 5.0, 4.0, 5.0, 10.0, 11.0, 10.0, 11.0]),
            f32s(&[2, 2, 2], &[4.0, 5.0, NAN32, NAN32, 10.0, 11.0, NAN32, NAN32]),
        ),
        // x[b, 0, j, 0] = 3b + j; out[b, 0, i, 0] = x[b, 0, idx[b, i], 0]: 2, 0; 4, (-4 -> 0) 3.
        g(
            "rank 4 batch_dims 1",
            2,
            1,
            f32_iota(&[2, 1, 3, 1]),
            i32s(&[2, 2], &[2, 0, 1, -4]),
            f32s(&[2, 1, 2, 1], &[2.0, 0.0, 4.0, 3.0]),
            f32s(&[2, 1, 2, 1], &[2.0, 0.0, 4.0, NAN32]),
        ),
        g(
            "rank 4 last axis",
            3,
            0,
            f32s(&[1, 1, 1, 3], &[1.0, 2.0, 3.0]),
            i32s(&[1], &[-1]),
            f32s(&[1, 1, 1, 1], &[1.0]),
            f32s(&[1, 1, 1, 1], &[NAN32]),
        ),
        g(
            "rank 2 indices into rank 1",
            0,
            0,
            i32s(&[3], &[7, 8, 9]),
            i32s(&[2, 2], &[0, 1, 2, 3]),
            i32s(&[2, 2], &[7, 8, 9, 9]),
            i32s(&[2, 2], &[7, 8, 9, i32::MIN]),
        ),
        g(
            "empty indices",
            0,
            0,
            f32s(&[3], &[1.0, 2.0, 3.0]),
            i32s(&[0], &[]),
            f32s(&[0], &[]),
            f32s(&[0], &[]),
        ),
        g(
            "-0 and nan payload moved bitwise",
            0,
            0,
            f32s(&[2], &[-0.0, f32::from_bits(0x7fc0_0001)]),
            i32s(&[3], &[1, 0, 0]),
            f32s(&[3], &[f32::from_bits(0x7fc0_0001), -0.0, -0.0]),
            f32s(&[3], &[f32::from_bits(0x7fc0_0001), -0.0, -0.0]),
        ),
    ]
}

/// Scatter rows, each with its result for set/add under clip/drop.
pub fn scatter(op: ScatterOp, mode: IndexMode) -> Vec<Case> {
    let p = |axis, batch_dims| Prim::Scatter { op, axis, batch_dims, mode };
    // Results in the order (set, clip), (set, drop), (add, clip), (add, drop).
    let pick = |[set_clip, set_drop, add_clip, add_drop]: [Array; 4]| match (op, mode) {
        (ScatterOp::Set, IndexMode::Clip) => set_clip,
        (ScatterOp::Set, IndexMode::FillOrDrop) => set_drop,
        (ScatterOp::Add, IndexMode::Clip) => add_clip,
        (ScatterOp::Add, IndexMode::FillOrDrop) => add_drop,
    };
    let s = |name: &str, (axis, batch_dims): (usize, usize), [x, idx, upd]: [Array; 3], want: [Array; 4]| {
        case1(name, p(axis, batch_dims), vec![x, idx, upd], pick(want))
    };
    let mut rows = vec![
        // Index 1 twice (set: the later 30 wins; add: 1 + 10 + 30), 3 once, -5 clamps to 0 or is dropped.
        s(
            "rank 1 duplicates and out of range",
            (0, 0),
            [f32s(&[4], &[1.0; 4]), i32s(&[4], &[1, 3, 1, -5]), f32s(&[4], &[10.0, 20.0, 30.0, 40.0])],
            [
                f32s(&[4], &[40.0, 30.0, 1.0, 20.0]),
                f32s(&[4], &[1.0, 30.0, 1.0, 20.0]),
                f32s(&[4], &[41.0, 41.0, 1.0, 21.0]),
                f32s(&[4], &[1.0, 41.0, 1.0, 21.0]),
            ],
        ),
        // Row 9 clamps to row 2 or is dropped.
        s(
            "rank 2 rows",
            (0, 0),
            [i32s(&[3, 2], &[1; 6]), i32s(&[2], &[0, 9]), i32s(&[2, 2], &[1, 2, 3, 4])],
            [
                i32s(&[3, 2], &[1, 2, 1, 1, 3, 4]),
                i32s(&[3, 2], &[1, 2, 1, 1, 1, 1]),
                i32s(&[3, 2], &[2, 3, 1, 1, 4, 5]),
                i32s(&[3, 2], &[2, 3, 1, 1, 1, 1]),
            ],
        ),
        // Batch 0 writes updates 1, 2 both at x[0, 0]; batch 1 writes 3 at x[1, 1] and 4 at x[1, -1 -> 0].
        s(
            "batch_dims 1 with a duplicate",
            (1, 1),
            [f32s(&[2, 3], &[0.0; 6]), i32s(&[2, 2], &[0, 0, 1, -1]), f32s(&[2, 2], &[1.0, 2.0, 3.0, 4.0])],
            [
                f32s(&[2, 3], &[2.0, 0.0, 0.0, 4.0, 3.0, 0.0]),
                f32s(&[2, 3], &[2.0, 0.0, 0.0, 0.0, 3.0, 0.0]),
                f32s(&[2, 3], &[3.0, 0.0, 0.0, 4.0, 3.0, 0.0]),
                f32s(&[2, 3], &[3.0, 0.0, 0.0, 0.0, 3.0, 0.0]),
            ],
        ),
        // One index per (a, b): flat 6a + 3b + c gets 2 -> 1, 5 -> 2, 7 -> 3, (7 -> 2) 11 -> 4 or dropped.
        s(
            "batch_dims 2",
            (2, 2),
            [
                f64s(&[2, 2, 3], &[1.0; 12]),
                i32s(&[2, 2], &[2, 2, 1, 7]),
                f64s(&[2, 2], &[1.0, 2.0, 3.0, 4.0]),
            ],
            [
                f64s(&[2, 2, 3], &[1.0, 1.0, 1.0, 1.0, 1.0, 2.0, 1.0, 3.0, 1.0, 1.0, 1.0, 4.0]),
                f64s(&[2, 2, 3], &[1.0, 1.0, 1.0, 1.0, 1.0, 2.0, 1.0, 3.0, 1.0, 1.0, 1.0, 1.0]),
                f64s(&[2, 2, 3], &[1.0, 1.0, 2.0, 1.0, 1.0, 3.0, 1.0, 4.0, 1.0, 1.0, 1.0, 5.0]),
                f64s(&[2, 2, 3], &[1.0, 1.0, 2.0, 1.0, 1.0, 3.0, 1.0, 4.0, 1.0, 1.0, 1.0, 1.0]),
            ],
        ),
        // Both indices are 2: for i = 0 updates 1 then 2 land at x[0, 2]; for i = 1, 3 then 4 at x[1, 2].
        s(
            "rank 3 middle axis duplicates",
            (1, 0),
            [i32s(&[2, 3, 1], &[0; 6]), i32s(&[2], &[2, 2]), i32s(&[2, 2, 1], &[1, 2, 3, 4])],
            [
                i32s(&[2, 3, 1], &[0, 0, 2, 0, 0, 4]),
                i32s(&[2, 3, 1], &[0, 0, 2, 0, 0, 4]),
                i32s(&[2, 3, 1], &[0, 0, 3, 0, 0, 7]),
                i32s(&[2, 3, 1], &[0, 0, 3, 0, 0, 7]),
            ],
        ),
        // Indices 2 and -1 (-> 0): x[i, 2] gets updates 1 / 3, x[i, 0] gets 2 / 4 (or nothing).
        s(
            "rank 3 middle axis out of range",
            (1, 0),
            [i32s(&[2, 3, 1], &[0; 6]), i32s(&[2], &[2, -1]), i32s(&[2, 2, 1], &[1, 2, 3, 4])],
            [
                i32s(&[2, 3, 1], &[2, 0, 1, 4, 0, 3]),
                i32s(&[2, 3, 1], &[0, 0, 1, 0, 0, 3]),
                i32s(&[2, 3, 1], &[2, 0, 1, 4, 0, 3]),
                i32s(&[2, 3, 1], &[0, 0, 1, 0, 0, 3]),
            ],
        ),
        // Index 2 gets 10; 5 clamps to 2 (20 after it; or 3 + 10 + 20) or is dropped.
        s(
            "rank 4 last axis",
            (3, 0),
            [f32s(&[1, 1, 1, 3], &[1.0, 2.0, 3.0]), i32s(&[2], &[2, 5]), f32s(&[1, 1, 1, 2], &[10.0, 20.0])],
            [
                f32s(&[1, 1, 1, 3], &[1.0, 2.0, 20.0]),
                f32s(&[1, 1, 1, 3], &[1.0, 2.0, 10.0]),
                f32s(&[1, 1, 1, 3], &[1.0, 2.0, 33.0]),
                f32s(&[1, 1, 1, 3], &[1.0, 2.0, 13.0]),
            ],
        ),
        // Set writes the -0 itself; add gives 1 + -0 = 1.
        s(
            "-0 update",
            (0, 0),
            [f32s(&[2], &[1.0, 1.0]), i32s(&[1], &[0]), f32s(&[1], &[-0.0])],
            [
                f32s(&[2], &[-0.0, 1.0]),
                f32s(&[2], &[-0.0, 1.0]),
                f32s(&[2], &[1.0, 1.0]),
                f32s(&[2], &[1.0, 1.0]),
            ],
        ),
        // MAX + 1 + 1 wraps to 1.
        s(
            "u32 duplicates wrap",
            (0, 0),
            [u32s(&[1], &[u32::MAX]), i32s(&[2], &[0, 0]), u32s(&[2], &[1, 1])],
            [u32s(&[1], &[1]), u32s(&[1], &[1]), u32s(&[1], &[1]), u32s(&[1], &[1])],
        ),
        s(
            "u32 index above i32::MAX",
            (0, 0),
            [i32s(&[2], &[0, 0]), u32s(&[1], &[4_000_000_000]), i32s(&[1], &[5])],
            [i32s(&[2], &[0, 5]), i32s(&[2], &[0, 0]), i32s(&[2], &[0, 5]), i32s(&[2], &[0, 0])],
        ),
        s(
            "no updates",
            (0, 0),
            [f32s(&[2], &[1.0, 2.0]), i32s(&[0], &[]), f32s(&[0], &[])],
            [
                f32s(&[2], &[1.0, 2.0]),
                f32s(&[2], &[1.0, 2.0]),
                f32s(&[2], &[1.0, 2.0]),
                f32s(&[2], &[1.0, 2.0]),
            ],
        ),
    ];
    // scatter_add is numeric only; set also moves bools.
    match op {
        ScatterOp::Set => rows.push(case1(
            "bool",
            p(0, 0),
            vec![bools(&[2], &[false, false]), i32s(&[2], &[1, 1]), bools(&[2], &[true, false])],
            bools(&[2], &[false, false]),
        )),
        ScatterOp::Add => rows.push(case1(
            "i32 signs",
            p(0, 0),
            vec![i32s(&[2], &[5, -5]), i32s(&[2], &[1, 0]), i32s(&[2], &[-7, 7])],
            i32s(&[2], &[12, -12]),
        )),
    }
    rows
}

pub fn segment_sum() -> Vec<Case> {
    let p = |num_segments| Prim::SegmentSum { num_segments };
    vec![
        // Segment 0: 1 + 3; segment 1: nothing; segment 2: 2; ids -1 and 3 dropped.
        case1(
            "duplicates and out of range",
            p(3),
            vec![f32s(&[5], &[1.0, 2.0, 3.0, 4.0, 5.0]), i32s(&[5], &[0, 2, 0, -1, 3])],
            f32s(&[3], &[4.0, 0.0, 2.0]),
        ),
        // Segment 0: [5, 6]; segment 1: [1+3, 2+4].
        case1(
            "rank 2 u32 ids",
            p(2),
            vec![i32s(&[3, 2], &[1, 2, 3, 4, 5, 6]), u32s(&[3], &[1, 1, 0])],
            i32s(&[2, 2], &[5, 6, 4, 6]),
        ),
        case1(
            "rank 3",
            p(2),
            vec![f64s(&[2, 1, 2], &[1.0, 2.0, 3.0, 4.0]), i32s(&[2], &[1, 1])],
            f64s(&[2, 1, 2], &[0.0, 0.0, 4.0, 6.0]),
        ),
        case1(
            "rank 4",
            p(3),
            vec![f32s(&[2, 1, 1, 1], &[1.0, 2.0]), i32s(&[2], &[1, 0])],
            f32s(&[3, 1, 1, 1], &[2.0, 1.0, 0.0]),
        ),
        case1("no segments", p(0), vec![f32s(&[2], &[1.0, 2.0]), i32s(&[2], &[0, 1])], f32s(&[0], &[])),
        case1("empty data", p(2), vec![f32s(&[0], &[]), i32s(&[0], &[])], f32s(&[2], &[0.0, 0.0])),
        // Segments start at +0, and +0 + -0 = +0.
        case1("-0 sums to +0", p(1), vec![f32s(&[1], &[-0.0]), i32s(&[1], &[0])], f32s(&[1], &[0.0])),
        case1(
            "nan propagates",
            p(1),
            vec![f32s(&[2], &[NAN32, 1.0]), i32s(&[2], &[0, 0])],
            f32s(&[1], &[NAN32]),
        ),
        // MAX + 2 wraps to 1.
        case1("u32 wraps", p(1), vec![u32s(&[2], &[u32::MAX, 2]), i32s(&[2], &[0, 0])], u32s(&[1], &[1])),
    ]
}
