//! The vector path (`src/codegen/vector.rs`) against the interpreter: row lengths around the vector
//! width, the unroll step and the transcendental tile (1, 3, 4, 5, 7, 8, 17, 1000, 1003), f32, f64
//! and i32, inputs full of NaN, ±inf, ±0.0 and subnormals, broadcast and sliced leaves, reductions
//! over inner and outer axes, transcendentals alone and chained.
//!
//! Equality is bitwise (NaN == NaN) except the documented tolerances of `common`: single
//! transcendentals within vmath's ulp of the interpreter (and chained ones bitwise against
//! `common::eval_vmath`, the interpreter with vmath's functions), innermost-axis float sums and
//! products within the reassociation bound.

mod common;

use kiln_backend_cpu::compile;
use kiln_ir::*;

const SIZES: [usize; 11] = [1, 3, 4, 5, 7, 8, 17, 1000, 1003, 1024, 4099];

/// `n` values of `dt`: every fifth a special (NaN, ±inf, ±0, ±subnormal, huge), the others spread
/// over [-10, 10) (ints: edge values and small numbers, zero included).
fn values(dt: DType, n: usize, seed: usize) -> Vec<f64> {
    let special_f = [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 0.0, -0.0, 1e-40, -1e-41, 3e38, -2.5, 0.5];
    let special_d =
        [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 0.0, -0.0, 5e-320, -4e-310, 1e308, -2.5, 0.5];
    let special_i = [0.0, -1.0, 1.0, i32::MIN as f64, i32::MAX as f64, 31.0, 32.0, -7.0, 7.0, 3.0];
    (0..n)
        .map(|i| {
            let k = i + 7 * seed;
            let u = ((k as f64 + 0.5) * 0.618_033_988_749_895).fract();
            match (dt, k % 5) {
                (DType::F32, 0) => special_f[(k / 5) % 10],
                (DType::F64, 0) => special_d[(k / 5) % 10],
                (DType::I32, 0) => special_i[(k / 5) % 10],
                (DType::I32, _) => (40.0 * u - 20.0).round(),
                _ => 20.0 * u - 10.0,
            }
        })
        .collect()
}

fn array(dt: DType, dims: &[usize], seed: usize) -> Array {
    let n = dims.iter().product();
    let v = values(dt, n, seed);
    match dt {
        DType::F32 => Array::from_vec(dims, v.iter().map(|&x| x as f32).collect::<Vec<_>>()),
        DType::F64 => Array::from_vec(dims, v),
        DType::I32 => Array::from_vec(dims, v.iter().map(|&x| x as i32).collect::<Vec<_>>()),
        _ => unreachable!("test dtypes"),
    }
}

fn push(f: &mut Function, p: Prim, ins: &[Var]) -> Var {
    f.push(p, ins, None).unwrap()[0]
}

fn bin(f: &mut Function, op: BinaryOp, x: Var, y: Var) -> Var {
    push(f, Prim::Binary(op), &[x, y])
}

fn un(f: &mut Function, op: UnaryOp, x: Var) -> Var {
    push(f, Prim::Unary(op), &[x])
}

/// JIT result and the interpreter's.
fn both(f: &Function, args: &[Array]) -> (Vec<Array>, Vec<Array>) {
    let exe = compile(f).unwrap_or_else(|e| panic!("compile: {e}\n{f}"));
    let got = exe.run(args).expect("run");
    (got, eval(f, args).expect("interpreter"))
}

fn assert_bitwise(f: &Function, args: &[Array]) {
    let (got, want) = both(f, args);
    for (g, w) in got.iter().zip(&want) {
        assert!(g.bitwise_eq(w), "{f}\n jit  {g:?}\n want {w:?}");
    }
}

/// Bitwise equal to the interpreter compiled for 1..=`threads` threads, every kernel with more
/// than one row split over them (`min_task_work: Some(0)`).
fn assert_bitwise_split(f: &Function, args: &[Array], threads: usize) {
    use kiln_backend_cpu::{CompileOptions, compile_with};
    let want = eval(f, args).expect("interpreter");
    for t in 1..=threads {
        let o = CompileOptions { threads: Some(t), min_task_work: Some(0), ..CompileOptions::default() };
        let got = compile_with(f, &o).unwrap().run(args).unwrap();
        for (g, w) in got.iter().zip(&want) {
            assert!(g.bitwise_eq(w), "threads {t}\n{f}\n jit  {g:?}\n want {w:?}");
        }
    }
}

