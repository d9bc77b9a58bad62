#!/usr/bin/env bash
# The PyTorch example with every scheme on the CNN (4 processes, seed 1, the
# main job's settings), each run's output and summaries kept here:
#   bash bench/data/torch_hook/run_examples.sh [SCHEME...]
# (after scripts/build_python.sh and `bazel build //server:sketchfuse_server`).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
out="$root/bench/data/torch_hook"
schemes=("$@")
[ ${#schemes[@]} -gt 0 ] || schemes=(ddp dense_allreduce dense_bf16_allreduce sketch_allreduce topk_allgather gtopk
                                     spardl importance_allreduce sketch_ps topk_ps dense_ps auto)
for scheme in "${schemes[@]}"; do
  servers=()
  case "$scheme" in sketch_ps|topk_ps|dense_ps|auto) servers=(--start_servers=2) ;; esac
  echo "== $scheme"
  PYTHONPATH="$root/python" /usr/bin/python3 "$root/examples/pytorch_ddp.py" --nproc_per_node=4 --model=cnn \
    --scheme="$scheme" --seed=1 "${servers[@]}" --json="$out/example_${scheme}_{rank}.json" 2>&1 \
    | tee "$out/example_${scheme}.log"
  rm -f "$out"/example_"${scheme}"_[1-9].json  # rank 0's summary is kept; the others hold the same model
done
