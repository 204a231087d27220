//! Rigid-body environment speed: env-steps/s of `jit(vmap(env.step))` (one env step = `n_frames`
//! spring-pipeline steps) for Brax's ant (0.005 s × 10) and inverted pendulum (0.005 s × 4) at batch
//! 1, 64 and 1024, from `vmap(reset)` states under fixed uniform actions in `[−1, 1]` (the anchor's
//! setup, `shared/research/anchor-brax.md` §3.1). Criterion's throughput is in env steps; the compile
//! time (trace + Cranelift, `Jit::specialize`) of each case is printed first.
//!
//! `cargo bench -p kiln-sims --bench rigid`

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use kiln::prelude::*;
use kiln::random;
use kiln_sims::rigid::envs::{Env, EnvName, EnvState, Pipeline, make};
use kiln_sims::rigid::wrappers::VmapWrapper;
use std::time::Instant;

fn rigid(c: &mut Criterion) {
    for name in [EnvName::Ant, EnvName::InvertedPendulum] {
        let env = make(name, Pipeline::Spring, DType::F32).expect("bundled model");
        let mut g = c.benchmark_group(format!("rigid_{}_spring_step", name.name()));
        g.sample_size(10);
        for batch in [1usize, 64, 1024] {
            let batched = VmapWrapper { env: &env, batch_size: batch };
            let states = jit(|k: Tensor| batched.reset(&k)).call(&random::key(0u32)).expect("reset");
            let actions =
                random::uniform(&random::key(1u32), &[batch, env.action_size()], DType::F32, -1.0, 1.0);
            let args = (states, actions);
            let step = jit(|(s, a): (EnvState, Tensor)| batched.step(&s, &a));
            let started = Instant::now();
            let step = step.specialize(&args).expect("step compiles");
            eprintln!("{} batch {batch}: compile {:.3} s", name.name(), started.elapsed().as_secs_f64());
            g.throughput(Throughput::Elements(batch as u64));
            g.bench_function(format!("batch_{batch}"), |b| b.iter(|| step.call(&args).unwrap()));
        }
        g.finish();
    }
}

criterion_group!(benches, rigid);
criterion_main!(benches);
