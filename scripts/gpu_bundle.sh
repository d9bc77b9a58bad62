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
#   bash scripts/gpu_bundle.sh build-hook   here: the PyTorch hook's native library with the
#                                           shared libraries it needs, and Fashion-MNIST, into
#                                           .gpu_bundle/hook/ (about 50 MB; carry it alone)
#   bash scripts/gpu_bundle.sh run-hook [--out DIR] [--device cuda|cpu] [--ranks N]
#            [--model resnet18|resnet50] [--batch_size N]
#            [--train_examples N] [--epochs N] [--learning_rate X] [--deterministic]
#            [--schemes S,S,...]
#                                           on the GPU machine: examples/pytorch_ddp.py
#                                           trains torchvision's ResNet-18 (or -50) with DDP's own
#                                           allreduce and with the hook's schemes, N ranks
#                                           (default 2) sharing the GPU over Gloo; writes each
#                                           run's log and summary and MODEL.csv to DIR
#                                           (default out/gpu_hook) and prints the table;
#                                           a scheme S@cuda runs S with --hook_device=cuda
#                                           (the sketch and its decode on the GPU)
#                                           ($PYTHON, default python3: the one with PyTorch)
#
# NCCL is not carried (218 MB): `run` takes libnccl.so.2 from the machine's
# PyTorch environment (the nvidia-nccl wheel), or from /usr/local/cuda/lib64.
# Each bundled program runs with LD_LIBRARY_PATH set for it alone, so that the
# bundle's libraries never reach the machine's Python; run-hook's Python loads
# the hook's library, so its bundle leaves out the C and C++ runtimes, zlib and OpenSSL
# (the machine's newer ones serve both).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bundle=.gpu_bundle
gpu_tests=(//cuda:device_test //cuda:count_sketch_kernels_test //cuda:topk_kernels_test //cuda:peel_kernels_test
           //cuda:vector_kernels_test //cuda:nccl_communicator_test //worker/collective:nccl_collective_test
           //worker/gpu:device_group_state_test //worker/gpu:device_synthetic_run_test)

usage() { sed -n '2,34p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; exit 2; }

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
  chmod u+w "$bundle"/bin/*
  # Debug information is a third of each program and the device call carries 64 MiB in all.
  strip --strip-debug "$bundle"/bin/*
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
    echo "== gpu_worker_bench: the same with the sketch schemes' default (peel), on the four profiles"
    LD_LIBRARY_PATH="$libs" "$bundle/bin/gpu_worker_bench" --workloads=resnet50,vgg16,bert_base,gpt2_small \
      --compressor=count_sketch:method=peel,density=0.0042,rows=4,width=4 --csv "$out/gpu_worker_peel.csv" \
      --json "$out/gpu_worker_peel.json" | tee "$out/gpu_worker_peel.txt"
    python3 "$bundle/bench/plot_gpu_worker.py" "$out/gpu_worker_peel.json" "$out/gpu_worker_peel.png" || true
    echo "== gpu_worker_bench: the fixed-size sketch (fixed_sketch_allreduce's default: its table, then the exact"
    echo "   values at its candidates gathered on the GPU), on the four profiles"
    LD_LIBRARY_PATH="$libs" "$bundle/bin/gpu_worker_bench" --workloads=resnet50,vgg16,bert_base,gpt2_small \
      --scheme=fixed_sketch_allreduce \
      --compressor=count_sketch:method=candidates,density=0.0333,rows=1,width=1,candidates=2,table=bf16 \
      --csv "$out/gpu_worker_fixed_sketch.csv" --json "$out/gpu_worker_fixed_sketch.json" \
      | tee "$out/gpu_worker_fixed_sketch.txt"
    python3 "$bundle/bench/plot_gpu_worker.py" "$out/gpu_worker_fixed_sketch.json" \
      "$out/gpu_worker_fixed_sketch.png" || true
  fi
  return "$failed"
}

build_hook() {
  bash scripts/bazel.sh build //worker/hook:libsketchfuse_c.so //server:sketchfuse_server 2>&1 \
    | grep -v -E 'linux-sandbox(-pid1)?\.cc'
  local dir="$bundle/hook"
  rm -rf "$dir"
  mkdir -p "$dir/lib" "$dir/bin" "$dir/data"
  cp bazel-bin/worker/hook/libsketchfuse_c.so "$dir/lib/"
  # The centralized schemes' shard, which examples/pytorch_ddp.py --start_servers starts.
  cp bazel-bin/server/sketchfuse_server "$dir/bin/"
  chmod u+w "$dir/lib/libsketchfuse_c.so" "$dir/bin/sketchfuse_server"
  strip --strip-debug "$dir/lib/libsketchfuse_c.so" "$dir/bin/sketchfuse_server"
  # Its libraries, but not those the machine's Python process already holds in
  # newer versions (the C and C++ runtimes, zlib, OpenSSL 3): LD_LIBRARY_PATH covers the
  # whole process there, PyTorch included.
  ldd "$dir/lib/libsketchfuse_c.so" "$dir/bin/sketchfuse_server" | awk '/=> \// {print $3}' | sort -u | while read -r lib; do
    case "$(basename "$lib")" in
      libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|ld-linux*|libstdc++.so*|libgcc_s.so*|libz.so*|libssl.so*|libcrypto.so*) ;;
      *) cp -L "$lib" "$dir/lib/" ;;
    esac
  done
  cp /usr/share/datasets/fashion-mnist/*-ubyte.gz "$dir/data/"
  chmod -R u+w "$dir"
  echo "hook bundle: $(du -sh "$dir" | cut -f1) in $dir ($(ls "$dir/lib" | wc -l) libraries, Fashion-MNIST)"
}

run_hook() {
  local out=out/gpu_hook device=cuda ranks=2 examples=24000 epochs=2 model=resnet18 batch=32 lr=0.05
  local extra=()
  local schemes=ddp,dense_allreduce,sketch_allreduce,sketch_allreduce@cuda,topk_allgather,sketch_ps
  while [ $# -gt 0 ]; do
    case "$1" in
      --out) out="$2"; shift 2 ;;
      --device) device="$2"; shift 2 ;;
      --ranks) ranks="$2"; shift 2 ;;
      --model) model="$2"; shift 2 ;;
      --batch_size) batch="$2"; shift 2 ;;
      --train_examples) examples="$2"; shift 2 ;;
      --epochs) epochs="$2"; shift 2 ;;
      --learning_rate) lr="$2"; shift 2 ;;
      --deterministic) extra+=(--deterministic); shift ;;
      --schemes) schemes="$2"; shift 2 ;;
      *) echo "gpu_bundle.sh run-hook: unknown option '$1'" >&2; usage ;;
    esac
  done
  local dir="$bundle/hook"
  if [ ! -e "$dir/lib/libsketchfuse_c.so" ]; then
    echo "gpu_bundle.sh run-hook: no $dir/ here; run 'bash scripts/gpu_bundle.sh build-hook' first" >&2
    exit 1
  fi
  mkdir -p "$out"
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv \
    2>&1 | tee "$out/gpu.txt" || true
  local scheme failed=0 hook_device servers
  for scheme in ${schemes//,/ }; do
    echo "== $model $scheme"
    hook_device=cpu
    if [[ "$scheme" == *@cuda ]]; then hook_device=cuda; fi
    servers=()
    case "${scheme%@cuda}" in
      # The centralized and hybrid schemes push to a shard the example starts on loopback.
      sketch_ps|topk_ps|dense_ps|auto|fixed_sketch_ps|fixed_sketch_auto)
        servers=(--start_servers=1 --server_binary="$root/$dir/bin/sketchfuse_server") ;;
    esac
    if ! PYTHONUNBUFFERED=1 LD_LIBRARY_PATH="$root/$dir/lib" SKETCHFUSE_LIB="$root/$dir/lib/libsketchfuse_c.so" \
         "${PYTHON:-python3}" examples/pytorch_ddp.py --nproc_per_node="$ranks" --model="$model" --device="$device" \
         --scheme="${scheme%@cuda}" --hook_device="$hook_device" --train_examples="$examples" --epochs="$epochs" \
         --batch_size="$batch" --learning_rate="$lr" --seed=1 --data_dir="$dir/data" "${servers[@]}" "${extra[@]}" \
         --json="$out/${model}_${scheme}_{rank}.json" >"$out/${model}_${scheme}.log" 2>&1; then
      failed=1
      echo "   FAILED; the end of its log:"
      tail -n 20 "$out/${model}_${scheme}.log"
    fi
    tail -n 1 "$out/${model}_${scheme}.log"
  done
  python3 - "$out" "$model" ${schemes//,/ } <<'PY'
import json, os, sys
out, model, schemes = sys.argv[1], sys.argv[2], sys.argv[3:]
rows = []
for scheme in schemes:
    path = os.path.join(out, f"{model}_{scheme}_0.json")
    if os.path.exists(path):
        rows.append(json.load(open(path)))
keys = ["model", "scheme", "device", "hook_device", "world_size", "batch_size", "steps", "test_accuracy", "step_time_s", "backward_s_per_step",
        "hook_compress_decode_s_per_step", "hook_share_of_backward", "compression_ratio"]
with open(os.path.join(out, f"{model}.csv"), "w") as f:
    f.write(",".join(keys) + "\n")
    for r in rows:
        f.write(",".join("" if r.get(k) is None else str(r[k]) for k in keys) + "\n")
print(f"{'scheme':22s} {'accuracy':>9s} {'ms/step':>8s} {'backward ms':>12s} {'hook ms':>8s} {'hook/backward':>14s} {'ratio':>6s}")
for r in rows:
    hook = r["hook_compress_decode_s_per_step"]
    share = r["hook_share_of_backward"]
    ratio = r["compression_ratio"]
    hook_text = "-" if hook is None else f"{1e3 * hook:.1f}"
    share_text = "-" if share is None else f"{100 * share:.1f}%"
    ratio_text = "-" if not ratio else f"{ratio:.1f}x"
    label = r["scheme"] + ("@cuda" if r.get("hook_device") == "cuda" else "")
    print(f"{label:22s} {r['test_accuracy']:8.2f}% {1e3 * r['step_time_s']:8.1f} "
          f"{1e3 * r['backward_s_per_step']:12.1f} {hook_text:>8s} {share_text:>14s} {ratio_text:>6s}")
print(f"wrote {os.path.join(out, model + '.csv')}")
PY
  return "$failed"
}

case "${1:-}" in
  build) shift; [ $# -eq 0 ] || usage; build ;;
  run) shift; run "$@" ;;
  build-hook) shift; [ $# -eq 0 ] || usage; build_hook ;;
  run-hook) shift; run_hook "$@" ;;
  *) usage ;;
esac
