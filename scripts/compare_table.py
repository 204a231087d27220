#!/usr/bin/env python3
"""Join kiln's and JAX's benchmark records and print one markdown table (stdlib only).

  compare_table.py KILN.jsonl JAX.jsonl [JAX_X64.jsonl]

Each file holds one JSON record per line, as printed after `RESULT ` by examples/bench_kiln.rs and
benches/jax/*.py (fields workload, variant, size, compile_ms, run_ms, checksum). Rows are joined by
(workload, variant, size). Checksums ([sum, sum|x|, first] per output leaf) must agree on sum|x| and
the first element at rtol 1e-4; any disagreement, or a row missing on one side, prints MISMATCH and
the script exits 1 (after printing the table). With the float64 reference records (JAX run with
KILN_ANCHOR_X64=1), the table also shows each side's relative error of sum|x| against float64, which
says which side is off when they disagree.
"""
import datetime
import json
import os
import platform
import subprocess
import sys

RTOL = 1e-4


def load(path):
    with open(path) as f:
        recs = [json.loads(line) for line in f if line.strip()]
    return {(r["workload"], r["variant"], r["size"]): r for r in recs}


def close(a, b):
    return abs(a - b) <= RTOL * max(abs(a), abs(b))


def disagreements(kc, jc):
    """Human-readable reasons why checksums kc (kiln) and jc (JAX) disagree; empty when they agree."""
    if len(kc) != len(jc):
        return [f"{len(kc)} output leaves vs {len(jc)}"]
    out = []
    for i, (k, j) in enumerate(zip(kc, jc)):
        for idx, what in ((1, "sum|x|"), (2, "first")):
            if not close(k[idx], j[idx]):
                rel = abs(k[idx] - j[idx]) / max(abs(k[idx]), abs(j[idx]))
                out.append(f"leaf {i} {what}: kiln {k[idx]!r} vs JAX {j[idx]!r} (rel {rel:.1e})")
    return out


def rel_err(c, ref):
    """max over leaves of |sum|x| - ref| / ref, against the float64 reference checksum."""
    return max(abs(a[1] - b[1]) / max(abs(b[1]), 1e-30) for a, b in zip(c, ref))


def machine():
    model = platform.processor() or "unknown CPU"
    try:
        for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines():
            if line.startswith("Model name:"):
                model = line.split(":", 1)[1].strip()
    except OSError:
        pass
    return f"{model}, {os.cpu_count()} cores"


def fmt(x):
    return "-" if x is None else f"{x:.3g}" if abs(x) < 100 else f"{x:.0f}"


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    kiln, jax = load(sys.argv[1]), load(sys.argv[2])
    x64 = load(sys.argv[3]) if len(sys.argv) == 4 else {}
    keys = list(jax) + [k for k in kiln if k not in jax]
    problems = []
    print(f"Measured {datetime.date.today().isoformat()} on {machine()}; "
          f"JAX {next(iter(jax.values()), {}).get('jax', '?')} on CPU. Times in ms: compile = first call - "
          f"median steady call; run = median steady call; min = fastest steady call (steadier than the median "
          f"where the machine's speed comes in phases).\n")
    header = ["workload", "variant", "size", "kiln compile", "JAX compile", "kiln run", "JAX run",
              "kiln/JAX run", "kiln/JAX min", "checksums"]
    if x64:
        header.append("sum|x| rel err vs f64: kiln / JAX")
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for key in keys:
        k, j = kiln.get(key), jax.get(key)
        if k is None or j is None:
            problems.append(f"{' '.join(key)}: no {'kiln' if k is None else 'JAX'} record")
            status = "MISSING"
        else:
            why = disagreements(k["checksum"], j["checksum"])
            problems += [f"{' '.join(key)}: {w}" for w in why]
            status = "MISMATCH" if why else "agree"
        cells = list(key) + [
            fmt(k and k["compile_ms"]), fmt(j and j["compile_ms"]), fmt(k and k["run_ms"]), fmt(j and j["run_ms"]),
            fmt(k["run_ms"] / j["run_ms"]) if k and j else "-",
            fmt(k["min_ms"] / j["min_ms"]) if k and j and k.get("min_ms") and j.get("min_ms") else "-", status,
        ]
        if x64:
            ref = x64.get(key)
            errs = [f"{rel_err(r['checksum'], ref['checksum']):.1e}" if r and ref else "-" for r in (k, j)]
            cells.append(" / ".join(errs))
        print("| " + " | ".join(cells) + " |")
    if problems:
        print(f"\nMISMATCH: {len(problems)} checksum problem(s) (rtol {RTOL} on sum|x| and the first element):",
              file=sys.stderr)
        for p in problems:
            print(f"  MISMATCH {p}", file=sys.stderr)
        sys.exit(1)
    print(f"\nAll {len(keys)} rows: checksums agree (rtol {RTOL} on sum|x| and the first element).", file=sys.stderr)


if __name__ == "__main__":
    main()
