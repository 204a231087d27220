# Copied from ../shared/anchors/jax/w4_rollout.py (kiln's JAX-on-CPU anchors, JAX 0.10.2); the specification,
# inputs and checksums must stay identical to the anchor's. Run through scripts/compare_jax.sh.
"""W4 batched RL rollout: cart-pole (Gym/Barto equations, continuous force), linear tanh policy.

Per env (vmapped over B envs), T steps via lax.scan, explicit Euler (Gym order):
  u = tanh(W . [x, xd, th, thd] + b); f = FMAX*u; s, c = sin th, cos th
  tmp = (f + MP*L*thd^2*s)/(MC+MP); tha = (G*s - c*tmp)/(L*(4/3 - MP*c^2/(MC+MP)))
  xa = tmp - MP*L*tha*c/(MC+MP); x += DT*xd; xd += DT*xa; th += DT*thd; thd += DT*tha
  reward = c - 0.01*x^2 - 0.001*u^2 (on the pre-update state); no termination.
timed: forward total reward for B=1024 (throughput in env-steps/s), jit(grad(-mean return)) wrt (W, b)
for B=64 (and forward B=64 for reference).
Inputs: initial states uniform(41, (B,4), -0.05, 0.05) (row b = env b); W = [0.5, 1.0, 20.0, 3.0], b = 0.
"""
from functools import partial

import numpy as np
import jax
import jax.numpy as jnp
from jax import lax

from common import TRANS, arr, bench, cost, emit, parse_sizes, uniform

G, MC, MP, L, FMAX, DT = 9.8, 1.0, 0.1, 0.5, 10.0, 0.02
SIZES = [("fwd", 1024, 1000), ("fwd", 64, 1000), ("grad", 64, 1000)]
STEP_FLOPS = 4 * 2 + 2 + 31 + 8 + 6 + 4 * TRANS  # policy, dynamics, Euler, reward; tanh,sin,cos,div~x4


def env_return(state0, W, b, T):
    def step(st, _):
        x, xd, th, thd = st
        u = jnp.tanh(jnp.dot(W, st) + b)
        f = FMAX * u
        s, c = jnp.sin(th), jnp.cos(th)
        tmp = (f + MP * L * thd * thd * s) / (MC + MP)
        tha = (G * s - c * tmp) / (L * (4.0 / 3.0 - MP * c * c / (MC + MP)))
        xa = tmp - MP * L * tha * c / (MC + MP)
        r = c - 0.01 * x * x - 0.001 * u * u
        new = jnp.stack([x + DT * xd, xd + DT * xa, th + DT * thd, thd + DT * tha])
        return new, r

    _, rs = lax.scan(step, state0, None, length=T)
    return jnp.sum(rs)


def batch_return(states, W, b, T):
    return jnp.mean(jax.vmap(env_return, in_axes=(0, None, None, None))(states, W, b, T))


def main():
    W = arr(np.array([0.5, 1.0, 20.0, 3.0], np.float32))
    b = arr(np.float32(0.0))
    for kind, B, T in parse_sizes(SIZES):
        states = arr(uniform(41, (B, 4), -0.05, 0.05))
        size = f"B={B},T={T}"
        n = B * T
        if kind == "fwd":
            res, _ = bench(partial(batch_return, T=T), (states, W, b))
            c = cost(n * STEP_FLOPS, 16 * B, 32 * B * T, 32 * B)
            emit("W4", "fwd", size, res, c, steps=T, env_steps_per_s=n / (res["run_ms"] * 1e-3))
        else:
            res, _ = bench(jax.grad(lambda W, b, s: -batch_return(s, W, b, T), argnums=(0, 1)), (W, b, states))
            # residuals: ~12 floats per env-step (state, s, c, u, tmp, ...); bwd ~2x fwd flops
            c = cost(3 * n * STEP_FLOPS, 16 * B, 4 * 12 * n * 2 + 64 * B * T, 4 * 12 * n)
            emit("W4", "grad", size, res, c, steps=T, env_steps_per_s=n / (res["run_ms"] * 1e-3))


if __name__ == "__main__":
    main()
