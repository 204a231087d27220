//! Table-driven check of every primitive's batching rule: batching one equation over a batch equals
//! stacking the primitive applied to each batch element (the interpreter on slices), with the batch
//! dimension at 0, at the end, and unbatched (`None`) mixes; and the batched IR has the same number
//! of equations at batch 2 and batch 1000 (nothing is unrolled over the batch).
//!
//! `all_cases` builds one or more cases per primitive; `covered` is an exhaustive match over `Prim`
//! (no `_` arm) and the op enums are iterated through their `ALL` lists, so a new primitive without a
//! case fails to compile, and one without a batching rule fails here.

use kiln::ir::{
    ArgOp, BinaryOp, CompareOp, CumulativeOp, DType, Function, IndexMode, Prim, ReduceOp, ScatterOp, Shape,
    TensorType, UnaryOp,
};
use kiln::transform::batching::{Batched, batch_replay};
use kiln::{Tensor, lax};

/// One primitive applied to operands of the given (one batch element's) types; integer operands are
/// drawn from `int_range`.
struct Case {
    prim: Prim,
    operands: Vec<TensorType>,
    int_range: (i32, i32),
}

fn ty(dtype: DType, dims: &[usize]) -> TensorType {
    TensorType::new(dtype, dims)
}

fn case(prim: Prim, operands: Vec<TensorType>) -> Case {
    Case { prim, operands, int_range: (-2, 5) }
}

/// A closed function of its parameters' types (the body sees them as tensors).
fn function(types: &[TensorType], body: impl FnOnce(Vec<Tensor>) -> Vec<Tensor>) -> Function {
    let ps: Vec<Tensor> = types.iter().map(|t| Tensor::placeholder(t.dtype, t.shape.dims())).collect();
    kiln::trace(body, &ps).expect("sub-function traces").function
}

/// Which primitive a case exercises; exhaustive so that a new primitive needs a case.
fn covered(p: &Prim) -> &'static str {
    match p {
        Prim::Unary(_) => "unary",
        Prim::Binary(_) => "binary",
        Prim::Compare(_) => "compare",
        Prim::Select => "select",
        Prim::Clamp => "clamp",
        Prim::ConvertElementType { .. } => "convert_element_type",
        Prim::BitcastConvertType { .. } => "bitcast_convert_type",
        Prim::Iota { .. } => "iota",
        Prim::BroadcastInDim { .. } => "broadcast_in_dim",
        Prim::Reshape { .. } => "reshape",
        Prim::Transpose { .. } => "transpose",
        Prim::Rev { .. } => "rev",
        Prim::Slice { .. } => "slice",
        Prim::DynamicSlice { .. } => "dynamic_slice",
        Prim::DynamicUpdateSlice => "dynamic_update_slice",
        Prim::Concatenate { .. } => "concatenate",
        Prim::Pad { .. } => "pad",
        Prim::Reduce { .. } => "reduce",
        Prim::ArgReduce { .. } => "arg_reduce",
        Prim::Cumulative { .. } => "cumulative",
        Prim::Sort { .. } => "sort",
        Prim::DotGeneral { .. } => "dot_general",
        Prim::Gather { .. } => "gather",
        Prim::Scatter { .. } => "scatter",
        Prim::SegmentSum { .. } => "segment_sum",
        Prim::Threefry2x32 => "threefry2x32",
        Prim::StopGradient => "stop_gradient",
        Prim::CustomJvpCall { .. } => "custom_jvp_call",
        Prim::CustomVjpCall { .. } => "custom_vjp_call",
        Prim::Scan { .. } => "scan",
        Prim::WhileLoop { .. } => "while_loop",
        Prim::Cond { .. } => "cond",
        Prim::Call { .. } => "call",
        Prim::Checkpoint { .. } => "checkpoint",
    }
}

const ALL_KINDS: usize = 34;

