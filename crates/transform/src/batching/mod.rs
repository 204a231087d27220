//! Batching (`vmap`, DESIGN §5): replays a function on values that carry an extra *batch dimension*.
//!
//! A value is a [`Batched`]: a tensor and the position of its batch dimension, or `None` when the value
//! is the same for every batch element (unbatched). [`batch_replay`] walks a function's equations; an
//! equation whose inputs are all unbatched is bound as is (its outputs stay unbatched), otherwise the
//! primitive's batching rule (`rules.rs`, one per primitive, control flow in `control.rs`) emits
//! ordinary primitives on the batched tensors. Nothing is unrolled over the batch: the number of
//! emitted equations does not depend on the batch size.
//!
//! Rules follow two policies: unbatched values stay unbatched (an unbatched operand is broadcast with
//! the batch dimension only when the primitive needs equal shapes, e.g. both operands of `add`), and
//! batch dimensions move only when a rule needs them at a given position.

mod control;
mod rules;

use kiln_ir::{Function, TensorType};
use kiln_trace::{Tensor, at_location, lax};

/// A value during batching: `value` has the batch dimension at `bdim`, or is unbatched (`None`).
#[derive(Clone, Debug)]
pub struct Batched {
    /// The tensor (with the batch dimension when `bdim` is `Some`).
    pub value: Tensor,
    /// The position of the batch dimension in `value`, or `None` for an unbatched value.
    pub bdim: Option<usize>,
}

impl Batched {
    /// A value batched along `bdim`.
    pub fn new(value: Tensor, bdim: usize) -> Batched {
        Batched { value, bdim: Some(bdim) }
    }

    /// An unbatched value.
    pub fn unbatched(value: Tensor) -> Batched {
        Batched { value, bdim: None }
    }

    /// True if the value has a batch dimension.
    pub fn is_batched(&self) -> bool {
        self.bdim.is_some()
    }

    /// The type of one batch element.
    pub fn elem_type(&self) -> TensorType {
        let ty = self.value.ty();
        match self.bdim {
            Some(d) => {
                let mut dims = ty.shape.dims().to_vec();
                dims.remove(d);
                TensorType::new(ty.dtype, dims)
            }
            None => ty,
        }
    }

    /// The value with its batch dimension at `to` (rank + 1 positions); an unbatched value is
    /// broadcast along a new dimension of `size` there.
    pub fn at(&self, to: usize, size: usize) -> Tensor {
        match self.bdim {
            Some(d) => move_dim(&self.value, d, to),
            None => broadcast_batch(&self.value, to, size),
        }
    }
}

/// `x` with dimension `from` moved to position `to` (a transpose, or nothing when equal).
pub(crate) fn move_dim(x: &Tensor, from: usize, to: usize) -> Tensor {
    if from == to {
        return x.clone();
    }
    let mut perm: Vec<usize> = (0..x.ndim()).filter(|&i| i != from).collect();
    perm.insert(to, from);
    lax::transpose(x, &perm)
}

/// `x` broadcast along a new dimension of `size` inserted at position `at`.
pub(crate) fn broadcast_batch(x: &Tensor, at: usize, size: usize) -> Tensor {
    let mut dims = x.shape().dims().to_vec();
    dims.insert(at, size);
    let bd: Vec<usize> = (0..x.ndim()).map(|i| if i < at { i } else { i + 1 }).collect();
    lax::broadcast_in_dim(x, &dims, &bd)
}

