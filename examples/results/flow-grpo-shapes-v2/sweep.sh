#!/usr/bin/env bash
# The Flow-GRPO settings sweep on the shapes world v2 (BENCHMARKS.md, "Flow-GRPO settings
# sweep"): short runs from a base, two at a time on one thread each, every setting changed
# alone from the sweep's baseline. Usage: sweep.sh BASE_DIR OUT_DIR NAME "--set k=v ..." ...
# Each argument after OUT_DIR is `name:overrides`; runs go to OUT_DIR/name.
set -euo pipefail
base=$1; out=$2; shift 2
common=(--set "base=$base" --set steps=${SWEEP_STEPS:-20} --set eval_every=1000
        --set eval_steps=20 --set eval_images_per_category=16 --set diversity_prompts=4
        --set checkpoint_every=1000)
run() {
  local name=${1%%:*} sets=${1#*:}
  # shellcheck disable=SC2086
  RAYON_NUM_THREADS=1 ./target/release/drift train flow "${common[@]}" $sets --out "$out/$name" \
    > "$out/$name.log" 2>&1 || echo "$name failed" >> "$out/failures.txt"
}
mkdir -p "$out"
while [ $# -gt 0 ]; do
  run "$1" & shift
  if [ $# -gt 0 ]; then run "$1" & shift; fi
  wait
done
