#!/usr/bin/env bash
# Issue 9 on a lent GPU: coupled-GRPO from dllm-code-v3, real rewards vs the shuffled-reward
# null control, 3 seeds each, six runs side by side, stopped cleanly by max_seconds (each run
# checkpoints, evaluates and saves its model; calling the script again on a warm machine
# resumes them). Results are packed into $OUT.
#
# Before the call, on the dev machine (about 15 min):
#   source .ci/cuda-toolkit-from-pypi.sh
#   CARGO_TARGET_DIR=target-cuda cargo build --release --features cuda
#   mkdir -p .dev && strip -o /tmp/drift target-cuda/release/drift && gzip -c /tmp/drift > .dev/drift.gz
# Then: run(command="LR=3e-6 SECONDS_PER_RUN=420 bash examples/results/dllm-coupled-grpo-v3-fill/gpu.sh",
#           carry=[".dev"], timeout_s=590)
set -u
LR=${LR:-3e-6}; SECONDS_PER_RUN=${SECONDS_PER_RUN:-420}; STEPS=${STEPS:-200}
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
gunzip -c .dev/drift.gz > /tmp/drift; B=/tmp/drift; chmod +x $B
LIBS=$(find /opt /usr/local /usr/lib /usr/lib64 \( -name 'libcublas.so.1*' -o -name 'libcurand.so.1*' -o -name 'libcudart.so.1*' -o -name 'libnvrtc.so.1*' -o -name 'libcublasLt.so.1*' \) 2>/dev/null | xargs -r -n1 dirname | sort -u | tr '\n' ':')
export LD_LIBRARY_PATH=${LIBS}/usr/local/nvidia/lib64:/usr/local/nvidia/lib:${LD_LIBRARY_PATH:-}
export RAYON_NUM_THREADS=2 NO_COLOR=1
nvidia-smi -L
R=runs; mkdir -p $R $OUT
D="--set prompts_per_step=16 --set steps=$STEPS --set eval_every=10 --set eval_items=256"
D="$D --set checkpoint_every=10 --set optim.adamw.lr=$LR --set max_seconds=$SECONDS_PER_RUN"
for s in 0 1 2; do
  for arm in real null; do
    shuffle=false; [ $arm = null ] && shuffle=true
    $B --device cuda train dllm $D --set seed=$s --set shuffle_rewards=$shuffle \
      --out $R/cg-$arm-lr$LR-s$s > $R/cg-$arm-lr$LR-s$s.log 2>&1 &
  done
done
wait
echo "all runs stopped at t=$(el)"
tar czf $OUT/dllm-null.tgz $R/cg-*.log $R/cg-*/metrics.jsonl $R/cg-*/summary.json $R/cg-*/curves.png
ls -la $OUT
