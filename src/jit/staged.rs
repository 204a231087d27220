//! A jitted function called while another function is being traced (inside `grad`, `vmap`, another
//! `jit`, or with tracer arguments): like JAX, it is traced to a closed [`Function`] and bound as one
//! `call` equation of the enclosing trace. Tracers of enclosing traces that it uses become extra
//! operands, so transforms see an ordinary `call` (AD inlines it, `vmap` batches its body) and the
//! enclosing `jit` compiles it with everything else.

use super::options::JitOptions;
use crate::ad::placeholders_like;
use kiln_ir::{Prim, SrcLoc};
use kiln_trace::{Tensor, Tree, at_location, lax, propagate_error};
use kiln_transform::dce;

/// Traces `f` on `args`' types and binds it as a `call` in the current trace.
///
/// Errors follow kiln's tracing policy: a trace error of `f` is recorded in the enclosing trace
/// (whose entry point returns it) and the results are placeholders.
pub(crate) fn stage<A: Tree, R: Tree>(f: impl FnOnce(A) -> R, args: &A, opts: &JitOptions, at: &SrcLoc) -> R {
    let shapes = placeholders_like(args);
    match opts.tracing(|| kiln_trace::trace_or_template(f, &shapes)) {
        Ok(traced) => {
            let operands: Vec<Tensor> = args.leaves().into_iter().chain(traced.captured).collect();
            let refs: Vec<&Tensor> = operands.iter().collect();
            let body = Box::new(dce(&traced.function));
            let outs = at_location(Some(at), || lax::bind(Prim::Call { body }, &refs));
            traced.output.rebuild(outs)
        }
        Err((e, template)) => {
            propagate_error(e);
            template
        }
    }
}
