#!/usr/bin/env bash
# Bytes per worker per step, sent and received, against the number of
# workers (4 to 256 virtual workers in one process: sketchfuse_worker
# --virtual_workers=W), for each scheme at its default compressor: the
# figures behind "the fixed-size sketch's bytes per worker do not depend on
# W". Two steps of the MLP per run (bytes per step do not depend on how long
# a run trains). Writes bytes.csv beside this script and prints it.
#   bash bench/data/scale/virtual/bytes.sh [path/to/sketchfuse_worker]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
worker="${1:-$here/../../../../bazel-bin/worker/sketchfuse_worker}"
csv="$here/bytes.csv"
echo "scheme,workers,bytes_sent_per_worker_per_step,bytes_received_per_worker_per_step,compressor,wall_s" >"$csv"
for scheme in fixed_sketch_ps fixed_sketch_allreduce sketch_ps sketch_allreduce topk_allgather dense_allreduce; do
  for w in 4 16 64 256; do
    summary="$("$worker" --virtual_workers="$w" --virtual_shards=1 --workload=mlp --scheme="$scheme" \
      --train_examples=$((w * 32 * 2)) --test_examples=100 --epochs=1 --batch_size=32 --report_every=0 \
      2>>"$here/bytes.err" | grep '^summary ' | sed 's/^summary //')"
    python3 -c '
import json, sys
s = json.loads(sys.argv[1])
print(",".join([s["scheme"], sys.argv[2], "%.0f" % s["bytes_sent_per_step"], "%.0f" % s["bytes_received_per_step"],
                s["compressor"], str(s["wall_s"])]))
' "$summary" "$w" | tee -a "$csv"
  done
done