fn all_cases() -> Vec<Case> {
    use DType::{Bool, F32, I32, U32};
    let f3 = ty(F32, &[3]);
    let f23 = ty(F32, &[2, 3]);
    let i0 = ty(I32, &[]);
    let mut cs = Vec::new();
    for op in UnaryOp::ALL {
        let t = match op {
            UnaryOp::Not => ty(I32, &[2, 3]),
            UnaryOp::Neg
            | UnaryOp::Abs
            | UnaryOp::Sign
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
            | UnaryOp::IsFinite => f23.clone(),
        };
        cs.push(case(Prim::Unary(op), vec![t]));
    }
    for op in BinaryOp::ALL {
        let t = match op {
            BinaryOp::And | BinaryOp::Or | BinaryOp::Xor => ty(Bool, &[2, 3]),
            BinaryOp::ShiftLeft | BinaryOp::ShiftRightLogical => ty(U32, &[2, 3]),
            BinaryOp::Add
            | BinaryOp::Sub
            | BinaryOp::Mul
            | BinaryOp::Div
            | BinaryOp::Rem
            | BinaryOp::Pow
            | BinaryOp::Max
            | BinaryOp::Min
            | BinaryOp::Atan2 => f23.clone(),
        };
        cs.push(case(Prim::Binary(op), vec![t.clone(), t]));
    }
    for op in CompareOp::ALL {
        cs.push(case(Prim::Compare(op), vec![f23.clone(), f23.clone()]));
    }
    cs.push(case(Prim::Select, vec![ty(Bool, &[2, 3]), f23.clone(), f23.clone()]));
    cs.push(case(Prim::Select, vec![ty(Bool, &[]), f23.clone(), f23.clone()]));
    cs.push(case(Prim::Clamp, vec![f23.clone(), f23.clone(), f23.clone()]));
    cs.push(case(Prim::Clamp, vec![ty(F32, &[]), f23.clone(), ty(F32, &[])]));
    cs.push(case(Prim::ConvertElementType { dtype: I32 }, vec![f23.clone()]));
    cs.push(case(Prim::BitcastConvertType { dtype: U32 }, vec![f23.clone()]));
    cs.push(case(Prim::Iota { dtype: I32, shape: Shape::new(&[2, 3]), dimension: 1 }, vec![]));
    cs.push(case(
        Prim::BroadcastInDim { shape: Shape::new(&[2, 4, 3]), broadcast_dimensions: vec![0, 2] },
        vec![f23.clone()],
    ));
    cs.push(case(
        Prim::BroadcastInDim { shape: Shape::new(&[2, 3]), broadcast_dimensions: vec![0, 1] },
        vec![ty(F32, &[1, 3])],
    ));
    cs.push(case(Prim::Reshape { new_sizes: Shape::new(&[3, 2]) }, vec![f23.clone()]));
    cs.push(case(Prim::Transpose { permutation: vec![1, 0] }, vec![f23.clone()]));
    cs.push(case(Prim::Rev { dimensions: vec![1] }, vec![f23.clone()]));
    cs.push(case(
        Prim::Slice { start: vec![0, 1], limit: vec![2, 3], strides: vec![2, 1] },
        vec![f23.clone()],
    ));
    cs.push(case(Prim::DynamicSlice { slice_sizes: vec![1, 2] }, vec![f23.clone(), i0.clone(), i0.clone()]));
    cs.push(case(Prim::DynamicUpdateSlice, vec![f23.clone(), ty(F32, &[1, 2]), i0.clone(), i0.clone()]));
    cs.push(case(Prim::Concatenate { dimension: 1 }, vec![f23.clone(), ty(F32, &[2, 1])]));
    cs.push(case(
        Prim::Pad { low: vec![1, -1], high: vec![0, 2], interior: vec![1, 0] },
        vec![f23.clone(), ty(F32, &[])],
    ));
    for op in ReduceOp::ALL {
        cs.push(case(Prim::Reduce { op, axes: vec![1] }, vec![f23.clone()]));
        cs.push(case(Prim::Reduce { op, axes: vec![0, 1] }, vec![f23.clone()]));
    }
    for op in ArgOp::ALL {
        cs.push(case(Prim::ArgReduce { op, axis: 1, index_dtype: I32 }, vec![f23.clone()]));
    }
    for op in CumulativeOp::ALL {
        cs.push(case(Prim::Cumulative { op, axis: 1, reverse: true }, vec![f23.clone()]));
    }
    cs.push(case(Prim::Sort { dimension: 1, num_keys: 1 }, vec![f23.clone(), ty(I32, &[2, 3])]));
    let dot = |lc: &[usize], rc: &[usize], lb: &[usize], rb: &[usize]| Prim::DotGeneral {
        lhs_contracting: lc.to_vec(),
        rhs_contracting: rc.to_vec(),
        lhs_batch: lb.to_vec(),
        rhs_batch: rb.to_vec(),
        preferred_element_type: None,
    };
    cs.push(case(dot(&[1], &[0], &[], &[]), vec![f23.clone(), ty(F32, &[3, 2])]));
    cs.push(case(dot(&[2], &[1], &[0], &[0]), vec![ty(F32, &[2, 2, 3]), ty(F32, &[2, 3, 2])]));
    for mode in [IndexMode::Clip, IndexMode::FillOrDrop] {
        cs.push(case(Prim::Gather { axis: 1, batch_dims: 0, mode }, vec![f23.clone(), ty(I32, &[2])]));
        cs.push(case(Prim::Gather { axis: 1, batch_dims: 1, mode }, vec![f23.clone(), ty(I32, &[2, 2])]));
        for op in ScatterOp::ALL {
            cs.push(case(
                Prim::Scatter { op, axis: 1, batch_dims: 0, mode },
                vec![f23.clone(), ty(I32, &[4]), ty(F32, &[2, 4])],
            ));
            cs.push(case(
                Prim::Scatter { op, axis: 1, batch_dims: 1, mode },
                vec![f23.clone(), ty(I32, &[2, 2]), ty(F32, &[2, 2])],
            ));
        }
    }
    cs.push(case(Prim::SegmentSum { num_segments: 3 }, vec![ty(F32, &[4, 2]), ty(I32, &[4])]));
    let u = ty(U32, &[3]);
    cs.push(case(Prim::Threefry2x32, vec![u.clone(), u.clone(), u.clone(), u]));
    cs.push(case(Prim::StopGradient, vec![f3.clone()]));
    // Control flow.
    let sin = function(&[f3.clone()], |x| vec![x[0].sin()]);
    let sin_jvp = function(&[f3.clone(), f3.clone()], |x| vec![x[0].sin(), x[0].cos() * &x[1]]);
    cs.push(case(
        Prim::CustomJvpCall { fun: Box::new(sin.clone()), jvp: Box::new(sin_jvp) },
        vec![f3.clone()],
    ));
    let fwd = function(&[f3.clone()], |x| vec![x[0].sin(), x[0].cos()]);
    let bwd = function(&[f3.clone(), f3.clone()], |x| vec![&x[0] * &x[1]]);
    cs.push(case(
        Prim::CustomVjpCall { fun: Box::new(sin), fwd: Box::new(fwd), bwd: Box::new(bwd) },
        vec![f3.clone()],
    ));
    // scan(k, c, xs): c = c * k + x; y = c - x.
    let body = function(&[ty(F32, &[]), f3.clone(), f3.clone()], |p| {
        let c = &p[1] * &p[0] + &p[2];
        vec![c.clone(), &c - &p[2]]
    });
    for reverse in [false, true] {
        cs.push(case(
            Prim::Scan { length: 4, reverse, num_consts: 1, num_carry: 1, body: Box::new(body.clone()) },
            vec![ty(F32, &[]), f3.clone(), ty(F32, &[4, 3])],
        ));
    }
    // while (limit, step, i, v): i < limit: i += 1, v = v * step + 1.
    let cond = function(&[i0.clone(), i0.clone(), f3.clone()], |p| vec![p[1].lt(&p[0])]);
    let wbody = function(&[ty(F32, &[]), i0.clone(), f3.clone()], |p| {
        vec![&p[1] + &Tensor::scalar(1i32), &p[2] * &p[0] + 1.0]
    });
    for max_iters in [None, Some(3)] {
        cs.push(Case {
            prim: Prim::WhileLoop {
                cond: Box::new(cond.clone()),
                body: Box::new(wbody.clone()),
                cond_consts: 1,
                body_consts: 1,
                max_iters,
            },
            operands: vec![i0.clone(), ty(F32, &[]), i0.clone(), f3.clone()],
            int_range: (-1, 5),
        });
    }
    let br = |k: usize| {
        function(&[f3.clone(), f3.clone()], move |p| match k {
            0 => vec![&p[0] + &p[1]],
            1 => vec![&p[0] * &p[1]],
            _ => vec![&p[0] - &p[1]],
        })
    };
    cs.push(Case {
        prim: Prim::Cond { branches: vec![br(0), br(1), br(2)] },
        operands: vec![i0.clone(), f3.clone(), f3.clone()],
        int_range: (-1, 4),
    });
    let callee = function(&[f3.clone(), f3.clone()], |p| vec![&p[0] * &p[1] + &p[0], p[1].clone()]);
    cs.push(case(Prim::Call { body: Box::new(callee.clone()) }, vec![f3.clone(), f3.clone()]));
    cs.push(case(Prim::Checkpoint { body: Box::new(callee) }, vec![f3.clone(), f3]));
    cs
}

