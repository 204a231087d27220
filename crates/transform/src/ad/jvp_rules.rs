//! One JVP rule per primitive: primal outputs and their tangents from primal inputs and tangents.
//!
//! `tangents[i]` is `None` for a symbolic zero (and always for integer/bool operands); at least one
//! is `Some` (the driver binds the primitive directly otherwise). Rules return one tangent per output,
//! `None` for a zero or a non-float output. Control flow lives in `control.rs`.
//!
//! Conventions (JAX's, except where noted):
//! * primal outputs are always the primitive itself, bound on the primals, so forward mode never
//!   changes values;
//! * tangents are multiplied by local derivatives with plain IEEE arithmetic (`0 · ∞` is NaN, as in
//!   JAX); `where` safety needs nothing here, since `select` passes on only the chosen arm's tangent;
//! * non-differentiable points: `abs'(±0) = 1`; `max`/`min` ties and `reduce_max`/`reduce_min`/
//!   `cummax`/`cummin` ties split the tangent equally between the tied operands (JAX's
//!   `_balanced_eq` and `_reduce_chooser_jvp_rule`; for `cummax`, an equal split among the tied
//!   positions so far, which agrees with `reduce_max` of each prefix); `clamp` passes `x`'s tangent
//!   only strictly inside `(lo, hi)`, `lo`'s where `lo > x` (and `lo < hi`), `hi`'s where `hi < x`;
//!   `pow(x, y)`: `∂/∂x = 0` where `y = 0` (JAX gives NaN at `x = 0`), `∂/∂y = 0` where `x = 0` or
//!   the result is 0;
//! * `reduce_prod` and `cumprod` are exact with zero entries: no division by the operand;
//! * index ops reuse the primal's indices, so clamping (`Clip`) and dropping (`FillOrDrop` scatter,
//!   `segment_sum`) apply to tangents as to values; a `FillOrDrop` gather's fill (NaN) is a constant
//!   with tangent 0 (JAX's `fill_value=0` for the tangent).

use super::{add_opt, control, instantiate};
use kiln_ir::{BinaryOp, CumulativeOp, DType, IndexMode, Prim, ReduceOp, ScatterOp, UnaryOp};
use kiln_trace::{Tensor, lax, where_};

