//! One direct VJP rule per primitive: the cotangent of each input from the primal inputs, the primal
//! outputs and the output cotangents.
//!
//! `cts[i]` is `None` for a symbolic zero; at least one is `Some` (the driver skips the equation
//! otherwise). Rules return one cotangent per input, `None` for a zero or a non-float input. They
//! multiply by local derivatives with plain IEEE arithmetic (0·∞ is NaN, as in JAX); the driver
//! masks the cotangents of `where` branches that were not selected (see the `ad` module docs).
//! Control flow lives in `control.rs`.
//!
//! Conventions at non-differentiable points (JAX's unless noted):
//! * `abs'(±0) = 1`; `max`/`min` (binary and reductions) split the cotangent equally among ties;
//!   `sign`, `floor`, `ceil`, `round*` have zero derivative.
//! * `pow(a, b)`: `∂/∂a = 0` where `b == 0` (`a**0` is constant; JAX gives NaN at `a = 0`) and
//!   `∂/∂b = 0` where `a == 0` (the limit of `a**b · log a`; JAX gives NaN for `b < 0`).
//! * `clamp(lo, x, hi)`: JAX's rule, the transpose of the JVP rule — `x` gets the cotangent strictly
//!   inside `(lo, hi)`, `lo` where `lo > x` and `lo < hi`, `hi` where `hi < x`; at a tie nobody does.
//! * `cummax`/`cummin`: the transpose of the JVP rule's equal split among tied positions; at a NaN
//!   output the gradient is NaN (JAX's associative scan of `max` gives 0).
//! * `scatter` (set) with duplicate indices: only the winning update (the last one in row-major
//!   order, the forward's rule) gets the cotangent; the others get 0.
//! * Indexing backward passes use the forward's index semantics: a clamped (`Clip`) read scatters its
//!   cotangent to the clamped position; a dropped/filled (`FillOrDrop`) one contributes nothing.

use super::{control, jvp_rules, zeros_like, zeros_of};
use kiln_ir::{BinaryOp, CumulativeOp, DType, IndexMode, Prim, ReduceOp, ScatterOp, TensorType, UnaryOp};
use kiln_trace::{Tensor, lax, where_};

