#!/usr/bin/env bash
# bench/scale_study.py on the real worker binary: it refuses malformed flags
# by name before any run; a small study (the MLP at 2 and 4 virtual workers,
# two compressed schemes at 10x) meets its byte budget per scheme and W within
# 5%, writes its CSV, JSON and tables with the gap to dense; a second
# invocation reuses every output, and so does one with --baselines= (whose
# report keeps the folder's baselines); two studies of other W that share the
# folder and end together both land in its tables; a study with another
# protocol is refused by the folder, and an output made with other flags
# stops a study; --start_spec starts a scheme's probes at its spec;
# --report_only runs nothing.
set -uo pipefail
study="$1"    # bench/scale_study.py
worker="$2"   # bazel-bin/worker/sketchfuse_worker
dir="${TEST_TMPDIR:-$(mktemp -d)}"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

expect_refusal() {
  local needle="$1"; shift
  if timeout 60 python3 "$study" --out="$dir/refused" --worker="$worker" "$@" >/dev/null 2>"$dir/stderr"; then
    fail "'$*' succeeded"; return
  fi
  if ! grep -qF -- "$needle" "$dir/stderr"; then
    fail "'$*' did not say '$needle'; it said: $(cat "$dir/stderr")"; return
  fi
  echo "ok: $* -> $(grep -F -- "$needle" "$dir/stderr" | head -1)"
}

expect_refusal "--workers: every entry must be a positive integer" --workers=0,2
expect_refusal "--workers is not a comma-separated list of integers" --workers=four
expect_refusal "every ratio must be a finite number above 1" --ratios=10,1
expect_refusal "every ratio must be a finite number above 1" --ratios=nan
expect_refusal "--models takes mlp, cnn, mlp_large, cnn_wide; got 'alexnet'" --models=mlp,alexnet
expect_refusal "unknown scheme 'magic'" --schemes=topk_allgather,magic
expect_refusal "--baselines must include dense_allreduce" --baselines=dense_bf16_allreduce
expect_refusal "--learning_rate must be a positive number" --learning_rate=nan
expect_refusal "--lr_cap must be a number >= 0" --lr_cap=-0.1
expect_refusal "--worker_flags takes worker flags" --worker_flags=seed=3
expect_refusal "4096 workers x batch 32 is more than the 60000 training examples" --workers=4096
expect_refusal "is not an executable" --worker=/nonexistent/sketchfuse_worker
expect_refusal "--start_spec takes SCHEME=SPEC, got 'topk_allgather'" --start_spec=topk_allgather
expect_refusal "--start_spec names 'gtopk', which is not in --schemes" --schemes=topk_allgather \
  --start_spec=gtopk=topk:density=0.01
expect_refusal "--start_spec topk_allgather: the density of 'topk:density=7' is not in (0, 1]" \
  --schemes=topk_allgather --start_spec=topk_allgather=topk:density=7
[ -e "$dir/refused/results.csv" ] && fail "a refused study wrote $dir/refused/results.csv"

small=(--models=mlp --workers=2,4 --ratios=10 --schemes=topk_allgather,fixed_sketch_ps --baselines=dense_allreduce
       --steps=4 --worker_flags=--test_examples=1000)
if ! python3 "$study" --out="$dir/s" --worker="$worker" "${small[@]}" >"$dir/first.log" 2>&1; then
  fail "the small study failed:"; cat "$dir/first.log"
fi
python3 - "$dir/s" <<'PY' || failures=$((failures + 1))
import csv, json, os, sys
out = sys.argv[1]
rows = list(csv.DictReader(open(os.path.join(out, "results.csv"))))
problems = []
want = {(w, s) for w in ("2", "4") for s in ("dense_allreduce", "topk_allgather", "fixed_sketch_ps")}
got = {(r["workers"], r["scheme"]) for r in rows}
if got != want:
    problems.append(f"rows {sorted(got)}, expected {sorted(want)}")
