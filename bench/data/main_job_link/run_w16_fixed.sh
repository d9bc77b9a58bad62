#!/usr/bin/env bash
# fixed_sketch_ps at sixteen workers on the main job's default link again,
# after the job plan stopped cutting the candidates sketch into partitions
# (same settings as run_w16.sh; one group on shard 0 of the two).
#   bash bench/data/main_job_link/run_w16_fixed.sh
set -euo pipefail
here=bench/data/main_job_link
bash scripts/local_cluster.sh --workers=16 --link=200mbit --schemes=fixed_sketch_ps --out=out/main_job_link/w16_fixed \
  >"$here/w16_fixed_200mbit.txt" 2>&1
cp out/main_job_link/w16_fixed/comparison.json "$here/w16_fixed_200mbit.comparison.json"
cp out/main_job_link/w16_fixed/curves.csv "$here/w16_fixed_200mbit.curves.csv"
