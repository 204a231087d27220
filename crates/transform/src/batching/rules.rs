//! One batching rule per primitive: the outputs (with their batch dimensions) of a primitive applied
//! to batched operands, computed with ordinary primitives. At least one operand is batched (the
//! driver binds the primitive directly otherwise). Control flow and custom rules live in `control.rs`.

use super::{Batched, broadcast_batch, control, move_dim};
use kiln_ir::{DType, IndexMode, Prim, ReduceOp, ScatterOp};
use kiln_trace::{Tensor, lax};

/// The batching rule of `prim`; `n` is the batch size.
pub(crate) fn batch_rule(prim: &Prim, args: &[Batched], n: usize) -> Vec<Batched> {
    match prim {
        Prim::Unary(_)
        | Prim::ConvertElementType { .. }
        | Prim::BitcastConvertType { .. }
        | Prim::StopGradient => same_bdim(prim, &args[0]),
        Prim::Binary(_) | Prim::Compare(_) | Prim::Threefry2x32 => elementwise(prim, args, n, &[]),
        // A rank-0 predicate (select) or bound (clamp) may stay rank 0 when unbatched.
        Prim::Select => elementwise(prim, args, n, &[0]),
        Prim::Clamp => elementwise(prim, args, n, &[0, 2]),
        // No operands: never batched, bound as is.
        Prim::Iota { .. } => bind(prim, args, None),
        Prim::BroadcastInDim { shape, broadcast_dimensions } => {
            broadcast_in_dim(&args[0], shape.dims(), broadcast_dimensions, n)
        }
        Prim::Reshape { new_sizes } => {
            let dims: Vec<usize> = std::iter::once(n).chain(new_sizes.dims().iter().copied()).collect();
            vec![Batched::new(lax::reshape(&args[0].at(0, n), &dims), 0)]
        }
        Prim::Transpose { permutation } => {
            let d = bdim(&args[0]);
            let perm: Vec<usize> =
                std::iter::once(d).chain(permutation.iter().map(|&p| shift(p, d))).collect();
            vec![Batched::new(lax::transpose(&args[0].value, &perm), 0)]
        }
        Prim::Rev { dimensions } => {
            let d = bdim(&args[0]);
            vec![Batched::new(lax::rev(&args[0].value, &shift_all(dimensions, d)), d)]
        }
        Prim::Slice { start, limit, strides } => {
            let d = bdim(&args[0]);
            let ins = |v: &[usize], x: usize| {
                let mut v = v.to_vec();
                v.insert(d, x);
                v
            };
            let out = lax::slice(&args[0].value, &ins(start, 0), &ins(limit, n), &ins(strides, 1));
            vec![Batched::new(out, d)]
        }
        Prim::DynamicSlice { slice_sizes } => dynamic_slice(args, slice_sizes, n),
        Prim::DynamicUpdateSlice => dynamic_update_slice(args, n),
        Prim::Concatenate { dimension } => {
            let d = first_bdim(args);
            let xs: Vec<Tensor> = args.iter().map(|a| a.at(d, n)).collect();
            vec![Batched::new(lax::concatenate(&xs, shift(*dimension, d)), d)]
        }
        Prim::Pad { low, high, interior } => pad(args, low, high, interior, n),
        Prim::Reduce { op, axes } => {
            let d = bdim(&args[0]);
            let out = lax::reduce(*op, &args[0].value, &shift_all(axes, d));
            vec![Batched::new(out, d - axes.iter().filter(|&&a| a < d).count())]
        }
        Prim::ArgReduce { op, axis, index_dtype } => {
            let d = bdim(&args[0]);
            let out = lax::arg_reduce(*op, &args[0].value, shift(*axis, d), *index_dtype);
            vec![Batched::new(out, if *axis < d { d - 1 } else { d })]
        }
        Prim::Cumulative { op, axis, reverse } => {
            let d = bdim(&args[0]);
            vec![Batched::new(lax::cumulative(*op, &args[0].value, shift(*axis, d), *reverse), d)]
        }
        Prim::Sort { dimension, num_keys } => {
            // Operands have equal shapes: an unbatched one is broadcast (unavoidable).
            let d = first_bdim(args);
            let xs: Vec<Tensor> = args.iter().map(|a| a.at(d, n)).collect();
            lax::sort(&xs, shift(*dimension, d), *num_keys).into_iter().map(|t| Batched::new(t, d)).collect()
        }
        Prim::DotGeneral {
            lhs_contracting,
            rhs_contracting,
            lhs_batch,
            rhs_batch,
            preferred_element_type,
        } => dot_general(
            args,
            (lhs_contracting, rhs_contracting),
            (lhs_batch, rhs_batch),
            *preferred_element_type,
        ),
        Prim::Gather { axis, batch_dims, mode } => gather(args, *axis, *batch_dims, *mode, n),
        Prim::Scatter { op, axis, batch_dims, mode } => scatter(args, *op, *axis, *batch_dims, *mode, n),
        Prim::SegmentSum { num_segments } => segment_sum(args, *num_segments, n),
        Prim::CustomJvpCall { .. }
        | Prim::CustomVjpCall { .. }
        | Prim::Scan { .. }
        | Prim::WhileLoop { .. }
        | Prim::Cond { .. }
        | Prim::Call { .. }
        | Prim::Checkpoint { .. } => control::batch_rule(prim, args, n),
    }
}

