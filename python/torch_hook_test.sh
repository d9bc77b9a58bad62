#!/usr/bin/env bash
# //python:torch_hook_test: python/tests/test_torch_hook.py with Debian's
# PyTorch (/usr/bin/python3), against the library and reference Bazel built.
set -euo pipefail
export SKETCHFUSE_LIB="$PWD/$SKETCHFUSE_LIB"
export SKETCHFUSE_HOOK_REFERENCE="$PWD/$SKETCHFUSE_HOOK_REFERENCE"
export SKETCHFUSE_SERVER="$PWD/$SKETCHFUSE_SERVER"
exec /usr/bin/python3 python/tests/test_torch_hook.py -v
