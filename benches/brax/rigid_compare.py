"""Side-by-side rigid-body speed: Brax 0.14.2 (JAX on CPU) and kiln, measured in the same run.

For each (env, pipeline, batch) of ant spring, ant positional and inverted pendulum spring at batch
1, 64, 1024, 4096:

- Brax, the anchor's method (`shared/research/anchor-brax.md` §3.1): a rollout
  `jit(lambda s, acts: lax.scan(body, s, acts))`, `body` = `vmap(env.step)` returning the reward, from
  `jit(vmap(env.reset))` states, actions fixed uniform in [-1, 1] (seeded), raw env (no wrappers).
  Compile = `jit(...).lower(...).compile()` (trace + lower + XLA). Throughput = B x T / median call
  time over >= 2 calls and >= MIN_SECONDS (one call if a call takes longer), wall and process CPU
  time (`time.process_time`).
- kiln: the release binary `kiln-sims rollout --env E --pipeline P --batch B --steps T --json F`
  (Brax's episode + auto-reset wrappers and a random linear policy: a little more work per step than
  the raw Brax env). Compile = tracing + Cranelift of the rollout program; throughput = B x T / run
  time of the compiled calls. Its CPU time is the child process's (compile and reset included), so
  only the wall figure is compared.

Prints a markdown table (both sides, ratio kiln/Brax on wall env-steps/s, 1-minute load average
before each measurement) and writes every row as JSON to --out.

    cargo build --release -p kiln-sims --bin kiln-sims
    JAX_PLATFORMS=cpu .venv-jax/bin/python benches/brax/rigid_compare.py --out target/brax_compare.json
"""

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import argparse
import json
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import jax
import jax.numpy as jnp
from brax import envs

REPO = Path(__file__).resolve().parents[2]
CASES = [("ant", "spring"), ("ant", "positional"), ("inverted_pendulum", "spring")]
BATCHES = [1, 64, 1024, 4096]
MIN_SECONDS = 2.0
# Env steps per environment, chosen so one measurement takes a few seconds on this 2-core box
# (Brax at about 1e4 ant env-steps/s; kiln, today, at about 5e2: fewer steps).
BRAX_STEPS = {
    ("ant", 1): 500, ("ant", 64): 100, ("ant", 1024): 20, ("ant", 4096): 8,
    ("inverted_pendulum", 1): 2000, ("inverted_pendulum", 64): 500,
    ("inverted_pendulum", 1024): 200, ("inverted_pendulum", 4096): 50,
}
KILN_STEPS = {
    ("ant", 1): 800, ("ant", 64): 30, ("ant", 1024): 3, ("ant", 4096): 1,
    ("inverted_pendulum", 1): 5000, ("inverted_pendulum", 64): 500,
    ("inverted_pendulum", 1024): 50, ("inverted_pendulum", 4096): 12,
}


def load():
    return os.getloadavg()[0]


def brax_row(env_name, pipeline, batch, steps, seed=0):
    env = envs.get_environment(env_name, backend=pipeline)
    reset = jax.jit(jax.vmap(env.reset))
    state = reset(jax.random.split(jax.random.PRNGKey(seed), batch))
    acts = jax.random.uniform(
        jax.random.PRNGKey(seed + 1), (steps, batch, env.action_size), minval=-1.0, maxval=1.0
    )
    step = jax.vmap(env.step)

    def rollout(s, a):
        def body(s, act):
            s = step(s, act)
            return s, s.reward

        return jax.lax.scan(body, s, a)

    started = time.perf_counter()
    compiled = jax.jit(rollout).lower(state, acts).compile()
    compile_s = time.perf_counter() - started
    jax.block_until_ready(compiled(state, acts))  # first call: allocation, thread pool
    load_avg = load()
    walls, cpus = [], []
    begun = time.perf_counter()
    while len(walls) < 2 or time.perf_counter() - begun < MIN_SECONDS:
        w0, c0 = time.perf_counter(), time.process_time()
        out = jax.block_until_ready(compiled(state, acts))
        walls.append(time.perf_counter() - w0)
        cpus.append(time.process_time() - c0)
        if walls[0] > 30:
            break
    nan_envs = int((~jnp.isfinite(out[0].pipeline_state.q).all(axis=-1)).sum())
    wall, cpu = statistics.median(walls), statistics.median(cpus)
    return {
        "compile_s": compile_s,
        "steps": steps,
        "calls": len(walls),
        "wall_env_steps_per_s": batch * steps / wall,
        "cpu_env_steps_per_s": batch * steps / cpu,
        "nonfinite_envs": nan_envs,
        "load_avg": load_avg,
    }


