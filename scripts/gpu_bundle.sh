#!/usr/bin/env bash
# GPU tests and benchmarks for a GPU machine that has no Bazel and no gRPC.
#
#   bash scripts/gpu_bundle.sh build        here (with the CUDA toolkit, no GPU needed):
#                                           builds the GPU tests and the GPU benchmark and
#                                           collects them, the shared libraries they need
#                                           (from ldd) and the benchmark's Python side into
#                                           .gpu_bundle/ (git-ignored)
#   bash scripts/gpu_bundle.sh run [--out DIR] [--tests-only|--bench-only]
#                                           on the GPU machine, from the repository root
#                                           with .gpu_bundle/ beside it: runs every GPU test,
#                                           then the benchmark and the same work in PyTorch,
#                                           and writes logs, JUnit XML and the comparison to
#                                           DIR (default out/gpu)
#
# NCCL is not carried (218 MB): `run` takes libnccl.so.2 from the machine's
# PyTorch environment (the nvidia-nccl wheel), or from /usr/local/cuda/lib64.
# Each bundled program runs with LD_LIBRARY_PATH set for it alone, so that the
# bundle's libraries never reach the machine's Python.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bundle=.gpu_bundle
gpu_tests=(//cuda:device_test //cuda:count_sketch_kernels_test //cuda:topk_kernels_test
           //cuda:vector_kernels_test //cuda:nccl_communicator_test //worker/collective:nccl_collective_test
           //worker/gpu:device_group_state_test //worker/gpu:device_synthetic_run_test)

usage() { sed -n '2,20p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; exit 2; }

build() {
  if [ ! -x "${CUDA_PATH:-/usr/local/cuda}/bin/nvcc" ]; then
    echo "gpu_bundle.sh build: no CUDA toolkit (nvcc) at ${CUDA_PATH:-/usr/local/cuda}" >&2
    exit 1
  fi
  local targets=(//bench:gpu_compression_bench //bench:gpu_worker_bench)
  targets+=("${gpu_tests[@]}")
  bash scripts/bazel.sh build "${targets[@]}" 2>&1 | grep -v -E 'linux-sandbox(-pid1)?\.cc'
  rm -rf "$bundle"
  mkdir -p "$bundle/bin" "$bundle/lib" "$bundle/bench"
  for t in "${gpu_tests[@]}"; do
    local path="${t#//}"
    cp "bazel-bin/${path%%:*}/${path##*:}" "$bundle/bin/"
  done
  cp bazel-bin/bench/gpu_compression_bench bazel-bin/bench/gpu_worker_bench "$bundle/bin/"
  cp bench/gpu_torch_reference.py bench/compare_gpu_vs_torch.py bench/plot_gpu_worker.py "$bundle/bench/"
  # Every shared library the programs load, except the C library's own parts
  # (the GPU machine has a newer glibc) and NCCL (found there at run time).
  ldd "$bundle"/bin/* | awk '/=> \// {print $3}' | sort -u | while read -r lib; do
    case "$(basename "$lib")" in
      libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|ld-linux*|libnccl.so*) ;;
      *) cp -L "$lib" "$bundle/lib/" ;;
    esac
  done
  chmod -R u+w "$bundle"
  echo "bundle: $(du -sh "$bundle" | cut -f1) in $bundle ($(ls "$bundle/bin" | wc -l) programs," \
       "$(ls "$bundle/lib" | wc -l) libraries)"
}

nccl_dir() {
  local dir
  dir="$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' \
         2>/dev/null || true)"
  if [ -n "$dir" ] && [ -e "$dir/libnccl.so.2" ]; then echo "$dir"; return; fi
  for dir in /usr/local/cuda/lib64 /usr/lib/x86_64-linux-gnu; do
    if [ -e "$dir/libnccl.so.2" ]; then echo "$dir"; return; fi
  done
  echo ""
}

run() {
  local out=out/gpu mode=all
  while [ $# -gt 0 ]; do
    case "$1" in
      --out) out="$2"; shift 2 ;;
      --tests-only) mode=tests; shift ;;
      --bench-only) mode=bench; shift ;;
      *) echo "gpu_bundle.sh run: unknown option '$1'" >&2; usage ;;
    esac
  done
  if [ ! -d "$bundle/bin" ]; then
    echo "gpu_bundle.sh run: no $bundle/ here; run 'bash scripts/gpu_bundle.sh build' first" >&2
    exit 1
  fi
  mkdir -p "$out"
  local nccl libs
  nccl="$(nccl_dir)"
  [ -n "$nccl" ] || echo "warning: no libnccl.so.2 found; the NCCL test cannot load" >&2
  libs="$root/$bundle/lib${nccl:+:$nccl}"
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv \
    2>&1 | tee "$out/gpu.txt" || true
  local failed=0
  if [ "$mode" != bench ]; then
    for label in "${gpu_tests[@]}"; do
      local t="${label##*:}"
      echo "== $t"
      if LD_LIBRARY_PATH="$libs" "$bundle/bin/$t" --gtest_brief=1 \
           --gtest_output="xml:$out/$t.xml" >"$out/$t.log" 2>&1; then
        echo "   passed: $(grep -o '[0-9]* tests\? from [0-9]* test suites\? ran' "$out/$t.log" | tail -1)" \
             "$(grep -o 'SKIPPED \] [0-9]* tests\?' "$out/$t.log" | sed 's/SKIPPED \] \(.*\)/(\1 skipped: no GPU here)/')"
      else
        failed=1
        echo "   FAILED; the end of its log:"
        tail -n 30 "$out/$t.log"
      fi
    done
  fi
  if [ "$mode" != tests ]; then
    echo "== gpu_compression_bench"
    LD_LIBRARY_PATH="$libs" "$bundle/bin/gpu_compression_bench" --json "$out/sketchfuse_gpu.json" \
      | tee "$out/sketchfuse_gpu.txt"
    echo "== the same work in PyTorch"
    PYTHONUNBUFFERED=1 python3 "$bundle/bench/gpu_torch_reference.py" "$out/sketchfuse_gpu.json" \
      --json "$out/torch_gpu.json" | tee "$out/torch_gpu.txt"
    python3 "$bundle/bench/compare_gpu_vs_torch.py" "$out/sketchfuse_gpu.json" \
      "$out/torch_gpu.json" "$out/gpu_vs_torch" | tee "$out/gpu_vs_torch.txt"
    echo "== gpu_worker_bench: a worker's step with its groups on the GPU and on the host"
    LD_LIBRARY_PATH="$libs" "$bundle/bin/gpu_worker_bench" --csv "$out/gpu_worker.csv" \
      --json "$out/gpu_worker.json" | tee "$out/gpu_worker.txt"
    python3 "$bundle/bench/plot_gpu_worker.py" "$out/gpu_worker.json" "$out/gpu_worker.png" || true
  fi
  return "$failed"
}

case "${1:-}" in
  build) shift; [ $# -eq 0 ] || usage; build ;;
  run) shift; run "$@" ;;
  *) usage ;;
esac
