#!/usr/bin/env python3
"""Merge several compare_jax.sh tables (target/compare/table.md of separate runs) into one markdown
table with every run's times and ratios per row, their medians, and whether every run's checksums
agreed (stdlib only).

  merge_tables.py RUN1.md RUN2.md [...]

Rows are joined by (workload, variant, size) in the first table's order. Columns: the median kiln and
JAX compile times; each run's kiln and JAX median steady call, the ratio kiln/JAX per run and its
median; the ratio of the fastest calls per run and its median; "agree" only if every run agreed; the
first run's error against float64 (it depends on the code, not on the run).
"""
import statistics
import sys


def rows(path):
    out = {}
    with open(path) as f:
        for line in f:
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if line.startswith("| W") and len(cells) >= 10:
                out[tuple(cells[:3])] = cells
    return out


def num(cell):
    try:
        return float(cell)
    except ValueError:
        return None


def fmt(x):
    return "-" if x is None else f"{x:.3g}" if abs(x) < 100 else f"{x:.0f}"


def med(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    runs = [rows(p) for p in sys.argv[1:]]
    n = len(runs)
    header = ["workload", "variant", "size", "kiln compile", "JAX compile", f"kiln run ({n} runs)",
              f"JAX run ({n} runs)", f"kiln/JAX run ({n} runs)", "median", f"kiln/JAX min ({n} runs)",
              "median of min", "checksums", "sum|x| rel. err. vs f64: kiln / JAX"]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for key in runs[0]:
        got = [r.get(key) for r in runs]
        if any(g is None for g in got):
            print(f"| {' | '.join(key)} | missing in {sum(g is None for g in got)} run(s) |", file=sys.stderr)
            got = [g for g in got if g is not None]
        col = lambda i: [num(g[i]) for g in got]
        ratios, mins = col(7), col(8)
        cells = list(key) + [
            fmt(med(col(3))), fmt(med(col(4))),
            ", ".join(fmt(v) for v in col(5)), ", ".join(fmt(v) for v in col(6)),
            ", ".join(f"{v:.2f}" if v is not None else "-" for v in ratios), fmt(med(ratios)),
            ", ".join(f"{v:.2f}" if v is not None else "-" for v in mins), fmt(med(mins)),
            "agree" if all(g[9] == "agree" for g in got) else "DISAGREE",
            got[0][10] if len(got[0]) > 10 else "-",
        ]
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
