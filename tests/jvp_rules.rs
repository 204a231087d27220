//! Forward-mode (JVP) rules, one primitive at a time: `kiln::jvp` against central finite differences
//! in f64 at random points and several shapes (rank 0..4), plus the exact values of the JAX cases in
//! `../shared/data/cases/ad-cases.json` that concern JVP rules (05, 10, 11, 17) and a few
//! non-differentiable points (zeros, NaN, ±inf).

use kiln::ir::{ArgOp, BinaryOp, CompareOp, CumulativeOp, IndexMode, Prim, ReduceOp, ScatterOp, UnaryOp};
use kiln::prelude::*;
use kiln::{jvp, lax};

/// A small deterministic generator (SplitMix64), so failures reproduce.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    }

    /// f64 tensor of `shape`, entries uniform in `[lo, hi)`.
    fn uniform(&mut self, shape: &[usize], lo: f64, hi: f64) -> Tensor {
        let n: usize = shape.iter().product();
        Tensor::from_vec(shape, (0..n).map(|_| lo + (hi - lo) * self.next()).collect())
    }

    /// f64 tensor with entries of magnitude in `[lo, hi)` and random sign.
    fn signed(&mut self, shape: &[usize], lo: f64, hi: f64) -> Tensor {
        let n: usize = shape.iter().product();
        let v = (0..n)
            .map(|_| {
                let m = lo + (hi - lo) * self.next();
                if self.next() < 0.5 { -m } else { m }
            })
            .collect();
        Tensor::from_vec(shape, v)
    }
}

const SHAPES: [&[usize]; 5] = [&[], &[3], &[2, 3], &[2, 1, 3], &[1, 2, 2, 2]];

fn f64s(t: &Tensor) -> Vec<f64> {
    t.to_vec::<f64>()
}

fn zeros_like(t: &Tensor) -> Tensor {
    Tensor::zeros(t.dtype(), t.shape().dims())
}

/// Checks `jvp(f)` at `xs` along random tangents (zeros for integer inputs) against central
/// differences `(f(x + h·t) - f(x - h·t)) / 2h`, and its primal output against `f(xs)`.
#[track_caller]
fn check_fd(name: &str, rng: &mut Rng, f: impl Fn(&[Tensor]) -> Tensor + Clone, xs: &[Tensor]) {
    let ts: Vec<Tensor> = xs
        .iter()
        .map(|x| if x.dtype().is_float() { rng.uniform(x.shape().dims(), -1.0, 1.0) } else { zeros_like(x) })
        .collect();
    let g = f.clone();
    let (y, ty) = jvp(move |v: Vec<Tensor>| g(&v), xs.to_vec(), ts.clone());
    let y_direct = f(xs);
    assert_eq!(y.shape(), y_direct.shape(), "{name}: primal shape");
    assert_eq!(ty.shape(), y.shape(), "{name}: tangent shape");
    for (a, b) in f64s(&y).iter().zip(f64s(&y_direct)) {
        assert!(a == &b || (a.is_nan() && b.is_nan()), "{name}: primal {a} vs direct {b}");
    }
    let h = 1e-6;
    let moved = |s: f64| -> Vec<Tensor> {
        xs.iter().zip(&ts).map(|(x, t)| if x.dtype().is_float() { x + &(t * s) } else { x.clone() }).collect()
    };
    let (plus, minus) = (f(&moved(h)), f(&moved(-h)));
    for (i, ((p, m), d)) in f64s(&plus).iter().zip(f64s(&minus)).zip(f64s(&ty)).enumerate() {
        let fd = (p - m) / (2.0 * h);
        assert!(
            (fd - d).abs() <= 1e-6 * (1.0 + fd.abs()),
            "{name}: tangent[{i}] = {d}, finite differences {fd} (at {xs:?})"
        );
    }
}

/// The tangent of `f` at scalar `x` along `t` (f64).
fn jvp1(f: impl Fn(Tensor) -> Tensor, x: f64, t: f64) -> f64 {
    jvp(f, Tensor::scalar(x), Tensor::scalar(t)).1.item::<f64>()
}

/// The gradient of scalar-valued `f` at `x`, one JVP per basis tangent (f64).
fn grad_by_jvp(f: impl Fn(Tensor) -> Tensor + Clone, x: &[f64]) -> Vec<f64> {
    (0..x.len())
        .map(|j| {
            let mut e = vec![0.0; x.len()];
            e[j] = 1.0;
            let xs = Tensor::from_vec(&[x.len()], x.to_vec());
            jvp(f.clone(), xs, Tensor::from_vec(&[x.len()], e)).1.item::<f64>()
        })
        .collect()
}

// ---- elementwise -------------------------------------------------------------------------------

