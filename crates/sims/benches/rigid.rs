//! Rigid-body environment speed: env-steps/s of `jit(vmap(env.step))` (one env step = `n_frames`
//! pipeline steps) for Brax's ant, spring and positional (0.005 s × 10), and inverted pendulum,
//! spring (0.005 s × 4), at batch 1, 64, 1024 and 4096, from `vmap(reset)` states under fixed uniform
//! actions in `[−1, 1]` (the anchor's setup, `shared/research/anchor-brax.md` §3.1). Criterion's
//! throughput is in env steps; the compile time (trace + Cranelift, `Jit::specialize`) of each case
//! is printed first. Samples are few and short (10 × ~1 s) so the whole bench takes a few minutes;
//! `benches/brax/rigid_compare.py` measures Brax beside kiln's rollouts in the same run.
//!
//! `cargo bench -p kiln-sims --bench rigid` (one case: `-- rigid_ant_positional_step/batch_64`)

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use kiln::prelude::*;
use kiln::random;
use kiln_sims::rigid::envs::{Env, EnvName, EnvState, Pipeline, make};
use kiln_sims::rigid::wrappers::VmapWrapper;
use std::time::{Duration, Instant};

fn rigid(c: &mut Criterion) {
    let cases = [
        (EnvName::Ant, Pipeline::Spring),
        (EnvName::Ant, Pipeline::Positional),
        (EnvName::InvertedPendulum, Pipeline::Spring),
    ];
    for (name, pipeline) in cases {
        let env = make(name, pipeline, DType::F32).expect("bundled model");
        let mut g = c.benchmark_group(format!("rigid_{}_{}_step", name.name(), pipeline.name()));
        g.sample_size(10).warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(1));
        for batch in [1usize, 64, 1024, 4096] {
            let batched = VmapWrapper { env: &env, batch_size: batch };
            let states = jit(|k: Tensor| batched.reset(&k)).call(&random::key(0u32)).expect("reset");
            let actions =
                random::uniform(&random::key(1u32), &[batch, env.action_size()], DType::F32, -1.0, 1.0);
            let args = (states, actions);
            let step = jit(|(s, a): (EnvState, Tensor)| batched.step(&s, &a));
            let started = Instant::now();
            let step = step.specialize(&args).expect("step compiles");
            let compile_s = started.elapsed().as_secs_f64();
            eprintln!("{} {} batch {batch}: compile {compile_s:.3} s", name.name(), pipeline.name());
            g.throughput(Throughput::Elements(batch as u64));
            g.bench_function(format!("batch_{batch}"), |b| b.iter(|| step.call(&args).unwrap()));
        }
        g.finish();
    }
}

criterion_group!(benches, rigid);
criterion_main!(benches);
