#!/usr/bin/env bash
# The README's main-job command: installs what is missing, builds the server
# and worker daemons, and runs a local cluster on loopback that trains the
# Fashion-MNIST MLP with dense_allreduce, with centralized Count-Sketch
# aggregation (sketch_ps) and with decentralized Count-Sketch aggregation
# (sketch_allreduce), then compares them (table, CSV, JSON, plot and
# timelines under out/cluster/). Arguments go to scripts/local_cluster.sh
# (see --help), e.g. --workers=2 --epochs=1.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash scripts/setup.sh
bash scripts/bazel.sh build //server:sketchfuse_server //worker:sketchfuse_worker 2>&1 \
  | grep -v -E 'linux-sandbox(-pid1)?\.cc'
exec bash scripts/local_cluster.sh --link=auto "$@"