/// Elementwise ops with NaN/±0 rules (max, min, sign, round, select by compare, rsqrt, ...).
fn elementwise(f: &mut Function, dt: DType, a: Var, b: Var, c: Var) -> Var {
    if dt == DType::I32 {
        // (a*b + c) ^ max(a, c), min with a lane-wise division by values including 0 and -1,
        // shifts by amounts past 31, sign and abs of i32::MIN.
        let ab = bin(f, BinaryOp::Mul, a, b);
        let s = bin(f, BinaryOp::Add, ab, c);
        let m = bin(f, BinaryOp::Max, a, c);
        let x = bin(f, BinaryOp::Xor, s, m);
        let d = bin(f, BinaryOp::Div, x, b);
        let r = bin(f, BinaryOp::Rem, a, b);
        let sh = bin(f, BinaryOp::ShiftLeft, d, b);
        let sg = un(f, UnaryOp::Sign, r);
        let ab2 = un(f, UnaryOp::Abs, a);
        let t = bin(f, BinaryOp::Sub, sh, sg);
        let lt = push(f, Prim::Compare(CompareOp::Lt), &[t, ab2]);
        let mn = bin(f, BinaryOp::Min, t, ab2);
        return push(f, Prim::Select, &[lt, mn, r]);
    }
    // select(a < b, max(a, b) * c, min(a, round(b))) - rsqrt(|c|) + sign(a) / floor(b), then
    // max/min against -0.0 and NaN-producing pieces.
    let lt = push(f, Prim::Compare(CompareOp::Lt), &[a, b]);
    let mx = bin(f, BinaryOp::Max, a, b);
    let mc = bin(f, BinaryOp::Mul, mx, c);
    let rb = un(f, UnaryOp::Round, b);
    let mn = bin(f, BinaryOp::Min, a, rb);
    let sel = push(f, Prim::Select, &[lt, mc, mn]);
    let ac = un(f, UnaryOp::Abs, c);
    let rs = un(f, UnaryOp::Rsqrt, ac);
    let d = bin(f, BinaryOp::Sub, sel, rs);
    let sg = un(f, UnaryOp::Sign, a);
    let fl = un(f, UnaryOp::Floor, b);
    let q = bin(f, BinaryOp::Div, sg, fl);
    let e = bin(f, BinaryOp::Add, d, q);
    let re = un(f, UnaryOp::RoundEven, e);
    let fin = un(f, UnaryOp::IsFinite, re);
    let m2 = bin(f, BinaryOp::Min, re, c);
    let neg = un(f, UnaryOp::Neg, b);
    push(f, Prim::Select, &[fin, m2, neg])
}

#[test]
fn elementwise_chains_are_bitwise() {
    for dt in [DType::F32, DType::F64, DType::I32] {
        for n in SIZES {
            for dims in [vec![n], vec![3, n]] {
                let mut f = Function::new();
                let p: Vec<Var> =
                    (0..3).map(|_| f.add_param(TensorType::new(dt, Shape::new(&dims)))).collect();
                let out = elementwise(&mut f, dt, p[0], p[1], p[2]);
                f.outputs.push(out);
                let args: Vec<Array> = (0..3).map(|k| array(dt, &dims, k)).collect();
                assert_bitwise(&f, &args);
            }
        }
    }
}

#[test]
fn broadcast_iota_slice_transpose_reshape_are_bitwise() {
    for dt in [DType::F32, DType::F64, DType::I32] {
        for n in SIZES {
            // out[i, j] = x[i, j+1] (slice) * y[j] (broadcast along rows) + z[i] (lane-invariant)
            //           + s (scalar) + iota_j + transpose(w)[i, j] + reshape(v)[i, j]
            let mut f = Function::new();
            let x = f.add_param(TensorType::new(dt, Shape::new(&[4, n + 2])));
            let y = f.add_param(TensorType::new(dt, Shape::new(&[n])));
            let z = f.add_param(TensorType::new(dt, Shape::new(&[3])));
            let s = f.add_param(TensorType::scalar(dt));
            let w = f.add_param(TensorType::new(dt, Shape::new(&[3, 1, n])));
            let v = f.add_param(TensorType::new(dt, Shape::new(&[3, n])));
            let sh = Shape::new(&[3, n]);
            let xs = push(
                &mut f,
                Prim::Slice { start: vec![1, 1], limit: vec![4, n + 1], strides: vec![1, 1] },
                &[x],
            );
            let yb =
                push(&mut f, Prim::BroadcastInDim { shape: sh.clone(), broadcast_dimensions: vec![1] }, &[y]);
            let zb =
                push(&mut f, Prim::BroadcastInDim { shape: sh.clone(), broadcast_dimensions: vec![0] }, &[z]);
            let sb =
                push(&mut f, Prim::BroadcastInDim { shape: sh.clone(), broadcast_dimensions: vec![] }, &[s]);
            let io = push(&mut f, Prim::Iota { dtype: dt, shape: sh.clone(), dimension: 1 }, &[]);
            let ir = push(&mut f, Prim::Iota { dtype: dt, shape: sh.clone(), dimension: 0 }, &[]);
            let wt = push(&mut f, Prim::Transpose { permutation: vec![1, 0, 2] }, &[w]);
            let wr = push(&mut f, Prim::Reshape { new_sizes: sh.clone() }, &[wt]);
            let m = bin(&mut f, BinaryOp::Mul, xs, yb);
            let mut acc = bin(&mut f, BinaryOp::Add, m, zb);
            for t in [sb, io, ir, wr, v] {
                acc = bin(&mut f, BinaryOp::Add, acc, t);
            }
            f.outputs.push(acc);
            let args = [
                array(dt, &[4, n + 2], 0),
                array(dt, &[n], 1),
                array(dt, &[3], 2),
                array(dt, &[], 3),
                array(dt, &[3, 1, n], 4),
                array(dt, &[3, n], 5),
            ];
            assert_bitwise(&f, &args);
        }
    }
}

