#!/usr/bin/env bash
# The main job's 3-seed comparison (BENCHMARKS.md): for each seed, the shipped defaults
# (`drift train flow`) beside the shuffled-reward null at the same settings, the pair side by
# side on one thread each. Usage: seeds.sh OUT_DIR [SEED ...]
set -euo pipefail
out=$1; shift
# DRIFT_BIN: the binary (default ./target/release/drift; a copy lets the tree be rebuilt
# meanwhile); DRIFT_SETS: overrides added to both runs, e.g. "--set base=DIR".
bin=${DRIFT_BIN:-./target/release/drift}
mkdir -p "$out"
for seed in "${@:-0 1 2}"; do
  for mode in real null; do
    shuffle=false; [ "$mode" = null ] && shuffle=true
    # shellcheck disable=SC2086
    RAYON_NUM_THREADS=1 "$bin" train flow --set seed="$seed" ${DRIFT_SETS:-} \
      --set shuffle_rewards=$shuffle --out "$out/s$seed-$mode" > "$out/s$seed-$mode.log" 2>&1 &
  done
  wait
done
