#!/usr/bin/env bash
# scripts/local_cluster.sh --link: bad values are refused by name; where the
# machine can make network namespaces (root, ip, tc), a short run with every
# process on a host of its own behind a shaped 100mbit link trains, says so in
# its table and comparison.json, and leaves no namespace behind; elsewhere
# --link=auto runs on loopback and says why, and an explicit rate is refused.
# Usage: launcher_link_test.sh <sketchfuse_server> <sketchfuse_worker> <local_cluster.sh> <netfabric.py>
set -uo pipefail
export SKETCHFUSE_SERVER="$(realpath "$1")" SKETCHFUSE_WORKER="$(realpath "$2")"
launcher="$(realpath "$3")"
netfabric="$(realpath "$4")"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
fail() { echo "FAIL: $*" >&2; exit 1; }

# refused EXPECTED ARGS...: the launcher exits 2 and its error names EXPECTED.
refused() {
  local expected="$1"; shift
  local status=0
  bash "$launcher" "$@" --out="$tmp/refused" >"$tmp/refused.log" 2>&1 || status=$?
  [ "$status" -eq 2 ] || { cat "$tmp/refused.log" >&2; fail "$*: exit $status, expected 2"; }
  grep -qF -- "$expected" "$tmp/refused.log" || { cat "$tmp/refused.log" >&2; fail "$*: no '$expected'"; }
  echo "refused as expected: $*"
}
refused "--link must be none, auto or a rate such as 100mbit" --link=fast
refused "--link must be none, auto or a rate such as 100mbit" --link=100
refused "--link must be none, auto or a rate such as 100mbit" "--link=1gbit;reboot"
refused "--link=1gbit needs a process per worker; --virtual runs them in one process" --virtual --link=1gbit

# netfabric.py's command line refuses bad arguments (exit 2) before it makes anything.
fabric_refused() {
  local expected="$1"; shift
  local status=0
  python3 "$netfabric" "$@" >"$tmp/fabric.log" 2>&1 || status=$?
  [ "$status" -eq 2 ] || { cat "$tmp/fabric.log" >&2; fail "netfabric.py $*: exit $status, expected 2"; }
  grep -qF -- "$expected" "$tmp/fabric.log" || { cat "$tmp/fabric.log" >&2; fail "netfabric.py $*: no '$expected'"; }
  echo "netfabric.py refused as expected: $*"
}
fabric_refused "a tag is 1 to 8 letters and digits" up "bad tag" 2 1gbit
fabric_refused "a tag is 1 to 8 letters and digits" up toolongtag9 2 1gbit
fabric_refused "HOSTS must be a number" up t1 two 1gbit
fabric_refused "a fabric has 1 to 250 hosts" up t1 0 1gbit
fabric_refused "a fabric has 1 to 250 hosts" up t1 251 1gbit
fabric_refused "a link rate is a number and kbit, mbit or gbit" up t1 2 fast
fabric_refused "usage: netfabric.py" remove t1
ip netns list 2>/dev/null | grep -q "^sfbt1-" && fail "a refused netfabric.py up made namespaces"

# The launcher's own netfabric.py sits beside it (scripts/).
[ "$(dirname "$launcher")/netfabric.py" -ef "$netfabric" ] || fail "netfabric.py is not beside local_cluster.sh"

run=(--workers=2 --shards=1 --schemes=dense_allreduce,sketch_ps --epochs=1 --train_examples=2000)
if why="$(python3 "$netfabric" check)"; then
  out="$tmp/shaped"
  bash "$launcher" "${run[@]}" --link=100mbit --out="$out" >"$tmp/shaped.log" 2>&1 \
    || { cat "$tmp/shaped.log" >&2; fail "the run on a 100mbit link failed"; }
  cat "$tmp/shaped.log"
  grep -q "^link: 100mbit per host" "$tmp/shaped.log" || fail "the launcher did not say which link it runs on"
  grep -q "^on a 100mbit link per host:" "$tmp/shaped.log" || fail "the table does not name the link"
  python3 - "$out/comparison.json" <<'PY' || fail "comparison.json"
import json, sys
c = json.load(open(sys.argv[1]))
assert c["link"] == "100mbit", c["link"]
for r in c["runs"]:
    assert r["diverged"] is None and r["final_test_accuracy"] > 0.3, r
    assert r["bytes_sent_per_worker_per_step"] > 0, r
PY
  # The shards listened on the fabric's addresses, not on loopback.
  grep -q "listening on 10\.214\.0\.1:" "$out/sketch_ps/server0.log" || fail "shard 0 did not listen on the fabric"
  if ip netns list | grep -q "^sfblc"; then ip netns list >&2; fail "the launcher left its namespaces behind"; fi
  echo "trained on a shaped 100mbit link; no namespace left"
else
  echo "no shaped network here ($why): checking the loopback fallback"
  bash "$launcher" "${run[@]}" --link=auto --out="$tmp/auto" >"$tmp/auto.log" 2>&1 \
    || { cat "$tmp/auto.log" >&2; fail "--link=auto failed"; }
  grep -q "on loopback, not on a shaped link: $why" "$tmp/auto.log" || fail "--link=auto did not say why"
  refused "--link=100mbit: no shaped network can be made here" --link=100mbit
fi
echo "PASS"