#[test]
fn unary_ops_match_finite_differences() {
    let mut rng = Rng(1);
    // (op, domain): inputs stay inside the domain and away from kinks.
    let ops: [(UnaryOp, f64, f64); 14] = [
        (UnaryOp::Neg, -2.0, 2.0),
        (UnaryOp::Abs, 0.1, 2.0), // signed below
        (UnaryOp::Exp, -2.0, 2.0),
        (UnaryOp::Expm1, -2.0, 2.0),
        (UnaryOp::Log, 0.2, 3.0),
        (UnaryOp::Log1p, -0.8, 3.0),
        (UnaryOp::Sqrt, 0.2, 3.0),
        (UnaryOp::Rsqrt, 0.2, 3.0),
        (UnaryOp::Sin, -3.0, 3.0),
        (UnaryOp::Cos, -3.0, 3.0),
        (UnaryOp::Tanh, -2.0, 2.0),
        (UnaryOp::Logistic, -4.0, 4.0),
        (UnaryOp::Erf, -2.0, 2.0),
        (UnaryOp::ErfInv, -0.9, 0.9),
    ];
    for (op, lo, hi) in ops {
        for shape in SHAPES {
            let x = if op == UnaryOp::Abs { rng.signed(shape, lo, hi) } else { rng.uniform(shape, lo, hi) };
            check_fd(op.name(), &mut rng, move |v| lax::unary(op, &v[0]), &[x]);
        }
    }
}

#[test]
fn piecewise_constant_unary_ops_have_zero_tangent() {
    // sign/floor/ceil/round/round_even (and is_finite's bool result) carry no tangent.
    let x = Tensor::from_vec(&[4], vec![-1.5f64, 0.25, 2.5, 0.0]);
    let t = Tensor::from_vec(&[4], vec![1.0f64, 2.0, 3.0, 4.0]);
    for op in [UnaryOp::Sign, UnaryOp::Floor, UnaryOp::Ceil, UnaryOp::Round, UnaryOp::RoundEven] {
        let (_, ty) = jvp(move |x: Tensor| lax::unary(op, &x), x.clone(), t.clone());
        assert_eq!(f64s(&ty), vec![0.0; 4], "{}", op.name());
    }
    let (y, ty) = jvp(|x: Tensor| lax::unary(UnaryOp::IsFinite, &x), x.clone(), t.clone());
    assert_eq!(y.dtype(), DType::Bool);
    assert_eq!(ty.dtype(), DType::Bool);
}

#[test]
fn binary_ops_match_finite_differences() {
    let mut rng = Rng(2);
    for shape in SHAPES {
        let (a, b) = (rng.uniform(shape, -2.0, 2.0), rng.uniform(shape, -2.0, 2.0));
        for op in [BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Atan2, BinaryOp::Max, BinaryOp::Min]
        {
            check_fd(op.name(), &mut rng, move |v| lax::binary(op, &v[0], &v[1]), &[a.clone(), b.clone()]);
        }
        let y = rng.signed(shape, 0.5, 2.0);
        check_fd("div", &mut rng, |v| lax::binary(BinaryOp::Div, &v[0], &v[1]), &[a.clone(), y.clone()]);
        let x5 = rng.uniform(shape, -5.0, 5.0);
        check_fd("rem", &mut rng, |v| lax::binary(BinaryOp::Rem, &v[0], &v[1]), &[x5, y]);
        let (base, expo) = (rng.uniform(shape, 0.5, 2.0), rng.uniform(shape, -2.0, 2.0));
        check_fd("pow", &mut rng, |v| lax::binary(BinaryOp::Pow, &v[0], &v[1]), &[base, expo]);
    }
}

#[test]
fn one_zero_tangent_operand() {
    // d(x·y) with only x moving is t·y; d(x/y) with only y moving is -t·x/y².
    let (x, y) = (Tensor::scalar(3.0f64), Tensor::scalar(2.0f64));
    let (_, t) = jvp(|x: Tensor| &x * &y, x.clone(), Tensor::scalar(1.0f64));
    assert_eq!(t.item::<f64>(), 2.0);
    let (_, t) = jvp(|y: Tensor| &x / &y, y.clone(), Tensor::scalar(1.0f64));
    assert_eq!(t.item::<f64>(), -0.75); // -3/4
}

#[test]
fn where_safe_zero_tangents() {
    // Tangents follow IEEE: a zero tangent times an infinite local derivative is NaN, as in JAX
    // (0 would be silently wrong for e.g. (x³)^(1/3) at 0, whose derivative is 1). `nn::norm`'s
    // double where gives the squared norm the derivative 0 at 0 (ad-cases 01).
    let bare = |x: Tensor| (&x * &x).sum(All).sqrt().square();
    assert!(grad_by_jvp(bare, &[0.0, 0.0, 0.0]).iter().all(|g| g.is_nan()));
    let sq_via_norm = |x: Tensor| kiln::nn::norm(&x, All).square();
    assert_eq!(grad_by_jvp(sq_via_norm, &[0.0, 0.0, 0.0]), vec![0.0, 0.0, 0.0]);
    assert!(jvp1(|x| x.log(), 0.0, 0.0).is_nan());
    // Along a nonzero tangent the infinity is real: sqrt'(0) = +inf, log'(0)·(-1) = -inf.
    assert_eq!(jvp1(|x| x.sqrt(), 0.0, 1.0), f64::INFINITY);
    assert_eq!(jvp1(|x| x.log(), 0.0, -1.0), f64::NEG_INFINITY);
    // The unselected branch of a where never leaks its NaN: at x = [4, 0, -1] the tangent of
    // where(x > 0, sqrt(x), 0) along ones is [0.5/2, 0, 0] = [0.25, 0, 0] (ad-cases 02).
    let x = Tensor::from_vec(&[3], vec![4.0f64, 0.0, -1.0]);
    let (_, t) = jvp(
        |x: Tensor| where_(&x.gt(&Tensor::scalar(0.0f64)), &x.sqrt(), &Tensor::scalar(0.0f64)),
        x,
        Tensor::from_vec(&[3], vec![1.0f64; 3]),
    );
    assert_eq!(f64s(&t), vec![0.25, 0.0, 0.0]);
}

