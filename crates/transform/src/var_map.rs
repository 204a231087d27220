//! Copying equations of one function into another: the bookkeeping the scan rewrites
//! ([`crate::hoist_scan_invariants`], [`crate::precompute_scan_xs_work`]) share — which variable
//! of the function being built stands for each variable of the source, pushing a source equation
//! with its operands renamed, and rebuilding a whole function equation by equation.

use kiln_ir::{Eqn, Function, Var};

/// The variables of a source function as variables of the function being built.
pub(crate) struct VarMap(Vec<Option<Var>>);

impl VarMap {
    /// No variable of `src` mapped yet.
    pub(crate) fn new(src: &Function) -> VarMap {
        VarMap(vec![None; src.vars.len()])
    }

    /// `from` (of the source) is `to` (of the function being built).
    pub(crate) fn set(&mut self, from: Var, to: Var) {
        self.0[from.index()] = Some(to);
    }

    /// What `v` is mapped to; the source is in SSA form, so every operand was mapped before use.
    pub(crate) fn at(&self, v: Var) -> Var {
        self.0[v.index()].expect("defined before use (SSA)")
    }

    /// Whether `v` is mapped.
    pub(crate) fn has(&self, v: Var) -> bool {
        self.0[v.index()].is_some()
    }

    /// Maps `src`'s parameters `params` to new parameters of `g`, in that order.
    pub(crate) fn add_params<'v>(
        &mut self,
        g: &mut Function,
        src: &Function,
        params: impl IntoIterator<Item = &'v Var>,
    ) {
        for p in params {
            self.set(*p, g.add_param(src.var_type(*p).clone()));
        }
    }

    /// Maps every constant (captured array) of `src` to a constant of `g`.
    pub(crate) fn add_consts(&mut self, g: &mut Function, src: &Function) {
        for c in &src.consts {
            self.set(c.var, g.add_const(c.value.clone()));
        }
    }

    /// Maps the constants of `src` that `e` reads and that are not mapped yet to constants of `g`
    /// (a body's captured arrays read by equations moved out of it).
    pub(crate) fn add_consts_read(&mut self, g: &mut Function, src: &Function, e: &Eqn) {
        for v in &e.inputs {
            if !self.has(*v)
                && let Some(c) = src.consts.iter().find(|c| c.var == *v)
            {
                self.set(*v, g.add_const(c.value.clone()));
            }
        }
    }

    /// `e`'s operands as variables of the function being built.
    pub(crate) fn inputs(&self, e: &Eqn) -> Vec<Var> {
        e.inputs.iter().map(|v| self.at(*v)).collect()
    }

    /// Pushes `e` into `g` with its operands renamed, and maps its results.
    pub(crate) fn push(&mut self, g: &mut Function, e: &Eqn) {
        let ys = g
            .push(e.prim.clone(), &self.inputs(e), e.loc.clone())
            .expect("an equation of a verified function");
        self.set_outputs(e, &ys);
    }

    /// Maps `e`'s results to `ys`.
    pub(crate) fn set_outputs(&mut self, e: &Eqn, ys: &[Var]) {
        for (o, n) in e.outputs.iter().zip(ys) {
            self.set(*o, *n);
        }
    }

    /// `vs` as variables of the function being built.
    pub(crate) fn all(&self, vs: &[Var]) -> Vec<Var> {
        vs.iter().map(|v| self.at(*v)).collect()
    }
}

/// `f` rebuilt equation by equation: its parameters and constants copied, then `each(g, e, ins)`
/// called for every equation `e` with its operands as variables of the new function `g`, returning
/// the results that stand for `e`'s.
pub(crate) fn rebuild(
    f: &Function,
    mut each: impl FnMut(&mut Function, &Eqn, Vec<Var>) -> Vec<Var>,
) -> Function {
    let mut g = Function::new();
    let mut map = VarMap::new(f);
    map.add_params(&mut g, f, &f.params);
    map.add_consts(&mut g, f);
    for e in &f.eqns {
        let ins = map.inputs(e);
        let outs = each(&mut g, e, ins);
        map.set_outputs(e, &outs);
    }
    g.outputs = map.all(&f.outputs);
    g
}

/// Pushes `f`'s equations into `g` with `f`'s parameters bound to `args` (its constants become
/// constants of `g`); returns its outputs.
pub(crate) fn inline(g: &mut Function, f: &Function, args: &[Var]) -> Vec<Var> {
    let mut map = VarMap::new(f);
    for (p, a) in f.params.iter().zip(args) {
        map.set(*p, *a);
    }
    map.add_consts(g, f);
    for e in &f.eqns {
        map.push(g, e);
    }
    map.all(&f.outputs)
}
