#!/usr/bin/env bash
# A local SketchFuse cluster on loopback: for each scheme, S aggregation
# server shards (shard 0 also serves the coordinator) and W workers train the
# Fashion-MNIST model; then a comparison table, CSV and JSON (and a PNG plot
# of test accuracy against time and against bytes when gnuplot is installed).
# Decentralized schemes start one shard only: it serves the coordinator (the
# workers' rendezvous); no gradient goes through it. Every process is stopped
# on exit, on Ctrl-C, or as soon as one of them fails (which is named, with
# its log).
#
#   scripts/local_cluster.sh [--workers=4] [--shards=2]
#                            [--schemes=dense_allreduce,sketch_ps,sketch_allreduce]
#                            [--workload=mlp] [--epochs=2] [--train_examples=24000]
#                            [--batch_size=32] [--out=out/cluster] [-- more worker flags]
#
# Expects bazel-bin/server/sketchfuse_server and bazel-bin/worker/sketchfuse_worker
# (scripts/main_job.sh builds them).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
server="$root/bazel-bin/server/sketchfuse_server"
worker="$root/bazel-bin/worker/sketchfuse_worker"

workers=4 shards=2 schemes=dense_allreduce,sketch_ps,sketch_allreduce workload=mlp epochs=2 train_examples=24000 batch_size=32
out="$root/out/cluster"
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --workers=*) workers="${1#*=}" ;;
    --shards=*) shards="${1#*=}" ;;
    --schemes=*) schemes="${1#*=}" ;;
    --workload=*) workload="${1#*=}" ;;
    --epochs=*) epochs="${1#*=}" ;;
    --train_examples=*) train_examples="${1#*=}" ;;
    --batch_size=*) batch_size="${1#*=}" ;;
    --out=*) out="${1#*=}" ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "local_cluster: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
for name in workers shards epochs train_examples batch_size; do
  value="${!name}"
  if ! [[ "$value" =~ ^[0-9]+$ ]] || [ "$value" -lt 1 ]; then
    echo "local_cluster: --$name must be a positive integer; got '$value'" >&2; exit 2
  fi
done
for binary in "$server" "$worker"; do
  [ -x "$binary" ] || { echo "local_cluster: $binary is not built (run scripts/main_job.sh)" >&2; exit 2; }
done

pids=()
names=()
cleanup() {
  for pid in "${pids[@]:-}"; do [ -n "$pid" ] && kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]:-}"; do [ -n "$pid" ] && wait "$pid" 2>/dev/null || true; done
  pids=(); names=()
}
trap 'echo "local_cluster: interrupted; stopping every process" >&2; cleanup; exit 130' INT TERM
trap cleanup EXIT

# Starts a process in the background: start NAME LOG ARGS...
start() {
  local name="$1" log="$2"; shift 2
  "$@" >"$log" 2>&1 &
  pids+=("$!"); names+=("$name|$log")
}

# Fails the run when a process has exited with an error.
check_alive() {
  local i
  for i in "${!pids[@]}"; do
    local pid="${pids[$i]}"
    if ! kill -0 "$pid" 2>/dev/null; then
      local status=0
      wait "$pid" || status=$?
      if [ "$status" -ne 0 ]; then
        echo "local_cluster: ${names[$i]%%|*} failed (exit $status); its log: ${names[$i]#*|}" >&2
        tail -n 3 "${names[$i]#*|}" >&2 || true
        exit 1
      fi
    fi
  done
}

# progress_bar SCHEME LINE LAST_ACCURACY: a bar from a worker progress line
# ("worker-0 epoch E step S/T loss L step X ms sent K KiB/step ratio Rx [test accuracy A%]").
progress_bar() {
  local scheme="$1" line="$2" acc="$3"
  awk -v scheme="$scheme" -v acc="$acc" -v workers="$workers" -v batch="$batch_size" '{
    split($5, st, "/"); step = st[1]; total = st[2]; loss = $7; ms = $9
    for (i = 1; i <= NF; i++) if ($i == "accuracy") acc = $(i + 1)
    width = 24; done = int(width * step / total); bar = ""
    for (i = 0; i < width; i++) bar = bar (i < done ? "#" : ".")
    rate = ms > 0 ? workers * batch * 1000 / ms : 0
    printf "  %-20s [%s] %4d/%d epoch %s loss %.3f acc %s %.1f ms/step %.0f ex/s", \
      scheme, bar, step, total, $3, loss, acc, ms, rate
  }' <<<"$line"
}

