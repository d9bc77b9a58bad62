#!/usr/bin/env bash
# What moves fixed_sketch_ps's gap on the largest model at 10x: a scale-study run rerun with one
# knob changed. FROM names the run in ../runs/ (default mlp_large_W64_fixed_sketch_ps_10x, the
# 64-worker run; FROM=mlp_large_W256_fixed_sketch_ps_10x for 256 workers).
#   [FROM=RUN] bash run.sh NAME [worker flags]      -> NAME.out here
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
name="$1"; shift
from="${FROM:-mlp_large_W64_fixed_sketch_ps_10x}"
bash "$here/../../rerun_with.sh" "$here/../runs/$from.out" "$here/$name.out" "$@"
