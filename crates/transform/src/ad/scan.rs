//! AD of `scan`: JVP as a scan over (primal, tangent) carries; reverse mode as a reverse scan over
//! stored residuals, with checkpointing by default (DESIGN §5).
//!
//! Reverse mode never unrolls: the step's VJP is traced once and split by [`super::partition`] into
//! `fwd(consts, carry, x) -> (carry', residuals)` and `bwd(.., residuals, ct_carry', ct_y) ->
//! (ct_consts, ct_carry, ct_x)`. With [`Checkpoint::StoreAll`] a forward scan of `fwd` stacks every
//! step's residuals and a reverse scan of `bwd` consumes them. With [`Checkpoint::Every`] /
//! [`Checkpoint::Auto`] the forward pass only saves the carry at the start of each segment of `k`
//! steps; the backward pass is a reverse scan over segments that recomputes one segment's residuals
//! from its saved carry and runs the StoreAll backward on it. Either way the IR's size does not grow
//! with the number of steps.

use super::partition::{Partition, partition};
use super::{instantiate, is_differentiable, jvp_replay, vjp_replay_active, zeros_of};
use kiln_ir::{Function, Prim, TensorType};
use kiln_trace::{Tensor, lax};
use std::cell::Cell;

/// How the reverse mode of a `scan` keeps what the backward pass needs (DESIGN §5).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Checkpoint {
    /// [`Checkpoint::StoreAll`] when every step's residuals take at most [`AUTO_STORE_ALL_BYTES`] in
    /// all (JAX stores them; no recomputation), otherwise [`Checkpoint::Sqrt`]. The default.
    #[default]
    Auto,
    /// Save the carry every ⌈√T⌉ steps and recompute the steps between (memory ∝ √T·state).
    Sqrt,
    /// Save the carry every `k` steps.
    Every(usize),
    /// Save every step's residuals.
    StoreAll,
}

/// The residual memory up to which [`Checkpoint::Auto`] stores every step (1.5 GiB), as JAX does:
/// W1's gradient at N = 10⁶, T = 100 (400 MB of f32 states) and a million-agent epidemic over 56
/// days (24 B per agent and day after rematerialization, 1.34 GB) are stored; longer or larger
/// scans are checkpointed (storing would cost more memory than recomputing one forward costs time).
pub const AUTO_STORE_ALL_BYTES: usize = 3 << 29;

thread_local! {
    static POLICY: Cell<Checkpoint> = const { Cell::new(Checkpoint::Auto) };
}

/// Runs `f` with `policy` as the checkpoint policy of every `scan` differentiated in reverse mode
/// while it runs (on this thread), then restores the previous policy (also if `f` panics).
///
/// The policy is read when the reverse-mode transform runs, i.e. while `grad`/`vjp` is applied
/// (`kiln::with_checkpoint(Checkpoint::StoreAll, || kiln::grad(f)(x))`), not when `f` is traced.
///
/// # Panics
/// For `Checkpoint::Every(0)`, at the caller's line.
#[track_caller]
pub fn with_checkpoint<R>(policy: Checkpoint, f: impl FnOnce() -> R) -> R {
    assert!(policy != Checkpoint::Every(0), "kiln: Checkpoint::Every(k) needs k >= 1");
    struct Restore(Checkpoint);
    impl Drop for Restore {
        fn drop(&mut self) {
            POLICY.set(self.0);
        }
    }
    let _restore = Restore(POLICY.replace(policy));
    f()
}

/// The checkpoint policy in effect on this thread (see [`with_checkpoint`]; `Auto` by default).
pub fn checkpoint_policy() -> Checkpoint {
    POLICY.get()
}

/// A `scan` equation's parameters.
struct Spec<'a> {
    length: usize,
    reverse: bool,
    nc: usize,
    nk: usize,
    nx: usize,
    body: &'a Function,
}