/// The VJP rule of `prim`.
pub(crate) fn vjp_rule(
    prim: &Prim,
    ins: &[Tensor],
    outs: &[Tensor],
    cts: &[Option<Tensor>],
) -> Vec<Option<Tensor>> {
    let none = || vec![None; ins.len()];
    // Every primitive but sort, threefry and control flow has one output.
    let ct = || cts[0].clone().expect("the driver skips equations whose output cotangents are all zero");
    match prim {
        Prim::Unary(op) => vec![unary(*op, &ins[0], &outs[0], &ct())],
        Prim::Binary(op) => binary(*op, &ins[0], &ins[1], &outs[0], &ct()),
        Prim::Compare(_)
        | Prim::BitcastConvertType { .. }
        | Prim::Iota { .. }
        | Prim::ArgReduce { .. }
        | Prim::Threefry2x32
        | Prim::StopGradient => none(),
        Prim::Select => {
            let (ct, zero) = (ct(), zeros_like(&ins[1]));
            vec![None, Some(lax::select(&ins[0], &ct, &zero)), Some(lax::select(&ins[0], &zero, &ct))]
        }
        Prim::Clamp => clamp(&ins[0], &ins[1], &ins[2], &ct()),
        Prim::ConvertElementType { .. } => {
            let x = &ins[0];
            vec![x.dtype().is_float().then(|| lax::convert_element_type(&ct(), x.dtype()))]
        }
        Prim::BroadcastInDim { shape, broadcast_dimensions } => {
            let x = &ins[0];
            let od = x.shape();
            // Sum over the new dims and over the size-1 dims that were stretched.
            let summed: Vec<usize> = (0..shape.rank())
                .filter(|&d| match broadcast_dimensions.iter().position(|&b| b == d) {
                    None => true,
                    Some(i) => od[i] == 1 && shape[d] != 1,
                })
                .collect();
            vec![Some(lax::reshape(&sum(&ct(), &summed), od.dims()))]
        }
        Prim::Reshape { .. } => vec![Some(lax::reshape(&ct(), ins[0].shape().dims()))],
        Prim::Transpose { permutation } => vec![Some(transpose_if_needed(&ct(), &inverse(permutation)))],
        Prim::Rev { dimensions } => vec![Some(lax::rev(&ct(), dimensions))],
        Prim::Slice { start, limit: _, strides } => {
            vec![Some(slice_transpose(&ins[0], &ct(), start, strides))]
        }
        Prim::DynamicSlice { .. } => {
            let (x, starts) = (&ins[0], &ins[1..]);
            let mut r = none();
            r[0] = Some(lax::dynamic_update_slice(&zeros_like(x), &ct(), starts));
            r
        }
        Prim::DynamicUpdateSlice => {
            let (update, starts, ct) = (&ins[1], &ins[2..], ct());
            let mut r = none();
            // The same (clamped) starts: the window the update overwrote gets nothing from the operand.
            r[0] = Some(lax::dynamic_update_slice(&ct, &zeros_like(update), starts));
            r[1] = Some(lax::dynamic_slice(&ct, starts, update.shape().dims()));
            r
        }
        Prim::Concatenate { dimension } => {
            let (ct, d) = (ct(), *dimension);
            let mut start = vec![0; ct.ndim()];
            let mut limit = ct.shape().dims().to_vec();
            let ones = vec![1; ct.ndim()];
            ins.iter()
                .map(|x| {
                    limit[d] = start[d] + x.shape()[d];
                    let piece = lax::slice(&ct, &start, &limit, &ones);
                    start[d] = limit[d];
                    Some(piece)
                })
                .collect()
        }
        Prim::Pad { low, high, interior } => pad_transpose(&ins[0], &ct(), low, high, interior),
        Prim::Reduce { op, axes } => vec![reduce(*op, axes, &ins[0], &outs[0], &ct())],
        Prim::Cumulative { op, axis, reverse } => {
            vec![cumulative(*op, *axis, *reverse, &ins[0], &outs[0], &ct())]
        }
        Prim::Sort { dimension, num_keys } => sort(*dimension, *num_keys, ins, cts),
        Prim::DotGeneral {
            lhs_contracting,
            rhs_contracting,
            lhs_batch,
            rhs_batch,
            preferred_element_type: _,
        } => {
            let (lhs, rhs, ct) = (&ins[0], &ins[1], ct());
            if !lhs.dtype().is_float() {
                return none();
            }
            let l = dot_transpose(
                &ct,
                lhs,
                rhs,
                (lhs_contracting, rhs_contracting),
                (lhs_batch, rhs_batch),
                false,
            );
            let r = dot_transpose(
                &ct,
                rhs,
                lhs,
                (rhs_contracting, lhs_contracting),
                (rhs_batch, lhs_batch),
                true,
            );
            vec![Some(l), Some(r)]
        }
        Prim::Gather { axis, batch_dims, mode } => {
            let (x, idx) = (&ins[0], &ins[1]);
            // The scatter clamps (Clip) or drops (FillOrDrop) exactly where the gather clamped or filled.
            let s = lax::scatter(ScatterOp::Add, &zeros_like(x), idx, &ct(), *axis, *batch_dims, *mode);
            vec![Some(s), None]
        }
        Prim::Scatter { op, axis, batch_dims, mode } => {
            let (idx, updates, ct) = (&ins[1], &ins[2], ct());
            let (axis, bd, mode) = (*axis, *batch_dims, *mode);
            if !ct.dtype().is_float() {
                return none();
            }
            let read = gather_ct(&ct, idx, axis, bd, mode);
            match op {
                ScatterOp::Add => vec![Some(ct), None, Some(read)],
                ScatterOp::Set => {
                    let overwritten =
                        lax::scatter(ScatterOp::Set, &ct, idx, &zeros_like(updates), axis, bd, mode);
                    let won = scatter_winners(&ins[0], idx, updates, axis, bd, mode);
                    vec![Some(overwritten), None, Some(where_(&won, &read, &zeros_like(&read)))]
                }
            }
        }
        Prim::SegmentSum { .. } => {
            // Row i of data went to segment ids[i], or nowhere if out of range.
            vec![Some(gather_ct(&ct(), &ins[1], 0, 0, IndexMode::FillOrDrop)), None]
        }
        Prim::CustomJvpCall { .. }
        | Prim::CustomVjpCall { .. }
        | Prim::Scan { .. }
        | Prim::WhileLoop { .. }
        | Prim::Cond { .. }
        | Prim::Call { .. }
        | Prim::Checkpoint { .. } => control::vjp(prim, ins, outs, cts),
    }
}

