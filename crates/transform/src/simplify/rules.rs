//! The rewrite rules. Each rule looks at one e-node and may propose an equal term; every rule is
//! IEEE-exact (bitwise the same results, NaN as NaN) unless marked fast-math, and side conditions are
//! read from the analysis ([`super::analysis::Facts`]). Rules only simplify or expose fusion: there is
//! no commutativity/associativity rule, so the e-graph cannot blow up.

use super::analysis::{EXACT_INT, Graph};
use super::lang::Node;
use egg::Id;
use kiln_ir::{Array, BinaryOp, DType, IndexMode, Prim, ReduceOp, Shape, TensorType, UnaryOp};
use std::sync::Arc;

/// A term to add to the e-graph: an existing class, a primitive applied to terms, or a constant.
#[derive(Clone, Debug)]
pub enum Term {
    /// An existing class.
    Class(Id),
    /// `prim(args..)`, single-result.
    Op(Prim, Vec<Term>),
    /// A constant.
    Const(Array),
}

/// What a rule sees: the e-graph and whether fast math is allowed.
pub struct Ctx<'g> {
    /// The region's e-graph (rebuilt: children are canonical).
    pub g: &'g Graph,
    /// Fast-math rules may fire.
    pub fast_math: bool,
}

/// A named rewrite: `apply` looks at `node` of class `id` and proposes an equal term.
pub struct Rule {
    /// The name reported when the rule fires.
    pub name: &'static str,
    /// True if the rule changes results in the last bits or on special values (needs `fast_math`).
    pub fast_math_only: bool,
    /// The matcher and right-hand side.
    pub apply: fn(&Ctx, Id, &Node) -> Option<Term>,
}

macro_rules! rule {
    ($name:ident, $fast:expr) => {
        Rule { name: stringify!($name), fast_math_only: $fast, apply: $name }
    };
}

/// Every rule, IEEE-exact ones first. A rule with `fast_math_only` fires only with fast math; some
/// default rules also have fast-math-only cases (float `x*0`), checked inside.
pub const RULES: &[Rule] = &[
    rule!(mul_one, false),
    rule!(div_one, false),
    rule!(add_neg_zero, false),
    rule!(sub_zero, false),
    rule!(mul_neg_one, false),
    rule!(neg_neg, false),
    rule!(sub_neg, false),
    rule!(add_neg, false),
    rule!(div_pow2, false),
    rule!(max_min_self, false),
    rule!(select_same, false),
    rule!(select_const, false),
    rule!(decided_by_range, false),
    rule!(clamp_in_range, false),
    rule!(select_of_select, false),
    rule!(and_or_self, false),
    rule!(abs_non_negative, false),
    rule!(is_finite_of_finite, false),
    rule!(convert_same, false),
    rule!(reshape_reshape, false),
    rule!(reshape_identity, false),
    rule!(transpose_transpose, false),
    rule!(transpose_identity, false),
    rule!(broadcast_identity, false),
    rule!(broadcast_broadcast, false),
    rule!(reduce_max_min_of_broadcast, false),
    rule!(reduce_sum_of_broadcast, false),
    rule!(slice_of_broadcast, false),
    rule!(reshape_of_broadcast, false),
    rule!(transpose_of_broadcast, false),
    rule!(transpose_of_dot, false),
    rule!(dot_without_contraction, false),
    rule!(slice_slice, false),
    rule!(gather_of_iota, false),
    rule!(scatter_add_of_zeros, false),
    rule!(constant_fold, false),
    rule!(elementwise_of_broadcasts, false),
    rule!(elementwise_of_transposes, false),
    rule!(mul_zero, false),
    rule!(sub_self, false),
    rule!(reassociate_consts, false),
    rule!(log_exp, true),
    rule!(exp_log, true),
];

// ---------------------------------------------------------------- helpers

fn op<'a>(node: &'a Node, g: &'a Graph) -> Option<(&'a Prim, &'a [Id])> {
    match node {
        Node::Op(p, xs) => Some((g.analysis.prims.get(*p), xs)),
        Node::Input(_) | Node::Const(_) | Node::Proj(..) => None,
    }
}

/// The primitive applications in class `id`.
fn defs<'a>(g: &'a Graph, id: Id) -> impl Iterator<Item = (&'a Prim, &'a [Id])> + 'a {
    g[id].nodes.iter().filter_map(move |n| op(n, g))
}

fn ty(g: &Graph, id: Id) -> &TensorType {
    g[id].data.ty()
}

/// The uniform element of a class as `f64` plus its sign bit (ints and bool converted).
fn uniform(g: &Graph, id: Id) -> Option<(f64, bool)> {
    let u = g[id].data.uniform.as_ref()?;
    let x = u.to_f64_vec()[0];
    let neg = match &**u {
        Array::F32(a) => a.iter().next()?.is_sign_negative(),
        Array::F64(a) => a.iter().next()?.is_sign_negative(),
        Array::I32(_) | Array::U32(_) | Array::Bool(_) => x < 0.0,
    };
    Some((x, neg))
}

fn is_uniform(g: &Graph, id: Id, value: f64, negative: bool) -> bool {
    uniform(g, id).is_some_and(|(x, n)| x == value && n == negative)
}

/// A rank-0 array of `dtype` holding `x` (exactly representable by the caller's choice).
fn scalar(dtype: DType, x: f64) -> Array {
    match dtype {
        DType::F32 => Array::scalar(x as f32),
        DType::F64 => Array::scalar(x),
        DType::I32 => Array::scalar(x as i32),
        DType::U32 => Array::scalar(x as u32),
        DType::Bool => Array::scalar(x != 0.0),
    }
}

/// `value` broadcast to `ty` (a constant scalar, or a broadcast of one).
fn splat(value: Array, ty: &TensorType) -> Term {
    if ty.rank() == 0 {
        Term::Const(value)
    } else {
        let bcast = Prim::BroadcastInDim { shape: ty.shape.clone(), broadcast_dimensions: vec![] };
        Term::Op(bcast, vec![Term::Const(value)])
    }
}

fn binary(o: BinaryOp, a: Term, b: Term) -> Term {
    Term::Op(Prim::Binary(o), vec![a, b])
}

fn as_binary<'a>(ctx: &Ctx<'a>, node: &'a Node, want: BinaryOp) -> Option<(Id, Id)> {
    match op(node, ctx.g)? {
        (Prim::Binary(o), [a, b]) if *o == want => Some((*a, *b)),
        _ => None,
    }
}

