#!/usr/bin/env bash
# scripts/local_cluster.sh under a dead shard, with real processes on
# loopback: under --schemes=auto and fixed_sketch_auto, shard 1 (which owns
# two of the job's four partitions under auto, and the second of the two
# fused groups under fixed_sketch_auto, whose sketch is not cut) is killed
# with SIGKILL mid-run; the launcher logs it,
# restarts it on its address (--restart_shards), and the run trains to the
# end. Under sketch_ps
# the same kill ends the run with the launcher naming the shard and the step.
# Usage: launcher_failover_test.sh <sketchfuse_server> <sketchfuse_worker> <local_cluster.sh>
set -uo pipefail
export SKETCHFUSE_SERVER="$(realpath "$1")" SKETCHFUSE_WORKER="$(realpath "$2")"
launcher="$(realpath "$3")"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
fail() { echo "FAIL: $*" >&2; exit 1; }

# Starts the launcher for $1 (scheme) in $tmp/$1, kills shard 1 once worker-0
# reported its first 25 steps; leaves the launcher's status in $status.
run_and_kill() {
  local scheme="$1" out="$tmp/$1"; shift
  rm -rf "$out"
  bash "$launcher" --workers=2 --shards=2 --schemes="$scheme" --epochs=1 --train_examples=12000 --out="$out" "$@" \
    -- --fusion=2 --push_attempts=2 >"$tmp/$scheme.log" 2>&1 &
  local launcher_pid=$! shard=""
  for _ in $(seq 1200); do
    if grep -q "^worker-0 epoch" "$out/$scheme/worker0.log" 2>/dev/null; then
      shard="$(pgrep -f -- "--job_config=$out/$scheme/job.json --shard_index=1" | head -n 1)"
      [ -n "$shard" ] && break
    fi
    kill -0 "$launcher_pid" 2>/dev/null || break
    sleep 0.1
  done
  [ -n "$shard" ] || { cat "$tmp/$scheme.log" >&2; fail "$scheme: shard 1 or worker-0's first report never appeared"; }
  kill -9 "$shard"
  status=0
  wait "$launcher_pid" || status=$?
  echo "--- $scheme: launcher exit $status"
  cat "$tmp/$scheme.log"
}

# Both hybrids train through the dead shard: auto (one round) and
# fixed_sketch_auto (two rounds per group, both redone on the collective).
for hybrid in auto fixed_sketch_auto; do
  run_and_kill "$hybrid" --restart_shards
  [ "$status" -eq 0 ] || fail "$hybrid: the launcher failed (exit $status) after a shard was killed"
  grep -qE "server shard 1 died \(exit 137\) at about step [0-9]+;" "$tmp/$hybrid.log" \
    || fail "$hybrid: the launcher did not log the dead shard"
  grep -q "server shard 1 restarted on 127.0.0.1:" "$tmp/$hybrid.log" || fail "$hybrid: the shard was not restarted"
  grep -qE "$hybrid: step [0-9]+: the aggregation servers failed" "$tmp/$hybrid/$hybrid/worker0.log" \
    || fail "$hybrid: worker-0 did not fall back (its log: $(tail -n 3 "$tmp/$hybrid/$hybrid/worker0.log"))"
  python3 - "$tmp/$hybrid/comparison.json" "$hybrid" <<'PY' || fail "$hybrid: the run did not train to the end"
import json, sys
run = json.load(open(sys.argv[1]))["runs"][0]
print(sys.argv[2], "final test accuracy", run["final_test_accuracy"], "steps", run["steps"])
assert run["diverged"] is None and run["steps"] == 187 and run["final_test_accuracy"] > 0.7, run
PY
done

run_and_kill sketch_ps
[ "$status" -eq 1 ] || fail "sketch_ps: the launcher should end the run (exit 1), got $status"
grep -qE "server shard 1 died \(exit 137\) at about step [0-9]+ of sketch_ps" "$tmp/sketch_ps.log" \
  || fail "sketch_ps: the launcher did not name the dead shard and the step"
echo PASS