/// A rank-0 tensor of `like`'s dtype.
fn scalar(v: f64, like: &Tensor) -> Tensor {
    Tensor::scalar_like(v, like.dtype())
}

/// `reduce_sum` over `axes`, or `t` itself when there are none.
fn sum(t: &Tensor, axes: &[usize]) -> Tensor {
    if axes.is_empty() { t.clone() } else { lax::reduce(ReduceOp::Sum, t, axes) }
}

/// `lax::transpose` unless `perm` is the identity.
fn transpose_if_needed(t: &Tensor, perm: &[usize]) -> Tensor {
    if perm.iter().copied().eq(0..perm.len()) { t.clone() } else { lax::transpose(t, perm) }
}

/// The inverse permutation (`argsort` of a permutation).
fn inverse(perm: &[usize]) -> Vec<usize> {
    let mut inv = vec![0; perm.len()];
    for (i, &p) in perm.iter().enumerate() {
        inv[p] = i;
    }
    inv
}

fn unary(op: UnaryOp, x: &Tensor, out: &Tensor, ct: &Tensor) -> Option<Tensor> {
    if !x.dtype().is_float() {
        return None;
    }
    let sqrt_pi = std::f64::consts::PI.sqrt();
    Some(match op {
        UnaryOp::Neg => -ct,
        // JAX: select(x >= 0, ct, -ct), so |x|'(±0) = 1.
        UnaryOp::Abs => lax::select(&x.ge(&scalar(0.0, x)), ct, &-ct),
        UnaryOp::Sign
        | UnaryOp::Floor
        | UnaryOp::Ceil
        | UnaryOp::Round
        | UnaryOp::RoundEven
        | UnaryOp::IsFinite
        | UnaryOp::Not => return None,
        UnaryOp::Exp => ct * out,
        UnaryOp::Expm1 => ct * &(out + 1.0),
        UnaryOp::Log => ct / x,
        UnaryOp::Log1p => ct / &(x + 1.0),
        UnaryOp::Sqrt => ct / &(out * 2.0),
        UnaryOp::Rsqrt => ct * &(out / x * -0.5),
        UnaryOp::Sin => ct * &x.cos(),
        UnaryOp::Cos => ct * &-x.sin(),
        UnaryOp::Tanh => ct * &((1.0 + out) * (1.0 - out)),
        // s(x)·s(-x) rather than s·(1-s): no cancellation where s rounds to 1.
        UnaryOp::Logistic => ct * &(out * lax::unary(UnaryOp::Logistic, &-x)),
        UnaryOp::Erf => ct * &((-(x * x)).exp() * (2.0 / sqrt_pi)),
        UnaryOp::ErfInv => ct * &((out * out).exp() * (sqrt_pi / 2.0)),
    })
}