fn as_unary<'a>(ctx: &Ctx<'a>, node: &'a Node, want: UnaryOp) -> Option<Id> {
    match op(node, ctx.g)? {
        (Prim::Unary(o), [a]) if *o == want => Some(*a),
        _ => None,
    }
}

/// A class defined as `unary want (x)`: x.
fn child_unary(g: &Graph, id: Id, want: UnaryOp) -> Option<Id> {
    defs(g, id).find_map(|(p, xs)| matches!(p, Prim::Unary(o) if *o == want).then(|| xs[0]))
}

/// A class defined as a broadcast: (operand, result shape, broadcast dims).
fn child_broadcast(g: &Graph, id: Id) -> Option<(Id, &Shape, &[usize])> {
    defs(g, id).find_map(|(p, xs)| match p {
        Prim::BroadcastInDim { shape, broadcast_dimensions } => {
            Some((xs[0], shape, broadcast_dimensions.as_slice()))
        }
        _ => None,
    })
}

// ---------------------------------------------------------------- algebraic identities (exact)

/// `x * 1 → x` (either side): exact for every x, NaN and -0.0 included.
fn mul_one(ctx: &Ctx, _: Id, node: &Node) -> Option<Term> {
    let (a, b) = as_binary(ctx, node, BinaryOp::Mul)?;
    if is_uniform(ctx.g, b, 1.0, false) {
        Some(Term::Class(a))
    } else {
        is_uniform(ctx.g, a, 1.0, false).then_some(Term::Class(b))
    }
}

/// `x / 1 → x`: exact.
fn div_one(ctx: &Ctx, _: Id, node: &Node) -> Option<Term> {
    let (a, b) = as_binary(ctx, node, BinaryOp::Div)?;
    is_uniform(ctx.g, b, 1.0, false).then_some(Term::Class(a))
}

/// `x + (-0.0) → x` (either side; ints: `x + 0`). Not `x + 0.0`, which turns -0.0 into +0.0.
fn add_neg_zero(ctx: &Ctx, _: Id, node: &Node) -> Option<Term> {
    let (a, b) = as_binary(ctx, node, BinaryOp::Add)?;
    let zero = |id| is_uniform(ctx.g, id, 0.0, ty(ctx.g, id).dtype.is_float());
    if zero(b) { Some(Term::Class(a)) } else { zero(a).then_some(Term::Class(b)) }
}

/// `x - (+0.0) → x` (ints: `x - 0`): `x - 0.0 = x + (-0.0)`, exact.
fn sub_zero(ctx: &Ctx, _: Id, node: &Node) -> Option<Term> {
    let (a, b) = as_binary(ctx, node, BinaryOp::Sub)?;
    is_uniform(ctx.g, b, 0.0, false).then_some(Term::Class(a))
}

/// `x * -1 → neg x` (either side; signed types): exact (integer negation wraps like the product).
fn mul_neg_one(ctx: &Ctx, _: Id, node: &Node) -> Option<Term> {
    let (a, b) = as_binary(ctx, node, BinaryOp::Mul)?;
    let neg = |x| Term::Op(Prim::Unary(UnaryOp::Neg), vec![Term::Class(x)]);
    if is_uniform(ctx.g, b, -1.0, true) {
        Some(neg(a))
    } else {
        is_uniform(ctx.g, a, -1.0, true).then(|| neg(b))
    }
}

/// `neg(neg x) → x`: exact.
fn neg_neg(ctx: &Ctx, _: Id, node: &Node) -> Option<Term> {
    let x = as_unary(ctx, node, UnaryOp::Neg)?;
    child_unary(ctx.g, x, UnaryOp::Neg).map(Term::Class)
}

/// `x - neg(y) → x + y`: IEEE defines `x - y` as `x + (-y)`, so exact.
fn sub_neg(ctx: &Ctx, _: Id, node: &Node) -> Option<Term> {
    let (a, b) = as_binary(ctx, node, BinaryOp::Sub)?;
    let y = child_unary(ctx.g, b, UnaryOp::Neg)?;
    Some(binary(BinaryOp::Add, Term::Class(a), Term::Class(y)))
}

/// `x + neg(y) → x - y` and `neg(y) + x → x - y`: exact (addition is commutative in IEEE).
fn add_neg(ctx: &Ctx, _: Id, node: &Node) -> Option<Term> {
    let (a, b) = as_binary(ctx, node, BinaryOp::Add)?;
    if let Some(y) = child_unary(ctx.g, b, UnaryOp::Neg) {
        return Some(binary(BinaryOp::Sub, Term::Class(a), Term::Class(y)));
    }
    let y = child_unary(ctx.g, a, UnaryOp::Neg)?;
    Some(binary(BinaryOp::Sub, Term::Class(b), Term::Class(y)))
}

/// `x / c → x * (1/c)` for a float power of two `c` whose reciprocal is normal: both sides are the
/// correctly rounded `x·2^-k`, so exact (subnormal results included).
fn div_pow2(ctx: &Ctx, _: Id, node: &Node) -> Option<Term> {
    let (a, b) = as_binary(ctx, node, BinaryOp::Div)?;
    let t = ty(ctx.g, b);
    let (c, _) = uniform(ctx.g, b)?;
    let exact = match t.dtype {
        DType::F32 => {
            let (c, r) = (c as f32, 1.0 / c as f32);
            c.is_normal() && r.is_normal() && c.to_bits() & 0x7f_ffff == 0 && r.to_bits() & 0x7f_ffff == 0
        }
        DType::F64 => {
            let r = 1.0 / c;
            c.is_normal()
                && r.is_normal()
                && c.to_bits() & 0xf_ffff_ffff_ffff == 0
                && r.to_bits() & 0xf_ffff_ffff_ffff == 0
        }
        DType::I32 | DType::U32 | DType::Bool => false,
    };
    exact.then(|| binary(BinaryOp::Mul, Term::Class(a), splat(scalar(t.dtype, 1.0 / c), t)))
}

/// `max(x, x) → x`, `min(x, x) → x`: exact (NaN stays NaN).
fn max_min_self(ctx: &Ctx, _: Id, node: &Node) -> Option<Term> {
    let (a, b) = as_binary(ctx, node, BinaryOp::Max).or_else(|| as_binary(ctx, node, BinaryOp::Min))?;
    (ctx.g.find(a) == ctx.g.find(b)).then_some(Term::Class(a))
}