/// The JVP rule of `prim`.
pub(crate) fn jvp_rule(
    prim: &Prim,
    primals: &[Tensor],
    tangents: &[Option<Tensor>],
) -> (Vec<Tensor>, Vec<Option<Tensor>>) {
    let t = |i: usize| tangents[i].as_ref();
    match prim {
        Prim::Unary(op) => single(prim, primals, |out| {
            let tx = t(0)?;
            unary_tangent(*op, &primals[0], out, tx)
        }),
        Prim::Binary(op) => {
            single(prim, primals, |out| binary_tangent(*op, &primals[0], &primals[1], out, t(0), t(1)))
        }
        Prim::Compare(_)
        | Prim::BitcastConvertType { .. }
        | Prim::Iota { .. }
        | Prim::ArgReduce { .. }
        | Prim::Threefry2x32
        | Prim::StopGradient => no_tangents(prim, primals),
        Prim::Select => single(prim, primals, |out| {
            if t(1).is_none() && t(2).is_none() {
                return None;
            }
            let ty = out.ty();
            let on_true = instantiate(tangents[1].clone(), &ty);
            let on_false = instantiate(tangents[2].clone(), &ty);
            Some(lax::select(&primals[0], &on_true, &on_false))
        }),
        Prim::Clamp => single(prim, primals, |_| clamp_tangent(primals, tangents)),
        Prim::ConvertElementType { dtype } => single(prim, primals, |_| {
            // Only float -> float carries a tangent; through an integer the derivative is zero.
            let tx = t(0)?;
            (tx.dtype().is_float() && dtype.is_float()).then(|| lax::convert_element_type(tx, *dtype))
        }),
        // Linear in the first operand; the other operands (indices) are passed unchanged.
        Prim::BroadcastInDim { .. }
        | Prim::Reshape { .. }
        | Prim::Transpose { .. }
        | Prim::Rev { .. }
        | Prim::Slice { .. }
        | Prim::DynamicSlice { .. }
        | Prim::SegmentSum { .. } => single(prim, primals, |_| Some(same_op(prim, t(0)?, &primals[1..]))),
        Prim::Gather { axis, batch_dims, mode } => single(prim, primals, |out| {
            let g = same_op(prim, t(0)?, &primals[1..]);
            Some(match mode {
                IndexMode::Clip => g,
                // A read from outside is the constant fill value (NaN): tangent 0 (JAX gathers the
                // tangent with fill_value=0).
                IndexMode::FillOrDrop => {
                    let (x, idx) = (&primals[0], &primals[1]);
                    let inside = index_in_range(idx, x.shape()[*axis]);
                    let dims: Vec<usize> =
                        (0..*batch_dims).chain(*axis..*axis + idx.ndim() - batch_dims).collect();
                    let inside = lax::broadcast_in_dim(&inside, out.shape().dims(), &dims);
                    where_(&inside, &g, &c(0.0, &g))
                }
            })
        }),
        Prim::DynamicUpdateSlice => single(prim, primals, |_| {
            // Linear in (operand, update) jointly: the update's tangent is written into the operand's.
            let [x, u] = [0, 1].map(|i| instantiate(tangents[i].clone(), &primals[i].ty()));
            let mut ins = vec![&x, &u];
            ins.extend(&primals[2..]);
            Some(bind1(prim, &ins))
        }),
        Prim::Concatenate { .. } | Prim::Pad { .. } => single(prim, primals, |_| {
            // Linear in all operands jointly (pad: operand and padding value).
            let ts: Vec<Tensor> =
                primals.iter().zip(tangents).map(|(p, t)| instantiate(t.clone(), &p.ty())).collect();
            Some(bind1(prim, &ts.iter().collect::<Vec<_>>()))
        }),
        Prim::Reduce { op, axes } => single(prim, primals, |out| {
            let (x, tx) = (&primals[0], t(0)?);
            Some(match op {
                ReduceOp::Sum => same_op(prim, tx, &[]),
                ReduceOp::Max | ReduceOp::Min => reduce_chooser_tangent(x, out, tx, axes),
                ReduceOp::Prod => reduce_prod_tangent(x, tx, axes),
            })
        }),
        Prim::Cumulative { op, axis, reverse } => single(prim, primals, |out| {
            let (x, tx) = (&primals[0], t(0)?);
            Some(match op {
                CumulativeOp::Sum => same_op(prim, tx, &[]),
                CumulativeOp::Prod => cumprod_tangent(x, tx, *axis, *reverse),
                CumulativeOp::Max | CumulativeOp::Min => cum_chooser_tangent(x, out, tx, *axis, *reverse),
            })
        }),
        Prim::Sort { dimension, num_keys } => sort_jvp(primals, tangents, *dimension, *num_keys),
        Prim::DotGeneral { .. } => single(prim, primals, |_| {
            // Bilinear: d(l·r) = dl·r + l·dr.
            let (l, r) = (&primals[0], &primals[1]);
            add_opt(t(0).map(|tl| bind1(prim, &[tl, r])), t(1).map(|tr| bind1(prim, &[l, tr])))
        }),
        Prim::Scatter { op, .. } => single(prim, primals, |_| {
            let idx = &primals[1];
            match (op, t(0), t(2)) {
                // Adding zeros changes nothing.
                (ScatterOp::Add, Some(tx), None) => Some(tx.clone()),
                // Otherwise the same scatter (same indices, clamping/dropping and duplicate order) of
                // the tangents: `Set` overwrites the operand's tangent where the updates land.
                (ScatterOp::Add | ScatterOp::Set, _, _) => {
                    let tx = instantiate(tangents[0].clone(), &primals[0].ty());
                    let tu = instantiate(tangents[2].clone(), &primals[2].ty());
                    Some(bind1(prim, &[&tx, idx, &tu]))
                }
            }
        }),
        Prim::CustomJvpCall { .. }
        | Prim::CustomVjpCall { .. }
        | Prim::Scan { .. }
        | Prim::WhileLoop { .. }
        | Prim::Cond { .. }
        | Prim::Call { .. }
        | Prim::Checkpoint { .. } => control::jvp(prim, primals, tangents),
    }
}