/// Binds `prim` to the operands' tensors as they are; every output gets batch dimension `bdim`.
fn bind(prim: &Prim, args: &[Batched], bdim: Option<usize>) -> Vec<Batched> {
    let refs: Vec<&Tensor> = args.iter().map(|a| &a.value).collect();
    lax::bind(prim.clone(), &refs).into_iter().map(|value| Batched { value, bdim }).collect()
}

/// One-operand primitives that keep the shape: the batch dimension stays where it is.
fn same_bdim(prim: &Prim, x: &Batched) -> Vec<Batched> {
    bind(prim, std::slice::from_ref(x), x.bdim)
}

/// The batch dimension of an operand the rule knows is batched.
fn bdim(x: &Batched) -> usize {
    x.bdim.expect("batch rule: operand is batched")
}

/// The batch dimension of the first batched operand.
fn first_bdim(args: &[Batched]) -> usize {
    args.iter().find_map(|a| a.bdim).expect("batch rule: some operand is batched")
}

/// An element dimension's position in the batched value whose batch dimension is at `d`.
fn shift(a: usize, d: usize) -> usize {
    if a >= d { a + 1 } else { a }
}

fn shift_all(v: &[usize], d: usize) -> Vec<usize> {
    v.iter().map(|&a| shift(a, d)).collect()
}

/// Elementwise primitives (operands of equal shapes; those listed in `scalar_ok` may be rank 0): the
/// batched operands are moved to a common batch position (that of the first batched full-rank one, so
/// nothing moves when they agree) and the unbatched ones broadcast to the batched shape — except
/// unbatched rank-0 operands in `scalar_ok` positions, which the primitive accepts as they are.
fn elementwise(prim: &Prim, args: &[Batched], n: usize, scalar_ok: &[usize]) -> Vec<Batched> {
    let full = args.iter().map(Batched::elem_type).max_by_key(|t| t.rank()).expect("operands").shape;
    let r = full.rank();
    let d =
        args.iter().find(|a| a.is_batched() && a.elem_type().rank() == r).and_then(|a| a.bdim).unwrap_or(0);
    let mut bshape = full.dims().to_vec();
    bshape.insert(d, n);
    let aligned: Vec<Batched> = args
        .iter()
        .enumerate()
        .map(|(i, a)| {
            let er = a.elem_type().rank();
            let value = match a.bdim {
                Some(b) if er == r => move_dim(&a.value, b, d),
                // A batched scalar among arrays: `[n]` spread along the batch dimension.
                Some(_) => lax::broadcast_in_dim(&a.value, &bshape, &[d]),
                None if er < r && scalar_ok.contains(&i) => a.value.clone(),
                None if er < r => lax::broadcast_in_dim(&a.value, &bshape, &[]),
                None => broadcast_batch(&a.value, d, n),
            };
            Batched::unbatched(value)
        })
        .collect();
    bind(prim, &aligned, Some(d))
}

/// `broadcast_in_dim` with the batch dimension placed just after the result position of the operand
/// dimension before it, so `broadcast_dimensions` stays increasing and nothing moves.
fn broadcast_in_dim(x: &Batched, shape: &[usize], bd: &[usize], n: usize) -> Vec<Batched> {
    let d = bdim(x);
    let p = if d == 0 { 0 } else { bd[d - 1] + 1 };
    let mut out_shape = shape.to_vec();
    out_shape.insert(p, n);
    let mut dims: Vec<usize> = bd.iter().map(|&b| if b >= p { b + 1 } else { b }).collect();
    dims.insert(d, p);
    vec![Batched::new(lax::broadcast_in_dim(&x.value, &out_shape, &dims), p)]
}

