//! Compiled programs and the errors for arguments that do not match them.

use super::options::SimplifyOutcome;
use kiln_backend_cpu::{Arg, Executable};
use kiln_ir::{Array, SrcLoc, TensorType};
use kiln_trace::{Error, Result};
use std::panic::Location;

/// A compiled program for one input signature: flat host arrays in, flat host arrays out.
/// `Send + Sync`: one program may run on many threads at once.
///
/// ```
/// use kiln::prelude::*;
/// use kiln::ir::Array;
/// let f = jit(|(a, b): (Tensor, Tensor)| &a * &b);
/// let x = Tensor::from_vec(&[2], vec![1.0f32, 2.0]);
/// let compiled = f.compiled(&(x.clone(), x))?;
/// let out = compiled.run(&[Array::from_vec(&[2], vec![3.0f32, 4.0]), Array::from_vec(&[2], vec![2.0f32, 0.5])])?;
/// assert_eq!(out[0].to_vec::<f32>(), Some(vec![6.0, 2.0]));
/// // Arrays of another count, dtype or shape are an error naming jit and both signatures.
/// let err = compiled.run(&[Array::from_vec(&[2], vec![1.0f32, 2.0])]).unwrap_err();
/// assert!(err.to_string().starts_with("jit: expected 2 argument arrays"), "{err}");
/// # Ok::<(), kiln::Error>(())
/// ```
pub struct Compiled {
    exe: Executable,
    simplify: Option<SimplifyOutcome>,
}

impl Compiled {
    pub(crate) fn new(exe: Executable, simplify: Option<SimplifyOutcome>) -> Compiled {
        Compiled { exe, simplify }
    }

    /// Runs the native code on host arrays (one per input leaf, in tree order; any memory layout).
    ///
    /// # Errors
    /// [`Error::Op`] named `jit`, with the expected and given types and the caller's location, when
    /// the count, dtypes or shapes of `args` differ from the compiled signature.
    #[track_caller]
    pub fn run(&self, args: &[Array]) -> Result<Vec<Array>> {
        let at = Location::caller();
        self.run_args(args.iter().map(Arg::Borrowed).collect(), at)
    }

    /// Runs on borrowed and donated arrays (see [`kiln_backend_cpu::Arg`]).
    pub(crate) fn run_args(&self, args: Vec<Arg<'_>>, at: &Location<'_>) -> Result<Vec<Array>> {
        self.exe.run_args(args).map_err(|e| {
            let message = signature_mismatch(None, &e.expected, None, &e.got)
                .unwrap_or_else(|| "the arguments do not match the compiled signature".into());
            jit_error(message, e.got, at)
        })
    }

    /// The compiled executable (kernel count and types, for reports and tests).
    pub fn executable(&self) -> &Executable {
        &self.exe
    }

    /// What `jit`'s simplifier did to this program: its report (rules fired per region, stop
    /// reasons, costs and time) and whether its program was compiled. `None` under
    /// `.simplify(false)`.
    ///
    /// ```
    /// use kiln::prelude::*;
    /// // `x * 1` is `x` (exact): the simplifier's `mul_one` fires in jit's pipeline.
    /// let f = jit(|x: Tensor| (&x * 1.0).exp());
    /// let compiled = f.compiled(&Tensor::from_vec(&[3], vec![0.0f32, 1.0, 2.0]))?;
    /// let outcome = compiled.simplify_outcome().expect("jit simplifies by default");
    /// assert_eq!(outcome.report.fired("mul_one"), 1);
    /// # Ok::<(), kiln::Error>(())
    /// ```
    pub fn simplify_outcome(&self) -> Option<&SimplifyOutcome> {
        self.simplify.as_ref()
    }

    /// The parameter types, one per input leaf.
    pub fn param_types(&self) -> &[TensorType] {
        self.exe.param_types()
    }
}

/// An error of a jitted call: `jit: {message} (operands: ...) at {caller}`.
pub(crate) fn jit_error(message: String, got: Vec<TensorType>, at: &Location<'_>) -> Error {
    Error::Op { op: "jit".into(), operands: got, message, at: Some(SrcLoc::from_location(at)) }
}

fn list(types: &[TensorType]) -> String {
    let v: Vec<String> = types.iter().map(ToString::to_string).collect();
    format!("[{}]", v.join(", "))
}

/// What differs between an expected and a given signature (tree structure when known, then leaf
/// count, then the first leaf of another dtype or shape), or `None` if they match.
pub(crate) fn signature_mismatch(
    want_structure: Option<&str>,
    want: &[TensorType],
    got_structure: Option<&str>,
    got: &[TensorType],
) -> Option<String> {
    if let (Some(w), Some(g)) = (want_structure, got_structure)
        && w != g
    {
        return Some(format!(
            "expected arguments of tree structure {w} with leaves {}, got structure {g} with leaves {}",
            list(want),
            list(got)
        ));
    }
    if want.len() != got.len() {
        return Some(format!(
            "expected {} argument arrays {}, got {} {}",
            want.len(),
            list(want),
            got.len(),
            list(got)
        ));
    }
    let (i, (w, g)) = want.iter().zip(got).enumerate().find(|(_, (w, g))| w != g)?;
    let what = if w.dtype != g.dtype { "dtype" } else { "shape" };
    Some(format!(
        "argument leaf {i} has {what} {}, expected {} (expected leaves {}, got {})",
        if w.dtype != g.dtype { g.dtype.to_string() } else { g.shape.to_string() },
        if w.dtype != g.dtype { w.dtype.to_string() } else { w.shape.to_string() },
        list(want),
        list(got)
    ))
}