/// A deterministic generator of test values, with the edge cases mixed in.
struct Gen(u64);

impl Gen {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        self.0 >> 33
    }

    fn tensor(&mut self, t: &TensorType, int_range: (i32, i32)) -> Tensor {
        const FLOATS: [f32; 12] =
            [0.5, -1.25, 2.0, -0.0, 0.0, 3.5, f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 0.75, -2.5, 1.0];
        let n = t.shape.size();
        let dims = t.shape.dims();
        let (lo, hi) = int_range;
        let span = (hi - lo + 1) as u64;
        match t.dtype {
            DType::F32 => {
                Tensor::from_vec(dims, (0..n).map(|_| FLOATS[(self.next() % 12) as usize]).collect())
            }
            DType::F64 => Tensor::from_vec(
                dims,
                (0..n).map(|_| f64::from(FLOATS[(self.next() % 12) as usize])).collect(),
            ),
            DType::I32 => Tensor::from_vec(dims, (0..n).map(|_| lo + (self.next() % span) as i32).collect()),
            DType::U32 => Tensor::from_vec(dims, (0..n).map(|_| (self.next() % 40) as u32).collect()),
            DType::Bool => Tensor::from_vec(dims, (0..n).map(|_| self.next() % 2 == 0).collect()),
        }
    }
}