/// `pad`: a batched operand with an unbatched padding value pads with the batch dimension unpadded;
/// a batched padding value selects between the padded operand and the per-lane value with a mask of
/// where the operand's elements landed.
fn pad(args: &[Batched], low: &[i64], high: &[i64], interior: &[usize], n: usize) -> Vec<Batched> {
    let (x, pv) = (&args[0], &args[1]);
    let with_batch = |d: usize| {
        let (mut l, mut h, mut i) = (low.to_vec(), high.to_vec(), interior.to_vec());
        l.insert(d, 0);
        h.insert(d, 0);
        i.insert(d, 0);
        (l, h, i)
    };
    if !pv.is_batched() {
        let d = bdim(x);
        let (l, h, i) = with_batch(d);
        return vec![Batched::new(lax::pad(&x.value, &pv.value, &l, &h, &i), d)];
    }
    let elem = x.elem_type();
    let zero = Tensor::scalar_like(0.0, elem.dtype);
    let padded = match x.bdim {
        Some(d) => {
            let (l, h, i) = with_batch(d);
            move_dim(&lax::pad(&x.value, &zero, &l, &h, &i), d, 0)
        }
        None => broadcast_batch(&lax::pad(&x.value, &zero, low, high, interior), 0, n),
    };
    let ones = lax::broadcast_in_dim(&Tensor::scalar(true), elem.shape.dims(), &[]);
    let mask = lax::pad(&ones, &Tensor::scalar(false), low, high, interior);
    let out_shape = padded.shape().dims().to_vec();
    let mask = broadcast_batch(&mask, 0, n);
    let fill = lax::broadcast_in_dim(&pv.value, &out_shape, &[0]);
    vec![Batched::new(lax::select(&mask, &padded, &fill), 0)]
}

/// `dot_general`: two batched operands gain a batch-dimension pair (result dim 0); an unbatched
/// operand is left alone and the other's batch dimension becomes a free dimension — so
/// `vmap(|x| x @ W)` is one `dot_general` with no copy of `W`. Where the batch dimension is a
/// batched rhs's only free dimension (`vmap(|x| W @ x)` for a vector `x`), the operands swap so the
/// result is `[B, ...]` rather than `[..., B]`.
fn dot_general(
    args: &[Batched],
    contracting: (&[usize], &[usize]),
    batch: (&[usize], &[usize]),
    pref: Option<DType>,
) -> Vec<Batched> {
    let (l, r) = (&args[0], &args[1]);
    let sh = |v: &[usize], d: Option<usize>| match d {
        Some(d) => shift_all(v, d),
        None => v.to_vec(),
    };
    let (lc, rc) = (sh(contracting.0, l.bdim), sh(contracting.1, r.bdim));
    let (mut lb, mut rb) = (sh(batch.0, l.bdim), sh(batch.1, r.bdim));
    let nb = batch.0.len();
    // Free dims of a (batched) operand before position `d`.
    let free_before =
        |c: &[usize], b: &[usize], d: usize| (0..d).filter(|i| !c.contains(i) && !b.contains(i)).count();
    let out_bdim = match (l.bdim, r.bdim) {
        (Some(ld), Some(rd)) => {
            lb.insert(0, ld);
            rb.insert(0, rd);
            0
        }
        (Some(ld), None) => nb + free_before(&lc, &lb, ld),
        (None, Some(rd)) => {
            let l_free = l.value.ndim() - lc.len() - lb.len();
            if l_free > 0 && r.value.ndim() - rc.len() - rb.len() == 1 {
                // The batch dimension is the rhs's only free one: the product with the operands
                // swapped puts it before the lhs's free dimensions, where a scan or a consumer
                // wants it, instead of last (a transpose of the whole result). Each element is the
                // same products summed over the same contracting indices in the same order (a
                // NaN times a NaN may yield the other's payload, which IEEE 754 leaves open).
                let out = lax::dot_general(&r.value, &l.value, (&rc, &lc), (&rb, &lb), pref);
                return vec![Batched::new(out, nb)];
            }
            nb + l_free + free_before(&rc, &rb, rd)
        }
        (None, None) => unreachable!("batch rule: some operand is batched"),
    };
    let out = lax::dot_general(&l.value, &r.value, (&lc, &rc), (&lb, &rb), pref);
    vec![Batched::new(out, out_bdim)]
}

