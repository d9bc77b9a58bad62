#!/usr/bin/env bash
# The main job's link comparison again on OpenBLAS (scripts/setup.sh installs it
# since 2026-11-28; the figures one folder up were made on the reference BLAS,
# whose MLP step is 6.5 times longer: docs/BENCHMARKS.md, "The BLAS under
# LibTorch"). Run from the repository root as root, after building:
#   bash bench/data/main_job_link/openblas/run.sh
# 1. every scheme of the registry at the main job's default rate (200mbit per
#    host), one after another in one launcher run;
# 2. the main job's three schemes (scripts/main_job.sh's defaults) on 100mbit,
#    1gbit and loopback, one launcher run each (300mbit too, a run of its own:
#    `bash bench/data/main_job_link/openblas/run.sh 300mbit` runs only the named
#    links, without step 1).
# Settings: 4 workers, 2 shards, the Fashion-MNIST MLP, 2 epochs of 24,000
# examples, batch 32, lr 0.05, momentum 0.9, seed 1, each scheme's default.
set -euo pipefail
here=bench/data/main_job_link/openblas
schemes=dense_allreduce,dense_bf16_allreduce,dense_ps,sketch_ps,sketch_allreduce,auto,fixed_sketch_ps,fixed_sketch_allreduce,fixed_sketch_auto,topk_allgather,topk_ps,gtopk,spardl,importance_allreduce
source "$here/keep.sh"
links=("$@")
if [ ${#links[@]} -eq 0 ]; then
  bash scripts/local_cluster.sh --link=200mbit --schemes="$schemes" --out=out/main_job_link/openblas_every \
    >"$here/every_scheme_200mbit.txt" 2>&1
  keep every_scheme_200mbit out/main_job_link/openblas_every
  links=(100mbit 1gbit none)
fi
for link in "${links[@]}"; do
  bash scripts/local_cluster.sh --link="$link" --out="out/main_job_link/openblas_$link" >"$here/$link.txt" 2>&1
  keep "$link" "out/main_job_link/openblas_$link"
done