for r in rows:
    name = f"W={r['workers']} {r['scheme']}"
    if r["failed"] or r["skipped"] or r["not_run"]:
        problems.append(f"{name} did not run: {r}")
        continue
    # 4 steps of 32 examples per worker: the first 4 W 32 examples, one epoch.
    if (int(r["train_examples"]), int(r["epochs"]), int(r["steps"])) != (128 * int(r["workers"]), 1, 4):
        problems.append(f"{name}: data plan {r['train_examples']} examples, {r['epochs']} epochs, {r['steps']} steps")
    if not 10 < float(r["test_accuracy_pct"]) <= 100:
        problems.append(f"{name}: accuracy {r['test_accuracy_pct']}%")
    if r["scheme"] == "dense_allreduce":
        continue
    sent, received = float(r["sent_bytes_per_step"]), float(r["received_bytes_per_step"])
    budget = float(r["budget_bytes"])
    # The MLP's gradient is 235,146 floats: at 10x a worker sends plus receives 2/10 of its bytes.
    if abs(budget - 2 * 4 * 235146 / 10) > 0.01 * budget:
        problems.append(f"{name}: budget {budget:.0f} B, expected {2 * 4 * 235146 / 10:.0f}")
    if abs((sent + received) / budget - 1) > 0.05 or abs(float(r["budget_deviation"])) > 0.05:
        problems.append(f"{name}: {sent + received:.0f} B per worker per step against a budget of {budget:.0f}")
    if r["vs_dense_points"] == "":
        problems.append(f"{name}: no gap to dense")
report = json.load(open(os.path.join(out, "scale.json")))
if len(report["probes"]) != 4:
    problems.append(f"{len(report['probes'])} probes, expected 4 (two schemes at two W)")
md = open(os.path.join(out, "scale.md")).read()
for needle in ("## mlp, 10x", "| `fixed_sketch_ps` |", "W = 4"):
    if needle not in md:
        problems.append(f"scale.md lacks '{needle}'")
for p in problems:
    print("FAIL:", p)
if problems:
    sys.exit(1)
print(f"ok: {len(rows)} runs within 5% of their budgets")
PY
if ! python3 "$study" --out="$dir/s" --worker="$worker" "${small[@]}" >"$dir/second.log" 2>&1 \
   || ! grep -qE "^scale_study: 0 runs made, (1[89]|2[0-2]) reused" "$dir/second.log"; then
  fail "a second invocation did not reuse every output:"; cat "$dir/second.log"
else
  echo "ok: $(tail -1 "$dir/second.log")"
fi
# --baselines= runs only the schemes (a second process sharing a study's folder): here all reused,
# and the folder's report keeps its two dense rows, so the gaps are still there.
if ! python3 "$study" --out="$dir/s" --worker="$worker" "${small[@]}" --baselines= >"$dir/schemes.log" 2>&1 \
   || ! grep -q "^scale_study: 0 runs made.*(4 rows of this study, 2 kept from the folder's report)" "$dir/schemes.log" \
   || [ "$(grep -c '^mlp,[24],dense_allreduce,' "$dir/s/results.csv")" != 2 ] \
   || [ "$(tail -n +2 "$dir/s/results.csv" | wc -l)" != 6 ] \
   || ! python3 -c '
import csv, sys
assert all(r["vs_dense_points"] for r in csv.DictReader(open(sys.argv[1])) if r["scheme"] != "dense_allreduce")
' "$dir/s/results.csv"; then
  fail "a schemes-only invocation ran something or dropped the folder's baselines:"; cat "$dir/schemes.log"
else
  echo "ok: --baselines= ran nothing and the report kept the folder's 2 dense rows and the gaps"
fi
# Two studies of other W sharing the folder, at the same time: both land in its tables, beside the rest.
for w in 3 5; do
  python3 "$study" --out="$dir/s" --worker="$worker" "${small[@]}" --workers=$w --schemes= >"$dir/w$w.log" 2>&1 &
done
wait
if ! grep -q "1 runs made" "$dir/w3.log" || ! grep -q "1 runs made" "$dir/w5.log" \
   || [ "$(tail -n +2 "$dir/s/results.csv" | wc -l)" != 8 ] \
   || [ "$(grep -c '^mlp,[35],dense_allreduce,' "$dir/s/results.csv")" != 2 ] \
   || ! grep -q "| scheme | W = 2 | W = 3 | W = 4 | W = 5 |" "$dir/s/scale.md"; then
  fail "two studies of other W sharing the folder did not both land:"; cat "$dir/w3.log" "$dir/w5.log" "$dir/s/results.csv"
else
  echo "ok: the studies at 3 and 5 workers both landed: $(tail -n +2 "$dir/s/results.csv" | wc -l) rows, W = 2 to 5"
fi
# A folder holds one protocol: a study with another seed is refused before it runs anything.
if python3 "$study" --out="$dir/s" --worker="$worker" "${small[@]}" --seed=2 >"$dir/protocol.log" 2>&1 \
   || ! grep -q "holds a study made with --seed=1; this one has --seed=2" "$dir/protocol.log" \
   || ls "$dir/s/runs" | grep -q partial; then
  fail "a study with another seed was not refused by the folder:"; cat "$dir/protocol.log"