impl<'a> Spec<'a> {
    fn of(prim: &'a Prim, n_operands: usize) -> Spec<'a> {
        let Prim::Scan { length, reverse, num_consts, num_carry, body } = prim else {
            unreachable!("scan AD called on {}", prim.name())
        };
        Spec {
            length: *length,
            reverse: *reverse,
            nc: *num_consts,
            nk: *num_carry,
            nx: n_operands - num_consts - num_carry,
            body,
        }
    }

    fn ny(&self) -> usize {
        self.body.outputs.len() - self.nk
    }
}

/// Binds a `scan` (no checks beyond the shape rule's).
fn bind_scan(
    length: usize,
    reverse: bool,
    nc: usize,
    nk: usize,
    body: Function,
    ops: &[Tensor],
) -> Vec<Tensor> {
    let refs: Vec<&Tensor> = ops.iter().collect();
    lax::bind(Prim::Scan { length, reverse, num_consts: nc, num_carry: nk, body: Box::new(body) }, &refs)
}

/// `ty` with a leading axis of size `n`.
fn stacked(ty: &TensorType, n: usize) -> TensorType {
    TensorType::new(ty.dtype, [&[n], ty.shape.dims()].concat())
}

/// Rows `lo..hi` of `x` along its leading axis.
fn rows(x: &Tensor, lo: usize, hi: usize) -> Tensor {
    let dims = x.shape().dims().to_vec();
    if lo == 0 && hi == dims[0] {
        return x.clone();
    }
    let mut start = vec![0; dims.len()];
    let mut limit = dims.clone();
    start[0] = lo;
    limit[0] = hi;
    lax::slice(x, &start, &limit, &vec![1; dims.len()])
}

/// `x` `[n·k, rest..]` as `[n, k, rest..]`.
fn split_leading(x: &Tensor, n: usize, k: usize) -> Tensor {
    let dims = x.shape().dims().to_vec();
    lax::reshape(x, &[&[n, k], &dims[1..]].concat())
}

/// `x` `[n, k, rest..]` as `[n·k, rest..]`.
fn merge_leading(x: &Tensor) -> Tensor {
    let dims = x.shape().dims().to_vec();
    lax::reshape(x, &[&[dims[0] * dims[1]], &dims[2..]].concat())
}

fn rev0(x: &Tensor) -> Tensor {
    lax::rev(x, &[0])
}

fn pick<T: Clone>(xs: &[T], idx: &[usize]) -> Vec<T> {
    idx.iter().map(|&i| xs[i].clone()).collect()
}

fn float_indices(types: &[TensorType]) -> Vec<usize> {
    (0..types.len()).filter(|&i| is_differentiable(types[i].dtype)).collect()
}

/// The JVP of a `scan`: a scan over `consts ++ dconsts, carry ++ dcarry, xs ++ dxs` whose body is
/// the body's JVP. Only float operands with a nonzero tangent get a tangent slot, plus the carries
/// that a nonzero tangent reaches (a fixed point over the body).
pub(super) fn jvp(
    prim: &Prim,
    primals: &[Tensor],
    tangents: &[Option<Tensor>],
) -> (Vec<Tensor>, Vec<Option<Tensor>>) {
    let s = Spec::of(prim, primals.len());
    let (nc, nk) = (s.nc, s.nk);
    let n = primals.len();
    let mut slot: Vec<bool> =
        (0..n).map(|i| is_differentiable(primals[i].dtype()) && tangents[i].is_some()).collect();
    let (body, dys) = loop {
        let (body, dcarry, dys) = jvp_body(&s, &slot);
        let mut changed = false;
        for (j, nz) in dcarry.into_iter().enumerate() {
            if nz && !slot[nc + j] {
                slot[nc + j] = true;
                changed = true;
            }
        }
        if !changed {
            break (body, dys);
        }
    };
    // Operands: each group's primals, then the tangents of its slotted members.
    let ranges = [0..nc, nc..nc + nk, nc + nk..n];
    let mut ops = Vec::new();
    let mut counts = Vec::new();
    for r in &ranges {
        ops.extend(primals[r.clone()].iter().cloned());
        let before = ops.len();
        for i in r.clone().filter(|&i| slot[i]) {
            ops.push(instantiate(tangents[i].clone(), &primals[i].ty()));
        }
        counts.push(r.len() + ops.len() - before);
    }
    let mut outs = bind_scan(s.length, s.reverse, counts[0], counts[1], body, &ops).into_iter();
    let mut p_out: Vec<Tensor> = outs.by_ref().take(nk).collect();
    let mut t_out: Vec<Option<Tensor>> =
        (0..nk).map(|j| slot[nc + j].then(|| outs.next().unwrap())).collect();
    p_out.extend(outs.by_ref().take(s.ny()));
    t_out.extend(dys.iter().map(|&nz| nz.then(|| outs.next().unwrap())));
    (p_out, t_out)
}

/// The scan body's JVP for the given tangent slots, and which carry and y tangents come out
/// nonzero.
fn jvp_body(s: &Spec, slot: &[bool]) -> (Function, Vec<bool>, Vec<bool>) {
    let pt = s.body.param_types();
    let n = pt.len();
    let ranges = [0..s.nc, s.nc..s.nc + s.nk, s.nc + s.nk..n];
    let mut types = Vec::new();
    for r in &ranges {
        types.extend(pt[r.clone()].iter().cloned());
        types.extend(r.clone().filter(|&i| slot[i]).map(|i| pt[i].clone()));
    }
    let out_types = s.body.output_types();
    let mut nonzero = vec![false; out_types.len()];
    let f = crate::trace_function(&types, |args| {
        let mut args = args.into_iter();
        let mut primals = Vec::with_capacity(n);
        let mut tangents = vec![None; n];
        for r in &ranges {
            primals.extend(args.by_ref().take(r.len()));
            for i in r.clone().filter(|&i| slot[i]) {
                tangents[i] = args.next();
            }
        }
        let (outs, touts) = jvp_replay(s.body, &primals, &tangents);
        for (nz, t) in nonzero.iter_mut().zip(&touts) {
            *nz = t.is_some();
        }
        let (carry, ys) = outs.split_at(s.nk);
        let (dcarry, dys) = touts.split_at(s.nk);
        let mut res: Vec<Tensor> = carry.to_vec();
        // A slotted carry's tangent goes around the loop, so it is always an output.
        for (j, t) in dcarry.iter().enumerate().filter(|(j, _)| slot[s.nc + j]) {
            res.push(instantiate(t.clone(), &out_types[j]));
        }
        res.extend(ys.iter().cloned());
        res.extend(dys.iter().flatten().cloned());
        res
    });
    let dys = nonzero.split_off(s.nk);
    (f, nonzero, dys)
}

/// The VJP of a `scan` whose forward pass was not run by [`forward`]: runs it now (every float
/// operand treated as active), then [`backward`]. `vjp_replay` uses the pair directly, so the
/// primal outputs come out of the same forward scan that saves the residuals.
pub(super) fn vjp(
    prim: &Prim,
    ins: &[Tensor],
    _outs: &[Tensor],
    cts: &[Option<Tensor>],
) -> Vec<Option<Tensor>> {
    let active = vec![true; ins.len()];
    let wanted: Vec<bool> = cts.iter().map(Option::is_some).collect();
    let (_, saved) = forward(prim, ins, &active, &wanted);
    backward(prim, ins, saved, cts)
}

/// What the forward pass of a differentiated `scan` keeps for its backward pass.
pub(super) struct Saved {
    /// The step's VJP, for the operands that are active.
    step: StepVjp,
    /// The ys given cotangent slots (float, active), indices into the body's ys.
    sel_ys: Vec<usize>,
    how: SavedHow,
}

enum SavedHow {
    /// No steps.
    Empty,
    /// Every step's residuals, stacked.
    StoreAll(Vec<Tensor>),
    /// Segments of `k` steps: the carry at each segment's start (stacked), and the remainder
    /// segment's stacked residuals (when `k` does not divide the length).
    Segmented { k: usize, starts: Vec<Tensor>, rem: Option<Vec<Tensor>> },
}

/// The forward pass of a `scan` under reverse mode, for operands flagged `active` (those that
/// depend on what is differentiated) and outputs flagged `wanted` (those a cotangent may reach; the
/// other ys get no cotangent slot): the primal outputs (final carry ++ ys) and what the backward
/// pass needs, from ONE scan (the current [`Checkpoint`] policy chooses stored residuals or
/// segment-start carries).
pub(super) fn forward(prim: &Prim, ins: &[Tensor], active: &[bool], wanted: &[bool]) -> (Vec<Tensor>, Saved) {
    let s = Spec::of(prim, ins.len());
    let (nc, nk) = (s.nc, s.nk);
    // A carry is active if its initial value is, or the body makes it depend on an active operand.
    let mut act = active.to_vec();
    let outs_active = loop {
        let on = super::activity(s.body, &act);
        let o: Vec<bool> = s.body.outputs.iter().map(|v| on[v.index()]).collect();
        let mut changed = false;
        for j in 0..nk {
            if o[j] && !act[nc + j] {
                act[nc + j] = true;
                changed = true;
            }
        }
        if !changed {
            break o;
        }
    };
    let sel_ys: Vec<usize> = (0..s.ny()).filter(|&i| outs_active[nk + i] && wanted[nk + i]).collect();
    let step = StepVjp::new(&s, &sel_ys, &act);
    let (consts, rest) = ins.split_at(nc);
    let (init, xs) = rest.split_at(nk);
    let (outs, how) = if s.length == 0 {
        let ys = s.body.output_types()[nk..].iter().map(|t| zeros_of(&stacked(t, 0))).collect::<Vec<_>>();
        (init.iter().cloned().chain(ys).collect(), SavedHow::Empty)
    } else {
        match checkpoint_policy() {
            Checkpoint::StoreAll => step.store_all_forward(consts, init, xs, s.length, s.reverse),
            Checkpoint::Every(k) => step.segmented_forward(consts, init, xs, k),
            Checkpoint::Auto
                if step.stored_bytes_per_step.saturating_mul(s.length) <= AUTO_STORE_ALL_BYTES =>
            {
                step.store_all_forward(consts, init, xs, s.length, s.reverse)
            }
            Checkpoint::Auto | Checkpoint::Sqrt => {
                let k = (1..=s.length).find(|k| k * k >= s.length).expect("length >= 1");
                step.segmented_forward(consts, init, xs, k)
            }
        }
    };
    (outs, Saved { step, sel_ys, how })
}

/// The backward pass of a `scan` whose forward pass [`forward`] ran: the operands' cotangents
/// (`None` for integer, bool and inactive operands) from the outputs' (`None` = zero).
pub(super) fn backward(
    prim: &Prim,
    ins: &[Tensor],
    saved: Saved,
    cts: &[Option<Tensor>],
) -> Vec<Option<Tensor>> {
    let s = Spec::of(prim, ins.len());
    let (nc, nk) = (s.nc, s.nk);
    let (consts, rest) = ins.split_at(nc);
    let (init, xs) = rest.split_at(nk);
    let (ct_final, ct_ys) = cts.split_at(nk);
    let Saved { step, sel_ys, how } = saved;
    let ct_carry: Vec<Tensor> =
        step.fl_carry.iter().map(|&j| instantiate(ct_final[j].clone(), &init[j].ty())).collect();
    let acc: Vec<Tensor> = step.fl_consts.iter().map(|&i| zeros_of(&consts[i].ty())).collect();
    let ct_ys: Vec<Tensor> =
        sel_ys.iter().map(|&i| instantiate(ct_ys[i].clone(), &stacked(&step.y_types[i], s.length))).collect();
    let (ct_init, ct_consts, ct_xs) = match how {
        SavedHow::Empty => {
            // The final carry is `init`; there are no steps to send cotangents to consts or xs.
            let mut out: Vec<Option<Tensor>> = vec![None; nc];
            out.extend(step.fl_carry_mask().iter().zip(ct_final).map(|(&f, c)| c.clone().filter(|_| f)));
            out.extend(std::iter::repeat_n(None, s.nx));
            return out;
        }
        SavedHow::StoreAll(res) => {
            step.store_all_backward(consts, xs, &res, ct_carry, &ct_ys, acc, s.length, s.reverse)
        }
        SavedHow::Segmented { k, starts, rem } => {
            step.segmented_backward(consts, xs, starts, rem, ct_carry, &ct_ys, acc, k)
        }
    };
    let mut out: Vec<Option<Tensor>> = vec![None; ins.len()];
    for (i, c) in step.fl_consts.iter().zip(ct_consts) {
        out[*i] = Some(c);
    }
    for (j, c) in step.fl_carry.iter().zip(ct_init) {
        out[nc + j] = Some(c);
    }
    for (i, c) in step.fl_xs.iter().zip(ct_xs) {
        out[nc + nk + i] = Some(c);
    }
    out
}

/// A scan step's VJP, partitioned, with the scan bodies built from it.
struct StepVjp {
    /// Operand counts: consts, carries, xs.
    nc: usize,
    nk: usize,
    nx: usize,
    /// The scan's length and direction.
    length: usize,
    reverse: bool,
    /// The step (`(consts, carry, x) -> (carry', y)`), for segments' forward passes.
    body: Function,
    /// Float, active consts / carries / xs: the ones given cotangents.
    fl_consts: Vec<usize>,
    fl_carry: Vec<usize>,
    fl_xs: Vec<usize>,
    /// Slice types of xs and ys, types of consts and carries.
    const_types: Vec<TensorType>,
    carry_types: Vec<TensorType>,
    x_types: Vec<TensorType>,
    y_types: Vec<TensorType>,
    /// Types of the selected ys' cotangents (one step).
    ct_y_types: Vec<TensorType>,
    /// The xs the backward step reads.
    used_xs: Vec<usize>,
    /// `(consts, carry, x) -> (carry', y.., residuals.., used carries..)`.
    fwd_body: Function,
    /// Bytes of one step's residuals and used carries: what store-all keeps per step.
    stored_bytes_per_step: usize,
    /// `(consts, ct_carry, acc, residuals.., used carries.., used xs.., ct_ys..) -> (ct_carry, acc, ct_x)`.
    bwd_body: Function,
}

impl StepVjp {
    /// `active`: per operand (consts, carries, xs), whether it depends on what is differentiated
    /// (carries closed over the loop); `sel_ys`: the ys that get cotangent slots.
    fn new(s: &Spec<'_>, sel_ys: &[usize], active: &[bool]) -> StepVjp {
        let (nc, nk, nx) = (s.nc, s.nk, s.nx);
        let pt = s.body.param_types();
        let ot = s.body.output_types();
        let const_types = pt[..nc].to_vec();
        let carry_types = pt[nc..nc + nk].to_vec();
        let x_types = pt[nc + nk..].to_vec();
        let y_types = ot[nk..].to_vec();
        let fl = |base: usize, types: &[TensorType]| -> Vec<usize> {
            float_indices(types).into_iter().filter(|&i| active[base + i]).collect()
        };
        let (fl_consts, fl_carry, fl_xs) = (fl(0, &const_types), fl(nc, &carry_types), fl(nc + nk, &x_types));
        let ct_y_types = pick(&y_types, sel_ys);
        let ny = y_types.len();

        // g(consts, carry, x, ct_carry' (float), ct_y (selected))
        //   -> (carry', y.., ct_consts, ct_carry, ct_x) for the active float operands.
        let g_types: Vec<TensorType> =
            pt.iter().chain(&pick(&carry_types, &fl_carry)).chain(&ct_y_types).cloned().collect();
        let g = crate::trace_function(&g_types, |args| {
            let (primals, ct_args) = args.split_at(nc + nk + nx);
            let mut cts: Vec<Option<Tensor>> = vec![None; ot.len()];
            for (&o, c) in
                fl_carry.iter().chain(&sel_ys.iter().map(|i| nk + i).collect::<Vec<_>>()).zip(ct_args)
            {
                cts[o] = Some(c.clone());
            }
            let (outs, cts_in) = vjp_replay_active(s.body, primals, &cts, active);
            let mut res: Vec<Tensor> = outs;
            let groups = [(0, &fl_consts), (nc, &fl_carry), (nc + nk, &fl_xs)];
            for (base, idx) in groups {
                res.extend(idx.iter().map(|&i| instantiate(cts_in[base + i].clone(), &pt[base + i])));
            }
            res
        });
        let invariant: Vec<bool> = (0..nc + nk + nx).map(|i| i < nc).collect();
        let Partition { fwd, bwd, residual_types, primal_used_by_bwd } = partition(&g, &invariant, nk + ny);
        let used_carry: Vec<usize> = (0..nk).filter(|&j| primal_used_by_bwd[nc + j]).collect();
        let used_xs: Vec<usize> = (0..nx).filter(|&i| primal_used_by_bwd[nc + nk + i]).collect();

        let fwd_types: Vec<TensorType> = pt.clone();
        let fwd_body = crate::trace_function(&fwd_types, |args| {
            let mut out = crate::replay(&fwd, &args);
            out.extend(used_carry.iter().map(|&j| args[nc + j].clone()));
            out
        });

        let nr = residual_types.len();
        let stored_bytes_per_step = residual_types
            .iter()
            .chain(&pick(&carry_types, &used_carry))
            .map(|t| t.shape.size() * t.dtype.size_bytes())
            .sum();
        let bwd_types: Vec<TensorType> = const_types
            .iter()
            .chain(&pick(&carry_types, &fl_carry))
            .chain(&pick(&const_types, &fl_consts))
            .chain(&residual_types)
            .chain(&pick(&carry_types, &used_carry))
            .chain(&pick(&x_types, &used_xs))
            .chain(&ct_y_types)
            .cloned()
            .collect();
        let bwd_body = crate::trace_function(&bwd_types, |args| {
            let mut a = args.into_iter();
            let mut take = |n: usize| a.by_ref().take(n).collect::<Vec<Tensor>>();
            let consts = take(nc);
            let ct_carry = take(fl_carry.len());
            let acc = take(fl_consts.len());
            let res = take(nr);
            let carry_u = take(used_carry.len());
            let xs_u = take(used_xs.len());
            let ct_y = take(sel_ys.len());
            // Parameters the backward step does not read get zeros (dead code in its IR).
            let mut carry: Vec<Tensor> = carry_types.iter().map(zeros_of).collect();
            for (&j, c) in used_carry.iter().zip(carry_u) {
                carry[j] = c;
            }
            let mut x: Vec<Tensor> = x_types.iter().map(zeros_of).collect();
            for (&i, v) in used_xs.iter().zip(xs_u) {
                x[i] = v;
            }
            let bwd_args: Vec<Tensor> =
                consts.into_iter().chain(carry).chain(x).chain(res).chain(ct_carry).chain(ct_y).collect();
            let out = crate::replay(&bwd, &bwd_args);
            let (ct_consts, rest) = out.split_at(fl_consts.len());
            let (ct_carry, ct_x) = rest.split_at(fl_carry.len());
            let mut r: Vec<Tensor> = ct_carry.to_vec();
            r.extend(acc.iter().zip(ct_consts).map(|(a, c)| a + c));
            r.extend(ct_x.iter().cloned());
            r
        });
        StepVjp {
            nc,
            nk,
            nx,
            length: s.length,
            reverse: s.reverse,
            body: s.body.clone(),
            fl_consts,
            fl_carry,
            fl_xs,
            const_types,
            carry_types,
            x_types,
            y_types,
            ct_y_types,
            used_xs,
            fwd_body,
            stored_bytes_per_step,
            bwd_body,
        }
    }