#[test]
fn ad_case_05_pow_zero_base() {
    let pow = |a: f64| move |b: Tensor| Tensor::scalar(a).pow(&b);
    assert_eq!(jvp1(pow(0.0), 1.0, 1.0), 0.0, "d_db_0pow_b_at_b1");
    // d/db 2^b at b = 1: 2·ln 2.
    let d = jvp1(pow(2.0), 1.0, 1.0);
    assert!((d - 2.0 * std::f64::consts::LN_2).abs() < 1e-15, "d_db_2pow_b_at_b1 {d}");
    // d/da a^b at a = 0: b·0^(b-1) = 0, 1, +inf, (0 by kiln's rule; JAX NaN), -inf.
    let expected = [(2.0, 0.0), (1.0, 1.0), (0.5, f64::INFINITY), (0.0, 0.0), (-1.0, f64::NEG_INFINITY)];
    for (b, want) in expected {
        let got = jvp1(move |a| a.pow(&Tensor::scalar(b)), 0.0, 1.0);
        assert_eq!(got, want, "d_da_apow{b}_at_a0");
    }
    assert_eq!(jvp1(|a| &a * &a, 0.0, 1.0), 0.0, "d_da_a*a_at_a0");
    assert_eq!(Tensor::scalar(0.0f64).pow(&Tensor::scalar(0.0f64)).item::<f64>(), 1.0, "value_0pow0");
    // f32 too.
    let (_, t) =
        jvp(|a: Tensor| a.pow(&Tensor::scalar(0.0f32)), Tensor::scalar(0.0f32), Tensor::scalar(1.0f32));
    assert_eq!(t.item::<f32>(), 0.0);
}

#[test]
fn ad_case_10_max_min_ties() {
    // grad of max at [1, 3, 3]: the tie splits 0.5/0.5.
    assert_eq!(grad_by_jvp(|x| x.max(All), &[1.0, 3.0, 3.0]), vec![0.0, 0.5, 0.5]);
    // grad of min at [2, 2, 5].
    assert_eq!(grad_by_jvp(|x| x.min(All), &[2.0, 2.0, 5.0]), vec![0.5, 0.5, 0.0]);
    // maximum(x, 0) at 0: 0.5; where(x > 0, x, 0) at 0: 0.
    assert_eq!(jvp1(|x| x.maximum(&Tensor::scalar(0.0f64)), 0.0, 1.0), 0.5);
    assert_eq!(jvp1(|x| x.minimum(&Tensor::scalar(0.0f64)), 0.0, 1.0), 0.5);
    let relu_where = |x: Tensor| where_(&x.gt(&Tensor::scalar(0.0f64)), &x, &Tensor::scalar(0.0f64));
    assert_eq!(jvp1(relu_where, 0.0, 1.0), 0.0);
    // x[argmax(x)] picks the first maximum: [0, 1, 0] (argmax has no tangent, gather passes it).
    let pick = |x: Tensor| x.take(&x.argmax(0), 0);
    assert_eq!(grad_by_jvp(pick, &[1.0, 3.0, 3.0]), vec![0.0, 1.0, 0.0]);
    // Both operands moving at a tie: 0.5·(1 + 3) = 2.
    let (_, t) = jvp(
        |v: Vec<Tensor>| v[0].maximum(&v[1]),
        vec![Tensor::scalar(1.0f64), Tensor::scalar(1.0f64)],
        vec![Tensor::scalar(1.0f64), Tensor::scalar(3.0f64)],
    );
    assert_eq!(t.item::<f64>(), 2.0);
}

#[test]
fn max_min_with_nan() {
    // The NaN result equals neither operand: tangent 0 (JAX's _balanced_eq); reduce_max over a NaN
    // divides 0 by a count of 0: NaN (ad-cases 30, as JAX).
    assert_eq!(jvp1(|x| x.maximum(&Tensor::scalar(f64::NAN)), 1.0, 1.0), 0.0);
    let x = Tensor::from_vec(&[4], vec![f64::NAN, 1.0, 3.0, 2.0]);
    let (_, t) = jvp(|x: Tensor| x.max(All), x, Tensor::from_vec(&[4], vec![1.0f64; 4]));
    assert!(t.item::<f64>().is_nan());
}

#[test]
fn ad_case_11_abs_at_zero() {
    assert_eq!(jvp1(|x| x.abs(), 0.0, 1.0), 1.0, "grad_abs_at_0");
    assert_eq!(jvp1(|x| x.abs(), -0.0, 1.0), 1.0, "grad_abs_at_neg0");
    assert_eq!(jvp1(|x| x.abs(), -1.0, 1.0), -1.0, "grad_abs_at_-1");
    assert_eq!(jvp1(|x| x.abs(), 0.0, -1.0), -1.0, "jvp_abs_at_0_tangent_-1");
    assert_eq!(jvp1(|x| x.sign(), 0.0, 1.0), 0.0);
}

// ---- select, clamp, conversions ----------------------------------------------------------------

