//! JIT vs interpreter, driven by an exhaustive `match` over `Prim` (no `_` arm): every primitive and
//! op, every dtype it accepts, with NaN, ±inf, -0.0, subnormals and huge/negative indices.
//!
//! Equality is bitwise (NaN == NaN) except: `exp expm1 log log1p sin cos tanh logistic` come from
//! the vmath tile functions in the JIT and from std/libm in the interpreter, so they are compared
//! within vmath's documented ulp (`common::transcendental_ulps`: 1, or 2 for tanh and f32 expm1, 3
//! for f32 logistic; erf, erf_inv, pow, atan2, rem call the interpreter's own functions and stay
//! bitwise); float sums and
//! products over an innermost axis may be reassociated by the vector path's accumulators, so
//! reductions are compared within `common::reduction_close`'s documented bound (`2(n-1)·ε·Σ|x|`);
//! `dot_general` on floats goes through matrixmultiply (blocked, FMA), so it is compared within a
//! relative 1e-5 (f32) / 1e-12 (f64) tolerance.
//! Every primitive lowers; `sort`, `scatter`, `segment_sum` are also compared on hand-computed values.

mod common;

use kiln_backend_cpu::compile;
use kiln_ir::*;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Comparisons actually run (ill-typed dtype combinations are skipped, so count what remains).
static CHECKED: AtomicUsize = AtomicUsize::new(0);

const F32S: [f32; 12] =
    [0.0, -0.0, 1.5, -2.5, 0.5, f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 1e-40, -3.0e38, 7.0, -0.49999997];
const F64S: [f64; 12] =
    [0.0, -0.0, 1.5, -2.5, 0.5, f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 5e-320, -1.0e308, 7.0, 2.5];
const I32S: [i32; 12] = [0, 1, -1, i32::MIN, i32::MAX, 7, -7, 31, 32, 33, -32, 3];
const U32S: [u32; 12] = [0, 1, u32::MAX, 7, 31, 32, 33, 0x8000_0000, 3, 12345, 2, 64];
const BOOLS: [bool; 12] = [true, false, true, true, false, false, true, false, false, true, true, false];

/// Twelve values of `dt` shaped (3, 4); `rot` rotates them so two operands differ.
fn sample(dt: DType, rot: usize) -> Array {
    fn r<T: Copy>(v: &[T; 12], k: usize) -> Vec<T> {
        (0..12).map(|i| v[(i + k) % 12]).collect()
    }
    match dt {
        DType::F32 => Array::from_vec(&[3, 4], r(&F32S, rot)),
        DType::F64 => Array::from_vec(&[3, 4], r(&F64S, rot)),
        DType::I32 => Array::from_vec(&[3, 4], r(&I32S, rot)),
        DType::U32 => Array::from_vec(&[3, 4], r(&U32S, rot)),
        DType::Bool => Array::from_vec(&[3, 4], r(&BOOLS, rot)),
    }
}

/// Compiles `prim` applied to parameters typed like `args`, runs it, and compares with the interpreter.
fn check(prim: Prim, args: &[Array]) {
    let mut f = Function::new();
    let params: Vec<Var> = args.iter().map(|a| f.add_param(a.ty())).collect();
    let Ok(outs) = f.push(prim.clone(), &params, None) else { return }; // ill-typed combination: skip
    f.outputs.extend(outs);
    CHECKED.fetch_add(1, Ordering::Relaxed);
    let want = eval(&f, args).expect("interpreter");
    let exe = compile(&f).unwrap_or_else(|e| panic!("{}: {e}", prim.name()));
    let got = exe.run(args).expect("run");
    for (g, w) in got.iter().zip(&want) {
        let close = match (g, w, &prim) {
            (Array::F32(a), Array::F32(b), Prim::DotGeneral { .. }) => a.iter().zip(b).all(|(x, y)| {
                x == y || (x - y).abs() <= 1e-5 * y.abs().max(1.0) || (x.is_nan() && y.is_nan())
            }),
            (Array::F64(a), Array::F64(b), Prim::DotGeneral { .. }) => a.iter().zip(b).all(|(x, y)| {
                x == y || (x - y).abs() <= 1e-12 * y.abs().max(1.0) || (x.is_nan() && y.is_nan())
            }),
            (_, _, Prim::Unary(op)) => common::within_ulps(g, w, common::transcendental_ulps(*op, w.dtype())),
            (_, _, Prim::Reduce { op, axes }) => common::reduction_close(g, w, &args[0], *op, axes),
            _ => g.bitwise_eq(w),
        };
        assert!(
            close,
            "{} on {:?}:\n jit  {g:?}\n want {w:?}",
            prim.name(),
            args.iter().map(Array::ty).collect::<Vec<_>>()
        );
    }
}