/// `gather` stays one gather: a batched operand's batch dimension goes just after the shared
/// `batch_dims` (result position `batch_dims`); batched indices alone keep the operand unbatched
/// (result position `axis`); both batched become one more shared batch dimension.
fn gather(args: &[Batched], axis: usize, bd: usize, mode: IndexMode, n: usize) -> Vec<Batched> {
    let (x, idx) = (&args[0], &args[1]);
    match (x.bdim, idx.bdim) {
        (Some(_), Some(_)) => {
            let out = lax::gather(&x.at(0, n), &idx.at(0, n), axis + 1, bd + 1, mode);
            vec![Batched::new(out, 0)]
        }
        (Some(_), None) => vec![Batched::new(lax::gather(&x.at(bd, n), &idx.value, axis + 1, bd, mode), bd)],
        (None, Some(_)) => vec![Batched::new(lax::gather(&x.value, &idx.at(bd, n), axis, bd, mode), axis)],
        (None, None) => unreachable!("batch rule: some operand is batched"),
    }
}

/// `scatter`, the transpose of [`gather`]'s rule. The result is batched, so an unbatched operand is
/// broadcast; with unbatched indices they stay unbatched.
fn scatter(
    args: &[Batched],
    op: ScatterOp,
    axis: usize,
    bd: usize,
    mode: IndexMode,
    n: usize,
) -> Vec<Batched> {
    let (x, idx, upd) = (&args[0], &args[1], &args[2]);
    if idx.is_batched() {
        let out = lax::scatter(op, &x.at(0, n), &idx.at(0, n), &upd.at(0, n), axis + 1, bd + 1, mode);
        vec![Batched::new(out, 0)]
    } else {
        let out = lax::scatter(op, &x.at(bd, n), &idx.value, &upd.at(bd, n), axis + 1, bd, mode);
        vec![Batched::new(out, bd)]
    }
}

/// `segment_sum`: with unbatched ids, data batched behind the segmented dimension 0 stays one
/// `segment_sum` (the batch dimension rides along in each row); data batched at 0 (the usual case:
/// `vmap` puts batch dimensions first) becomes one `scatter_add` of `[n, E, ...]` into
/// `[n, num_segments, ...]` along axis 1, the ids shared (`batch_dims` 0) or per lane (`batch_dims`
/// 1), as JAX batches it. The result keeps its batch dimension leading: moving it behind the
/// segments instead would hand every consumer a `[segments, n]` layout whose contiguous axis is the
/// batch (mixed with the other values' leading batch, their kernels transpose, stop vectorizing,
/// and the ensemble ran 3x slower per member). Each lane's sums run in the lane's own order, so the
/// bits are the unbatched ones; the CPU backend runs this scatter as a kernel over the lanes with
/// the rows' producers fused in, and a scan of such steps splits by lanes (W2's batched spring
/// forces). Out-of-range ids are dropped (`FillOrDrop`), as `segment_sum` does.
fn segment_sum(args: &[Batched], num_segments: usize, n: usize) -> Vec<Batched> {
    let (data, ids) = (&args[0], &args[1]);
    if let (Some(d @ 1..), false) = (data.bdim, ids.is_batched()) {
        return vec![Batched::new(lax::segment_sum(&data.value, &ids.value, num_segments), d)];
    }
    let elem = data.elem_type();
    let mut dims = vec![n, num_segments];
    dims.extend_from_slice(&elem.shape.dims()[1..]);
    let zeros = lax::broadcast_in_dim(&Tensor::scalar_like(0.0, elem.dtype), &dims, &[]);
    let (idx, bd) = if ids.is_batched() { (ids.at(0, n), 1) } else { (ids.value.clone(), 0) };
    let out = lax::scatter(ScatterOp::Add, &zeros, &idx, &data.at(0, n), 1, bd, IndexMode::FillOrDrop);
    vec![Batched::new(out, 0)]
}

/// A batched start index `s` (`[n]` after moving) clamped to `[0, hi]` as `dynamic_slice` clamps.
fn clamped_start(s: &Batched, hi: usize, n: usize) -> Tensor {
    let s = s.at(0, n);
    let dt = s.dtype();
    lax::clamp(&Tensor::scalar_like(0.0, dt), &s, &Tensor::scalar_like(hi as f64, dt))
}

