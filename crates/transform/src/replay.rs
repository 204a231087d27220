//! Replaying a function's equations on tensors.

use kiln_ir::{Function, TensorType};
use kiln_trace::{Tensor, at_location, lax};

/// Binds each equation of `f` to `args` (one tensor per parameter) in the current context — recorded
/// into the innermost trace, or evaluated eagerly — and returns the outputs. Each equation keeps its
/// original source location.
///
/// # Panics
/// If `args.len()` differs from the number of parameters (a kiln bug: callers build `args` from `f`).
pub fn replay(f: &Function, args: &[Tensor]) -> Vec<Tensor> {
    assert_eq!(
        args.len(),
        f.params.len(),
        "replay: {} arguments for {} parameters",
        args.len(),
        f.params.len()
    );
    let mut env: Vec<Option<Tensor>> = vec![None; f.vars.len()];
    for (p, a) in f.params.iter().zip(args) {
        env[p.index()] = Some(a.clone());
    }
    for c in &f.consts {
        env[c.var.index()] = Some(Tensor::from_shared(c.value.clone()));
    }
    for eqn in &f.eqns {
        let ins: Vec<&Tensor> =
            eqn.inputs.iter().map(|v| env[v.index()].as_ref().expect("verified function")).collect();
        let outs = at_location(eqn.loc.as_ref(), || lax::bind(eqn.prim.clone(), &ins));
        for (v, t) in eqn.outputs.iter().zip(outs) {
            env[v.index()] = Some(t);
        }
    }
    f.outputs.iter().map(|v| env[v.index()].clone().expect("verified function")).collect()
}

/// Traces `body` on fresh parameters of the given types into a closed function (no captured tracers:
/// `body` must only use its arguments and concrete tensors), then removes dead code.
///
/// A sub-function can fail to trace even though the function it came from was verified: a rule's op
/// may refuse these sizes (an i32 `iota` numbering more than 2^31 positions in a `sort` gradient
/// inside a `scan` body). Inside a trace, the error is then re-raised in the enclosing trace (whose
/// function is discarded) and a stand-in is returned: the same parameters, zeros of the output
/// types the body produced, so that the caller's types still line up.
///
/// # Panics
/// Outside any trace (eager transforms), with the error, as other eager errors do.
pub fn trace_function(param_types: &[TensorType], body: impl FnOnce(Vec<Tensor>) -> Vec<Tensor>) -> Function {
    let args: Vec<Tensor> =
        param_types.iter().map(|t| Tensor::placeholder(t.dtype, t.shape.dims())).collect();
    let traced = match kiln_trace::trace_or_template(body, &args) {
        Ok(traced) => traced,
        Err((e, template)) => {
            if !kiln_trace::is_tracing() {
                panic!("kiln: {e}");
            }
            kiln_trace::propagate_error(e);
            let zeros = |_: Vec<Tensor>| -> Vec<Tensor> {
                template
                    .iter()
                    .map(|t| {
                        lax::broadcast_in_dim(&Tensor::scalar_like(0.0, t.dtype()), t.shape().dims(), &[])
                    })
                    .collect()
            };
            kiln_trace::trace(zeros, &args).expect("zeros of the traced output types")
        }
    };
    assert!(traced.captured.is_empty(), "kiln: a transform's sub-function captured an outer tracer");
    crate::dce(&traced.function)
}
