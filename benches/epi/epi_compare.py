"""Side-by-side GradABM speed: kiln and the JAX re-statement, measured in the same run, alternating.

Each round runs, as separate processes one after the other, kiln's release example
`epi_compare N` (crates/sims/examples/epi_compare.rs) and JAX's anchor
`shared/anchors/gradabm/gradabm_jax.py --N N` (JAX on CPU, the same model in its published
`reference` form, 56 days). Each process reports its best of a few calls: a simulated day (the
56-day forward under jit, divided by 56) and the 56-day forward + backward of mean(deaths^2).
Over ROUNDS rounds the script prints the median of each side, the ratio kiln/JAX of the medians,
the range of the per-round ratios, and each side's peak memory; the machine's noise (a shared 2-core VM: the same binary
varies by +-15 % from run to run) is why one run of each is not enough.

    cargo build --release -p kiln-sims --example epi_compare
    .venv-jax/bin/python benches/epi/epi_compare.py --n 100000 --rounds 7 --out target/epi_compare.json
"""

import argparse
import ast
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("JAX_PLATFORMS", "cpu")
REPO = Path(__file__).resolve().parents[2]
KILN = REPO / "target" / "release" / "examples" / "epi_compare"
JAX = REPO.parent / "shared" / "anchors" / "gradabm" / "gradabm_jax.py"


def kiln_round(n):
    out = subprocess.run([str(KILN), str(n)], capture_output=True, text=True, check=True).stdout
    day = re.search(r"forward:.*?, ([0-9.]+) ms/day", out)
    vg = re.search(r"fwd\+bwd:.*?, ([0-9.]+) s for.*?peak RSS ([0-9.]+) GB", out)
    if not (day and vg):
        sys.exit(f"cannot read kiln's output:\n{out}")
    return float(day.group(1)) / 1e3, float(vg.group(1)), float(vg.group(2))


def jax_round(n, script):
    out = subprocess.run([sys.executable, str(script), "--N", str(n)], capture_output=True, text=True,
                         check=True).stdout
    res = ast.literal_eval(out.strip().splitlines()[-1])
    return res["fwd_s_per_day"], res["fwd_bwd_s"], res["maxrss_GB"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--jax-script", type=Path, default=JAX)
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    if not KILN.exists():
        sys.exit(f"{KILN} is missing: cargo build --release -p kiln-sims --example epi_compare")
    rows = []
    for r in range(a.rounds):
        load = os.getloadavg()[0]
        k = kiln_round(a.n)
        j = jax_round(a.n, a.jax_script)
        rows.append(dict(round=r, load=load, kiln_day_s=k[0], kiln_fwd_bwd_s=k[1], kiln_peak_rss_gb=k[2],
                         jax_day_s=j[0], jax_fwd_bwd_s=j[1], jax_peak_rss_gb=j[2]))
        print(f"round {r}: load {load:.2f}; day kiln {k[0]*1e3:.2f} ms, JAX {j[0]*1e3:.2f} ms ({k[0]/j[0]:.2f}); "
              f"fwd+bwd kiln {k[1]:.3f} s, JAX {j[1]:.3f} s ({k[1]/j[1]:.2f})", flush=True)
    med = lambda key: statistics.median(x[key] for x in rows)
    summary = {}
    print(f"\nN = {a.n}, {a.rounds} rounds ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})\n")
    print("| measure | kiln median | JAX median | kiln/JAX (medians) | per-round ratios |")
    print("|---|---|---|---|---|")
    for name, kk, jk, unit, scale in [("day", "kiln_day_s", "jax_day_s", "ms", 1e3),
                                      ("56-day fwd+bwd", "kiln_fwd_bwd_s", "jax_fwd_bwd_s", "s", 1)]:
        ratios = [x[kk] / x[jk] for x in rows]
        ratio = med(kk) / med(jk)
        summary[name] = dict(kiln=med(kk), jax=med(jk), ratio=ratio, ratio_min=min(ratios), ratio_max=max(ratios))
        print(f"| {name} | {med(kk)*scale:.3g} {unit} | {med(jk)*scale:.3g} {unit} | {ratio:.2f} | "
              f"{min(ratios):.2f}-{max(ratios):.2f} |")
    print(f"\npeak RSS (max over rounds): kiln {max(x['kiln_peak_rss_gb'] for x in rows):.2f} GB (the gradient, "
          f"VmHWM), JAX {max(x['jax_peak_rss_gb'] for x in rows):.2f} GB (the whole process, ru_maxrss)")
    if a.out:
        a.out.write_text(json.dumps(dict(n=a.n, rounds=rows, summary=summary), indent=1))


if __name__ == "__main__":
    main()