    /// Per carry: whether it gets a cotangent.
    fn fl_carry_mask(&self) -> Vec<bool> {
        (0..self.nk).map(|j| self.fl_carry.contains(&j)).collect()
    }

    /// Store-all forward pass over `length` steps: one scan of the forward step giving the final
    /// carry, the ys and every step's residuals (stacked).
    fn store_all_forward(
        &self,
        consts: &[Tensor],
        init: &[Tensor],
        xs: &[Tensor],
        length: usize,
        reverse: bool,
    ) -> (Vec<Tensor>, SavedHow) {
        let (outs, res) = self.store_all_scan(consts, init, xs, length, reverse);
        (outs, SavedHow::StoreAll(res))
    }

    /// The forward scan of store-all: `(final carry ++ ys, stacked residuals)`.
    fn store_all_scan(
        &self,
        consts: &[Tensor],
        init: &[Tensor],
        xs: &[Tensor],
        length: usize,
        reverse: bool,
    ) -> (Vec<Tensor>, Vec<Tensor>) {
        let (nc, nk) = (self.nc, self.nk);
        let ops: Vec<Tensor> = consts.iter().chain(init).chain(xs).cloned().collect();
        let mut outs = bind_scan(length, reverse, nc, nk, self.fwd_body.clone(), &ops);
        let res = outs.split_off(nk + self.y_types.len());
        (outs, res)
    }

