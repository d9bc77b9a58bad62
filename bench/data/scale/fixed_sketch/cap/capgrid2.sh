#!/bin/bash
cd /work/main
R=bench/data/scale/rc.sh
while pgrep -f capgrid.sh >/dev/null; do sleep 5; done
bash $R capcnn16_e4_s1 cnn fixed_sketch_allreduce 1 16 --epochs=4
bash $R capcnn16_e4_s1_nocap cnn fixed_sketch_allreduce 1 16 --epochs=4 --release_cap=0
bash $R capcnn4_s1_c2 cnn fixed_sketch_allreduce 1 4 --release_cap=2
bash $R capcnn4_s2 cnn fixed_sketch_allreduce 2 4
bash $R capcnn4_s2_nocap cnn fixed_sketch_allreduce 2 4 --release_cap=0
