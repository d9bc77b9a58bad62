#!/usr/bin/env bash
# gpu_compression_bench and gpu_worker_bench refuse malformed flags with a
# clear error before they touch a GPU, says so and measures nothing where there is no GPU, and
# compare_gpu_vs_torch.py names a file that is not benchmark JSON. Runs
# without a GPU (a machine with one measures instead of refusing at "no GPU").
set -uo pipefail
bin="$1"
compare="$2"
worker_bench="$3"
out_dir="${TEST_TMPDIR:-$(mktemp -d)}"
failures=0

expect_refusal() {
  local needle="$1"; shift
  if "$@" >/dev/null 2>"$out_dir/stderr"; then
    echo "FAIL: '$*' succeeded"; failures=$((failures + 1)); return
  fi
  if ! grep -qF -- "$needle" "$out_dir/stderr"; then
    echo "FAIL: '$*' did not say '$needle'; it said:"; cat "$out_dir/stderr"
    failures=$((failures + 1)); return
  fi
  echo "ok: ${*##*/} -> $(head -1 "$out_dir/stderr")"
}

expect_refusal "need 1 <= --rows <= 64" "$bin" --rows=0
expect_refusal "need 1 <= --rows <= 64" "$bin" --reps=0
expect_refusal "need 1 <= --rows <= 64" "$bin" --k_fraction=2
expect_refusal "Illegal value 'many' specified for flag 'rows'" "$bin" --rows=many
expect_refusal 'unknown model profile "resnet51"' "$bin" --profiles=resnet50,resnet51
expect_refusal "--scheme must be sketch_allreduce or fixed_sketch_allreduce; got 'topk_ps'" "$worker_bench" \
  --scheme=topk_ps
expect_refusal "--workers and --steps must be >= 1 and --warmup >= 0" "$worker_bench" --scheme=fixed_sketch_allreduce \
  --steps=0

# A valid command line on a machine without a GPU: refused with the reason,
# and no JSON written.
if "$bin" --profiles=resnet50 --json="$out_dir/figures.json" >/dev/null 2>"$out_dir/stderr"; then
  echo "note: a GPU is present; the benchmark ran"
else
  if grep -qF "no GPU" "$out_dir/stderr" && [ ! -e "$out_dir/figures.json" ]; then
    echo "ok: no GPU -> $(head -1 "$out_dir/stderr")"
  else
    echo "FAIL: without a GPU it said:"; cat "$out_dir/stderr"; failures=$((failures + 1))
  fi
fi

echo '{"results": [' > "$out_dir/broken.json"
echo '{"device": "x", "results": []}' > "$out_dir/torch.json"
expect_refusal "broken.json: cannot read benchmark figures" \
  python3 "$compare" "$out_dir/broken.json" "$out_dir/torch.json" "$out_dir/cmp"
expect_refusal "missing.json: cannot read benchmark figures" \
  python3 "$compare" "$out_dir/missing.json" "$out_dir/torch.json" "$out_dir/cmp"

# A well-formed pair: both PyTorch columns (scattered and same layout) and
# their ratios reach the CSV.
cat > "$out_dir/ours.json" <<'JSON'
{"device": "test", "reps": 1, "results": [
 {"profile": "p", "op": "copy", "n": 10, "median_ms": 1.0, "min_ms": 1.0, "bytes": 80, "gbps": 8.0},
 {"profile": "p", "op": "compress_decode", "n": 10, "median_ms": 0.5, "min_ms": 0.5, "bytes": 40, "gbps": 4.0}]}
JSON
cat > "$out_dir/theirs.json" <<'JSON'
{"device": "test", "results": [
 {"profile": "p", "op": "compress_decode", "n": 10, "median_ms": 10.0, "min_ms": 10.0, "bytes": 40, "gbps": 1.0},
 {"profile": "p", "op": "compress_decode_chunked", "n": 10, "median_ms": 2.0, "min_ms": 2.0, "bytes": 40, "gbps": 1.0}]}
JSON
if python3 "$compare" "$out_dir/ours.json" "$out_dir/theirs.json" "$out_dir/pair" > "$out_dir/pair.txt" 2>&1 &&
   python3 - "$out_dir/pair.csv" <<'PY'
import csv, sys
rows = {r["op"]: r for r in csv.DictReader(open(sys.argv[1]))}
r = rows["compress_decode"]
assert float(r["speedup"]) == 20.0, r
assert float(r["speedup_same_layout"]) == 4.0, r
assert float(r["fraction_of_copy"]) == 0.5, r
PY
then
  echo "ok: compare_gpu_vs_torch.py sets both PyTorch layouts side by side"
else
  echo "FAIL: compare_gpu_vs_torch.py on a well-formed pair:"; cat "$out_dir/pair.txt"
  failures=$((failures + 1))
fi

[ "$failures" -eq 0 ] || { echo "$failures failure(s)"; exit 1; }
echo "all refusals clear"