fn idx(v: &[i32]) -> Array {
    Array::from_vec(&[v.len()], v.to_vec())
}

fn scalar_fn(dt: DType, build: impl FnOnce(&mut Function, Var) -> Var) -> Function {
    let mut f = Function::new();
    let x = f.add_param(TensorType::scalar(dt));
    let y = build(&mut f, x);
    f.outputs.push(y);
    f
}

/// One representative of every primitive (each op of each family); `run_case` exercises it.
fn representatives() -> Vec<Prim> {
    let mut v: Vec<Prim> = Vec::new();
    v.extend(UnaryOp::ALL.map(Prim::Unary));
    v.extend(BinaryOp::ALL.map(Prim::Binary));
    v.extend(CompareOp::ALL.map(Prim::Compare));
    v.extend([Prim::Select, Prim::Clamp]);
    v.extend(DType::ALL.map(|dtype| Prim::ConvertElementType { dtype }));
    // Bitcasts to bool are ill-typed (bool has no width-matching partner).
    v.extend(
        [DType::F32, DType::F64, DType::I32, DType::U32].map(|dtype| Prim::BitcastConvertType { dtype }),
    );
    v.push(Prim::Iota { dtype: DType::F32, shape: Shape::new(&[2, 3]), dimension: 1 });
    v.push(Prim::BroadcastInDim { shape: Shape::new(&[2, 3, 4]), broadcast_dimensions: vec![1, 2] });
    v.push(Prim::Reshape { new_sizes: Shape::new(&[2, 6]) });
    v.push(Prim::Transpose { permutation: vec![1, 0] });
    v.push(Prim::Rev { dimensions: vec![0, 1] });
    v.push(Prim::Slice { start: vec![1, 0], limit: vec![3, 4], strides: vec![1, 3] });
    v.push(Prim::DynamicSlice { slice_sizes: vec![2, 2] });
    v.push(Prim::DynamicUpdateSlice);
    v.push(Prim::Concatenate { dimension: 1 });
    v.push(Prim::Pad { low: vec![1, -1], high: vec![0, 2], interior: vec![1, 0] });
    v.extend(ReduceOp::ALL.map(|op| Prim::Reduce { op, axes: vec![1] }));
    v.extend(ArgOp::ALL.map(|op| Prim::ArgReduce { op, axis: 1, index_dtype: DType::I32 }));
    v.extend(CumulativeOp::ALL.map(|op| Prim::Cumulative { op, axis: 1, reverse: op == CumulativeOp::Max }));
    v.push(Prim::Sort { dimension: 1, num_keys: 1 });
    v.push(Prim::DotGeneral {
        lhs_contracting: vec![1],
        rhs_contracting: vec![0],
        lhs_batch: vec![],
        rhs_batch: vec![],
        preferred_element_type: None,
    });
    v.extend([IndexMode::Clip, IndexMode::FillOrDrop].map(|mode| Prim::Gather {
        axis: 1,
        batch_dims: 0,
        mode,
    }));
    v.extend(ScatterOp::ALL.map(|op| Prim::Scatter {
        op,
        axis: 0,
        batch_dims: 0,
        mode: IndexMode::FillOrDrop,
    }));
    v.push(Prim::SegmentSum { num_segments: 3 });
    v.push(Prim::Threefry2x32);
    v.push(Prim::StopGradient);
    let neg = scalar_fn(DType::F32, |f, x| f.push(Prim::Unary(UnaryOp::Neg), &[x], None).unwrap()[0]);
    let exp = scalar_fn(DType::F32, |f, x| f.push(Prim::Unary(UnaryOp::Exp), &[x], None).unwrap()[0]);
    // jvp(x, t) = (-x, -t).
    let mut jvp = Function::new();
    let (jx, jt) =
        (jvp.add_param(TensorType::scalar(DType::F32)), jvp.add_param(TensorType::scalar(DType::F32)));
    let nx = jvp.push(Prim::Unary(UnaryOp::Neg), &[jx], None).unwrap()[0];
    let nt = jvp.push(Prim::Unary(UnaryOp::Neg), &[jt], None).unwrap()[0];
    jvp.outputs.extend([nx, nt]);
    v.push(Prim::CustomJvpCall { fun: Box::new(neg.clone()), jvp: Box::new(jvp) });
    v.push(Prim::CustomVjpCall {
        fun: Box::new(neg.clone()),
        fwd: Box::new(neg.clone()),
        bwd: Box::new(neg.clone()),
    });
    // scan body(c, x) = (c + x, c * x) over f32 scalars.
    let mut body = Function::new();
    let (c, x) =
        (body.add_param(TensorType::scalar(DType::F32)), body.add_param(TensorType::scalar(DType::F32)));
    let s = body.push(Prim::Binary(BinaryOp::Add), &[c, x], None).unwrap()[0];
    let p = body.push(Prim::Binary(BinaryOp::Mul), &[c, x], None).unwrap()[0];
    body.outputs.extend([s, p]);
    v.extend([false, true].map(|reverse| Prim::Scan {
        length: 4,
        reverse,
        num_consts: 0,
        num_carry: 1,
        body: Box::new(body.clone()),
    }));
    // while x < 100: x = x * 2 + 1 (i32), bounded and unbounded.
    let cond = {
        let mut f = Function::new();
        let x = f.add_param(TensorType::scalar(DType::I32));
        let h = f.add_const(Array::scalar(100i32));
        let c = f.push(Prim::Compare(CompareOp::Lt), &[x, h], None).unwrap()[0];
        f.outputs.push(c);
        f
    };
    let step = {
        let mut f = Function::new();
        let x = f.add_param(TensorType::scalar(DType::I32));
        let two = f.add_const(Array::scalar(2i32));
        let one = f.add_const(Array::scalar(1i32));
        let d = f.push(Prim::Binary(BinaryOp::Mul), &[x, two], None).unwrap()[0];
        let y = f.push(Prim::Binary(BinaryOp::Add), &[d, one], None).unwrap()[0];
        f.outputs.push(y);
        f
    };
    v.extend([None, Some(3)].map(|max_iters| Prim::WhileLoop {
        cond: Box::new(cond.clone()),
        body: Box::new(step.clone()),
        cond_consts: 0,
        body_consts: 0,
        max_iters,
    }));
    v.push(Prim::Cond { branches: vec![neg.clone(), exp.clone()] });
    v.push(Prim::Call { body: Box::new(exp.clone()) });
    v.push(Prim::Checkpoint { body: Box::new(neg) });
    v
}