/// The batched operand for batch dimension `bdim` (or unbatched).
fn batched_type(t: &TensorType, bdim: Option<usize>, n: usize) -> TensorType {
    let mut dims = t.shape.dims().to_vec();
    if let Some(d) = bdim {
        dims.insert(d, n);
    }
    ty(t.dtype, &dims)
}

/// Batch-dimension placements to try: all at 0, all at the end, and mixes with unbatched operands.
fn placements(c: &Case) -> Vec<Vec<Option<usize>>> {
    let k = c.operands.len();
    let end: Vec<Option<usize>> = c.operands.iter().map(|t| Some(t.rank())).collect();
    let mut ps = vec![vec![Some(0); k], end.clone()];
    for i in 0..k {
        if k > 1 {
            let mut p = vec![Some(0); k];
            p[i] = None;
            ps.push(p);
            // Only operand i batched, at its end.
            let mut q = vec![None; k];
            q[i] = end[i];
            ps.push(q);
        }
    }
    ps
}

fn close(a: &Tensor, b: &Tensor) -> bool {
    let (a, b) = (a.to_array().expect("concrete"), b.to_array().expect("concrete"));
    if a.ty() != b.ty() {
        return false;
    }
    let (x, y) = (a.to_f64_vec(), b.to_f64_vec());
    x.iter()
        .zip(&y)
        .all(|(p, q)| (p.is_nan() && q.is_nan()) || p == q || (p - q).abs() <= 1e-5 * q.abs().max(1.0))
}

fn count_eqns(f: &Function) -> usize {
    f.eqns.iter().map(|e| 1 + e.prim.subfunctions().iter().map(|s| count_eqns(s)).sum::<usize>()).sum()
}

