//! Splitting a step's VJP function into a forward part and a backward part (partial evaluation by
//! graph partition), for reverse-mode `scan`.
//!
//! The input `g(primals.., cts..) -> (fwd outs.., bwd outs..)` is a traced VJP of a step. Every value
//! gets a *level*: `Const` (depends on no parameter), `Invariant` (only on loop-invariant primal
//! parameters, e.g. a scan's consts), `Varying` (on a per-step primal parameter) or `Backward` (on a
//! cotangent parameter). `Backward` equations go to `bwd`, `Varying` ones to `fwd`; `Const` and
//! `Invariant` ones are cheap to recompute and are emitted in whichever part uses them (both, if
//! both do), so they never become stored residuals. Residuals are the `Varying` values computed in
//! `fwd` that `bwd` uses; `bwd` also receives every primal parameter (see
//! [`Partition::primal_used_by_bwd`] for which it actually reads).

use kiln_ir::{Function, TensorType, Var};
use kiln_trace::{Tensor, at_location, lax};

/// How a value depends on the parameters, ordered so that an equation's level is its inputs' max.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Level {
    Const,
    Invariant,
    Varying,
    Backward,
}

/// The two halves of a step's VJP.
#[derive(Debug)]
pub(crate) struct Partition {
    /// `fwd(primals..) -> (g's first n_fwd_out outputs.., residuals..)`.
    pub fwd: Function,
    /// `bwd(primals.., residuals.., cts..) -> (g's remaining outputs..)`.
    pub bwd: Function,
    /// The residual types, in order.
    pub residual_types: Vec<TensorType>,
    /// For each primal parameter: whether `bwd` reads it (others may be passed as anything of the
    /// right type, e.g. zeros).
    pub primal_used_by_bwd: Vec<bool>,
}

/// Partitions `g`, whose first `invariant.len()` parameters are primal (`invariant[i]` marking the
/// loop-invariant ones) and the rest cotangents, and whose first `n_fwd_out` outputs are forward.
pub(crate) fn partition(g: &Function, invariant: &[bool], n_fwd_out: usize) -> Partition {
    let n_primal = invariant.len();
    assert!(n_primal <= g.params.len() && n_fwd_out <= g.outputs.len(), "partition: bad split");
    let mut level = vec![Level::Const; g.vars.len()];
    for (i, p) in g.params.iter().enumerate() {
        level[p.index()] = match invariant.get(i) {
            Some(true) => Level::Invariant,
            Some(false) => Level::Varying,
            None => Level::Backward,
        };
    }
    let mut eqn_level = Vec::with_capacity(g.eqns.len());
    for eqn in &g.eqns {
        let l = eqn.inputs.iter().map(|v| level[v.index()]).max().unwrap_or(Level::Const);
        for v in &eqn.outputs {
            level[v.index()] = l;
        }
        eqn_level.push(l);
    }

    // What the backward part needs: walk back from its outputs through equations it must emit
    // (`Backward` ones, and cheap ones it recomputes); `Varying` values it reaches are residuals.
    let (fwd_outs, bwd_outs) = g.outputs.split_at(n_fwd_out);
    let mut bwd_need = vec![false; g.vars.len()];
    for v in bwd_outs {
        bwd_need[v.index()] = true;
    }
    let mut bwd_eqns = vec![false; g.eqns.len()];
    for (i, eqn) in g.eqns.iter().enumerate().rev() {
        if eqn_level[i] != Level::Varying && eqn.outputs.iter().any(|v| bwd_need[v.index()]) {
            bwd_eqns[i] = true;
            for v in &eqn.inputs {
                bwd_need[v.index()] = true;
            }
        }
    }
    let is_param = {
        let mut p = vec![false; g.vars.len()];
        for v in &g.params {
            p[v.index()] = true;
        }
        p
    };
    // Residuals in definition order, so the listing is deterministic.
    let residuals: Vec<Var> = g
        .eqns
        .iter()
        .flat_map(|e| e.outputs.iter().copied())
        .filter(|v| bwd_need[v.index()] && level[v.index()] == Level::Varying && !is_param[v.index()])
        .collect();

    // What the forward part needs: its outputs and the residuals.
    let mut fwd_need = vec![false; g.vars.len()];
    for v in fwd_outs.iter().chain(&residuals) {
        fwd_need[v.index()] = true;
    }
    let mut fwd_eqns = vec![false; g.eqns.len()];
    for (i, eqn) in g.eqns.iter().enumerate().rev() {
        if eqn_level[i] != Level::Backward && eqn.outputs.iter().any(|v| fwd_need[v.index()]) {
            fwd_eqns[i] = true;
            for v in &eqn.inputs {
                fwd_need[v.index()] = true;
            }
        }
    }

    let primal_types: Vec<TensorType> = g.param_types()[..n_primal].to_vec();
    let ct_types: Vec<TensorType> = g.param_types()[n_primal..].to_vec();
    let residual_types: Vec<TensorType> = residuals.iter().map(|v| g.var_type(*v).clone()).collect();
    let primal_used_by_bwd = g.params[..n_primal].iter().map(|p| bwd_need[p.index()]).collect();

    let fwd = crate::trace_function(&primal_types, |args| {
        let mut env = Env::new(g);
        env.bind(&g.params[..n_primal], &args);
        env.run(g, &fwd_eqns);
        env.get_all(fwd_outs.iter().chain(&residuals))
    });
    let bwd_types: Vec<TensorType> =
        primal_types.iter().chain(&residual_types).chain(&ct_types).cloned().collect();
    let bwd = crate::trace_function(&bwd_types, |args| {
        let (primals, rest) = args.split_at(n_primal);
        let (res, cts) = rest.split_at(residuals.len());
        let mut env = Env::new(g);
        env.bind(&g.params[..n_primal], primals);
        env.bind(&residuals, res);
        env.bind(&g.params[n_primal..], cts);
        env.run(g, &bwd_eqns);
        env.get_all(bwd_outs.iter())
    });
    Partition { fwd, bwd, residual_types, primal_used_by_bwd }
}