fn run_case(prim: Prim) {
    let all = |p: &Prim, k: usize| {
        for dt in DType::ALL {
            let args: Vec<Array> = (0..k).map(|r| sample(dt, 5 * r)).collect();
            check(p.clone(), &args);
        }
    };
    match &prim {
        Prim::Unary(_) => all(&prim, 1),
        Prim::Binary(_) | Prim::Compare(_) => all(&prim, 2),
        Prim::Select => {
            for dt in DType::ALL {
                check(prim.clone(), &[sample(DType::Bool, 0), sample(dt, 1), sample(dt, 2)]);
                check(prim.clone(), &[Array::scalar(false), sample(dt, 1), sample(dt, 2)]);
            }
        }
        Prim::Clamp => {
            for dt in [DType::F32, DType::F64, DType::I32, DType::U32] {
                check(prim.clone(), &[sample(dt, 3), sample(dt, 0), sample(dt, 7)]);
            }
            check(prim.clone(), &[Array::scalar(-1.0f32), sample(DType::F32, 0), Array::scalar(1.0f32)]);
        }
        Prim::ConvertElementType { .. } | Prim::BitcastConvertType { .. } => all(&prim, 1),
        Prim::Iota { .. } => {
            for dtype in [DType::F32, DType::F64, DType::I32, DType::U32] {
                check(Prim::Iota { dtype, shape: Shape::new(&[2, 3]), dimension: 1 }, &[]);
            }
        }
        Prim::BroadcastInDim { .. } => {
            all(&prim, 1);
            check(
                Prim::BroadcastInDim { shape: Shape::new(&[2, 3]), broadcast_dimensions: vec![] },
                &[Array::scalar(-0.0f32)],
            );
            let col = Array::from_vec(&[3, 1], vec![1.0f64, f64::NAN, -0.0]);
            check(
                Prim::BroadcastInDim { shape: Shape::new(&[3, 4]), broadcast_dimensions: vec![0, 1] },
                &[col],
            );
        }
        Prim::Reshape { .. }
        | Prim::Transpose { .. }
        | Prim::Rev { .. }
        | Prim::Slice { .. }
        | Prim::StopGradient => all(&prim, 1),
        Prim::DynamicSlice { .. } => {
            for dt in DType::ALL {
                for (a, b) in [(0, 0), (1, 2), (-5, 99), (i32::MIN, i32::MAX), (2, 3)] {
                    check(prim.clone(), &[sample(dt, 0), Array::scalar(a), Array::scalar(b)]);
                }
                check(prim.clone(), &[sample(dt, 0), Array::scalar(u32::MAX), Array::scalar(1u32)]);
            }
        }
        Prim::DynamicUpdateSlice => {
            for dt in DType::ALL {
                let upd = Array::from_vec(&[2, 2], sample(dt, 4).to_f64_vec()[..4].to_vec());
                let upd = convert_like(&upd, dt);
                for (a, b) in [(0, 0), (1, 1), (-3, 7), (i32::MAX, i32::MIN)] {
                    check(prim.clone(), &[sample(dt, 0), upd.clone(), Array::scalar(a), Array::scalar(b)]);
                }
            }
        }
        Prim::Concatenate { .. } => {
            all(&prim, 2);
            all(&prim, 3);
            check(
                prim.clone(),
                &[sample(DType::F32, 0), Array::from_vec::<f32>(&[3, 0], vec![]), sample(DType::F32, 1)],
            );
        }
        Prim::Pad { .. } => {
            for dt in DType::ALL {
                let pv = convert_like(&Array::scalar(-0.0f64), dt);
                check(prim.clone(), &[sample(dt, 0), pv]);
            }
        }
        Prim::Reduce { op, .. } => {
            for axes in [vec![], vec![0], vec![1], vec![1, 0]] {
                all(&Prim::Reduce { op: *op, axes }, 1);
            }
            // Only -0.0: a sum starting from +0.0 gives +0.0; max/min order -0 below +0.
            check(Prim::Reduce { op: *op, axes: vec![0] }, &[Array::from_vec(&[2], vec![-0.0f32, -0.0])]);
            check(Prim::Reduce { op: *op, axes: vec![0] }, &[Array::from_vec(&[2], vec![0.0f32, -0.0])]);
            check(Prim::Reduce { op: *op, axes: vec![0] }, &[Array::from_vec::<f32>(&[0], vec![])]);
        }
        Prim::ArgReduce { op, .. } => {
            for axis in [0, 1] {
                for dt in [DType::F32, DType::F64, DType::I32, DType::U32] {
                    check(Prim::ArgReduce { op: *op, axis, index_dtype: DType::U32 }, &[sample(dt, 1)]);
                    check(Prim::ArgReduce { op: *op, axis, index_dtype: DType::I32 }, &[sample(dt, 0)]);
                }
            }
        }
        Prim::Cumulative { op, .. } => {
            for (axis, reverse) in [(0, false), (1, true), (1, false)] {
                all(&Prim::Cumulative { op: *op, axis, reverse }, 1);
            }
        }
        Prim::Gather { mode, .. } => {
            for dt in DType::ALL {
                let i = idx(&[3, 0, -1, 4, i32::MIN, 2]);
                check(Prim::Gather { axis: 1, batch_dims: 0, mode: *mode }, &[sample(dt, 0), i.clone()]);
                check(Prim::Gather { axis: 0, batch_dims: 0, mode: *mode }, &[sample(dt, 2), i]);
                let bi = Array::from_vec(&[3, 2], vec![0u32, 3, u32::MAX, 1, 2, 9]);
                check(Prim::Gather { axis: 1, batch_dims: 1, mode: *mode }, &[sample(dt, 0), bi]);
            }
        }
        Prim::DotGeneral { .. } => {
            for dt in [DType::F32, DType::F64, DType::I32, DType::U32] {
                let rhs = convert_like(
                    &Array::from_vec(&[4, 2], vec![1.0, 2.0, -1.0, 0.5, 3.0, 0.0, -2.0, 1.0]),
                    dt,
                );
                let lhs =
                    convert_like(&Array::from_vec(&[3, 4], (0..12).map(|i| i as f64 - 4.0).collect()), dt);
                check(prim.clone(), &[lhs.clone(), rhs]);
                // Batched, contracting the lhs's first free axis: [3,4]x[3,4] over batch 0, contract 1.
                let batched = Prim::DotGeneral {
                    lhs_contracting: vec![1],
                    rhs_contracting: vec![1],
                    lhs_batch: vec![0],
                    rhs_batch: vec![0],
                    preferred_element_type: None,
                };
                check(batched, &[lhs.clone(), lhs]);
            }
            dot_preferred_cases();
        }
        Prim::Threefry2x32 => {
            let u = |k| sample(DType::U32, k);
            check(prim.clone(), &[u(0), u(1), u(2), u(3)]);
        }
        Prim::Sort { .. } => sort_cases(),
        Prim::Scatter { op, .. } => scatter_cases(*op),
        Prim::SegmentSum { .. } => segment_sum_cases(),
        Prim::CustomJvpCall { .. }
        | Prim::CustomVjpCall { .. }
        | Prim::Call { .. }
        | Prim::Checkpoint { .. } => {
            for x in F32S {
                check(prim.clone(), &[Array::scalar(x)]);
            }
        }
        Prim::Scan { .. } => {
            check(
                prim.clone(),
                &[Array::scalar(1.5f32), Array::from_vec(&[4], vec![1.0f32, -0.0, f32::NAN, 2.0])],
            );
        }
        Prim::WhileLoop { .. } => {
            for x in [0, 99, 100, -5, i32::MIN] {
                check(prim.clone(), &[Array::scalar(x)]);
            }
        }
        Prim::Cond { .. } => {
            for i in [-7, 0, 1, 2, i32::MAX] {
                check(prim.clone(), &[Array::scalar(i), Array::scalar(0.5f32)]);
            }
        }
    }
}

