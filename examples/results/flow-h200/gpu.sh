#!/usr/bin/env bash
# One device call: sanity, dLLM coupled-GRPO runs (background), flow pretraining (time-boxed),
# eval of the new flow base, Flow-GRPO trials on it; everything packed into $OUT.
set -u
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
gunzip -c .dev/drift.gz > /tmp/drift; B=/tmp/drift; chmod +x $B
LIBS=$(find /opt /usr/local /usr/lib /usr/lib64 \( -name 'libcublas.so.1*' -o -name 'libcurand.so.1*' -o -name 'libcudart.so.1*' -o -name 'libnvrtc.so.1*' -o -name 'libcublasLt.so.1*' \) 2>/dev/null | xargs -r -n1 dirname | sort -u | tr '\n' ':')
export LD_LIBRARY_PATH=${LIBS}/usr/local/nvidia/lib64:/usr/local/nvidia/lib:${LD_LIBRARY_PATH:-}
echo "libs: $LIBS"; nvidia-smi -L
mkdir -p $OUT/r; R=runs; mkdir -p $R
$B --device cuda bench matmul flow --iters 3 2>&1 | tee $OUT/r/bench.txt
if ! grep -q flow_grpo_sde $OUT/r/bench.txt; then ldd $B | tee -a $OUT/r/bench.txt; exit 3; fi
$B --device cuda bench dllm --iters 3 2>&1 | tee -a $OUT/r/bench.txt
export RAYON_NUM_THREADS=2 NO_COLOR=1
D="--set prompts_per_step=16 --set steps=60 --set eval_every=5 --set eval_items=256 --set checkpoint_every=1000"
run_dllm() { name=$1; shift; $B --device cuda train dllm $D "$@" --out $R/$name > $R/$name.log 2>&1 & }
for s in 0 1 2; do
  run_dllm cg-lr1e-5-s$s --set seed=$s --set optim.adamw.lr=1e-5
  run_dllm cg-lr2e-5-t07-s$s --set seed=$s --set optim.adamw.lr=2e-5 --set decode.proposal.temperature=0.7
done
P="--config examples/configs/pretrain_flow.toml --set batch=256 --set checkpoint_every=2000"
$B --device cuda pretrain flow $P --set steps=40 --set optim.schedule.total=40 --set optim.schedule.warmup=5 --out $R/probe > $R/probe.log 2>&1
PS=$(grep -o 'wall time: [0-9.]*' $R/probe.log | grep -o '[0-9.]*$'); echo "probe 40 steps: $PS s (t=$(el))"; tail -3 $R/probe.log; [ -z "$PS" ] && PS=40
BUDGET=$(( 330 - $(el) ))
N=$(python3 -c "print(max(200, int($BUDGET / ($PS / 40.0) * 0.8)))"); echo "pretrain steps: $N"
timeout $((BUDGET + 120)) $B --device cuda pretrain flow $P --set steps=$N --set optim.schedule.total=$N --out $R/flow-pre > $R/flow-pre.log 2>&1
echo "pretrain done rc=$? t=$(el)"; tail -5 $R/flow-pre.log
M=$R/flow-pre/model
$B --device cuda eval flow --model $M --steps 40 --out $R/flow-eval 2>&1 | tee $R/flow-eval.log
G="--set base=$M --set steps=30 --set eval_every=10"
timeout $(( 560 - $(el) )) $B --device cuda train flow $G --out $R/fg-default > $R/fg-default.log 2>&1 &
timeout $(( 560 - $(el) )) $B --device cuda train flow $G --set optim.adamw.lr=1e-4 --out $R/fg-lr1e-4 > $R/fg-lr1e-4.log 2>&1 &
sleep $(( 565 - $(el) )); echo "packing t=$(el)"
pkill -f 'drift --device' ; sleep 1
tar czf $OUT/flowbase.tgz $R/flow-pre/model $R/flow-pre/metrics.jsonl $R/flow-pre/curves.png $R/flow-pre.log $R/probe.log $R/flow-eval $R/flow-eval.log 2>/dev/null
tar czf $OUT/dllm.tgz $R/cg-*.log $R/cg-*/metrics.jsonl $R/cg-*/summary.json $R/cg-*/curves.png 2>/dev/null
tar czf $OUT/fg.tgz $R/fg-*.log $R/fg-*/metrics.jsonl $R/fg-*/eval $R/fg-*/curves.png 2>/dev/null
ls -la $OUT; echo "end t=$(el)"
