#!/usr/bin/env bash
# The largest model (mlp_large: 784-1024-1024-10, 1.86M parameters) at W
# virtual workers, every scheme at the same bytes per worker per step (sent
# plus received) at 10x and 100x: the budget is what fixed_sketch_ps sends
# and receives at its default (0.825 bytes per gradient element at 10x; a
# tenth of it at 100x), and each scheme's density follows from its bytes per
# selected coordinate measured at 64 workers on the MLP (bench/data/scale/
# virtual/README.md): topk_allgather 16 (W-1) B (1008 B at 64), gtopk
# 31.5 B, spardl 32.2 B (both at 64 workers: log2 W rounds), and
# fixed_sketch_allreduce 1.573 B per element at density 0.0333. All 60,000 training examples, per-worker batch 32, learning rate
# 0.05, seed 1, 4 epochs (116 steps at 64 workers). Each run's output is kept
# as large_W<W>_<scheme>_<ratio>.out; one CSV line per run in large.csv.
#   bash bench/data/scale/virtual/large.sh W [RUN...]   RUN: scheme:ratio, e.g. gtopk:10
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
worker="${SKETCHFUSE_WORKER:-$here/../../../../bazel-bin/worker/sketchfuse_worker}"
workers="$1"; shift
runs=("$@")
if [ ${#runs[@]} -eq 0 ]; then
  runs=(dense_allreduce:1 fixed_sketch_ps:10 topk_allgather:10 gtopk:10 spardl:10 fixed_sketch_ps:100 gtopk:100
        spardl:100 topk_allgather:100 fixed_sketch_allreduce:10 fixed_sketch_allreduce:100)
fi
csv="$here/large.csv"
[ -s "$csv" ] || echo "workload,workers,scheme,ratio,compressor,steps,final_test_accuracy,bytes_sent_per_worker_per_step,bytes_received_per_worker_per_step,wall_s" >"$csv"
for run in "${runs[@]}"; do
  scheme="${run%%:*}" ratio="${run##*:}"
  # density = base density at 10x, divided by ratio / 10
  case "$scheme" in
    dense_allreduce) compressor="" ;;
    fixed_sketch_ps) compressor="count_sketch:method=candidates,density=$(python3 -c "print(round(0.0333 * 10 / $ratio, 6))"),rows=1,width=1,candidates=2" ;;
    fixed_sketch_allreduce) compressor="count_sketch:method=candidates,density=$(python3 -c "print(round(0.01747 * 10 / $ratio, 6))"),rows=1,width=1,candidates=2" ;;
    topk_allgather) compressor="topk:density=$(python3 -c "print(round(0.825 / (16 * ($workers - 1)) * 10 / $ratio, 8))")" ;;
    gtopk) compressor="topk:density=$(python3 -c "print(round(0.825 / 31.5 * 10 / $ratio, 6))")" ;;
    spardl) compressor="topk:density=$(python3 -c "print(round(0.825 / 32.2 * 10 / $ratio, 6))")" ;;
    *) echo "large.sh: no budget rule for $scheme" >&2; exit 2 ;;
  esac
  out="$here/large_W${workers}_${scheme}_${ratio}.out"
  flags=(--virtual_workers="$workers" --workload=mlp_large --scheme="$scheme" --epochs=4 --batch_size=32
         --learning_rate=0.05 --seed=1 --report_every=0)
  [ -n "$compressor" ] && flags+=(--compressor="$compressor")
  "$worker" "${flags[@]}" >"$out" 2>&1 || true
  python3 - "$out" "$workers" "$ratio" >>"$csv" <<'PY'
import json, sys
line = next((l for l in open(sys.argv[1]) if l.startswith("summary ")), None)
if line is None:
    sys.exit(f"no summary in {sys.argv[1]}")
s = json.loads(line[len("summary "):])
acc = s["final_test_accuracy"]
print(",".join([s["workload"], sys.argv[2], s["scheme"], sys.argv[3], '"%s"' % s["compressor"], str(s["steps"]),
                "diverged" if acc is None else "%.4f" % acc, "%.0f" % s["bytes_sent_per_step"],
                "%.0f" % s["bytes_received_per_step"], str(s["wall_s"])]))
PY
  tail -n 1 "$csv"
done