/// Values of `dt` of any `shape`, cycling through the twelve samples from `rot`.
fn fill(dt: DType, shape: &[usize], rot: usize) -> Array {
    let n: usize = shape.iter().product();
    fn r<T: Copy>(v: &[T; 12], n: usize, k: usize) -> Vec<T> {
        (0..n).map(|i| v[(i + k) % 12]).collect()
    }
    match dt {
        DType::F32 => Array::from_vec(shape, r(&F32S, n, rot)),
        DType::F64 => Array::from_vec(shape, r(&F64S, n, rot)),
        DType::I32 => Array::from_vec(shape, r(&I32S, n, rot)),
        DType::U32 => Array::from_vec(shape, r(&U32S, n, rot)),
        DType::Bool => Array::from_vec(shape, r(&BOOLS, n, rot)),
    }
}

/// Runs `f` compiled on `args` and returns its outputs (for hand-computed expectations).
fn jit_run(prim: Prim, args: &[Array]) -> Vec<Array> {
    let mut f = Function::new();
    let params: Vec<Var> = args.iter().map(|a| f.add_param(a.ty())).collect();
    let outs = f.push(prim, &params, None).expect("well typed");
    f.outputs.extend(outs);
    compile(&f).expect("compiles").run(args).expect("runs")
}

