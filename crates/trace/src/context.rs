//! The thread-local stack of traces and how a primitive is bound: staged into the innermost trace,
//! or evaluated at once (eager mode) when no trace is active.
//!
//! Every trace has a unique id; a tracer carries the id of the trace that made it. Binding into the
//! innermost trace T:
//! - a tracer of T is used directly;
//! - a tracer of an outer (still active) trace is *captured*: it becomes an extra parameter of T's
//!   function (closure conversion — sub-functions stay closed), and the outer value is remembered so
//!   the caller can pass it in;
//! - a concrete tensor becomes a constant of T's function (deduplicated by identity);
//! - a tracer whose trace has ended is a leaked tracer: a panic naming where it was used.

use crate::Error;
use crate::tensor::{Repr, Tensor};
use kiln_ir::{Array, Function, Prim, SrcLoc, TensorType, Var};
use std::cell::RefCell;
use std::collections::HashMap;
use std::panic::Location;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Identifies one trace; tracers carry it.
pub(crate) type TraceId = u64;

static NEXT_TRACE_ID: AtomicU64 = AtomicU64::new(1);

/// One active trace: the function being recorded and its bookkeeping.
pub(crate) struct Frame {
    pub(crate) id: TraceId,
    pub(crate) func: Function,
    /// The first error recorded; later ones are dropped (the first is the cause).
    pub(crate) error: Option<Error>,
    /// Outer tracers captured as extra parameters, in parameter order.
    pub(crate) captured: Vec<Tensor>,
    capture_map: HashMap<(TraceId, Var), Var>,
    /// Constants by the address of their shared data.
    const_map: HashMap<*const Array, Var>,
}

thread_local! {
    static STACK: RefCell<Vec<Frame>> = const { RefCell::new(Vec::new()) };
    /// While a transform replays an equation, the location of the original equation: what it binds is
    /// attributed to the user's line, not to the rule's source.
    static LOC_OVERRIDE: RefCell<Option<SrcLoc>> = const { RefCell::new(None) };
    /// While a transformed function (the closure `grad(f)` returns, ...) runs, where the user wrote
    /// the transform: errors it reports itself ([`report_error`]) point there, since closures cannot
    /// be `#[track_caller]`.
    static API_LOC: RefCell<Option<SrcLoc>> = const { RefCell::new(None) };
}

/// Runs `f` (the body of a closure returned by a user-facing transform) with `loc` — where the user
/// wrote the transform — as the location of errors the transform reports with [`report_error`].
/// Equations recorded meanwhile keep their own locations.
pub fn with_api_location<R>(loc: &SrcLoc, f: impl FnOnce() -> R) -> R {
    let prev = API_LOC.with(|o| o.replace(Some(loc.clone())));
    struct Restore(Option<SrcLoc>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let prev = self.0.take();
            API_LOC.with(|o| *o.borrow_mut() = prev);
        }
    }
    let _restore = Restore(prev);
    f()
}

/// Runs `f` with every equation it records attributed to `loc` (when `Some`). Transforms use it so
/// that the equations a rule emits for a user's op carry that op's location.
pub fn at_location<R>(loc: Option<&SrcLoc>, f: impl FnOnce() -> R) -> R {
    let Some(loc) = loc else { return f() };
    let prev = LOC_OVERRIDE.with(|o| o.replace(Some(loc.clone())));
    struct Restore(Option<SrcLoc>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let prev = self.0.take();
            LOC_OVERRIDE.with(|o| *o.borrow_mut() = prev);
        }
    }
    let _restore = Restore(prev);
    f()
}

/// The location to record: the override of a replaying transform, else the `#[track_caller]` caller.
#[track_caller]
fn call_site() -> SrcLoc {
    let caller = Location::caller();
    LOC_OVERRIDE.with(|o| o.borrow().clone()).unwrap_or_else(|| SrcLoc::from_location(caller))
}

/// Starts a new innermost trace and returns its id.
pub(crate) fn push_trace() -> TraceId {
    let id = NEXT_TRACE_ID.fetch_add(1, Ordering::Relaxed);
    STACK.with(|s| {
        s.borrow_mut().push(Frame {
            id,
            func: Function::new(),
            error: None,
            captured: Vec::new(),
            capture_map: HashMap::new(),
            const_map: HashMap::new(),
        })
    });
    id
}

