//! The verifier: checks the structural and typing invariants of a [`Function`] and reports every
//! violation, each with its location.
//!
//! Invariants checked, for the function and (recursively) for every sub-function:
//!
//! - **Var ids in range**: every variable named anywhere — parameters, constants, equation inputs and
//!   outputs, function outputs — is an index into [`Function::vars`] (`< vars.len()`).
//! - **Single definition**: each variable is defined at most once, by a parameter, a constant or an
//!   equation output; a second definition is reported where it happens, naming the first.
//! - **Definition before use**: every equation input is defined by a parameter, a constant or an
//!   *earlier* equation; a use before a later definition and a use of a never-defined variable are
//!   reported as such.
//! - **Outputs defined**: every function output is defined.
//! - **Constant types**: each constant's value type ([`crate::Array::ty`]) equals its variable's type.
//! - **Well-typed equations**: [`crate::output_types`] accepts each equation's primitive and input
//!   types (its [`crate::TypeError`] is reported otherwise), and the equation declares exactly the
//!   outputs, in number and type, that the rule gives. For control flow the rule also checks that
//!   the sub-functions' signatures fit the operands.
//! - **Sub-functions**: the sub-functions of each equation ([`Prim::subfunctions`]) satisfy all of
//!   the above, in their own variable space (they are closed). Their errors are nested under the
//!   owning equation, e.g. `eqn 4 (scan) > body > eqn 1 (mul)`.
//!
//! A verifier error is a bug in whatever produced the IR — the tracer, a transform, the parser's
//! caller or a hand-built function — not in the user's program: well-formed user code only ever yields
//! verified IR, and user type errors are reported (as [`crate::TypeError`]s) when tracing.
//!
//! Like Cranelift's verifier, this one does not stop at the first error: it keeps going and collects
//! them all, in program order (parameters, constants, equations, outputs). It never panics: an
//! out-of-range id is reported, and checks that would need it (the type of an equation using it) are
//! skipped. An equation whose sub-functions have errors is not type-checked either, since its shape
//! rule would read the broken sub-function's signature; the nested errors say what to fix first.
//!
//! Locations are `param N`, `const N`, `eqn N (prim)` (followed by ` at file:line:column` when the
//! equation records its user call site) and `output N`; inside a sub-function they are prefixed with
//! the owning equation and the sub-function's role (`body`, `cond`, `branch 1`, `fun`, `jvp`, `fwd`,
//! `bwd`), joined by ` > `.

use crate::{Function, TensorType, Var};
use std::fmt;

/// One broken invariant, with its location.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifyError {
    /// Where: e.g. `eqn 3 (add)`, `output 0` or `eqn 5 (scan) > body > eqn 0 (mul)`.
    pub location: String,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for VerifyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.location, self.message)
    }
}

/// Every error the verifier found, in program order.
///
/// `Display` prints one line per error, then `N verifier errors detected`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifyErrors(pub Vec<VerifyError>);

impl fmt::Display for VerifyErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for e in &self.0 {
            writeln!(f, "{e}")?;
        }
        write!(f, "{} verifier errors detected", self.0.len())
    }
}

impl std::error::Error for VerifyErrors {}

/// Checks the invariants of `f` and, recursively, of its sub-functions: variable ids in range, each
/// variable defined exactly once and before its uses, outputs defined, constants of their variables'
/// types, equations well-typed by [`crate::output_types`] with the declared outputs. Every violation
/// is collected (it does not stop at the first) with a location such as `eqn 4 (scan) > body > eqn 1
/// (mul)`; it never panics.
///
/// A failure is a bug in whatever produced `f` (the tracer, a transform, a hand-built function), not
/// in the user's program.
///
/// # Errors
/// All the [`VerifyError`]s found, in program order.
pub fn verify(f: &Function) -> Result<(), VerifyErrors> {
    let mut errors = Vec::new();
    Checker::new(f, String::new(), &mut errors).run();
    if errors.is_empty() { Ok(()) } else { Err(VerifyErrors(errors)) }
}

/// Where a variable is defined.
#[derive(Clone, Copy)]
enum Site {
    Param(usize),
    Const(usize),
    Eqn(usize),
}

/// The location of equation `i` of `f`, without prefix.
fn eqn_location(f: &Function, i: usize) -> String {
    let eqn = &f.eqns[i];
    match &eqn.loc {
        Some(loc) => format!("eqn {i} ({}) at {loc}", eqn.prim.name()),
        None => format!("eqn {i} ({})", eqn.prim.name()),
    }
}

