#!/usr/bin/env bash
# A local SketchFuse cluster on loopback: for each scheme, S aggregation
# server shards (shard 0 also serves the coordinator) and W workers train the
# Fashion-MNIST model; then a comparison table (with the time each run takes
# to reach the target accuracy), CSV and JSON, the accuracy curves (and a PNG
# plot of them against time and against bytes when gnuplot is installed).
# Decentralized schemes start one shard only: it serves the coordinator (the
# workers' rendezvous); no gradient goes through it. Every process is stopped
# on exit, on Ctrl-C, or as soon as one of them fails (which is named, with
# its log). A run that diverges (its workers exit with status 3) is no
# failure: its row says where, and the other schemes still run.
#
# A server shard that dies is supervised, not fatal, under the hybrid schemes
# (auto, fixed_sketch_auto): the launcher logs it and the workers fail over to
# their decentralized route (and return when the shard is back); with
# --restart_shards it restarts the shard on its address after a second, as a
# supervisor or Kubernetes would, and the successor takes up the answers its
# predecessor recorded. Under the other schemes a dead shard ends the run,
# naming the step it reached and the workers' errors (only the hybrids train
# through a dead shard).
#
#   scripts/local_cluster.sh [--workers=4] [--shards=2]
#                            [--schemes=dense_allreduce,sketch_ps,sketch_allreduce]
#                            [--workload=mlp] [--epochs=2] [--train_examples=24000]
#                            [--batch_size=32] [--out=out/cluster] [--restart_shards]
#                            [--link=none|auto|RATE] [--virtual] [-- more worker flags]
#
# --link=RATE (e.g. 100mbit, 300mbit, 1gbit, 10gbit) puts every process on a
# host of its own in a shaped network (scripts/netfabric.py: one network
# namespace per host, a bridge, every host's port shaped to RATE in both
# directions), so every byte between processes crosses a link of that rate.
# It needs root and ip and tc (Debian's iproute2). --link=auto does that at
# the default rate (200mbit, README "Which link the main job runs on") where
# the machine allows it, and runs on loopback, saying why, elsewhere;
# --link=none (the default here; scripts/main_job.sh passes auto) is loopback.
#
# --virtual runs each scheme's W workers in one process instead
# (sketchfuse_worker --virtual_workers=W: each worker its own data and
# compressor state over one model, the collectives and the S shards in
# process, bytes counted as on the wire): how to try 64 or 256 workers on one
# machine. Accuracy and bytes are those of W processes; its step times are
# the whole job's on this machine's cores, not one worker's.
#
# Workers evaluate a fixed 2000-example test subset about 15 times per run
# for the curves (every 24 steps in the default run; at least 5 steps apart;
# -- --eval_every=N --eval_examples=M to change it). Expects
# bazel-bin/server/sketchfuse_server and bazel-bin/worker/sketchfuse_worker
# (scripts/main_job.sh builds them), or the binaries SKETCHFUSE_SERVER and
# SKETCHFUSE_WORKER name.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
server="${SKETCHFUSE_SERVER:-$root/bazel-bin/server/sketchfuse_server}"
worker="${SKETCHFUSE_WORKER:-$root/bazel-bin/worker/sketchfuse_worker}"
restart_shards=0
virtual=0
link=none
# The main job's link: dense_allreduce's communication then takes the share of
# a step it takes for ResNet-50 on GPUs at 10 to 25 Gbit/s (README, "Which
# link the main job runs on").
readonly default_link=200mbit

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
    --restart_shards) restart_shards=1 ;;
    --virtual) virtual=1 ;;
    --link=*) link="${1#*=}" ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) sed -n '2,/^[^#]/{/^#/p}' "$0"; exit 0 ;;
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
if ! [[ "$link" =~ ^(none|auto|[0-9]+(\.[0-9]+)?(kbit|mbit|gbit))$ ]]; then
  echo "local_cluster: --link must be none, auto or a rate such as 100mbit, 1gbit or 10gbit; got '$link'" >&2; exit 2