/// Ends the innermost trace (which must be `id`) and returns its frame. Its tracers become invalid.
pub(crate) fn pop_trace(id: TraceId) -> Frame {
    STACK.with(|s| {
        let frame = s.borrow_mut().pop().expect("trace stack underflow");
        assert_eq!(frame.id, id, "traces ended out of order");
        frame
    })
}

/// Runs `f` on the frame of trace `id`.
pub(crate) fn with_frame<R>(id: TraceId, f: impl FnOnce(&mut Frame) -> R) -> R {
    STACK.with(|s| {
        let mut s = s.borrow_mut();
        let frame = s.iter_mut().rev().find(|fr| fr.id == id).expect("trace is not active");
        f(frame)
    })
}

/// The id of the innermost active trace, if any.
pub(crate) fn current_trace() -> Option<TraceId> {
    STACK.with(|s| s.borrow().last().map(|f| f.id))
}

/// True while a function is being traced on this thread (ops are recorded, not evaluated).
pub fn is_tracing() -> bool {
    current_trace().is_some()
}

/// True if trace `id` is active on this thread.
pub(crate) fn is_active(id: TraceId) -> bool {
    STACK.with(|s| s.borrow().iter().any(|f| f.id == id))
}

/// Adds a parameter of type `ty` to trace `id` and returns its tracer.
pub(crate) fn new_param(id: TraceId, ty: TensorType) -> Tensor {
    let var = with_frame(id, |fr| fr.func.add_param(ty.clone()));
    Tensor::traced(id, var, ty)
}

/// Records `err` in the innermost trace unless it already holds one.
pub(crate) fn record_error(err: Error) {
    STACK.with(|s| {
        if let Some(fr) = s.borrow_mut().last_mut()
            && fr.error.is_none()
        {
            fr.error = Some(err);
        }
    })
}

/// The variable standing for `t` inside trace `id` (capturing or constant-folding as needed).
#[track_caller]
pub(crate) fn var_in(id: TraceId, t: &Tensor) -> Var {
    match t.repr() {
        Repr::Traced { trace, var, ty } => {
            if *trace == id {
                return *var;
            }
            if !is_active(*trace) {
                panic!(
                    "kiln: a tracer of type {ty} escaped the trace that made it (it was stored outside the traced \
                     function and used later) at {}",
                    Location::caller()
                );
            }
            with_frame(id, |fr| {
                if let Some(v) = fr.capture_map.get(&(*trace, *var)) {
                    return *v;
                }
                let v = fr.func.add_param(ty.clone());
                fr.capture_map.insert((*trace, *var), v);
                fr.captured.push(t.clone());
                v
            })
        }
        Repr::Concrete(a) => with_frame(id, |fr| {
            let key = Arc::as_ptr(a);
            if let Some(v) = fr.const_map.get(&key) {
                return *v;
            }
            let v = fr.func.add_const(a.clone());
            fr.const_map.insert(key, v);
            v
        }),
        Repr::Placeholder(ty) => {
            let at = call_site();
            with_frame(id, |fr| {
                // After a recorded error, ops return placeholders (e.g. the results of a failed `scan`);
                // they stand for values of a trace that fails anyway. Otherwise a placeholder (a type,
                // not a value) was used as a value: that is the user's error, reported at their line.
                if fr.error.is_none() {
                    fr.error = Some(Error::Op {
                        op: "placeholder".into(),
                        operands: vec![ty.clone()],
                        message: format!(
                            "a placeholder tensor of type {ty} is a type, not a value: pass it to `trace` as an \
                             argument, or use a concrete tensor"
                        ),
                        at: Some(at),
                    });
                }
                fr.func.new_var(ty.clone())
            })
        }
    }
}