fn sort_cases() {
    for dt in DType::ALL {
        for dimension in [0, 1] {
            check(Prim::Sort { dimension, num_keys: 1 }, &[sample(dt, 0)]);
            // Two keys with many ties (the bool key), and a payload of another dtype riding along.
            let payload = fill(DType::I32, &[3, 4], 0);
            check(
                Prim::Sort { dimension, num_keys: 2 },
                &[fill(DType::Bool, &[3, 4], 1), sample(dt, 0), payload.clone()],
            );
            check(Prim::Sort { dimension, num_keys: 1 }, &[sample(dt, 3), payload]);
        }
        // Rank 1, rank 3 along each dim, rank 4, and empty dims.
        check(Prim::Sort { dimension: 0, num_keys: 1 }, &[fill(dt, &[12], 5)]);
        for dimension in 0..3 {
            check(
                Prim::Sort { dimension, num_keys: 1 },
                &[fill(dt, &[2, 3, 4], 7), fill(DType::U32, &[2, 3, 4], 0)],
            );
        }
        check(Prim::Sort { dimension: 2, num_keys: 1 }, &[fill(dt, &[1, 2, 3, 2], 2)]);
        check(Prim::Sort { dimension: 1, num_keys: 1 }, &[fill(dt, &[0, 3], 0)]);
        check(Prim::Sort { dimension: 1, num_keys: 1 }, &[fill(dt, &[3, 0], 0)]);
    }
    // By hand: NaNs (either sign) last in input order; 0.0 and -0.0 equal, so input order is kept.
    let nan = f32::NAN;
    let x = Array::from_vec(&[8], vec![3.0f32, nan, -0.0, 0.0, f32::NEG_INFINITY, -nan, -0.0, 1.0]);
    let p = Array::from_vec(&[8], (0..8).collect::<Vec<i32>>());
    let out = jit_run(Prim::Sort { dimension: 0, num_keys: 1 }, &[x.clone(), p.clone()]);
    let want = Array::from_vec(&[8], vec![f32::NEG_INFINITY, -0.0, 0.0, -0.0, 1.0, 3.0, nan, -nan]);
    assert!(out[0].bitwise_eq(&want), "{:?}", out[0]);
    assert_eq!(out[1], Array::from_vec(&[8], vec![4i32, 2, 3, 6, 7, 0, 1, 5]));
    check(Prim::Sort { dimension: 0, num_keys: 2 }, &[x, p]);
}