    /// Checkpointed forward pass with segments of `k` steps (see the module docs): an outer scan
    /// over segments, each an inner scan of `k` steps of the body saving the carry at the segment's
    /// start, then the remainder segment (last in time) with its residuals stored. A reverse scan
    /// runs forward over reversed xs, and its ys are reversed back.
    fn segmented_forward(
        &self,
        consts: &[Tensor],
        init: &[Tensor],
        xs: &[Tensor],
        k: usize,
    ) -> (Vec<Tensor>, SavedHow) {
        let (nc, nk) = (self.nc, self.nk);
        let t = self.length;
        let k = k.clamp(1, t);
        let (nseg, rem) = (t / k, t % k);
        let main = nseg * k;
        let reverse = self.reverse;
        let flip =
            |v: &[Tensor]| -> Vec<Tensor> { if reverse { v.iter().map(rev0).collect() } else { v.to_vec() } };
        let xs = flip(xs);
        let seg = |v: &[Tensor]| -> Vec<Tensor> {
            v.iter().map(|x| split_leading(&rows(x, 0, main), nseg, k)).collect()
        };
        let tail = |v: &[Tensor]| -> Vec<Tensor> { v.iter().map(|x| rows(x, main, t)).collect() };
        let ny = self.y_types.len();
        let (mid, starts, ys_main): (Vec<Tensor>, Vec<Tensor>, Vec<Tensor>) = if nseg > 0 {
            let ops: Vec<Tensor> = consts.iter().chain(init).cloned().chain(seg(&xs)).collect();
            let mut o = bind_scan(nseg, false, nc, nk, self.segment_forward(k), &ops);
            let ys = o.split_off(nk + nk).iter().map(merge_leading).collect();
            let starts = o.split_off(nk);
            (o, starts, ys)
        } else {
            (init.to_vec(), Vec::new(), Vec::new())
        };
        let (last, ys_rem, rem_saved) = if rem > 0 {
            let ops: Vec<Tensor> = consts.iter().chain(&mid).cloned().chain(tail(&xs)).collect();
            let mut o = bind_scan(rem, false, nc, nk, self.fwd_body.clone(), &ops);
            let res = o.split_off(nk + ny);
            let ys = o.split_off(nk);
            (o, ys, Some(res))
        } else {
            (mid, Vec::new(), None)
        };
        let ys: Vec<Tensor> = (0..ny)
            .map(|i| match (ys_main.get(i), ys_rem.get(i)) {
                (Some(m), Some(r)) => lax::concatenate(&[m.clone(), r.clone()], 0),
                (Some(m), None) => m.clone(),
                (None, Some(r)) => r.clone(),
                (None, None) => unreachable!("length >= 1"),
            })
            .collect();
        let outs = last.into_iter().chain(flip(&ys)).collect();
        (outs, SavedHow::Segmented { k, starts, rem: rem_saved })
    }

