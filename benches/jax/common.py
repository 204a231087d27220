# Copied from ../shared/anchors/jax/common.py (kiln's JAX-on-CPU anchors, JAX 0.10.2); the specification,
# inputs and checksums must stay identical to the anchor's. Run through scripts/compare_jax.sh.
"""Shared helpers for the JAX-on-CPU anchor workloads (kiln perf baseline).

- portable deterministic inputs (a 32-bit integer hash, trivially re-implementable in Rust),
- `bench`: compile time (first call minus steady state) and steady-state time per call,
- checksums of results and HLO statistics (fusions / kernels) of the compiled program,
- `emit`: print one JSON record per measurement (run_all.py collects them).
"""
import os

os.environ["JAX_PLATFORMS"] = "cpu"  # always CPU, even if a GPU plugin were present

import argparse
import json
import re
import resource
import statistics
import sys
import time

import numpy as np
import jax
import jax.numpy as jnp

# KILN_ANCHOR_X64=1: float64 reference run (same f32-generated inputs, upcast); checksums only.
X64 = os.environ.get("KILN_ANCHOR_X64") == "1"
if X64:
    jax.config.update("jax_enable_x64", True)
F = jnp.float64 if X64 else jnp.float32


# ---------------------------------------------------------------- inputs
# lowbias32 (C. Wellons): h(x) = x^=x>>16; x*=0x7feb352d; x^=x>>15; x*=0x846ca68b; x^=x>>16
# applied to (i + seed * 0x9E3779B9) mod 2^32, i = 0..n-1 (row-major flat index).


def hash_u32(n, seed):
    x = (np.arange(n, dtype=np.uint64) + np.uint64(seed) * np.uint64(0x9E3779B9)) & np.uint64(0xFFFFFFFF)
    x = x.astype(np.uint32)
    x ^= x >> np.uint32(16)
    x *= np.uint32(0x7FEB352D)
    x ^= x >> np.uint32(15)
    x *= np.uint32(0x846CA68B)
    x ^= x >> np.uint32(16)
    return x


def uniform(seed, shape, lo=0.0, hi=1.0):
    """float32: u = ((h >> 9) + 0.5) / 2^23 (exact in f32, in [2^-24, 1 - 2^-24]); returns
    f32(lo) + f32(hi - lo) * u evaluated in f32 (multiply, then add; no FMA), row-major."""
    n = int(np.prod(shape))
    u = (((hash_u32(n, seed) >> np.uint32(9)).astype(np.float64) + 0.5) / 2.0**23).astype(np.float32)
    return (np.float32(lo) + np.float32(hi - lo) * u).reshape(shape)


def randint(seed, n, m):
    """int32 in [0, m): h mod m."""
    return (hash_u32(n, seed) % np.uint32(m)).astype(np.int32)


def arr(x):
    """Host array -> device array in the working float dtype (ints unchanged)."""
    x = np.asarray(x)
    return jnp.asarray(x, F) if x.dtype.kind == "f" else jnp.asarray(x)


# ---------------------------------------------------------------- measurement


def _block(x):
    return jax.block_until_ready(x)


_WARM = []


def _warmup():
    """One throw-away jit(grad(scan)) so the first measured compile excludes one-time JAX init."""
    if not _WARM:
        g = jax.jit(jax.grad(lambda x: jax.lax.scan(lambda c, _: (jnp.sin(c) * 2.0, None), x, None, 3)[0].sum()))
        _block(g(jnp.ones(8)))
        _WARM.append(1)


def bench(fn, args, min_reps=10, max_reps=200, min_time=1.0, budget=25.0):
    """Time `fn` jitted: AOT lower/compile (fresh jit, also gives the HLO stats), then a second
    fresh jit's first call (trace + compile + run) and >= min_reps steady-state calls.

    compile_ms = first call - median steady call (the brief's definition); lower_ms/xla_ms = AOT.
    Stops after min_reps once `min_time` s of steady calls are collected; never spends more than
    `budget` s on steady calls (then fewer than min_reps are taken; `reps` says so).
    cpu_ms = median process CPU time per call (all threads): less sensitive to other tenants.
    faults_per_call = minor page faults per steady call (XLA maps fresh output/temp buffers each call).
    """
    if X64:  # reference values only
        out = _block(jax.jit(fn)(*args))
        nan = float("nan")
        return dict(compile_ms=nan, first_ms=nan, lower_ms=nan, xla_ms=nan, run_ms=nan, min_ms=nan, cpu_ms=nan,
                    iqr_pct=nan, faults_per_call=nan, reps=0, load=[], checksum=checksum(out), hlo={}), out
    _warmup()
    load0 = os.getloadavg()[0]
    t0 = time.perf_counter()
    lowered = jax.jit(lambda *a: fn(*a)).lower(*args)
    t1 = time.perf_counter()
    compiled = lowered.compile()
    t2 = time.perf_counter()
    hlo = hlo_stats(compiled.as_text())
    del lowered, compiled
    f = jax.jit(lambda *a: fn(*a))  # new function object: no cache hit, full trace + compile
    t0c = time.perf_counter()
    out = _block(f(*args))
    first = time.perf_counter() - t0c
    times, cpus = [], []
    flt0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    while len(times) < max_reps:
        c0, w0 = time.process_time(), time.perf_counter()
        out = _block(f(*args))
        times.append(time.perf_counter() - w0)
        cpus.append(time.process_time() - c0)
        total = sum(times)
        if (len(times) >= min_reps and total >= min_time) or total >= budget:
            break
    faults = (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - flt0) / len(times)
    med = statistics.median(times)
    q = np.percentile(times, [25, 75])
    return dict(
        compile_ms=1e3 * (first - med),
        first_ms=1e3 * first,
        lower_ms=1e3 * (t1 - t0),
        xla_ms=1e3 * (t2 - t1),
        run_ms=1e3 * med,
        min_ms=1e3 * min(times),
        cpu_ms=1e3 * statistics.median(cpus),
        iqr_pct=100.0 * (q[1] - q[0]) / med,
        faults_per_call=faults,
        reps=len(times),
        load=[round(load0, 2), round(os.getloadavg()[0], 2)],
        checksum=checksum(out),
        hlo=hlo,
    ), out


