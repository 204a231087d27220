#!/usr/bin/env bash
# Which simplifier rules fire on which program, and which fire on none (issue 6 asks that every
# rule fire on some workload). Programs: the benchmark workloads W1-W5 (the report of
# `cargo bench --bench workloads_simplify`, sizes up to 10^5) and the flagship simulations run
# through `kiln-sims` with KILN_DUMP (each compiled program's simplify-*.txt holds the rules that
# fired): Brax ant rollouts on the spring and positional pipelines, a reacher rollout, the APG
# gradient through the spring pendulum's rollout (linear and MLP policies), and the GradABM
# calibration on the bundled county series.
#
#   scripts/rules_fired.sh        # about 2 minutes on 2 cores once built
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# "name×3, other×1" lines on stdin -> one "name×total, ..." line, most frequent first.
sum_rules() {
    tr ',' '\n' | sed 's/^ *//; /^$/d; /^none$/d' | awk -F'×' '{n[$1] += $2} END {for (k in n) print n[k], k}' \
        | sort -k1,1nr -k2 | awk '{printf "%s%s×%s", (NR > 1 ? ", " : ""), $2, $1} END {print ""}'
}

cargo build --release -p kiln-sims --bin kiln-sims
SIMS="$ROOT/target/release/kiln-sims"

echo "# workloads (cargo bench --bench workloads_simplify): rules on the traced program and in jit's pipeline"
cargo bench --bench workloads_simplify 2>/dev/null > "$TMP/bench.txt"
# name <TAB> rules on the traced program <TAB> rules in jit's pipeline
awk '/^W[0-9]/ {name = $0}
     /^  rules \(traced program\):/ {sub(/^[^:]*: /, ""); traced = $0}
     /^  rules \(jit.s pipeline/ {sub(/^[^:]*: /, ""); print name "\t" traced "\t" $0}' "$TMP/bench.txt" > "$TMP/workloads.tsv"
awk '/^W[0-9]/ {name = $0} /^  rules with fast math/ {sub(/^[^:]*: /, ""); print name "\t" $0}' "$TMP/bench.txt" \
    > "$TMP/fast.tsv"
while IFS=$'\t' read -r name traced pipeline; do
    echo "$name: traced program: $traced; jit's pipeline: $pipeline"
done < "$TMP/workloads.tsv"

run_sim() { # label, then kiln-sims arguments
    local label=$1
    shift
    local dir="$TMP/dump-$label"
    (cd "$TMP" && KILN_DUMP="$dir" "$SIMS" "$@" > "$TMP/$label.log" 2>&1)
    local rules
    rules=$(cat "$dir"/simplify-*.txt 2>/dev/null | sed -n 's/^ *rules: //p' | sum_rules)
    echo "$label: ${rules:-none}"
    echo "$rules" >> "$TMP/sims.txt"
}

echo "# simulations (kiln-sims with KILN_DUMP)"
: > "$TMP/sims.txt"
run_sim ant-spring-rollout rollout --env ant --pipeline spring --batch 64 --steps 50
run_sim ant-positional-rollout rollout --env ant --pipeline positional --batch 64 --steps 50
run_sim reacher-rollout rollout --env reacher --batch 16 --steps 20
run_sim pendulum-apg-grad apg --iterations 2 --batch 8 --out "$TMP/apg"
run_sim pendulum-apg-mlp-grad apg --iterations 2 --batch 8 --hidden 32,32 --out "$TMP/apg-mlp"
run_sim epi-calibrate calibrate

fired=$( (cut -f2,3 "$TMP/workloads.tsv" | tr '\t' ','; cat "$TMP/sims.txt") | tr ',' '\n' | sed 's/^ *//; s/×.*//' | sort -u)
all=$(sed -n 's/^ *rule!(\([a-z0-9_]*\), .*/\1/p' crates/transform/src/simplify/rules.rs)
echo "# rules of RULES that fired on none of these programs"
comm -23 <(echo "$all" | sort -u) <(echo "$fired") | tr '\n' ' '
echo
echo "# of those, the ones that fire on a workload's traced program with fast math (.fast_math(true))"
fast=$(cut -f2 "$TMP/fast.tsv" | tr ',' '\n' | sed 's/^ *//; s/×.*//; /^none$/d' | sort -u)
comm -12 <(comm -23 <(echo "$all" | sort -u) <(echo "$fired")) <(echo "$fast") | tr '\n' ' '
echo