/// `select(c, x, x) → x`.
fn select_same(ctx: &Ctx, _: Id, node: &Node) -> Option<Term> {
    match op(node, ctx.g)? {
        (Prim::Select, [_, x, y]) if ctx.g.find(*x) == ctx.g.find(*y) => Some(Term::Class(*x)),
        _ => None,
    }
}

/// `select(true, a, b) → a`, `select(false, a, b) → b` for a predicate known to be all true/false:
/// a uniform constant, or a comparison the analysis decides from its operands' integer ranges
/// (`select(i < 0, i + n, i) → i`, JAX's negative-index wrap, on indices known to be in range).
fn select_const(ctx: &Ctx, _: Id, node: &Node) -> Option<Term> {
    match op(node, ctx.g)? {
        (Prim::Select, [c, x, y]) => {
            let v = match uniform(ctx.g, *c) {
                Some((v, _)) => v != 0.0,
                None => match ctx.g[*c].data.facts.int_range? {
                    (0, 0) => false,
                    (1, 1) => true,
                    _ => return None,
                },
            };
            Some(Term::Class(if v { *x } else { *y }))
        }
        _ => None,
    }
}

/// An integer or bool value the analysis proves to be one number `k` everywhere (a comparison or a
/// logical combination of comparisons decided by integer ranges: `0 <= i && i < n` on ids in
/// range, the mask of a segment sum's transpose) → `k` broadcast. Exact. As a broadcast of a
/// constant it reaches a loop body as a constant ([`crate::sink_scan_constants`]), where the
/// selects it masks fold away ([`select_const`]).
fn decided_by_range(ctx: &Ctx, id: Id, node: &Node) -> Option<Term> {
    op(node, ctx.g)?;
    let t = ty(ctx.g, id);
    let data = &ctx.g[id].data;
    if t.dtype.is_float() || !data.is_value() || data.uniform.is_some() {
        return None;
    }
    // Only a value the dtype holds (an analysis bug must not become a saturated constant).
    let fits = |k: i64| match t.dtype {
        DType::I32 => i32::try_from(k).is_ok(),
        DType::U32 => u32::try_from(k).is_ok(),
        DType::Bool => k == 0 || k == 1,
        DType::F32 | DType::F64 => false,
    };
    match data.facts.int_range? {
        (lo, hi) if lo == hi && fits(lo) => Some(splat(scalar(t.dtype, lo as f64), t)),
        _ => None,
    }
}

/// `clamp(lo, x, hi) → x` for integers the analysis proves inside the bounds (`lo ≤ x ≤ hi`
/// everywhere): JAX's index clamp on ids in range. Exact.
fn clamp_in_range(ctx: &Ctx, id: Id, node: &Node) -> Option<Term> {
    let (Prim::Clamp, [lo, x, hi]) = op(node, ctx.g)? else { return None };
    if ty(ctx.g, id).dtype.is_float() {
        return None;
    }
    let range = |c: &Id| ctx.g[*c].data.facts.int_range;
    let (lo_r, x_r, hi_r) = (range(lo)?, range(x)?, range(hi)?);
    (lo_r.1 <= x_r.0 && x_r.1 <= hi_r.0).then_some(Term::Class(*x))
}

/// `select(p, select(p, a, b), c) → select(p, a, c)` and `select(p, a, select(p, b, c)) →
/// select(p, a, c)`: where `p` holds the inner select picks `a` as the outer does, elsewhere the
/// outer one never reads it. Exact (a selection). The gradient of a `where`/`relu` chain nests
/// these (W5's backward pass: three deep).
fn select_of_select(ctx: &Ctx, _: Id, node: &Node) -> Option<Term> {
    let (Prim::Select, [p, a, c]) = op(node, ctx.g)? else { return None };
    let p = ctx.g.find(*p);
    let inner = |x: Id| {
        defs(ctx.g, x).find_map(|(q, ys)| match (q, ys) {
            (Prim::Select, [q, t, f]) if ctx.g.find(*q) == p => Some((*t, *f)),
            _ => None,
        })
    };
    let select = |t: Id, f: Id| Term::Op(Prim::Select, vec![Term::Class(p), Term::Class(t), Term::Class(f)]);
    if let Some((t, _)) = inner(*a) {
        return Some(select(t, *c));
    }
    inner(*c).map(|(_, f)| select(*a, f))
}

/// `and(x, x) → x`, `or(x, x) → x` (bools and integers, bit by bit): exact.
fn and_or_self(ctx: &Ctx, _: Id, node: &Node) -> Option<Term> {
    let (a, b) = as_binary(ctx, node, BinaryOp::And).or_else(|| as_binary(ctx, node, BinaryOp::Or))?;
    (ctx.g.find(a) == ctx.g.find(b)).then_some(Term::Class(a))
}

/// `abs(x) → x` when the analysis proves every element has a clear sign bit (so not -0.0, not NaN).
fn abs_non_negative(ctx: &Ctx, _: Id, node: &Node) -> Option<Term> {
    let x = as_unary(ctx, node, UnaryOp::Abs)?;
    ctx.g[x].data.facts.sign_clear.then_some(Term::Class(x))
}

/// `is_finite(x) → true` when the analysis proves x finite.
fn is_finite_of_finite(ctx: &Ctx, id: Id, node: &Node) -> Option<Term> {
    let x = as_unary(ctx, node, UnaryOp::IsFinite)?;
    ctx.g[x].data.facts.finite.then(|| splat(Array::scalar(true), ty(ctx.g, id)))
}

/// `convert_element_type[dtype=t](x) → x` when x already has dtype t.
fn convert_same(ctx: &Ctx, _: Id, node: &Node) -> Option<Term> {
    match op(node, ctx.g)? {
        (Prim::ConvertElementType { dtype }, [x]) if ty(ctx.g, *x).dtype == *dtype => Some(Term::Class(*x)),
        _ => None,
    }
}

// ---------------------------------------------------------------- shape canonicalization (exact)

/// `reshape(reshape(x)) → reshape(x)` (row-major order is kept by both).
fn reshape_reshape(ctx: &Ctx, _: Id, node: &Node) -> Option<Term> {
    let (Prim::Reshape { new_sizes }, [x]) = op(node, ctx.g)? else { return None };
    defs(ctx.g, *x).find_map(|(p, ys)| match p {
        Prim::Reshape { .. } => {
            Some(Term::Op(Prim::Reshape { new_sizes: new_sizes.clone() }, vec![Term::Class(ys[0])]))
        }
        _ => None,
    })
}