fn binary(op: BinaryOp, a: &Tensor, b: &Tensor, out: &Tensor, ct: &Tensor) -> Vec<Option<Tensor>> {
    if !a.dtype().is_float() {
        return vec![None, None];
    }
    let zero = scalar(0.0, a);
    let (da, db) = match op {
        BinaryOp::Add => (ct.clone(), ct.clone()),
        BinaryOp::Sub => (ct.clone(), -ct),
        BinaryOp::Mul => ((ct * b), (ct * a)),
        BinaryOp::Div => ((ct / b), (ct * &-(out / b))),
        BinaryOp::Rem => {
            // rem = a - b·trunc(a/b).
            let q = a / b;
            (ct.clone(), (ct * &-(q.sign() * q.abs().floor())))
        }
        BinaryOp::Pow => {
            let da = where_(&b.eq(&zero), &zero, &(b * a.pow(&(b - 1.0))));
            let db = where_(&a.eq(&zero), &zero, &(a.log() * out));
            ((ct * &da), (ct * &db))
        }
        BinaryOp::Max | BinaryOp::Min => {
            // The operand equal to the result gets the cotangent; ties split it (JAX).
            let (ea, eb) = (a.eq(out), b.eq(out));
            let half = ct * 0.5;
            let split = |mine: &Tensor, other: &Tensor| where_(mine, &where_(other, &half, ct), &zero);
            (split(&ea, &eb), split(&eb, &ea))
        }
        BinaryOp::Atan2 => {
            let r = a * a + b * b;
            ((ct * &(b / &r)), (ct * &-(a / &r)))
        }
        BinaryOp::And | BinaryOp::Or | BinaryOp::Xor | BinaryOp::ShiftLeft | BinaryOp::ShiftRightLogical => {
            return vec![None, None];
        }
    };
    vec![Some(da), Some(db)]
}

/// `clamp(lo, x, hi) = min(max(x, lo), hi)`: the transpose of JAX's clamp JVP (and kiln's), so both
/// modes agree at ties: `x` gets the cotangent strictly inside `(lo, hi)`, `lo` where `lo > x` and
/// `lo < hi`, `hi` where `hi < x`; a scalar bound gets the sum over its elements.
fn clamp(lo: &Tensor, x: &Tensor, hi: &Tensor, ct: &Tensor) -> Vec<Option<Tensor>> {
    if !x.dtype().is_float() {
        return vec![None; 3];
    }
    let dims = x.shape();
    let full =
        |t: &Tensor| if t.shape() == dims { t.clone() } else { lax::broadcast_in_dim(t, dims.dims(), &[]) };
    let (lo_f, hi_f) = (full(lo), full(hi));
    let to_x = x.gt(&lo_f).logical_and(&x.lt(&hi_f));
    let to_lo = lo_f.gt(x).logical_and(&lo_f.lt(&hi_f));
    let to_hi = hi_f.lt(x);
    let zero = zeros_like(ct);
    let all: Vec<usize> = (0..dims.rank()).collect();
    let bound = |mask: &Tensor, t: &Tensor| {
        let c = lax::select(mask, ct, &zero);
        if t.shape() == dims { c } else { sum(&c, &all) }
    };
    vec![Some(bound(&to_lo, lo)), Some(lax::select(&to_x, ct, &zero)), Some(bound(&to_hi, hi))]
}

/// The transpose of a strided slice: `ct` padded with zeros back to the operand's shape.
fn slice_transpose(x: &Tensor, ct: &Tensor, start: &[usize], strides: &[usize]) -> Tensor {
    let (n, m) = (x.shape(), ct.shape());
    let mut low = Vec::with_capacity(n.rank());
    let mut high = Vec::with_capacity(n.rank());
    let mut interior = Vec::with_capacity(n.rank());
    for d in 0..n.rank() {
        // One past the last element the slice read (the start itself for an empty slice).
        let end = if m[d] == 0 { start[d] } else { start[d] + (m[d] - 1) * strides[d] + 1 };
        low.push(start[d] as i64);
        high.push((n[d] - end) as i64);
        interior.push(strides[d] - 1);
    }
    lax::pad(ct, &scalar(0.0, ct), &low, &high, &interior)
}