fi
if [ "$virtual" -eq 1 ] && [ "$link" != none ] && [ "$link" != auto ]; then
  echo "local_cluster: --link=$link needs a process per worker; --virtual runs them in one process" >&2; exit 2
fi
# The accuracy curve's cadence: about 15 points per run, at least 5 steps
# apart (the workers' flags after -- override it).
eval_every=$(( epochs * (train_examples / workers / batch_size) / 15 ))
[ "$eval_every" -ge 5 ] || eval_every=5
# The curve's subset: 2000 test images, or 256 validation windows (16,384
# bytes) of the language model.
eval_examples=2000
[ "$workload" = char_lm ] && eval_examples=256
for binary in "$server" "$worker"; do
  [ -x "$binary" ] || { echo "local_cluster: $binary is not built (run scripts/main_job.sh)" >&2; exit 2; }
done

pids=()
names=()
worker_pids=()
commands=()   # each process's command line, shell-quoted (to restart a shard)
cleanup() {
  for pid in "${pids[@]:-}"; do [ -n "$pid" ] && kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]:-}"; do [ -n "$pid" ] && wait "$pid" 2>/dev/null || true; done
  pids=(); names=(); commands=()
}
# The shaped fabric (--link): host i's namespace and address. Shard s is host
# s, worker w host shards + w. Empty arrays: loopback.
fabric_tag="" fabric_ns=() fabric_addr=()
fabric_down() {
  [ -n "$fabric_tag" ] && python3 "$root/scripts/netfabric.py" down "$fabric_tag" || true
  fabric_tag=""
}
trap 'echo "local_cluster: interrupted; stopping every process" >&2; cleanup; fabric_down; exit 130' INT TERM
trap 'cleanup; fabric_down' EXIT

# host_prefix I: the command prefix that runs a process on host I (none on loopback).
host_prefix() {
  if [ "${#fabric_ns[@]}" -gt 0 ]; then echo "ip netns exec ${fabric_ns[$1]}"; fi
}
# host_address I: host I's address (127.0.0.1 on loopback).
host_address() {
  if [ "${#fabric_ns[@]}" -gt 0 ]; then echo "${fabric_addr[$1]}"; else echo 127.0.0.1; fi
}

# Starts a process in the background: start NAME LOG ARGS...
start() {
  local name="$1" log="$2"; shift 2
  "$@" >"$log" 2>&1 &
  pids+=("$!"); names+=("$name|$log"); commands+=("$(printf '%q ' "$@")")
}

# A server shard (index $1 of pids) exited with status $2 while its run
# trains: under a hybrid, logged and (with --restart_shards) restarted on its
# address; otherwise the run ends, saying where it was.
shard_died() {
  local i="$1" status="$2"
  local name="${names[$i]%%|*}" log="${names[$i]#*|}"
  local step
  step="$(grep "^$lead epoch" "$dir/worker0.log" 2>/dev/null | tail -n 1 | awk '{split($5, s, "/"); print s[1]}' || true)"
  if [ "$route" = hybrid ]; then
    echo "local_cluster: $name died (exit $status) at about step ${step:-0}; the $scheme workers fail over to the decentralized route" >&2
    if [ "$restart_shards" -eq 1 ]; then
      local index="${name##* }" port
      port="$(cat "$dir/port$index" 2>/dev/null || true)"
      sleep 1
      eval "${commands[$i]} --port=$port" >>"$log" 2>&1 &
      pids[$i]=$!
      echo "local_cluster: $name restarted on $(host_address "$index"):$port (pid ${pids[$i]})" >&2
    fi
    return 0
  fi
  echo "local_cluster: $name died (exit $status) at about step ${step:-0} of $scheme; its log: $log" >&2
  echo "local_cluster: the rounds of its groups are lost (only the hybrids, auto and fixed_sketch_auto, train through a dead shard); the workers say:" >&2
  local w waited
  for waited in $(seq 100); do
    local left=0
    for w in "${worker_pids[@]:-}"; do kill -0 "$w" 2>/dev/null && left=1; done
    [ "$left" -eq 0 ] && break
    sleep 0.1
  done
  for w in $(seq 0 $((workers - 1))); do
    grep -m 1 -E "error|failed|stopped" "$dir/worker$w.log" 2>/dev/null | sed "s/^/  worker-$w: /" | cut -c1-300 >&2 || true
  done
  exit 1
}

