#!/usr/bin/env bash
# The benchmark suite's programs answer malformed flags and input files with a
# clear error naming the problem, and a non-zero exit, before any run.
set -uo pipefail
bench="$(cd "$(dirname "$1")" && pwd)"   # the folder of bench/shaped_cluster.py
suite="$2"                               # scripts/bench_suite.sh
peel_capacity="$3"                       # bazel-bin/bench/peel_capacity
dir="${TEST_TMPDIR:-$(mktemp -d)}"
failures=0

expect_refusal() {
  local needle="$1"; shift
  if timeout 60 "$@" >/dev/null 2>"$dir/stderr"; then
    echo "FAIL: '$*' succeeded"; failures=$((failures + 1)); return
  fi
  if ! grep -qF -- "$needle" "$dir/stderr"; then
    echo "FAIL: '$*' did not say '$needle'; it said:"; cat "$dir/stderr"; failures=$((failures + 1)); return
  fi
  echo "ok: ${*##*/} -> $(grep -F -- "$needle" "$dir/stderr" | head -1)"
}

shaped=(python3 "$bench/shaped_cluster.py" --out "$dir/o" --server /bin/true --worker /bin/true)
expect_refusal "every entry must be a positive integer" "${shaped[@]}" --workers 0,2
expect_refusal "is not a comma-separated list of integers" "${shaped[@]}" --shards two
expect_refusal "unknown profile 'alexnet'" "${shaped[@]}" --profiles alexnet
expect_refusal "unknown scheme 'magic'" "${shaped[@]}" --schemes dense_allreduce,magic
expect_refusal "--steps must be at least 2" "${shaped[@]}" --steps 1
expect_refusal "rate 'fast' is not a number of kbit, mbit or gbit" "${shaped[@]}" --rate fast
expect_refusal "is not an executable" python3 "$bench/shaped_cluster.py" --out "$dir/o" --server "$dir/none" \
  --worker /bin/true

blas=(python3 "$bench/blas_compare.py" --out "$dir/o" --worker /bin/true)
expect_refusal "unknown model 'resnet' in --models" "${blas[@]}" --models mlp,resnet
expect_refusal "--workers must be in [1, 256]; got 0" "${blas[@]}" --workers 0
expect_refusal "--train_examples must be at least 32 * --workers (128)" "${blas[@]}" --train_examples 100
expect_refusal "--threads must be in [1, 256]" "${blas[@]}" --threads -3
expect_refusal "no worker binary at $dir/none" python3 "$bench/blas_compare.py" --out "$dir/o" --worker "$dir/none"

mkdir -p "$dir/broken/runs" "$dir/gpu"
echo '{"runs": [' >"$dir/broken/runs.json"
expect_refusal "cannot read shaped-link runs $dir/missing/runs.json" \
  python3 "$bench/scale_projection.py" --shaped "$dir/missing" --gpu "$dir/gpu" --out "$dir/o"
expect_refusal "is not JSON" python3 "$bench/scale_projection.py" --shaped "$dir/broken" --gpu "$dir/gpu" --out "$dir/o"
expect_refusal "--alpha_us must be >= 0" python3 "$bench/scale_projection.py" --shaped "$dir/broken" --gpu "$dir/gpu" \
  --out "$dir/o" --alpha_us=-1

mkdir -p "$dir/nokeys"
echo '{"runs": [{"name": "x"}], "link": {"alpha_s": 0, "beta_s_per_byte": 1e-9}, "rate": "1gbit"}' >"$dir/nokeys/runs.json"
expect_refusal "cannot read job config $dir/nokeys/runs/x/job.json" python3 "$bench/scale_projection.py" \
  --shaped "$dir/nokeys" --gpu "$dir/gpu" --out "$dir/o"
mkdir -p "$dir/nokeys/runs/x"
echo '{"run": {"layerSizes": ["10"]}, "groups": [{"layerEnd": 1, "compressor": "dense"}]}' >"$dir/nokeys/runs/x/job.json"
expect_refusal "are malformed: KeyError" python3 "$bench/scale_projection.py" --shaped "$dir/nokeys" --gpu "$dir/gpu" \
  --out "$dir/o"

