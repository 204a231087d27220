//! Property test: random programs (elementwise, broadcast, reduce, gather, select, with constants
//! that trigger the rules) evaluate bitwise equal before and after `simplify` (NaN as NaN), on
//! inputs drawn from NaN, ±inf, ±0.0, subnormals and out-of-range indices.

mod simplify_common;

use kiln_ir::{
    Array, BinaryOp, CompareOp, DType, Function, IndexMode, Prim, ReduceOp, Shape, TensorType, UnaryOp, Var,
};
use kiln_transform::{CostModel, SimplifyOptions, simplify};
use proptest::prelude::*;
use simplify_common::{SPECIAL_F, same_bits, untimed};

const N: usize = 4;

fn scalar_const(f: &mut Function, x: f32) -> Var {
    let c = f.add_const(Array::scalar(x));
    f.push(Prim::BroadcastInDim { shape: Shape::new(&[N]), broadcast_dimensions: vec![] }, &[c], None)
        .unwrap()[0]
}

/// Builds a program from `ops` over a pool of f32[4] values (two parameters to start).
fn build(ops: &[(u8, u8, u8, u8)]) -> Function {
    let mut f = Function::new();
    let mut pool =
        vec![f.add_param(TensorType::new(DType::F32, [N])), f.add_param(TensorType::new(DType::F32, [N]))];
    let idx = f.add_param(TensorType::new(DType::I32, [N]));
    let pred = f.add_param(TensorType::new(DType::Bool, [N]));
    let consts = [1.0f32, -0.0, 0.0, -1.0, 0.5, 2.0, 3.0, f32::NAN];
    for &(kind, a, b, c) in ops {
        let x = pool[a as usize % pool.len()];
        let y = pool[b as usize % pool.len()];
        let push = |f: &mut Function, p: Prim, ins: &[Var]| f.push(p, ins, None).unwrap()[0];
        let v = match kind % 13 {
            0 => {
                let u = [
                    UnaryOp::Neg,
                    UnaryOp::Neg,
                    UnaryOp::Abs,
                    UnaryOp::Exp,
                    UnaryOp::Log,
                    UnaryOp::Sqrt,
                    UnaryOp::Sin,
                    UnaryOp::Floor,
                ];
                push(&mut f, Prim::Unary(u[c as usize % u.len()]), &[x])
            }
            1 | 2 => {
                let o = [
                    BinaryOp::Add,
                    BinaryOp::Sub,
                    BinaryOp::Mul,
                    BinaryOp::Div,
                    BinaryOp::Max,
                    BinaryOp::Min,
                ];
                push(&mut f, Prim::Binary(o[c as usize % o.len()]), &[x, y])
            }
            3 | 4 => {
                // An operation with a splat constant (x*1, x+(-0.0), x*0, x/2, ...).
                let o = [BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Div];
                let k = scalar_const(&mut f, consts[b as usize % consts.len()]);
                let (l, r) = if c & 4 == 0 { (x, k) } else { (k, x) };
                push(&mut f, Prim::Binary(o[c as usize % o.len()]), &[l, r])
            }
            5 => {
                let p = if c % 2 == 0 { pred } else { push(&mut f, Prim::Compare(CompareOp::Lt), &[x, y]) };
                let z = if c % 3 == 0 { x } else { y };
                push(&mut f, Prim::Select, &[p, x, z])
            }
            6 | 7 => {
                // Broadcast to [3,4] (maybe transposed), combine, reduce back.
                let bx = push(
                    &mut f,
                    Prim::BroadcastInDim { shape: Shape::new(&[3, N]), broadcast_dimensions: vec![1] },
                    &[x],
                );
                let by = push(
                    &mut f,
                    Prim::BroadcastInDim { shape: Shape::new(&[3, N]), broadcast_dimensions: vec![1] },
                    &[y],
                );
                let (bx, by, axis) = if c & 8 != 0 {
                    let t = |f: &mut Function, v| {
                        f.push(Prim::Transpose { permutation: vec![1, 0] }, &[v], None).unwrap()[0]
                    };
                    (t(&mut f, bx), t(&mut f, by), 1)
                } else {
                    (bx, by, 0)
                };
                let o = [BinaryOp::Add, BinaryOp::Mul, BinaryOp::Max];
                let m = push(&mut f, Prim::Binary(o[c as usize % 3]), &[bx, by]);
                let r = [ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min][(c as usize / 3) % 3];
                push(&mut f, Prim::Reduce { op: r, axes: vec![axis] }, &[m])
            }
            8 => {
                let mode = if c % 2 == 0 { IndexMode::Clip } else { IndexMode::FillOrDrop };
                let src = if c % 3 == 0 {
                    push(&mut f, Prim::Iota { dtype: DType::F32, shape: Shape::new(&[N]), dimension: 0 }, &[])
                } else {
                    x
                };
                push(&mut f, Prim::Gather { axis: 0, batch_dims: 0, mode }, &[src, idx])
            }
            9 => {
                let n = push(&mut f, Prim::Unary(UnaryOp::Neg), &[y]);
                let o = if c % 2 == 0 { BinaryOp::Sub } else { BinaryOp::Add };
                push(&mut f, Prim::Binary(o), &[x, n])
            }
            10 => {
                let r = push(&mut f, Prim::Reshape { new_sizes: Shape::new(&[2, 2]) }, &[x]);
                let s = push(
                    &mut f,
                    Prim::Slice { start: vec![0, 0], limit: vec![2, 2], strides: vec![1, 1] },
                    &[r],
                );
                push(&mut f, Prim::Reshape { new_sizes: Shape::new(&[N]) }, &[s])
            }
            11 => {
                // A broadcast reshaped with unit axes, sliced twice (reshape_of_broadcast,
                // slice_slice), or a slice of a slice of x.
                if c % 2 == 0 {
                    let bx = push(
                        &mut f,
                        Prim::BroadcastInDim { shape: Shape::new(&[3, N]), broadcast_dimensions: vec![1] },
                        &[x],
                    );
                    let r = push(&mut f, Prim::Reshape { new_sizes: Shape::new(&[3, 1, N]) }, &[bx]);
                    let s = push(
                        &mut f,
                        Prim::Slice { start: vec![1, 0, 0], limit: vec![3, 1, N], strides: vec![1, 1, 1] },
                        &[r],
                    );
                    let s = push(
                        &mut f,
                        Prim::Slice { start: vec![1, 0, 0], limit: vec![2, 1, N], strides: vec![1, 1, 1] },
                        &[s],
                    );
                    push(&mut f, Prim::Reshape { new_sizes: Shape::new(&[N]) }, &[s])
                } else {
                    let s =
                        push(&mut f, Prim::Slice { start: vec![1], limit: vec![N], strides: vec![1] }, &[x]);
                    let s =
                        push(&mut f, Prim::Slice { start: vec![0], limit: vec![2], strides: vec![1] }, &[s]);
                    let t =
                        push(&mut f, Prim::Slice { start: vec![2], limit: vec![N], strides: vec![1] }, &[x]);
                    push(&mut f, Prim::Concatenate { dimension: 0 }, &[s, t])
                }
            }
            _ => {
                let bx = push(
                    &mut f,
                    Prim::BroadcastInDim { shape: Shape::new(&[3, N]), broadcast_dimensions: vec![1] },
                    &[x],
                );
                let s = push(
                    &mut f,
                    Prim::Slice { start: vec![1, 0], limit: vec![2, N], strides: vec![1, 1] },
                    &[bx],
                );
                push(&mut f, Prim::Reshape { new_sizes: Shape::new(&[N]) }, &[s])
            }
        };
        pool.push(v);
    }
    let n = pool.len();
    f.outputs = vec![pool[n - 1], pool[n / 2], pool[0]];
    f
}