/// Binds `prim` on `ins`.
fn bind(prim: &Prim, ins: &[&Tensor]) -> Vec<Tensor> {
    lax::bind(prim.clone(), ins)
}

/// Binds a one-output `prim` on `ins`.
fn bind1(prim: &Prim, ins: &[&Tensor]) -> Tensor {
    bind(prim, ins).pop().expect("one output")
}

/// `prim` applied to `t` in place of its first operand, the other operands unchanged.
fn same_op(prim: &Prim, t: &Tensor, rest: &[Tensor]) -> Tensor {
    let mut ins = vec![t];
    ins.extend(rest);
    bind1(prim, &ins)
}

/// A one-output primitive: its primal output and the tangent `tangent(out)`.
fn single(
    prim: &Prim,
    primals: &[Tensor],
    tangent: impl FnOnce(&Tensor) -> Option<Tensor>,
) -> (Vec<Tensor>, Vec<Option<Tensor>>) {
    let out = bind1(prim, &primals.iter().collect::<Vec<_>>());
    let t = tangent(&out);
    (vec![out], vec![t])
}

/// The primal outputs with zero tangents (non-differentiable primitives, integer/bool results).
fn no_tangents(prim: &Prim, primals: &[Tensor]) -> (Vec<Tensor>, Vec<Option<Tensor>>) {
    let outs = bind(prim, &primals.iter().collect::<Vec<_>>());
    let n = outs.len();
    (outs, vec![None; n])
}

/// A rank-0 constant of `like`'s dtype.
fn c(v: f64, like: &Tensor) -> Tensor {
    Tensor::scalar_like(v, like.dtype())
}

fn unary_tangent(op: UnaryOp, x: &Tensor, out: &Tensor, t: &Tensor) -> Option<Tensor> {
    Some(match op {
        UnaryOp::Neg => -t,
        // JAX: select(x >= 0, t, -t), so 1 at ±0 (ad-cases 11).
        UnaryOp::Abs => where_(&x.ge(&c(0.0, x)), t, &-t),
        UnaryOp::Sign
        | UnaryOp::Floor
        | UnaryOp::Ceil
        | UnaryOp::Round
        | UnaryOp::RoundEven
        | UnaryOp::IsFinite
        | UnaryOp::Not => return None,
        UnaryOp::Exp => t * out,
        UnaryOp::Expm1 => t * (out + 1.0),
        UnaryOp::Log => t / x,
        UnaryOp::Log1p => t / &(x + 1.0),
        UnaryOp::Sqrt => &(t * 0.5) / out,
        // d x^(-1/2) = -1/2 x^(-3/2) = -1/2 · out / x.
        UnaryOp::Rsqrt => t * &((out / x) * -0.5),
        UnaryOp::Sin => t * x.cos(),
        UnaryOp::Cos => -(t * x.sin()),
        UnaryOp::Tanh => t * (1.0 - out * out),
        UnaryOp::Logistic => t * (out * (1.0 - out)),
        UnaryOp::Erf => t * ((-(x * x)).exp() * std::f64::consts::FRAC_2_SQRT_PI),
        // erf_inv'(x) = sqrt(pi)/2 · exp(out²) (infinite at ±1).
        UnaryOp::ErfInv => t * &((out * out).exp() * (std::f64::consts::PI.sqrt() / 2.0)),
    })
}

