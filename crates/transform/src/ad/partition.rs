//! Splitting a step's VJP function into a forward part and a backward part (partial evaluation by
//! graph partition), for reverse-mode `scan`.
//!
//! The input `g(primals.., cts..) -> (fwd outs.., bwd outs..)` is a traced VJP of a step. Every value
//! gets a *level*: `Const` (depends on no parameter), `Invariant` (only on loop-invariant primal
//! parameters, e.g. a scan's consts), `Varying` (on a per-step primal parameter) or `Backward` (on a
//! cotangent parameter). `Backward` equations go to `bwd`, `Varying` ones to `fwd`; `Const` and
//! `Invariant` ones are cheap to recompute and are emitted in whichever part uses them (both, if
//! both do), so they never become stored residuals. Cheap elementwise `Varying` equations may be
//! recomputed in `bwd` as well (rematerialization) when that stores fewer bytes per step. Residuals
//! are the `Varying` values computed in `fwd` that `bwd` uses; `bwd` also receives every primal parameter (see
//! [`Partition::primal_used_by_bwd`] for which it actually reads).

use super::mincut::{FlowNet, INF};
use kiln_ir::{BinaryOp, Function, Prim, TensorType, UnaryOp, Var};
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
    // Two candidate cuts: store every `Varying` value bwd reads, or also recompute cheap elementwise
    // `Varying` equations in bwd (rematerialization, like JAX's `checkpoint` policies) so that only
    // the inputs of costly ones are stored; the cut with fewer stored bytes per step wins.
    let (fwd_outs, bwd_outs) = g.outputs.split_at(n_fwd_out);
    let is_param = {
        let mut p = vec![false; g.vars.len()];
        for v in &g.params {
            p[v.index()] = true;
        }
        p
    };
    // `stored`: None stores every `Varying` value bwd reaches; Some(set) recomputes cheap `Varying`
    // equations in bwd unless their output is in the set.
    let cut = |stored: Option<&[bool]>| -> BwdCut {
        let mut need = vec![false; g.vars.len()];
        for v in bwd_outs {
            need[v.index()] = true;
        }
        let mut eqns = vec![false; g.eqns.len()];
        let mut defined = vec![false; g.vars.len()];
        for (i, eqn) in g.eqns.iter().enumerate().rev() {
            let remat = stored.is_some_and(|set| {
                recompute_is_cheap(&eqn.prim) && !eqn.outputs.iter().any(|v| set[v.index()])
            });
            let emit = eqn_level[i] != Level::Varying || remat;
            if emit && eqn.outputs.iter().any(|v| need[v.index()]) {
                eqns[i] = true;
                for v in &eqn.outputs {
                    defined[v.index()] = true;
                }
                for v in &eqn.inputs {
                    need[v.index()] = true;
                }
            }
        }
        // Residuals in definition order, so the listing is deterministic.
        let residuals: Vec<Var> = g
            .eqns
            .iter()
            .flat_map(|e| e.outputs.iter().copied())
            .filter(|v| {
                need[v.index()]
                    && level[v.index()] == Level::Varying
                    && !is_param[v.index()]
                    && !defined[v.index()]
            })
            .collect();
        // Per-step primal parameters bwd reads are stored too (a scan's carries).
        let params_read = g.params[..n_primal]
            .iter()
            .zip(invariant)
            .filter(|(p, inv)| !**inv && need[p.index()])
            .map(|(p, _)| *p);
        let stored_bytes = residuals.iter().copied().chain(params_read).map(|v| bytes(g.var_type(v))).sum();
        BwdCut { need, eqns, residuals, stored_bytes }
    };
    let store = cut(None);
    let min_cut = cheapest_stored_set(g, &level, &is_param, &store);
    let remat = cut(Some(&min_cut));
    let BwdCut { need: bwd_need, eqns: bwd_eqns, residuals, .. } =
        if remat.stored_bytes < store.stored_bytes { remat } else { store };

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

/// One way of cutting `g` between its halves: which values bwd needs, which equations it emits,
/// and what fwd stores for it.
struct BwdCut {
    need: Vec<bool>,
    eqns: Vec<bool>,
    residuals: Vec<Var>,
    /// Bytes stored per step: residuals plus the per-step primal parameters bwd reads.
    stored_bytes: usize,
}