mkdir -p "$dir/noruns"
echo '{"runs": [], "link": {"alpha_s": 0, "beta_s_per_byte": 1e-9}, "rate": "1gbit"}' >"$dir/noruns/runs.json"
expect_refusal "cannot read the GPU figures $dir/gpu/gpu_worker_step/results.csv" \
  python3 "$bench/scale_projection.py" --shaped "$dir/noruns" --gpu "$dir/gpu" --out "$dir/o"
mkdir -p "$dir/gpu/gpu_worker_step"
printf 'gpu,run,workload,parameters,fusion,device,compress_ms,decode_ms\nH200,fusion_plans,resnet50,25557032,4,gpu,2.9,1.6\n' \
  >"$dir/gpu/gpu_worker_step/results.csv"
expect_refusal "gpu_worker_step needs GPU figures of at least two fusion plans (per_layer, single, 4)" \
  python3 "$bench/scale_projection.py" --shaped "$dir/noruns" --gpu "$dir/gpu" --out "$dir/o"

mkdir -p "$dir/summary/shaped"
echo '{"runs": [' >"$dir/summary/shaped/runs.json"
expect_refusal "is not JSON" python3 "$bench/suite_summary.py" "$dir/summary"

echo '{"benchmarks": [{"name": "BM_GrpcPushReply/MiB:1/channels:1/tuned:1/real_time", "real_time": 1, "time_unit": "us", "bytes_per_second": 1}]}' >"$dir/us.json"
echo 'not json' >"$dir/garbage.json"
echo '{"benchmarks": []}' >"$dir/empty.json"
expect_refusal "cannot read" python3 "$bench/transport_table.py" "$dir/none.json" "$dir/t"
expect_refusal "is not server_bench JSON output" python3 "$bench/transport_table.py" "$dir/garbage.json" "$dir/t"
expect_refusal "expected times in ms" python3 "$bench/transport_table.py" "$dir/us.json" "$dir/t"
expect_refusal "holds no pair" python3 "$bench/transport_table.py" "$dir/empty.json" "$dir/t"

expect_refusal "two executable server_bench builds" bash "$bench/transport_ab.sh" "$dir/none" "$dir/none"
expect_refusal "usage:" bash "$bench/transport_ab.sh"

expect_refusal "unknown option '--fast'" bash "$suite" --fast
expect_refusal "unknown part 'gpu' in --only" bash "$suite" --only=compression,gpu

expect_refusal "--widths: 'three' is not an integer in [1, 1024]" "$peel_capacity" --widths=three
expect_refusal "--rows: '1' is not an integer in [2, 64]" "$peel_capacity" --rows=1
expect_refusal "--ks: 4 workers of 10000 coordinates exceed --dim=28938" "$peel_capacity" --ks=10000
expect_refusal "--overlap must be in [0, 1]; got 1.5" "$peel_capacity" --overlap=1.5
expect_refusal "--overlap must be in [0, 1]; got nan" "$peel_capacity" --overlap=nan
expect_refusal "--plot needs --csv" "$peel_capacity" --trials=1 --ks=8 --plot="$dir/p.png"
expect_refusal "cannot write --csv '$dir/none/x.csv'" "$peel_capacity" --trials=1 --ks=8 --csv="$dir/none/x.csv"
# A tiny run: one line per case and the CSV.
if "$peel_capacity" --trials=2 --ks=8,16 --widths=4 --csv="$dir/peel.csv" >"$dir/peel.out" 2>&1 \
    && [ "$(grep -c '^rows 4 width 4 k ' "$dir/peel.out")" -eq 2 ] && [ "$(wc -l <"$dir/peel.csv")" -eq 3 ]; then
  echo "ok: peel_capacity runs and writes its CSV"
else
  echo "FAIL: peel_capacity's tiny run:"; cat "$dir/peel.out"; failures=$((failures + 1))
fi

if [ "$failures" -ne 0 ]; then echo "$failures failure(s)"; exit 1; fi
echo "all refusals as expected"
