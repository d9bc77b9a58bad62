#!/usr/bin/env bash
# Sixteen workers on the main job's default link (200mbit per host; 2 shards;
# the MLP, 2 epochs of 24,000 examples split over the 16 workers, batch 32,
# lr 0.05, momentum 0.9, seed 1, each scheme's default compressor, which
# follows W), six schemes one after another in one launcher run. Sixteen
# worker processes share the VM's two cores, so every step's compute is
# serialized: the times are this machine's, the order of the schemes is what
# the bytes make of it.
#   bash bench/data/main_job_link/run_w16.sh
set -euo pipefail
here=bench/data/main_job_link
schemes=dense_allreduce,dense_bf16_allreduce,sketch_ps,fixed_sketch_ps,fixed_sketch_allreduce,spardl
bash scripts/local_cluster.sh --workers=16 --link=200mbit --schemes="$schemes" --out=out/main_job_link/w16 \
  >"$here/w16_200mbit.txt" 2>&1
cp out/main_job_link/w16/comparison.json "$here/w16_200mbit.comparison.json"
cp out/main_job_link/w16/curves.csv "$here/w16_200mbit.curves.csv"
[ -f out/main_job_link/w16/accuracy_vs_time.png ] && cp out/main_job_link/w16/accuracy_vs_time.png "$here/w16_200mbit.png"
