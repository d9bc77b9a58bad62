#!/bin/bash
# One local cluster on the CNN or MLP (scripts/local_cluster.sh), 4 workers,
# the main job's defaults; prints NAME, final test accuracy, ratio.
#   usage: run_cluster.sh NAME WORKLOAD SCHEME SEED [worker flags...]
#   e.g.   run_cluster.sh tk36_s1 cnn topk_allgather 1 --compressor=topk:density=0.00125
# Output in ${OUT:-/tmp/quality_runs}/NAME (comparison.json, curves.csv) and NAME.log.
# The decode audit (audit_*/audit.txt) needs a worker built with
# same_k/decode_audit.patch applied (`git apply bench/data/quality/same_k/decode_audit.patch`,
# then `bash scripts/bazel.sh build //worker:sketchfuse_worker`) and
# SF_DEBUG_TRUTH=1 in the environment; its lines are in the rank-0 worker's log.
set -euo pipefail
if [ $# -lt 4 ]; then
  echo "usage: run_cluster.sh NAME WORKLOAD SCHEME SEED [worker flags...]" >&2
  exit 2
fi
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
out="${OUT:-/tmp/quality_runs}"
name=$1 workload=$2 scheme=$3 seed=$4
shift 4
mkdir -p "$out"
bash "$root/scripts/local_cluster.sh" --workload="$workload" --schemes="$scheme" --out="$out/$name" \
  -- --seed="$seed" "$@" > "$out/$name.log" 2>&1
python3 - "$out/$name/comparison.json" "$name" <<'PY'
import json, sys
run = json.load(open(sys.argv[1]))["runs"][0]
print(sys.argv[2], run["final_test_accuracy"], round(run["compression_ratio"] or 0, 1))
PY