def kiln_row(binary, env_name, pipeline, batch, steps):
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "report.json"
        load_avg = load()
        cmd = [str(binary), "rollout", "--env", env_name, "--pipeline", pipeline,
               "--batch", str(batch), "--steps", str(steps), "--json", str(out)]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        report = json.loads(out.read_text())
    return {
        "compile_s": report["compile_s"],
        "steps": steps,
        "wall_env_steps_per_s": report["env_steps_per_s"],
        "mean_reward": report["mean_reward"],
        "nonfinite_envs": report["nonfinite_envs"],
        "load_avg": load_avg,
    }


def table(rows):
    lines = [
        "| env | pipeline | B | Brax compile s | Brax wall env-steps/s | Brax CPU env-steps/s "
        "| kiln compile s | kiln wall env-steps/s | kiln/Brax (wall) | load (Brax / kiln) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        b, k = r["brax"], r["kiln"]
        lines.append(
            f"| {r['env']} | {r['pipeline']} | {r['batch']} | {b['compile_s']:.2f} "
            f"| {b['wall_env_steps_per_s']:,.0f} | {b['cpu_env_steps_per_s']:,.0f} "
            f"| {k['compile_s']:.3f} | {k['wall_env_steps_per_s']:,.0f} "
            f"| {k['wall_env_steps_per_s'] / b['wall_env_steps_per_s']:.1f}x "
            f"| {b['load_avg']:.1f} / {k['load_avg']:.1f} |"
        )
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batches", default=",".join(map(str, BATCHES)))
    ap.add_argument("--cases", default=",".join(f"{e}:{p}" for e, p in CASES),
                    help="comma-separated env:pipeline")
    ap.add_argument("--kiln", default=str(REPO / "target/release/kiln-sims"))
    ap.add_argument("--out", default=str(REPO / "target/brax_compare.json"))
    args = ap.parse_args()
    batches = [int(b) for b in args.batches.split(",")]
    cases = [tuple(c.split(":")) for c in args.cases.split(",")]
    binary = Path(args.kiln)
    if not binary.exists():
        raise SystemExit(f"{binary} not found: cargo build --release -p kiln-sims --bin kiln-sims")
    rows = []
    for env_name, pipeline in cases:
        for batch in batches:
            print(f"{env_name} {pipeline} B={batch} ...", flush=True)
            brax = brax_row(env_name, pipeline, batch, BRAX_STEPS[(env_name, batch)])
            kiln = kiln_row(binary, env_name, pipeline, batch, KILN_STEPS[(env_name, batch)])
            rows.append({"env": env_name, "pipeline": pipeline, "batch": batch,
                         "brax": brax, "kiln": kiln})
            print(f"  brax {brax['wall_env_steps_per_s']:,.0f}/s (compile {brax['compile_s']:.2f} s), "
                  f"kiln {kiln['wall_env_steps_per_s']:,.0f}/s (compile {kiln['compile_s']:.3f} s)",
                  flush=True)
    meta = {"jax": jax.__version__, "brax": "0.14.2", "cpus": os.cpu_count(), "rows": rows}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(meta, indent=1))
    print()
    print(table(rows))
    print(f"\nJSON: {args.out}")


if __name__ == "__main__":
    main()
