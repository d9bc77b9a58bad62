#!/usr/bin/env bash
# What moves fixed_sketch_ps's gap on the largest model at 64 workers and 10x: the scale study's
# ../runs/mlp_large_W64_fixed_sketch_ps_10x.out rerun with one knob changed.
#   bash run.sh NAME [worker flags]      -> NAME.out here
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
name="$1"; shift
bash "$here/../../rerun_with.sh" "$here/../runs/mlp_large_W64_fixed_sketch_ps_10x.out" "$here/$name.out" "$@"