fn bytes(t: &TensorType) -> usize {
    t.shape.size() * t.dtype.size_bytes()
}

/// Whether recomputing `prim` in the backward part is cheaper than storing its output: one pass over
/// its operands with a few instructions per element (arithmetic, comparisons, selects, conversions,
/// broadcasts). Transcendentals, data movement with indices, reductions and calls are stored.
fn recompute_is_cheap(prim: &Prim) -> bool {
    match prim {
        Prim::Unary(op) => match op {
            UnaryOp::Neg
            | UnaryOp::Abs
            | UnaryOp::Sign
            | UnaryOp::Floor
            | UnaryOp::Ceil
            | UnaryOp::Round
            | UnaryOp::RoundEven
            | UnaryOp::IsFinite
            | UnaryOp::Not => true,
            UnaryOp::Exp
            | UnaryOp::Expm1
            | UnaryOp::Log
            | UnaryOp::Log1p
            | UnaryOp::Sqrt
            | UnaryOp::Rsqrt
            | UnaryOp::Sin
            | UnaryOp::Cos
            | UnaryOp::Tanh
            | UnaryOp::Logistic
            | UnaryOp::Erf
            | UnaryOp::ErfInv => false,
        },
        Prim::Binary(op) => match op {
            BinaryOp::Add
            | BinaryOp::Sub
            | BinaryOp::Mul
            | BinaryOp::Div
            | BinaryOp::Max
            | BinaryOp::Min
            | BinaryOp::And
            | BinaryOp::Or
            | BinaryOp::Xor
            | BinaryOp::ShiftLeft
            | BinaryOp::ShiftRightLogical => true,
            BinaryOp::Rem | BinaryOp::Pow | BinaryOp::Atan2 => false,
        },
        Prim::Compare(_)
        | Prim::Select
        | Prim::Clamp
        | Prim::ConvertElementType { .. }
        | Prim::BitcastConvertType { .. }
        | Prim::Iota { .. }
        | Prim::BroadcastInDim { .. }
        | Prim::Reshape { .. }
        | Prim::StopGradient => true,
        Prim::Transpose { .. }
        | Prim::Rev { .. }
        | Prim::Slice { .. }
        | Prim::DynamicSlice { .. }
        | Prim::DynamicUpdateSlice
        | Prim::Concatenate { .. }
        | Prim::Pad { .. }
        | Prim::Reduce { .. }
        | Prim::ArgReduce { .. }
        | Prim::Cumulative { .. }
        | Prim::Sort { .. }
        | Prim::DotGeneral { .. }
        | Prim::Gather { .. }
        | Prim::Scatter { .. }
        | Prim::SegmentSum { .. }
        | Prim::Threefry2x32
        | Prim::CustomJvpCall { .. }
        | Prim::CustomVjpCall { .. }
        | Prim::Scan { .. }
        | Prim::WhileLoop { .. }
        | Prim::Cond { .. }
        | Prim::Call { .. }
        | Prim::Checkpoint { .. } => false,
    }
}