/// `reshape(x) → x` when the shape does not change.
fn reshape_identity(ctx: &Ctx, _: Id, node: &Node) -> Option<Term> {
    match op(node, ctx.g)? {
        (Prim::Reshape { new_sizes }, [x]) if ty(ctx.g, *x).shape == *new_sizes => Some(Term::Class(*x)),
        _ => None,
    }
}

/// `transpose[p2](transpose[p1](x)) → transpose[p1∘p2](x)`.
fn transpose_transpose(ctx: &Ctx, _: Id, node: &Node) -> Option<Term> {
    let (Prim::Transpose { permutation: p2 }, [x]) = op(node, ctx.g)? else { return None };
    defs(ctx.g, *x).find_map(|(p, ys)| match p {
        Prim::Transpose { permutation: p1 } => {
            let permutation = p2.iter().map(|&i| p1[i]).collect();
            Some(Term::Op(Prim::Transpose { permutation }, vec![Term::Class(ys[0])]))
        }
        _ => None,
    })
}

/// `transpose[0, 1, ..](x) → x`.
fn transpose_identity(ctx: &Ctx, _: Id, node: &Node) -> Option<Term> {
    match op(node, ctx.g)? {
        (Prim::Transpose { permutation }, [x]) if permutation.iter().enumerate().all(|(i, p)| i == *p) => {
            Some(Term::Class(*x))
        }
        _ => None,
    }
}

/// `broadcast_in_dim(x) → x` when shape and dimension order are unchanged.
fn broadcast_identity(ctx: &Ctx, _: Id, node: &Node) -> Option<Term> {
    match op(node, ctx.g)? {
        (Prim::BroadcastInDim { shape, broadcast_dimensions }, [x])
            if ty(ctx.g, *x).shape == *shape
                && broadcast_dimensions.iter().enumerate().all(|(i, d)| i == *d) =>
        {
            Some(Term::Class(*x))
        }
        _ => None,
    }
}

/// `broadcast(broadcast(x)) → broadcast(x)` with the composed dimension map.
fn broadcast_broadcast(ctx: &Ctx, _: Id, node: &Node) -> Option<Term> {
    let (Prim::BroadcastInDim { shape, broadcast_dimensions: d2 }, [x]) = op(node, ctx.g)? else {
        return None;
    };
    let (y, _, d1) = child_broadcast(ctx.g, *x)?;
    let broadcast_dimensions = d1.iter().map(|&i| d2[i]).collect();
    Some(Term::Op(Prim::BroadcastInDim { shape: shape.clone(), broadcast_dimensions }, vec![Term::Class(y)]))
}

/// For `reduce[axes](broadcast(y))` where every reduced axis only repeats `y` (a new axis, or a size-1
/// axis of `y` stretched) and is non-empty: the size-1 axes of `y` that are reduced, the reshaped `y`,
/// the result's broadcast of it, and the number of copies summed per element.
fn reduce_of_broadcast_parts(ctx: &Ctx, id: Id, x: Id, axes: &[usize]) -> Option<(Term, Prim, u64, Id)> {
    let (y, big, dims) = child_broadcast(ctx.g, x)?;
    if axes.is_empty() {
        return None;
    }
    let ys = ty(ctx.g, y).shape.dims().to_vec();
    let mut copies = 1u64;
    for &a in axes {
        let n = big.dims()[a];
        if n == 0 || dims.iter().zip(&ys).any(|(d, s)| *d == a && *s != 1) {
            return None;
        }
        copies = copies.checked_mul(n as u64)?;
    }
    let kept: Vec<usize> = (0..ys.len()).filter(|&i| !axes.contains(&dims[i])).collect();
    let y_shape: Vec<usize> = kept.iter().map(|&i| ys[i]).collect();
    let y_term = if kept.len() == ys.len() {
        Term::Class(y)
    } else {
        Term::Op(Prim::Reshape { new_sizes: Shape::new(&y_shape) }, vec![Term::Class(y)])
    };
    let out_dims = kept.iter().map(|&i| dims[i] - axes.iter().filter(|&&a| a < dims[i]).count()).collect();
    let bcast = Prim::BroadcastInDim { shape: ty(ctx.g, id).shape.clone(), broadcast_dimensions: out_dims };
    Some((y_term, bcast, copies, y))
}

/// `reduce_max/min[axes](broadcast(y)) → broadcast(y')` when the reduced axes only hold copies:
/// the max of copies of a value is that value (NaN and -0.0 included).
fn reduce_max_min_of_broadcast(ctx: &Ctx, id: Id, node: &Node) -> Option<Term> {
    let (Prim::Reduce { op: ReduceOp::Max | ReduceOp::Min, axes }, [x]) = op(node, ctx.g)? else {
        return None;
    };
    let (y, bcast, _, _) = reduce_of_broadcast_parts(ctx, id, *x, axes)?;
    Some(Term::Op(bcast, vec![y]))
}

/// `reduce_sum[axes](broadcast(y)) → broadcast(y' * n)` when the reduced axes only hold `n` copies,
/// only where exact: ints (wrapping sums equal wrapping products), or floats proved integral with
/// `n·max|y| ≤ 2^24` (every partial sum exact, no -0.0). Not for general floats: a sum of n copies
/// differs from `n*x` in the last bits, and a sum starting at +0.0 turns -0.0 into +0.0.
fn reduce_sum_of_broadcast(ctx: &Ctx, id: Id, node: &Node) -> Option<Term> {
    let (Prim::Reduce { op: ReduceOp::Sum, axes }, [x]) = op(node, ctx.g)? else { return None };
    let (y_term, bcast, n, y) = reduce_of_broadcast_parts(ctx, id, *x, axes)?;
    let dtype = ty(ctx.g, y).dtype;
    let exact = match dtype {
        DType::I32 | DType::U32 => true,
        DType::F32 | DType::F64 => ctx.g[y].data.facts.int_range.is_some_and(|(lo, hi)| {
            (lo.unsigned_abs().max(hi.unsigned_abs()) as f64) * (n as f64) <= EXACT_INT
        }),
        DType::Bool => false,
    };
    if !exact {
        return None;
    }
    let count = match dtype {
        DType::I32 => Array::scalar(n as u32 as i32),
        DType::U32 => Array::scalar(n as u32),
        DType::F32 | DType::F64 | DType::Bool => scalar(dtype, n as f64),
    };
    let y_ty = TensorType {
        dtype,
        shape: match &y_term {
            Term::Op(Prim::Reshape { new_sizes }, _) => new_sizes.clone(),
            _ => ty(ctx.g, y).shape.clone(),
        },
    };
    let scaled = if n == 1 { y_term } else { binary(BinaryOp::Mul, y_term, splat(count, &y_ty)) };
    Some(Term::Op(bcast, vec![scaled]))
}