# sketchfuse_worker's exit status when its run diverged (a NaN or an
# infinity in a loss, a gradient or an update, on it or on another worker).
readonly diverged_status=3
# How long the other workers of a diverged run may take to stop (they stop
# within about a second; this only bounds a worker that does not).
readonly diverged_grace_s=60
diverged=""   # the current run's first "worker-N: message" line, once it diverged

# Fails the launcher when a process has exited with an error. A worker that
# exits with the divergence status marks the run diverged instead; so does a
# worker that fails otherwise once its run has diverged (noted, not fatal).
check_alive() {
  local i
  for i in "${!pids[@]}"; do
    local pid="${pids[$i]}"
    [ -n "$pid" ] || continue
    if ! kill -0 "$pid" 2>/dev/null; then
      local status=0
      wait "$pid" || status=$?
      local name="${names[$i]%%|*}" log="${names[$i]#*|}"
      pids[$i]=""
      [ "$status" -eq 0 ] && continue
      if [[ "$name" == "server shard "* ]] && [ "${#worker_pids[@]}" -gt 0 ]; then
        shard_died "$i" "$status"
        continue
      fi
      if [[ "$name" == worker-* || "$name" == virtual-* ]] && { [ "$status" -eq "$diverged_status" ] || [ -n "$diverged" ]; }; then
        if [ "$status" -eq "$diverged_status" ]; then
          [ -n "$diverged" ] || diverged="$(grep -m 1 -o 'stopped: .*' "$log" | sed 's/^stopped: //')"
          [ -n "$diverged" ] || diverged="$name diverged"
          diverged_since=${diverged_since:-$SECONDS}
        else
          echo "local_cluster: $name failed (exit $status) after the run diverged; its log: $log" >&2
        fi
        continue
      fi
      echo "local_cluster: $name failed (exit $status); its log: $log" >&2
      tail -n 3 "$log" >&2 || true
      exit 1
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
link_text="loopback"
if [ "$link" = auto ] && [ "$virtual" -eq 1 ]; then
  link=none
  echo "local_cluster: on no link: --virtual runs the workers in one process"
fi
if [ "$link" != none ]; then
  if ! why="$(python3 "$root/scripts/netfabric.py" check)"; then
    [ "$link" = auto ] || { echo "local_cluster: --link=$link: no shaped network can be made here: $why" >&2; exit 2; }
    echo "local_cluster: on loopback, not on a shaped link: $why (--link=auto)"
    link=none
  fi
fi
if [ "$link" != none ]; then
  [ "$link" = auto ] && link="$default_link"
  fabric_tag="lc$(( $$ % 100000 ))"
  fabric_hosts="$(python3 "$root/scripts/netfabric.py" up "$fabric_tag" $((shards + workers)) "$link")" \
    || { echo "local_cluster: the shaped network for --link=$link could not be made (above: why)" >&2; exit 1; }
  mapfile -t hosts <<<"$fabric_hosts"
  for h in "${hosts[@]}"; do fabric_ns+=("${h%% *}"); fabric_addr+=("${h##* }"); done
  if [ "${#fabric_ns[@]}" -ne $((shards + workers)) ]; then
    echo "local_cluster: the shaped network has ${#fabric_ns[@]} hosts; expected $((shards + workers))" >&2; exit 1
  fi
  link_text="$link per host (each process a host of its own in a shaped network)"
fi
echo "link: $link_text"
# The worker whose progress lines the bars follow.
lead=worker-0
[ "$virtual" -eq 1 ] && lead="virtual-x$workers"
# Two roles, two tokens: the workers' (every worker RPC) and the shards'
# (RegisterShard), so a worker's credentials cannot move a shard.
token="$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')"
shard_token="$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')"
IFS=',' read -r -a scheme_list <<<"$schemes"
for scheme in "${scheme_list[@]}"; do
  dir="$out/$scheme"
  rm -rf "$dir"; mkdir -p "$dir"
  echo "$token" >"$dir/token"; chmod 600 "$dir/token"
  echo "$shard_token" >"$dir/shard_token"; chmod 600 "$dir/shard_token"
  route="$("$worker" --scheme="$scheme" --print_route 2>"$dir/route.log")" \
    || { echo "local_cluster: $(tail -n 1 "$dir/route.log")" >&2; exit 2; }
  run_shards=$shards
  [ "$route" = decentralized ] && run_shards=1
  run_flags=(--job="local-$scheme" --world_size="$workers" --workload="$workload" --scheme="$scheme"
             --epochs="$epochs" --train_examples="$train_examples" --batch_size="$batch_size" "${extra[@]}")
  "$worker" --write_job_config="$dir/job.json" --num_shards="$run_shards" "${run_flags[@]}" >"$dir/plan.log" 2>&1 \
    || { echo "local_cluster: planning $scheme failed; its log: $dir/plan.log" >&2; tail -n 3 "$dir/plan.log" >&2; exit 1; }
  if [ "$virtual" -eq 1 ]; then
    echo "== $scheme ($route): $workers virtual workers in one process, $run_shards in-process shard(s)"
    diverged="" diverged_since=""
    worker_pids=()
    start "virtual-x$workers" "$dir/worker0.log" "$worker" --virtual_workers="$workers" --virtual_shards="$run_shards" \
      --summary_json="$dir/summary0.json" --report_every=25 --eval_every="$eval_every" --eval_examples="$eval_examples" \
      "${run_flags[@]}"
    worker_pids+=("${pids[-1]}")
  else
    echo "== $scheme ($route): $run_shards shard(s), $workers workers ($(tail -n 1 "$dir/plan.log" | sed 's/.*wrote job [^(]*(//; s/).*//'))"
    # Each worker's join credential, so that only worker-N joins as worker-N.
    for w in $(seq 0 $((workers - 1))); do
      "$server" --job_config="$dir/job.json" --shard_token_file="$dir/shard_token" --print_join_credential="worker-$w" \
        >"$dir/credential$w" 2>>"$dir/plan.log" \
        || { echo "local_cluster: issuing worker-$w's join credential failed; see $dir/plan.log" >&2; exit 1; }
      chmod 600 "$dir/credential$w"
    done
    start "server shard 0" "$dir/server0.log" $(host_prefix 0) "$server" --job_config="$dir/job.json" --shard_index=0 \
      --num_shards="$run_shards" --coordinator --host="$(host_address 0)" --port_file="$dir/port0" --token_file="$dir/token" \
      --shard_token_file="$dir/shard_token" --require_join_credentials --state_dir="$dir/state"
    for _ in $(seq 300); do [ -s "$dir/port0" ] && break; check_alive; sleep 0.1; done
    [ -s "$dir/port0" ] || { echo "local_cluster: shard 0 did not start; its log: $dir/server0.log" >&2; exit 1; }
    worker_pids=()
    coordinator="$(host_address 0):$(cat "$dir/port0")"
    for s in $(seq 1 $((run_shards - 1))); do
      start "server shard $s" "$dir/server$s.log" $(host_prefix "$s") "$server" --job_config="$dir/job.json" --shard_index="$s" \
        --num_shards="$run_shards" --coordinator_address="$coordinator" --host="$(host_address "$s")" \
        --port_file="$dir/port$s" --token_file="$dir/token" \
        --shard_token_file="$dir/shard_token" --state_dir="$dir/state"
    done
    diverged="" diverged_since=""
    for w in $(seq 0 $((workers - 1))); do
      start "worker-$w" "$dir/worker$w.log" $(host_prefix $((shards + w))) "$worker" --coordinator="$coordinator" \
        --worker_id="worker-$w" --collective_host="$(host_address $((shards + w)))" \
        --token_file="$dir/token" --join_credential_file="$dir/credential$w" --summary_json="$dir/summary$w.json" --report_every=25 \
        --trace_file="$dir/trace$w.json" --eval_every="$eval_every" --eval_examples="$eval_examples" "${run_flags[@]}"
      worker_pids+=("${pids[-1]}")
    done
  fi
  # Live progress: one bar per run from worker-0's latest report, redrawn in
  # place on a terminal; elsewhere (logs, CI) one line per report.
  shown=0 last_acc="-"
  while true; do
    check_alive
    running=0
    for pid in "${worker_pids[@]}"; do kill -0 "$pid" 2>/dev/null && running=1; done
    if [ -n "$diverged_since" ] && [ "$running" -eq 1 ] && [ $((SECONDS - diverged_since)) -ge "$diverged_grace_s" ]; then
      echo "local_cluster: $scheme diverged ${diverged_grace_s} s ago and some of its workers still run; stopping them" >&2
      running=0
    fi
    mapfile -t reports < <(grep "^$lead epoch" "$dir/worker0.log" 2>/dev/null || true)
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
  [ -n "$diverged" ] && echo "  $scheme: diverged: $diverged"
  cleanup
done

# The comparison: table, CSV, JSON, timelines (bench/harness/cluster_report.py).
python3 "$root/bench/harness/cluster_report.py" "$out" "$workers" "$virtual" "$link" "${scheme_list[@]}"
if grep -q '"final_test_accuracy": -1\.' "$out/${scheme_list[0]}/summary0.json" 2>/dev/null; then
  echo "(no accuracy plot: $workload is a synthetic profile, timed, not trained)"
elif [ "$(wc -l <"$out/curves.csv")" -le 1 ]; then
  echo "(no accuracy plot: no run has a point on its accuracy curve)"
elif command -v gnuplot >/dev/null 2>&1; then
  time_cmds="" bytes_cmds=""
  # curves.csv: scheme, step, elapsed_s, test_accuracy, bytes_sent_per_worker, test_loss.
  y='(100*$4)' ylabel='test accuracy (%, fixed test subset)' key='bottom right' data="Fashion-MNIST $workload"
  if [ "$workload" = char_lm ]; then
    y='6' ylabel='validation loss (nats per byte, fixed subset)' key='top right' data='char_lm on the Debian fortunes'
  fi
  for scheme in "${scheme_list[@]}"; do
    grep "^$scheme," "$out/curves.csv" | tr ',' ' ' >"$out/$scheme/curve.dat" || true
    [ -s "$out/$scheme/curve.dat" ] || continue
    time_cmds+="'$out/$scheme/curve.dat' using 3:$y with linespoints pointsize 0.6 title '$scheme',"
    bytes_cmds+="'$out/$scheme/curve.dat' using (\$5/1048576):$y with linespoints pointsize 0.6 title '$scheme',"
  done
  gnuplot -e "set terminal png size 1200,500; set output '$out/accuracy_vs_time.png'; \
    set termoption noenhanced; set multiplot layout 1,2 title '$data, $workers $([ "$virtual" -eq 1 ] && echo virtual) workers'; \
    set ylabel '$ylabel'; set key $key; \
    set xlabel 'wall time (s)'; plot ${time_cmds%,}; \
    set xlabel 'MiB sent per worker'; set logscale x; plot ${bytes_cmds%,}; unset multiplot"
  echo "plot: $out/accuracy_vs_time.png (each run's accuracy curve against time and against bytes sent per worker)"
else
  echo "(no plot: gnuplot is not installed; scripts/setup.sh --bench installs it)"
fi
