//! Compile-time cost of the egg simplifier: generated programs of 10², 10³ and 10⁴ equations
//! (elementwise DAGs over f32[256] with splat constants, negation pairs and broadcast→reduce
//! patterns; operands mostly from the 48 most recent values, like an unrolled simulation) and the
//! reverse-mode gradient of a 20-step 1-D diffusion (a workload-shaped program). For each it prints
//! the equations before/after, regions, stop reasons, rules fired and the simplifier's time, then
//! criterion measures `simplify` itself.
//!
//! Run: `cargo bench -p kiln-transform --bench simplify`.

use criterion::{Criterion, criterion_group, criterion_main};
use kiln_ir::{Array, BinaryOp, DType, Function, Prim, ReduceOp, Shape, TensorType, UnaryOp, Var};
use kiln_trace::Tensor;
use kiln_transform::{SimplifyOptions, simplify};
use std::time::Duration;

const N: usize = 256;

/// A deterministic generated program of `n` equations.
fn generated(n: usize) -> Function {
    let mut f = Function::new();
    let mut pool: Vec<Var> = (0..8).map(|_| f.add_param(TensorType::new(DType::F32, [N]))).collect();
    let consts: Vec<Var> = [1.0f32, -0.0, 2.0, 0.5, 3.0]
        .iter()
        .map(|c| {
            let s = f.add_const(Array::scalar(*c));
            f.push(Prim::BroadcastInDim { shape: Shape::new(&[N]), broadcast_dimensions: vec![] }, &[s], None)
                .unwrap()[0]
        })
        .collect();
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut rnd = |m: usize| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % m as u64) as usize
    };
    while f.eqns.len() < n {
        let len = pool.len();
        let pick =
            |r: usize, rr: usize| if rr < 85 { pool[len - 1 - r % len.min(48)] } else { pool[r % len] };
        let x = pick(rnd(1 << 16), rnd(100));
        let y = pick(rnd(1 << 16), rnd(100));
        let push = |f: &mut Function, p: Prim, ins: &[Var]| f.push(p, ins, None).unwrap()[0];
        let v = match rnd(10) {
            0..=3 => {
                let o = [BinaryOp::Add, BinaryOp::Mul, BinaryOp::Sub, BinaryOp::Max][rnd(4)];
                push(&mut f, Prim::Binary(o), &[x, y])
            }
            4 | 5 => {
                let o = [BinaryOp::Mul, BinaryOp::Add, BinaryOp::Div][rnd(3)];
                let c = consts[rnd(consts.len())];
                push(&mut f, Prim::Binary(o), &[x, c])
            }
            6 => {
                let a = push(&mut f, Prim::Unary(UnaryOp::Neg), &[x]);
                push(&mut f, Prim::Unary(UnaryOp::Neg), &[a])
            }
            7 => push(&mut f, Prim::Unary([UnaryOp::Exp, UnaryOp::Tanh, UnaryOp::Sin][rnd(3)]), &[x]),
            8 => {
                let b = push(
                    &mut f,
                    Prim::BroadcastInDim { shape: Shape::new(&[4, N]), broadcast_dimensions: vec![1] },
                    &[x],
                );
                push(&mut f, Prim::Reduce { op: ReduceOp::Max, axes: vec![0] }, &[b])
            }
            _ => {
                let a = push(&mut f, Prim::Unary(UnaryOp::Neg), &[y]);
                push(&mut f, Prim::Binary(BinaryOp::Sub), &[x, a])
            }
        };
        pool.push(v);
    }
    let len = pool.len();
    f.outputs = pool[len - 16..].to_vec();
    kiln_transform::dce(&f)
}

/// The gradient (VJP) of 20 explicit diffusion steps on 4096 points.
fn diffusion_grad() -> Function {
    let loss = |u: Tensor| {
        let mut u = u;
        for _ in 0..20 {
            let lap = u.roll(1, 0) - 2.0 * &u + u.roll(-1, 0);
            u = &u + &(lap * 0.05);
        }
        &u * &u
    };
    let traced = kiln_trace::trace(loss, &Tensor::placeholder(DType::F32, &[4096])).unwrap();
    kiln_transform::ad::vjp_function(&traced.function)
}

fn bench(c: &mut Criterion) {
    let opts = SimplifyOptions::default();
    let mut programs: Vec<(String, Function)> =
        [100, 1000, 10000].iter().map(|&n| (format!("generated/{n}"), generated(n))).collect();
    programs.push(("diffusion_grad/20x4096".into(), diffusion_grad()));
    let mut group = c.benchmark_group("simplify");
    group.sample_size(10).warm_up_time(Duration::from_millis(300)).measurement_time(Duration::from_secs(2));
    for (name, f) in &programs {
        let (g, report) = simplify(f, &opts);
        let stops: Vec<String> = report.regions.iter().map(|r| format!("{:?}", r.stop)).collect();
        let before: u64 = report.regions.iter().map(|r| r.cost_before.bytes).sum();
        let after: u64 = report
            .regions
            .iter()
            .map(|r| if r.accepted { r.cost_after.bytes } else { r.cost_before.bytes })
            .sum();
        let nodes: usize = report.regions.iter().map(|r| r.nodes).sum();
        let visits: usize = report.regions.iter().map(|r| r.extract_visits).sum();
        eprintln!(
            "{name}: {} -> {} eqns, {} regions (stops {:?}), {nodes} e-nodes, {visits} extractor visits, \
             bytes {} -> {}, simplify {:.2} ms\n  rules: {:?}",
            f.eqns.len(),
            g.eqns.len(),
            report.regions.len(),
            stops,
            before,
            after,
            report.time.as_secs_f64() * 1e3,
            report.rules_fired()
        );
        group.bench_function(name.as_str(), |b| b.iter(|| simplify(f, &opts)));
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