    /// Store-all backward pass over `length` steps from the stacked residuals `res`: a scan in the
    /// opposite direction carrying the carry cotangents and accumulating the consts' ones.
    /// Returns `(ct_init (float carries), ct_consts (float consts), ct_xs (float xs))`.
    #[allow(clippy::too_many_arguments)]
    fn store_all_backward(
        &self,
        consts: &[Tensor],
        xs: &[Tensor],
        res: &[Tensor],
        ct_carry: Vec<Tensor>,
        ct_ys: &[Tensor],
        acc: Vec<Tensor>,
        length: usize,
        reverse: bool,
    ) -> (Vec<Tensor>, Vec<Tensor>, Vec<Tensor>) {
        let nc = self.nc;
        let ops: Vec<Tensor> = consts
            .iter()
            .cloned()
            .chain(ct_carry)
            .chain(acc)
            .chain(res.iter().cloned())
            .chain(pick(xs, &self.used_xs))
            .chain(ct_ys.iter().cloned())
            .collect();
        let (nkf, ncf) = (self.fl_carry.len(), self.fl_consts.len());
        let mut out = bind_scan(length, !reverse, nc, nkf + ncf, self.bwd_body.clone(), &ops);
        let ct_xs = out.split_off(nkf + ncf);
        let acc = out.split_off(nkf);
        (out, acc, ct_xs)
    }

