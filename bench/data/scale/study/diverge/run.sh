#!/usr/bin/env bash
# What makes fixed_sketch_allreduce diverge at 64 workers, 10x, learning rate 0.2 (the scale study's
# mlp_W64_fixed_sketch_allreduce_10x): the study's own command with one knob changed per run.
#   bash run.sh NAME [worker flags]      -> NAME.out here
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
name="$1"; shift
"${SKETCHFUSE_WORKER:-/tmp/bench_worker2}" --virtual_workers=64 --workload=mlp --scheme=fixed_sketch_allreduce --epochs=4 \
  --train_examples=60000 --batch_size=32 --learning_rate=0.05 --seed=1 --report_every=0 --collective_timeout_s=3600 \
  --lr_base_workers=16 --lr_warmup_steps=29 \
  --compressor=count_sketch:density=0.0169317,method=candidates,rows=1,width=1,candidates=2 "$@" >"$here/$name.out" 2>&1
echo "$name: $(grep -o '"final_test_accuracy": [^,]*' "$here/$name.out"), $(grep -o 'diverged at step [0-9]*' "$here/$name.out" | head -1)"
