#!/usr/bin/env bash
# Eight workers on the main job's default link (200mbit per host; 2 shards,
# the sketch_ps job cut into four partitions; the MLP, 2 epochs of 24,000
# examples, batch 32, each scheme's default compressor, which follows W),
# seven schemes one after another in one launcher run.
#   bash bench/data/main_job_link/run_w8.sh
set -euo pipefail
here=bench/data/main_job_link
schemes=dense_allreduce,dense_bf16_allreduce,sketch_ps,sketch_allreduce,fixed_sketch_ps,topk_allgather,gtopk
bash scripts/local_cluster.sh --workers=8 --link=200mbit --schemes="$schemes" --out=out/main_job_link/w8 \
  >"$here/w8_200mbit.txt" 2>&1
cp out/main_job_link/w8/comparison.json "$here/w8_200mbit.comparison.json"
cp out/main_job_link/w8/curves.csv "$here/w8_200mbit.curves.csv"
[ -f out/main_job_link/w8/accuracy_vs_time.png ] && cp out/main_job_link/w8/accuracy_vs_time.png "$here/w8_200mbit.png"