/// Binds `prim` to `inputs`: stages it into the innermost trace, or evaluates it eagerly.
///
/// `op` is the user-facing name reported in errors and `user_types` the operand types as the user gave
/// them (before internal broadcasting). Inside a trace, a failure is recorded (first error wins) and
/// placeholder results of the expected count are returned; eagerly, it panics at the caller.
#[track_caller]
pub(crate) fn bind(prim: Prim, inputs: &[&Tensor], n_out: usize) -> Vec<Tensor> {
    let at = call_site();
    match current_trace() {
        Some(id) => {
            // A loop, not `map`: closures lose `#[track_caller]`.
            let mut vars: Vec<Var> = Vec::with_capacity(inputs.len());
            for t in inputs {
                vars.push(var_in(id, t));
            }
            let res = with_frame(id, |fr| fr.func.push(prim, &vars, Some(at.clone())));
            match res {
                Ok(outs) => with_frame(id, |fr| {
                    outs.iter().map(|v| Tensor::traced(id, *v, fr.func.var_type(*v).clone())).collect()
                }),
                Err(e) => {
                    record_error(Error::Op {
                        op: e.prim.to_string(),
                        operands: e.operands.clone(),
                        message: e.message.clone(),
                        at: Some(at),
                    });
                    poisoned(id, inputs, n_out)
                }
            }
        }
        None => {
            let arrays: Vec<Arc<Array>> = inputs.iter().map(|t| t.concrete_or_panic()).collect();
            let refs: Vec<&Array> = arrays.iter().map(|a| a.as_ref()).collect();
            match kiln_ir::eval_prim(&prim, &refs) {
                Ok(outs) => outs.into_iter().map(Tensor::from_array).collect(),
                Err(e) => panic!("kiln: {e} at {at}"),
            }
        }
    }
}

/// Reports a user-level error (one detected before any primitive is bound, so it can quote the user's
/// shapes) and returns placeholder results. Eagerly, panics at the caller.
#[track_caller]
pub(crate) fn fail(op: &str, operands: &[&Tensor], message: String, n_out: usize) -> Vec<Tensor> {
    let at = call_site();
    let err = Error::Op {
        op: op.to_string(),
        operands: operands.iter().map(|t| t.ty()).collect(),
        message,
        at: Some(at),
    };
    match current_trace() {
        Some(id) => {
            record_error(err);
            poisoned(id, operands, n_out)
        }
        None => panic!("kiln: {err}"),
    }
}

/// Results standing in for an op that failed: fresh, undefined variables (the trace is already in
/// error, so its function is never used) typed like the first operand.
fn poisoned(id: TraceId, inputs: &[&Tensor], n_out: usize) -> Vec<Tensor> {
    let ty = inputs.first().map(|t| t.ty()).unwrap_or_else(|| TensorType::scalar(kiln_ir::DType::F32));
    (0..n_out).map(|_| stand_in_at(id, &ty)).collect()
}

fn stand_in_at(id: TraceId, ty: &TensorType) -> Tensor {
    let v = with_frame(id, |fr| fr.func.new_var(ty.clone()));
    Tensor::traced(id, v, ty.clone())
}

/// Whether the innermost trace already holds an error. Transforms replaying a function stop there:
/// what the failed op returned is a stand-in ([`stand_in`]) whose type may not be the one its
/// consumers expect, so replaying further could only fail again (or trip over the types).
pub fn trace_failed() -> bool {
    STACK.with(|s| s.borrow().last().is_some_and(|fr| fr.error.is_some()))
}

/// A fresh, undefined variable of type `ty` in the innermost trace: what a transform returns for
/// a value it could not compute once [`trace_failed`] (the trace's function is never used). Outside
/// a trace, a placeholder array of that type.
pub fn stand_in(ty: &TensorType) -> Tensor {
    match current_trace() {
        Some(id) => stand_in_at(id, ty),
        None => Tensor::placeholder(ty.dtype, ty.shape.dims()),
    }
}

/// Reports an error found by a transform or API function (not by a primitive): recorded in the
/// innermost trace (first error wins), or a panic in eager mode. Its location is the equation being
/// transformed, else the transform's call site ([`with_api_location`]), else the caller.
#[track_caller]
pub fn report_error(op: &str, operands: &[&Tensor], message: String) {
    let caller = SrcLoc::from_location(Location::caller());
    let api = API_LOC.with(|o| o.borrow().clone());
    let at = LOC_OVERRIDE.with(|o| o.borrow().clone()).or(api).unwrap_or(caller);
    at_location(Some(&at), || fail(op, operands, message, 0));
}

/// Re-raises an error from a nested trace (a transformed function's body) in the enclosing trace, or
/// panics in eager mode.
#[track_caller]
pub fn propagate_error(err: Error) {
    match current_trace() {
        Some(_) => record_error(err),
        None => panic!("kiln: {err}"),
    }
}