fn scatter_cases(op: ScatterOp) {
    for mode in [IndexMode::Clip, IndexMode::FillOrDrop] {
        for dt in DType::ALL {
            // Axis 0: duplicates (2 twice, and 0/-1/MIN all clip to 0), negative and too-large.
            let i = idx(&[2, 0, -1, 5, 2, i32::MIN]);
            check(
                Prim::Scatter { op, axis: 0, batch_dims: 0, mode },
                &[sample(dt, 0), i.clone(), fill(dt, &[6, 4], 3)],
            );
            // Axis 1.
            check(
                Prim::Scatter { op, axis: 1, batch_dims: 0, mode },
                &[sample(dt, 0), i, fill(dt, &[3, 6], 1)],
            );
            // batch_dims 1, u32 indices with duplicates and u32::MAX.
            let bi = Array::from_vec(&[3, 2], vec![0u32, 0, u32::MAX, 1, 3, 3]);
            check(
                Prim::Scatter { op, axis: 1, batch_dims: 1, mode },
                &[sample(dt, 0), bi, fill(dt, &[3, 2], 6)],
            );
            // The same with i32 indices (negative too): scalar rows, the typed scatter_add loop.
            let bi = Array::from_vec(&[3, 2], vec![0i32, 0, -1, 1, 3, i32::MAX]);
            check(
                Prim::Scatter { op, axis: 1, batch_dims: 1, mode },
                &[sample(dt, 0), bi, fill(dt, &[3, 2], 6)],
            );
            // Scalar index (rank-0 indices), rank-3 operand with a pre dim, empty axis.
            let s = Array::scalar(1i32);
            check(
                Prim::Scatter { op, axis: 1, batch_dims: 0, mode },
                &[fill(dt, &[2, 3, 2], 0), s, fill(dt, &[2, 2], 4)],
            );
            let e = idx(&[0, 1]);
            check(
                Prim::Scatter { op, axis: 1, batch_dims: 0, mode },
                &[fill(dt, &[2, 0], 0), e, fill(dt, &[2, 2], 4)],
            );
        }
    }
    // By hand: x = [1,1,1], idx [1,1,-1,3], upd [10,20,30,40]. Clip: -1→0, 3→2;
    // set: [30, 20, 40]; add: [1+30, 1+10+20, 1+40]. Drop: set [1, 20, 1]; add [1, 31, 1].
    let x = Array::from_vec(&[3], vec![1.0f32; 3]);
    let (i, u) = (idx(&[1, 1, -1, 3]), Array::from_vec(&[4], vec![10.0f32, 20., 30., 40.]));
    let run = |mode| {
        jit_run(Prim::Scatter { op, axis: 0, batch_dims: 0, mode }, &[x.clone(), i.clone(), u.clone()])
    };
    let (clip, drop) = match op {
        ScatterOp::Set => ([30.0f32, 20., 40.], [1.0f32, 20., 1.]),
        ScatterOp::Add => ([31.0f32, 31., 41.], [1.0f32, 31., 1.]),
    };
    assert_eq!(run(IndexMode::Clip)[0], Array::from_vec(&[3], clip.to_vec()));
    assert_eq!(run(IndexMode::FillOrDrop)[0], Array::from_vec(&[3], drop.to_vec()));
}

