//! `trace`: run a Rust function once on tracers and record the [`Function`] it computes.

use crate::context::{self, TraceId};
use crate::{Error, Result, Tensor, Tree};
use kiln_ir::{Array, Function};

/// A traced function: the recorded IR plus what is needed to call it with pytrees.
#[derive(Debug)]
pub struct Traced<R> {
    /// The recorded IR: one parameter per input leaf (then one per captured outer tracer), one output
    /// per output leaf.
    pub function: Function,
    /// Tracers of enclosing traces that the function used; they are its trailing parameters.
    pub captured: Vec<Tensor>,
    /// The output structure, with placeholder leaves.
    pub output: R,
}

/// Ends the trace even if the user's function panics, so the thread's trace stack stays consistent.
struct TraceGuard(Option<TraceId>);

impl Drop for TraceGuard {
    fn drop(&mut self) {
        if let Some(id) = self.0.take() {
            context::pop_trace(id);
        }
    }
}

/// Traces `f` on tracers shaped like `args` (tensors whose values are ignored: concrete ones,
/// or [`Tensor::placeholder`]s) and returns the recorded function.
///
/// Tensors that `f` captures from its environment become constants; tracers of an enclosing trace
/// become extra parameters listed in [`Traced::captured`].
///
/// # Errors
/// The first [`Error::Op`] recorded while tracing (a shape or dtype mismatch, with the user's call
/// site), or [`Error::Verify`] if the recorded IR is invalid (a kiln bug; checked in debug builds).
///
/// ```
/// use kiln_trace::{trace, Tensor};
/// use kiln_ir::DType;
/// let t = trace(|x: Tensor| &x * &x + 1.0, &Tensor::placeholder(DType::F32, &[3]))?;
/// assert_eq!(t.function.eqns.len(), 3); // mul, broadcast of the scalar 1.0, add
/// # Ok::<(), kiln_trace::Error>(())
/// ```
pub fn trace<A: Tree, R: Tree>(f: impl FnOnce(A) -> R, args: &A) -> Result<Traced<R>> {
    trace_or_template(f, args).map_err(|(e, _)| e)
}

/// [`trace`], but on error also returns the output structure (with placeholder leaves), so that a
/// transform that traced a user function inside an enclosing trace can report the error there and go
/// on with placeholder results instead of stopping.
pub fn trace_or_template<A: Tree, R: Tree>(
    f: impl FnOnce(A) -> R,
    args: &A,
) -> Result<Traced<R>, (Error, R)> {
    let id = context::push_trace();
    let mut guard = TraceGuard(Some(id));
    let params: Vec<Tensor> = args.leaves().iter().map(|l| context::new_param(id, l.ty())).collect();
    let out = f(args.rebuild(params));
    let out_leaves = out.leaves();
    let out_vars: Vec<_> = out_leaves.iter().map(|t| context::var_in(id, t)).collect();
    guard.0 = None;
    let mut frame = context::pop_trace(id);
    let output = out.map(|t| {
        let ty = t.ty();
        Tensor::placeholder(ty.dtype, ty.shape.dims())
    });
    if let Some(err) = frame.error {
        return Err((err, output));
    }
    frame.func.outputs = out_vars;
    #[cfg(debug_assertions)]
    if let Err(e) = kiln_ir::verify(&frame.func) {
        return Err((Error::Verify(e), output));
    }
    Ok(Traced { function: frame.func, captured: frame.captured, output })
}

impl<R: Tree> Traced<R> {
    /// Runs the recorded function with the reference interpreter on concrete `args` (a pytree of the
    /// structure and types it was traced with).
    ///
    /// # Errors
    /// [`Error::Input`] if the arguments' structure, count or types differ from the traced ones, or the
    /// function captured tracers of an enclosing trace.
    pub fn eval<A: Tree>(&self, args: &A) -> Result<R> {
        if !self.captured.is_empty() {
            return Err(Error::Input {
                message: "a function that captured tracers of an enclosing trace cannot be evaluated alone"
                    .into(),
            });
        }
        let leaves = args.leaves();
        let mut arrays: Vec<Array> = Vec::with_capacity(leaves.len());
        for (i, l) in leaves.iter().enumerate() {
            match l.to_array() {
                Some(a) => arrays.push(a),
                None => {
                    return Err(Error::Input {
                        message: format!("argument leaf {i} is not a concrete array"),
                    });
                }
            }
        }
        let outs =
            kiln_ir::eval(&self.function, &arrays).map_err(|e| Error::Input { message: e.to_string() })?;
        Ok(self.output.rebuild(outs.into_iter().map(Tensor::from_array).collect()))
    }
}
