#!/usr/bin/env bash
# The largest model's fixed_sketch_ps at 64 workers and 10x (the study's
# ../runs/mlp_large_W64_fixed_sketch_ps_10x.out: density 0.032109, rate 0.2) with one knob changed:
#   bash run.sh NAME [worker flags]      -> NAME.out here (worker flags after the study's override them)
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
name="$1"; shift
"${SKETCHFUSE_WORKER:-/tmp/bench_worker2}" --virtual_workers=64 --workload=mlp_large --scheme=fixed_sketch_ps --epochs=4 \
  --train_examples=60000 --batch_size=32 --learning_rate=0.05 --seed=1 --report_every=0 --collective_timeout_s=3600 \
  --lr_base_workers=16 --lr_warmup_steps=29 \
  --compressor=count_sketch:density=0.032109,method=candidates,rows=1,width=1,candidates=2 "$@" >"$here/$name.out" 2>&1
echo "$name: $(grep -o '"final_test_accuracy": [^,]*' "$here/$name.out"), $(grep -o 'diverged at step [0-9]*' "$here/$name.out" | head -1)"
