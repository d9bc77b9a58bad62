#!/bin/bash
# The fixed sketch's shape on the CNN at 16 workers (all 10x: cells + p k = d / 10), seed 1, default cap.
cd /work/main
R=bench/data/scale/rc.sh
for spec in density=0.025,rows=1,width=2,candidates=2 density=0.02,rows=1,width=3,candidates=2 \
            density=0.0167,rows=1,width=4,candidates=2 density=0.025,rows=2,width=1,candidates=2 \
            density=0.0125,rows=1,width=4,candidates=4; do
  name=cnn16_$(echo $spec | tr -d 'a-z=' | tr ',' '_')
  bash $R $name cnn fixed_sketch_allreduce 1 16 --compressor=count_sketch:method=candidates,$spec
done
