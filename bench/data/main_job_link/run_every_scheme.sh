#!/usr/bin/env bash
# Every scheme of the registry on the main job's default link (200mbit per
# host; 4 workers, 2 shards, the MLP, 2 epochs of 24,000 examples, batch 32,
# each scheme's default compressor), one after another in one launcher run.
#   bash bench/data/main_job_link/run_every_scheme.sh
set -euo pipefail
here=bench/data/main_job_link
schemes=dense_allreduce,dense_bf16_allreduce,dense_ps,sketch_ps,sketch_allreduce,auto,fixed_sketch_ps,fixed_sketch_allreduce,fixed_sketch_auto,topk_allgather,topk_ps,gtopk,spardl,importance_allreduce
bash scripts/local_cluster.sh --link=200mbit --schemes="$schemes" --out=out/main_job_link/every_scheme \
  >"$here/every_scheme_200mbit.txt" 2>&1
cp out/main_job_link/every_scheme/comparison.json "$here/every_scheme_200mbit.comparison.json"
cp out/main_job_link/every_scheme/curves.csv "$here/every_scheme_200mbit.curves.csv"
[ -f out/main_job_link/every_scheme/accuracy_vs_time.png ] && cp out/main_job_link/every_scheme/accuracy_vs_time.png "$here/every_scheme_200mbit.png"