/// The transpose of `pad`: the operand's elements are read back out of `ct` (undoing the crop of a
/// negative low/high with zeros); the padding value gets the sum of `ct` over the padded positions.
fn pad_transpose(
    x: &Tensor,
    ct: &Tensor,
    low: &[i64],
    high: &[i64],
    interior: &[usize],
) -> Vec<Option<Tensor>> {
    if !x.dtype().is_float() {
        return vec![None, None];
    }
    let rank = x.ndim();
    let neg = |v: &[i64]| v.iter().map(|&p| -p).collect::<Vec<_>>();
    let unpadded = lax::pad(ct, &scalar(0.0, ct), &neg(low), &neg(high), &vec![0; rank]);
    let strides: Vec<usize> = interior.iter().map(|&i| i + 1).collect();
    let dx = lax::slice(&unpadded, &vec![0; rank], unpadded.shape().dims(), &strides);
    // A mask of the padded positions, built by the same pad, so the sum is exact.
    let mask = lax::pad(
        &zeros_of(&TensorType::new(DType::Bool, x.shape().dims())),
        &Tensor::scalar(true),
        low,
        high,
        interior,
    );
    let dv = sum(&lax::select(&mask, ct, &zeros_like(ct)), &(0..rank).collect::<Vec<_>>());
    vec![Some(dx), Some(dv)]
}

fn reduce(op: ReduceOp, axes: &[usize], x: &Tensor, out: &Tensor, ct: &Tensor) -> Option<Tensor> {
    if !x.dtype().is_float() {
        return None;
    }
    let dims = x.shape();
    let kept: Vec<usize> = (0..dims.rank()).filter(|d| !axes.contains(d)).collect();
    let back = |t: &Tensor| lax::broadcast_in_dim(t, dims.dims(), &kept);
    let ct_b = back(ct);
    Some(match op {
        ReduceOp::Sum => ct_b,
        ReduceOp::Max | ReduceOp::Min => {
            // Split equally among the elements equal to the extreme (all NaN if the result is NaN:
            // nothing equals it, 0/0).
            let mask = lax::convert_element_type(&x.eq(&back(out)), x.dtype());
            let count = lax::reduce(ReduceOp::Sum, &mask, axes);
            &ct_b * &(&mask / back(&count))
        }
        ReduceOp::Prod => {
            // ∂/∂x_k = Π_{j≠k} x_j, exact with zeros: with no zero it is out/x_k; with one zero only
            // that position gets the product of the others; with two or more everything is 0.
            let zero = scalar(0.0, x);
            let is0 = x.eq(&zero);
            let zeros = back(&lax::reduce(ReduceOp::Sum, &lax::convert_element_type(&is0, x.dtype()), axes));
            let others = back(&lax::reduce(ReduceOp::Prod, &where_(&is0, &scalar(1.0, x), x), axes));
            let at_zero = where_(&zeros.eq(&scalar(1.0, x)), &others, &zero);
            let elsewhere = where_(&zeros.eq(&zero), &(&others / x), &zero);
            &ct_b * &where_(&is0, &at_zero, &elsewhere)
        }
    })
}

/// `rev` along `axis` when `flip`.
fn flip_if(t: &Tensor, axis: usize, flip: bool) -> Tensor {
    if flip { lax::rev(t, &[axis]) } else { t.clone() }
}

fn cumulative(
    op: CumulativeOp,
    axis: usize,
    reverse: bool,
    x: &Tensor,
    out: &Tensor,
    ct: &Tensor,
) -> Option<Tensor> {
    if !x.dtype().is_float() {
        return None;
    }
    if let CumulativeOp::Sum = op {
        return Some(lax::cumulative(CumulativeOp::Sum, ct, axis, !reverse));
    }
    // The others are worked out for a forward scan; a reverse one is flipped around it.
    let (x, y, ct) = (flip_if(x, axis, reverse), flip_if(out, axis, reverse), flip_if(ct, axis, reverse));
    let g = match op {
        CumulativeOp::Sum => unreachable!("handled above"),
        CumulativeOp::Prod => cumprod_grad(&x, &y, &ct, axis),
        CumulativeOp::Max | CumulativeOp::Min => cum_extreme_grad(&x, &y, &ct, axis),
    };
    Some(flip_if(&g, axis, reverse))
}