/// The `Varying` values to store so that bwd can recompute every other `Varying` value it reads
/// (`store.need`) through cheap equations, with the fewest bytes: a minimum vertex cut between
/// what cannot be recomputed (per-step parameters, outputs of costly equations) and what bwd reads
/// from non-`Varying` equations.
fn cheapest_stored_set(g: &Function, level: &[Level], is_param: &[bool], store: &BwdCut) -> Vec<bool> {
    let n = g.vars.len();
    let (s, t) = (0, 1);
    let (v_in, v_out) = (|v: usize| 2 + 2 * v, |v: usize| 3 + 2 * v);
    let mut net = FlowNet::new(2 + 2 * n);
    let varying = |v: usize| level[v] == Level::Varying;
    for v in (0..n).filter(|&v| varying(v)) {
        net.add_edge(v_in(v), v_out(v), bytes(&g.vars[v]).max(1) as u64);
        if is_param[v] {
            net.add_edge(s, v_in(v), INF);
        }
    }
    for eqn in &g.eqns {
        let cheap = recompute_is_cheap(&eqn.prim);
        for o in eqn.outputs.iter().map(|o| o.index()).filter(|&o| varying(o)) {
            if cheap {
                for u in eqn.inputs.iter().map(|u| u.index()).filter(|&u| varying(u)) {
                    net.add_edge(v_out(u), v_in(o), INF);
                }
            } else {
                net.add_edge(s, v_in(o), INF);
            }
        }
    }
    // Read by bwd: the `Varying` values the store-everything cut needs (it emits no `Varying`
    // equation in bwd, so each is stored or a parameter).
    for v in (0..n).filter(|&v| varying(v) && store.need[v]) {
        net.add_edge(v_out(v), t, INF);
    }
    let side = net.min_cut_source_side(s, t);
    (0..n).map(|v| varying(v) && side[v_in(v)] && !side[v_out(v)]).collect()
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
    use kiln_ir::DType;

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
    /// A straight-through Bernoulli draw like the epidemic model's: four costly logs joined by cheap
    /// adds into `logit`; the forward output is `logit > 0` and bwd reads `logit` through cheap ops
    /// and `sigmoid(logit)`. g(p, u, ct) = ([logit > 0] as f64, ct · s(1 − s) · (1 + [logit > 0])).
    fn bernoulli_like() -> Function {
        let s = TensorType::new(DType::F64, [4]);
        crate::trace_function(&[s.clone(), s.clone(), s], |a| {
            let (p, u, ct) = (&a[0], &a[1], &a[2]);
            let logit = p.log() - (1.0 - p).log() + u.log() - (1.0 - u).log();
            let hard = logit.gt(&Tensor::scalar(0.0f64)).astype(DType::F64);
            let sig = logit.sigmoid();
            let back = &(ct * &(&sig * &(1.0 - &sig))) * &(&hard + 1.0);
            vec![hard, back]
        })
    }

    #[test]
    fn cheap_joins_of_costly_values_store_the_join_not_the_inputs() {
        let p = partition(&bernoulli_like(), &[false, false], 1);
        // Stored: the bool `logit > 0` (hard is recomputed from it) and sigmoid(logit): 4 + 32 B
        // per step, not the four logs and the sigmoid (5 × 32 B).
        let want = [TensorType::new(DType::Bool, [4]), TensorType::new(DType::F64, [4])];
        assert_eq!(p.residual_types, want.to_vec());
        assert_eq!(p.primal_used_by_bwd, vec![false, false]);
        assert_eq!(count(&p.bwd, |q| *q == Prim::Unary(UnaryOp::Log)), 0);
        assert_eq!(count(&p.bwd, |q| *q == Prim::Unary(UnaryOp::Logistic)), 0);
    }

    #[test]
    fn rematerialized_halves_equal_the_whole_bitwise() {
        let g = bernoulli_like();
        let p = partition(&g, &[false, false], 1);
        let pr = f64s(&[4], &[0.1, 0.5, 0.9, 0.3]);
        let u = f64s(&[4], &[0.7, 0.2, 0.05, 0.6]);
        let ct = f64s(&[4], &[1.0, -2.0, 0.5, 3.0]);
        let whole = crate::replay(&g, &[pr.clone(), u.clone(), ct.clone()]);
        let f = crate::replay(&p.fwd, &[pr.clone(), u.clone()]);
        let b = crate::replay(&p.bwd, &[pr, u, f[1].clone(), f[2].clone(), ct]);
        assert_eq!(f[0].to_vec::<f64>(), whole[0].to_vec::<f64>());
        // Bitwise: bwd recomputes `hard` with the same operation on the stored comparison.
        let bits = |t: &Tensor| t.to_vec::<f64>().iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&b[0]), bits(&whole[1]));
        // By hand for the first element: logit = log(0.1/0.9) + log(0.7/0.3) < 0, so hard = 0 and
        // back = ct · s(1 − s) with s = sigmoid(logit).
        let logit = (0.1f64 / 0.9).ln() + (0.7f64 / 0.3).ln();
        let sig = 1.0 / (1.0 + (-logit).exp());
        assert!((b[0].to_vec::<f64>()[0] - sig * (1.0 - sig)).abs() < 1e-15);
    }
}
