#!/usr/bin/env bash
# Installs every Debian 12 package SketchFuse needs, and only those missing.
# Idempotent: a second run installs nothing. Runs apt-get as root, or through
# sudo when not root. Says what it installs.
#
#   scripts/setup.sh            build and test dependencies
#   scripts/setup.sh --bench    the same (Debian's PyTorch and the reference
#                               BLAS, the benchmarks' references, are build packages)
#   scripts/setup.sh --fuzz     also clang and its libFuzzer runtime
#                               (bazel build --config=fuzz)
set -euo pipefail

# Build: Bazel (offline, with the rule sets its source package ships), the
# compiler, and the system libraries of third_party/BUILD (libssl-dev: the
# HMAC of the workers' proofs); openssl makes the TLS tests' certificates; LibTorch and Fashion-MNIST are the workers' model
# library and data; python3 formats the local cluster's report and gnuplot
# draws its plot; iproute2 (ip, tc) makes the network namespaces of the
# partition test and the shaped-link benchmarks; python3-torch is what the
# PyTorch front end (python/sketchfuse) is built for and tested with, and
# python3-torchvision gives the example and the tests ResNet-18. fortunes is
# the char_lm workload's text corpus (worker/training/text_corpus.h).
# libopenblas0-openmp takes over the libblas.so.3 alternative that LibTorch
# links: without it that is the reference BLAS, and an MLP's training step
# runs 6 to 9 times slower (docs/BENCHMARKS.md, "The CPU compression core and the BLAS");
# its OpenMP build follows LibTorch's thread count (--threads). libblas3, the
# reference BLAS, stays for //tests:torch_hook_accuracy_test and
# bench/blas_compare.py, which run on it by LD_LIBRARY_PATH.
BUILD_PACKAGES=(
  bazel-bootstrap bazel-bootstrap-source g++ git
  libabsl-dev libprotobuf-dev protobuf-compiler libgrpc++-dev protobuf-compiler-grpc grpc-proto
  libgtest-dev libgmock-dev googletest libbenchmark-dev
  libgloo-dev prometheus-cpp-dev zlib1g-dev
  openssl libssl-dev
  libtorch-dev dataset-fashion-mnist fortunes python3 gnuplot-nox iproute2
  python3-torch python3-torchvision libopenblas0-openmp libblas3
)
# Benchmarks: nothing beyond the build's (kept for the command line; PyTorch,
# the benchmarks' reference, and the reference BLAS are in the build's list).
BENCH_PACKAGES=()
# Coverage-guided fuzzing: clang with its sanitizer and libFuzzer runtimes.
FUZZ_PACKAGES=(clang libclang-rt-14-dev)

want=("${BUILD_PACKAGES[@]}")
for arg in "$@"; do
  case "$arg" in
    --bench) want+=("${BENCH_PACKAGES[@]}") ;;
    --fuzz) want+=("${FUZZ_PACKAGES[@]}") ;;
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    *) echo "setup.sh: unknown option '$arg' (accepted: --bench, --fuzz)" >&2; exit 2 ;;
  esac
done

missing=()
for pkg in "${want[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#want[@]} required Debian packages are installed."
  exit 0
fi

if [ "$(id -u)" -eq 0 ]; then
  SUDO=()
elif command -v sudo >/dev/null 2>&1; then
  SUDO=(sudo)
else
  echo "setup: missing packages (${missing[*]}) and neither root nor sudo is available." >&2
  exit 1
fi

echo "setup: installing ${#missing[@]} Debian package(s): ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${SUDO[@]}" apt-get update -qq
"${SUDO[@]}" apt-get install -y -q "${missing[@]}"
echo "setup: done."