/// Forward `cumprod`: ∂L/∂x_k = Σ_{i≥k} ct_i·Π_{j≤i, j≠k} x_j, exact with zeros. Before the first zero
/// this is `rcumsum(ct·y)_k / x_k`; at the first zero it is `rcumsum(ct·y')_k` with `y'` the cumprod
/// with that zero replaced by 1; after it every term has a zero factor.
fn cumprod_grad(x: &Tensor, y: &Tensor, ct: &Tensor, axis: usize) -> Tensor {
    let (zero, one) = (scalar(0.0, x), scalar(1.0, x));
    let is0 = x.eq(&zero);
    let zeros_so_far =
        lax::cumulative(CumulativeOp::Sum, &lax::convert_element_type(&is0, x.dtype()), axis, false);
    let first = is0.logical_and(&zeros_so_far.eq(&one));
    let y1 = lax::cumulative(CumulativeOp::Prod, &where_(&first, &one, x), axis, false);
    let rcumsum = |t: &Tensor| lax::cumulative(CumulativeOp::Sum, t, axis, true);
    let before = rcumsum(&(ct * y)) / x;
    let at_first = rcumsum(&(ct * &y1));
    where_(&zeros_so_far.eq(&zero), &before, &where_(&first, &at_first, &zero))
}

/// Forward `cummax`/`cummin`: the transpose of the JVP rule (`jvp_rules::cum_chooser_tangent`), where
/// output `i`'s tangent is the mean of `t_k` over the hits `k ≤ i` of its run (positions `x_k == y_k`
/// where the running extreme `y` has kept its value). So hit `k` gets `Σ ct_i / count_i` over the
/// positions `i ≥ k` of its run: a running count forward, then a running sum backward, both
/// restarting at run boundaries. A NaN output has no hit (count 0), so its position's gradient is
/// NaN (0 · ct/0), as its tangent is; JAX's `cummax`, an associative scan of binary `max`, gives 0.
fn cum_extreme_grad(x: &Tensor, y: &Tensor, ct: &Tensor, axis: usize) -> Tensor {
    let hit = lax::convert_element_type(&x.eq(y), x.dtype());
    let starts = jvp_rules::run_starts(y, axis, false);
    let [count] = jvp_rules::segmented_sums([hit.clone()], &starts, axis, false);
    // A run ends where the next one starts (and at the last position).
    let ends = jvp_rules::shift(&starts, axis, 1, &Tensor::scalar(true), true);
    let [share] = jvp_rules::segmented_sums([ct / &count], &ends, axis, true);
    &hit * &share
}

/// `out[.., idx[.., i, ..], ..] += ct[.., i, ..]` along `axis` (`idx` and `ct` of one shape, in range):
/// the transpose of `take_along_axis`.
fn scatter_add_along(ct: &Tensor, idx: &Tensor, axis: usize) -> Tensor {
    // Move `axis` last so the other dims are scatter's batch dims, then move it back.
    let r = ct.ndim();
    let perm: Vec<usize> = (0..r).filter(|&d| d != axis).chain([axis]).collect();
    let (ct_t, idx_t) = (transpose_if_needed(ct, &perm), transpose_if_needed(idx, &perm));
    let s = lax::scatter(ScatterOp::Add, &zeros_like(&ct_t), &idx_t, &ct_t, r - 1, r - 1, IndexMode::Clip);
    transpose_if_needed(&s, &inverse(&perm))
}

/// Sort: every operand moved with the same permutation, so each cotangent is moved back with it. The
/// permutation is recomputed by sorting the keys with an `iota` (the sort is stable, so it is the
/// forward's).
fn sort(dimension: usize, num_keys: usize, ins: &[Tensor], cts: &[Option<Tensor>]) -> Vec<Option<Tensor>> {
    let mut operands = ins[..num_keys].to_vec();
    operands.push(lax::iota(DType::I32, ins[0].shape().dims(), dimension));
    let perm = lax::sort(&operands, dimension, num_keys).pop().expect("the iota operand");
    cts.iter().map(|ct| ct.as_ref().map(|ct| scatter_add_along(ct, &perm, dimension))).collect()
}

