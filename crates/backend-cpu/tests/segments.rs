//! Segment specialization, blocked-pairwise float sums, per-element transcendentals and small
//! `dot_general` kernels, against the interpreter (bitwise where the docs promise it) and against
//! exactly known values.

mod common;

use kiln_backend_cpu::compile;
use kiln_ir::*;

fn push(f: &mut Function, p: Prim, ins: &[Var]) -> Var {
    f.push(p, ins, None).unwrap()[0]
}

fn f32s(n: usize, seed: u64) -> Vec<f32> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            ((x >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

fn both(f: &Function, args: &[Array]) -> (Vec<Array>, Vec<Array>) {
    let exe = compile(f).unwrap_or_else(|e| panic!("compile: {e}\n{f}"));
    let got = exe.run(args).expect("run");
    (got, eval(f, args).expect("interpreter"))
}

/// `sum(x * x)` over 10⁶ f32 in [-1, 1): within 10⁻⁶ relative of the f64 sum of the same products
/// (a left fold in f32 is off by ~10⁻⁴ here), on the vector path (innermost reduction), the scalar
/// path (`rev` keeps a kernel scalar) and an outer-axis reduction ([250000, 4] over axis 0).
#[test]
fn long_f32_sums_are_pairwise_accurate() {
    let n = 1_000_000;
    let xs = f32s(n, 7);
    let truth: f64 = xs.iter().map(|&x| (x * x) as f64).sum();
    let build = |dims: &[usize], rev: bool, axes: Vec<usize>| {
        let mut f = Function::new();
        let p = f.add_param(TensorType::new(DType::F32, Shape::new(dims)));
        let x = if rev { push(&mut f, Prim::Rev { dimensions: vec![0] }, &[p]) } else { p };
        let sq = push(&mut f, Prim::Binary(BinaryOp::Mul), &[x, x]);
        let r = push(&mut f, Prim::Reduce { op: ReduceOp::Sum, axes }, &[sq]);
        f.outputs.push(r);
        f
    };
    for (name, dims, rev, axes) in [
        ("vector, innermost", vec![n], false, vec![0]),
        ("scalar", vec![n], true, vec![0]),
        ("vector, outer axis", vec![n / 4, 4], false, vec![0]),
    ] {
        let f = build(&dims, rev, axes);
        let exe = compile(&f).unwrap();
        let got = exe.run(&[Array::from_vec(&dims, xs.clone())]).unwrap().remove(0).to_f64_vec();
        let total: f64 = got.iter().sum();
        let rel = ((total - truth) / truth).abs();
        assert!(rel < 1e-6, "{name}: {total} vs {truth} (relative error {rel:e})");
    }
}

/// `roll(u, s)` as the tracer writes it: `concatenate(slice(u, n-s..), slice(u, ..n-s))` on the last axis.
fn roll(f: &mut Function, u: Var, dims: &[usize], s: usize) -> Var {
    let last = dims.len() - 1;
    let n = dims[last];
    let mut lim = dims.to_vec();
    let a = push(
        f,
        Prim::Slice {
            start: [vec![0; last], vec![n - s]].concat(),
            limit: lim.clone(),
            strides: vec![1; dims.len()],
        },
        &[u],
    );
    lim[last] = n - s;
    let b =
        push(f, Prim::Slice { start: vec![0; dims.len()], limit: lim, strides: vec![1; dims.len()] }, &[u]);
    push(f, Prim::Concatenate { dimension: last }, &[a, b])
}

/// W1's step `u + c·(roll(u,1) - 2u + roll(u,-1))` on rows of many lengths, f32 and f64: bitwise equal.
#[test]
fn roll_stencils_are_bitwise() {
    for dt in [DType::F32, DType::F64] {
        for dims in [vec![5], vec![17], vec![64], vec![1003], vec![3, 100], vec![2, 9]] {
            let n = *dims.last().unwrap();
            let mut f = Function::new();
            let u = f.add_param(TensorType::new(dt, Shape::new(&dims)));
            let c = f.add_param(TensorType::new(dt, Shape::new(&[])));
            let l = roll(&mut f, u, &dims, 1);
            let r = roll(&mut f, u, &dims, n - 1);
            let two = push(
                &mut f,
                Prim::BroadcastInDim { shape: Shape::new(&dims), broadcast_dimensions: vec![] },
                &[c],
            );
            let tu = push(&mut f, Prim::Binary(BinaryOp::Add), &[u, u]);
            let d = push(&mut f, Prim::Binary(BinaryOp::Sub), &[l, tu]);
            let d = push(&mut f, Prim::Binary(BinaryOp::Add), &[d, r]);
            let cd = push(&mut f, Prim::Binary(BinaryOp::Mul), &[two, d]);
            let out = push(&mut f, Prim::Binary(BinaryOp::Add), &[u, cd]);
            f.outputs.push(out);
            let size: usize = dims.iter().product();
            let vals: Vec<f64> = f32s(size, n as u64).iter().map(|&x| x as f64 * 3.0).collect();
            let arr = |v: Vec<f64>, d: &[usize]| match dt {
                DType::F32 => Array::from_vec(d, v.iter().map(|&x| x as f32).collect::<Vec<_>>()),
                _ => Array::from_vec(d, v),
            };
            let (got, want) = both(&f, &[arr(vals, &dims), arr(vec![0.25], &[])]);
            assert!(
                got[0].bitwise_eq(&want[0]),
                "{dt:?} {dims:?}\n{f}\n jit  {:?}\n want {:?}",
                got[0],
                want[0]
            );
        }
    }
}

/// Pads along the last axis (positive and negative low/high, a scalar pad value computed from a
/// parameter), along an outer axis with interior padding, and concatenates along an outer axis,
/// inside arithmetic: bitwise equal.
#[test]
fn pads_and_outer_concatenates_are_bitwise() {
    let cases: [(&[usize], Vec<i64>, Vec<i64>, Vec<usize>); 5] = [
        (&[100], vec![3], vec![5], vec![0]),
        (&[100], vec![-7], vec![2], vec![0]),
        (&[4, 37], vec![0, 9], vec![0, -4], vec![0, 0]),
        (&[3, 40], vec![1, 0], vec![2, 0], vec![1, 0]),
        (&[6], vec![10], vec![10], vec![0]),
    ];
    for (dims, low, high, interior) in cases {
        let mut f = Function::new();
        let x = f.add_param(TensorType::new(DType::F32, Shape::new(dims)));
        let p = f.add_param(TensorType::new(DType::F32, Shape::new(&[])));
        let pv = push(&mut f, Prim::Unary(UnaryOp::Neg), &[p]);
        let xx = push(&mut f, Prim::Binary(BinaryOp::Mul), &[x, x]);
        let padded = push(
            &mut f,
            Prim::Pad { low: low.clone(), high: high.clone(), interior: interior.clone() },
            &[xx, pv],
        );
        let y = push(&mut f, Prim::Binary(BinaryOp::Add), &[padded, padded]);
        f.outputs.push(y);
        let size: usize = dims.iter().product();
        let args = [Array::from_vec(dims, f32s(size, 3)), Array::from_vec(&[], vec![1.5f32])];
        let (got, want) = both(&f, &args);
        assert!(got[0].bitwise_eq(&want[0]), "{f}\n jit  {:?}\n want {:?}", got[0], want[0]);
    }
    // Outer-axis concatenate of two computed parts, then a last-axis one.
    let mut f = Function::new();
    let a = f.add_param(TensorType::new(DType::F64, Shape::new(&[2, 50])));
    let b = f.add_param(TensorType::new(DType::F64, Shape::new(&[3, 50])));
    let na = push(&mut f, Prim::Unary(UnaryOp::Neg), &[a]);
    let c = push(&mut f, Prim::Concatenate { dimension: 0 }, &[na, b]);
    let d = push(&mut f, Prim::Concatenate { dimension: 1 }, &[c, c]);
    let e = push(&mut f, Prim::Binary(BinaryOp::Mul), &[d, d]);
    f.outputs.push(e);
    let args = [
        Array::from_vec(&[2, 50], f32s(100, 1).iter().map(|&x| x as f64).collect::<Vec<_>>()),
        Array::from_vec(&[3, 50], f32s(150, 2).iter().map(|&x| x as f64).collect::<Vec<_>>()),
    ];
    let (got, want) = both(&f, &args);
    assert!(got[0].bitwise_eq(&want[0]), "{f}\n jit  {:?}\n want {:?}", got[0], want[0]);
}

/// Pads along a short last axis that the scalar loop nest unrolls (the gradient of `x[:, k:k+1]`
/// slices summed into a `[B, 4]` cotangent, W4's backward step): each column is known at compile
/// time, so a pad off its operand is the pad value and on it reads the operand at a constant
/// column. Edge, negative-low (cropping) and interior pads, a pad value computed from a parameter
/// (-0.0 included, whose sum with +0.0 is +0.0): bitwise equal to the interpreter.
#[test]
fn pads_on_an_unrolled_last_axis_are_bitwise() {
    let rows = 37;
    let mut f = Function::new();
    let cols = f.add_param(TensorType::new(DType::F32, Shape::new(&[rows, 1])));
    let wide = f.add_param(TensorType::new(DType::F32, Shape::new(&[rows, 6])));
    let p = f.add_param(TensorType::new(DType::F32, Shape::new(&[])));
    let pv = push(&mut f, Prim::Unary(UnaryOp::Neg), &[p]);
    let sq = push(&mut f, Prim::Binary(BinaryOp::Mul), &[cols, cols]);
    let mut acc = None;
    let mut add = |f: &mut Function, x: Var| {
        acc = Some(match acc {
            None => x,
            Some(a) => push(f, Prim::Binary(BinaryOp::Add), &[a, x]),
        });
    };
    // One column at each position, computed from `cols`.
    for k in 0..4i64 {
        let pad = Prim::Pad { low: vec![0, k], high: vec![0, 3 - k], interior: vec![0, 0] };
        let x = push(&mut f, pad, &[sq, pv]);
        add(&mut f, x);
    }
    // Columns 1..3 of `wide` cropped into place (negative low and high).
    let crop = Prim::Pad { low: vec![0, -1], high: vec![0, -1], interior: vec![0, 0] };
    let x = push(&mut f, crop, &[wide, pv]);
    add(&mut f, x);
    // Two columns of `wide` (a strided slice) at columns 1 and 3 with interior padding.
    let two =
        push(&mut f, Prim::Slice { start: vec![0, 0], limit: vec![rows, 6], strides: vec![1, 3] }, &[wide]);
    let spread = Prim::Pad { low: vec![0, 1], high: vec![0, 0], interior: vec![0, 1] };
    let x = push(&mut f, spread, &[two, pv]);
    add(&mut f, x);
    // Three columns of `wide` (stride 2) spread by interior padding and cropped by a negative low.
    let three =
        push(&mut f, Prim::Slice { start: vec![0, 1], limit: vec![rows, 6], strides: vec![1, 2] }, &[wide]);
    let spread_crop = Prim::Pad { low: vec![0, -1], high: vec![0, 0], interior: vec![0, 1] };
    let x = push(&mut f, spread_crop, &[three, pv]);
    add(&mut f, x);
    f.outputs.push(acc.unwrap());
    // A short rank-1 result padded on both sides (a second output of the same program).
    let short =
        push(&mut f, Prim::Slice { start: vec![0, 2], limit: vec![1, 4], strides: vec![1, 1] }, &[wide]);
    let short = push(&mut f, Prim::Reshape { new_sizes: Shape::new(&[2]) }, &[short]);
    let both_sides = Prim::Pad { low: vec![1], high: vec![1], interior: vec![0] };
    let x = push(&mut f, both_sides, &[short, pv]);
    let x = push(&mut f, Prim::Binary(BinaryOp::Mul), &[x, x]);
    f.outputs.push(x);
    let mut w = f32s(rows * 6, 5);
    w[0] = -0.0;
    w[8] = f32::NAN;
    for p in [1.5f32, 0.0, -0.0] {
        let args = [
            Array::from_vec(&[rows, 1], f32s(rows, 4)),
            Array::from_vec(&[rows, 6], w.clone()),
            Array::from_vec(&[], vec![p]),
        ];
        let (got, want) = both(&f, &args);
        for (g, w) in got.iter().zip(&want) {
            assert!(g.bitwise_eq(w), "pad value {p}: {f}\n jit  {g:?}\n want {w:?}");
        }
    }
}

/// The scalar path's per-element transcendentals give the tile functions' bits: `f(rev(x))` (rev
/// keeps the kernel scalar) against vmath's tile on `rev(x)`, for 2¹⁵ random bit patterns (NaN,
/// inf, subnormals included) and a sweep over [-100, 100] and large trig arguments.
#[test]
fn scalar_transcendentals_match_the_tiles_bitwise() {
    use kiln_backend_cpu::vmath::{Func, table};
    let ops = [
        (UnaryOp::Exp, Func::Exp),
        (UnaryOp::Expm1, Func::Expm1),
        (UnaryOp::Log, Func::Log),
        (UnaryOp::Log1p, Func::Log1p),
        (UnaryOp::Sin, Func::Sin),
        (UnaryOp::Cos, Func::Cos),
        (UnaryOp::Tanh, Func::Tanh),
        (UnaryOp::Logistic, Func::Logistic),
    ];
    let n = 1 << 15;
    let mut bits = 0x1234_5678_9abc_def0u64;
    let mut next = move || {
        bits ^= bits << 13;
        bits ^= bits >> 7;
        bits ^= bits << 17;
        bits
    };
    let mut v32: Vec<f32> = (0..n).map(|_| f32::from_bits(next() as u32)).collect();
    let mut v64: Vec<f64> = (0..n).map(|_| f64::from_bits(next())).collect();
    v32.extend((0..2001).map(|i| (i as f32 - 1000.0) * 0.1));
    v64.extend((0..2001).map(|i| (i as f64 - 1000.0) * 0.1));
    v32.extend([1e7f32, -3e9, f32::INFINITY, 1e6, 999_999.9]);
    v64.extend([1e7, -3e12, f64::NEG_INFINITY, 1e6, 1_000_000.000_1]);
    for (op, func) in ops {
        for dt in [DType::F32, DType::F64] {
            let len = if dt == DType::F32 { v32.len() } else { v64.len() };
            let mut f = Function::new();
            let x = f.add_param(TensorType::new(dt, Shape::new(&[len])));
            let r = push(&mut f, Prim::Rev { dimensions: vec![0] }, &[x]);
            let y = push(&mut f, Prim::Unary(op), &[r]);
            f.outputs.push(y);
            let exe = compile(&f).unwrap();
            let (got, want): (Vec<u64>, Vec<u64>) = if dt == DType::F32 {
                let rev: Vec<f32> = v32.iter().rev().copied().collect();
                let mut want = vec![0f32; len];
                table().map_f32(func, &rev, &mut want);
                let got = exe.run(&[Array::from_vec(&[len], v32.clone())]).unwrap().remove(0);
                let got = got.to_f64_vec().iter().map(|&g| (g as f32).to_bits() as u64).collect();
                (got, want.iter().map(|w| w.to_bits() as u64).collect())
            } else {
                let rev: Vec<f64> = v64.iter().rev().copied().collect();
                let mut want = vec![0f64; len];
                table().map_f64(func, &rev, &mut want);
                let got = exe.run(&[Array::from_vec(&[len], v64.clone())]).unwrap().remove(0);
                (
                    got.to_f64_vec().iter().map(|g| g.to_bits()).collect(),
                    want.iter().map(|w| w.to_bits()).collect(),
                )
            };
            let bad = got.iter().zip(&want).position(|(g, w)| g != w);
            assert!(
                bad.is_none(),
                "{op:?} {dt:?} at {bad:?}: {:x?} vs {:x?}",
                bad.map(|k| got[k]),
                bad.map(|k| want[k])
            );
        }
    }
}

/// Small `dot_general`s run as kernels (producers fused in) with the interpreter's sequential sum:
/// bitwise equal for f32, f64 and i32, batch dims and contracting dims in any position, a
/// preferred result type, and a larger one (a gemm step, within the documented gemm difference).
#[test]
fn small_dots_are_bitwise_equal_to_the_interpreter() {
    struct Case {
        l: &'static [usize],
        r: &'static [usize],
        lc: &'static [usize],
        rc: &'static [usize],
        lb: &'static [usize],
        rb: &'static [usize],
    }
    let cases = [
        // W4-like: [B, 4] · [4] per environment; W2-like: [120, 10] · [10].
        Case { l: &[7, 4], r: &[4], lc: &[1], rc: &[0], lb: &[], rb: &[] },
        Case { l: &[120, 10], r: &[10], lc: &[1], rc: &[0], lb: &[], rb: &[] },
        // Contracting first on the lhs, last on the rhs; two contracting dims (4·3 = 12).
        Case { l: &[5, 6], r: &[3, 5], lc: &[0], rc: &[1], lb: &[], rb: &[] },
        Case { l: &[4, 2, 3], r: &[3, 7, 4], lc: &[0, 2], rc: &[2, 0], lb: &[], rb: &[] },
        // Batch dims not in front.
        Case { l: &[6, 2, 5], r: &[5, 2, 3], lc: &[2], rc: &[0], lb: &[1], rb: &[1] },
        Case { l: &[3, 16], r: &[16, 3], lc: &[1], rc: &[0], lb: &[0], rb: &[1] },
    ];
    for c in &cases {
        for (dt, pref) in
            [(DType::F32, None), (DType::F64, None), (DType::I32, None), (DType::F32, Some(DType::F64))]
        {
            let mut f = Function::new();
            let x = f.add_param(TensorType::new(dt, Shape::new(c.l)));
            let y = f.add_param(TensorType::new(dt, Shape::new(c.r)));
            // A fused producer on each side.
            let x2 = push(&mut f, Prim::Binary(BinaryOp::Add), &[x, x]);
            let ny = push(&mut f, Prim::Unary(UnaryOp::Neg), &[y]);
            let d = push(
                &mut f,
                Prim::DotGeneral {
                    lhs_contracting: c.lc.to_vec(),
                    rhs_contracting: c.rc.to_vec(),
                    lhs_batch: c.lb.to_vec(),
                    rhs_batch: c.rb.to_vec(),
                    preferred_element_type: pref,
                },
                &[x2, ny],
            );
            f.outputs.push(d);
            let arr = |dims: &[usize], seed: u64| {
                let n: usize = dims.iter().product();
                let v = f32s(n, seed);
                match dt {
                    DType::F32 => Array::from_vec(dims, v),
                    DType::F64 => {
                        Array::from_vec(dims, v.iter().map(|&a| a as f64 * 1.1).collect::<Vec<_>>())
                    }
                    _ => Array::from_vec(dims, v.iter().map(|&a| (a * 1e4) as i32).collect::<Vec<_>>()),
                }
            };
            let (got, want) = both(&f, &[arr(c.l, 1), arr(c.r, 2)]);
            assert!(got[0].bitwise_eq(&want[0]), "{dt:?}\n{f}\n jit  {:?}\n want {:?}", got[0], want[0]);
        }
    }
}
