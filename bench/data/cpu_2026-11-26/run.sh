#!/usr/bin/env bash
# The CPU benchmarks "Not currently recorded" in docs/BENCHMARKS.md, one after
# another (2-core VM). From the repository root:
#   bash bench/data/cpu_2026-11-26/run.sh
set -euo pipefail
here=bench/data/cpu_2026-11-26
bash scripts/bazel.sh build //bench:server_bench //bench:planner_bench //bench:compression_bench 2>&1 | tail -n 1
# The shard's merge of 4 and 16 sketch payloads against memcpy of the same tables.
bazel-bin/bench/server_bench --benchmark_filter='ServerSum|Memcpy' --benchmark_min_time=1 \
  --benchmark_out="$here/server_sum.json" --benchmark_out_format=json >"$here/server_sum.txt" 2>&1
# The fusion planners' time per plan.
bazel-bin/bench/planner_bench --benchmark_out="$here/planner.json" --benchmark_out_format=json \
  >"$here/planner.txt" 2>&1
# The CPU compression core against PyTorch (one thread each).
bash bench/cpu_vs_torch.sh >"$here/cpu_vs_torch.txt" 2>&1
cp out/bench/cpu_vs_torch.csv out/bench/cpu_vs_torch.json "$here/" 2>/dev/null || true
cp out/bench/cpu_vs_torch.png "$here/" 2>/dev/null || true
