//! The simplifier's cost stays about linear in the program: the extractor's work counter is bounded
//! by a small multiple of the e-graph's nodes on deep, wide, heavily shared programs (the shape of a
//! 20-step rollout's gradient, where a re-pricing worklist took minutes), and the time bounds keep
//! regions as written, with the reason in the report, when they cannot finish.

mod simplify_common;

use kiln_ir::{Array, BinaryOp, DType, Function, Prim, ReduceOp, Shape, TensorType, UnaryOp, Var};
use kiln_transform::{SimplifyOptions, StopReason, simplify};
use simplify_common::{assert_same_values, untimed};
use std::time::Duration;

const N: usize = 8;

/// A deterministic program of about `n` equations over f32[8]: every value reads the 2–4 most
/// recent values (a deep chain, each value shared by several consumers, like unrolled time steps
/// and their adjoints), with splat constants, `x*1`, `neg(neg x)`, `x - neg y` and
/// broadcast→reduce patterns so that many classes get several equivalent nodes at every depth.
fn deep_wide(n: usize) -> Function {
    let mut f = Function::new();
    let mut pool: Vec<Var> = (0..4).map(|_| f.add_param(TensorType::new(DType::F32, [N]))).collect();
    let splat = |f: &mut Function, x: f32| {
        let s = f.add_const(Array::scalar(x));
        f.push(Prim::BroadcastInDim { shape: Shape::new(&[N]), broadcast_dimensions: vec![] }, &[s], None)
            .unwrap()[0]
    };
    let one = splat(&mut f, 1.0);
    let half = splat(&mut f, 0.5);
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut rnd = |m: usize| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % m as u64) as usize
    };
    let push = |f: &mut Function, p: Prim, ins: &[Var]| f.push(p, ins, None).unwrap()[0];
    while f.eqns.len() < n {
        let len = pool.len();
        let x = pool[len - 1 - rnd(2)];
        let y = pool[len - 2 - rnd(len.min(4) - 1)];
        let v = match rnd(8) {
            0 => push(&mut f, Prim::Binary(BinaryOp::Add), &[x, y]),
            1 => push(&mut f, Prim::Binary(BinaryOp::Mul), &[x, y]),
            2 => {
                let a = push(&mut f, Prim::Binary(BinaryOp::Mul), &[x, one]);
                push(&mut f, Prim::Binary(BinaryOp::Add), &[a, y])
            }
            3 => {
                let a = push(&mut f, Prim::Unary(UnaryOp::Neg), &[y]);
                push(&mut f, Prim::Binary(BinaryOp::Sub), &[x, a])
            }
            4 => {
                let a = push(&mut f, Prim::Unary(UnaryOp::Neg), &[x]);
                let b = push(&mut f, Prim::Unary(UnaryOp::Neg), &[a]);
                push(&mut f, Prim::Binary(BinaryOp::Mul), &[b, y])
            }
            5 => {
                let a = push(&mut f, Prim::Binary(BinaryOp::Mul), &[x, half]);
                push(&mut f, Prim::Unary(UnaryOp::Tanh), &[a])
            }
            6 => {
                let b = push(
                    &mut f,
                    Prim::BroadcastInDim { shape: Shape::new(&[3, N]), broadcast_dimensions: vec![1] },
                    &[x],
                );
                let r = push(&mut f, Prim::Reduce { op: ReduceOp::Max, axes: vec![0] }, &[b]);
                push(&mut f, Prim::Binary(BinaryOp::Sub), &[r, y])
            }
            _ => push(&mut f, Prim::Binary(BinaryOp::Max), &[x, y]),
        };
        pool.push(v);
    }
    let len = pool.len();
    f.outputs = vec![pool[len - 1], pool[len - 2], pool[len / 2]];
    kiln_transform::dce(&f)
}

#[test]
fn extractor_work_is_linear_in_the_egraph_on_deep_shared_programs() {
    for n in [300, 900, 3000] {
        let f = deep_wide(n);
        let (g, report) = simplify(&f, &untimed());
        println!("{n} eqns:\n{report}");
        assert!(report.fired("mul_one") > 0 && report.fired("neg_neg") > 0, "the rules make alternatives");
        for r in &report.regions {
            assert!(r.nodes > 0 && r.extract_visits > 0, "{}: the extractor ran", r.name);
            // Each e-node is priced once and each child edge (at most 2 here) notified once, plus
            // one heap pop per priced node: at most 4 units per e-node.
            assert!(
                r.extract_visits <= 4 * r.nodes,
                "{}: {} extractor visits for {} e-nodes",
                r.name,
                r.extract_visits,
                r.nodes
            );
            assert_ne!(r.stop, StopReason::ExtractTimeLimit, "{}: extraction ran out of time", r.name);
        }
        assert!(
            g.eqns.len() < f.eqns.len(),
            "x*1 and neg(neg x) are gone: {} -> {}",
            f.eqns.len(),
            g.eqns.len()
        );
        assert_same_values(&f, &g);
    }
}

#[test]
fn a_spent_pass_budget_keeps_every_region_as_written() {
    let f = deep_wide(400);
    let opts =
        SimplifyOptions { pass_time_limit: Duration::ZERO, region_eqns: 100, ..SimplifyOptions::default() };
    let (g, report) = simplify(&f, &opts);
    assert!(report.regions.len() >= 4);
    for r in &report.regions {
        assert_eq!(r.stop, StopReason::PassTimeLimit, "{}", r.name);
        assert!(!r.accepted);
        assert_eq!(r.eqns_after, r.eqns_before);
    }
    assert_eq!(g.eqns.len(), f.eqns.len(), "nothing was rewritten");
    assert_same_values(&f, &g);
}

#[test]
fn a_region_that_cannot_extract_in_time_is_kept_as_written() {
    // A zero region budget: loading alone outlasts twice the limit, so the region is copied.
    let f = deep_wide(200);
    let opts = SimplifyOptions { time_limit: Duration::ZERO, ..SimplifyOptions::default() };
    let (g, report) = simplify(&f, &opts);
    assert_eq!(report.regions.len(), 1);
    let r = &report.regions[0];
    assert_eq!(r.stop, StopReason::ExtractTimeLimit);
    assert!(!r.accepted);
    assert_eq!(g.eqns.len(), f.eqns.len());
    assert_same_values(&f, &g);
}