#[test]
fn select_and_clamp() {
    let mut rng = Rng(3);
    for shape in SHAPES {
        let (a, b, p) =
            (rng.uniform(shape, -1.0, 1.0), rng.uniform(shape, -1.0, 1.0), rng.uniform(shape, -1.0, 1.0));
        let sel = |v: &[Tensor]| lax::select(&v[2].gt(&Tensor::scalar(0.0f64)), &v[0], &v[1]);
        check_fd("select", &mut rng, sel, &[a.clone(), b.clone(), p]);
        let x = rng.uniform(shape, -2.0, 2.0);
        let clamp = |v: &[Tensor]| lax::clamp(&v[0], &v[1], &v[2]);
        // Array bounds: lo in [-1.5, -0.5), hi in [0.5, 1.5); some x fall outside.
        let (lo, hi) = (rng.uniform(shape, -1.5, -0.5), rng.uniform(shape, 0.5, 1.5));
        check_fd("clamp", &mut rng, clamp, &[lo, x.clone(), hi]);
        // Scalar bounds.
        check_fd("clamp scalar", &mut rng, clamp, &[Tensor::scalar(-0.7f64), x, Tensor::scalar(0.9f64)]);
    }
    // Exact: clamp(lo=0, x, hi=1) at x = [-1, 0, 0.5, 1, 2] along ones: x's tangent strictly inside
    // only; lo's tangent where lo > x, hi's where hi < x.
    let x = Tensor::from_vec(&[5], vec![-1.0f64, 0.0, 0.5, 1.0, 2.0]);
    let ones = Tensor::from_vec(&[5], vec![1.0f64; 5]);
    let (_, t) =
        jvp(|x: Tensor| lax::clamp(&Tensor::scalar(0.0f64), &x, &Tensor::scalar(1.0f64)), x.clone(), ones);
    assert_eq!(f64s(&t), vec![0.0, 0.0, 1.0, 0.0, 0.0]);
    let (_, t) = jvp(
        |v: Vec<Tensor>| lax::clamp(&v[0], &x, &v[1]),
        vec![Tensor::scalar(0.0f64), Tensor::scalar(1.0f64)],
        vec![Tensor::scalar(10.0f64), Tensor::scalar(100.0f64)],
    );
    assert_eq!(f64s(&t), vec![10.0, 0.0, 0.0, 0.0, 100.0]);
}

#[test]
fn conversions() {
    // f64 -> f32 converts the tangent; through an integer the tangent is 0.
    let x = Tensor::from_vec(&[2], vec![1.25f64, -2.5]);
    let t = Tensor::from_vec(&[2], vec![0.5f64, 3.0]);
    let (y, ty) = jvp(|x: Tensor| x.astype(DType::F32), x.clone(), t.clone());
    assert_eq!(y.dtype(), DType::F32);
    assert_eq!(ty.to_vec::<f32>(), vec![0.5, 3.0]);
    let (_, ty) = jvp(|x: Tensor| x.astype(DType::I32).astype(DType::F64), x.clone(), t.clone());
    assert_eq!(f64s(&ty), vec![0.0, 0.0]);
    // Bitcast, comparisons, argmax: no tangent (integer/bool results).
    let (_, ty) =
        jvp(|x: Tensor| lax::bitcast_convert_type(&x.astype(DType::F32), DType::U32), x.clone(), t.clone());
    assert_eq!(ty.to_vec::<u32>(), vec![0, 0]);
    let (_, ty) = jvp(|x: Tensor| lax::compare(CompareOp::Lt, &x, &x), x.clone(), t.clone());
    assert_eq!(ty.dtype(), DType::Bool);
    let (_, ty) = jvp(|x: Tensor| lax::arg_reduce(ArgOp::Min, &x, 0, DType::I32), x.clone(), t.clone());
    assert_eq!(ty.to_vec::<i32>(), vec![0]);
    // stop_gradient: zero tangent, value unchanged.
    let (y, ty) = jvp(|x: Tensor| lax::stop_gradient(&x) * 2.0, x, t);
    assert_eq!(f64s(&y), vec![2.5, -5.0]);
    assert_eq!(f64s(&ty), vec![0.0, 0.0]);
}

// ---- structural and linear ops -----------------------------------------------------------------

#[test]
fn structural_ops_match_finite_differences() {
    let mut rng = Rng(4);
    let x = rng.uniform(&[2, 3, 4], -1.0, 1.0);
    let one = |name: &str, rng: &mut Rng, f: fn(&Tensor) -> Tensor| {
        check_fd(name, rng, move |v| f(&v[0]), std::slice::from_ref(&x));
    };
    one("broadcast_in_dim", &mut rng, |x| lax::broadcast_in_dim(x, &[5, 2, 3, 4], &[1, 2, 3]));
    one("reshape", &mut rng, |x| lax::reshape(x, &[6, 4]));
    one("transpose", &mut rng, |x| lax::transpose(x, &[2, 0, 1]));
    one("rev", &mut rng, |x| lax::rev(x, &[0, 2]));
    one("slice", &mut rng, |x| lax::slice(x, &[0, 1, 0], &[2, 3, 4], &[1, 1, 2]));
    one("reduce_sum", &mut rng, |x| lax::reduce(ReduceOp::Sum, x, &[0, 2]));
    one("cumsum", &mut rng, |x| lax::cumulative(CumulativeOp::Sum, x, 1, false));
    one("cumsum reverse", &mut rng, |x| lax::cumulative(CumulativeOp::Sum, x, 2, true));
    one("dynamic_slice clamped", &mut rng, |x| {
        // Start 5 along dim 2 is clamped to 4 - 2 = 2.
        let s = [0i32, 1, 5].map(Tensor::scalar);
        lax::dynamic_slice(x, &s, &[2, 2, 2])
    });
    // Pad: the padding value's tangent fills the padded positions; negative high crops.
    let pv = Tensor::scalar(0.3f64);
    check_fd(
        "pad",
        &mut rng,
        |v| lax::pad(&v[0], &v[1], &[1, 0, -1], &[0, 2, 1], &[1, 0, 1]),
        &[x.clone(), pv],
    );
    let y = rng.uniform(&[2, 1, 4], -1.0, 1.0);
    check_fd(
        "concatenate",
        &mut rng,
        |v| lax::concatenate(&[v[0].clone(), v[1].clone()], 1),
        &[x.clone(), y],
    );
    let u = rng.uniform(&[1, 2, 3], -1.0, 1.0);
    let dus = |v: &[Tensor]| lax::dynamic_update_slice(&v[0], &v[1], &[1i32, -3, 2].map(Tensor::scalar));
    check_fd("dynamic_update_slice", &mut rng, dus, &[x.clone(), u]);
}

