#!/usr/bin/env bash
# //bench:adam_sim_test: bench/adam_sim_test.py with Debian's PyTorch
# (/usr/bin/python3), which Bazel's own Python interpreter may lack.
set -euo pipefail
exec /usr/bin/python3 bench/adam_sim_test.py -v