/// `[f32[3], i32[]]`, with `?` for types that cannot be known (out-of-range ids).
fn fmt_type_list<'t>(types: impl IntoIterator<Item = Option<&'t TensorType>>) -> String {
    let parts: Vec<String> =
        types.into_iter().map(|t| t.map_or_else(|| "?".to_string(), |t| t.to_string())).collect();
    format!("[{}]", parts.join(", "))
}

/// Verification state for one function (sub-functions get their own).
struct Checker<'a> {
    f: &'a Function,
    /// Prepended to every location: empty at top level, `eqn 4 (scan) > body > ` inside.
    prefix: String,
    errors: &'a mut Vec<VerifyError>,
    /// The first definition of each variable in program order, whether before its uses or not: tells
    /// "used before its definition" from "never defined", and names the original of a redefinition.
    first_def: Vec<Option<Site>>,
    /// Variables defined so far in the walk.
    defined: Vec<bool>,
}

impl<'a> Checker<'a> {
    fn new(f: &'a Function, prefix: String, errors: &'a mut Vec<VerifyError>) -> Checker<'a> {
        let n = f.vars.len();
        let mut first_def = vec![None; n];
        let mut note = |v: Var, site: Site| {
            if let Some(slot @ None) = first_def.get_mut(v.index()) {
                *slot = Some(site);
            }
        };
        f.params.iter().enumerate().for_each(|(i, v)| note(*v, Site::Param(i)));
        f.consts.iter().enumerate().for_each(|(i, c)| note(c.var, Site::Const(i)));
        for (i, eqn) in f.eqns.iter().enumerate() {
            eqn.outputs.iter().for_each(|v| note(*v, Site::Eqn(i)));
        }
        Checker { f, prefix, errors, first_def, defined: vec![false; n] }
    }

    fn report(&mut self, location: &str, message: String) {
        self.errors.push(VerifyError { location: format!("{}{location}", self.prefix), message });
    }

    fn site(&self, site: Site) -> String {
        match site {
            Site::Param(i) => format!("param {i}"),
            Site::Const(i) => format!("const {i}"),
            Site::Eqn(i) => eqn_location(self.f, i),
        }
    }

    /// The declared type of `v`, or `None` (reported by the caller) when the id is out of range.
    fn ty(&self, v: Var) -> Option<&'a TensorType> {
        self.f.vars.get(v.index())
    }

    fn out_of_range(&self, what: &str, v: Var) -> String {
        format!("{what}{v:?} is out of range (the function has {} variables)", self.f.vars.len())
    }

    /// Records the definition of `v` at `site`; `what` (e.g. `output 1: `) qualifies the message.
    fn define(&mut self, v: Var, location: &str, what: &str) {
        let message = match self.defined.get(v.index()) {
            None => self.out_of_range(what, v),
            Some(true) => {
                // Defined means first_def was set (both walks go in program order).
                let first = self.first_def[v.index()].map_or_else(String::new, |s| self.site(s));
                format!("{what}{v:?} is already defined by {first}")
            }
            Some(false) => {
                self.defined[v.index()] = true;
                return;
            }
        };
        self.report(location, message);
    }

    /// Checks that `v` is defined at this point of the walk.
    fn use_var(&mut self, v: Var, location: &str, what: &str) {
        let message = match self.defined.get(v.index()) {
            None => self.out_of_range(what, v),
            Some(true) => return,
            Some(false) => match self.first_def[v.index()] {
                Some(site) => format!("{what}{v:?} is used before its definition by {}", self.site(site)),
                None => format!("{what}{v:?} is never defined"),
            },
        };
        self.report(location, message);
    }

    fn run(&mut self) {
        let f = self.f;
        for (i, v) in f.params.iter().enumerate() {
            self.define(*v, &format!("param {i}"), "");
            // Equation results are checked by their shape rules; a parameter has none.
            if let Some(Err(m)) = self.ty(*v).map(TensorType::check_addressable) {
                self.report(&format!("param {i}"), format!("{v:?}: type {m}"));
            }
        }
        for (i, c) in f.consts.iter().enumerate() {
            let location = format!("const {i}");
            self.define(c.var, &location, "");
            if let Some(declared) = self.ty(c.var) {
                let actual = c.value.ty();
                if &actual != declared {
                    let v = c.var;
                    self.report(
                        &location,
                        format!("value has type {actual} but {v:?} is declared {declared}"),
                    );
                }
            }
        }
        for i in 0..f.eqns.len() {
            self.eqn(i);
        }
        for (i, v) in f.outputs.iter().enumerate() {
            // Every definition precedes the outputs, so "not yet defined" is "never defined".
            self.use_var(*v, &format!("output {i}"), "");
        }
    }

    fn eqn(&mut self, i: usize) {
        let f = self.f;
        let eqn = &f.eqns[i];
        let location = eqn_location(f, i);
        for (j, v) in eqn.inputs.iter().enumerate() {
            self.use_var(*v, &location, &format!("input {j}: "));
        }

        let mut subs_ok = true;
        for (role, sub) in eqn.prim.named_subfunctions() {
            let before = self.errors.len();
            let prefix = format!("{}{location} > {role} > ", self.prefix);
            Checker::new(sub, prefix, self.errors).run();
            subs_ok &= self.errors.len() == before;
        }

        // Type-check only when every input type is known and the shape rule can trust the
        // sub-functions (it reads their signatures, which index their `vars`).
        let in_types: Option<Vec<TensorType>> = eqn.inputs.iter().map(|v| self.ty(*v).cloned()).collect();
        if let (Some(in_types), true) = (in_types, subs_ok) {
            self.check_types(i, &location, &in_types);
        }

        for (k, v) in eqn.outputs.iter().enumerate() {
            self.define(*v, &location, &format!("output {k}: "));
        }
    }

    /// Invariant 6: the shape rule accepts the inputs and gives the declared outputs.
    fn check_types(&mut self, i: usize, location: &str, in_types: &[TensorType]) {
        let eqn = &self.f.eqns[i];
        let name = eqn.prim.name();
        let expected = match crate::output_types(&eqn.prim, in_types) {
            Ok(ts) => ts,
            Err(e) => return self.report(location, format!("ill-typed: {e}")),
        };
        let declared: Vec<Option<&TensorType>> = eqn.outputs.iter().map(|v| self.ty(*v)).collect();
        if expected.len() != declared.len() {
            let message = format!(
                "declares {} outputs {} but {name} gives {} outputs {}",
                declared.len(),
                fmt_type_list(declared.iter().copied()),
                expected.len(),
                fmt_type_list(expected.iter().map(Some)),
            );
            return self.report(location, message);
        }
        for (k, (v, want)) in eqn.outputs.iter().zip(&expected).enumerate() {
            // An out-of-range output has no declared type; `define` reports it.
            if let Some(got) = declared[k].filter(|got| *got != want) {
                let message = format!("output {k}: {v:?} is declared {got} but {name} gives {want}");
                self.report(location, message);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{BinaryOp, DType, Prim};

    /// The named and the mutable listings of sub-functions (two exhaustive matches in prim.rs) agree:
    /// the same functions in the same order.
    #[test]
    fn named_subfunctions_match_prim_subfunctions() {
        let mut a = Function::new();
        let x = a.add_param(TensorType::scalar(DType::F32));
        a.outputs.push(x);
        let mut b = a.clone();
        b.add_param(TensorType::scalar(DType::I32));
        let prims = [
            Prim::Binary(BinaryOp::Add),
            Prim::CustomJvpCall { fun: Box::new(a.clone()), jvp: Box::new(b.clone()) },
            Prim::CustomVjpCall {
                fun: Box::new(b.clone()),
                fwd: Box::new(a.clone()),
                bwd: Box::new(b.clone()),
            },
            Prim::Scan { length: 0, reverse: false, num_consts: 0, num_carry: 1, body: Box::new(a.clone()) },
            Prim::WhileLoop {
                cond: Box::new(a.clone()),
                body: Box::new(b.clone()),
                cond_consts: 0,
                body_consts: 0,
                max_iters: None,
            },
            Prim::Cond { branches: vec![a.clone(), b.clone(), a.clone()] },
            Prim::Call { body: Box::new(b.clone()) },
            Prim::Checkpoint { body: Box::new(a.clone()) },
        ];
        for p in &prims {
            let mut q = p.clone();
            let muts: Vec<*const Function> =
                q.subfunctions_mut().into_iter().map(|f| f as *const Function).collect();
            let named: Vec<*const Function> =
                q.named_subfunctions().into_iter().map(|(_, f)| f as *const Function).collect();
            assert_eq!(named, muts, "{}", p.name());
        }
        let roles: Vec<String> =
            prims[5].named_subfunctions().into_iter().map(|(r, _)| r).collect::<Vec<_>>();
        assert_eq!(roles, ["branch 0", "branch 1", "branch 2"]);
    }
}
