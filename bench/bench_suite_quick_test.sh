#!/usr/bin/env bash
# scripts/bench_suite.sh --quick end to end: every part runs on the real
# daemons and programs and writes its CSV, JSON and summary. The shaped-link
# part needs root (network namespaces); without it the suite says so and this
# test checks the rest. No figure is checked: the machine is shared.
set -uo pipefail
suite="$1"
export SKETCHFUSE_BIN_DIR="$(cd "$(dirname "$suite")/.." && pwd)"
out="${TEST_TMPDIR:-$(mktemp -d)}/bench"
if ! bash "$suite" --quick --no_build --out="$out" >"$out.log" 2>&1; then
  echo "FAIL: the quick suite failed; its output:"; cat "$out.log"; exit 1
fi
cat "$out.log"
failures=0
expect_file() {
  if [ -s "$1" ]; then echo "ok: $1"; else echo "FAIL: no $1"; failures=$((failures + 1)); fi
}
expect_file "$out/compression/resnet50.csv"
expect_file "$out/compression/resnet50.json"
expect_file "$out/transport.csv"
expect_file "$out/transport.json"
expect_file "$out/summary.md"
if grep -q "shaped-link runs skipped" "$out.log"; then
  echo "shaped-link part skipped here (no network namespaces); the rest was checked"
else
  expect_file "$out/shaped/runs.csv"
  expect_file "$out/shaped/results.csv"
  expect_file "$out/shaped/link.json"
  expect_file "$out/scale/validation.csv"
  expect_file "$out/scale/projection.csv"
  expect_file "$out/scale/projection.json"
  # Every quick run finished, with its steady-state figures.
  python3 - "$out/shaped/runs.json" "$out/shaped/results.csv" <<'PY' || failures=$((failures + 1))
import csv, json, sys
runs = json.load(open(sys.argv[1]))
rows = list(csv.DictReader(open(sys.argv[2])))
assert [r["scheme"] for r in rows] == [r["scheme"] for r in runs["runs"]], rows
assert all(r["measurement"] == "measured" and float(r["step_ms"]) > 0 and r["link_gbps"] for r in rows), rows
assert not runs["failed"], runs["failed"]
assert len(runs["runs"]) == 5, len(runs["runs"])
for r in runs["runs"]:
    assert r["step_s"] > 0 and r["steady_steps"] == 1, r
    assert r["bytes_sent_per_step"] > 0, r
print("ok: 5 shaped-link runs, each with a steady step and traffic")
PY
  grep -q "## Scale model" "$out/summary.md" || { echo "FAIL: no scale section in the summary"; failures=$((failures + 1)); }
fi
[ "$failures" -eq 0 ] || { echo "$failures failure(s)"; exit 1; }
echo "the quick suite ran end to end"
