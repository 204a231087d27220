# Copied from ../shared/anchors/jax/w5_mlp.py (kiln's JAX-on-CPU anchors, JAX 0.10.2); the specification,
# inputs and checksums must stay identical to the anchor's. Run through scripts/compare_jax.sh.
"""W5 MLP: 784 -> 512 (relu) -> 10, batch 256, mean softmax cross-entropy.

timed: jit(loss) (forward) and jit(grad(loss)) wrt (W1, b1, W2, b2).
Inputs: x = uniform(51, (256,784)), labels = randint(52, 256, 10),
W1 = uniform(53, (784,512), -a1, a1), a1 = 1/sqrt(784); b1 = uniform(54, 512, -0.1, 0.1);
W2 = uniform(55, (512,10), -a2, a2), a2 = 1/sqrt(512); b2 = uniform(56, 10, -0.1, 0.1).
"""
import numpy as np
import jax
import jax.numpy as jnp

from common import TRANS, arr, bench, cost, emit, parse_sizes, randint, uniform

SIZES = [(256, 784, 512, 10)]


def loss(params, x, labels):
    W1, b1, W2, b2 = params
    h = jax.nn.relu(x @ W1 + b1)
    logits = h @ W2 + b2
    lse = jax.nn.logsumexp(logits, axis=-1)
    return jnp.mean(lse - jnp.take_along_axis(logits, labels[:, None], axis=-1)[:, 0])


def costs(B, D, H, C):
    mm = 2 * B * (D * H + H * C)  # forward matmuls
    ew = B * H * 2 + B * C * (2 + TRANS) + B * TRANS
    fwd = cost(mm + ew, 4 * (B * D + D * H + H * C + H + C + B), 4 * (B * D + D * H + B * H * 2), 4 * (B * D + D * H))
    # backward: dW2 (2BHC), dh (2BHC), dW1 (2BDH); no dx.
    mmb = 2 * B * (D * H + 2 * H * C)
    p = 4 * (D * H + H * C + H + C)
    grad = cost(mm + mmb + 3 * ew, 4 * (B * D + B) + 2 * p, 4 * (B * D + 2 * D * H + B * H * 4), 4 * (B * D + 2 * D * H))
    return fwd, grad


def main():
    for B, D, H, C in parse_sizes(SIZES):
        a1, a2 = 1 / np.sqrt(D), 1 / np.sqrt(H)
        params = tuple(arr(a) for a in (
            uniform(53, (D, H), -a1, a1), uniform(54, (H,), -0.1, 0.1),
            uniform(55, (H, C), -a2, a2), uniform(56, (C,), -0.1, 0.1)))
        x = arr(uniform(51, (B, D)))
        labels = jnp.asarray(randint(52, B, C))
        size = f"B={B},{D}-{H}-{C}"
        cf, cg = costs(B, D, H, C)
        res, _ = bench(loss, (params, x, labels))
        emit("W5", "fwd", size, res, cf)
        res, _ = bench(jax.grad(loss), (params, x, labels))
        emit("W5", "grad", size, res, cg)


if __name__ == "__main__":
    main()
