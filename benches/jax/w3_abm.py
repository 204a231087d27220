# Copied from ../shared/anchors/jax/w3_abm.py (kiln's JAX-on-CPU anchors, JAX 0.10.2); the specification,
# inputs and checksums must stay identical to the anchor's. Run through scripts/compare_jax.sh.
"""W3 ABM: GradABM-like tensorized SEIR-style epidemic, N agents, E = 10N directed contact edges.

Inputs: src = randint(31, E, N), dst = randint(32, E, N), then both permuted by a stable argsort of
dst (edges sorted by destination); seeds: agent i infected at t=-2 iff uniform(33, N)[i] < 1e-3;
noise U = uniform(34, (DAYS, N)) (row d = day d).  Parameters R = 0.06, m = 0.02.
State: s (susceptible, 0/1 float), t_inf (day of infection; 0 for susceptible), a (alive weight).
Day d = 0..DAYS-1 (lax.scan):
  tau = d - t_inf;  inf = (1-s) * a * exp(-(tau-4)^2 / (2*1.5^2))
  force = R * segment_sum(inf[src], dst, N);  p = 1 - exp(-force), so logit(p) = log(expm1(force))
  z = (log(expm1(max(force, 1e-6))) + log(U_d) - log(1-U_d)) / TEMP;  soft = sigmoid(z)
  b = (soft > 0.5) + soft - stop_gradient(soft)       (straight-through relaxed Bernoulli)
  new = s*b;  a = a * (1 - m*(1-s)*[2 <= tau < 8]);  s = s - new;  t_inf = t_inf + new*(d - t_inf)
  daily_d = sum(new)
loss = mean_d (daily_d/N - target_d)^2 * 1e4, target_d = 0.02 * exp(-((d-15)/6)^2).
timed: jit(loss) (forward) and jit(grad(loss, argnums=(0,1))) wrt (R, m).
"""

import numpy as np
import jax
import jax.numpy as jnp
from jax import lax

from common import F, TRANS, arr, bench, cost, emit, parse_sizes, randint, uniform

DAYS, TEMP, DEG = 30, 1.0, 10
SIZES = [100_000, 1_000_000]


def make(N):
    E = DEG * N
    src, dst = randint(31, E, N), randint(32, E, N)
    order = np.argsort(dst, kind="stable")
    src, dst = src[order], dst[order]
    seed = uniform(33, (N,)) < 1e-3
    s0 = np.where(seed, 0.0, 1.0).astype(np.float32)
    t0 = np.where(seed, -2.0, 0.0).astype(np.float32)
    U = uniform(34, (DAYS, N))
    return tuple(arr(v) for v in (src, dst, s0, t0, U))


def loss(R, m, src, dst, s0, t0, U):
    N = s0.shape[0]
    days = jnp.arange(DAYS, dtype=F)
    target = 0.02 * jnp.exp(-(((days - 15.0) / 6.0) ** 2))

    def day(carry, inp):
        s, t_inf, a = carry
        d, u = inp
        tau = d - t_inf
        inf = (1.0 - s) * a * jnp.exp(-((tau - 4.0) ** 2) / (2 * 1.5**2))
        force = R * jax.ops.segment_sum(inf[src], dst, N, indices_are_sorted=True)
        # logit of p = 1 - exp(-force); the max() keeps d/dforce finite (XLA folds "p + eps" away)
        z = (jnp.log(jnp.expm1(jnp.maximum(force, 1e-6))) + jnp.log(u) - jnp.log(1.0 - u)) / TEMP
        soft = jax.nn.sigmoid(z)
        b = (soft > 0.5).astype(F) + soft - lax.stop_gradient(soft)
        new = s * b
        stage_i = ((tau >= 2.0) & (tau < 8.0)).astype(F)
        a = a * (1.0 - m * (1.0 - s) * stage_i)
        return (s - new, t_inf + new * (d - t_inf), a), jnp.sum(new)

    _, daily = lax.scan(day, (s0, t0, jnp.ones_like(s0)), (days, U))
    return jnp.mean((daily / N - target) ** 2) * 1e4


def costs(N):
    E = DEG * N
    fl = DAYS * (2 * E + N * (25 + 7 * TRANS))  # per agent: exp x2, expm1, log x3, sigmoid
    edges = 8 * E  # src + dst int32
    big = edges > 16 * 2**20  # the edge list cannot stay in L3 between days
    dram = (DAYS if big else 1) * edges + 4 * DAYS * N + 12 * N
    # fused per-day implementation: stream edges + ~8 N-arrays; random gathers inf[src] (fwd) and
    # scatter-adds into src (bwd); grad stores ~12 floats per agent-day of residuals.
    fwd = cost(fl, dram, DAYS * (edges + 32 * N), edges + 4 * DAYS * N + 16 * N, DAYS * E, 4 * N)
    grad = cost(3 * fl, 2 * dram - 4 * DAYS * N, DAYS * (2 * edges + 64 * N + 2 * 48 * N),
                edges + 48 * DAYS * N, 2 * DAYS * E, 4 * N)
    return fwd, grad


def main():
    R, m = arr(np.float32(0.06)), arr(np.float32(0.02))
    for N in parse_sizes(SIZES):
        data = make(N)
        size = f"N={N},E={DEG * N},days={DAYS}"
        cf, cg = costs(N)
        budget = 25.0 if N <= 100_000 else 20.0
        res, out = bench(loss, (R, m) + data, min_reps=10 if N <= 100_000 else 5, budget=budget)
        emit("W3", "fwd", size, res, cf, steps=DAYS)
        res, _ = bench(jax.grad(loss, argnums=(0, 1)), (R, m) + data,
                       min_reps=10 if N <= 100_000 else 5, budget=budget)
        emit("W3", "grad", size, res, cg, steps=DAYS)


if __name__ == "__main__":
    main()
