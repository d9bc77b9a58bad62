#!/bin/bash
# The rate-unit residual at 256 workers, second pass (2026-12-01): the three
# baselines at their study specs (../../scale.csv) and the fixed sketch's
# centralized route on seeds 2 and 3, each beside dense on the same seed.
# Two lanes, one process each. From the repository root, with
# WORKER=<sketchfuse_worker>:
#   bash bench/data/scale/study_large_grid/ef_rate/worker/runs_w256.sh
export OMP_NUM_THREADS=1 OUT=bench/data/scale/study_large_grid/ef_rate/worker
R="nice -n 5 bash bench/data/scale/study_large_grid/momentum_at/run.sh"
FS="method=candidates,rows=1,width=1,candidates=2,table=bf16"
U=--residual_in_rate_units
(
  $R W256_spardl10_rate_s1 256 1 spardl "topk:density=0.0246802" $U
  $R W256_gtopk10_rate_s1 256 1 gtopk "topk:density=0.0250963" $U
  $R W256_topkag10_rate_s1 256 1 topk_allgather "topk:density=0.000195123" $U
) &
(
  $R W256_dense_s2 256 2 dense_allreduce ""
  $R W256_fs10_rate_s2 256 2 fixed_sketch_ps "count_sketch:density=0.0470108,$FS" $U
  $R W256_dense_s3 256 3 dense_allreduce ""
  $R W256_fs10_rate_s3 256 3 fixed_sketch_ps "count_sketch:density=0.0470108,$FS" $U
) &
wait
