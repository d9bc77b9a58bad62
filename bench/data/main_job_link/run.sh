#!/usr/bin/env bash
# The main job (scripts/main_job.sh's defaults: 4 workers, 2 shards, the MLP,
# 2 epochs of 24,000 examples, batch 32; dense_allreduce, sketch_ps,
# sketch_allreduce) on a 300mbit link (the first default, before the rate was
# derived from this run's loopback step: 200mbit), on 1gbit and on loopback, one
# after another on the same machine. Run from the repository root as root:
#   bash bench/data/main_job_link/run.sh
set -euo pipefail
here=bench/data/main_job_link
for link in 300mbit 1gbit none; do
  bash scripts/local_cluster.sh --link="$link" --out="out/main_job_link/$link" >"$here/$link.txt" 2>&1
  cp "out/main_job_link/$link/comparison.json" "$here/$link.comparison.json"
  cp "out/main_job_link/$link/curves.csv" "$here/$link.curves.csv"
  [ -f "out/main_job_link/$link/accuracy_vs_time.png" ] && cp "out/main_job_link/$link/accuracy_vs_time.png" "$here/$link.png"
done