else
  echo "ok: $(grep -o 'scale_study: .*' "$dir/protocol.log" | cut -c1-100)..."
fi
# Outputs made with other flags are not mixed into a study (here a folder whose report was removed).
cp -r "$dir/s" "$dir/s_noreport" && rm "$dir/s_noreport/scale.json"
if python3 "$study" --out="$dir/s_noreport" --worker="$worker" "${small[@]}" --seed=2 >"$dir/stale.log" 2>&1 \
   || ! grep -q "was made by .* --seed=1 .*not by this study's .* --seed=2" "$dir/stale.log" \
   || ls "$dir/s_noreport/runs" | grep -q partial; then
  fail "a study with another seed reused or ran beside the first one's outputs:"; cat "$dir/stale.log"
else
  echo "ok: $(grep -o 'scale_study: .*was made by' "$dir/stale.log" | cut -c1-100)..."
fi
# A folder whose scale.json is not a report is refused by name.
mkdir -p "$dir/junk" && echo '[1, 2]' > "$dir/junk/scale.json"
if python3 "$study" --out="$dir/junk" --worker="$worker" "${small[@]}" --report_only >"$dir/junk.log" 2>&1 \
   || ! grep -q "junk/scale.json is not a study's report" "$dir/junk.log"; then
  fail "a folder with a scale.json that is no report:"; cat "$dir/junk.log"
else
  echo "ok: $(grep -o 'scale_study: .*' "$dir/junk.log" | cut -c1-100)"
fi
echo '{"settings": {}, "runs": [{"model": "mlp", "workers": "4"}], "probes": []}' > "$dir/junk/scale.json"
if python3 "$study" --out="$dir/junk" --worker="$worker" "${small[@]}" --report_only >"$dir/junk.log" 2>&1 \
   || ! grep -q "junk/scale.json is not a study's report: a run without a model, W, scheme and ratio" "$dir/junk.log"; then
  fail "a report with a malformed run:"; cat "$dir/junk.log"
else
  echo "ok: $(grep -o 'scale_study: .*' "$dir/junk.log" | cut -c1-100)"
fi
# --start_spec: the probes start at that spec, not the registry's default, and still meet the budget.
started=(--models=mlp --workers=2 --ratios=10 --schemes=topk_allgather --baselines= --steps=4
         --worker_flags=--test_examples=1000 --start_spec=topk_allgather=topk:density=0.004)
if ! python3 "$study" --out="$dir/started" --worker="$worker" "${started[@]}" >"$dir/started.log" 2>&1; then
  fail "the study with --start_spec failed:"; cat "$dir/started.log"
elif [ -e "$dir/started/probes/mlp_W2_topk_allgather_default.out" ] \
   || { command -v gnuplot >/dev/null && grep -q "gnuplot failed" "$dir/started.log"; } \
   || ! head -1 "$dir/started/probes/mlp_W2_topk_allgather_start.out" | grep -qE -- "--compressor=topk:density=0.004( |$)" \
   || ! head -1 "$dir/started/probes/mlp_W2_topk_allgather_quarter.out" | grep -qE -- "--compressor=topk:density=0.001( |$)" \
   || ! python3 -c '
import csv, json, sys
row, = csv.DictReader(open(sys.argv[1] + "/results.csv"))
probe, = json.load(open(sys.argv[1] + "/scale.json"))["probes"]
assert probe["first_probe"] == "start" and probe["default_compressor"] == "topk:density=0.004", probe
assert abs(float(row["budget_deviation"])) <= 0.05 and float(row["test_accuracy_pct"]) > 10, row
' "$dir/started"; then
  fail "--start_spec did not start the probes at its spec:"; ls "$dir/started/probes"; cat "$dir/started.log"
else
  echo "ok: --start_spec probed topk:density=0.004 and 0.001 first, then met the budget"
fi
if ! python3 "$study" --out="$dir/empty" --worker="$worker" "${small[@]}" --report_only >"$dir/report.log" 2>&1 \
   || ! grep -q "0 runs made, 0 reused" "$dir/report.log" \
   || [ "$(tail -n +2 "$dir/empty/results.csv" | grep -c ',True,')" != 6 ] || ls "$dir/empty/runs" >/dev/null 2>&1; then
  fail "--report_only on an empty folder:"; cat "$dir/report.log"
else
  echo "ok: --report_only ran nothing"
fi
[ "$failures" -eq 0 ] && echo PASS || echo "$failures failure(s)"
exit $((failures > 0))