fn binary_tangent(
    op: BinaryOp,
    x: &Tensor,
    y: &Tensor,
    out: &Tensor,
    tx: Option<&Tensor>,
    ty: Option<&Tensor>,
) -> Option<Tensor> {
    let zero = c(0.0, x);
    match op {
        BinaryOp::Add => add_opt(tx.cloned(), ty.cloned()),
        BinaryOp::Sub => add_opt(tx.cloned(), ty.map(|t| -t)),
        BinaryOp::Mul => add_opt(tx.map(|t| t * y), ty.map(|t| x * t)),
        // d(x/y) = tx/y - ty·x/y² = tx/y - ty·out/y.
        BinaryOp::Div => add_opt(tx.map(|t| t / y), ty.map(|t| t * &-(out / y))),
        // rem(x, y) = x - y·trunc(x/y): d = tx - ty·trunc(x/y), trunc(q) = sign(q)·floor(|q|).
        BinaryOp::Rem => add_opt(
            tx.cloned(),
            ty.map(|t| {
                let q = x / y;
                -(t * (q.sign() * q.abs().floor()))
            }),
        ),
        BinaryOp::Pow => {
            // ∂/∂x = y·x^(y-1), but 0 where y = 0 (x^0 is constant; JAX gives NaN at x = 0, ad-cases 05).
            let dx = |t: &Tensor| {
                let d = where_(&y.eq(&zero), &zero, &(y * x.pow(&(y - 1.0))));
                t * &d
            };
            // ∂/∂y = log(x)·out, but 0 where x = 0 (d/dy 0^y = 0, ad-cases 05) or out = 0 (underflow,
            // x = inf with y < 0); the inner where keeps log's argument away from 0 for higher orders.
            let dy = |t: &Tensor| {
                let flat = x.eq(&zero).logical_or(&out.eq(&zero));
                let log_x = where_(&flat, &c(1.0, x), x).log();
                t * &where_(&flat, &zero, &(log_x * out))
            };
            add_opt(tx.map(dx), ty.map(dy))
        }
        BinaryOp::Max | BinaryOp::Min => {
            // JAX's `_balanced_eq`: the tangent of the operand equal to the result; half each on ties;
            // with a NaN result neither operand equals it and the tangent is 0.
            let x_wins = x.eq(out);
            let y_wins = y.eq(out);
            let share = |t: &Tensor, mine: &Tensor, other: &Tensor| {
                where_(mine, &where_(other, &(t * 0.5), t), &zero)
            };
            add_opt(tx.map(|t| share(t, &x_wins, &y_wins)), ty.map(|t| share(t, &y_wins, &x_wins)))
        }
        BinaryOp::Atan2 => {
            // atan2(x, y): d = (y·tx - x·ty) / (x² + y²).
            let r2 = x * x + y * y;
            add_opt(tx.map(|t| t * &(y / &r2)), ty.map(|t| t * &-(x / &r2)))
        }
        BinaryOp::And | BinaryOp::Or | BinaryOp::Xor | BinaryOp::ShiftLeft | BinaryOp::ShiftRightLogical => {
            None
        }
    }
}

/// `clamp(lo, x, hi)` (bounds may be scalars), JAX's rule: `lo`'s tangent where `lo > x` and
/// `lo < hi`, `x`'s strictly inside `(lo, hi)`, `hi`'s where `hi < x`.
fn clamp_tangent(primals: &[Tensor], tangents: &[Option<Tensor>]) -> Option<Tensor> {
    let [lo, x, hi] = [&primals[0], &primals[1], &primals[2]];
    let zero = c(0.0, x);
    // Every condition has x's shape, so `where_` broadcasts a scalar bound's tangent to it.
    let pick = |cond: Tensor, t: &Tensor| where_(&cond, t, &zero);
    let t_lo = tangents[0].as_ref().map(|t| pick(lo.gt(x).logical_and(&lo.lt(hi)), t));
    let t_x = tangents[1].as_ref().map(|t| pick(x.gt(lo).logical_and(&x.lt(hi)), t));
    let t_hi = tangents[2].as_ref().map(|t| pick(hi.lt(x), t));
    add_opt(add_opt(t_lo, t_x), t_hi)
}

