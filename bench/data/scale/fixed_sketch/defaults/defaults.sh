#!/bin/bash
# The fixed sketch at its default cap (2 x --release_cap x max(1, W/4)), this session's final code.
cd /work/main
R=bench/data/scale/rc.sh
bash $R def_mlp8_s1 mlp fixed_sketch_allreduce 1 8
bash $R def_mlp16_s1 mlp fixed_sketch_allreduce 1 16
bash $R def_cnn8_s2 cnn fixed_sketch_allreduce 2 8
bash $R def_ps_mlp16_s1 mlp fixed_sketch_ps 1 16