fn float_in() -> impl Strategy<Value = f32> {
    prop_oneof![(0..SPECIAL_F.len()).prop_map(|i| SPECIAL_F[i] as f32), -10.0f32..10.0,]
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 300,
        rng_seed: proptest::test_runner::RngSeed::Fixed(0x6b69_6c6e),
        ..ProptestConfig::default()
    })]

    #[test]
    fn simplify_keeps_values_bitwise(
        ops in prop::collection::vec((any::<u8>(), any::<u8>(), any::<u8>(), any::<u8>()), 1..16),
        x0 in prop::collection::vec(float_in(), N),
        x1 in prop::collection::vec(float_in(), N),
        idx in prop::collection::vec(-3i32..8, N),
        pred in prop::collection::vec(any::<bool>(), N),
    ) {
        let f = build(&ops);
        kiln_ir::verify(&f).unwrap();
        let args = [
            Array::from_vec(&[N], x0),
            Array::from_vec(&[N], x1),
            Array::from_vec(&[N], idx),
            Array::from_vec(&[N], pred),
        ];
        let want = kiln_ir::eval(&f, &args).unwrap();
        // Both cost models extract (possibly different) programs from the same rewrites.
        for cost_model in [CostModel::EveryResult, CostModel::Fused] {
            let (g, report) = simplify(&f, &SimplifyOptions { cost_model, ..untimed() });
            kiln_ir::verify(&g).unwrap_or_else(|e| panic!("{e}\n{g}"));
            let got = kiln_ir::eval(&g, &args).unwrap();
            for (w, o) in want.iter().zip(&got) {
                prop_assert!(same_bits(w, o), "{w:?} vs {o:?} on {args:?}\n{f}\n{g}\n{report}");
            }
            prop_assert!(report.regions.iter().all(|r| r.cost_after <= r.cost_before || !r.accepted));
        }
    }
}

/// The generator reaches the rules: over a sweep of programs, the main exact rules fire.
#[test]
fn generated_programs_exercise_the_rules() {
    let mut fired = std::collections::BTreeMap::new();
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut byte = || {
        state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (state >> 56) as u8
    };
    for _ in 0..160 {
        let ops: Vec<(u8, u8, u8, u8)> = (0..12).map(|_| (byte(), byte(), byte(), byte())).collect();
        let (_, report) = simplify(&build(&ops), &untimed());
        for (k, v) in report.rules_fired() {
            *fired.entry(k).or_insert(0) += v;
        }
    }
    for rule in [
        "neg_neg",
        "mul_one",
        "add_neg_zero",
        "sub_neg",
        "reduce_max_min_of_broadcast",
        "elementwise_of_broadcasts",
        "transpose_of_broadcast",
        "reshape_of_broadcast",
        "slice_slice",
        "select_of_select",
    ] {
        assert!(fired.get(rule).copied().unwrap_or(0) > 0, "{rule} never fired: {fired:?}");
    }
}
