//! Batching rules of control flow and calls: the sub-functions are batched (their batched parameters
//! get a leading batch dimension) and the primitive is kept, except `cond` with a batched index (every
//! branch runs, `select` picks per lane) and `while_loop` with a batched predicate (the loop runs
//! until every lane is done; finished lanes keep their state through `select`).

use super::rules::any;
use super::{Batched, batch_function, batch_replay, batched_outputs, trace_batched};
use kiln_ir::{DType, Function, Prim, ReduceOp, TensorType};
use kiln_trace::{Tensor, lax};

/// The batching rule of a control-flow primitive.
pub(super) fn batch_rule(prim: &Prim, args: &[Batched], n: usize) -> Vec<Batched> {
    let flags: Vec<bool> = args.iter().map(Batched::is_batched).collect();
    match prim {
        Prim::Call { body } => {
            let (f, outb) = batch_function(body, &flags, n, &[]);
            bind_lead(Prim::Call { body: Box::new(f) }, args, n, &outb)
        }
        Prim::Checkpoint { body } => {
            let (f, outb) = batch_function(body, &flags, n, &[]);
            bind_lead(Prim::Checkpoint { body: Box::new(f) }, args, n, &outb)
        }
        Prim::CustomJvpCall { fun, jvp } => {
            // Every output batched, so that fun and the rule agree on the output types.
            let all = vec![true; fun.outputs.len() * 2];
            let fun = batch_function(fun, &flags, n, &all).0;
            let twice: Vec<bool> = flags.iter().chain(&flags).copied().collect();
            let jvp = batch_function(jvp, &twice, n, &all).0;
            bind_lead(Prim::CustomJvpCall { fun: Box::new(fun), jvp: Box::new(jvp) }, args, n, &all)
        }
        Prim::CustomVjpCall { fun, fwd, bwd } => custom_vjp(fun, fwd, bwd, args, &flags, n),
        Prim::Scan { length, reverse, num_consts, num_carry, body } => {
            scan(*length, *reverse, *num_consts, *num_carry, body, args, &flags, n)
        }
        Prim::WhileLoop { cond, body, cond_consts, body_consts, max_iters } => {
            while_loop(cond, body, *cond_consts, *body_consts, *max_iters, args, &flags, n)
        }
        Prim::Cond { branches } => cond(branches, args, &flags, n),
        _ => unreachable!("{} is not a control-flow primitive", prim.name()),
    }
}

/// Binds `prim` to the operands with batched ones moved to dimension 0 (the batched sub-functions'
/// convention); output `j` is batched at 0 when `out_batched[j]`.
fn bind_lead(prim: Prim, args: &[Batched], n: usize, out_batched: &[bool]) -> Vec<Batched> {
    let ins: Vec<Tensor> =
        args.iter().map(|a| if a.is_batched() { a.at(0, n) } else { a.value.clone() }).collect();
    wrap(bind(prim, &ins), out_batched, 0)
}

fn bind(prim: Prim, ins: &[Tensor]) -> Vec<Tensor> {
    let refs: Vec<&Tensor> = ins.iter().collect();
    lax::bind(prim, &refs)
}

/// Outputs batched at `d` where flagged.
fn wrap(outs: Vec<Tensor>, batched: &[bool], d: usize) -> Vec<Batched> {
    outs.into_iter().zip(batched).map(|(value, &b)| Batched { value, bdim: b.then_some(d) }).collect()
}

/// `custom_vjp_call`: `fun` and `fwd` batched with every output batched; `bwd` takes batched residuals
/// and cotangents and returns, for an unbatched operand, its cotangent summed over the batch.
fn custom_vjp(
    fun: &Function,
    fwd: &Function,
    bwd: &Function,
    args: &[Batched],
    flags: &[bool],
    n: usize,
) -> Vec<Batched> {
    let all_out = vec![true; fun.outputs.len()];
    let fun_b = batch_function(fun, flags, n, &all_out).0;
    let fwd_b = batch_function(fwd, flags, n, &vec![true; fwd.outputs.len()]).0;
    let params: Vec<(TensorType, bool)> = bwd.param_types().into_iter().map(|t| (t, true)).collect();
    let bwd_b = trace_batched(&params, n, |ps| {
        let cts = batch_replay(bwd, &ps, n);
        cts.into_iter()
            .zip(flags)
            .map(|(c, &b)| match (b, c.bdim) {
                (true, _) => c.at(0, n),
                (false, Some(d)) => sum_batch(&c.value, d),
                (false, None) => c.value,
            })
            .collect()
    });
    let prim = Prim::CustomVjpCall { fun: Box::new(fun_b), fwd: Box::new(fwd_b), bwd: Box::new(bwd_b) };
    bind_lead(prim, args, n, &all_out)
}

