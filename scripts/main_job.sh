#!/usr/bin/env bash
# The README's main-job command: installs what is missing, builds, and runs the
# most end-to-end job SketchFuse has today: the compression report on the
# ResNet-50 profile (every compressor, fused by the optimal planner).
# Extra arguments go to the report (see --help), e.g. --model=gpt2_small.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash scripts/setup.sh
bash scripts/bazel.sh build //tools:sketchfuse_compression_report 2>&1 \
  | grep -v -E 'linux-sandbox(-pid1)?\.cc'
mkdir -p out
exec bazel-bin/tools/sketchfuse_compression_report \
  --csv=out/compression_report.csv --json=out/compression_report.json "$@"