/// `transpose(dot_general(a, b)) → dot_general(b, a)` when the transpose only swaps the result's
/// lhs-free and rhs-free blocks (batch axes kept in front): the swapped product yields that layout
/// directly, so no transposed copy is materialized (W5's weight gradients, `xᵀ·g` then `ᵀ`). Exact:
/// each element multiplies the same pairs (IEEE products commute) and sums them in the same
/// order, the contracting axes being paired as before.
fn transpose_of_dot(ctx: &Ctx, _: Id, node: &Node) -> Option<Term> {
    let (Prim::Transpose { permutation }, [x]) = op(node, ctx.g)? else { return None };
    defs(ctx.g, *x).find_map(|(p, ys)| {
        let Prim::DotGeneral {
            lhs_contracting,
            rhs_contracting,
            lhs_batch,
            rhs_batch,
            preferred_element_type,
        } = p
        else {
            return None;
        };
        let nb = lhs_batch.len();
        let nl = ty(ctx.g, ys[0]).rank() - lhs_contracting.len() - nb;
        let nr = ty(ctx.g, ys[1]).rank() - rhs_contracting.len() - nb;
        let swapped: Vec<usize> = (0..nb).chain(nb + nl..nb + nl + nr).chain(nb..nb + nl).collect();
        (nl > 0 && nr > 0 && *permutation == swapped).then(|| {
            let dot = Prim::DotGeneral {
                lhs_contracting: rhs_contracting.clone(),
                rhs_contracting: lhs_contracting.clone(),
                lhs_batch: rhs_batch.clone(),
                rhs_batch: lhs_batch.clone(),
                preferred_element_type: *preferred_element_type,
            };
            Term::Op(dot, vec![Term::Class(ys[1]), Term::Class(ys[0])])
        })
    })
}

/// `slice(broadcast(y)) → broadcast(slice'(y))`: slice only the real axes of `y`.
fn slice_of_broadcast(ctx: &Ctx, id: Id, node: &Node) -> Option<Term> {
    let (Prim::Slice { start, limit, strides }, [x]) = op(node, ctx.g)? else { return None };
    let (y, big, dims) = child_broadcast(ctx.g, *x)?;
    let ys = ty(ctx.g, y).shape.dims().to_vec();
    let (mut s, mut l, mut st) = (vec![], vec![], vec![]);
    for (i, &d) in dims.iter().enumerate() {
        if ys[i] == big.dims()[d] {
            s.push(start[d]);
            l.push(limit[d]);
            st.push(strides[d]);
        } else {
            s.push(0);
            l.push(1);
            st.push(1);
        }
    }
    let full = s.iter().all(|v| *v == 0) && l == ys && st.iter().all(|v| *v == 1);
    let y_term = if full {
        Term::Class(y)
    } else {
        Term::Op(Prim::Slice { start: s, limit: l, strides: st }, vec![Term::Class(y)])
    };
    let bcast =
        Prim::BroadcastInDim { shape: ty(ctx.g, id).shape.clone(), broadcast_dimensions: dims.to_vec() };
    Some(Term::Op(bcast, vec![y_term]))
}

/// `reshape(broadcast(y)) → broadcast(y')` when the reshape only regroups broadcast (repeated)
/// axes and moves `y`'s real axes unchanged: the non-unit axes of the broadcast's shape and of the
/// reshape's are cut into the smallest groups of equal size product; a group is either all repeated
/// axes (becoming repeated axes of the new shape) or one real axis of `y` on each side (the same
/// size). Size-1 axes come and go freely; `y`'s size-1 axes are dropped by a reshape of `y`, which
/// keeps row-major order. Exact: every element is still the same element of `y`. Canonicalizes
/// vmap's and the gradient's `[..., 1]` reshapes of broadcasts, which otherwise block
/// `broadcast_broadcast` and `elementwise_of_broadcasts`.
fn reshape_of_broadcast(ctx: &Ctx, _: Id, node: &Node) -> Option<Term> {
    let (Prim::Reshape { new_sizes }, [x]) = op(node, ctx.g)? else { return None };
    let (y, big, dims) = child_broadcast(ctx.g, *x)?;
    let ys = ty(ctx.g, y).shape.dims();
    let bd = big.dims();
    if bd.contains(&0) {
        return None;
    }
    // The operand axis of `y` each non-unit broadcast axis comes from, if it is real (not repeated).
    let real = |a: usize| dims.iter().position(|&d| d == a).filter(|&i| ys[i] == bd[a]);
    let from: Vec<(usize, Option<usize>)> =
        (0..bd.len()).filter(|&a| bd[a] != 1).map(|a| (bd[a], real(a))).collect();
    let to: Vec<(usize, usize)> =
        new_sizes.dims().iter().enumerate().filter(|(_, n)| **n != 1).map(|(j, n)| (*n, j)).collect();
    // Walk both sides, cutting groups where the running products meet.
    let (mut i, mut j) = (0, 0);
    let mut mapped: Vec<(usize, usize)> = Vec::new(); // (axis of y, axis of the new shape)
    while i < from.len() || j < to.len() {
        let (i0, j0) = (i, j);
        let (mut p, mut q) = (1usize, 1usize);
        loop {
            if p <= q && i < from.len() {
                p = p.checked_mul(from[i].0)?;
                i += 1;
            } else if j < to.len() {
                q = q.checked_mul(to[j].0)?;
                j += 1;
            } else {
                return None;
            }
            if p == q {
                break;
            }
        }
        let reals: Vec<usize> = from[i0..i].iter().filter_map(|(_, r)| *r).collect();
        match (reals.as_slice(), i - i0, j - j0) {
            ([], _, _) => {}
            ([r], 1, 1) => mapped.push((*r, to[j0].1)),
            _ => return None,
        }
    }
    let kept: Vec<usize> = mapped.iter().map(|(r, _)| *r).collect();
    let y_term = if kept.len() == ys.len() {
        Term::Class(y)
    } else {
        let sizes: Vec<usize> = kept.iter().map(|&r| ys[r]).collect();
        Term::Op(Prim::Reshape { new_sizes: Shape::new(&sizes) }, vec![Term::Class(y)])
    };
    let broadcast_dimensions = mapped.iter().map(|(_, n)| *n).collect();
    Some(Term::Op(Prim::BroadcastInDim { shape: new_sizes.clone(), broadcast_dimensions }, vec![y_term]))
}

