//! The direct VJP rules (`kiln_transform::ad::vjp_rules`), through `kiln::grad`: every family against
//! central finite differences in f64 at random points of several shapes, and exact values for the
//! AD cases of `../shared/data/cases/ad-cases.json` that concern these rules (01, 02, 05, 10, 11,
//! 13, 15, 17, 30).

use kiln::ir::{CumulativeOp, IndexMode, ReduceOp};
use kiln::lax;
use kiln::prelude::*;

/// A small deterministic generator (an LCG), so the random points are the same on every run.
struct Rng(u64);

impl Rng {
    fn uniform(&mut self) -> f64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }

    fn tensor(&mut self, shape: &[usize], lo: f64, hi: f64) -> Tensor {
        let n = shape.iter().product();
        Tensor::from_vec(shape, (0..n).map(|_| lo + (hi - lo) * self.uniform()).collect::<Vec<f64>>())
    }
}

/// The gradient of `sum(w · f(xs))` (a random `w` of `f`'s output shape) against central finite
/// differences, for every element of every input.
#[track_caller]
fn check(name: &str, rng: &mut Rng, xs: &[Tensor], f: impl Fn(&[Tensor]) -> Tensor) {
    let w = rng.tensor(f(xs).shape().dims(), -1.0, 1.0);
    let loss = |v: &[Tensor]| (f(v) * &w).sum(All);
    let g = kiln::grad(|v: Vec<Tensor>| loss(&v))(xs.to_vec());
    let h = 1e-6;
    for (k, x) in xs.iter().enumerate() {
        assert_eq!(g[k].ty(), x.ty(), "{name}: cotangent type of input {k}");
        let data = x.to_vec::<f64>();
        let got = g[k].to_vec::<f64>();
        for j in 0..data.len() {
            let at = |d: f64| {
                let mut moved = data.clone();
                moved[j] += d;
                let mut v = xs.to_vec();
                v[k] = Tensor::from_vec(x.shape().dims(), moved);
                loss(&v).item::<f64>()
            };
            let fd = (at(h) - at(-h)) / (2.0 * h);
            assert!(
                (got[j] - fd).abs() <= 1e-6 * (1.0 + fd.abs()),
                "{name}: input {k} shape {} element {j}: grad {} vs finite difference {fd}",
                x.shape(),
                got[j]
            );
        }
    }
}

const SHAPES: [&[usize]; 4] = [&[], &[3], &[2, 3], &[2, 1, 3]];

fn f32s(t: &Tensor) -> Vec<f32> {
    t.to_vec::<f32>()
}

fn v32(v: &[f32]) -> Tensor {
    Tensor::from_vec(&[v.len()], v.to_vec())
}

fn v64(shape: &[usize], v: &[f64]) -> Tensor {
    Tensor::from_vec(shape, v.to_vec())
}

fn i32s(v: &[i32]) -> Tensor {
    Tensor::from_vec(&[v.len()], v.to_vec())
}

fn grad1(f: impl Fn(Tensor) -> Tensor, x: Tensor) -> Tensor {
    kiln::grad(f)(x)
}

/// Bit-exact equality of f32 vectors, NaN equal to NaN.
#[track_caller]
fn same(got: &[f32], want: &[f32]) {
    let eq = got.len() == want.len()
        && got.iter().zip(want).all(|(a, b)| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()));
    assert!(eq, "got {got:?}, want {want:?}");
}

// ---------------------------------------------------------------------------------------------
// Finite differences, family by family.

#[test]
fn unary_family_matches_finite_differences() {
    let mut rng = Rng(1);
    type Op = fn(&Tensor) -> Tensor;
    let ops: [(&str, Op, f64, f64); 15] = [
        ("neg", |x| -x, -2.0, 2.0),
        ("abs", |x| x.abs(), -2.0, 2.0),
        ("exp", |x| x.exp(), -2.0, 2.0),
        ("expm1", |x| x.expm1(), -2.0, 2.0),
        ("log", |x| x.log(), 0.2, 3.0),
        ("log1p", |x| x.log1p(), -0.5, 2.0),
        ("sqrt", |x| x.sqrt(), 0.2, 3.0),
        ("rsqrt", |x| x.rsqrt(), 0.2, 3.0),
        ("sin", |x| x.sin(), -3.0, 3.0),
        ("cos", |x| x.cos(), -3.0, 3.0),
        ("tanh", |x| x.tanh(), -2.0, 2.0),
        ("logistic", |x| x.sigmoid(), -4.0, 4.0),
        ("erf", |x| x.erf(), -2.0, 2.0),
        ("erf_inv", |x| x.erf_inv(), -0.9, 0.9),
        ("sin(exp)", |x| x.exp().sin(), -1.0, 1.0),
    ];
    for (name, op, lo, hi) in ops {
        for shape in SHAPES {
            let x = rng.tensor(shape, lo, hi);
            check(name, &mut rng, &[x], |v| op(&v[0]));
        }
    }
}

#[test]
fn rounding_and_sign_have_zero_gradient() {
    let x = v64(&[4], &[-1.5, -0.2, 0.7, 2.5]);
    for op in [Tensor::floor, Tensor::ceil, Tensor::round, Tensor::sign] {
        // d/dx (x + op(x)) = 1 + 0.
        let g = grad1(|x: Tensor| (&x + op(&x)).sum(All), x.clone());
        assert_eq!(g.to_vec::<f64>(), vec![1.0; 4]);
    }
    let g = grad1(|x: Tensor| (&x * 2.0 + lax::unary(kiln::ir::UnaryOp::Round, &x)).sum(All), x);
    assert_eq!(g.to_vec::<f64>(), vec![2.0; 4]);
}

