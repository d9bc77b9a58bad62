#!/usr/bin/env bash
# The CNN on the main job's default link (200mbit per host; 4 workers, 2
# shards, `--workload=cnn`, 2 epochs of 24,000 examples, batch 32, lr 0.05,
# momentum 0.9, seed 1, each scheme's default compressor), eight schemes one
# after another in one launcher run.
#   bash bench/data/main_job_link/run_cnn.sh
set -euo pipefail
here=bench/data/main_job_link
schemes=dense_allreduce,dense_bf16_allreduce,sketch_ps,sketch_allreduce,fixed_sketch_ps,topk_allgather,gtopk,spardl
bash scripts/local_cluster.sh --workload=cnn --link=200mbit --schemes="$schemes" --out=out/main_job_link/cnn \
  >"$here/cnn_200mbit.txt" 2>&1
cp out/main_job_link/cnn/comparison.json "$here/cnn_200mbit.comparison.json"
cp out/main_job_link/cnn/curves.csv "$here/cnn_200mbit.curves.csv"
[ -f out/main_job_link/cnn/accuracy_vs_time.png ] && cp out/main_job_link/cnn/accuracy_vs_time.png "$here/cnn_200mbit.png"
