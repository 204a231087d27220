//! Rows for the shape primitives: broadcast, reshape, transpose, rev, slices, concatenate, pad.

use super::*;

pub fn broadcast_in_dim() -> Vec<Case> {
    let p = |dims: &[usize], bdims: &[usize]| Prim::BroadcastInDim {
        shape: dims.into(),
        broadcast_dimensions: bdims.to_vec(),
    };
    vec![
        case1("scalar -0 to rank 2", p(&[2, 3], &[]), vec![f32s(&[], &[-0.0])], f32s(&[2, 3], &[-0.0; 6])),
        case1(
            "vector along the last dim",
            p(&[2, 3], &[1]),
            vec![f32s(&[3], &[1.0, 2.0, 3.0])],
            f32s(&[2, 3], &[1.0, 2.0, 3.0, 1.0, 2.0, 3.0]),
        ),
        case1(
            "vector along the first dim",
            p(&[3, 2], &[0]),
            vec![f32s(&[3], &[1.0, 2.0, 3.0])],
            f32s(&[3, 2], &[1.0, 1.0, 2.0, 2.0, 3.0, 3.0]),
        ),
        case1(
            "size-1 dim stretches",
            p(&[2, 3], &[0, 1]),
            vec![i32s(&[2, 1], &[5, 6])],
            i32s(&[2, 3], &[5, 5, 5, 6, 6, 6]),
        ),
        // Element [0, j, 0, k] is x[j].
        case1(
            "to rank 4",
            p(&[1, 2, 1, 2], &[1]),
            vec![bools(&[2], &[true, false])],
            bools(&[1, 2, 1, 2], &[true, true, false, false]),
        ),
        case1("to empty", p(&[2, 0], &[0]), vec![u32s(&[2], &[1, 2])], u32s(&[2, 0], &[])),
        case1("rank 0 identity", p(&[], &[]), vec![f64s(&[], &[NAN])], f64s(&[], &[NAN])),
    ]
}

pub fn reshape() -> Vec<Case> {
    let p = |dims: &[usize]| Prim::Reshape { new_sizes: dims.into() };
    vec![
        case1("rank 2 to rank 2", p(&[3, 2]), vec![f32_iota(&[2, 3])], f32_iota(&[3, 2])),
        case1("rank 2 to rank 1", p(&[6]), vec![f32_iota(&[2, 3])], f32_iota(&[6])),
        case1("rank 0 to rank 4", p(&[1, 1, 1, 1]), vec![i32s(&[], &[7])], i32s(&[1, 1, 1, 1], &[7])),
        case1("rank 1 to rank 0 keeps -0", p(&[]), vec![f32s(&[1], &[-0.0])], f32s(&[], &[-0.0])),
        case1("empty", p(&[3, 0]), vec![f32s(&[0, 3], &[])], f32s(&[3, 0], &[])),
        case1("rank 3 row-major", p(&[4, 2]), vec![i32_iota(&[2, 2, 2])], i32_iota(&[4, 2])),
    ]
}

pub fn transpose() -> Vec<Case> {
    let p = |perm: &[usize]| Prim::Transpose { permutation: perm.to_vec() };
    vec![
        case1(
            "rank 2",
            p(&[1, 0]),
            vec![f32s(&[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0])],
            f32s(&[3, 2], &[1.0, 4.0, 2.0, 5.0, 3.0, 6.0]),
        ),
        case1("rank 0", p(&[]), vec![f64s(&[], &[-0.0])], f64s(&[], &[-0.0])),
        // x[i, j, k] = 6i + 2j + k; out[a, b, c] = x[b, c, a] = 6b + 2c + a.
        case1(
            "rank 3 rotate",
            p(&[2, 0, 1]),
            vec![i32_iota(&[2, 3, 2])],
            i32s(&[2, 2, 3], &[0, 2, 4, 6, 8, 10, 1, 3, 5, 7, 9, 11]),
        ),
        // x[0, j, 0, l] = 2j + l; out[l, 0, j, 0] = 2j + l.
        case1(
            "rank 4 reverse dims",
            p(&[3, 2, 1, 0]),
            vec![f32_iota(&[1, 2, 1, 2])],
            f32s(&[2, 1, 2, 1], &[0.0, 2.0, 1.0, 3.0]),
        ),
        case1(
            "identity keeps -0 and nan",
            p(&[0]),
            vec![f32s(&[2], &[-0.0, NAN32])],
            f32s(&[2], &[-0.0, NAN32]),
        ),
        case1("empty", p(&[1, 0]), vec![u32s(&[0, 2], &[])], u32s(&[2, 0], &[])),
    ]
}

