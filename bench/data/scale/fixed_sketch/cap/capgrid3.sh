#!/bin/bash
cd /work/main
R=bench/data/scale/rc.sh
bash $R capcnn8_s1_c2 cnn fixed_sketch_allreduce 1 8 --release_cap=2
bash $R capcnn16_s1_c2 cnn fixed_sketch_allreduce 1 16 --release_cap=2
bash $R capmlp4_s1_c2 mlp fixed_sketch_allreduce 1 4 --release_cap=2
bash $R capcnn4_s2_c2 cnn fixed_sketch_allreduce 2 4 --release_cap=2
