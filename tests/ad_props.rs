//! Property test (issue 3, "Checked by"): on random programs — chains of unary, binary, reduce,
//! broadcast, gather, scatter, dot, select, cumsum and reshape/transpose ops on f64 inputs — reverse
//! and forward mode are adjoint: `⟨vjp(ct), t⟩ = ⟨ct, jvp(t)⟩` to 1e-9 relative (to the sum of the
//! absolute values of the terms, so that cancellation does not make the bound meaningless).

use kiln::prelude::*;
use proptest::prelude::*;

/// Every value of a program has this shape.
const SHAPE: [usize; 2] = [2, 3];
const N: usize = 6;

/// One op: its kind, operand choices (taken modulo the number of values so far) and a sub-choice.
#[derive(Clone, Debug)]
struct Op {
    kind: u8,
    args: [usize; 4],
    sub: u8,
}

fn op_strategy() -> impl Strategy<Value = Op> {
    (0u8..10, [any::<usize>(), any::<usize>(), any::<usize>(), any::<usize>()], any::<u8>())
        .prop_map(|(kind, args, sub)| Op { kind, args, sub })
}

/// Runs the program on the inputs: each op appends a [2, 3] value; the outputs are the last two.
fn run(prog: &[Op], inputs: Vec<Tensor>) -> Vec<Tensor> {
    let mut vals = inputs;
    for op in prog {
        let pick = |k: usize| vals[op.args[k] % vals.len()].clone();
        let (a, b, c, d) = (pick(0), pick(1), pick(2), pick(3));
        let sub = op.sub as usize;
        let new = match op.kind {
            0 => match sub % 9 {
                0 => a.sin(),
                1 => a.cos(),
                2 => a.tanh(),
                3 => a.sigmoid(),
                4 => -&a,
                5 => a.tanh().exp(),
                6 => (&(&a * &a) + 1.0).sqrt(),
                7 => (&(&a * &a) + 1.0).log(),
                _ => a.abs(),
            },
            1 => match sub % 7 {
                0 => &a + &b,
                1 => &a - &b,
                2 => &a * &b,
                3 => a.maximum(&b),
                4 => a.minimum(&b),
                5 => &a / &(&(&b * &b) + 1.0),
                _ => a.atan2(&(&(&b * &b) + 0.5)),
            },
            2 => {
                // Reduce over one axis, then broadcast back.
                let axis = (sub / 4 % 2) as i32;
                let r = match sub % 4 {
                    0 => a.sum_keepdims(axis),
                    1 => a.max_keepdims(axis),
                    2 => a.min_keepdims(axis),
                    _ => a.tanh().prod_keepdims(axis),
                };
                r.broadcast_to(&SHAPE)
            }
            3 => {
                // Gather along axis 1 with indices in 0..4 (3 is out of range: clamped).
                let idx: Vec<i32> = (0..3).map(|k| ((sub >> (2 * k)) % 4) as i32).collect();
                a.take(&Tensor::from_vec(&[3], idx), 1)
            }
            4 => 0.3 * a.matmul(&b.t()).matmul(&c),
            5 => where_(&a.gt(&b), &c, &d),
            6 => a.cumsum((sub % 2) as i32, sub / 2 % 2 == 1),
            7 => a.slice_axis(0, Some((sub % 2) as i64), Some((sub % 2) as i64 + 1), 1).broadcast_to(&SHAPE),
            8 => a.reshape(&[3, 2]).t(),
            _ => {
                // Scatter-add rows of b into a (duplicates accumulate).
                let idx = Tensor::from_vec(&[2], vec![(sub % 2) as i32, (sub / 2 % 2) as i32]);
                a.at_add(&idx, &b)
            }
        };
        assert_eq!(new.shape().dims(), &SHAPE, "op {op:?}");
        vals.push(new);
    }
    let n = vals.len();
    vec![vals[n - 2].clone(), vals[n - 1].clone()]
}

fn mat(v: &[f64]) -> Tensor {
    Tensor::from_vec(&SHAPE, v.to_vec())
}

fn vals(t: &Tensor) -> Vec<f64> {
    t.to_vec::<f64>()
}

fn vec6() -> impl Strategy<Value = Vec<f64>> {
    prop::collection::vec(-2.0f64..2.0, N)
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 300,
        failure_persistence: None,
        rng_seed: proptest::test_runner::RngSeed::Fixed(0x6b69_6c6e),
        ..ProptestConfig::default()
    })]

    #[test]
    fn vjp_is_the_adjoint_of_jvp(
        prog in prop::collection::vec(op_strategy(), 1..10),
        x in [vec6(), vec6()],
        t in [vec6(), vec6()],
        ct in [vec6(), vec6()],
    ) {
        let inputs = vec![mat(&x[0]), mat(&x[1])];
        let p = prog.clone();
        let (outs, touts) = jvp(move |xs: Vec<Tensor>| run(&p, xs), inputs.clone(), vec![mat(&t[0]), mat(&t[1])]);
        let p = prog.clone();
        let (outs2, pull) = vjp(move |xs: Vec<Tensor>| run(&p, xs), inputs);
        let cts = pull(vec![mat(&ct[0]), mat(&ct[1])]);
        for (a, b) in outs.iter().zip(&outs2) {
            let (a, b) = (vals(a), vals(b));
            prop_assert!(a.iter().zip(&b).all(|(x, y)| x == y || (x.is_nan() && y.is_nan())), "primal outputs differ");
        }
        // ⟨ct, J t⟩ and ⟨J^T ct, t⟩ term by term.
        let rhs_terms: Vec<f64> = (0..2).flat_map(|k| {
            let tv = vals(&touts[k]);
            ct[k].iter().zip(tv).map(|(c, j)| c * j).collect::<Vec<_>>()
        }).collect();
        let lhs_terms: Vec<f64> = (0..2).flat_map(|k| {
            let cv = vals(&cts[k]);
            t[k].iter().zip(cv).map(|(tt, c)| tt * c).collect::<Vec<_>>()
        }).collect();
        let (lhs, rhs): (f64, f64) = (lhs_terms.iter().sum(), rhs_terms.iter().sum());
        let scale: f64 = lhs_terms.iter().chain(&rhs_terms).map(|x| x.abs()).sum::<f64>();
        prop_assert!(lhs.is_finite() && rhs.is_finite(), "non-finite: {lhs} {rhs} for {prog:?}");
        prop_assert!((lhs - rhs).abs() <= 1e-9 * scale.max(1e-300), "<vjp(ct), t> = {lhs} but <ct, jvp(t)> = {rhs} for {prog:?}");
    }
}