#[test]
fn conversions_and_masks_are_bitwise() {
    for n in SIZES {
        // f32 -> i32 (saturating, NaN -> 0) -> u32 -> f32; bitcast f32 -> i32; (x > 0) as f32 and i32.
        let mut f = Function::new();
        let x = f.add_param(TensorType::new(DType::F32, Shape::new(&[2, n])));
        let i = push(&mut f, Prim::ConvertElementType { dtype: DType::I32 }, &[x]);
        let u = push(&mut f, Prim::ConvertElementType { dtype: DType::U32 }, &[x]);
        let uf = push(&mut f, Prim::ConvertElementType { dtype: DType::F32 }, &[u]);
        let bits = push(&mut f, Prim::BitcastConvertType { dtype: DType::I32 }, &[x]);
        let zero = f.add_const(Array::scalar(0.0f32));
        let zb = push(
            &mut f,
            Prim::BroadcastInDim { shape: Shape::new(&[2, n]), broadcast_dimensions: vec![] },
            &[zero],
        );
        let gt = push(&mut f, Prim::Compare(CompareOp::Gt), &[x, zb]);
        let nt = un(&mut f, UnaryOp::Not, gt);
        let gf = push(&mut f, Prim::ConvertElementType { dtype: DType::F32 }, &[nt]);
        let gi = push(&mut f, Prim::ConvertElementType { dtype: DType::I32 }, &[gt]);
        let sum = bin(&mut f, BinaryOp::Add, uf, gf);
        let isum = bin(&mut f, BinaryOp::Add, i, gi);
        let ix = bin(&mut f, BinaryOp::Xor, isum, bits);
        f.outputs.extend([sum, ix]);
        assert_bitwise(&f, &[array(DType::F32, &[2, n], 0)]);
    }
}

/// Rows whose length leaves a remainder after the unrolled vector steps (every length 4..=24): the
/// remainder runs as single vectors, the last one overlapping the previous, which stores again
/// elements it recomputes with the same bits. Rank-1 outputs split over 1-4 threads (each range's
/// last vector stays inside it) and rank-2 rows with a row-invariant factor, f32 and f64.
#[test]
fn remainders_as_overlapping_vectors_are_bitwise() {
    for dt in [DType::F32, DType::F64] {
        for n in 4..=24usize {
            for dims in [vec![n], vec![3, n]] {
                let mut f = Function::new();
                let x = f.add_param(TensorType::new(dt, Shape::new(&dims)));
                let r = f.add_param(TensorType::new(dt, Shape::new(&dims[..1])));
                let rb = push(
                    &mut f,
                    Prim::BroadcastInDim { shape: Shape::new(&dims), broadcast_dimensions: vec![0] },
                    &[r],
                );
                let sq = bin(&mut f, BinaryOp::Mul, x, x);
                let out = bin(&mut f, BinaryOp::Sub, sq, rb);
                let m = bin(&mut f, BinaryOp::Max, out, x);
                f.outputs.push(m);
                let args = [array(dt, &dims, 1), array(dt, &dims[..1], 2)];
                assert_bitwise_split(&f, &args, 4);
            }
        }
    }
}

