# Copied from ../shared/anchors/jax/w2_massspring.py (kiln's JAX-on-CPU anchors, JAX 0.10.2); the specification,
# inputs and checksums must stay identical to the anchor's. Run through scripts/compare_jax.sh.
"""W2 mass-spring soft robot (DiffTaichi-style), semi-implicit Euler, T=1000, dt=0.004.

Robot: NX x NY = 10 x 4 point masses (mass 1) on a grid of spacing 0.05 at x=0.1+0.05i, y=0.03+0.05j
(computed in f64, stored as f32), node id = i*NY + j; springs in generation order (for i, for j: right,
up, diag (i,j)-(i+1,j+1), anti-diag (i+1,j)-(i,j+1)) = 36+30+27+27 = 120 springs (a, b);
rest length = f32 distance between the f32 initial positions.
Controller (open loop): act_k(t) = tanh(sum_j W[k,j] sin(OMEGA*t*dt + 2*pi*j/NSIN)), NSIN = 10;
target_k = rest_k * (1 + ACT*act_k).  Per step (t = 0..T-1):
  d = x[b]-x[a]; len = |d| + 1e-4; f = K*(len-target)/len * d  (on a; -f on b)
  ground (y=0, smoothed): pen = softplus(-BETA*y)/BETA, c = sigmoid(-BETA*y)
  F = springs + (-MU*c*vx, KG*pen - DG*c*vy) + (0, GRAV)
  v = (v + dt*F) * exp(-dt*DAMP); x = x + dt*v
loss = -mean_i x_T[i, 0].  timed: forward and jit(grad(loss)) wrt W, single robot and
vmap over 256 robots.  W for robot r = uniform(21, (256,120,10), -0.5, 0.5)[r]; single robot = r=0.
"""

import numpy as np
import jax
import jax.numpy as jnp
from jax import lax

from common import F, TRANS, arr, bench, cost, emit, parse_sizes, uniform

NX, NY, SP = 10, 4, 0.05
NSIN, OMEGA, ACT = 10, 10.0, 0.2
K, KG, BETA, MU, DG, GRAV, DAMP = 1e4, 1e4, 500.0, 50.0, 20.0, -4.8, 10.0
DT, T = 0.004, 1000
SIZES = [("single", 1), ("batch", 256)]


def robot():
    pos = np.array([(0.1 + i * SP, 0.03 + j * SP) for i in range(NX) for j in range(NY)], np.float32)
    n = lambda i, j: i * NY + j  # noqa: E731
    sp = []
    for i in range(NX):
        for j in range(NY):
            if i + 1 < NX:
                sp.append((n(i, j), n(i + 1, j)))
            if j + 1 < NY:
                sp.append((n(i, j), n(i, j + 1)))
            if i + 1 < NX and j + 1 < NY:
                sp += [(n(i, j), n(i + 1, j + 1)), (n(i + 1, j), n(i, j + 1))]
    a, b = np.array(sp, np.int32).T
    rest = np.sqrt(((pos[b] - pos[a]) ** 2).sum(1)).astype(np.float32)
    return pos, a, b, rest


POS, A, B, REST = robot()
M, S = len(POS), len(A)


def loss(W, T=T):
    phase = jnp.arange(NSIN, dtype=F) * (2 * np.pi / NSIN)
    rest = arr(REST)

    def step(carry, t):
        x, v = carry
        act = jnp.tanh(W @ jnp.sin(OMEGA * DT * t + phase))
        target = rest * (1.0 + ACT * act)
        d = x[B] - x[A]
        length = jnp.sqrt(jnp.sum(d * d, axis=1)) + 1e-4
        f = (K * (length - target) / length)[:, None] * d
        F = jax.ops.segment_sum(f, A, M) - jax.ops.segment_sum(f, B, M)
        y = x[:, 1]
        c = jax.nn.sigmoid(-BETA * y)
        fx = -MU * c * v[:, 0]
        fy = KG * jax.nn.softplus(-BETA * y) / BETA - DG * c * v[:, 1] + GRAV
        v = (v + DT * (F + jnp.stack([fx, fy], axis=1))) * np.exp(-DT * DAMP)
        return (x + DT * v, v), None

    (x, _), _ = lax.scan(step, (arr(POS), jnp.zeros((M, 2), F)), jnp.arange(T, dtype=F))
    return -jnp.mean(x[:, 0])


def costs(R):
    step = (NSIN * TRANS + 2 * S * NSIN + S * TRANS + 3 * S  # controller
            + S * (3 + 3 + 2 * TRANS + 4 + 4)  # spring geometry + force (sqrt, div)
            + M * (4 * TRANS + 20))  # ground + integration
    n = R * T
    resid = 4 * (6 * M + 5 * S) * n  # residual floats stored per step (x, v, c, d, len, act, ...)
    st = 4 * 4 * M * R
    fwd = cost(n * step, 4 * S * NSIN * R, 2 * st * T, 2 * st)
    grad = cost(3 * n * step, 8 * S * NSIN * R, 2 * resid + 4 * st * T, resid)
    return fwd, grad


def main():
    Wall = uniform(21, (256, S, NSIN), -0.5, 0.5)
    for kind, R in parse_sizes(SIZES):
        size = f"{kind} R={R},T={T},M={M},S={S}"
        cf, cg = costs(R)
        if kind == "single":
            W = arr(Wall[0])
            res, _ = bench(loss, (W,))
            emit("W2", "fwd", size, res, cf, steps=T)
            res, _ = bench(jax.grad(loss), (W,))
            emit("W2", "grad", size, res, cg, steps=T)
        else:
            W = arr(Wall[:R])
            res, _ = bench(jax.vmap(loss), (W,), budget=20.0)
            emit("W2", "fwd", size, res, cf, steps=T)
            res, _ = bench(jax.vmap(jax.grad(loss)), (W,), budget=20.0)
            emit("W2", "grad", size, res, cg, steps=T)


if __name__ == "__main__":
    main()
