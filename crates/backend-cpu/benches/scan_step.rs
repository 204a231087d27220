//! Per-step time of a compiled `scan` whose body is one small kernel, `c ↦ c·0.5 + 1` on an f32[n]
//! carry, with and without stacking the new carry as `ys`: for n = 1 it is the loop's own overhead
//! (pointer tables, body dispatch), for larger n it adds what the step moves per element.
//!
//! `cargo bench -p kiln-backend-cpu --bench scan_step` (one thread; median of 15 calls of 1000 steps).

use kiln_backend_cpu::{CompileOptions, compile_with};
use kiln_ir::{Array, BinaryOp, DType, Function, Prim, Shape, TensorType};
use std::time::Instant;

const STEPS: usize = 1000;

/// `scan` of `STEPS` steps of `c*0.5 + 1` on f32[n]; `ys`: also output each new carry.
fn program(n: usize, ys: bool) -> Function {
    let ty = TensorType::new(DType::F32, [n]);
    let mut body = Function::new();
    let c = body.add_param(ty.clone());
    let constant = |body: &mut Function, v: f32| {
        let k = body.add_const(Array::from_vec(&[], vec![v]));
        let b = Prim::BroadcastInDim { shape: Shape::new(&[n]), broadcast_dimensions: vec![] };
        body.push(b, &[k], None).unwrap()[0]
    };
    let (half, one) = (constant(&mut body, 0.5), constant(&mut body, 1.0));
    let h = body.push(Prim::Binary(BinaryOp::Mul), &[c, half], None).unwrap()[0];
    let s = body.push(Prim::Binary(BinaryOp::Add), &[h, one], None).unwrap()[0];
    body.outputs = if ys { vec![s, s] } else { vec![s] };
    let mut f = Function::new();
    let c0 = f.add_param(ty);
    let scan =
        Prim::Scan { length: STEPS, reverse: false, num_consts: 0, num_carry: 1, body: Box::new(body) };
    let outs = f.push(scan, &[c0], None).unwrap();
    f.outputs.extend(outs);
    f
}

fn main() {
    let opts = CompileOptions { threads: Some(1), dump_dir: None, min_task_work: None, multi_output: true };
    for ys in [false, true] {
        for n in [1, 64, 4096, 65536] {
            let exe = compile_with(&program(n, ys), &opts).unwrap();
            let x = [Array::from_vec(&[n], vec![1.0f32; n])];
            exe.run(&x).unwrap();
            let mut t: Vec<f64> = (0..15)
                .map(|_| {
                    let s = Instant::now();
                    exe.run(&x).unwrap();
                    s.elapsed().as_secs_f64()
                })
                .collect();
            t.sort_by(f64::total_cmp);
            let per_step = t[t.len() / 2] / STEPS as f64 * 1e9;
            println!("scan step f32[{n}]{}: {per_step:.0} ns/step", if ys { " + ys" } else { "" });
        }
    }
}
