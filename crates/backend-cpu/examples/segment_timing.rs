//! Times the epidemic model's `segment_sum` in isolation: `f32[7N]` edge values summed into `N`
//! segments by destination ids sorted ascending (uniformly random destinations, so segment
//! lengths are Poisson-like with mean 7, as the generated contact networks have them).
//! Prints the best of R runs of `Executable::run` (output allocation included) in ms and ns/edge.
//!
//! `cargo run --release -p kiln-backend-cpu --example segment_timing [N] [R]` (default 10⁵, 50).

use kiln_backend_cpu::compile;
use kiln_ir::*;
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n: usize = args.get(1).map_or(100_000, |s| s.parse().expect("N"));
    let runs: usize = args.get(2).map_or(50, |s| s.parse().expect("R"));
    let e = 7 * n;
    let mut f = Function::new();
    let data = f.add_param(TensorType::new(DType::F32, Shape::new(&[e])));
    let ids = f.add_param(TensorType::new(DType::I32, Shape::new(&[e])));
    let s = f.push(Prim::SegmentSum { num_segments: n }, &[data, ids], None).unwrap()[0];
    f.outputs.push(s);
    let exe = compile(&f).expect("compile");
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let vals: Vec<f32> = (0..e).map(|i| (i % 13) as f32 * 0.25).collect();
    let mut dst: Vec<i32> = (0..e).map(|_| (next() % n as u64) as i32).collect();
    dst.sort_unstable();
    let inputs = [Array::from_vec(&[e], vals), Array::from_vec(&[e], dst)];
    let best = (0..runs)
        .map(|_| {
            let t = Instant::now();
            std::hint::black_box(exe.run(&inputs).unwrap());
            t.elapsed().as_secs_f64()
        })
        .fold(f64::INFINITY, f64::min);
    println!(
        "N = {n}, E = {e}: segment_sum best of {runs}: {:.3} ms, {:.2} ns/edge",
        best * 1e3,
        best * 1e9 / e as f64
    );
}