    /// Checkpointed backward pass (see [`StepVjp::segmented_forward`]): the remainder segment from
    /// its stored residuals, then a reverse scan over the segments that recomputes each one's
    /// residuals from its saved start carry.
    #[allow(clippy::too_many_arguments)]
    fn segmented_backward(
        &self,
        consts: &[Tensor],
        xs: &[Tensor],
        starts: Vec<Tensor>,
        rem: Option<Vec<Tensor>>,
        ct_carry: Vec<Tensor>,
        ct_ys: &[Tensor],
        acc: Vec<Tensor>,
        k: usize,
    ) -> (Vec<Tensor>, Vec<Tensor>, Vec<Tensor>) {
        let nc = self.nc;
        let t = self.length;
        let k = k.clamp(1, t);
        let (nseg, main) = (t / k, t / k * k);
        let reverse = self.reverse;
        let flip =
            |v: &[Tensor]| -> Vec<Tensor> { if reverse { v.iter().map(rev0).collect() } else { v.to_vec() } };
        let (xs, ct_ys) = (flip(xs), flip(ct_ys));
        let seg = |v: &[Tensor]| -> Vec<Tensor> {
            v.iter().map(|x| split_leading(&rows(x, 0, main), nseg, k)).collect()
        };
        let tail = |v: &[Tensor]| -> Vec<Tensor> { v.iter().map(|x| rows(x, main, t)).collect() };

        // The remainder segment (last in time) first, then the segments in reverse.
        let (mut ct_carry, mut acc) = (ct_carry, acc);
        let mut ct_rem = Vec::new();
        if let Some(res) = rem {
            (ct_carry, acc, ct_rem) = self.store_all_backward(
                consts,
                &tail(&xs),
                &res,
                ct_carry,
                &tail(&ct_ys),
                acc,
                t - main,
                false,
            );
        }
        let mut ct_main = Vec::new();
        if nseg > 0 {
            let (nkf, ncf) = (self.fl_carry.len(), self.fl_consts.len());
            let ops: Vec<Tensor> = consts
                .iter()
                .cloned()
                .chain(ct_carry)
                .chain(acc)
                .chain(starts)
                .chain(seg(&xs))
                .chain(seg(&ct_ys))
                .collect();
            let mut o = bind_scan(nseg, true, nc, nkf + ncf, self.segment_backward(k), &ops);
            ct_main = o.split_off(nkf + ncf).iter().map(merge_leading).collect();
            acc = o.split_off(nkf);
            ct_carry = o;
        }
        let ct_xs: Vec<Tensor> = (0..self.fl_xs.len())
            .map(|i| match (ct_main.get(i), ct_rem.get(i)) {
                (Some(m), Some(r)) => lax::concatenate(&[m.clone(), r.clone()], 0),
                (Some(m), None) => m.clone(),
                (None, Some(r)) => r.clone(),
                (None, None) => unreachable!("length >= 1"),
            })
            .collect();
        (ct_carry, acc, flip(&ct_xs))
    }

