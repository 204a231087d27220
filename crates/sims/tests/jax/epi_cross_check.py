"""JAX reference values for kiln's GradABM COVID model with the noise fixed (issue 7's cross-check).

The model is the one of shared/anchors/gradabm/gradabm_jax.py (itself a re-statement of
AdityaLab/GradABM that reproduces it exactly), with the noise passed in: each straight-through draw
takes one uniform u per agent and day, as a two-class Gumbel-softmax is a binary-concrete sample,
hard = [logit(p) + log u - log(1-u) > 0], soft = sigmoid(that), y = hard + (soft - stop_gradient(soft)).

Writes ../data/epi_jax_cross_check.json: the population (ages, undirected edges), the uniforms, the
per-week parameters, and for both update forms the daily infections and deaths, the loss
mean(deaths^2) + 1e-3 * mean(infections^2) and its gradient in (r0[W], mortality[W], initial_pct).

Run once: <worktree>/.venv-jax/bin/python crates/sims/tests/jax/epi_cross_check.py  (jax 0.10.2, CPU)
"""
import json, math, os
import numpy as np
import jax, jax.numpy as jnp
from jax import lax
from scipy.stats import gamma as gamma_dist

jax.config.update('jax_enable_x64', False)
N, T = 1000, 21
W = math.ceil(T / 7)
S, E, I, R_, M = 0., 1., 2., 3., 4.
SF_SUS = jnp.array([0.35, 0.69, 1.03, 1.03, 1.03, 1.03, 1.27, 1.52], jnp.float32)
SF_INF = jnp.array([0.0, 0.33, 0.72, 0.0, 0.0], jnp.float32)
T_EI, T_IR = 3.0, 5.0


def gamma_pmf(n, mean=5.5, sd=2.14):
    b = sd * sd / mean; a = mean / b; k = np.arange(n)
    return jnp.asarray(gamma_dist.cdf(k, a, scale=b) - gamma_dist.cdf(k - 1, a, scale=b), jnp.float32)


def st_bernoulli(p, u):
    logit = jnp.log(p + 1e-9) - jnp.log(1 - p + 1e-9) + jnp.log(u) - jnp.log(1 - u)
    hard = (logit > 0).astype(jnp.float32)
    soft = jax.nn.sigmoid(logit)
    return hard + (soft - lax.stop_gradient(soft))