fn segment_sum_cases() {
    for dt in DType::ALL {
        for ids in [idx(&[0, 2, 1]), idx(&[2, 2, -1]), idx(&[3, i32::MIN, 0])] {
            check(Prim::SegmentSum { num_segments: 3 }, &[sample(dt, 0), ids.clone()]);
            check(Prim::SegmentSum { num_segments: 0 }, &[sample(dt, 0), ids.clone()]);
            check(Prim::SegmentSum { num_segments: 2 }, &[fill(dt, &[3, 2, 2], 1), ids.clone()]);
            check(Prim::SegmentSum { num_segments: 4 }, &[fill(dt, &[3], 5), ids]);
        }
        let u = Array::from_vec(&[3], vec![1u32, u32::MAX, 1]);
        check(Prim::SegmentSum { num_segments: 2 }, &[sample(dt, 2), u]);
        check(Prim::SegmentSum { num_segments: 2 }, &[fill(dt, &[0, 4], 0), idx(&[])]);
    }
    // By hand: [1,2,3,4,5] with ids [0,2,0,-1,3] into 3 segments: [1+3, 0, 2] (-1 and 3 dropped).
    let data = Array::from_vec(&[5], vec![1.0f64, 2., 3., 4., 5.]);
    let got = jit_run(Prim::SegmentSum { num_segments: 3 }, &[data, idx(&[0, 2, 0, -1, 3])]);
    assert_eq!(got[0], Array::from_vec(&[3], vec![4.0f64, 0., 2.]));
}

fn dot_preferred_cases() {
    let matmul = |preferred_element_type| Prim::DotGeneral {
        lhs_contracting: vec![1],
        rhs_contracting: vec![0],
        lhs_batch: vec![],
        rhs_batch: vec![],
        preferred_element_type,
    };
    for from in DType::ALL {
        for to in DType::ALL {
            // Operands hold NaN/inf/huge values: conversion saturates, NaN→0, ints wrap.
            check(matmul(Some(to)), &[fill(from, &[3, 4], 0), fill(from, &[4, 2], 5)]);
        }
    }
    // By hand: i32 [[1,2],[3,4]] @ [[5],[6]] as f64: [1*5+2*6, 3*5+4*6] = [17, 39].
    let l = Array::from_vec(&[2, 2], vec![1i32, 2, 3, 4]);
    let r = Array::from_vec(&[2, 1], vec![5i32, 6]);
    let got = jit_run(matmul(Some(DType::F64)), &[l, r]);
    assert_eq!(got[0], Array::from_vec(&[2, 1], vec![17.0f64, 39.]));
    // f32 3.7 and -3.7 truncate toward zero as i32: 3 * -3 = -9; u32 of -1.0 saturates to 0.
    let a = Array::from_vec(&[1], vec![3.7f32]);
    let b = Array::from_vec(&[1], vec![-3.7f32]);
    let vdot = |t| Prim::DotGeneral {
        lhs_contracting: vec![0],
        rhs_contracting: vec![0],
        lhs_batch: vec![],
        rhs_batch: vec![],
        preferred_element_type: Some(t),
    };
    assert_eq!(jit_run(vdot(DType::I32), &[a.clone(), b])[0], Array::scalar(-9i32));
    assert_eq!(jit_run(vdot(DType::U32), &[a, Array::from_vec(&[1], vec![-1.0f32])])[0], Array::scalar(0u32));
}

