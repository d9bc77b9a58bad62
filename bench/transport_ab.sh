#!/bin/bash
# Two builds of bench/server_bench side by side: 16 MiB push and reply on one
# channel (gRPC's defaults and the daemons' settings) and raw TCP, alternating
# BEFORE and AFTER three times so both see the same machine noise.
# Usage: bash bench/transport_ab.sh BEFORE_BINARY AFTER_BINARY
# (build the other commit in a clone of its own: git clone . /tmp/old &&
#  cd /tmp/old && git checkout REV && bash scripts/bazel.sh build //bench:server_bench)
set -euo pipefail
if [ $# -ne 2 ] || [ ! -x "$1" ] || [ ! -x "$2" ]; then
  echo "usage: $0 BEFORE_BINARY AFTER_BINARY (two executable server_bench builds)" >&2
  exit 2
fi
filter='GrpcPushReply/MiB:16/channels:1/tuned:(0|1)|RawTcpRoundTrip/MiB:16/connections:1'
echo "run build benchmark time unit"
for run in 1 2 3; do
  for build in before after; do
    bin=$1
    [ "$build" = after ] && bin=$2
    "$bin" --benchmark_filter="$filter" --benchmark_min_time=1 2>/dev/null |
      awk -v b="$build" -v r="$run" '/^BM_/ {print r, b, $1, $2, $3}'
  done
done
