#!/bin/bash
# The release cap of the two-round fixed sketch: effective cap = --release_cap * max(1, W/4) (scaled) 
cd /work/main
R=bench/data/scale/rc.sh
bash $R capcnn16_s1_c0125 cnn fixed_sketch_allreduce 1 16 --release_cap=0.125
bash $R capcnn8_s1 cnn fixed_sketch_allreduce 1 8
bash $R capcnn8_s1_c05 cnn fixed_sketch_allreduce 1 8 --release_cap=0.5
bash $R capcnn4_s1 cnn fixed_sketch_allreduce 1 4
bash $R capmlp16_s1 mlp fixed_sketch_allreduce 1 16
bash $R capmlp16_s1_c025 mlp fixed_sketch_allreduce 1 16 --release_cap=0.25
bash $R capmlp4_s1 mlp fixed_sketch_allreduce 1 4
