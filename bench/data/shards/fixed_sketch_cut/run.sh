#!/usr/bin/env bash
# The fixed-size candidates sketch cut into partitions or not: the main job's
# MLP (2 epochs of 24,000 examples, batch 32, lr 0.05) as W virtual workers
# (which compute what W processes do: docs/BENCHMARKS.md, "Scale out to 64
# and 256 workers"), each run's final test accuracy and bytes sent per worker
# per step. "cut 4" is what the job plan's default gave fixed_sketch_ps on two
# shards before the candidates sketch was exempted (58,814 elements: the
# MLP's one group in four partitions); topk_ps and the peel on the same cut
# for comparison.
#   bash bench/data/shards/fixed_sketch_cut/run.sh [WORKER_BINARY]   (writes results.csv and *.out here)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
worker="${1:-$here/../../../../bazel-bin/worker/sketchfuse_worker}"
echo "workers,scheme,cut,seed,final_test_accuracy,bytes_sent_per_step" >"$here/results.csv"
run() {  # W scheme cut seed [flags]
  local w=$1 scheme=$2 cut=$3 seed=$4; shift 4
  local out="$here/W${w}_${scheme}_cut${cut}_seed${seed}.out"
  "$worker" --virtual_workers="$w" --workload=mlp --scheme="$scheme" --epochs=2 --train_examples=24000 \
    --batch_size=32 --seed="$seed" --report_every=0 --partition_elements="$([ "$cut" = 1 ] && echo 0 || echo 58814)" \
    "$@" >"$out" 2>&1
  python3 - "$out" "$w" "$scheme" "$cut" "$seed" >>"$here/results.csv" <<'PY'
import json, sys
s = json.loads(next(l for l in open(sys.argv[1]) if l.startswith("summary "))[len("summary "):])
print(",".join(sys.argv[2:6] + ["%.4f" % s["final_test_accuracy"], "%.0f" % s["bytes_sent_per_step"]]))
PY
  tail -n 1 "$here/results.csv"
}
for seed in 1 2 3; do
  run 16 fixed_sketch_ps 1 "$seed"
  run 16 fixed_sketch_ps 4 "$seed"
done
run 16 fixed_sketch_allreduce 1 1
run 16 fixed_sketch_allreduce 4 1
run 8 fixed_sketch_ps 1 1
run 8 fixed_sketch_ps 4 1
run 4 fixed_sketch_ps 1 1
run 4 fixed_sketch_ps 4 1
run 16 topk_ps 1 1
run 16 topk_ps 4 1
run 16 sketch_ps 1 1
run 16 sketch_ps 4 1
