"""Brax 0.14.2 reference data for kiln's reacher tests (`crates/sims/tests/rigid_reacher.rs`).

Run once from the repository root, in the JAX venv (f32 and f64 runs are separate processes because
`jax_enable_x64` must be set before JAX starts):

    JAX_PLATFORMS=cpu .venv-jax/bin/python crates/sims/tests/data/brax/make_reacher.py

Writes `reacher_{spring,positional}_{f32,f64}.npz` beside this script, made as the ant and inverted
pendulum files of `shared/data/brax/` were (see its README): `env.pipeline_step` (the physics,
`n_frames` substeps per env step, no reset noise) from `q0 = sys.init_q`, `qd = 0`, under the
closed-form actions `a[t, i] = 0.5 sin(2π t env_dt + i π/4)`; the state after each env step. Keys as
in those files (`pos rot vel ang q qd acts q0 env_dt`), plus env-level values from a hand-set state
(no PRNG): `env_q`, `env_qd` (the state), `env_obs0` (Brax `_get_obs` of it), `env_action`, and
after one `env.step`: `env_obs1`, `env_reward`, `env_reward_dist`, `env_reward_ctrl`, `env_q1`.
"""

import os
import subprocess
import sys

STEPS = 200
HERE = os.path.dirname(os.path.abspath(__file__))


def make(backend: str, x64: bool) -> None:
    import jax

    jax.config.update("jax_enable_x64", x64)
    import numpy as np
    from jax import numpy as jp
    from brax import envs
    from brax.envs.base import State

    env = envs.get_environment("reacher", backend=backend)
    dtype = np.float64 if x64 else np.float32
    env_dt = float(env.dt)
    step = jax.jit(env.pipeline_step)

    q0 = jp.asarray(env.sys.init_q, dtype=dtype)
    state = jax.jit(env.pipeline_init)(q0, jp.zeros(env.sys.qd_size(), dtype=dtype))
    t = np.arange(STEPS)[:, None]
    i = np.arange(env.action_size)[None, :]
    acts = (0.5 * np.sin(2 * np.pi * t * env_dt + i * np.pi / 4)).astype(dtype)
    out = {k: [] for k in ("pos", "rot", "vel", "ang", "q", "qd")}
    for k in range(STEPS):
        state = step(state, jp.asarray(acts[k]))
        out["pos"].append(np.asarray(state.x.pos))
        out["rot"].append(np.asarray(state.x.rot))
        out["vel"].append(np.asarray(state.xd.vel))
        out["ang"].append(np.asarray(state.xd.ang))
        out["q"].append(np.asarray(state.q))
        out["qd"].append(np.asarray(state.qd))
    data = {k: np.stack(v) for k, v in out.items()}

    # Env level, from a fixed state: arm bent, moving, target off-centre.
    env_q = np.array([0.4, -1.1, 0.12, -0.07], dtype=dtype)
    env_qd = np.array([0.3, -0.8, 0.0, 0.0], dtype=dtype)
    env_action = np.array([0.3, -0.7], dtype=dtype)
    ps = env.pipeline_init(jp.asarray(env_q), jp.asarray(env_qd))
    obs0 = env._get_obs(ps)
    zero = jp.zeros((), dtype=dtype)
    s0 = State(ps, obs0, zero, zero, {"reward_dist": zero, "reward_ctrl": zero})
    s1 = jax.jit(env.step)(s0, jp.asarray(env_action))

    np.savez(
        os.path.join(HERE, f"reacher_{backend}_{'f64' if x64 else 'f32'}.npz"),
        **data,
        acts=acts,
        q0=np.asarray(q0),
        env_dt=np.float64(env_dt),
        env_q=env_q,
        env_qd=env_qd,
        env_action=env_action,
        env_obs0=np.asarray(obs0),
        env_obs1=np.asarray(s1.obs),
        env_reward=np.asarray(s1.reward),
        env_reward_dist=np.asarray(s1.metrics["reward_dist"]),
        env_reward_ctrl=np.asarray(s1.metrics["reward_ctrl"]),
        env_q1=np.asarray(s1.pipeline_state.q),
    )


if __name__ == "__main__":
    if len(sys.argv) == 3:
        make(sys.argv[1], sys.argv[2] == "f64")
    else:
        for backend in ("spring", "positional"):
            for width in ("f32", "f64"):
                subprocess.run([sys.executable, __file__, backend, width], check=True)