mkdir -p "$out"
token="$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')"
IFS=',' read -r -a scheme_list <<<"$schemes"
for scheme in "${scheme_list[@]}"; do
  dir="$out/$scheme"
  rm -rf "$dir"; mkdir -p "$dir"
  echo "$token" >"$dir/token"; chmod 600 "$dir/token"
  route="$("$worker" --scheme="$scheme" --print_route 2>"$dir/route.log")" \
    || { echo "local_cluster: $(tail -n 1 "$dir/route.log")" >&2; exit 2; }
  run_shards=$shards
  [ "$route" = decentralized ] && run_shards=1
  run_flags=(--job="local-$scheme" --world_size="$workers" --workload="$workload" --scheme="$scheme"
             --epochs="$epochs" --train_examples="$train_examples" --batch_size="$batch_size" "${extra[@]}")
  "$worker" --write_job_config="$dir/job.json" "${run_flags[@]}" >"$dir/plan.log" 2>&1 \
    || { echo "local_cluster: planning $scheme failed; its log: $dir/plan.log" >&2; tail -n 3 "$dir/plan.log" >&2; exit 1; }
  echo "== $scheme ($route): $run_shards shard(s), $workers workers ($(tail -n 1 "$dir/plan.log" | sed 's/.*wrote job [^(]*(//; s/).*//'))"
  start "server shard 0" "$dir/server0.log" "$server" --job_config="$dir/job.json" --shard_index=0 \
    --num_shards="$run_shards" --coordinator --port_file="$dir/port0" --token_file="$dir/token" --state_dir="$dir/state"
  for _ in $(seq 300); do [ -s "$dir/port0" ] && break; check_alive; sleep 0.1; done
  [ -s "$dir/port0" ] || { echo "local_cluster: shard 0 did not start; its log: $dir/server0.log" >&2; exit 1; }
  coordinator="127.0.0.1:$(cat "$dir/port0")"
  for s in $(seq 1 $((run_shards - 1))); do
    start "server shard $s" "$dir/server$s.log" "$server" --job_config="$dir/job.json" --shard_index="$s" \
      --num_shards="$run_shards" --coordinator_address="$coordinator" --port_file="$dir/port$s" --token_file="$dir/token" \
      --state_dir="$dir/state"
  done
  worker_pids=()
  for w in $(seq 0 $((workers - 1))); do
    start "worker-$w" "$dir/worker$w.log" "$worker" --coordinator="$coordinator" --worker_id="worker-$w" \
      --token_file="$dir/token" --summary_json="$dir/summary$w.json" --report_every=25 \
      --trace_file="$dir/trace$w.json" "${run_flags[@]}"
    worker_pids+=("${pids[-1]}")
  done
  # Live progress: one bar per run from worker-0's latest report, redrawn in
  # place on a terminal; elsewhere (logs, CI) one line per report.
  shown=0 last_acc="-"
  while true; do
    check_alive
    running=0
    for pid in "${worker_pids[@]}"; do kill -0 "$pid" 2>/dev/null && running=1; done
    mapfile -t reports < <(grep "^worker-0 epoch" "$dir/worker0.log" 2>/dev/null || true)
    for ((i = shown; i < ${#reports[@]}; i++)); do
      line="${reports[$i]}"
      bar="$(progress_bar "$scheme" "$line" "$last_acc")"
      acc="$(sed -n 's/.*test accuracy \([0-9.]*%\).*/\1/p' <<<"$line")"
      [ -n "$acc" ] && last_acc="$acc"
      if [ -t 1 ]; then printf '\r%s' "$bar"; else echo "$bar"; fi
    done
    shown=${#reports[@]}
    [ "$running" -eq 0 ] && break
    sleep 0.5
  done
  [ -t 1 ] && echo
  check_alive
  cleanup
done

python3 - "$out" "${scheme_list[@]}" <<'PY'
import csv, json, sys
out, schemes = sys.argv[1], sys.argv[2:]
rows, curves = [], []
for scheme in schemes:
    s = json.load(open(f"{out}/{scheme}/summary0.json"))
    rows.append({"scheme": scheme, "compressor": s["compressor"], "final_test_accuracy": s["final_test_accuracy"],
                 "mean_step_ms": 1e3 * s["mean_step_s"], "bytes_sent_per_worker_per_step": s["bytes_sent_per_step"],
                 "compression_ratio": s["compression_ratio"], "wall_s": s["wall_s"], "steps": s["steps"]})
    for e in s["epochs"]:
        curves.append({"scheme": scheme, "epoch": e["epoch"], "elapsed_s": e["elapsed_s"],
                       "test_accuracy": e["test_accuracy"],
                       "bytes_sent_per_worker": e["step"] * s["bytes_sent_per_step"]})
with open(f"{out}/comparison.csv", "w", newline="") as f:
    w = csv.DictWriter(f, fieldnames=list(rows[0])); w.writeheader(); w.writerows(rows)
with open(f"{out}/curves.csv", "w", newline="") as f:
    w = csv.DictWriter(f, fieldnames=list(curves[0])); w.writeheader(); w.writerows(curves)
json.dump({"runs": rows, "curves": curves}, open(f"{out}/comparison.json", "w"), indent=2)
# One timeline per run: every worker's trace events in one Chrome trace file.
for scheme in schemes:
    events = []
    for w in range(1024):
        try:
            events += json.load(open(f"{out}/{scheme}/trace{w}.json"))["traceEvents"]
        except FileNotFoundError:
            break
    json.dump({"displayTimeUnit": "ms", "traceEvents": events}, open(f"{out}/{scheme}/timeline.json", "w"))
print(f"\n{'scheme':<20} {'accuracy':>9} {'step ms':>8} {'KiB/step/worker':>16} {'ratio':>7} {'wall s':>7}")
for r in rows:
    accuracy = f"{100*r['final_test_accuracy']:>8.2f}%" if r['final_test_accuracy'] >= 0 else f"{'-':>9}"
    print(f"{r['scheme']:<20} {accuracy} {r['mean_step_ms']:>8.1f} "
          f"{r['bytes_sent_per_worker_per_step']/1024:>16.1f} {r['compression_ratio']:>6.1f}x {r['wall_s']:>7.1f}")
print("(ratio: the dense gradient's bytes over the bytes a worker sends; a ring allreduce sends 2(W-1)/W of its data)")
print(f"\nwritten: {out}/comparison.csv, {out}/comparison.json, {out}/curves.csv")
print(f"timelines (open in ui.perfetto.dev or chrome://tracing): " + ", ".join(f"{out}/{s}/timeline.json" for s in schemes))
PY
if grep -q '"final_test_accuracy": -1\.' "$out/${scheme_list[0]}/summary0.json"; then
  echo "(no accuracy plot: $workload is a synthetic profile, timed, not trained)"
elif command -v gnuplot >/dev/null 2>&1; then
  time_cmds="" bytes_cmds=""
  for scheme in "${scheme_list[@]}"; do
    grep "^$scheme," "$out/curves.csv" | tr ',' ' ' >"$out/$scheme/curve.dat"
    time_cmds+="'$out/$scheme/curve.dat' using 3:(100*\$4) with linespoints title '$scheme',"
    bytes_cmds+="'$out/$scheme/curve.dat' using (\$5/1048576):(100*\$4) with linespoints title '$scheme',"
  done
  gnuplot -e "set terminal png size 1200,500; set output '$out/accuracy_vs_time.png'; \
    set termoption noenhanced; set multiplot layout 1,2 title 'Fashion-MNIST $workload, $workers workers'; \
    set ylabel 'test accuracy (%)'; set key bottom right; \
    set xlabel 'wall time (s)'; plot ${time_cmds%,}; \
    set xlabel 'MiB sent per worker'; set logscale x; plot ${bytes_cmds%,}; unset multiplot"
  echo "plot: $out/accuracy_vs_time.png (test accuracy against time and against bytes sent)"
else
  echo "(no plot: gnuplot is not installed; scripts/setup.sh --bench installs it)"
fi