#[test]
fn concatenate_with_a_constant_operand() {
    // Only the first operand moves: the constant's tangent is instantiated as zeros.
    let c = Tensor::from_vec(&[2], vec![7.0f64, 8.0]);
    let (y, t) = jvp(
        |x: Tensor| lax::concatenate(&[x, c.clone()], 0),
        Tensor::from_vec(&[1], vec![1.0f64]),
        Tensor::from_vec(&[1], vec![5.0f64]),
    );
    assert_eq!(f64s(&y), vec![1.0, 7.0, 8.0]);
    assert_eq!(f64s(&t), vec![5.0, 0.0, 0.0]);
}

#[test]
fn dot_general_matches_finite_differences() {
    let mut rng = Rng(5);
    let (a, b) = (rng.uniform(&[3, 4], -1.0, 1.0), rng.uniform(&[4, 2], -1.0, 1.0));
    check_fd("matmul", &mut rng, |v| lax::dot_general(&v[0], &v[1], (&[1], &[0]), (&[], &[]), None), &[a, b]);
    let (a, b) = (rng.uniform(&[2, 3, 4], -1.0, 1.0), rng.uniform(&[2, 4, 5], -1.0, 1.0));
    let bmm = |v: &[Tensor]| lax::dot_general(&v[0], &v[1], (&[2], &[1]), (&[0], &[0]), None);
    check_fd("batched matmul", &mut rng, bmm, &[a, b]);
    let (a, b) = (rng.uniform(&[3], -1.0, 1.0), rng.uniform(&[3], -1.0, 1.0));
    check_fd("inner", &mut rng, |v| lax::dot_general(&v[0], &v[1], (&[0], &[0]), (&[], &[]), None), &[a, b]);
}

#[test]
fn indexing_ops_match_finite_differences() {
    let mut rng = Rng(6);
    let x = rng.uniform(&[4, 3], -1.0, 1.0);
    // Out-of-range indices are clamped (Clip); duplicates are read twice.
    let idx = Tensor::from_vec(&[2, 3], vec![0i32, 3, 3, -2, 7, 1]);
    for axis in [0usize, 1] {
        let gather = move |v: &[Tensor]| lax::gather(&v[0], &v[1], axis, 0, IndexMode::Clip);
        check_fd("gather clip", &mut rng, gather, &[x.clone(), idx.clone()]);
    }
    // batch_dims = 1: row i reads its own indices.
    let bidx = Tensor::from_vec(&[4, 2], vec![0i32, 2, 1, 1, 2, 0, 5, 0]);
    check_fd(
        "gather batched",
        &mut rng,
        |v| lax::gather(&v[0], &v[1], 1, 1, IndexMode::Clip),
        &[x.clone(), bidx],
    );
    // Scatter (set and add), duplicates and a dropped out-of-range index.
    let sidx = Tensor::from_vec(&[3], vec![1i32, 1, 9]);
    let upd = rng.uniform(&[3, 3], -1.0, 1.0);
    for op in [ScatterOp::Add, ScatterOp::Set] {
        for mode in [IndexMode::Clip, IndexMode::FillOrDrop] {
            let scatter = move |v: &[Tensor]| lax::scatter(op, &v[0], &v[1], &v[2], 0, 0, mode);
            check_fd(op.name(), &mut rng, scatter, &[x.clone(), sidx.clone(), upd.clone()]);
        }
    }
    let ids = Tensor::from_vec(&[4], vec![2i32, 0, 2, 5]);
    check_fd("segment_sum", &mut rng, |v| lax::segment_sum(&v[0], &v[1], 3), &[x.clone(), ids]);
}