/// True where an index lies in `[0, n)`.
fn index_in_range(idx: &Tensor, n: usize) -> Tensor {
    let below = idx.lt(&Tensor::scalar_like(n as f64, idx.dtype()));
    match idx.dtype() {
        DType::I32 => below.logical_and(&idx.ge(&Tensor::scalar(0i32))),
        DType::U32 | DType::F32 | DType::F64 | DType::Bool => below,
    }
}

/// The dims of a rank-`rank` tensor not in `axes`, in order.
fn kept_dims(rank: usize, axes: &[usize]) -> Vec<usize> {
    (0..rank).filter(|d| !axes.contains(d)).collect()
}

/// `reduce_max`/`reduce_min` (JAX's `_reduce_chooser_jvp_rule`): the mean of the tangents at the
/// positions equal to the result (ties split equally; NaN results give NaN).
fn reduce_chooser_tangent(x: &Tensor, out: &Tensor, t: &Tensor, axes: &[usize]) -> Tensor {
    let shape = x.shape();
    let at_extreme = x.eq(&lax::broadcast_in_dim(out, shape.dims(), &kept_dims(shape.rank(), axes)));
    let zero = c(0.0, x);
    let total = lax::reduce(ReduceOp::Sum, &where_(&at_extreme, t, &zero), axes);
    let count = lax::reduce(ReduceOp::Sum, &where_(&at_extreme, &c(1.0, x), &zero), axes);
    total / count
}

/// `x` moved by `d` positions along `axis` towards its end (from its end if `reverse`), the vacated
/// positions filled with the scalar `fill`; the shape is kept.
pub(super) fn shift(x: &Tensor, axis: usize, d: usize, fill: &Tensor, reverse: bool) -> Tensor {
    let rank = x.ndim();
    let (mut low, mut high) = (vec![0i64; rank], vec![0i64; rank]);
    let d = d as i64;
    if reverse {
        (low[axis], high[axis]) = (-d, d);
    } else {
        (low[axis], high[axis]) = (d, -d);
    }
    lax::pad(x, fill, &low, &high, &vec![0; rank])
}

/// `reduce_prod`: `Σ_i t_i · Π_{j≠i} x_j` with `Π_{j≠i} x_j` = exclusive prefix product · exclusive
/// suffix product — exact with zero entries (no division by `x`).
fn reduce_prod_tangent(x: &Tensor, t: &Tensor, axes: &[usize]) -> Tensor {
    let dims = x.shape().dims().to_vec();
    let kept = kept_dims(dims.len(), axes);
    // Move the reduced axes last and merge them into one of size n.
    let perm: Vec<usize> = kept.iter().chain(axes).copied().collect();
    let n: usize = axes.iter().map(|&a| dims[a]).product();
    let mut flat_shape: Vec<usize> = kept.iter().map(|&d| dims[d]).collect();
    let k = flat_shape.len();
    if n == 0 {
        // An empty product is the constant 1.
        return lax::broadcast_in_dim(&c(0.0, x), &flat_shape, &[]);
    }
    flat_shape.push(n);
    let flat = |v: &Tensor| {
        let moved = if perm.iter().copied().eq(0..perm.len()) { v.clone() } else { lax::transpose(v, &perm) };
        lax::reshape(&moved, &flat_shape)
    };
    let (xf, tf) = (flat(x), flat(t));
    let one = c(1.0, x);
    let before = lax::cumulative(CumulativeOp::Prod, &shift(&xf, k, 1, &one, false), k, false);
    let after = lax::cumulative(CumulativeOp::Prod, &shift(&xf, k, 1, &one, true), k, true);
    lax::reduce(ReduceOp::Sum, &(tf * (before * after)), &[k])
}