#[test]
fn binary_family_matches_finite_differences() {
    let mut rng = Rng(2);
    /// (name, op, range of a, range of b)
    type Case = (&'static str, fn(&Tensor, &Tensor) -> Tensor, (f64, f64), (f64, f64));
    let ops: [Case; 9] = [
        ("add", |a, b| a + b, (-2.0, 2.0), (-2.0, 2.0)),
        ("sub", |a, b| a - b, (-2.0, 2.0), (-2.0, 2.0)),
        ("mul", |a, b| a * b, (-2.0, 2.0), (-2.0, 2.0)),
        ("div", |a, b| a / b, (-2.0, 2.0), (0.5, 2.0)),
        ("rem", |a, b| a.rem(b), (-5.0, 5.0), (0.7, 1.9)),
        ("pow", |a, b| a.pow(b), (0.3, 2.0), (-2.0, 2.0)),
        ("max", |a, b| a.maximum(b), (-2.0, 2.0), (-2.0, 2.0)),
        ("min", |a, b| a.minimum(b), (-2.0, 2.0), (-2.0, 2.0)),
        ("atan2", |a, b| a.atan2(b), (-2.0, 2.0), (-2.0, 2.0)),
    ];
    for (name, op, (alo, ahi), (blo, bhi)) in ops {
        for shape in SHAPES {
            let a = rng.tensor(shape, alo, ahi);
            let b = rng.tensor(shape, blo, bhi);
            check(name, &mut rng, &[a, b], |v| op(&v[0], &v[1]));
        }
    }
}

#[test]
fn select_clamp_and_convert() {
    let mut rng = Rng(3);
    for shape in SHAPES {
        let (x, y) = (rng.tensor(shape, -1.0, 1.0), rng.tensor(shape, -1.0, 1.0));
        check("select", &mut rng, &[x, y], |v| where_(&v[0].gt(&v[1]), &v[0].sin(), &(&v[1] * 3.0)));
        // A scalar predicate.
        let (x, y) = (rng.tensor(shape, -1.0, 1.0), rng.tensor(shape, -1.0, 1.0));
        check("select scalar pred", &mut rng, &[x, y], |v| lax::select(&Tensor::scalar(false), &v[0], &v[1]));
        // Tensor bounds (some x below lo, some above hi), and scalar bounds.
        let (lo, x, hi) =
            (rng.tensor(shape, -0.6, -0.2), rng.tensor(shape, -1.0, 1.0), rng.tensor(shape, 0.2, 0.6));
        check("clamp", &mut rng, &[lo, x, hi], |v| lax::clamp(&v[0], &v[1], &v[2]));
        let (lo, x, hi) =
            (rng.tensor(&[], -0.5, -0.1), rng.tensor(shape, -1.0, 1.0), rng.tensor(&[], 0.1, 0.5));
        check("clamp scalar bounds", &mut rng, &[lo, x, hi], |v| lax::clamp(&v[0], &v[1], &v[2]));
        let x = rng.tensor(shape, -1.0, 1.0);
        check("clip", &mut rng, &[x], |v| v[0].clip(-0.3, 0.4));
    }
    // JAX's clamp convention (the transpose of its JVP, which kiln's JVP also uses): x gets the
    // cotangent strictly inside (lo, hi); at a tie (x == lo or x == hi) nobody does; lo > hi sends it
    // to hi.
    let g = kiln::grad(|v: Vec<Tensor>| {
        (lax::clamp(&v[0], &v[1], &v[2]) * v64(&[4], &[1.0, 2.0, 4.0, 8.0])).sum(All)
    })(vec![
        v64(&[4], &[0.0, 0.0, 0.0, 0.0]),
        v64(&[4], &[0.0, 1.0, -1.0, 2.0]),
        v64(&[4], &[1.0, 1.0, 1.0, 1.0]),
    ]);
    assert_eq!(g[0].to_vec::<f64>(), vec![0.0, 0.0, 4.0, 0.0]); // x = -1 < lo
    assert_eq!(g[1].to_vec::<f64>(), vec![0.0, 0.0, 0.0, 0.0]); // x = lo and x = hi are ties
    assert_eq!(g[2].to_vec::<f64>(), vec![0.0, 0.0, 0.0, 8.0]); // x = 2 > hi
    let g = kiln::grad(|v: Vec<Tensor>| lax::clamp(&v[0], &v[1], &v[2]))(vec![
        Tensor::scalar(3.0f64),
        Tensor::scalar(2.5f64),
        Tensor::scalar(1.0f64),
    ]);
    let g: Vec<f64> = g.iter().map(|t| t.item::<f64>()).collect();
    assert_eq!(g, vec![0.0, 0.0, 1.0]); // lo > hi: the result is hi

    // f64 -> f32 -> f64: the cotangent is converted back (rounded through f32).
    let w = v64(&[3], &[0.1, 1.0 / 3.0, -2.5]);
    let g = grad1(
        |x: Tensor| (x.astype(DType::F32).astype(DType::F64) * &w).sum(All),
        v64(&[3], &[1.0, 2.0, 3.0]),
    );
    assert_eq!(g.to_vec::<f64>(), vec![0.1f32 as f64, (1.0f64 / 3.0) as f32 as f64, -2.5]);
    // Through an integer: no gradient.
    let g =
        grad1(|x: Tensor| (x.astype(DType::I32).astype(DType::F64) + &x).sum(All), v64(&[2], &[1.5, -2.5]));
    assert_eq!(g.to_vec::<f64>(), vec![1.0, 1.0]);
}

#[test]
fn structural_family_matches_finite_differences() {
    let mut rng = Rng(4);
    let x = rng.tensor(&[3, 1], -1.0, 1.0);
    check("broadcast_in_dim", &mut rng, &[x], |v| v[0].broadcast_to(&[2, 3, 4]));
    let x = rng.tensor(&[1, 1], -1.0, 1.0);
    check("broadcast size-1 to size-1", &mut rng, &[x], |v| {
        lax::broadcast_in_dim(&v[0], &[1, 2, 1], &[0, 2])
    });
    let x = rng.tensor(&[], -1.0, 1.0);
    check("broadcast scalar", &mut rng, &[x], |v| v[0].broadcast_to(&[2, 2]));
    let x = rng.tensor(&[2, 3, 4], -1.0, 1.0);
    check("reshape", &mut rng, &[x], |v| v[0].reshape(&[4, 6]));
    let x = rng.tensor(&[2, 3, 1, 2], -1.0, 1.0);
    check("transpose rank 4", &mut rng, &[x], |v| lax::transpose(&v[0], &[2, 0, 3, 1]));
    let x = rng.tensor(&[2, 3, 2], -1.0, 1.0);
    check("rev", &mut rng, &[x], |v| v[0].flip([0, 2]));
    let x = rng.tensor(&[7, 5], -1.0, 1.0);
    check("slice strided", &mut rng, &[x], |v| lax::slice(&v[0], &[1, 0], &[7, 4], &[3, 2]));
    let x = rng.tensor(&[4, 3], -1.0, 1.0);
    check("slice empty", &mut rng, &[x], |v| {
        let s = lax::slice(&v[0], &[2, 1], &[2, 3], &[1, 1]);
        s.sum(All) + v[0].index(0).sum(All)
    });
    let (x, pv) = (rng.tensor(&[3, 4], -1.0, 1.0), rng.tensor(&[], -1.0, 1.0));
    check("pad", &mut rng, &[x, pv], |v| lax::pad(&v[0], &v[1], &[2, -1], &[-1, 3], &[1, 2]));
    let (x, pv) = (rng.tensor(&[2], -1.0, 1.0), rng.tensor(&[], -1.0, 1.0));
    check("pad rank 1 crop into interior", &mut rng, &[x, pv], |v| lax::pad(&v[0], &v[1], &[-2], &[1], &[3]));
    let (a, b, c) =
        (rng.tensor(&[2, 1], -1.0, 1.0), rng.tensor(&[2, 3], -1.0, 1.0), rng.tensor(&[2, 2], -1.0, 1.0));
    check("concatenate", &mut rng, &[a, b, c], |v| Tensor::concatenate(v, 1));
    for (s0, s1) in [(1, 2), (5, -3), (-1, 0)] {
        let x = rng.tensor(&[4, 5], -1.0, 1.0);
        let starts = [Tensor::scalar(s0), Tensor::scalar(s1)];
        check("dynamic_slice", &mut rng, &[x], |v| lax::dynamic_slice(&v[0], &starts, &[2, 3]));
        let (x, u) = (rng.tensor(&[4, 5], -1.0, 1.0), rng.tensor(&[2, 3], -1.0, 1.0));
        check("dynamic_update_slice", &mut rng, &[x, u], |v| {
            let r = lax::dynamic_update_slice(&v[0], &v[1], &starts);
            &r * &r
        });
    }
}

#[test]
fn dynamic_slice_grad_lands_at_clamped_window() {
    // x = [0..5], start 4 clamps to 5 - 2 = 3: the window is x[3..5].
    let g = grad1(
        |x: Tensor| {
            (lax::dynamic_slice(&x, &[Tensor::scalar(4i32)], &[2]) * v64(&[2], &[1.0, 10.0])).sum(All)
        },
        v64(&[5], &[0.0, 1.0, 2.0, 3.0, 4.0]),
    );
    assert_eq!(g.to_vec::<f64>(), vec![0.0, 0.0, 0.0, 1.0, 10.0]);
    // dynamic_update_slice with start -7 (clamps to 0): the update covers x[0..2].
    let g = kiln::grad(|v: Vec<Tensor>| {
        (lax::dynamic_update_slice(&v[0], &v[1], &[Tensor::scalar(-7i32)]) * v64(&[4], &[1.0, 2.0, 3.0, 4.0]))
            .sum(All)
    })(vec![v64(&[4], &[9.0; 4]), v64(&[2], &[5.0, 6.0])]);
    assert_eq!(g[0].to_vec::<f64>(), vec![0.0, 0.0, 3.0, 4.0]);
    assert_eq!(g[1].to_vec::<f64>(), vec![1.0, 2.0]);
}

#[test]
fn indexing_family_matches_finite_differences() {
    let mut rng = Rng(5);
    // gather: take along axis 1 with out-of-range and negative indices (clamped), rank 3.
    let x = rng.tensor(&[2, 4, 3], -1.0, 1.0);
    let idx = Tensor::from_vec(&[2, 3], vec![0i32, 3, 3, 7, -1, 1]);
    check("gather clip", &mut rng, &[x], |v| v[0].take_with_mode(&idx, 1, IndexMode::Clip));
    // gather with batch dims (take_along_axis).
    let x = rng.tensor(&[3, 4], -1.0, 1.0);
    let idx = Tensor::from_vec(&[3, 2], vec![0i32, 0, 3, 1, 2, 2]);
    check("gather batch dims", &mut rng, &[x], |v| v[0].take_along_axis(&idx, 1));
    // scatter_add with duplicates and an out-of-range (dropped) index.
    let (x, u) = (rng.tensor(&[4, 2], -1.0, 1.0), rng.tensor(&[5, 2], -1.0, 1.0));
    let idx = i32s(&[1, 3, 1, 9, 0]);
    check("scatter_add", &mut rng, &[x, u], |v| {
        let r = v[0].at_add(&idx, &v[1]);
        &r * &r
    });
    // scatter (set): no duplicates here, so every update wins.
    let (x, u) = (rng.tensor(&[4, 2], -1.0, 1.0), rng.tensor(&[3, 2], -1.0, 1.0));
    let idx = i32s(&[2, 0, 3]);
    check("scatter", &mut rng, &[x, u], |v| v[0].at_set(&idx, &v[1]).sin());
    // scatter with batch dims and clip mode through lax.
    let (x, u) = (rng.tensor(&[2, 3], -1.0, 1.0), rng.tensor(&[2, 2], -1.0, 1.0));
    let idx = Tensor::from_vec(&[2, 2], vec![0i32, 2, 5, 1]);
    check("scatter_add batch clip", &mut rng, &[x, u], |v| {
        lax::scatter(kiln::ir::ScatterOp::Add, &v[0], &idx, &v[1], 1, 1, IndexMode::Clip).exp()
    });
    // segment_sum with duplicates and dropped ids.
    let x = rng.tensor(&[5, 2], -1.0, 1.0);
    let ids = i32s(&[2, 0, 2, -1, 4]);
    check("segment_sum", &mut rng, &[x], |v| v[0].segment_sum(&ids, 3).sin());
}

#[test]
fn scatter_set_duplicates_only_the_winner_gets_the_cotangent() {
    // at_set([0,0,0], [1, 1, 0, 5], [a, b, c, d]): b wins index 1 (last), c sets 0, d is dropped.
    let w = v64(&[3], &[1.0, 10.0, 100.0]);
    let g = kiln::grad(|v: Vec<Tensor>| (v[0].at_set(&i32s(&[1, 1, 0, 5]), &v[1]) * &w).sum(All))(vec![
        v64(&[3], &[7.0, 8.0, 9.0]),
        v64(&[4], &[1.0, 2.0, 3.0, 4.0]),
    ]);
    assert_eq!(g[0].to_vec::<f64>(), vec![0.0, 0.0, 100.0]); // x[0], x[1] overwritten; x[2] kept
    assert_eq!(g[1].to_vec::<f64>(), vec![0.0, 10.0, 1.0, 0.0]);
    // Clip mode: 7 clamps to 2, after index 2 wrote: the clamped one wins.
    let g = kiln::grad(|v: Vec<Tensor>| {
        (lax::scatter(kiln::ir::ScatterOp::Set, &v[0], &i32s(&[2, 7]), &v[1], 0, 0, IndexMode::Clip) * &w)
            .sum(All)
    })(vec![v64(&[3], &[7.0, 8.0, 9.0]), v64(&[2], &[1.0, 2.0])]);
    assert_eq!(g[0].to_vec::<f64>(), vec![1.0, 10.0, 0.0]);
    assert_eq!(g[1].to_vec::<f64>(), vec![0.0, 100.0]);
}

#[test]
fn reductions_match_finite_differences() {
    let mut rng = Rng(6);
    for op in [ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min, ReduceOp::Prod] {
        for (shape, axes) in [(&[4][..], &[0][..]), (&[2, 3], &[1]), (&[2, 3, 2], &[0, 2]), (&[3, 2], &[])] {
            let x = rng.tensor(shape, 0.5, 1.5);
            check(op.name(), &mut rng, &[x], |v| lax::reduce(op, &v[0], axes));
        }
    }
    let x = rng.tensor(&[2, 3], -1.0, 1.0);
    check("mean, var", &mut rng, &[x], |v| v[0].var(1) + v[0].mean(0).sum(All));
}

#[test]
fn reduce_prod_is_exact_with_zeros() {
    // d/dx_k prod(x) = prod of the others.
    let g = grad1(|x: Tensor| x.prod_all(), v64(&[4], &[2.0, 0.0, 3.0, 5.0]));
    assert_eq!(g.to_vec::<f64>(), vec![0.0, 30.0, 0.0, 0.0]);
    let g = grad1(|x: Tensor| x.prod_all(), v64(&[3], &[0.0, 4.0, 0.0]));
    assert_eq!(g.to_vec::<f64>(), vec![0.0, 0.0, 0.0]);
    let g = grad1(|x: Tensor| x.prod(1).sum(All), v64(&[2, 2], &[2.0, 3.0, 0.0, 7.0]));
    assert_eq!(g.to_vec::<f64>(), vec![3.0, 2.0, 7.0, 0.0]);
}

#[test]
fn reduce_max_min_split_ties_and_empty() {
    let g = grad1(|x: Tensor| x.max(1).sum(All), v64(&[2, 3], &[1.0, 3.0, 3.0, 5.0, 5.0, 5.0]));
    assert_eq!(g.to_vec::<f64>(), vec![0.0, 0.5, 0.5, 1.0 / 3.0, 1.0 / 3.0, 1.0 / 3.0]);
    // An empty operand: an empty cotangent of the operand's shape.
    let g = grad1(|x: Tensor| x.sum(All), Tensor::from_vec(&[0, 2], Vec::<f64>::new()));
    assert_eq!(g.shape().dims(), &[0, 2]);
}

#[test]
fn cumulative_match_finite_differences() {
    let mut rng = Rng(7);
    for op in [CumulativeOp::Sum, CumulativeOp::Prod, CumulativeOp::Max, CumulativeOp::Min] {
        for reverse in [false, true] {
            for (shape, axis) in [(&[5][..], 0), (&[2, 4], 1), (&[3, 2, 2], 0)] {
                let x = rng.tensor(shape, -1.5, 1.5);
                check(op.name(), &mut rng, &[x], |v| lax::cumulative(op, &v[0], axis, reverse));
            }
        }
    }
}

#[test]
fn cumprod_and_cummax_exact_values() {
    // cumprod([3, 0, 2, 0, 5]) = [3, 0, 0, 0, 0]; with ct = 1: d/dx0 = 1, d/dx1 = 3 + 3·2 + 0 + 0 = 9,
    // d/dx2 = 0, d/dx3 = 3·0·… = 0 (a zero before it), d/dx4 = 0.
    let g = grad1(|x: Tensor| x.cumprod(0, false).sum(All), v64(&[5], &[3.0, 0.0, 2.0, 0.0, 5.0]));
    assert_eq!(g.to_vec::<f64>(), vec![1.0, 9.0, 0.0, 0.0, 0.0]);
    // Reverse: cumprod from the end of [2, 0, 3] = [x0·x1·x2, x1·x2, x2] = [0, 0, 3]; the gradient of
    // the sum is [x1·x2, x0·x2 + x2, x0·x1 + x1 + 1] = [0, 6 + 3, 1].
    let g = grad1(|x: Tensor| x.cumprod(0, true).sum(All), v64(&[3], &[2.0, 0.0, 3.0]));
    assert_eq!(g.to_vec::<f64>(), vec![0.0, 9.0, 1.0]);
    // cummax([1, 3, 2, 3, 5]) = [1, 3, 3, 3, 5]: outputs 1 and 2 take x1; output 3 splits between the
    // tied 3s (x1, x3), as the JVP rule does. JAX 0.10 gives the same [1, 610, 0, 500, 10000].
    let w = v64(&[5], &[1.0, 10.0, 100.0, 1000.0, 10000.0]);
    let g = grad1(|x: Tensor| (x.cummax(0, false) * &w).sum(All), v64(&[5], &[1.0, 3.0, 2.0, 3.0, 5.0]));
    assert_eq!(g.to_vec::<f64>(), vec![1.0, 610.0, 0.0, 500.0, 10000.0]);
    // cummin from the end of [4, 1, 2] = [1, 1, 2].
    let g = grad1(
        |x: Tensor| (x.cummin(0, true) * v64(&[3], &[1.0, 10.0, 100.0])).sum(All),
        v64(&[3], &[4.0, 1.0, 2.0]),
    );
    assert_eq!(g.to_vec::<f64>(), vec![0.0, 11.0, 100.0]);
}

#[test]
fn cummax_gradient_is_the_transpose_of_its_jvp_at_ties() {
    // Regression (bad-input hunt): the VJP gave each output's cotangent to the first position that
    // reached its running max, while the JVP splits ties equally, so grad and jvp disagreed:
    // grad of sum(cummax([1, 1, 0.5])) was [3, 0, 0]; the JVP's transpose (and JAX) give [2, 1, 0].
    let g = grad1(|x: Tensor| x.cummax(0, false).sum(All), v64(&[3], &[1.0, 1.0, 0.5]));
    assert_eq!(g.to_vec::<f64>(), vec![2.0, 1.0, 0.0]);
    // <w, J t> == <J^T w, t> on tie-heavy rows, along either axis and in either direction.
    let x = v64(&[3, 6], &[2., 2., 1., 2., 3., 3., 1., 1., 1., 1., 1., 1., 5., 4., 5., 5., 0., 5.]);
    let t = v64(&[3, 6], &[0.5, -1., 2., 3., -2., 1., 1., 2., 3., 4., 5., 6., -1., 0.25, 7., -3., 2., 1.5]);
    let w = v64(&[3, 6], &[1., 3., -2., 0.5, 4., -1., 2., -1., 0.5, 3., 1., -2., 1.5, 2., -0.5, 1., -3., 2.]);
    for (axis, reverse) in [(1, false), (1, true), (0, false), (0, true)] {
        for max in [true, false] {
            let f = |x: Tensor| if max { x.cummax(axis, reverse) } else { x.cummin(axis, reverse) };
            let (_, jt) = jvp(f, x.clone(), t.clone());
            let g = grad1(|x: Tensor| (f(x) * &w).sum(All), x.clone());
            let lhs: f64 = (&w * &jt).sum(All).to_vec::<f64>()[0];
            let rhs: f64 = (&g * &t).sum(All).to_vec::<f64>()[0];
            assert!((lhs - rhs).abs() < 1e-12, "axis {axis} reverse {reverse} max {max}: {lhs} vs {rhs}");
        }
    }
    // A NaN output has no tied position: its input's gradient is NaN, as its tangent is; the
    // positions before the NaN are unaffected. Empty axes have empty gradients.
    let g = grad1(|x: Tensor| x.cummax(0, false).sum(All), v64(&[4], &[1.0, 3.0, f64::NAN, 2.0]));
    let g = g.to_vec::<f64>();
    assert_eq!(g[..2], [1.0, 1.0]);
    assert!(g[2].is_nan() && g[3].is_nan(), "{g:?}");
    let g = grad1(|x: Tensor| x.cummax(1, false).sum(All), v64(&[2, 0], &[]));
    assert_eq!(g.shape().dims(), &[2, 0]);
}

#[test]
fn sort_matches_finite_differences() {
    let mut rng = Rng(8);
    let (k, v) = (rng.tensor(&[2, 5], -1.0, 1.0), rng.tensor(&[2, 5], -1.0, 1.0));
    check("sort two operands", &mut rng, &[k, v], |v| Tensor::concatenate(&lax::sort(v, 1, 1), 0));
    let (k, v) = (rng.tensor(&[4, 3], -1.0, 1.0), rng.tensor(&[4, 3], -1.0, 1.0));
    check("sort two keys axis 0", &mut rng, &[k, v], |v| Tensor::concatenate(&lax::sort(v, 0, 2), 1));
    let x = rng.tensor(&[6], -1.0, 1.0);
    check("jnp.sort", &mut rng, &[x], |v| v[0].sort(0));
    // Ties keep their order (stable): sort([2, 1, 2]) = [1, 2, 2] with the 2s from positions 0, 2.
    let g =
        grad1(|x: Tensor| (x.sort(0) * v64(&[3], &[1.0, 10.0, 100.0])).sum(All), v64(&[3], &[2.0, 1.0, 2.0]));
    assert_eq!(g.to_vec::<f64>(), vec![10.0, 1.0, 100.0]);
}

#[test]
fn dot_general_matches_finite_differences() {
    let mut rng = Rng(9);
    let (a, b) = (rng.tensor(&[2, 3], -1.0, 1.0), rng.tensor(&[3, 4], -1.0, 1.0));
    check("matmul", &mut rng, &[a, b], |v| v[0].matmul(&v[1]));
    let (a, b) = (rng.tensor(&[3], -1.0, 1.0), rng.tensor(&[3], -1.0, 1.0));
    check("inner", &mut rng, &[a, b], |v| v[0].dot(&v[1]));
    // lhs (c0=2, b=3, f=2, c1=2), rhs (c1=2, f=2, b=3, c0=2): contractions in crossed order.
    let (a, b) = (rng.tensor(&[2, 3, 2, 2], -1.0, 1.0), rng.tensor(&[2, 2, 3, 2], -1.0, 1.0));
    check("dot_general batch + crossed contraction", &mut rng, &[a, b], |v| {
        lax::dot_general(&v[0], &v[1], (&[0, 3], &[3, 0]), (&[1], &[2]), None)
    });
    // Outer product (no contraction), two batch dims in swapped order.
    let (a, b) = (rng.tensor(&[2, 3, 2], -1.0, 1.0), rng.tensor(&[3, 2, 2], -1.0, 1.0));
    check("dot_general two batch dims", &mut rng, &[a, b], |v| {
        lax::dot_general(&v[0], &v[1], (&[], &[]), (&[0, 1], &[1, 0]), None)
    });
}

#[test]
fn dot_general_preferred_element_type() {
    // f32 operands, f64 result: the cotangents are f32. d/da sum(a·b) = row sums of b, d/db = column
    // sums of a broadcast: a = [[1,2],[3,4]], b = [[5,6],[7,8]] -> da = [[11,15],[11,15]],
    // db = [[4,4],[6,6]].
    let a = Tensor::from_vec(&[2, 2], vec![1.0f32, 2.0, 3.0, 4.0]);
    let b = Tensor::from_vec(&[2, 2], vec![5.0f32, 6.0, 7.0, 8.0]);
    let g = kiln::grad(|v: Vec<Tensor>| {
        lax::dot_general(&v[0], &v[1], (&[1], &[0]), (&[], &[]), Some(DType::F64)).sum(All)
    })(vec![a, b]);
    assert_eq!(g[0].dtype(), DType::F32);
    assert_eq!(f32s(&g[0]), vec![11.0, 15.0, 11.0, 15.0]);
    assert_eq!(f32s(&g[1]), vec![4.0, 4.0, 6.0, 6.0]);
}

#[test]
fn f32_rules_agree_with_f64() {
    // The rules are dtype-generic: the same program in f32 and f64 at a point where both are exact
    // enough. sum(tanh(x)·exp(x)·x²), one coordinate by hand at x = 0.5: d/dx = (1 - tanh²)e^x x² +
    // tanh e^x x² + 2 tanh e^x x.
    let f = |x: Tensor| (x.tanh() * x.exp() * &x * &x).sum(All);
    let g64 = grad1(f, v64(&[2], &[0.5, -1.0])).to_vec::<f64>();
    let g32 = f32s(&grad1(f, v32(&[0.5, -1.0])));
    let (t, e, x) = (0.5f64.tanh(), 0.5f64.exp(), 0.5f64);
    let by_hand = (1.0 - t * t) * e * x * x + t * e * x * x + 2.0 * t * e * x;
    assert!((g64[0] - by_hand).abs() < 1e-12);
    for (a, b) in g32.iter().zip(&g64) {
        assert!((f64::from(*a) - b).abs() < 1e-5 * (1.0 + b.abs()));
    }
}

// ---------------------------------------------------------------------------------------------
// ad-cases.json

#[test]
fn case_01_norm_grad_at_zero() {
    // The case's program squares `jnp.linalg.norm`: kiln's `nn::norm` (a double where) gives the
    // squared norm gradient 0 at 0 (JAX NaN). A bare sqrt(Σx²) keeps IEEE semantics: NaN (0 · inf).
    let bare = |x: &Tensor| (x * x).sum(All).sqrt();
    let norm = |x: &Tensor| kiln::nn::norm(x, All);
    let x0 = v32(&[0.0, 0.0, 0.0]);
    let x1 = v32(&[3.0, 4.0, 0.0]);
    let via_square = |x: Tensor| norm(&x).square();
    let via_pow = |x: Tensor| norm(&x).pow(&Tensor::scalar(2.0f32));
    assert_eq!(via_square(x0.clone()).item::<f32>(), 0.0);
    same(&f32s(&grad1(via_square, x0.clone())), &[0.0, 0.0, 0.0]);
    same(&f32s(&grad1(via_pow, x0.clone())), &[0.0, 0.0, 0.0]);
    same(&f32s(&grad1(|x: Tensor| bare(&x).square(), x0.clone())), &[f32::NAN; 3]);
    same(&f32s(&grad1(|x: Tensor| (&x * &x).sum(All), x0.clone())), &[0.0, 0.0, 0.0]);
    // The bare norm itself at 0: NaN (inf · 0), the expected value; never ±inf.
    same(&f32s(&grad1(|x: Tensor| bare(&x), x0)), &[f32::NAN; 3]);
    let g = f32s(&grad1(via_square, x1.clone()));
    for (a, b) in g.iter().zip([6.0f32, 8.0, 0.0]) {
        assert!((a - b).abs() <= 1e-6 + 1e-6 * b.abs(), "{g:?}");
    }
    let g = f32s(&grad1(|x: Tensor| norm(&x), x1));
    for (a, b) in g.iter().zip([0.6f32, 0.8, 0.0]) {
        assert!((a - b).abs() <= 1e-7 + 1e-6 * b.abs(), "{g:?}");
    }
}

#[test]
fn case_02_where_nan_unused_branch() {
    let zero = Tensor::scalar(0.0f32);
    let xs = v32(&[4.0, 0.0, -1.0]);
    let f_sqrt = |x: Tensor| where_(&x.gt(&zero), &x.sqrt(), &zero).sum(All);
    assert_eq!(f_sqrt(xs.clone()).item::<f32>(), 2.0);
    same(&f32s(&grad1(f_sqrt, xs.clone())), &[0.25, 0.0, 0.0]); // 1/(2·sqrt 4)
    let xl = v32(&[std::f32::consts::E, 0.0, -1.0]);
    let f_xlogx = |x: Tensor| where_(&x.gt(&zero), &(&x * x.log()), &zero).sum(All);
    let g = f32s(&grad1(f_xlogx, xl));
    // d/dx x log x = log x + 1 = 2 at e.
    assert!((g[0] - 2.0).abs() <= 1e-6 && g[1] == 0.0 && g[2] == 0.0, "{g:?}");
    let mask = Tensor::from_vec(&[3], vec![false, true, false]);
    let f_atan2 = |a: Tensor| where_(&mask, &zero, &a.atan2(&a)).sum(All);
    // atan2(3,3) + atan2(-5,-5) = π/4 - 3π/4.
    assert!((f_atan2(v32(&[3.0, 0.0, -5.0])).item::<f32>() + std::f32::consts::FRAC_PI_2).abs() < 1e-6);
    same(&f32s(&grad1(f_atan2, v32(&[3.0, 0.0, -5.0]))), &[0.0, 0.0, 0.0]);
    let f_safe = |x: Tensor| {
        let pos = x.gt(&zero);
        where_(&pos, &where_(&pos, &x, &Tensor::scalar(1.0f32)).sqrt(), &zero).sum(All)
    };
    assert_eq!(f_safe(xs.clone()).item::<f32>(), 2.0);
    same(&f32s(&grad1(f_safe, xs)), &[0.25, 0.0, 0.0]);
}

#[test]
fn case_05_pow_zero_base_grad() {
    let s = |v: f32| Tensor::scalar(v);
    let d_db = |a: f32, b: f32| grad1(|b: Tensor| s(a).pow(&b), s(b)).item::<f32>();
    assert_eq!(d_db(0.0, 1.0), 0.0);
    assert!((d_db(2.0, 1.0) - 1.3862944).abs() <= 1e-6 * 1.3862944); // 2 ln 2
    let d_da = |b: f32| grad1(|a: Tensor| a.pow(&s(b)), s(0.0)).item::<f32>();
    same(
        &[d_da(2.0), d_da(1.0), d_da(0.5), d_da(0.0), d_da(-1.0)],
        &[0.0, 1.0, f32::INFINITY, 0.0, f32::NEG_INFINITY],
    );
    assert_eq!(grad1(|a: Tensor| a.square(), s(0.0)).item::<f32>(), 0.0);
    assert_eq!(s(0.0).pow(&s(0.0)).item::<f32>(), 1.0);
}

#[test]
fn case_10_max_ties_grad() {
    let x = v32(&[1.0, 3.0, 3.0]);
    same(&f32s(&grad1(|x: Tensor| x.max_all(), x.clone())), &[0.0, 0.5, 0.5]);
    same(&f32s(&grad1(|x: Tensor| x.take(&x.argmax(0), 0), x)), &[0.0, 1.0, 0.0]);
    let zero = Tensor::scalar(0.0f32);
    assert_eq!(grad1(|x: Tensor| x.maximum(&zero), zero.clone()).item::<f32>(), 0.5);
    assert_eq!(grad1(|x: Tensor| where_(&x.gt(&zero), &x, &zero), zero.clone()).item::<f32>(), 0.0);
    assert_eq!(grad1(|x: Tensor| x.relu(), zero.clone()).item::<f32>(), 0.0);
    same(&f32s(&grad1(|x: Tensor| x.min_all(), v32(&[2.0, 2.0, 5.0]))), &[0.5, 0.5, 0.0]);
}

#[test]
fn case_11_abs_grad_at_zero() {
    let g = |v: f32| grad1(|x: Tensor| x.abs(), Tensor::scalar(v)).item::<f32>();
    same(&[g(0.0), g(-0.0), g(-1.0)], &[1.0, 1.0, -1.0]);
}

#[test]
fn case_13_segment_sum_duplicates() {
    let loc = i32s(&[0, 2, 2, 1, 2]);
    let w = v32(&[0.1, 0.2, 0.3, 0.4, 0.5]);
    let c = v32(&[1.0, 2.0, 3.0]);
    let counts = |w: &Tensor| Tensor::zeros(DType::F32, &[3]).at_add(&loc, w);
    let near = |got: &[f32], want: &[f64]| {
        for (a, b) in got.iter().zip(want) {
            assert!((f64::from(*a) - b).abs() <= 1e-6 * b.abs(), "{got:?} vs {want:?}");
        }
    };
    near(&f32s(&counts(&w)), &[0.1, 0.4, 1.0]);
    near(&f32s(&w.segment_sum(&loc, 3)), &[0.1, 0.4, 1.0]);
    // grad of sum(c · counts) is c[loc].
    same(&f32s(&grad1(|w: Tensor| (&c * counts(&w)).sum(All), w.clone())), &[1.0, 3.0, 3.0, 2.0, 3.0]);
    same(
        &f32s(&grad1(|w: Tensor| (&c * w.segment_sum(&loc, 3)).sum(All), w.clone())),
        &[1.0, 3.0, 3.0, 2.0, 3.0],
    );
    let infect = |(w, beta): (Tensor, Tensor)| {
        let lam = counts(&w).take(&loc, 0);
        (1.0 - (-(&beta * &lam)).exp()).sum(All)
    };
    let args = (w, Tensor::scalar(0.5f32));
    assert!((f64::from(infect(args.clone()).item::<f32>()) - 1.4104478599891492).abs() <= 1e-6 * 1.41);
    let (gw, gb) = kiln::grad(infect)(args);
    near(
        &f32s(&gw),
        &[
            0.4756147118959964,
            0.9097959827904418,
            0.9097959827904418,
            0.40936537531898703,
            0.9097959827904418,
        ],
    );
    near(&[gb.item::<f32>()], &[2.242207241626764]);
}

#[test]
fn case_15_oob_gather_grad() {
    let x = v32(&[1.0, 2.0, 3.0]);
    let f = |(x, i): (Tensor, Tensor)| {
        let v = x.take(&i, 0);
        &v * &v
    };
    for (i, value, grad) in [
        (1, 4.0, [0.0, 4.0, 0.0]),
        (3, 9.0, [0.0, 0.0, 6.0]),
        (5, 9.0, [0.0, 0.0, 6.0]),
        (-1, 9.0, [0.0, 0.0, 6.0]),
        (-5, 1.0, [2.0, 0.0, 0.0]),
    ] {
        let args = (x.clone(), Tensor::scalar(i));
        assert_eq!(f(args.clone()).item::<f32>(), value, "value at i = {i}");
        same(&f32s(&kiln::grad_argnums(f, &[0])(args).0), &grad);
    }
    let g = |(x, i): (Tensor, Tensor)| x.take_with_mode(&i, 0, IndexMode::FillOrDrop);
    let args = (x, Tensor::scalar(5i32));
    assert!(g(args.clone()).item::<f32>().is_nan());
    same(&f32s(&kiln::grad_argnums(g, &[0])(args).0), &[0.0, 0.0, 0.0]);
}

#[test]
fn case_17_cumsum_cumprod_grad() {
    let w = v32(&[1.0, 2.0, 3.0, 4.0]);
    // Reverse cumsum of w.
    same(
        &f32s(&grad1(|x: Tensor| (&w * x.cumsum(0, false)).sum(All), v32(&[0.5, -1.0, 2.0, 3.0]))),
        &[10.0, 9.0, 7.0, 4.0],
    );
    let xz = v32(&[2.0, 0.0, 3.0]);
    same(&f32s(&xz.cumprod(0, false)), &[2.0, 0.0, 0.0]);
    // [1 + x1 + x1·x2, x0 + x0·x2, x0·x1] = [1, 8, 0].
    same(&f32s(&grad1(|x: Tensor| x.cumprod(0, false).sum(All), xz)), &[1.0, 8.0, 0.0]);
    // At [2, 0.5, 3]: [1 + 0.5 + 1.5, 2 + 6, 1] = [3, 8, 1].
    let g = f32s(&grad1(|x: Tensor| x.cumprod(0, false).sum(All), v32(&[2.0, 0.5, 3.0])));
    for (a, b) in g.iter().zip([3.0f32, 8.0, 1.0]) {
        assert!((a - b).abs() <= 1e-6 * b, "{g:?}");
    }
}

#[test]
fn case_30_grad_reduce_max_with_nan() {
    // Nothing equals a NaN maximum: the split is 0/0, NaN everywhere (the expected value).
    let g = f32s(&grad1(|x: Tensor| x.max_all(), v32(&[f32::NAN, 1.0, 3.0, 2.0])));
    same(&g, &[f32::NAN; 4]);
}

#[test]
fn grad_of_grad_runs_the_rules_on_tracers() {
    // f(x) = Σ x³ + tanh(x): f'' = 6x - 2 tanh(x)(1 - tanh²(x)); grad(Σ f'(x)) = f''(x).
    let f = |x: Tensor| (&x * &x * &x + x.tanh()).sum(All);
    let xs = [0.3, -1.2, 2.0];
    let g2 = grad1(|x: Tensor| kiln::grad(f)(x).sum(All), v64(&[3], &xs)).to_vec::<f64>();
    for (g, x) in g2.iter().zip(xs) {
        let t = x.tanh();
        let want = 6.0 * x - 2.0 * t * (1.0 - t * t);
        assert!((g - want).abs() < 1e-12, "{g} vs {want}");
    }
    // Second order through structural and indexing rules, against finite differences of the
    // first-order gradient: h(x) = Σ w · grad(Σ cumprod(x)·sort(x)² + prod(x[idx]))(x).
    let mut rng = Rng(10);
    let idx = i32s(&[3, 0, 3, 9]);
    let inner = move |x: Tensor| {
        (x.cumprod(0, false) * x.sort(0).square()).sum(All) + x.take(&idx, 0).prod_all() + x.max_all()
    };
    let x = rng.tensor(&[4], 0.5, 1.5);
    check("grad of grad", &mut rng, &[x], |v| kiln::grad(inner.clone())(v[0].clone()));
}

#[test]
fn clip_has_jnp_clips_gradient_at_its_bounds() {
    // Regression: `clip` was `lax.clamp` (gradient 0 at a bound); jnp.clip is `minimum(maximum(x,
    // lo), hi)`, whose tie split gives 1/2 there (JAX 0.10: `grad(lambda x: jnp.clip(x, 0., 1.))` is
    // 0.5 at 0.0 and at 1.0). Inside the bounds 1, outside 0; values and NaN unchanged.
    let g = |x: f32| grad(|y: Tensor| y.clip(0.0, 1.0))(Tensor::scalar(x)).to_vec::<f32>()[0];
    assert_eq!([g(0.0), g(1.0), g(0.25), g(-2.0), g(3.0)], [0.5, 0.5, 1.0, 0.0, 0.0]);
    let x = Tensor::from_vec(&[4], vec![-2.0f32, 0.5, 3.0, f32::NAN]);
    let y = kiln::jit(|x: Tensor| x.clip(0.0, 1.0)).call(&x).unwrap().to_vec::<f32>();
    assert_eq!(&y[..3], &[0.0, 0.5, 1.0]);
    assert!(y[3].is_nan());
}