#[test]
fn scatter_set_exact_tangents() {
    // x = [1, 2, 3], set index 1 to u (and index 7, dropped): tangent [tx0, tu0, tx2].
    let (_, t) = jvp(
        |v: Vec<Tensor>| {
            let idx = Tensor::from_vec(&[2], vec![1i32, 7]);
            lax::scatter(ScatterOp::Set, &v[0], &idx, &v[1], 0, 0, IndexMode::FillOrDrop)
        },
        vec![Tensor::from_vec(&[3], vec![1.0f64, 2.0, 3.0]), Tensor::from_vec(&[2], vec![9.0f64, 9.0])],
        vec![Tensor::from_vec(&[3], vec![10.0f64, 20.0, 30.0]), Tensor::from_vec(&[2], vec![1.0f64, 2.0])],
    );
    assert_eq!(f64s(&t), vec![10.0, 1.0, 30.0]);
    // Scatter-add with only the operand moving passes its tangent through.
    let (_, t) = jvp(
        |x: Tensor| {
            x.at_add(&Tensor::from_vec(&[2], vec![0i32, 0]), &Tensor::from_vec(&[2], vec![1.0f64, 1.0]))
        },
        Tensor::from_vec(&[2], vec![0.0f64, 0.0]),
        Tensor::from_vec(&[2], vec![3.0f64, 4.0]),
    );
    assert_eq!(f64s(&t), vec![3.0, 4.0]);
}

#[test]
fn gather_fill_mode_reads_have_zero_tangent() {
    // ad-cases 15: x.at[5].get(mode='fill') is NaN and its derivative is 0; in range it passes.
    let x = Tensor::from_vec(&[3], vec![1.0f64, 2.0, 3.0]);
    let t = Tensor::from_vec(&[3], vec![1.0f64, 1.0, 1.0]);
    let (y, ty) = jvp(
        |x: Tensor| lax::gather(&x, &Tensor::from_vec(&[3], vec![5i32, 1, -1]), 0, 0, IndexMode::FillOrDrop),
        x.clone(),
        t.clone(),
    );
    let y = f64s(&y);
    assert!(y[0].is_nan() && y[2].is_nan() && y[1] == 2.0);
    assert_eq!(f64s(&ty), vec![0.0, 1.0, 0.0]);
    // u32 indices, batched, 2-D.
    let m = Tensor::from_vec(&[2, 2], vec![1.0f64, 2.0, 3.0, 4.0]);
    let (_, ty) = jvp(
        |m: Tensor| lax::gather(&m, &Tensor::from_vec(&[2, 1], vec![1u32, 2]), 1, 1, IndexMode::FillOrDrop),
        m,
        Tensor::from_vec(&[2, 2], vec![10.0f64, 20.0, 30.0, 40.0]),
    );
    assert_eq!(f64s(&ty), vec![20.0, 0.0]);
}

// ---- reductions, scans, sort -------------------------------------------------------------------

#[test]
fn reductions_match_finite_differences() {
    let mut rng = Rng(7);
    for shape in [&[3][..], &[2, 3], &[2, 1, 3], &[1, 2, 2, 2]] {
        let x = rng.signed(shape, 0.5, 1.5);
        let rank = shape.len();
        let all: Vec<usize> = (0..rank).collect();
        for axes in [vec![0], all.clone(), vec![rank - 1]] {
            for op in [ReduceOp::Max, ReduceOp::Min, ReduceOp::Prod] {
                let axes = axes.clone();
                check_fd(
                    op.name(),
                    &mut rng,
                    move |v| lax::reduce(op, &v[0], &axes),
                    std::slice::from_ref(&x),
                );
            }
        }
        for axis in [0, rank - 1] {
            for op in [CumulativeOp::Prod, CumulativeOp::Max, CumulativeOp::Min] {
                for reverse in [false, true] {
                    let f = move |v: &[Tensor]| lax::cumulative(op, &v[0], axis, reverse);
                    check_fd(op.name(), &mut rng, f, std::slice::from_ref(&x));
                }
            }
        }
    }
    // A longer axis (several Hillis–Steele steps, odd length).
    let x = rng.signed(&[13, 2], 0.7, 1.3);
    for op in [CumulativeOp::Prod, CumulativeOp::Max, CumulativeOp::Min] {
        for reverse in [false, true] {
            check_fd(
                op.name(),
                &mut rng,
                move |v| lax::cumulative(op, &v[0], 0, reverse),
                std::slice::from_ref(&x),
            );
        }
    }
}

#[test]
fn ad_case_17_cumsum_cumprod() {
    // grad of sum(w·cumsum(x)) = reverse cumsum of w = [10, 9, 7, 4].
    let w = Tensor::from_vec(&[4], vec![1.0f64, 2.0, 3.0, 4.0]);
    let f = |x: Tensor| (&w * &x.cumsum(0, false)).sum(All);
    assert_eq!(grad_by_jvp(f, &[0.5, -1.0, 2.0, 3.0]), vec![10.0, 9.0, 7.0, 4.0]);
    // grad of sum(cumprod(x)) = [1 + x1 + x1·x2, x0 + x0·x2, x0·x1]: [1, 8, 0] at [2, 0, 3].
    let f = |x: Tensor| x.cumprod(0, false).sum(All);
    assert_eq!(grad_by_jvp(f, &[2.0, 0.0, 3.0]), vec![1.0, 8.0, 0.0]);
    // At [2, 0.5, 3]: [1 + 0.5 + 1.5, 2 + 6, 1] = [3, 8, 1].
    assert_eq!(grad_by_jvp(f, &[2.0, 0.5, 3.0]), vec![3.0, 8.0, 1.0]);
    // Reverse cumprod of [2, 0, 3] = [0, 0, 3]; sum's gradient = [x1·x2, x0·x2 + x2, x0·x1 + x1 + 1]
    // = [0, 9, 1].
    let f = |x: Tensor| x.cumprod(0, true).sum(All);
    assert_eq!(grad_by_jvp(f, &[2.0, 0.0, 3.0]), vec![0.0, 9.0, 1.0]);
}