/// The batched IR of one equation, outputs moved to dimension 0.
fn batched_ir(f: &Function, c: &Case, placement: &[Option<usize>], n: usize) -> Function {
    let ps: Vec<Tensor> = c
        .operands
        .iter()
        .zip(placement)
        .map(|(t, b)| {
            let bt = batched_type(t, *b, n);
            Tensor::placeholder(bt.dtype, bt.shape.dims())
        })
        .collect();
    let body = |xs: Vec<Tensor>| {
        let args: Vec<Batched> =
            xs.into_iter().zip(placement).map(|(v, b)| Batched { value: v, bdim: *b }).collect();
        batch_replay(f, &args, n).iter().map(|o| o.at(0, n)).collect::<Vec<_>>()
    };
    kiln::trace(body, &ps).expect("batched IR traces and verifies").function
}

fn check(c: &Case, seed: u64) {
    let n = 3;
    let f = function(&c.operands, |xs| {
        let refs: Vec<&Tensor> = xs.iter().collect();
        lax::bind(c.prim.clone(), &refs)
    });
    let mut g = Gen(seed);
    let placements = if c.operands.is_empty() { vec![vec![]] } else { placements(c) };
    for placement in placements {
        let what = format!("{} with batch dims {placement:?}", c.prim.name());
        let vals: Vec<Tensor> = c
            .operands
            .iter()
            .zip(&placement)
            .map(|(t, b)| g.tensor(&batched_type(t, *b, n), c.int_range))
            .collect();
        let args: Vec<Batched> =
            vals.iter().zip(&placement).map(|(v, b)| Batched { value: v.clone(), bdim: *b }).collect();
        let got: Vec<Tensor> = batch_replay(&f, &args, n).iter().map(|o| o.at(0, n)).collect();
        // Expected: the primitive on each batch element, stacked.
        let per_lane: Vec<Vec<Tensor>> = (0..n)
            .map(|b| {
                let slices: Vec<Tensor> = vals
                    .iter()
                    .zip(&placement)
                    .map(|(v, d)| match d {
                        Some(d) => v.index_axis(*d as i32, b as i64),
                        None => v.clone(),
                    })
                    .collect();
                let refs: Vec<&Tensor> = slices.iter().collect();
                lax::bind(c.prim.clone(), &refs)
            })
            .collect();
        assert_eq!(got.len(), per_lane[0].len(), "{what}: output count");
        for (j, g) in got.iter().enumerate() {
            let lanes: Vec<Tensor> = per_lane.iter().map(|o| o[j].clone()).collect();
            let want = Tensor::stack(&lanes, 0);
            assert!(close(g, &want), "{what}: output {j}\n got {g:?}\nwant {want:?}");
        }
        if !c.operands.is_empty() {
            let (small, big) = (batched_ir(&f, c, &placement, 2), batched_ir(&f, c, &placement, 1000));
            assert_eq!(count_eqns(&small), count_eqns(&big), "{what}: equations at batch 2 vs 1000");
        }
    }
}

#[test]
fn every_primitive_batches_like_a_loop_over_the_batch() {
    let cases = all_cases();
    let mut kinds: Vec<&str> = cases.iter().map(|c| covered(&c.prim)).collect();
    kinds.sort_unstable();
    kinds.dedup();
    assert_eq!(kinds.len(), ALL_KINDS, "a primitive has no case: {kinds:?}");
    for (i, c) in cases.iter().enumerate() {
        check(c, 17 + i as u64);
    }
}

#[test]
fn batching_keeps_unbatched_operands_unbroadcast_where_possible() {
    // gather with batched indices only: the operand is not broadcast (no broadcast_in_dim at all).
    let c = case(
        Prim::Gather { axis: 1, batch_dims: 0, mode: IndexMode::Clip },
        vec![ty(DType::F32, &[2, 3]), ty(DType::I32, &[2])],
    );
    let f = function(&c.operands, |xs| lax::bind(c.prim.clone(), &[&xs[0], &xs[1]]));
    let ir = batched_ir(&f, &c, &[None, Some(0)], 5);
    let prims: Vec<&str> = ir.eqns.iter().map(|e| e.prim.name()).collect();
    assert!(!prims.contains(&"broadcast_in_dim"), "{prims:?}");
    assert_eq!(prims.iter().filter(|p| **p == "gather").count(), 1, "{prims:?}");
}