pub fn rev() -> Vec<Case> {
    let p = |dims: &[usize]| Prim::Rev { dimensions: dims.to_vec() };
    let m = || f32s(&[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    vec![
        case1("rank 1 keeps -0", p(&[0]), vec![f32s(&[3], &[1.0, -0.0, 3.0])], f32s(&[3], &[3.0, -0.0, 1.0])),
        case1("rank 2 inner", p(&[1]), vec![m()], f32s(&[2, 3], &[3.0, 2.0, 1.0, 6.0, 5.0, 4.0])),
        case1("rank 2 both", p(&[0, 1]), vec![m()], f32s(&[2, 3], &[6.0, 5.0, 4.0, 3.0, 2.0, 1.0])),
        case1("rank 2 none", p(&[]), vec![m()], m()),
        case1("rank 0", p(&[]), vec![i32s(&[], &[4])], i32s(&[], &[4])),
        // out[i, 0, k] = x[1-i, 0, 1-k] = 2(1-i) + (1-k).
        case1("rank 3 outer dims", p(&[0, 2]), vec![i32_iota(&[2, 1, 2])], i32s(&[2, 1, 2], &[3, 2, 1, 0])),
        case1("rank 4 last dim", p(&[3]), vec![i32_iota(&[2, 1, 1, 2])], i32s(&[2, 1, 1, 2], &[1, 0, 3, 2])),
    ]
}

pub fn slice() -> Vec<Case> {
    let p = |start: &[usize], limit: &[usize], strides: &[usize]| Prim::Slice {
        start: start.to_vec(),
        limit: limit.to_vec(),
        strides: strides.to_vec(),
    };
    vec![
        // Elements 1, 4, 7 of [1, 8).
        case1("strided", p(&[1], &[8], &[3]), vec![f32_iota(&[10])], f32s(&[3], &[1.0, 4.0, 7.0])),
        // ceil(4 / 3) = 2 elements: 0 and 3.
        case1("stride past the end", p(&[0], &[4], &[3]), vec![f32_iota(&[4])], f32s(&[2], &[0.0, 3.0])),
        // x[i, j] = 4i + j; rows 0, 2 and columns 1, 3.
        case1(
            "rank 2 strided",
            p(&[0, 1], &[3, 4], &[2, 2]),
            vec![f32_iota(&[3, 4])],
            f32s(&[2, 2], &[1.0, 3.0, 9.0, 11.0]),
        ),
        case1("rank 0", p(&[], &[], &[]), vec![f64s(&[], &[-0.0])], f64s(&[], &[-0.0])),
        case1("empty", p(&[2], &[2], &[1]), vec![f32_iota(&[4])], f32s(&[0], &[])),
        // Flat index of [0, j, 0, k] is 3j + k: j = 1, k = 1, 2.
        case1(
            "rank 4",
            p(&[0, 1, 0, 1], &[1, 2, 1, 3], &[1, 1, 1, 1]),
            vec![i32_iota(&[1, 2, 1, 3])],
            i32s(&[1, 1, 1, 2], &[4, 5]),
        ),
        // x[1, j, 0] = 4 + 2j.
        case1(
            "rank 3",
            p(&[1, 0, 0], &[2, 2, 2], &[1, 1, 2]),
            vec![i32_iota(&[2, 2, 2])],
            i32s(&[1, 2, 1], &[4, 6]),
        ),
    ]
}

pub fn dynamic_slice() -> Vec<Case> {
    let p = |sizes: &[usize]| Prim::DynamicSlice { slice_sizes: sizes.to_vec() };
    let start = |i: i32| i32s(&[], &[i]);
    let five = f32_iota(&[5]);
    vec![
        case1("in range", p(&[2]), vec![five.clone(), start(1)], f32s(&[2], &[1.0, 2.0])),
        case1("negative start clamps to 0", p(&[2]), vec![five.clone(), start(-3)], f32s(&[2], &[0.0, 1.0])),
        case1(
            "large start clamps to dim - size",
            p(&[2]),
            vec![five.clone(), start(99)],
            f32s(&[2], &[3.0, 4.0]),
        ),
        case1(
            "u32 start clamps",
            p(&[2]),
            vec![five.clone(), u32s(&[], &[4_000_000_000])],
            f32s(&[2], &[3.0, 4.0]),
        ),
        // Starts (2, -1) clamp to (1, 0); x[i, j] = 4i + j.
        case1(
            "rank 2 clamps per dim",
            p(&[2, 2]),
            vec![f32_iota(&[3, 4]), start(2), start(-1)],
            f32s(&[2, 2], &[4.0, 5.0, 8.0, 9.0]),
        ),
        case1("rank 0", p(&[]), vec![i32s(&[], &[3])], i32s(&[], &[3])),
        case1("size 0", p(&[0]), vec![five, start(7)], f32s(&[0], &[])),
        // Starts (1, 1, 1) clamp to (1, 0, 1); x[1, j, 1] = 4 + 2j + 1.
        case1(
            "rank 3",
            p(&[1, 2, 1]),
            vec![i32_iota(&[2, 2, 2]), start(1), start(1), start(1)],
            i32s(&[1, 2, 1], &[5, 7]),
        ),
        case1(
            "rank 4",
            p(&[1, 1, 1, 1]),
            vec![i32_iota(&[1, 1, 1, 3]), start(0), start(5), start(0), start(-1)],
            i32s(&[1, 1, 1, 1], &[0]),
        ),
    ]
}

pub fn dynamic_update_slice() -> Vec<Case> {
    let p = || Prim::DynamicUpdateSlice;
    let start = |i: i32| i32s(&[], &[i]);
    let upd = || f32s(&[2], &[-0.0, 9.0]);
    vec![
        case1(
            "start clamps high, -0 kept",
            p(),
            vec![f32_iota(&[5]), upd(), start(4)],
            f32s(&[5], &[0.0, 1.0, 2.0, -0.0, 9.0]),
        ),
        case1(
            "start clamps low",
            p(),
            vec![f32_iota(&[5]), upd(), start(-2)],
            f32s(&[5], &[-0.0, 9.0, 2.0, 3.0, 4.0]),
        ),
        // Starts (1, 5) clamp to (1, 1).
        case1(
            "rank 2",
            p(),
            vec![i32s(&[3, 3], &[0; 9]), i32s(&[2, 2], &[1, 2, 3, 4]), start(1), start(5)],
            i32s(&[3, 3], &[0, 0, 0, 0, 1, 2, 0, 3, 4]),
        ),
        case1("rank 0", p(), vec![f64s(&[], &[1.0]), f64s(&[], &[2.0])], f64s(&[], &[2.0])),
        // Starts (9, 0, 1) clamp to (1, 0, 1): flat 4 + 0 + 1 = 5.
        case1(
            "rank 3 u32 starts",
            p(),
            vec![
                u32s(&[2, 2, 2], &[0; 8]),
                u32s(&[1, 1, 1], &[7]),
                u32s(&[], &[9]),
                u32s(&[], &[0]),
                u32s(&[], &[1]),
            ],
            u32s(&[2, 2, 2], &[0, 0, 0, 0, 0, 7, 0, 0]),
        ),
        case1("empty update", p(), vec![f32_iota(&[3]), f32s(&[0], &[]), start(2)], f32_iota(&[3])),
    ]
}

pub fn concatenate() -> Vec<Case> {
    let p = |dimension| Prim::Concatenate { dimension };
    vec![
        case1(
            "rank 1 with an empty operand",
            p(0),
            vec![f32s(&[2], &[1.0, 2.0]), f32s(&[1], &[-0.0]), f32s(&[0], &[])],
            f32s(&[3], &[1.0, 2.0, -0.0]),
        ),
        case1(
            "rank 2 dim 1",
            p(1),
            vec![i32s(&[2, 1], &[1, 2]), i32s(&[2, 2], &[3, 4, 5, 6])],
            i32s(&[2, 3], &[1, 3, 4, 2, 5, 6]),
        ),
        case1(
            "rank 2 dim 0",
            p(0),
            vec![i32s(&[1, 2], &[1, 2]), i32s(&[1, 2], &[3, 4])],
            i32s(&[2, 2], &[1, 2, 3, 4]),
        ),
        case1(
            "rank 3 bool",
            p(0),
            vec![bools(&[1, 1, 2], &[true, false]), bools(&[1, 1, 2], &[false, false])],
            bools(&[2, 1, 2], &[true, false, false, false]),
        ),
        case1(
            "rank 4 dim 2",
            p(2),
            vec![f64s(&[1, 1, 1, 2], &[1.0, 2.0]), f64s(&[1, 1, 2, 2], &[3.0, 4.0, 5.0, 6.0])],
            f64s(&[1, 1, 3, 2], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),
        ),
        case1("single operand", p(0), vec![u32s(&[2], &[7, 8])], u32s(&[2], &[7, 8])),
    ]
}

pub fn pad() -> Vec<Case> {
    let p = |low: &[i64], high: &[i64], interior: &[usize]| Prim::Pad {
        low: low.to_vec(),
        high: high.to_vec(),
        interior: interior.to_vec(),
    };
    vec![
        // Length 1 + (3 + 2) + 2 = 8; x[i] at 1 + 2i.
        case1(
            "low, high, interior",
            p(&[1], &[2], &[1]),
            vec![i32s(&[3], &[1, 2, 3]), i32s(&[], &[0])],
            i32s(&[8], &[0, 1, 0, 2, 0, 3, 0, 0]),
        ),
        case1(
            "negative low crops",
            p(&[-1], &[0], &[0]),
            vec![f32s(&[4], &[1.0, 2.0, 3.0, 4.0]), f32s(&[], &[0.0])],
            f32s(&[3], &[2.0, 3.0, 4.0]),
        ),
        // Length -2 + 7 - 1 = 4; x[i] at -2 + 2i: x[0] and x[3] fall outside.
        case1(
            "negative low and high with interior",
            p(&[-2], &[-1], &[1]),
            vec![f32s(&[4], &[1.0, 2.0, 3.0, 4.0]), f32s(&[], &[9.0])],
            f32s(&[4], &[2.0, 9.0, 3.0, 9.0]),
        ),
        case1(
            "-0 padding value",
            p(&[1], &[1], &[0]),
            vec![f32s(&[1], &[1.0]), f32s(&[], &[-0.0])],
            f32s(&[3], &[-0.0, 1.0, -0.0]),
        ),
        // Dim 0: 1 + 2 = 3 rows, the first all padding; dim 1: 2 + 1 interior + 1 high = 4.
        case1(
            "rank 2",
            p(&[1, 0], &[0, 1], &[0, 1]),
            vec![f32s(&[2, 2], &[1.0, 2.0, 3.0, 4.0]), f32s(&[], &[9.0])],
            f32s(&[3, 4], &[9.0, 9.0, 9.0, 9.0, 1.0, 9.0, 2.0, 9.0, 3.0, 9.0, 4.0, 9.0]),
        ),
        case1("rank 0", p(&[], &[], &[]), vec![f64s(&[], &[-0.0]), f64s(&[], &[1.0])], f64s(&[], &[-0.0])),
        // An empty dim has no interior gaps: 2 + 0 + 1.
        case1(
            "empty operand",
            p(&[2], &[1], &[3]),
            vec![u32s(&[0], &[]), u32s(&[], &[5])],
            u32s(&[3], &[5, 5, 5]),
        ),
        case1(
            "rank 3 interior keeps -0",
            p(&[0, 0, 0], &[0, 0, 0], &[0, 0, 1]),
            vec![f32s(&[1, 1, 2], &[-0.0, 1.0]), f32s(&[], &[2.0])],
            f32s(&[1, 1, 3], &[-0.0, 2.0, 1.0]),
        ),
        case1(
            "rank 4 crop to empty",
            p(&[0, 0, 0, -2], &[0, 0, 0, 0], &[0, 0, 0, 0]),
            vec![f32s(&[1, 1, 1, 2], &[1.0, 2.0]), f32s(&[], &[0.0])],
            f32s(&[1, 1, 1, 0], &[]),
        ),
    ]
}