    /// `(consts, carry, x_seg [k, ..]) -> (carry after k steps, carry, y_seg [k, ..])`: the outer
    /// forward scan's body.
    fn segment_forward(&self, k: usize) -> Function {
        let (nc, nk) = (self.nc, self.nk);
        let types: Vec<TensorType> = self
            .const_types
            .iter()
            .chain(&self.carry_types)
            .cloned()
            .chain(self.x_types.iter().map(|t| stacked(t, k)))
            .collect();
        crate::trace_function(&types, |args| {
            let mut out = bind_scan(k, false, nc, nk, self.body.clone(), &args);
            let ys = out.split_off(nk);
            out.extend(args[nc..nc + nk].iter().cloned());
            out.extend(ys);
            out
        })
    }

    /// `(consts, ct_carry, acc, saved carry, x_seg, ct_y_seg) -> (ct_carry, acc, ct_x_seg)`: the
    /// outer reverse scan's body, recomputing the segment's residuals from its saved carry.
    fn segment_backward(&self, k: usize) -> Function {
        let (nc, nk, nx) = (self.nc, self.nk, self.nx);
        let (nkf, ncf, ny) = (self.fl_carry.len(), self.fl_consts.len(), self.ct_y_types.len());
        let types: Vec<TensorType> = self
            .const_types
            .iter()
            .chain(&pick(&self.carry_types, &self.fl_carry))
            .chain(&pick(&self.const_types, &self.fl_consts))
            .chain(&self.carry_types)
            .cloned()
            .chain(self.x_types.iter().map(|t| stacked(t, k)))
            .chain(self.ct_y_types.iter().map(|t| stacked(t, k)))
            .collect();
        crate::trace_function(&types, |args| {
            let mut a = args.into_iter();
            let mut take = |n: usize| a.by_ref().take(n).collect::<Vec<Tensor>>();
            let (consts, ct_carry, acc) = (take(nc), take(nkf), take(ncf));
            let (c0, xs, ct_ys) = (take(nk), take(nx), take(ny));
            let (_, res) = self.store_all_scan(&consts, &c0, &xs, k, false);
            let (c, acc, ct_xs) =
                self.store_all_backward(&consts, &xs, &res, ct_carry, &ct_ys, acc, k, false);
            c.into_iter().chain(acc).chain(ct_xs).collect()
        })
    }
}
