#!/bin/bash
# Diagnostics of the fixed sketch on the CNN at 16 workers, seed 1, default cap.
cd /work/main
R=bench/data/scale/rc.sh
bash $R cnn16_hashstep cnn fixed_sketch_allreduce 1 16 --compressor=count_sketch:method=candidates,density=0.0333,rows=1,width=1,candidates=2,hash=step
bash $R cnn16_d01 cnn fixed_sketch_allreduce 1 16 --compressor=count_sketch:method=candidates,density=0.1,rows=1,width=1,candidates=2
bash $R cnn16_gtopk_d0333 cnn gtopk 1 16 --compressor=topk:density=0.0333
