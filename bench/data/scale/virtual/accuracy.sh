#!/usr/bin/env bash
# Accuracy against the number of workers (virtual workers, one process): the
# MLP, per-worker batch 32, learning rate 0.05 (not scaled with W), seed 1,
# for E epochs (and worker flags after --, e.g. --train_examples) so that each
# run takes about 116 steps (README.md beside this script has the commands);
# each scheme at its default compressor. Prints and appends one CSV line per run to accuracy.csv; each
# run's output is kept as W<workers>_<scheme>.out.
#   bash bench/data/scale/virtual/accuracy.sh WORKERS EPOCHS SCHEME... [-- worker flags]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
worker="${SKETCHFUSE_WORKER:-$here/../../../../bazel-bin/worker/sketchfuse_worker}"
workers="$1" epochs="$2"; shift 2
schemes=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do schemes+=("$1"); shift; done
if [ $# -gt 0 ]; then shift; fi
csv="$here/accuracy.csv"
[ -s "$csv" ] || echo "workers,scheme,epochs,steps,final_test_accuracy,bytes_sent_per_worker_per_step,bytes_received_per_worker_per_step,compressor,wall_s,flags" >"$csv"
for scheme in "${schemes[@]}"; do
  tag=""
  if [ $# -gt 0 ]; then tag="_$(echo "$*" | tr -c 'a-z0-9.=\n' '_')"; fi
  out="$here/W${workers}_${scheme}${tag}.out"
  "$worker" --virtual_workers="$workers" --workload=mlp --scheme="$scheme" --epochs="$epochs" --batch_size=32 \
    --learning_rate=0.05 --seed=1 --report_every=0 "$@" >"$out" 2>&1 || true
  python3 - "$out" "$workers" "$epochs" "$*" >>"$csv" <<'PY'
import json, sys
line = next((l for l in open(sys.argv[1]) if l.startswith("summary ")), None)
if line is None:
    sys.exit(f"no summary in {sys.argv[1]}")
s = json.loads(line[len("summary "):])
acc = s["final_test_accuracy"]
print(",".join([sys.argv[2], s["scheme"], sys.argv[3], str(s["steps"]), "diverged" if acc is None else "%.4f" % acc,
                "%.0f" % s["bytes_sent_per_step"], "%.0f" % s["bytes_received_per_step"], '"%s"' % s["compressor"],
                str(s["wall_s"]), '"%s"' % sys.argv[4]]))
PY
  tail -n 1 "$csv"
done