/// Replays `f` on `args` (one per parameter; `axis_size` is the batch size) in the current context —
/// recorded into the innermost trace, or evaluated eagerly — and returns the outputs with their batch
/// dimensions. Each emitted equation keeps the location of the equation it batches.
///
/// # Panics
/// If `args.len()` differs from the number of parameters, or a batched argument's batch dimension
/// does not have size `axis_size` (kiln bugs: callers check user input first).
pub fn batch_replay(f: &Function, args: &[Batched], axis_size: usize) -> Vec<Batched> {
    assert_eq!(
        args.len(),
        f.params.len(),
        "batch: {} arguments for {} parameters",
        args.len(),
        f.params.len()
    );
    let mut env: Vec<Option<Batched>> = vec![None; f.vars.len()];
    for (p, a) in f.params.iter().zip(args) {
        if let Some(d) = a.bdim {
            assert_eq!(a.value.shape().dims()[d], axis_size, "batch: argument batch size");
        }
        env[p.index()] = Some(a.clone());
    }
    for c in &f.consts {
        env[c.var.index()] = Some(Batched::unbatched(Tensor::from_shared(c.value.clone())));
    }
    for eqn in &f.eqns {
        let ins: Vec<Batched> =
            eqn.inputs.iter().map(|v| env[v.index()].clone().expect("verified function")).collect();
        let outs = at_location(eqn.loc.as_ref(), || {
            if ins.iter().all(|b| !b.is_batched()) {
                let refs: Vec<&Tensor> = ins.iter().map(|b| &b.value).collect();
                lax::bind(eqn.prim.clone(), &refs).into_iter().map(Batched::unbatched).collect()
            } else {
                rules::batch_rule(&eqn.prim, &ins, axis_size)
            }
        });
        debug_assert_eq!(outs.len(), eqn.outputs.len(), "batch rule of {} output count", eqn.prim.name());
        for (v, o) in eqn.outputs.iter().zip(outs) {
            env[v.index()] = Some(o);
        }
        if kiln_trace::trace_failed() {
            // The failed op's stand-ins need not have the types its consumers (and the caller)
            // expect: unbatched stand-ins of the declared types instead (the trace is discarded).
            return f
                .outputs
                .iter()
                .map(|v| Batched::unbatched(kiln_trace::stand_in(f.var_type(*v))))
                .collect();
        }
    }
    f.outputs.iter().map(|v| env[v.index()].clone().expect("verified function")).collect()
}

/// The batched version of a closed function as a closed function: parameter `i` gains a leading batch
/// dimension of `axis_size` when `in_batched[i]`; output `j` has a leading batch dimension when it
/// depends on a batched parameter or `force_out[j]` (then an unbatched result is broadcast). Returns
/// the function and which outputs are batched.
pub fn batch_function(
    f: &Function,
    in_batched: &[bool],
    axis_size: usize,
    force_out: &[bool],
) -> (Function, Vec<bool>) {
    let params: Vec<(TensorType, bool)> =
        f.param_types().into_iter().zip(in_batched.iter().copied()).collect();
    let mut out_batched = Vec::new();
    let func = trace_batched(&params, axis_size, |args| {
        let outs = batch_replay(f, &args, axis_size);
        outs.into_iter()
            .enumerate()
            .map(|(j, o)| {
                let b = o.is_batched() || force_out.get(j).copied().unwrap_or(false);
                out_batched.push(b);
                if b { o.at(0, axis_size) } else { o.value }
            })
            .collect()
    });
    (func, out_batched)
}

/// Traces `body` into a closed function whose parameter `i` has type `params[i].0`, with a leading
/// batch dimension of `axis_size` when `params[i].1`; `body` sees them as [`Batched`] values.
pub(crate) fn trace_batched(
    params: &[(TensorType, bool)],
    axis_size: usize,
    body: impl FnOnce(Vec<Batched>) -> Vec<Tensor>,
) -> Function {
    let types: Vec<TensorType> =
        params.iter().map(|(t, b)| if *b { with_batch(t, axis_size) } else { t.clone() }).collect();
    crate::trace_function(&types, |args| {
        let args: Vec<Batched> = args
            .into_iter()
            .zip(params)
            .map(|(a, (_, b))| Batched { value: a, bdim: b.then_some(0) })
            .collect();
        body(args)
    })
}

/// Which outputs of `f` are batched when the parameters flagged in `in_batched` are.
pub(crate) fn batched_outputs(f: &Function, in_batched: &[bool], axis_size: usize) -> Vec<bool> {
    batch_function(f, in_batched, axis_size, &[]).1
}

/// `ty` with a leading batch dimension of `size`.
pub(crate) fn with_batch(ty: &TensorType, size: usize) -> TensorType {
    let dims: Vec<usize> = std::iter::once(size).chain(ty.shape.dims().iter().copied()).collect();
    TensorType::new(ty.dtype, dims)
}