/// The sum over batch dimension `d` (or for bool, whether any lane is true).
fn sum_batch(x: &Tensor, d: usize) -> Tensor {
    let op = if x.dtype() == DType::Bool { ReduceOp::Max } else { ReduceOp::Sum };
    lax::reduce(op, x, &[d])
}

/// `scan`: consts batched at 0 in the body, `xs` batched at 1 (after the scanned axis), so their
/// slices are batched at 0; a carry is batched if its init is or the body makes it so (iterated to
/// a fixed point); each `y` batched in the body is stacked batched at 1.
#[allow(clippy::too_many_arguments)]
fn scan(
    length: usize,
    reverse: bool,
    num_consts: usize,
    num_carry: usize,
    body: &Function,
    args: &[Batched],
    flags: &[bool],
    n: usize,
) -> Vec<Batched> {
    let (nc, nk) = (num_consts, num_carry);
    let mut body_flags = flags.to_vec();
    loop {
        let outb = batched_outputs(body, &body_flags, n);
        let mut changed = false;
        for i in 0..nk {
            if outb[i] && !body_flags[nc + i] {
                body_flags[nc + i] = true;
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    let force: Vec<bool> = body_flags[nc..nc + nk].to_vec();
    let (body_b, outb) = batch_function(body, &body_flags, n, &force);
    let ins: Vec<Tensor> = args
        .iter()
        .enumerate()
        .map(|(i, a)| match (i < nc + nk, body_flags[i]) {
            (_, false) => a.value.clone(),
            (true, true) => a.at(0, n),
            (false, true) => a.at(1, n),
        })
        .collect();
    let prim = Prim::Scan { length, reverse, num_consts, num_carry, body: Box::new(body_b) };
    let outs = bind(prim, &ins);
    let (c, y) = outs.split_at(nk);
    let mut res = wrap(c.to_vec(), &outb[..nk], 0);
    res.extend(wrap(y.to_vec(), &outb[nk..], 1));
    res
}

/// `while_loop`: with an unbatched predicate, the state components batched by init or body (fixed
/// point) are batched and the loop kept; with a batched predicate every component is batched, the
/// loop runs while any lane's predicate holds and a lane whose predicate is false keeps its state.
#[allow(clippy::too_many_arguments)]
fn while_loop(
    cond: &Function,
    body: &Function,
    cc: usize,
    bc: usize,
    max_iters: Option<u64>,
    args: &[Batched],
    flags: &[bool],
    n: usize,
) -> Vec<Batched> {
    let (cflags, rest) = flags.split_at(cc);
    let (bflags, sflags) = rest.split_at(bc);
    let mut sb = sflags.to_vec();
    let cat = |a: &[bool], b: &[bool]| -> Vec<bool> { a.iter().chain(b).copied().collect() };
    let pred_batched = loop {
        if batched_outputs(cond, &cat(cflags, &sb), n)[0] {
            break true;
        }
        let outb = batched_outputs(body, &cat(bflags, &sb), n);
        let new: Vec<bool> = sb.iter().zip(&outb).map(|(a, b)| *a || *b).collect();
        if new == sb {
            break false;
        }
        sb = new;
    };
    let lead = |a: &Batched, b: bool| if b { a.at(0, n) } else { a.value.clone() };
    if !pred_batched {
        let cond_b = batch_function(cond, &cat(cflags, &sb), n, &[]).0;
        let body_b = batch_function(body, &cat(bflags, &sb), n, &sb).0;
        let ins: Vec<Tensor> =
            args.iter().zip(cat(&cat(cflags, bflags), &sb)).map(|(a, b)| lead(a, b)).collect();
        let prim = Prim::WhileLoop {
            cond: Box::new(cond_b),
            body: Box::new(body_b),
            cond_consts: cc,
            body_consts: bc,
            max_iters,
        };
        return wrap(bind(prim, &ins), &sb, 0);
    }
    let ns = sflags.len();
    let (cargs, rest) = args.split_at(cc);
    let (bargs, sargs) = rest.split_at(bc);
    let cond_params: Vec<(TensorType, bool)> = cargs
        .iter()
        .map(|a| (a.elem_type(), a.is_batched()))
        .chain(sargs.iter().map(|a| (a.elem_type(), true)))
        .collect();
    // The new cond: does any lane continue?
    let cond_b = trace_batched(&cond_params, n, |ps| {
        let p = batch_replay(cond, &ps, n).remove(0);
        vec![any(&p.value)]
    });
    // The new body sees the cond consts too, to mask the lanes that are done.
    let body_params: Vec<(TensorType, bool)> = cond_params[..cc]
        .iter()
        .cloned()
        .chain(bargs.iter().map(|a| (a.elem_type(), a.is_batched())))
        .chain(sargs.iter().map(|a| (a.elem_type(), true)))
        .collect();
    let body_b = trace_batched(&body_params, n, |ps| {
        let (cps, rest) = ps.split_at(cc);
        let (bps, state) = rest.split_at(bc);
        let cond_args: Vec<Batched> = cps.iter().chain(state).cloned().collect();
        let pred = batch_replay(cond, &cond_args, n).remove(0).at(0, n);
        let body_args: Vec<Batched> = bps.iter().chain(state).cloned().collect();
        let new = batch_replay(body, &body_args, n);
        new.iter()
            .zip(state)
            .map(|(nw, old)| {
                let nw = nw.at(0, n);
                let p = lax::broadcast_in_dim(&pred, nw.shape().dims(), &[0]);
                lax::select(&p, &nw, &old.value)
            })
            .collect()
    });
    let mut ins: Vec<Tensor> = cargs.iter().map(|a| lead(a, a.is_batched())).collect();
    ins.extend(cargs.iter().map(|a| lead(a, a.is_batched())));
    ins.extend(bargs.iter().map(|a| lead(a, a.is_batched())));
    ins.extend(sargs.iter().map(|a| a.at(0, n)));
    let prim = Prim::WhileLoop {
        cond: Box::new(cond_b),
        body: Box::new(body_b),
        cond_consts: cc,
        body_consts: cc + bc,
        max_iters,
    };
    wrap(bind(prim, &ins), &vec![true; ns], 0)
}

/// `cond`: with an unbatched index the branches are batched alike (an output batched in any branch is
/// batched in all) and the `cond` kept; with a batched index every branch runs on the batch and
/// `select` picks each lane's branch (the index clamped as `cond` clamps it).
fn cond(branches: &[Function], args: &[Batched], flags: &[bool], n: usize) -> Vec<Batched> {
    let (index, ops) = args.split_first().expect("cond has an index");
    if !index.is_batched() {
        let mut outb = vec![false; branches[0].outputs.len()];
        for br in branches {
            for (o, b) in outb.iter_mut().zip(batched_outputs(br, &flags[1..], n)) {
                *o |= b;
            }
        }
        let branches: Vec<Function> =
            branches.iter().map(|br| batch_function(br, &flags[1..], n, &outb).0).collect();
        return bind_lead(Prim::Cond { branches }, args, n, &outb);
    }
    let last = branches.len() as f64 - 1.0;
    let idx = index.at(0, n);
    let idx = lax::clamp(&Tensor::scalar_like(0.0, DType::I32), &idx, &Tensor::scalar_like(last, DType::I32));
    let mut result: Vec<Tensor> = Vec::new();
    for (k, br) in branches.iter().enumerate() {
        let outs = batch_replay(br, ops, n);
        if k == 0 {
            result = outs.iter().map(|o| o.at(0, n)).collect();
            continue;
        }
        let is_k = idx.eq(&Tensor::scalar(k as i32));
        result = result
            .iter()
            .zip(&outs)
            .map(|(r, o)| {
                let o = o.at(0, n);
                let p = lax::broadcast_in_dim(&is_k, o.shape().dims(), &[0]);
                lax::select(&p, &o, r)
            })
            .collect();
    }
    result.into_iter().map(|t| Batched::new(t, 0)).collect()
}