/// `a` (f64 data) converted to `dt` as the interpreter converts.
fn convert_like(a: &Array, dt: DType) -> Array {
    let a = match a {
        Array::F64(_) => a.clone(),
        other => Array::from_vec(other.shape().dims(), other.to_f64_vec()),
    };
    eval_prim(&Prim::ConvertElementType { dtype: dt }, &[&a]).unwrap().remove(0)
}

#[test]
fn every_primitive_matches_the_interpreter() {
    for prim in representatives() {
        let before = CHECKED.load(Ordering::Relaxed);
        let name = prim.name();
        run_case(prim);
        assert!(CHECKED.load(Ordering::Relaxed) > before, "{name}: no case ran");
    }
    eprintln!("{} JIT-vs-interpreter comparisons", CHECKED.load(Ordering::Relaxed));
}

#[test]
fn fused_chain_matches_and_fuses() {
    // y = sum_j exp(broadcast(a)[i,j] * b[i,j] + 1) : one broadcast + two elementwise + exp fused
    // into the reduction: a single kernel.
    let mut f = Function::new();
    let a = f.add_param(TensorType::new(DType::F32, [3]));
    let b = f.add_param(TensorType::new(DType::F32, [3, 4]));
    let one = f.add_const(Array::scalar(1.0f32));
    let ab = f
        .push(Prim::BroadcastInDim { shape: Shape::new(&[3, 4]), broadcast_dimensions: vec![0] }, &[a], None)
        .unwrap()[0];
    let ob = f
        .push(Prim::BroadcastInDim { shape: Shape::new(&[3, 4]), broadcast_dimensions: vec![] }, &[one], None)
        .unwrap()[0];
    let m = f.push(Prim::Binary(BinaryOp::Mul), &[ab, b], None).unwrap()[0];
    let s = f.push(Prim::Binary(BinaryOp::Add), &[m, ob], None).unwrap()[0];
    let e = f.push(Prim::Unary(UnaryOp::Exp), &[s], None).unwrap()[0];
    let r = f.push(Prim::Reduce { op: ReduceOp::Sum, axes: vec![1] }, &[e], None).unwrap()[0];
    f.outputs.push(r);
    let exe = compile(&f).unwrap();
    assert_eq!(exe.kernel_count(), 1);
    let args = [Array::from_vec(&[3], vec![0.5f32, -1.0, 2.0]), sample(DType::F32, 0)];
    // exp within 1 ulp (vmath vs std), then four positive terms summed in the same order: each sum
    // within a relative 4ε of the interpreter's (NaN and inf rows exactly).
    let (got, want) = (exe.run(&args).unwrap(), eval(&f, &args).unwrap());
    let (g, w) = (got[0].to_f64_vec(), want[0].to_f64_vec());
    for (a, b) in g.iter().zip(&w) {
        assert!(
            common::same(*a, *b) || (a - b).abs() <= 4.0 * f32::EPSILON as f64 * b.abs(),
            "{g:?} vs {w:?}"
        );
    }
}

#[test]
fn wrong_arguments_are_errors() {
    let f = scalar_fn(DType::F32, |f, x| f.push(Prim::Unary(UnaryOp::Neg), &[x], None).unwrap()[0]);
    let exe = compile(&f).unwrap();
    assert!(exe.run(&[]).is_err());
    assert!(exe.run(&[Array::scalar(1i32)]).is_err());
    assert!(exe.run(&[Array::from_vec(&[1], vec![1.0f32])]).is_err());
}

#[test]
fn the_backend_never_calls_the_interpreter() {
    // By construction: no source file of the crate mentions the interpreter's entry points.
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut stack = vec![dir];
    let mut files = 0;
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let text = std::fs::read_to_string(&p).unwrap();
                files += 1;
                for needle in ["kiln_ir::eval", "eval_prim", "kiln_ir::{eval"] {
                    assert!(!text.contains(needle), "{} mentions {needle}", p.display());
                }
            }
        }
    }
    assert!(files >= 8);
}
