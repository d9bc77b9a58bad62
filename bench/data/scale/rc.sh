#!/bin/bash
# rc.sh NAME WORKLOAD SCHEME SEED W [worker flags...]
set -euo pipefail
root=/work/main
export SKETCHFUSE_SERVER=/tmp/exp/bin/sketchfuse_server SKETCHFUSE_WORKER=/tmp/exp/bin/sketchfuse_worker
out="${OUT:-/tmp/exp/runs}"
name=$1 workload=$2 scheme=$3 seed=$4 W=$5
shift 5
mkdir -p "$out"
bash "$root/scripts/local_cluster.sh" --workers="$W" --workload="$workload" --schemes="$scheme" --out="$out/$name" \
  -- --seed="$seed" "$@" > "$out/$name.log" 2>&1 || { echo "$name FAILED"; exit 0; }
python3 - "$out/$name/comparison.json" "$name" <<'PY'
import json, sys
run = json.load(open(sys.argv[1]))["runs"][0]
print(sys.argv[2], run["final_test_accuracy"], round(run["compression_ratio"] or 0, 1))
PY