/// The cotangent of `x` in `dot_general(x, y)` (or, with `swap`, in `dot_general(y, x)`): `ct`
/// contracted with `y` over `y`'s free dims, batched over the batch dims, then permuted into `x`'s
/// layout (JAX's `_dot_general_transpose_lhs`). `contract`/`batch` are `(x's, y's)`.
fn dot_transpose(
    ct: &Tensor,
    x: &Tensor,
    y: &Tensor,
    (xc, yc): (&[usize], &[usize]),
    (xb, yb): (&[usize], &[usize]),
    swap: bool,
) -> Tensor {
    let free = |rank: usize, c: &[usize], b: &[usize]| -> Vec<usize> {
        (0..rank).filter(|d| !c.contains(d) && !b.contains(d)).collect()
    };
    let (x_kept, y_kept) = (free(x.ndim(), xc, xb), free(y.ndim(), yc, yb));
    let nb = xb.len();
    // The result's dims are batch, then lhs free, then rhs free.
    let y_first = if swap { nb } else { nb + x_kept.len() };
    let ans_y: Vec<usize> = (y_first..y_first + y_kept.len()).collect();
    let ans_batch: Vec<usize> = (0..nb).collect();
    // With a preferred element type `ct` may differ from the operands: compute in `ct`'s dtype.
    let y = lax::convert_element_type(y, ct.dtype());
    let d = lax::dot_general(ct, &y, (&ans_y, &y_kept), (&ans_batch, yb), None);
    // `d` is batch ++ x_kept ++ (x's contracted dims in the order of y's contracted dims).
    let mut by_y: Vec<(usize, usize)> = yc.iter().copied().zip(xc.iter().copied()).collect();
    by_y.sort_unstable();
    let layout: Vec<usize> =
        xb.iter().copied().chain(x_kept).chain(by_y.into_iter().map(|(_, xd)| xd)).collect();
    let dx = transpose_if_needed(&d, &inverse(&layout));
    lax::convert_element_type(&dx, x.dtype())
}

/// `ct` read where `gather(·, idx)` with these parameters would read, but 0 where the scatter of the
/// same parameters dropped the update (out of range for `FillOrDrop`, or an empty axis).
fn gather_ct(ct: &Tensor, idx: &Tensor, axis: usize, batch_dims: usize, mode: IndexMode) -> Tensor {
    let n = ct.shape()[axis];
    let read = lax::gather(ct, idx, axis, batch_dims, IndexMode::Clip);
    if n == 0 {
        return zeros_like(&read);
    }
    match mode {
        IndexMode::Clip => read,
        IndexMode::FillOrDrop => {
            let upper = idx.lt(&Tensor::scalar_like(n as f64, idx.dtype()));
            let in_range = match idx.dtype() {
                DType::I32 => upper.logical_and(&idx.ge(&Tensor::scalar(0i32))),
                DType::U32 | DType::F32 | DType::F64 | DType::Bool => upper,
            };
            let mask = lax::broadcast_in_dim(
                &in_range,
                read.shape().dims(),
                &index_dims(idx.ndim(), batch_dims, axis),
            );
            where_(&mask, &read, &zeros_like(&read))
        }
    }
}

/// Where each dim of the indices lands in gather's result: batch dims first, the rest at `axis`.
fn index_dims(idx_rank: usize, batch_dims: usize, axis: usize) -> Vec<usize> {
    (0..idx_rank).map(|j| if j < batch_dims { j } else { axis + j - batch_dims }).collect()
}

/// True for the elements of `updates` that `scatter` (set) actually wrote: each index entry scatters
/// its own id, and the ones whose id survives (the last of duplicates, in range) are the winners.
fn scatter_winners(
    x: &Tensor,
    idx: &Tensor,
    updates: &Tensor,
    axis: usize,
    batch_dims: usize,
    mode: IndexMode,
) -> Tensor {
    let ids = lax::reshape(&lax::iota(DType::I32, &[idx.size()], 0), idx.shape().dims());
    let ids = lax::broadcast_in_dim(&ids, updates.shape().dims(), &index_dims(idx.ndim(), batch_dims, axis));
    let empty = lax::broadcast_in_dim(&Tensor::scalar(-1i32), x.shape().dims(), &[]);
    let owner = lax::scatter(ScatterOp::Set, &empty, idx, &ids, axis, batch_dims, mode);
    // Dropped updates read the fill value (or, clamped, another owner): never their own id.
    lax::gather(&owner, idx, axis, batch_dims, mode).eq(&ids)
}