/// Lane-invariant values a row's header computes once for all its vectors (`vector::Hoist`), next
/// to every construct whose walk could reach them differently: a chain with a division broadcast
/// along the rows, a concatenate and a pad along the last axis (each segment its own header), a
/// sum over an outer axis whose operand splats a value of the reduced index (computed in the
/// loop), a rank-0 predicate, and a rank-1 output split over 1-3 threads around a scalar factor.
#[test]
fn lane_invariant_values_computed_once_per_row_are_bitwise() {
    for dt in [DType::F32, DType::F64, DType::I32] {
        for n in SIZES {
            let m = n + 2;
            let ty = |d: &[usize]| TensorType::new(dt, Shape::new(d));
            let mut f = Function::new();
            let x = f.add_param(ty(&[3, n]));
            let z = f.add_param(ty(&[3]));
            let u = f.add_param(ty(&[3]));
            let y = f.add_param(ty(&[4, 3, m]));
            let q = f.add_param(ty(&[4]));
            let s = f.add_param(ty(&[]));
            let v = f.add_param(ty(&[3, n]));
            let bcast = |f: &mut Function, x: Var, dims: &[usize], bd: Vec<usize>| {
                push(f, Prim::BroadcastInDim { shape: Shape::new(dims), broadcast_dimensions: bd }, &[x])
            };
            // zc = z*z / (z - s), per row.
            let zz = bin(&mut f, BinaryOp::Mul, z, z);
            let sb = bcast(&mut f, s, &[3], vec![]);
            let zs = bin(&mut f, BinaryOp::Sub, z, sb);
            let zc = bin(&mut f, BinaryOp::Div, zz, zs);
            // a = concat([x * zc[:, None], u[:, None] (2 columns)], 1)
            let zcb = bcast(&mut f, zc, &[3, n], vec![0]);
            let xz = bin(&mut f, BinaryOp::Mul, x, zcb);
            let ub = bcast(&mut f, u, &[3, 2], vec![0]);
            let a = push(&mut f, Prim::Concatenate { dimension: 1 }, &[xz, ub]);
            // b = sum_k y[k] * q[k]
            let qb = bcast(&mut f, q, &[4, 3, m], vec![0]);
            let yq = bin(&mut f, BinaryOp::Mul, y, qb);
            let b = push(&mut f, Prim::Reduce { op: ReduceOp::Sum, axes: vec![0] }, &[yq]);
            // select(s < 0, a, b) + pad(v, s) * (zc - u)[:, None]
            let zero = match dt {
                DType::I32 => f.add_const(Array::scalar(0i32)),
                DType::F32 => f.add_const(Array::scalar(0.0f32)),
                _ => f.add_const(Array::scalar(0.0f64)),
            };
            let p = push(&mut f, Prim::Compare(CompareOp::Lt), &[s, zero]);
            let sel = push(&mut f, Prim::Select, &[p, a, b]);
            let pad =
                push(&mut f, Prim::Pad { low: vec![0, 1], high: vec![0, 1], interior: vec![0, 0] }, &[v, s]);
            let zu = bin(&mut f, BinaryOp::Sub, zc, u);
            let zub = bcast(&mut f, zu, &[3, m], vec![0]);
            let pz = bin(&mut f, BinaryOp::Mul, pad, zub);
            let out = bin(&mut f, BinaryOp::Add, sel, pz);
            f.outputs.push(out);
            // s of both signs: both arms of the select.
            let s0 = array(dt, &[], 5);
            let s1 = eval(&neg_of(dt), std::slice::from_ref(&s0)).unwrap().remove(0);
            for s in [s0, s1] {
                let args = [
                    array(dt, &[3, n], 0),
                    array(dt, &[3], 1),
                    array(dt, &[3], 2),
                    array(dt, &[4, 3, m], 3),
                    array(dt, &[4], 4),
                    s,
                    array(dt, &[3, n], 6),
                ];
                assert_bitwise(&f, &args);
            }
            // Rank 1, split over threads: x * (s*s - s).
            let mut g = Function::new();
            let x = g.add_param(ty(&[n]));
            let s = g.add_param(ty(&[]));
            let ss = bin(&mut g, BinaryOp::Mul, s, s);
            let c = bin(&mut g, BinaryOp::Sub, ss, s);
            let cb = bcast(&mut g, c, &[n], vec![]);
            let out = bin(&mut g, BinaryOp::Mul, x, cb);
            g.outputs.push(out);
            let args = [array(dt, &[n], 7), array(dt, &[], 8)];
            assert_bitwise_split(&g, &args, 3);
        }
    }
}

/// `-x` of a rank-0 `dt` (the other sign of a predicate's operand).
fn neg_of(dt: DType) -> Function {
    let mut f = Function::new();
    let x = f.add_param(TensorType::new(dt, Shape::new(&[])));
    let y = un(&mut f, UnaryOp::Neg, x);
    f.outputs.push(y);
    f
}

