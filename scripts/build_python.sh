#!/usr/bin/env bash
# Builds the Python package's native core (worker/hook's libsketchfuse_c.so,
# the C ABI of sketchfuse_c.h) and puts it in python/sketchfuse/_native/.
# Afterwards: PYTHONPATH=python python3 -c "import sketchfuse.torch"
# (Debian's python3-torch; scripts/setup.sh installs it).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash scripts/setup.sh
bash scripts/bazel.sh build //worker/hook:libsketchfuse_c.so 2>&1 | grep -v -E 'linux-sandbox(-pid1)?\.cc'
mkdir -p python/sketchfuse/_native
install -m 0755 bazel-bin/worker/hook/libsketchfuse_c.so python/sketchfuse/_native/libsketchfuse_c.so
echo "build_python: python/sketchfuse/_native/libsketchfuse_c.so; use PYTHONPATH=$root/python"
