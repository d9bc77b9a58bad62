#!/usr/bin/env bash
# Runs Debian's Bazel with this project's per-user settings: a disk cache under
# the user's cache directory (kept across fresh clones, so CI rebuilds are
# short). Usage: scripts/bazel.sh <bazel arguments>
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/sketchfuse/bazel-disk-cache"
mkdir -p "$cache"
echo "build --disk_cache=$cache" > "$root/user.bazelrc"
cd "$root"
exec bazel "$@"