#[test]
fn reduce_prod_exact_with_zeros() {
    // prod([2, 0, 3]): gradient [0, 6, 0]; with two zeros every partial product vanishes.
    let p = |x: Tensor| x.prod(All);
    assert_eq!(grad_by_jvp(p, &[2.0, 0.0, 3.0]), vec![0.0, 6.0, 0.0]);
    assert_eq!(grad_by_jvp(p, &[0.0, 5.0, 0.0]), vec![0.0, 0.0, 0.0]);
    // Empty product: the constant 1.
    let (y, t) =
        jvp(|x: Tensor| x.prod(All), Tensor::zeros(DType::F64, &[0]), Tensor::zeros(DType::F64, &[0]));
    assert_eq!((y.item::<f64>(), t.item::<f64>()), (1.0, 0.0));
    // Rows of a matrix, the middle axis of a rank-3 tensor: [[1, 2], [0, 4]] along axis 1 with
    // tangent ones: [1·2·(1/1 + 1/2)... ] = [2 + 1, 4 + 0] = [3, 4].
    let (_, t) = jvp(
        |x: Tensor| lax::reduce(ReduceOp::Prod, &x, &[1]),
        Tensor::from_vec(&[2, 2], vec![1.0f64, 2.0, 0.0, 4.0]),
        Tensor::from_vec(&[2, 2], vec![1.0f64; 4]),
    );
    assert_eq!(f64s(&t), vec![3.0, 4.0]);
}

#[test]
fn cummax_ties_and_reduce_max_ties() {
    // cummax([1, 3, 2, 3, 5]) = [1, 3, 3, 3, 5]: at position 3 the tied 3s split the tangent.
    let x = Tensor::from_vec(&[5], vec![1.0f64, 3.0, 2.0, 3.0, 5.0]);
    let t = Tensor::from_vec(&[5], vec![1.0f64, 10.0, 100.0, 1000.0, 10000.0]);
    let (y, ty) = jvp(|x: Tensor| x.cummax(0, false), x.clone(), t.clone());
    assert_eq!(f64s(&y), vec![1.0, 3.0, 3.0, 3.0, 5.0]);
    assert_eq!(f64s(&ty), vec![1.0, 10.0, 10.0, 505.0, 10000.0]);
    // cummin from the end: [1, 2, 2, 3, 5]; position 1 (x = 3) takes the 2's tangent.
    let (y, ty) = jvp(|x: Tensor| x.cummin(0, true), x.clone(), t.clone());
    assert_eq!(f64s(&y), vec![1.0, 2.0, 2.0, 3.0, 5.0]);
    assert_eq!(f64s(&ty), vec![1.0, 100.0, 100.0, 1000.0, 10000.0]);
    // reduce_max over rows with a tie in the second: [[1, 4], [2, 2]] -> [4, (t2 + t3)/2].
    let (_, ty) = jvp(
        |x: Tensor| x.max(1),
        Tensor::from_vec(&[2, 2], vec![1.0f64, 4.0, 2.0, 2.0]),
        Tensor::from_vec(&[2, 2], vec![1.0f64, 2.0, 3.0, 5.0]),
    );
    assert_eq!(f64s(&ty), vec![2.0, 4.0]);
}

#[test]
fn sort_permutes_tangents() {
    let mut rng = Rng(8);
    for shape in [&[5][..], &[3, 4], &[2, 3, 2]] {
        let rank = shape.len();
        for dim in [0, rank - 1] {
            let (k, v) = (rng.uniform(shape, -1.0, 1.0), rng.uniform(shape, -1.0, 1.0));
            let f = move |x: &[Tensor]| lax::sort(&[x[0].clone(), x[1].clone()], dim, 1).remove(1);
            check_fd("sort values", &mut rng, f, &[k.clone(), v]);
            check_fd(
                "sort keys",
                &mut rng,
                move |x| lax::sort(&[x[0].clone()], dim, 1).remove(0),
                std::slice::from_ref(&k),
            );
        }
    }
    // Exact, with an integer key first: keys [2, 0, 1] sort the float operand's tangent.
    let keys = Tensor::from_vec(&[3], vec![2i32, 0, 1]);
    let (y, t) = jvp(
        |x: Tensor| lax::sort(&[keys.clone(), x], 0, 1).remove(1),
        Tensor::from_vec(&[3], vec![1.0f64, 2.0, 3.0]),
        Tensor::from_vec(&[3], vec![10.0f64, 20.0, 30.0]),
    );
    assert_eq!(f64s(&y), vec![2.0, 3.0, 1.0]);
    assert_eq!(f64s(&t), vec![20.0, 30.0, 10.0]);
}

// ---- nesting and other dtypes ------------------------------------------------------------------