/// Tensors bound to a function's variables while re-emitting a subset of its equations.
struct Env(Vec<Option<Tensor>>);

impl Env {
    fn new(g: &Function) -> Env {
        let mut env = vec![None; g.vars.len()];
        for c in &g.consts {
            env[c.var.index()] = Some(Tensor::from_shared(c.value.clone()));
        }
        Env(env)
    }

    fn bind(&mut self, vars: &[Var], values: &[Tensor]) {
        for (v, t) in vars.iter().zip(values) {
            self.0[v.index()] = Some(t.clone());
        }
    }

    fn get(&self, v: Var) -> Tensor {
        self.0[v.index()].clone().expect("partition: value of the other part used")
    }

    fn get_all<'a>(&self, vars: impl Iterator<Item = &'a Var>) -> Vec<Tensor> {
        vars.map(|v| self.get(*v)).collect()
    }

    /// Emits the selected equations of `g` (in order) on the bound values.
    fn run(&mut self, g: &Function, selected: &[bool]) {
        for (eqn, _) in g.eqns.iter().zip(selected).filter(|(_, s)| **s) {
            let ins: Vec<Tensor> = eqn.inputs.iter().map(|v| self.get(*v)).collect();
            let refs: Vec<&Tensor> = ins.iter().collect();
            let outs = at_location(eqn.loc.as_ref(), || lax::bind(eqn.prim.clone(), &refs));
            self.bind(&eqn.outputs, &outs);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kiln_ir::{DType, Prim, UnaryOp};

    fn f64s(shape: &[usize], v: &[f64]) -> Tensor {
        Tensor::from_vec(shape, v.to_vec())
    }

    fn count(f: &Function, pred: impl Fn(&Prim) -> bool) -> usize {
        f.eqns.iter().filter(|e| pred(&e.prim)).count()
    }

    /// g(a: invariant, c: varying, ct) = (c * c, ct * sin(c) * cos(a), ct * 2).
    fn example() -> Function {
        let s = TensorType::new(DType::F64, [2]);
        crate::trace_function(&[s.clone(), s.clone(), s], |p| {
            let (a, c, ct) = (&p[0], &p[1], &p[2]);
            vec![c * c, &(ct * &c.sin()) * &a.cos(), ct * 2.0]
        })
    }

    #[test]
    fn residuals_are_varying_values_used_backward() {
        let p = partition(&example(), &[true, false], 1);
        // sin(c) is the only stored residual; cos(a) is loop-invariant and recomputed backward.
        assert_eq!(p.residual_types, vec![TensorType::new(DType::F64, [2])]);
        assert_eq!(p.primal_used_by_bwd, vec![true, false]);
        assert_eq!(count(&p.fwd, |q| *q == Prim::Unary(UnaryOp::Sin)), 1);
        assert_eq!(count(&p.fwd, |q| *q == Prim::Unary(UnaryOp::Cos)), 0);
        assert_eq!(count(&p.bwd, |q| *q == Prim::Unary(UnaryOp::Sin)), 0);
        assert_eq!(count(&p.bwd, |q| *q == Prim::Unary(UnaryOp::Cos)), 1);
        assert_eq!(p.fwd.params.len(), 2);
        assert_eq!(p.fwd.outputs.len(), 2);
        assert_eq!(p.bwd.params.len(), 4);
        assert_eq!(p.bwd.outputs.len(), 2);
    }

    #[test]
    fn halves_compose_to_the_whole() {
        let p = partition(&example(), &[true, false], 1);
        let (a, c, ct) = (f64s(&[2], &[0.0, 1.0]), f64s(&[2], &[0.5, -2.0]), f64s(&[2], &[3.0, -1.0]));
        let f = crate::replay(&p.fwd, &[a.clone(), c.clone()]);
        // c * c = [0.25, 4].
        assert_eq!(f[0].to_vec::<f64>(), vec![0.25, 4.0]);
        assert_eq!(f[1].to_vec::<f64>(), vec![0.5f64.sin(), (-2.0f64).sin()]);
        let b = crate::replay(&p.bwd, &[a, c, f[1].clone(), ct]);
        // ct * sin(c) * cos(a): [3 sin(0.5) cos(0), -sin(-2) cos(1)]; ct * 2 = [6, -2].
        let want = [3.0 * 0.5f64.sin() * 0.0f64.cos(), -(-2.0f64).sin() * 1.0f64.cos()];
        assert_eq!(b[0].to_vec::<f64>(), want.to_vec());
        assert_eq!(b[1].to_vec::<f64>(), vec![6.0, -2.0]);
    }

    #[test]
    fn constants_are_recomputed_not_stored() {
        // g(c, ct) = (c + 1, ct * (c + 1), zeros): zeros is a constant computation, c + 1 is stored.
        let s = TensorType::new(DType::F64, [3]);
        let g = crate::trace_function(&[s.clone(), s.clone()], |p| {
            let c1 = &p[0] + 1.0;
            let z = super::super::zeros_of(&s);
            vec![c1.clone(), &p[1] * &c1, z]
        });
        let p = partition(&g, &[false], 1);
        assert_eq!(p.residual_types.len(), 1);
        assert_eq!(p.primal_used_by_bwd, vec![false]);
        let b = crate::replay(
            &p.bwd,
            &[f64s(&[3], &[0.0; 3]), f64s(&[3], &[1.0, 2.0, 3.0]), f64s(&[3], &[2.0; 3])],
        );
        assert_eq!(b[0].to_vec::<f64>(), vec![2.0, 4.0, 6.0]);
        assert_eq!(b[1].to_vec::<f64>(), vec![0.0; 3]);
    }

    #[test]
    fn primal_param_used_backward_is_flagged_not_a_residual() {
        // g(c, ct) = (c, ct * c): bwd reads c itself.
        let s = TensorType::new(DType::F64, []);
        let g = crate::trace_function(&[s.clone(), s], |p| vec![p[0].clone(), &p[1] * &p[0]]);
        let p = partition(&g, &[false], 1);
        assert!(p.residual_types.is_empty());
        assert_eq!(p.primal_used_by_bwd, vec![true]);
        let b = crate::replay(&p.bwd, &[Tensor::scalar(3.0f64), Tensor::scalar(-2.0f64)]);
        assert_eq!(b[0].item::<f64>(), -6.0);
    }
}