/// Bool leaves (a residual mask, as W2's backward step reads) on the vector path: widened from
/// bytes to lane masks for f32 (4 lanes) and f64 (2 lanes), lane-varying and broadcast along an
/// outer axis, in selects, logical ops and conversions, next to a transcendental tile.
#[test]
fn bool_leaves_are_bitwise() {
    for dt in [DType::F32, DType::F64] {
        for n in SIZES {
            let mut f = Function::new();
            let m = f.add_param(TensorType::new(DType::Bool, Shape::new(&[2, n])));
            let row = f.add_param(TensorType::new(DType::Bool, Shape::new(&[n])));
            let x = f.add_param(TensorType::new(dt, Shape::new(&[2, n])));
            let rows = push(
                &mut f,
                Prim::BroadcastInDim { shape: Shape::new(&[2, n]), broadcast_dimensions: vec![1] },
                &[row],
            );
            let both_masks = bin(&mut f, BinaryOp::And, m, rows);
            let neither = un(&mut f, UnaryOp::Not, both_masks);
            let e = un(&mut f, UnaryOp::Exp, x);
            let picked = push(&mut f, Prim::Select, &[neither, x, e]);
            let as_num = push(&mut f, Prim::ConvertElementType { dtype: dt }, &[m]);
            let out = bin(&mut f, BinaryOp::Add, picked, as_num);
            f.outputs.push(out);
            let bools = |dims: &[usize], seed: usize| -> Array {
                let len = dims.iter().product();
                let v: Vec<bool> = (0..len).map(|i| (i * 7 + seed) % 3 != 0).collect();
                Array::from_vec(dims, v)
            };
            let args = [bools(&[2, n], 1), bools(&[n], 2), array(dt, &[2, n], 3)];
            // exp is within vmath's ulp of the interpreter's; compare against the interpreter with
            // vmath's functions, bitwise.
            let exe = compile(&f).unwrap_or_else(|e| panic!("compile: {e}\n{f}"));
            let got = exe.run(&args).expect("run");
            let want = common::eval_vmath(&f, &args);
            assert!(got[0].bitwise_eq(&want[0]), "{dt} n={n}\n jit  {:?}\n want {:?}", got[0], want[0]);
        }
    }
}

#[test]
fn reductions_over_inner_and_outer_axes() {
    for dt in [DType::F32, DType::F64, DType::I32] {
        for n in SIZES {
            for op in ReduceOp::ALL {
                for axes in [vec![1], vec![0], vec![0, 1], vec![1, 2], vec![0, 2]] {
                    let dims = [3, 2, n];
                    let axes: Vec<usize> = axes
                        .iter()
                        .map(|&a| {
                            if a == 1 {
                                2
                            } else if a == 2 {
                                1
                            } else {
                                0
                            }
                        })
                        .collect();
                    // x * 1.5 fused into the reduction (so the reduced value is computed, not loaded).
                    let mut f = Function::new();
                    let x = f.add_param(TensorType::new(dt, Shape::new(&dims)));
                    let y = f.add_param(TensorType::new(dt, Shape::new(&dims)));
                    let m = bin(&mut f, BinaryOp::Mul, x, y);
                    let r = push(&mut f, Prim::Reduce { op, axes: axes.clone() }, &[m]);
                    f.outputs.push(r);
                    let args = [array(dt, &dims, 0), array(dt, &dims, 1)];
                    let (got, want) = both(&f, &args);
                    let prod =
                        eval_prim(&Prim::Binary(BinaryOp::Mul), &[&args[0], &args[1]]).unwrap().remove(0);
                    assert!(
                        common::reduction_close(&got[0], &want[0], &prod, op, &axes),
                        "{op:?} over {axes:?} of {dt:?}[3, 2, {n}]\n jit  {:?}\n want {:?}",
                        got[0],
                        want[0]
                    );
                }
            }
        }
    }
}

