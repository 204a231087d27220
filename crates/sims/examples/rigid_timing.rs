//! Times `jit(vmap(env.step))` for Brax's ant (or inverted pendulum) on the spring (or positional)
//! pipeline, f32:
//! compile time, env-steps/s over 20 steps after a warm-up, and the compiled program's cost report
//! (kernels, runtime steps, bytes moved). Set `KILN_DUMP=<dir>` to also write the IR and plan.
//!
//! `cargo run --release -p kiln-sims --example rigid_timing [ant|inverted_pendulum] [batch] [spring|positional]`

use kiln::prelude::*;
use kiln::random;
use kiln_sims::rigid::envs::{Env, EnvName, EnvState, Pipeline, make};
use kiln_sims::rigid::wrappers::VmapWrapper;
use std::time::Instant;

const STEPS: usize = 20;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let name = match args.get(1).map(String::as_str) {
        Some("inverted_pendulum") => EnvName::InvertedPendulum,
        _ => EnvName::Ant,
    };
    let batch: usize = args.get(2).map_or(Ok(1024), |s| s.parse())?;
    let pipeline = match args.get(3).map(String::as_str) {
        Some("positional") => Pipeline::Positional,
        _ => Pipeline::Spring,
    };
    let env = make(name, pipeline, DType::F32)?;
    let batched = VmapWrapper { env: &env, batch_size: batch };
    let states = jit(|k: Tensor| batched.reset(&k)).call(&random::key(0u32))?;
    let actions = random::uniform(&random::key(1u32), &[batch, env.action_size()], DType::F32, -1.0, 1.0);
    let step = jit(|(s, a): (EnvState, Tensor)| batched.step(&s, &a));
    let started = Instant::now();
    let step = step.specialize(&(states.clone(), actions.clone()))?;
    let compile = started.elapsed().as_secs_f64();
    // Warm-up, then STEPS steps fed back into each other (as a rollout does).
    let mut s = step.call(&(states, actions.clone()))?;
    let started = Instant::now();
    for _ in 0..STEPS {
        s = step.call(&(s, actions.clone()))?;
    }
    let secs = started.elapsed().as_secs_f64();
    println!(
        "{} {}, batch {batch}, f32: compile {compile:.3} s; {STEPS} steps in {secs:.4} s = {:.0} env-steps/s",
        name.name(),
        pipeline.name(),
        (STEPS * batch) as f64 / secs
    );
    println!("{}", step.compiled().executable().cost_report());
    Ok(())
}
