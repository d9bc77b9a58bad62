#!/usr/bin/env bash
# SketchFuse's CPU compression core side by side with the same work in PyTorch
# (one thread each, in one run): Count-Sketch insert, estimate + heavy-hitter
# top-k, exact top-k, sketch merge, and memcpy as the bandwidth yardstick.
# Writes out/bench/cpu_vs_torch.{csv,json,png} and prints a table with the
# targets of the compression-core issue. PyTorch runs twice: as it comes, and
# with glibc's allocator keeping freed memory mapped, as SketchFuse's side is.
#   bash bench/cpu_vs_torch.sh           ResNet-50 size (25.6M floats, 5 x 500,000 sketch)
#   bash bench/cpu_vs_torch.sh --quick   1M floats, 5 x 20,000 (checks the harness)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
quick=0
for arg in "$@"; do
  case "$arg" in
    --quick) quick=1 ;;
    *) echo "cpu_vs_torch.sh: unknown option '$arg' (accepted: --quick)" >&2; exit 2 ;;
  esac
done
bash scripts/setup.sh --bench
bash scripts/bazel.sh build //bench:compression_bench 2>&1 | grep -v -E 'linux-sandbox(-pid1)?\.cc'

out=out/bench
mkdir -p "$out"
if [ "$quick" -eq 1 ]; then
  size_flags=(--sf_dim=1000000 --sf_cols=20000); torch_flags=(--quick); min_time=0.1
else
  size_flags=(); torch_flags=(--reps 3); min_time=1
fi
echo "== SketchFuse (C++, one thread) =="
bazel-bin/bench/compression_bench "${size_flags[@]}" --benchmark_min_time="$min_time" \
  --benchmark_out="$out/sketchfuse.json" --benchmark_out_format=json
echo "== PyTorch $(/usr/bin/python3.11 -c 'import torch; print(torch.__version__)') (one thread) =="
/usr/bin/python3.11 bench/torch_reference.py "${torch_flags[@]}" --json "$out/torch.json"
# PyTorch again with glibc's allocator set as SketchFuse's daemons and
# compression_bench set theirs (daemon/memory_tuning.cc): freed memory stays
# mapped, so its temporaries of 100 MB are not faulted in afresh each call.
echo "== PyTorch, freed memory kept mapped (GLIBC_TUNABLES) =="
GLIBC_TUNABLES=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=1073741824:glibc.malloc.top_pad=67108864:glibc.malloc.arena_max=1 \
  /usr/bin/python3.11 bench/torch_reference.py "${torch_flags[@]}" --json "$out/torch_mapped.json"
/usr/bin/python3.11 bench/compare_cpu_vs_torch.py "$out/sketchfuse.json" "$out/torch.json" "$out/cpu_vs_torch" \
  "$out/torch_mapped.json"
