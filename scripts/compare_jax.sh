#!/usr/bin/env bash
# Runs every benchmark workload on both sides, kiln (examples/bench_kiln.rs) and JAX on CPU
# (benches/jax/), checks that their checksums agree, and prints one markdown table.
#
#   scripts/compare_jax.sh [W1,W5]     # default: every workload the kiln runner has
#   RUNS=3 scripts/compare_jax.sh      # three whole runs, one after the other, merged into one
#                                      # table with each run's ratios and their medians
#
# Creates the JAX venv at .venv-jax (gitignored) on first use. Raw records land in target/compare/.
# Exits non-zero when a checksum disagrees (see scripts/compare_table.py).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
VENV="$ROOT/.venv-jax"
if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c "import jax" 2>/dev/null; then
    echo "# creating $VENV (jax[cpu]==0.10.2)" >&2
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install --quiet "jax[cpu]==0.10.2"
fi
export JAX_PLATFORMS=cpu

cargo build --release --example bench_kiln
KILN="$ROOT/target/release/examples/bench_kiln"
ONLY=${1:-$("$KILN" --list-workloads)}
OUT="$ROOT/target/compare"
mkdir -p "$OUT"
RUNS=${RUNS:-1}

script_for() {
    case $1 in
        W1) echo w1_heat.py ;;
        W2) echo w2_massspring.py ;;
        W3) echo w3_abm.py ;;
        W4) echo w4_rollout.py ;;
        W5) echo w5_mlp.py ;;
        *) echo "compare_jax.sh: no JAX script for workload $1" >&2; exit 2 ;;
    esac
}

# One whole run: one workload at a time, both sides back to back, so both see the same machine load.
run_once() {
    : > "$OUT/jax.jsonl"
    : > "$OUT/jax_x64.jsonl"
    : > "$OUT/kiln.jsonl"
    for w in ${ONLY//,/ }; do
        s=$(script_for "$w")
        echo "# $w: JAX ($s)" >&2
        (cd benches/jax && "$VENV/bin/python" "$s") | grep '^RESULT ' | sed 's/^RESULT //' >> "$OUT/jax.jsonl"
        echo "# $w: kiln" >&2
        "$KILN" --only "$w" | grep '^RESULT ' | sed 's/^RESULT //' >> "$OUT/kiln.jsonl"
        echo "# $w: JAX float64 reference checksums" >&2
        (cd benches/jax && KILN_ANCHOR_X64=1 "$VENV/bin/python" "$s" 2>/dev/null) | grep '^RESULT ' \
            | sed 's/^RESULT //' >> "$OUT/jax_x64.jsonl"
    done
    "$VENV/bin/python" scripts/compare_table.py "$OUT/kiln.jsonl" "$OUT/jax.jsonl" "$OUT/jax_x64.jsonl" \
        | tee "$OUT/table.md"
}

if [ "$RUNS" -le 1 ]; then
    run_once
    exit 0
fi
tables=()
for i in $(seq 1 "$RUNS"); do
    echo "# run $i of $RUNS, started $(date -u +%H:%M) UTC" >&2
    run_once
    cp "$OUT/table.md" "$OUT/table-run$i.md"
    tables+=("$OUT/table-run$i.md")
done
echo
python3 scripts/merge_tables.py "${tables[@]}" | tee "$OUT/table.md"
