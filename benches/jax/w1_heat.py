# Copied from ../shared/anchors/jax/w1_heat.py (kiln's JAX-on-CPU anchors, JAX 0.10.2); the specification,
# inputs and checksums must stay identical to the anchor's. Run through scripts/compare_jax.sh.
"""W1 heat: 1-D periodic explicit diffusion, T steps via lax.scan.

u <- u + dt*alpha*(roll(u,1) - 2u + roll(u,-1)); loss = sum(u_T^2);
timed: jit(loss) (forward) and jit(grad(loss, argnums=(0,1))) wrt (u0, alpha).
Inputs: u0 = uniform(seed=1, N, -1, 1), alpha = 0.5, dt = 0.1.
"""
from functools import partial

import numpy as np
import jax
import jax.numpy as jnp
from jax import lax

from common import arr, bench, cost, emit, parse_sizes, uniform

DT = 0.1
SIZES = [(64, 100), (4096, 1000), (1_000_000, 100)]


def loss(u0, alpha, T):
    c = DT * alpha

    def step(u, _):
        return u + c * (jnp.roll(u, 1) - 2.0 * u + jnp.roll(u, -1)), None

    uT, _ = lax.scan(step, u0, None, length=T)
    return jnp.sum(uT * uT)


def costs(N, T):
    # per element per step: 3 for the stencil, 1 scale, 1 add = 5 (forward).
    # backward: adjoint stencil 5 + dL/dalpha term (laplacian 3, mul, accumulate) 5 => grad = 15.
    f = 4 * N
    fwd = cost(5 * N * T + 2 * N, f, 2 * f * T, 2 * f)
    grad = cost(15 * N * T + 4 * N, 2 * f,
                # fwd: read u, write u (= the stored residual); bwd: read residual, read g, write g
                5 * f * T, f * T + 2 * f)
    return fwd, grad


def main():
    for N, T in parse_sizes(SIZES):
        u0 = arr(uniform(1, (N,), -1.0, 1.0))
        alpha = arr(np.float32(0.5))
        reps = dict(min_reps=10, budget=20.0)
        cf, cg = costs(N, T)
        size = f"N={N},T={T}"
        res, _ = bench(partial(loss, T=T), (u0, alpha), **reps)
        emit("W1", "fwd", size, res, cf, steps=T)
        res, _ = bench(jax.grad(partial(loss, T=T), argnums=(0, 1)), (u0, alpha), **reps)
        emit("W1", "grad", size, res, cg, steps=T)


if __name__ == "__main__":
    main()
