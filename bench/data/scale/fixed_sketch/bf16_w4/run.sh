#!/usr/bin/env bash
# fixed_sketch_allreduce and fixed_sketch_ps at their registry defaults on the MLP main job
# (2 epochs of 24,000 examples, batch 32 per worker) with 4 virtual workers (the 4-process
# run's accuracy to the digit: //tests:virtual_workers_test), seeds 1 to 3: the W = 4 check
# of the bf16 table (table=bf16, the default from 2026-11-28) against the float32 table's
# real-process figures in ../ (fs4, fsd4_s2, fsd4_s3).
#   SKETCHFUSE_WORKER=PATH bash run.sh SCHEME SEED [worker flags]  -> SCHEME_sSEED.out here
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
worker="${SKETCHFUSE_WORKER:-/work/main/bazel-bin/worker/sketchfuse_worker}"
scheme="$1" seed="$2"; shift 2
out="$here/${scheme}_s${seed}${SUFFIX:-}.out"
cmd=("$worker" --virtual_workers=4 --workload=mlp --scheme="$scheme" --epochs=2 --train_examples=24000
     --batch_size=32 --seed="$seed" --report_every=0 "$@")
{ echo "# ${cmd[*]}"; "${cmd[@]}"; } >"$out" 2>&1 || true
echo "$(basename "$out" .out): $(grep -o '"final_test_accuracy": [^,]*' "$out" || tail -n 1 "$out")"