def simulate(r0, mort, init_pct, ages, src, dst, uniforms, keep_grad):
    pmf = gamma_pmf(T + 10)
    ibar = jnp.where(ages <= 1, 2.0, jnp.where(ages > 6, 3.0, 4.0))
    scale_i = SF_SUS[ages] / ibar
    INF_T = float(T + 1)
    stage = st_bernoulli(init_pct / 100 * jnp.ones(N), uniforms[0])
    isE = lax.stop_gradient(stage) == E
    carry = dict(stage=stage, infected=isE, t_inf=jnp.where(isE, -1.0, INF_T), nst=jnp.where(isE, T_EI, INF_T))

    def step(c, xs):
        t, u = xs
        stage, infected, t_inf, nst = c['stage'], c['infected'], c['t_inf'], c['nst']
        tf = t.astype(jnp.float32)
        R0, m = r0[t // 7], mort[t // 7]
        sd = lax.stop_gradient(stage)
        dt = jnp.clip(tf - t_inf, 0, T + 9).astype(jnp.int32)
        src_factor = jnp.where(infected, SF_INF[sd.astype(jnp.int32)] * pmf[dt], 0.0)
        agg = jax.ops.segment_sum(src_factor[src], dst, num_segments=N, indices_are_sorted=True)
        lam = R0 * scale_i * agg
        new_exp = (sd == S) * st_bernoulli(1 - jnp.exp(-lam), u)
        due = nst <= tf
        leaving_I = (sd == I) & due
        removed = stage * leaving_I / I
        out = (new_exp.sum(), m * removed.sum())
        if keep_grad:
            prog = stage * ((sd == R_) + (sd == M) + (sd == E) * jnp.where(due, I / E, 1.0)
                            + (sd == I) * jnp.where(due, R_ / I, 1.0))
        else:
            prog = ((sd == R_) * R_ + (sd == M) * M + (sd == E) * jnp.where(due, I, E)
                    + (sd == I) * jnp.where(due, R_, I))
        nst_new = jnp.where((sd == I) & (nst == tf), INF_T, nst)
        nst_new = jnp.where((sd == E) & (nst == tf), tf + T_IR, nst_new)
        nst = new_exp * (tf + 1 + T_EI) + (1 - new_exp) * nst_new
        stage = new_exp * E + prog
        ne = lax.stop_gradient(new_exp) > 0.5
        return dict(stage=stage, infected=(infected | ne) & ~leaving_I,
                    t_inf=jnp.where(ne, tf, t_inf), nst=nst), out

    _, (infs, deaths) = lax.scan(step, carry, (jnp.arange(T), uniforms[1:]))
    return infs, deaths


def main():
    g = np.random.default_rng(20261129)
    p = np.array([14468, 8137, 7865, 9450, 12140, 10983, 4588, 3285], float); p /= p.sum()
    ages = g.choice(8, size=N, p=p).astype(np.int32)
    Eu = int(round(N * 249991 / 70916))
    a = g.integers(0, N, Eu).astype(np.int32); b = g.integers(0, N, Eu).astype(np.int32)
    src = np.concatenate([a, b]); dst = np.concatenate([b, a])
    order = np.argsort(dst, kind='stable')
    # Uniforms strictly inside (0, 1): k / 2^24 with 0 < k < 2^24, exact in f32.
    uniforms = (g.integers(1, 1 << 24, (T + 1, N)) / (1 << 24)).astype(np.float32)
    r0 = np.array([3.0, 2.6, 2.2], np.float32)
    mort = np.array([0.02, 0.015, 0.01], np.float32)
    init_pct = np.float32(3.0)
    out = dict(n=N, days=T, ages=ages.tolist(), edges=np.stack([a, b], 1).tolist(),
               uniforms=[float(x) for x in uniforms.ravel()], r0=r0.tolist(), mortality=mort.tolist(),
               initial_pct=float(init_pct), jax_version=jax.__version__)
    for name, kg in [('reference', False), ('keep_grad', True)]:
        def loss(r0, mort, init_pct):
            infs, deaths = simulate(r0, mort, init_pct, jnp.asarray(ages), jnp.asarray(src[order]),
                                    jnp.asarray(dst[order]), jnp.asarray(uniforms), kg)
            return jnp.mean(deaths ** 2) + 1e-3 * jnp.mean(infs ** 2), (infs, deaths)
        # Eagerly: under jax.jit, XLA's CPU pipeline turns this formula's gradient into NaN where
        # lambda = 0 or lambda >= 20 (measured with jax 0.10.2); op-by-op evaluation is exact f32.
        with jax.disable_jit():
            (l, (infs, deaths)), gr = jax.value_and_grad(loss, argnums=(0, 1, 2), has_aux=True)(
                jnp.asarray(r0), jnp.asarray(mort), jnp.asarray(init_pct))
        out[name] = dict(loss=float(l), infections=np.asarray(infs).tolist(), deaths=np.asarray(deaths).tolist(),
                         grad_r0=np.asarray(gr[0]).tolist(), grad_mortality=np.asarray(gr[1]).tolist(),
                         grad_initial_pct=float(gr[2]))
        print(name, 'loss', float(l), 'infections', float(infs.sum()), 'deaths', float(deaths.sum()),
              'grads', [np.asarray(x).tolist() for x in gr])
    path = os.path.join(os.path.dirname(__file__), '..', 'data', 'epi_jax_cross_check.json')
    with open(path, 'w') as f:
        json.dump(out, f)


if __name__ == '__main__':
    main()