#[test]
fn finite_row_sums_are_within_the_reassociation_bound_and_max_min_exact() {
    // Ordinary values only, so the sums are finite and the bound is the one that matters.
    for dt in [DType::F32, DType::F64] {
        for n in [17usize, 1000, 1003] {
            let v: Vec<f64> = (0..4 * n).map(|i| ((i as f64 * 0.754_877_666).fract() - 0.3) * 1e3).collect();
            let x = match dt {
                DType::F32 => Array::from_vec(&[4, n], v.iter().map(|&a| a as f32).collect::<Vec<_>>()),
                _ => Array::from_vec(&[4, n], v.clone()),
            };
            for op in ReduceOp::ALL {
                let mut f = Function::new();
                let p = f.add_param(x.ty());
                let r = push(&mut f, Prim::Reduce { op, axes: vec![1] }, &[p]);
                f.outputs.push(r);
                let (got, want) = both(&f, std::slice::from_ref(&x));
                if matches!(op, ReduceOp::Max | ReduceOp::Min) {
                    assert!(got[0].bitwise_eq(&want[0]), "{op:?}: {:?} vs {:?}", got[0], want[0]);
                } else if op == ReduceOp::Sum {
                    assert!(
                        common::reduction_close(&got[0], &want[0], &x, op, &[1]),
                        "{:?} vs {:?}",
                        got[0],
                        want[0]
                    );
                    // And against the exact sum (f64 accumulation of the f32 inputs, or a compensated
                    // sum for f64): within the one-sided bound (n-1)·ε·Σ|x|.
                    let xs = x.to_f64_vec();
                    for (row, g) in got[0].to_f64_vec().iter().enumerate() {
                        let vals = &xs[row * n..(row + 1) * n];
                        let (mut s, mut c) = (0.0f64, 0.0f64);
                        for &a in vals {
                            let y = a - c;
                            let t = s + y;
                            c = (t - s) - y;
                            s = t;
                        }
                        let mag: f64 = vals.iter().map(|a| a.abs()).sum();
                        let eps = if dt == DType::F32 { 2f64.powi(-24) } else { 2f64.powi(-53) };
                        assert!(
                            (g - s).abs() <= (n as f64 - 1.0) * eps * mag + 1e-300,
                            "row {row}: {g} vs exact {s}"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn f32_expm1_and_logistic_at_their_largest_distance_from_the_interpreter() {
    // Inputs where the f32 vmath result and the interpreter's (glibc `expm1f`; e/(1 + e) in f32)
    // are furthest apart over every f32: 2 and 3 ulp, the documented bounds
    // (`common::transcendental_ulps`). expm1(0.34765977) = 0.41575048229…: vmath 0.41575044,
    // glibc 0.4157505; logistic(-1.9531342) = 0.1242120098…: vmath 0.12421202, interpreter 0.124212.
    for (op, x, jit, interp, ulps) in [
        (UnaryOp::Expm1, 0.34765977f32, 0.41575044f32, 0.4157505f32, 2),
        (UnaryOp::Logistic, -1.9531342, 0.12421202, 0.124212, 3),
    ] {
        let mut f = Function::new();
        let p = f.add_param(TensorType::new(DType::F32, Shape::new(&[1])));
        let y = un(&mut f, op, p);
        f.outputs.push(y);
        let (got, want) = both(&f, &[Array::from_vec(&[1], vec![x])]);
        assert_eq!((got[0].to_vec::<f32>().unwrap()[0], want[0].to_vec::<f32>().unwrap()[0]), (jit, interp));
        assert_eq!(common::ulps(jit as f64, interp as f64, DType::F32), ulps);
        assert_eq!(common::transcendental_ulps(op, DType::F32), ulps);
    }
}

#[test]
fn transcendentals_within_vmath_ulp_of_the_interpreter() {
    let ops = [
        UnaryOp::Exp,
        UnaryOp::Expm1,
        UnaryOp::Log,
        UnaryOp::Log1p,
        UnaryOp::Sin,
        UnaryOp::Cos,
        UnaryOp::Tanh,
        UnaryOp::Logistic,
        UnaryOp::Erf,
        UnaryOp::ErfInv,
    ];
    for dt in [DType::F32, DType::F64] {
        for n in SIZES {
            for op in ops {
                // Row of n and a (2, n) array; the scalar tail and the tiles must agree.
                for dims in [vec![n], vec![2, n]] {
                    let mut f = Function::new();
                    let x = f.add_param(TensorType::new(dt, Shape::new(&dims)));
                    let y = un(&mut f, op, x);
                    f.outputs.push(y);
                    let args = [array(dt, &dims, 0)];
                    let (got, want) = both(&f, &args);
                    assert!(
                        common::within_ulps(&got[0], &want[0], common::transcendental_ulps(op, dt)),
                        "{op:?} {dt:?}{dims:?}\n jit  {:?}\n want {:?}",
                        got[0],
                        want[0]
                    );
                    // Bitwise against vmath itself (the scalar tail uses the same tile functions).
                    assert!(
                        got[0].bitwise_eq(&common::eval_vmath(&f, &args)[0]),
                        "{op:?} {dt:?}{dims:?} vs vmath"
                    );
                }
            }
        }
    }
}

#[test]
fn chained_transcendentals_match_vmath_bitwise() {
    for dt in [DType::F32, DType::F64] {
        for n in SIZES {
            // exp(sin(x)) + tanh(x) * log(|y|): two tile passes and a final one; then
            // reduce_sum over the outer axis of logistic(x) (spill calls inside a reduction loop)
            // and max over the inner axis of exp(x) (tiles inside an innermost reduction).
            let dims = [3, n];
            let mut f = Function::new();
            let x = f.add_param(TensorType::new(dt, Shape::new(&dims)));
            let y = f.add_param(TensorType::new(dt, Shape::new(&dims)));
            let s = un(&mut f, UnaryOp::Sin, x);
            let es = un(&mut f, UnaryOp::Exp, s);
            let t = un(&mut f, UnaryOp::Tanh, x);
            let ay = un(&mut f, UnaryOp::Abs, y);
            let l = un(&mut f, UnaryOp::Log, ay);
            let tl = bin(&mut f, BinaryOp::Mul, t, l);
            let out = bin(&mut f, BinaryOp::Add, es, tl);
            let lg = un(&mut f, UnaryOp::Logistic, x);
            let col = push(&mut f, Prim::Reduce { op: ReduceOp::Sum, axes: vec![0] }, &[lg]);
            let ex = un(&mut f, UnaryOp::Exp, y);
            let rowmax = push(&mut f, Prim::Reduce { op: ReduceOp::Max, axes: vec![1] }, &[ex]);
            f.outputs.extend([out, col, rowmax]);
            let args = [array(dt, &dims, 0), array(dt, &dims, 1)];
            let got = compile(&f).unwrap().run(&args).unwrap();
            let want = common::eval_vmath(&f, &args);
            for (g, w) in got.iter().zip(&want) {
                assert!(g.bitwise_eq(w), "{dt:?}[3, {n}]\n jit  {g:?}\n want {w:?}");
            }
        }
    }
}

/// `dims` of `dt` without specials: values in [-10, 10).
fn ordinary(dt: DType, dims: &[usize], seed: usize) -> Array {
    let n: usize = dims.iter().product();
    let v: Vec<f64> = (0..n)
        .map(|i| ((i as f64 + 0.5 + seed as f64) * 0.618_033_988_749_895).fract() * 20.0 - 10.0)
        .collect();
    match dt {
        DType::F32 => Array::from_vec(dims, v.iter().map(|&x| x as f32).collect::<Vec<_>>()),
        _ => Array::from_vec(dims, v),
    }
}

#[test]
fn matrix_vector_dots_on_lanes_are_bitwise() {
    // Output lanes along a free axis of one operand: the rhs's rows, strided (W4's `W·s` over a
    // [B, 4] state); the lhs's rows, strided; the rhs's contiguous last axis, as a leaf and as a
    // fused product. Row lengths 37 and 1003 leave scalar remainders.
    for dt in [DType::F32, DType::F64] {
        for n in [37usize, 1003] {
            let dot = |lc: usize, rc: usize| Prim::DotGeneral {
                lhs_contracting: vec![lc],
                rhs_contracting: vec![rc],
                lhs_batch: vec![],
                rhs_batch: vec![],
                preferred_element_type: None,
            };
            let ty = |d: &[usize]| TensorType::new(dt, Shape::new(d));
            let mut cases = Vec::new();
            for (lhs, rhs, lc, rc) in
                [(vec![4], vec![n, 4], 0, 1), (vec![n, 5], vec![5], 1, 0), (vec![6], vec![6, n], 0, 0)]
            {
                let mut f = Function::new();
                let (a, b) = (f.add_param(ty(&lhs)), f.add_param(ty(&rhs)));
                let d = push(&mut f, dot(lc, rc), &[a, b]);
                f.outputs.push(d);
                cases.push((f, vec![lhs, rhs]));
            }
            let mut f = Function::new();
            let (a, x, y) = (f.add_param(ty(&[6])), f.add_param(ty(&[6, n])), f.add_param(ty(&[6, n])));
            let m = bin(&mut f, BinaryOp::Mul, x, y);
            let d = push(&mut f, dot(0, 0), &[a, m]);
            f.outputs.push(d);
            cases.push((f, vec![vec![6], vec![6, n], vec![6, n]]));
            for (f, shapes) in &cases {
                for special in [true, false] {
                    let args: Vec<Array> = shapes
                        .iter()
                        .enumerate()
                        .map(|(k, s)| if special { array(dt, s, k) } else { ordinary(dt, s, k) })
                        .collect();
                    assert_bitwise(f, &args);
                }
            }
        }
    }
}

#[test]
fn outer_axis_sums_of_a_cache_line_per_pass_fold_each_column_alone() {
    // reduce over axis 0 of [600, 37]: columns 0..32 in groups of four vectors (`vreduce_group`),
    // the last 5 by the scalar remainder; each must be bitwise the sum of its column alone
    // (a [600, 1] slice, one scalar element). 600 rows: blocked-pairwise sums (over 256).
    for dt in [DType::F32, DType::F64, DType::I32] {
        for op in [ReduceOp::Sum, ReduceOp::Max] {
            let mut f = Function::new();
            let x = f.add_param(TensorType::new(dt, Shape::new(&[600, 37])));
            let all = push(&mut f, Prim::Reduce { op, axes: vec![0] }, &[x]);
            f.outputs.push(all);
            // And of a transcendental (each group member calls its own spill).
            if dt.is_float() {
                let s = un(&mut f, UnaryOp::Sin, x);
                let all_sin = push(&mut f, Prim::Reduce { op, axes: vec![0] }, &[s]);
                f.outputs.push(all_sin);
            }
            for j in [0usize, 3, 15, 16, 31, 32, 36] {
                let col = Prim::Slice { start: vec![0, j], limit: vec![600, j + 1], strides: vec![1, 1] };
                let c = push(&mut f, col, &[x]);
                let r = push(&mut f, Prim::Reduce { op, axes: vec![0] }, &[c]);
                f.outputs.push(r);
            }
            for special in [true, false] {
                let arg = if special || dt == DType::I32 {
                    array(dt, &[600, 37], 3)
                } else {
                    ordinary(dt, &[600, 37], 3)
                };
                let got = compile(&f).unwrap().run(std::slice::from_ref(&arg)).unwrap();
                let all = got[0].to_f64_vec();
                if dt.is_float() {
                    // Bitwise the interpreter run with vmath's sin (`common::eval_vmath`) where the
                    // sums are exact-order (max); sums: within the pairwise bound of that.
                    let want = common::eval_vmath(&f, std::slice::from_ref(&arg));
                    let (g, w) = (got[1].to_f64_vec(), want[1].to_f64_vec());
                    for (a, b) in g.iter().zip(&w) {
                        let close = a.to_bits() == b.to_bits()
                            || a.is_nan() && b.is_nan()
                            || op == ReduceOp::Sum && (a - b).abs() <= 1e-4 * b.abs().max(1.0);
                        assert!(close, "{op:?} {dt:?} of sin: {a} vs {b}");
                    }
                }
                for (k, j) in [0usize, 3, 15, 16, 31, 32, 36].into_iter().enumerate() {
                    let one = got[k + 1 + usize::from(dt.is_float())].to_f64_vec()[0];
                    assert!(
                        all[j].to_bits() == one.to_bits() || all[j].is_nan() && one.is_nan(),
                        "{op:?} {dt:?} column {j}: {} grouped vs {one} alone",
                        all[j]
                    );
                }
            }
        }
    }
}

#[test]
fn long_reductions_over_outer_axes_are_bitwise_the_interpreters_blocked_pairwise() {
    // The interpreter blocks long float sums and products exactly as the kernels do (rows of the
    // last reduced axis cut into 256-element blocks, merged by a binary counter), so reductions
    // that keep the innermost axis stay bitwise equal past 256 elements: one block per row of 9
    // (40 rows), and 256/256/188-element blocks along an axis of 700.
    for dt in [DType::F32, DType::F64] {
        for op in [ReduceOp::Sum, ReduceOp::Prod] {
            for (dims, axes) in
                [(vec![700, 5], vec![0]), (vec![40, 9, 3], vec![0, 1]), (vec![3, 300, 8], vec![0, 1])]
            {
                let mut f = Function::new();
                let x = f.add_param(TensorType::new(dt, Shape::new(&dims)));
                // Arithmetic only (transcendental tiles are within ulps, not bitwise): x/256 + 1, near
                // 1 for products (no overflow), and x/256 for sums.
                let scalar = |f: &mut Function, v: f64| {
                    let c = f.add_const(match dt {
                        DType::F32 => Array::scalar(v as f32),
                        _ => Array::scalar(v),
                    });
                    let b = Prim::BroadcastInDim { shape: Shape::new(&dims), broadcast_dimensions: vec![] };
                    push(f, b, &[c])
                };
                let k = scalar(&mut f, 1.0 / 256.0);
                let small = bin(&mut f, BinaryOp::Mul, x, k);
                let input = if op == ReduceOp::Prod {
                    let one = scalar(&mut f, 1.0);
                    bin(&mut f, BinaryOp::Add, small, one)
                } else {
                    small
                };
                let r = push(&mut f, Prim::Reduce { op, axes: axes.clone() }, &[input]);
                f.outputs.push(r);
                // Finite data (`array` mixes in NaN, whose payload is not part of the claim).
                let n: usize = dims.iter().product();
                let v: Vec<f64> = (0..n).map(|i| ((i * 7919) % 1001) as f64 / 100.0 - 5.0).collect();
                let data = match dt {
                    DType::F32 => Array::from_vec(&dims, v.iter().map(|&x| x as f32).collect::<Vec<_>>()),
                    _ => Array::from_vec(&dims, v),
                };
                assert_bitwise(&f, &[data]);
            }
        }
    }
}
