#!/usr/bin/env bash
# bench/study.py on the real daemons: a bad spec is refused by name before
# any run; a small study (the MLP on 2 worker processes, dense_allreduce and
# Top-k allgather at 10x) writes one results.csv row per run, the compressed
# run within 5% of its byte budget (probed on virtual workers) and timed to
# the cell's target; a second invocation reuses every launch and probe;
# --ratios=default runs every scheme of the spec in one launch.
# Usage: study_test.sh <bench/study.py> <sketchfuse_worker> <sketchfuse_server>
set -uo pipefail
study="$(realpath "$1")"
worker="$(realpath "$2")"
export SKETCHFUSE_SERVER="$(realpath "$3")"
dir="${TEST_TMPDIR:-$(mktemp -d)}"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

expect_refusal() {
  local needle="$1"; shift
  if timeout 120 python3 "$study" --out="$dir/refused" --worker="$worker" "$@" >/dev/null 2>"$dir/stderr"; then
    fail "'$*' succeeded"; return
  fi
  if ! grep -qF -- "$needle" "$dir/stderr"; then
    fail "'$*' did not say '$needle'; it said: $(cat "$dir/stderr")"; return
  fi
  echo "ok: $* -> $(grep -F -- "$needle" "$dir/stderr" | head -1)"
}

expect_refusal "every ratio must be above 1" --ratios=10,1
expect_refusal "--ratios: 'ten' is not a comma-separated list of floats" --ratios=ten
expect_refusal "unknown scheme 'magic'; the schemes are sketch_ps" --schemes=topk_allgather,magic
expect_refusal "a study needs at least 2 workers" --workers=1
expect_refusal "--models: alexnet:" --models=mlp,alexnet
expect_refusal "dense_allreduce does not compress: name it in --baselines" --schemes=dense_allreduce --ratios=10
expect_refusal "--virtual runs the workers in one process: it has no link" --virtual --links=200mbit
expect_refusal "--worker_flags takes worker flags" --worker_flags=seed=3
expect_refusal "is not built" --worker=/nonexistent/sketchfuse_worker
[ -e "$dir/refused/results.csv" ] && fail "a refused study wrote $dir/refused/results.csv"

small=(--models=mlp --workers=2 --epochs=1 --train_examples=1280 --ratios=10 --schemes=topk_allgather
       --baselines=dense_allreduce --worker_flags='--test_examples=500 --eval_every=5 --eval_examples=500')
if ! python3 "$study" --out="$dir/s" --worker="$worker" "${small[@]}" >"$dir/first.log" 2>&1; then
  fail "the small study failed:"; cat "$dir/first.log"
fi
python3 - "$dir/s/results.csv" <<'PY' || failures=$((failures + 1))
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
problems = []
got = sorted((r["scheme"], r["ratio_target"]) for r in rows)
if got != [("dense_allreduce", ""), ("topk_allgather", "10.0")]:
    problems.append(f"rows {got}")
for r in rows:
    name = f"{r['scheme']} {r['ratio_target'] or 'default'}"
    if (r["model"], r["workers"], r["link"], r["seed"], r["steps"]) != ("mlp", "2", "none", "1", "20"):
        problems.append(f"{name}: cell {r['model']} W={r['workers']} {r['link']} seed {r['seed']}, {r['steps']} steps")
    if not 10 < float(r["test_accuracy_pct"]) <= 100:
        problems.append(f"{name}: accuracy {r['test_accuracy_pct']}")
    if not r["target_pct"] or r["diverged_step"]:
        problems.append(f"{name}: target '{r['target_pct']}', diverged at '{r['diverged_step']}'")
    if r["scheme"] == "topk_allgather":
        moved = float(r["sent_bytes_per_step"]) + float(r["received_bytes_per_step"])
        budget = 2 * 4 * 235146 / 10  # the MLP's 235,146 floats at 10x, sent plus received
        if abs(moved / budget - 1) > 0.05:
            problems.append(f"{name}: {moved:.0f} B per worker per step against a budget of {budget:.0f}")
        if "density=" not in r["compressor"]:
            problems.append(f"{name}: compressor {r['compressor']}")
for p in problems:
    print("FAIL:", p)
sys.exit(1 if problems else 0)
PY
[ "$failures" -eq 0 ] && echo "ok: the small study wrote its two rows, Top-k allgather within 5% of its budget"
if ! python3 "$study" --out="$dir/s" --worker="$worker" "${small[@]}" >"$dir/second.log" 2>&1 \
   || ! grep -q "(0 launches and 0 probes run, the rest reused)" "$dir/second.log"; then
  fail "a second invocation did not reuse every launch and probe:"; cat "$dir/second.log"
else
  echo "ok: the second invocation reused every launch and probe"
fi
if ! python3 "$study" --out="$dir/d" --worker="$worker" --models=mlp --workers=2 --epochs=1 --train_examples=640 \
       --schemes=sketch_allreduce --baselines=dense_allreduce --worker_flags='--test_examples=500' >"$dir/d.log" 2>&1 \
   || [ "$(ls "$dir/d/launches" | grep -vc '\.log$')" != 1 ] \
   || [ "$(tail -n +2 "$dir/d/results.csv" | cut -d, -f8 | sort | tr '\n' ' ')" != "dense_allreduce sketch_allreduce " ]; then
  fail "--ratios=default did not run both schemes in one launch:"; cat "$dir/d.log"; ls "$dir/d/launches"
else
  echo "ok: --ratios=default ran dense_allreduce and sketch_allreduce in one launch"
fi
# The language model on virtual workers with AdamW: judged by validation loss.
if ! python3 "$study" --out="$dir/lm" --worker="$worker" --models=char_lm --workers=2 --virtual --epochs=1 \
       --train_examples=160 --batch_size=8 --schemes=sketch_allreduce --baselines=dense_allreduce \
       --worker_flags='--optimizer=adamw --learning_rate=3e-3 --test_examples=64' >"$dir/lm.log" 2>&1; then
  fail "the language model's study failed:"; cat "$dir/lm.log"
else
  python3 - "$dir/lm/results.csv" <<'PY' || failures=$((failures + 1))
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
problems = []
if sorted(r["scheme"] for r in rows) != ["dense_allreduce", "sketch_allreduce"]:
    problems.append(f"rows {[r['scheme'] for r in rows]}")
for r in rows:
    if r["quality_metric"] != "test_loss" or not 0 < float(r["test_loss"]) < 5.6:
        problems.append(f"{r['scheme']}: {r['quality_metric']} {r['test_loss']}")
    if not r["target_loss"] or r["target_pct"] or not r["optimizer"].startswith("adamw:"):
        problems.append(f"{r['scheme']}: target_loss '{r['target_loss']}', target_pct '{r['target_pct']}', "
                        f"optimizer '{r['optimizer']}'")
for p in problems:
    print("FAIL:", p)
sys.exit(1 if problems else 0)
PY
  echo "ok: the language model's runs are judged by their validation loss"
fi
[ "$failures" -eq 0 ] && echo PASS || echo "$failures failure(s)"
exit $((failures > 0))