/// `transpose[p](broadcast(y)) → broadcast(transpose'(y))`: the permutation moves only `y`'s axes
/// (transposed in the small operand when their order changes; no transpose when it does not), the
/// repeated axes cost nothing wherever they are. Exact (a permutation of copies).
fn transpose_of_broadcast(ctx: &Ctx, id: Id, node: &Node) -> Option<Term> {
    let (Prim::Transpose { permutation }, [x]) = op(node, ctx.g)? else { return None };
    let (y, _, dims) = child_broadcast(ctx.g, *x)?;
    // Output axis of each operand axis of `y`: where the permutation puts its broadcast axis.
    let mut placed: Vec<(usize, usize)> = dims
        .iter()
        .enumerate()
        .map(|(i, d)| (permutation.iter().position(|p| p == d).expect("a permutation"), i))
        .collect();
    placed.sort_unstable();
    let order: Vec<usize> = placed.iter().map(|(_, i)| *i).collect();
    let y_term = if order.iter().enumerate().all(|(k, i)| k == *i) {
        Term::Class(y)
    } else {
        Term::Op(Prim::Transpose { permutation: order }, vec![Term::Class(y)])
    };
    let broadcast_dimensions = placed.iter().map(|(o, _)| *o).collect();
    let shape = ty(ctx.g, id).shape.clone();
    Some(Term::Op(Prim::BroadcastInDim { shape, broadcast_dimensions }, vec![y_term]))
}

/// `slice[s2, l2, t2](slice[s1, l1, t1](x)) → slice[s1 + s2·t1, .., t1·t2](x)`: element `k` of
/// the outer slice is element `s2 + k·t2` of the inner one, which is element `s1 + (s2 + k·t2)·t1`
/// of `x`. The limit is one past the last element taken (the start itself for an empty axis).
/// Exact: the same elements of `x`.
fn slice_slice(ctx: &Ctx, id: Id, node: &Node) -> Option<Term> {
    let (Prim::Slice { start: s2, strides: t2, .. }, [x]) = op(node, ctx.g)? else { return None };
    let out = ty(ctx.g, id).shape.dims().to_vec();
    defs(ctx.g, *x).find_map(|(p, ys)| {
        let Prim::Slice { start: s1, strides: t1, .. } = p else { return None };
        let xs = ty(ctx.g, ys[0]).shape.dims();
        // An empty axis may start past the end of `x` (`s2` at the inner slice's end): clamp it.
        let start: Vec<usize> = (0..out.len()).map(|d| (s1[d] + s2[d] * t1[d]).min(xs[d])).collect();
        let strides: Vec<usize> = (0..out.len()).map(|d| t1[d] * t2[d]).collect();
        let limit = (0..out.len())
            .map(|d| if out[d] == 0 { start[d] } else { start[d] + (out[d] - 1) * strides[d] + 1 })
            .collect();
        Some(Term::Op(Prim::Slice { start, limit, strides }, vec![Term::Class(ys[0])]))
    })
}

/// `gather(iota, idx)`: the gathered coordinates are the (clamped) indices, or another iota. In
/// `fill` mode only when the analysis proves every index in range (else the fill value appears).
fn gather_of_iota(ctx: &Ctx, id: Id, node: &Node) -> Option<Term> {
    let (Prim::Gather { axis, batch_dims, mode }, [operand, idx]) = op(node, ctx.g)? else { return None };
    let (dtype, dimension) = defs(ctx.g, *operand).find_map(|(p, _)| match p {
        Prim::Iota { dtype, dimension, .. } => Some((*dtype, *dimension)),
        _ => None,
    })?;
    let n = ty(ctx.g, *operand).shape.dims()[*axis] as i64;
    let out = ty(ctx.g, id);
    let idx_ty = ty(ctx.g, *idx).clone();
    let in_range = ctx.g[*idx].data.facts.int_range.is_some_and(|(lo, hi)| lo >= 0 && hi < n);
    if n == 0 || (*mode == IndexMode::FillOrDrop && !in_range) {
        return None;
    }
    let rest = idx_ty.rank() - batch_dims;
    if dimension != *axis {
        let dimension = if dimension < *axis { dimension } else { dimension - 1 + rest };
        return Some(Term::Op(Prim::Iota { dtype, shape: out.shape.clone(), dimension }, vec![]));
    }
    let mut index = Term::Class(*idx);
    if !in_range {
        let bound = |v: i64| match idx_ty.dtype {
            DType::U32 => Term::Const(Array::scalar(v as u32)),
            _ => Term::Const(Array::scalar(v as i32)),
        };
        index = Term::Op(Prim::Clamp, vec![bound(0), index, bound(n - 1)]);
    }
    if dtype != idx_ty.dtype {
        index = Term::Op(Prim::ConvertElementType { dtype }, vec![index]);
    }
    let broadcast_dimensions = (0..*batch_dims).chain(*axis..*axis + rest).collect();
    Some(Term::Op(Prim::BroadcastInDim { shape: out.shape.clone(), broadcast_dimensions }, vec![index]))
}

/// Largest result (elements) constant folding may create, and largest operand it reads.
pub const FOLD_MAX_OUT: usize = 64;
const FOLD_MAX_IN: usize = 4096;

/// `prim(constants..) → constant`, through the reference interpreter, for small results.
fn constant_fold(ctx: &Ctx, id: Id, node: &Node) -> Option<Term> {
    let (prim, xs) = op(node, ctx.g)?;
    if !prim.subfunctions().is_empty() || !ctx.g[id].data.is_value() || ctx.g[id].data.value.is_some() {
        return None;
    }
    if ty(ctx.g, id).shape.size() > FOLD_MAX_OUT {
        return None;
    }
    let args: Vec<Arc<Array>> = xs.iter().map(|x| ctx.g[*x].data.value.clone()).collect::<Option<_>>()?;
    if args.iter().any(|a| a.len() > FOLD_MAX_IN) {
        return None;
    }
    let refs: Vec<&Array> = args.iter().map(|a| &**a).collect();
    let mut out = kiln_ir::eval_prim(prim, &refs).ok()?;
    (out.len() == 1).then(|| Term::Const(out.remove(0)))
}

