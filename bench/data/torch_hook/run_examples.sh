#!/usr/bin/env bash
# The PyTorch example with every scheme (4 processes, seed 1, the main job's
# settings: 2 epochs of 24,000 examples, batch 32, lr 0.05, momentum 0.9), each
# run's output and rank 0's summary kept:
#   [MODEL=cnn_wide] bash bench/data/torch_hook/run_examples.sh [SCHEME...]
# MODEL is the example's --model (default cnn, kept here; any other model's
# runs go to the folder of its name below this one).
# (after scripts/build_python.sh and `bazel build //server:sketchfuse_server`).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
model="${MODEL:-cnn}"
out="$root/bench/data/torch_hook"
[ "$model" = cnn ] || out="$out/$model"
mkdir -p "$out"
schemes=("$@")
[ ${#schemes[@]} -gt 0 ] || schemes=(ddp dense_allreduce dense_bf16_allreduce sketch_allreduce topk_allgather gtopk
                                     spardl importance_allreduce sketch_ps topk_ps dense_ps auto fixed_sketch_ps
                                     fixed_sketch_allreduce)
for scheme in "${schemes[@]}"; do
  servers=()
  case "$scheme" in sketch_ps|topk_ps|dense_ps|auto|fixed_sketch_ps|fixed_sketch_auto) servers=(--start_servers=2) ;; esac
  echo "== $scheme ($model)"
  PYTHONPATH="$root/python" /usr/bin/python3 "$root/examples/pytorch_ddp.py" --nproc_per_node=4 --model="$model" \
    --scheme="$scheme" --seed=1 "${servers[@]}" --json="$out/example_${scheme}_{rank}.json" 2>&1 \
    | tee "$out/example_${scheme}.log"
  rm -f "$out"/example_"${scheme}"_[1-9].json  # rank 0's summary is kept; the others hold the same model
done