/// `cumprod`: the dual part of the running product of dual numbers `x + t·ε`, by a Hillis–Steele scan
/// (⌈log₂ n⌉ steps of `(a, ta)∘(b, tb) = (a·b, ta·b + a·tb)`) — exact with zero entries, unlike
/// `out · cumsum(t/x)` (ad-cases 17).
fn cumprod_tangent(x: &Tensor, t: &Tensor, axis: usize, reverse: bool) -> Tensor {
    let n = x.shape()[axis];
    let (one, zero) = (c(1.0, x), c(0.0, x));
    let (mut a, mut ta) = (x.clone(), t.clone());
    let mut d = 1;
    while d < n {
        let (a_prev, t_prev) = (shift(&a, axis, d, &one, reverse), shift(&ta, axis, d, &zero, reverse));
        ta = &ta * &a_prev + &a * &t_prev;
        a = &a * &a_prev;
        d *= 2;
    }
    ta
}

/// `cummax`/`cummin`: at each position, the mean of the tangents at the positions so far that equal
/// the running extreme (ties split equally, as `reduce_max` of that prefix). Those positions all lie
/// in the current run of equal running extremes, so this is a running sum restarting where the
/// running extreme changes. (The VJP rule is this map transposed: `vjp_rules::cum_extreme_grad`.)
fn cum_chooser_tangent(x: &Tensor, out: &Tensor, t: &Tensor, axis: usize, reverse: bool) -> Tensor {
    let zero = c(0.0, x);
    let hit = x.eq(out);
    let starts = run_starts(out, axis, reverse);
    let [total, count] =
        segmented_sums([where_(&hit, t, &zero), where_(&hit, &c(1.0, x), &zero)], &starts, axis, reverse);
    total / count
}

/// Where a run of equal values of `out` begins along `axis` (from its end if `reverse`): the first
/// position, and every position whose value differs from the one before. NaN differs from
/// everything, so after a NaN every position begins a run.
pub(super) fn run_starts(out: &Tensor, axis: usize, reverse: bool) -> Tensor {
    out.ne(&shift(out, axis, 1, &c(f64::NAN, out), reverse))
}

/// Running sums of each of `values` along `axis` (from its end if `reverse`) that restart at the
/// positions of `starts` (bool, the values' shape): a Hillis–Steele scan, `⌈log₂ n⌉` shifted adds,
/// with no cancellation (a sum is never formed by subtracting prefix sums).
pub(super) fn segmented_sums<const K: usize>(
    mut sums: [Tensor; K],
    starts: &Tensor,
    axis: usize,
    reverse: bool,
) -> [Tensor; K] {
    let Some(first) = sums.first() else { return sums };
    let (n, zero) = (first.shape()[axis], c(0.0, first));
    let (mut starts, no) = (starts.clone(), Tensor::scalar(false));
    let mut d = 1;
    while d < n {
        for s in &mut sums {
            *s = where_(&starts, s, &(&*s + &shift(s, axis, d, &zero, reverse)));
        }
        starts = starts.logical_or(&shift(&starts, axis, d, &no, reverse));
        d *= 2;
    }
    sums
}

/// `sort`: sorts an extra `iota` operand along to get the permutation, then gathers every float
/// operand's tangent with it.
fn sort_jvp(
    primals: &[Tensor],
    tangents: &[Option<Tensor>],
    dimension: usize,
    num_keys: usize,
) -> (Vec<Tensor>, Vec<Option<Tensor>>) {
    let positions = lax::iota(DType::I32, primals[0].shape().dims(), dimension);
    let mut ops = primals.to_vec();
    ops.push(positions);
    let mut outs = lax::sort(&ops, dimension, num_keys);
    let perm = outs.pop().expect("the positions");
    let touts =
        tangents.iter().map(|t| t.as_ref().map(|t| t.take_along_axis(&perm, dimension as i32))).collect();
    (outs, touts)
}