def checksum(tree):
    """Per output leaf: [sum, sum of |x|] in float64, plus the first element (for quick eyeballing)."""
    leaves = jax.tree_util.tree_leaves(tree)
    res = []
    for x in leaves:
        a = np.asarray(x, dtype=np.float64)
        res.append([float(a.sum()), float(np.abs(a).sum()), float(a.ravel()[0])])
    return res


_TRIVIAL = {"parameter", "constant", "get-tuple-element", "tuple", "bitcast", "while", "conditional",
            "call", "after-all", "copy-start", "copy-done", "opt-barrier", "partition-id", "replica-id"}


def hlo_stats(text):
    """Count kernels in optimized HLO text: fusion instructions, and all non-trivial instructions
    of the computations that actually execute (entry, while bodies/conditions, branches)."""
    comps, cur = {}, None
    for line in text.splitlines():
        m = re.match(r"^(ENTRY\s+)?%?([\w.\-]+)\s.*\{\s*$", line)
        if m and not line.startswith(" "):
            cur = "ENTRY" if m.group(1) else m.group(2)
            comps[cur] = []
        elif cur and line.startswith(" ") and "=" in line:
            comps[cur].append(line)
    live = {"ENTRY"}
    for lines in comps.values():
        for line in lines:
            for key in ("body", "condition", "true_computation", "false_computation"):
                for name in re.findall(key + r"=%?([\w.\-]+)", line):
                    live.add(name)
            for grp in re.findall(r"branch_computations=\{([^}]*)\}", line):
                live.update(n.strip().lstrip("%") for n in grp.split(","))
    fusions = kernels = 0
    ops = {}
    for name in live:
        for line in comps.get(name, []):
            m = re.search(r"=\s*(?:\S+\s+)?([a-z][\w\-]*)\(", line.split("metadata=")[0])
            if not m:
                continue
            op = m.group(1)
            if op in _TRIVIAL:
                continue
            kernels += 1
            fusions += op == "fusion"
            ops[op] = ops.get(op, 0) + 1
    whiles = sum(len(re.findall(r"\swhile\(", "\n".join(v))) for v in comps.values())
    return dict(fusions=fusions, kernels=kernels, whiles=whiles, ops=ops)


# ---------------------------------------------------------------- cost model + output


def cost(flops, dram_bytes, stream_bytes, stream_ws, gathers=0, gather_table=0):
    """Work estimate used by run_all.py for the roofline.

    flops: arithmetic (FMA = 2, each transcendental counted as TRANS flops).
    dram_bytes: compulsory DRAM traffic for ANY implementation (inputs read + outputs written once,
      plus per-step data that cannot stay in cache, e.g. an edge list larger than L3).
    stream_bytes: traffic of a 'fused per scan step' implementation that stores residuals
      (the JAX/kiln strategy): every step reads+writes its state once; stream_ws is the
      working-set size in bytes, which decides the memory level (L1/L2/L3/DRAM) it streams from.
    gathers: random-index loads / scatter-adds (charged at the measured gather rate for a table of
      gather_table bytes) in that same implementation.
    """
    return dict(flops=float(flops), dram_bytes=float(dram_bytes), stream_bytes=float(stream_bytes),
                stream_ws=float(stream_ws), gathers=float(gathers), gather_table=float(gather_table))


TRANS = 15  # flops charged per exp/log/sin/cos/tanh/sqrt/div (vectorized polynomial cost)


def emit(workload, variant, size, res, cst, **extra):
    rec = dict(workload=workload, variant=variant, size=size, **res, cost=cst, **extra)
    rec["threads"] = os.cpu_count()
    rec["x64"] = X64
    rec["jax"] = jax.__version__
    print("RESULT " + json.dumps(rec), flush=True)
    r = res
    if X64:
        print(f"# {workload:<6} {variant:<12} {size:<22} x64 checksum {r['checksum']}", file=sys.stderr, flush=True)
        return
    print(f"# {workload:<6} {variant:<12} {size:<22} compile {r['compile_ms']:8.1f} ms  run {r['run_ms']:10.3f} ms"
          f" (min {r['min_ms']:.3f}, cpu {r['cpu_ms']:.3f}, IQR {r['iqr_pct']:.0f}%, n={r['reps']}, load {r['load']},"
          f" faults {r['faults_per_call']:.0f})  fusions={r['hlo'].get('fusions')}"
          f" kernels={r['hlo'].get('kernels')}", file=sys.stderr, flush=True)


def parse_sizes(default):
    p = argparse.ArgumentParser()
    p.add_argument("--sizes", default=None, help="comma-separated indices into the size list")
    a = p.parse_args()
    if a.sizes is None:
        return default
    return [default[int(i)] for i in a.sizes.split(",")]
