//! Times the epidemic model's edge gather in isolation: `table[wrap(src)]` with `table: f32[N]`,
//! `src: i32[7N]` uniformly random agents and jnp's negative-index wrap `select(i < 0, i + N, i)`
//! inlined (rank-0 `0` and `N` as parameters, as the traced model has them), `Clip` mode.
//! Prints the best of R runs of `Executable::run` (output allocation included) in ms and ns/edge.
//!
//! `cargo run --release -p kiln-backend-cpu --example gather_timing [N] [R] [seq]` (default 10⁶, 20,
//! random indices).

use kiln_backend_cpu::compile;
use kiln_ir::*;
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n: usize = args.get(1).map_or(1_000_000, |s| s.parse().expect("N"));
    let runs: usize = args.get(2).map_or(20, |s| s.parse().expect("R"));
    let e = 7 * n;
    let mut f = Function::new();
    let table = f.add_param(TensorType::new(DType::F32, Shape::new(&[n])));
    let src = f.add_param(TensorType::new(DType::I32, Shape::new(&[e])));
    let zero = f.add_param(TensorType::scalar(DType::I32));
    let size = f.add_param(TensorType::scalar(DType::I32));
    let push = |f: &mut Function, p: Prim, ins: &[Var]| f.push(p, ins, None).unwrap()[0];
    let bc = |()| Prim::BroadcastInDim { shape: Shape::new(&[e]), broadcast_dimensions: vec![] };
    let z = push(&mut f, bc(()), &[zero]);
    let neg = push(&mut f, Prim::Compare(CompareOp::Lt), &[src, z]);
    let nb = push(&mut f, bc(()), &[size]);
    let up = push(&mut f, Prim::Binary(BinaryOp::Add), &[src, nb]);
    let w = push(&mut f, Prim::Select, &[neg, up, src]);
    let g = push(&mut f, Prim::Gather { axis: 0, batch_dims: 0, mode: IndexMode::Clip }, &[table, w]);
    f.outputs.push(g);
    let exe = compile(&f).expect("compile");
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let tab: Vec<f32> = (0..n).map(|i| i as f32 * 0.5).collect();
    // `seq`: indices in order (the memory-latency-free floor: same arithmetic, streaming reads).
    let seq = args.get(3).is_some_and(|a| a == "seq");
    let idx: Vec<i32> =
        (0..e).map(|i| if seq { (i % n) as i32 } else { (next() % n as u64) as i32 }).collect();
    let inputs = [
        Array::from_vec(&[n], tab),
        Array::from_vec(&[e], idx),
        Array::scalar(0i32),
        Array::scalar(n as i32),
    ];
    let best = (0..runs)
        .map(|_| {
            let t = Instant::now();
            std::hint::black_box(exe.run(&inputs).unwrap());
            t.elapsed().as_secs_f64()
        })
        .fold(f64::INFINITY, f64::min);
    println!(
        "N = {n}, E = {e}: gather best of {runs}: {:.2} ms, {:.2} ns/edge",
        best * 1e3,
        best * 1e9 / e as f64
    );
}