/// `dynamic_slice`: unbatched starts keep it one `dynamic_slice` (the batch dimension taken whole);
/// each dimension with a batched start becomes a `gather` of `clamp(start) + iota(size)` per lane.
fn dynamic_slice(args: &[Batched], sizes: &[usize], n: usize) -> Vec<Batched> {
    let (x, starts) = (&args[0], &args[1..]);
    let elem = x.elem_type();
    let start_dtype = starts.first().map_or(DType::I32, |s| s.value.dtype());
    let zero = Tensor::scalar_like(0.0, start_dtype);
    let mut cur = x.clone();
    // Dimensions with unbatched starts (batched-start ones taken whole here).
    if starts.iter().any(|s| !s.is_batched()) || !starts.iter().any(Batched::is_batched) {
        let mut st: Vec<Tensor> = Vec::new();
        let mut sz: Vec<usize> = Vec::new();
        for (k, s) in starts.iter().enumerate() {
            if s.is_batched() {
                st.push(zero.clone());
                sz.push(elem.shape.dims()[k]);
            } else {
                st.push(s.value.clone());
                sz.push(sizes[k]);
            }
        }
        if let Some(d) = cur.bdim {
            st.insert(d, zero.clone());
            sz.insert(d, n);
        }
        cur = Batched { value: lax::dynamic_slice(&cur.value, &st, &sz), bdim: cur.bdim };
    }
    for (k, s) in starts.iter().enumerate().filter(|(_, s)| s.is_batched()) {
        let size = sizes[k];
        let sc = clamped_start(s, elem.shape.dims()[k] - size, n);
        let dt = sc.dtype();
        let idx = &lax::iota(dt, &[n, size], 1) + &lax::broadcast_in_dim(&sc, &[n, size], &[0]);
        cur = match cur.bdim {
            Some(d) => {
                Batched::new(lax::gather(&move_dim(&cur.value, d, 0), &idx, k + 1, 1, IndexMode::Clip), 0)
            }
            None => Batched::new(lax::gather(&cur.value, &idx, k, 0, IndexMode::Clip), k),
        };
    }
    vec![cur]
}

/// `dynamic_update_slice`: unbatched starts keep it one `dynamic_update_slice` on batched operand
/// and update; batched starts place the update per lane with a `gather` per dimension (position in
/// the operand → position in the update) and `select` it where it lands.
fn dynamic_update_slice(args: &[Batched], n: usize) -> Vec<Batched> {
    let (x, upd, starts) = (&args[0], &args[1], &args[2..]);
    if !starts.iter().any(Batched::is_batched) {
        let d = x.bdim.or(upd.bdim).expect("batch rule: some operand is batched");
        let dt = starts.first().map_or(DType::I32, |s| s.value.dtype());
        let mut st: Vec<Tensor> = starts.iter().map(|s| s.value.clone()).collect();
        st.insert(d, Tensor::scalar_like(0.0, dt));
        let out = lax::dynamic_update_slice(&x.at(d, n), &upd.at(d, n), &st);
        return vec![Batched::new(out, d)];
    }
    let xs = x.elem_type().shape.dims().to_vec();
    let us = upd.elem_type().shape.dims().to_vec();
    let mut bshape = vec![n];
    bshape.extend_from_slice(&xs);
    let xb = x.at(0, n);
    let mut full = upd.at(0, n);
    let mut mask: Option<Tensor> = None;
    for k in 0..xs.len() {
        if us[k] == xs[k] {
            continue; // the start clamps to 0: the update covers the dimension
        }
        let sc = lax::convert_element_type(&clamped_start(&starts[k], xs[k] - us[k], n), DType::I32);
        let j = &lax::iota(DType::I32, &[n, xs[k]], 1) - &lax::broadcast_in_dim(&sc, &[n, xs[k]], &[0]);
        full = lax::gather(&full, &j, k + 1, 1, IndexMode::Clip);
        let inside = j.ge(&Tensor::scalar(0i32)).logical_and(&j.lt(&Tensor::scalar(us[k] as i32)));
        let m = lax::broadcast_in_dim(&inside, &bshape, &[0, k + 1]);
        mask = Some(match mask {
            Some(acc) => acc.logical_and(&m),
            None => m,
        });
    }
    let out = match mask {
        Some(m) => lax::select(&m, &full, &xb),
        None => full,
    };
    vec![Batched::new(out, 0)]
}

/// `reduce_max` of a bool `[n]` predicate: true while any lane is.
pub(super) fn any(pred: &Tensor) -> Tensor {
    let axes: Vec<usize> = (0..pred.ndim()).collect();
    lax::reduce(ReduceOp::Max, pred, &axes)
}
