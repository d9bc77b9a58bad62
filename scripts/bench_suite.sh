#!/usr/bin/env bash
# The throughput benchmarks, one command: where each scheme wins, measured and
# projected. Writes CSV, JSON and PNG plots under --out (default out/bench):
#   compression/   every compressor on each model profile, this CPU
#                  (tools/compression_report: time, GB/s, ratio, L2 mass
#                  recovered against exact top-k)
#   transport.*    gRPC push and reply of 1-64 MiB on 1, 2 and 4 channels
#                  against raw TCP in the same run (bench/server_bench)
#   shaped/        every scheme end to end on links shaped to 1 Gb/s in network
#                  namespaces, W = 2, 4, 8 workers, S = 1, 2 shards, and the
#                  fusion planners compared (bench/shaped_cluster.py)
#   scale/         the alpha-beta model validated against those runs, and
#                  projected to 16-256 GPU workers at 10, 25, 100 Gb/s
#                  (bench/scale_projection.py, GPU costs from bench/results/gpu_*)
#   summary.md     the suite's tables, with the targets checked (a run kept as
#                  a study goes to bench/results/throughput_suite/)
#
#   scripts/bench_suite.sh [--quick] [--out DIR] [--no_build] [--only PARTS]
#
# --quick: small sizes and few runs, to check that the harness works end to end
# (CI); its figures mean nothing. --only: comma-separated parts among
# compression, transport, shaped, scale (default all). --no_build: use the
# binaries under $SKETCHFUSE_BIN_DIR (default bazel-bin). The shaped runs need
# root (network namespaces); without it they are skipped, saying why, and the
# projection uses the figures in --shaped_from DIR if given.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
quick=0 out="$root/out/bench" build=1 only="compression,transport,shaped,scale" shaped_from=""
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=1 ;;
    --out=*) out="${1#*=}" ;;
    --out) out="$2"; shift ;;
    --no_build) build=0 ;;
    --only=*) only="${1#*=}" ;;
    --shaped_from=*) shaped_from="${1#*=}" ;;
    -h|--help) sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench_suite: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
for part in ${only//,/ }; do
  case "$part" in
    compression|transport|shaped|scale) ;;
    *) echo "bench_suite: unknown part '$part' in --only (compression, transport, shaped, scale)" >&2; exit 2 ;;
  esac
done
wants() { [[ ",$only," == *",$1,"* ]]; }
bin="${SKETCHFUSE_BIN_DIR:-$root/bazel-bin}"
if [ "$build" -eq 1 ]; then
  bash scripts/bazel.sh build //server:sketchfuse_server //worker:sketchfuse_worker \
    //tools:sketchfuse_compression_report //bench:server_bench 2>&1 | grep -v -E 'linux-sandbox(-pid1)?\.cc' | tail -n 2
fi
mkdir -p "$out"
echo "bench_suite: $( [ $quick -eq 1 ] && echo quick || echo full ) run, $(nproc) cores," \
     "$(lscpu | sed -n 's/^Model name: *//p'), $(date -u +%Y-%m-%d), commit $(git rev-parse --short HEAD 2>/dev/null || echo none)" \
  | tee "$out/machine.txt"

if wants compression; then
  echo "== compression: every compressor on each profile, this CPU, one thread"
  mkdir -p "$out/compression"
  profiles="resnet50 vgg16 bert_base gpt2_small"
  [ "$quick" -eq 1 ] && profiles="resnet50"
  for p in $profiles; do
    args=(--model="$p" --csv="$out/compression/$p.csv" --json="$out/compression/$p.json")
    [ "$quick" -eq 1 ] && args+=(--compressors="dense;topk;count_sketch")
    "$bin/tools/sketchfuse_compression_report" "${args[@]}" | tail -n 9
  done
fi

if wants transport; then
  echo "== transport: gRPC push and reply against raw TCP, loopback"
  bench_args=(--benchmark_filter='BM_GrpcPushReply|BM_GrpcEcho|BM_RawTcpRoundTrip' --benchmark_out="$out/transport_raw.json"
              --benchmark_out_format=json)
  if [ "$quick" -eq 1 ]; then
    bench_args=(--benchmark_filter='BM_GrpcPushReply/MiB:1/|BM_GrpcEcho|BM_RawTcpRoundTrip/MiB:1/' --benchmark_min_time=0.01
                --benchmark_out="$out/transport_raw.json" --benchmark_out_format=json)
  fi
  "$bin/bench/server_bench" "${bench_args[@]}" >"$out/transport_bench.txt"
  python3 bench/transport_table.py "$out/transport_raw.json" "$out/transport"
fi

shaped_dir="$out/shaped"
if wants shaped; then
  echo "== shaped links: every scheme end to end in network namespaces"
  args=(--out "$shaped_dir" --server "$bin/server/sketchfuse_server" --worker "$bin/worker/sketchfuse_worker")
  [ "$quick" -eq 1 ] && args+=(--quick)
  status=0
  python3 bench/shaped_cluster.py "${args[@]}" || status=$?
  if [ "$status" -eq 3 ]; then
    echo "bench_suite: shaped-link runs skipped (above: why)"
    shaped_dir="$shaped_from"
  elif [ "$status" -ne 0 ]; then
    exit "$status"
  fi
fi
[ -n "$shaped_from" ] && ! wants shaped && shaped_dir="$shaped_from"

if wants scale; then
  echo "== scale: the alpha-beta model, validated and projected"
  if [ -n "$shaped_dir" ] && [ -f "$shaped_dir/runs.json" ]; then
    python3 bench/scale_projection.py --shaped "$shaped_dir" --gpu bench/results --out "$out/scale"
  else
    echo "bench_suite: no shaped-link runs to validate against (run the shaped part as root, or --shaped_from DIR)"
  fi
fi

python3 bench/suite_summary.py "$out" | tee "$out/summary.md"