#[test]
fn second_derivatives_by_nested_jvp() {
    // The rules also run inside a trace (the inner jvp is traced by the outer one):
    // d²/dx² tanh = -2·tanh·(1 - tanh²); d²/dx² x³ via pow = 6x; d²/dx² cumprod-sum at [2, 0, 3]
    // along e1 = 0 (the sum is linear in each entry).
    let x = 0.7f64;
    let inner = |x: Tensor| jvp(|x: Tensor| x.tanh(), x, Tensor::scalar(1.0f64)).1;
    let th = x.tanh();
    let want = -2.0 * th * (1.0 - th * th);
    assert!((jvp1(inner, x, 1.0) - want).abs() < 1e-14);
    let inner = |x: Tensor| jvp(|x: Tensor| x.pow(&Tensor::scalar(3.0f64)), x, Tensor::scalar(1.0f64)).1;
    assert!((jvp1(inner, 1.5, 1.0) - 9.0).abs() < 1e-12);
    let e1 = || Tensor::from_vec(&[3], vec![0.0f64, 1.0, 0.0]);
    let inner = move |x: Tensor| jvp(|x: Tensor| x.cumprod(0, false).sum(All), x, e1()).1;
    let (_, t) = jvp(inner, Tensor::from_vec(&[3], vec![2.0f64, 0.0, 3.0]), e1());
    assert_eq!(t.item::<f64>(), 0.0);
    // Mixed second derivative of sum(cumprod): d²/dx0 dx1 = 1 + x2 = 4.
    let e0 = || Tensor::from_vec(&[3], vec![1.0f64, 0.0, 0.0]);
    let inner = move |x: Tensor| jvp(|x: Tensor| x.cumprod(0, false).sum(All), x, e1()).1;
    let (_, t) = jvp(inner, Tensor::from_vec(&[3], vec![2.0f64, 0.0, 3.0]), e0());
    assert_eq!(t.item::<f64>(), 4.0);
}

#[test]
fn f32_rules() {
    // Same rules in f32: d/dx (sin(x)·x) at 0.5 = cos(0.5)·0.5 + sin(0.5).
    let (_, t) = jvp(|x: Tensor| x.sin() * &x, Tensor::scalar(0.5f32), Tensor::scalar(1.0f32));
    let want = 0.5f32.cos() * 0.5 + 0.5f32.sin();
    assert!((t.item::<f32>() - want).abs() < 1e-6);
    let (_, t) = jvp(
        |x: Tensor| x.cumprod(0, false),
        Tensor::from_vec(&[3], vec![2.0f32, 0.0, 3.0]),
        Tensor::from_vec(&[3], vec![0.0f32, 1.0, 0.0]),
    );
    // d cumprod / dx1 = [0, x0, x0·x2] = [0, 2, 6].
    assert_eq!(t.to_vec::<f32>(), vec![0.0, 2.0, 6.0]);
}

#[test]
fn empty_dims() {
    // Zero-size operands pass through every rule with zero-size tangents.
    let x = Tensor::zeros(DType::F64, &[2, 0]);
    for op in [CumulativeOp::Prod, CumulativeOp::Max, CumulativeOp::Sum] {
        let (y, t) = jvp(move |x: Tensor| lax::cumulative(op, &x, 1, false), x.clone(), x.clone());
        assert_eq!((y.shape().dims(), t.shape().dims()), (&[2usize, 0][..], &[2usize, 0][..]));
    }
    let (y, t) = jvp(|x: Tensor| lax::reduce(ReduceOp::Prod, &x, &[1]), x.clone(), x.clone());
    assert_eq!((f64s(&y), f64s(&t)), (vec![1.0, 1.0], vec![0.0, 0.0]));
    let (_, t) = jvp(|x: Tensor| lax::sort(&[x], 1, 1).remove(0), x.clone(), x.clone());
    assert_eq!(t.shape().dims(), &[2, 0]);
    let (_, t) = jvp(|x: Tensor| x.exp(), x.clone(), x.clone());
    assert_eq!(t.shape().dims(), &[2, 0]);
    let _ = Prim::StopGradient; // (the primitive set is the one kiln::ir exports)
}

#[test]
fn traced_jvp_verifies_and_matches_eager() {
    // The rules recorded into IR (verified by `trace`) give the eager values.
    let f = |x: Tensor| {
        let idx = Tensor::from_vec(&[2], vec![1i32, 9]);
        let parts = [
            x.cummax(0, false),
            x.cumprod(0, true),
            x.sort(0),
            lax::clamp(&Tensor::scalar(-0.5f64), &x, &Tensor::scalar(0.5f64)),
            lax::gather(&x, &idx, 0, 0, IndexMode::FillOrDrop).sum_keepdims(All),
            x.prod_keepdims(All),
            x.atan2(&x.exp()),
        ];
        Tensor::concatenate(&parts, 0)
    };
    let g = move |v: Vec<Tensor>| {
        let (y, t) = jvp(f, v[0].clone(), v[1].clone());
        vec![y, t]
    };
    let x = Tensor::from_vec(&[4], vec![0.3f64, -0.8, 0.3, 1.2]);
    let t = Tensor::from_vec(&[4], vec![1.0f64, -2.0, 3.0, 0.5]);
    let traced = trace(g, &vec![x.clone(), t.clone()]).expect("trace");
    let from_ir = traced.eval(&vec![x.clone(), t.clone()]).expect("eval");
    let eager = g(vec![x, t]);
    for (a, b) in from_ir.iter().zip(&eager) {
        let (a, b) = (f64s(a), f64s(b));
        assert_eq!(a.len(), b.len());
        for (p, q) in a.iter().zip(&b) {
            assert!(p == q || (p.is_nan() && q.is_nan()), "{p} vs {q}");
        }
    }
}