// ---------------------------------------------------------------- fusion-exposing (exact)

/// `dot_general` without contracting dimensions (an outer product, batch dimensions leading on
/// both sides) is one product per element added to its sum's +0.0 start: `a·b + 0.0`, with `a` and
/// `b` broadcast to the result (the +0.0 turns a -0.0 product into +0.0, as the interpreter's and
/// the kernels' in-order sums do; every other value, NaN included, passes unchanged). Written so,
/// it is elementwise work that fuses into its consumer instead of a kernel of its own: W2's weight
/// gradient adds `outer(ct, sin(…))` to its `[120, 10]` carry at every backward step. Operand and
/// result dtypes must agree (no `preferred_element_type` conversion); not for bool.
fn dot_without_contraction(ctx: &Ctx, id: Id, node: &Node) -> Option<Term> {
    let (Prim::DotGeneral { lhs_contracting, rhs_contracting, lhs_batch, rhs_batch, .. }, [l, r]) =
        op(node, ctx.g)?
    else {
        return None;
    };
    let out = ty(ctx.g, id);
    let (lt, rt) = (ty(ctx.g, *l), ty(ctx.g, *r));
    let nb = lhs_batch.len();
    let leading = |b: &[usize]| b.iter().copied().eq(0..nb);
    let ok = lhs_contracting.is_empty()
        && rhs_contracting.is_empty()
        && leading(lhs_batch)
        && leading(rhs_batch)
        && out.dtype != DType::Bool
        && lt.dtype == out.dtype
        && rt.dtype == out.dtype;
    if !ok {
        return None;
    }
    // Result dims: batch, then lhs free, then rhs free.
    let lf = lt.rank() - nb;
    let bcast = |x: Id, dims: Vec<usize>| {
        Term::Op(
            Prim::BroadcastInDim { shape: out.shape.clone(), broadcast_dimensions: dims },
            vec![Term::Class(x)],
        )
    };
    let a = bcast(*l, (0..nb + lf).collect());
    let b = bcast(*r, (0..nb).chain(nb + lf..out.rank()).collect());
    Some(binary(BinaryOp::Add, binary(BinaryOp::Mul, a, b), splat(scalar(out.dtype, 0.0), out)))
}

/// `scatter_add(zeros, idx, upd)` along axis 0, without batch dims, dropping out-of-range indices
/// (`mode=fill`, JAX's `.at[].add` default and the transpose of `take`) → `segment_sum(upd, idx)`.
/// Exact: each output row adds the same updates in the same (update) order starting from +0.0 (or
/// integer 0), and `segment_sum` drops the same ids. The backend runs a scatter as a runtime routine
/// over a materialized `upd`; a `segment_sum` is a kernel with `upd`'s producers fused in — the
/// reverse pass of a message pass (W2's spring forces scattered back to the masses) as one loop
/// over the edges.
fn scatter_add_of_zeros(ctx: &Ctx, id: Id, node: &Node) -> Option<Term> {
    let (
        Prim::Scatter { op: kiln_ir::ScatterOp::Add, axis: 0, batch_dims: 0, mode: IndexMode::FillOrDrop },
        [z, idx, upd],
    ) = op(node, ctx.g)?
    else {
        return None;
    };
    let out = ty(ctx.g, id);
    let ids = ty(ctx.g, *idx);
    let ok = out.dtype != DType::Bool
        && ids.rank() == 1
        && matches!(ids.dtype, DType::I32 | DType::U32)
        && out.shape.dims().first().is_some_and(|&n| n > 0)
        && is_uniform(ctx.g, *z, 0.0, false);
    let num_segments = out.shape.dims()[0];
    ok.then(|| Term::Op(Prim::SegmentSum { num_segments }, vec![Term::Class(*upd), Term::Class(*idx)]))
}

/// True for primitives applied element by element to operands of one shape.
fn is_elementwise(p: &Prim) -> bool {
    match p {
        Prim::Unary(_) | Prim::Binary(_) | Prim::Compare(_) | Prim::Select => true,
        Prim::ConvertElementType { .. } | Prim::BitcastConvertType { .. } => true,
        Prim::Clamp
        | Prim::Iota { .. }
        | Prim::BroadcastInDim { .. }
        | Prim::Reshape { .. }
        | Prim::Transpose { .. }
        | Prim::Rev { .. }
        | Prim::Slice { .. }
        | Prim::DynamicSlice { .. }
        | Prim::DynamicUpdateSlice
        | Prim::Concatenate { .. }
        | Prim::Pad { .. }
        | Prim::Reduce { .. }
        | Prim::ArgReduce { .. }
        | Prim::Cumulative { .. }
        | Prim::Sort { .. }
        | Prim::DotGeneral { .. }
        | Prim::Gather { .. }
        | Prim::Scatter { .. }
        | Prim::SegmentSum { .. }
        | Prim::Threefry2x32
        | Prim::StopGradient
        | Prim::CustomJvpCall { .. }
        | Prim::CustomVjpCall { .. }
        | Prim::Scan { .. }
        | Prim::WhileLoop { .. }
        | Prim::Cond { .. }
        | Prim::Call { .. }
        | Prim::Checkpoint { .. } => false,
    }
}

/// Rewrites `f(wrap(a), wrap(b), ..)` to `wrap(f(a, b, ..))` when every operand is the same kind of
/// layout op (`unwrap` gives its operand and a key that must agree) or a uniform constant (rebuilt at
/// the inner shape); rank-0 operands of a larger result (select's scalar predicate) stay as they are.
fn push_through(
    ctx: &Ctx,
    id: Id,
    node: &Node,
    unwrap: impl Fn(&Graph, Id) -> Option<(Id, String)>,
    rewrap: impl Fn(Term) -> Term,
) -> Option<Term> {
    let (prim, xs) = op(node, ctx.g)?;
    if !is_elementwise(prim) {
        return None;
    }
    let out_rank = ty(ctx.g, id).rank();
    let mut key: Option<(String, TensorType)> = None;
    for x in xs {
        if let Some((inner, k)) = unwrap(ctx.g, *x) {
            let shape = TensorType { dtype: DType::Bool, shape: ty(ctx.g, inner).shape.clone() };
            match &key {
                Some((k0, s0)) if *k0 != k || *s0 != shape => return None,
                _ => key = Some((k, shape)),
            }
        }
    }
    let (_, inner_shape) = key?;
    let mut args = vec![];
    for x in xs {
        let t = ty(ctx.g, *x);
        if let Some((inner, _)) = unwrap(ctx.g, *x) {
            args.push(Term::Class(inner));
        } else if t.rank() == 0 && out_rank > 0 {
            args.push(Term::Class(*x));
        } else {
            let u = ctx.g[*x].data.uniform.as_ref()?;
            args.push(splat((**u).clone(), &TensorType { dtype: t.dtype, shape: inner_shape.shape.clone() }));
        }
    }
    Some(rewrap(Term::Op(prim.clone(), args)))
}

