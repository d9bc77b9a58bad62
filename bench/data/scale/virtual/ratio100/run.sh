#!/usr/bin/env bash
# Why the fixed-size sketch fails at 100x on mlp_large at 64 workers (58.83%
# against dense's 85.11%, large.csv): the same runs on the MLP at 64 virtual
# workers (116 steps of batch 32 per worker, all 60,000 examples, 4 epochs,
# learning rate 0.05, seed 1, as accuracy.sh), each varying one knob:
#   base       the large.sh rule at 100x: density 0.00333, rows=1, width=1, candidates=2
#   nocap      the same without the release cap (--release_cap=0)
#   wide4      a table 4x wider (width=4): does the candidate choice need cells?
#   cand8      8 candidates per applied coordinate: does the top k hide in more candidates?
#   cap2x      the release cap at 2 times the velocity's norm (--release_cap=0.0625: the flag
#              is scaled by max(1, W/4) = 16 and by 2 for the two-round schemes)
#   cap8x      the same at 8 times (--release_cap=0.25); the default, 1.0, is 32 times
#   mom0       without momentum (--momentum=0): is it momentum on a stale residual?
#   lr01       a fifth of the learning rate (--learning_rate=0.01)
#   dense      dense_allreduce, the reference
#   topk       topk_allgather at 100x of fixed_sketch_ps's bytes (large.sh's rule at W = 64)
# One line per run in results.csv; raw output <name>.out.
#   bash bench/data/scale/virtual/ratio100/run.sh [NAME...]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
worker="${SKETCHFUSE_WORKER:-$here/../../../../../bazel-bin/worker/sketchfuse_worker}"
names=("$@")
[ ${#names[@]} -gt 0 ] || names=(dense base nocap wide4 cand8 topk)
csv="$here/results.csv"
[ -s "$csv" ] || echo "name,scheme,compressor,extra,steps,final_test_accuracy,min_epoch_accuracy,bytes_sent_per_worker_per_step,bytes_received_per_worker_per_step" >"$csv"
for name in "${names[@]}"; do
  extra=""
  case "$name" in
    dense) scheme=dense_allreduce compressor="" ;;
    base) scheme=fixed_sketch_ps compressor="count_sketch:method=candidates,density=0.00333,rows=1,width=1,candidates=2" ;;
    nocap) scheme=fixed_sketch_ps compressor="count_sketch:method=candidates,density=0.00333,rows=1,width=1,candidates=2" extra="--release_cap=0" ;;
    wide4) scheme=fixed_sketch_ps compressor="count_sketch:method=candidates,density=0.00333,rows=1,width=4,candidates=2" ;;
    cand8) scheme=fixed_sketch_ps compressor="count_sketch:method=candidates,density=0.00333,rows=1,width=1,candidates=8" ;;
    cap2x) scheme=fixed_sketch_ps compressor="count_sketch:method=candidates,density=0.00333,rows=1,width=1,candidates=2" extra="--release_cap=0.0625" ;;
    cap8x) scheme=fixed_sketch_ps compressor="count_sketch:method=candidates,density=0.00333,rows=1,width=1,candidates=2" extra="--release_cap=0.25" ;;
    mom0) scheme=fixed_sketch_ps compressor="count_sketch:method=candidates,density=0.00333,rows=1,width=1,candidates=2" extra="--momentum=0" ;;
    lr01) scheme=fixed_sketch_ps compressor="count_sketch:method=candidates,density=0.00333,rows=1,width=1,candidates=2" extra="--learning_rate=0.01" ;;
    topk) scheme=topk_allgather compressor="topk:density=$(python3 -c "print(round(0.825 / (16 * 63) / 10, 8))")" ;;
    *) echo "run.sh: unknown run $name" >&2; exit 2 ;;
  esac
  flags=(--virtual_workers=64 --workload=mlp --scheme="$scheme" --epochs=4 --batch_size=32 --learning_rate=0.05
         --seed=1 --report_every=0)
  [ -n "$compressor" ] && flags+=(--compressor="$compressor")
  [ -n "$extra" ] && flags+=("$extra")
  "$worker" "${flags[@]}" >"$here/$name.out" 2>&1 || true
  python3 - "$here/$name.out" "$name" "$extra" >>"$csv" <<'PY'
import json, sys
line = next((l for l in open(sys.argv[1]) if l.startswith("summary ")), None)
if line is None:
    sys.exit(f"no summary in {sys.argv[1]}")
s = json.loads(line[len("summary "):])
acc = s["final_test_accuracy"]
low = min(e["test_accuracy"] for e in s["epochs"])
print(",".join([sys.argv[2], s["scheme"], '"%s"' % s["compressor"], sys.argv[3], str(s["steps"]),
                "diverged" if acc is None else "%.4f" % acc, "%.4f" % low, "%.0f" % s["bytes_sent_per_step"],
                "%.0f" % s["bytes_received_per_step"]]))
PY
  tail -n 1 "$csv"
done
