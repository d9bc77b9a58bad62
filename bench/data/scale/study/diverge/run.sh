#!/usr/bin/env bash
# What makes fixed_sketch_allreduce diverge at 64 workers, 10x, learning rate 0.2: the scale study's
# ../runs/mlp_W64_fixed_sketch_allreduce_10x.out rerun with one knob changed.
#   bash run.sh NAME [worker flags]      -> NAME.out here
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
name="$1"; shift
bash "$here/../../rerun_with.sh" "$here/../runs/mlp_W64_fixed_sketch_allreduce_10x.out" "$here/$name.out" "$@"