/// `f(broadcast a, broadcast b) → broadcast(f(a, b))` for elementwise `f` (same broadcast on every
/// operand; uniform constants shrink to the inner shape): computes on the small operand, and leaves
/// the broadcast at the consumer, where the fusion pass folds it into the loop.
fn elementwise_of_broadcasts(ctx: &Ctx, id: Id, node: &Node) -> Option<Term> {
    let out = ty(ctx.g, id).clone();
    let mut dims_seen: Option<Vec<usize>> = None;
    let unwrap = |g: &Graph, x: Id| {
        let (y, shape, dims) = child_broadcast(g, x)?;
        (ty(g, y).shape.size() < shape.size()).then(|| (y, format!("{dims:?}")))
    };
    let term = push_through(ctx, id, node, unwrap, |t| t)?;
    // Recover the common broadcast dims from the first broadcast operand.
    let (_, xs) = op(node, ctx.g)?;
    for x in xs {
        if let Some((y, shape, dims)) = child_broadcast(ctx.g, *x)
            && ty(ctx.g, y).shape.size() < shape.size()
        {
            dims_seen = Some(dims.to_vec());
            break;
        }
    }
    let bcast = Prim::BroadcastInDim { shape: out.shape, broadcast_dimensions: dims_seen? };
    Some(Term::Op(bcast, vec![term]))
}

/// `f(transpose[p] a, transpose[p] b) → transpose[p](f(a, b))` for elementwise `f`: moves the
/// transpose toward the consumer, so producers run in their natural layout.
fn elementwise_of_transposes(ctx: &Ctx, id: Id, node: &Node) -> Option<Term> {
    let perm_of = |g: &Graph, x: Id| {
        defs(g, x).find_map(|(p, ys)| match p {
            Prim::Transpose { permutation } => Some((ys[0], permutation.clone())),
            _ => None,
        })
    };
    let (_, xs) = op(node, ctx.g)?;
    let perm = xs.iter().find_map(|x| perm_of(ctx.g, *x))?.1;
    let unwrap = |g: &Graph, x: Id| perm_of(g, x).map(|(y, p)| (y, format!("{p:?}")));
    let perm2 = perm.clone();
    push_through(ctx, id, node, unwrap, move |t| {
        Term::Op(Prim::Transpose { permutation: perm2.clone() }, vec![t])
    })
}

// ---------------------------------------------------------------- exact for ints, fast math for floats

/// `x * 0 → 0`: exact for ints; for floats only with fast math (`NaN*0` and `inf*0` are NaN,
/// `-1*0` is -0.0).
fn mul_zero(ctx: &Ctx, id: Id, node: &Node) -> Option<Term> {
    let (a, b) = as_binary(ctx, node, BinaryOp::Mul)?;
    let t = ty(ctx.g, id);
    if t.dtype.is_float() && !ctx.fast_math {
        return None;
    }
    let zero = |x| uniform(ctx.g, x).is_some_and(|(v, _)| v == 0.0);
    (zero(a) || zero(b)).then(|| splat(scalar(t.dtype, 0.0), t))
}

/// `x - x → 0`: exact for ints; for floats only with fast math (`inf - inf` is NaN).
fn sub_self(ctx: &Ctx, id: Id, node: &Node) -> Option<Term> {
    let (a, b) = as_binary(ctx, node, BinaryOp::Sub)?;
    let t = ty(ctx.g, id);
    if (t.dtype.is_float() && !ctx.fast_math) || ctx.g.find(a) != ctx.g.find(b) {
        return None;
    }
    Some(splat(scalar(t.dtype, 0.0), t))
}

/// `(x + c1) + c2 → x + (c1 + c2)` and `(x * c1) * c2 → x * (c1 * c2)` for uniform constants:
/// exact for ints (wrapping arithmetic is associative); floats only with fast math (reassociation).
fn reassociate_consts(ctx: &Ctx, id: Id, node: &Node) -> Option<Term> {
    let t = ty(ctx.g, id);
    if t.dtype.is_float() && !ctx.fast_math {
        return None;
    }
    for o in [BinaryOp::Add, BinaryOp::Mul] {
        let Some((a, b)) = as_binary(ctx, node, o) else { continue };
        let c2 = ctx.g[b].data.uniform.clone()?;
        for (p, ys) in defs(ctx.g, a) {
            if *p != Prim::Binary(o) {
                continue;
            }
            let Some(c1) = ctx.g[ys[1]].data.uniform.clone() else { continue };
            let c = kiln_ir::eval_prim(p, &[&c1, &c2]).ok()?.remove(0);
            return Some(binary(o, Term::Class(ys[0]), splat(c, t)));
        }
    }
    None
}

/// `log(exp x) → x` (fast math only: exact in real arithmetic, off by rounding in floats), guarded:
/// x proved in [-64, 64] (else `exp` overflows to inf, underflows to 0, or gives NaN).
fn log_exp(ctx: &Ctx, _: Id, node: &Node) -> Option<Term> {
    let x = as_unary(ctx, node, UnaryOp::Log)?;
    let y = child_unary(ctx.g, x, UnaryOp::Exp)?;
    (ctx.fast_math && ctx.g[y].data.facts.small).then_some(Term::Class(y))
}

/// `exp(log x) → x` (fast math only), guarded: x proved non-negative (`log` of a negative is NaN).
fn exp_log(ctx: &Ctx, _: Id, node: &Node) -> Option<Term> {
    let x = as_unary(ctx, node, UnaryOp::Exp)?;
    let y = child_unary(ctx.g, x, UnaryOp::Log)?;
    (ctx.fast_math && ctx.g[y].data.facts.sign_clear).then_some(Term::Class(y))
}
