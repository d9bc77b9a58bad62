#!/bin/bash
# The residual in units of the rate in the worker (--residual_in_rate_units),
# mlp_large under the scale study's protocol (../../momentum_at/run.sh: one run,
# its output in runs/NAME.out), at the compressor specs the study's probes found
# for the same bytes (../../scale.csv, ../../seed_2/, ../../seed_3/).
# From the repository root, with WORKER=<sketchfuse_worker>:
#   bash bench/data/scale/study_large_grid/ef_rate/worker/runs.sh
export OMP_NUM_THREADS=1 OUT=bench/data/scale/study_large_grid/ef_rate/worker
R="nice -n 5 bash bench/data/scale/study_large_grid/momentum_at/run.sh"
FS="method=candidates,rows=1,width=1,candidates=2,table=bf16"
U=--residual_in_rate_units
$R W64_fs10_rate_s1 64 1 fixed_sketch_ps "count_sketch:density=0.0470074,$FS" $U
$R W64_fs10_rate_s2 64 2 fixed_sketch_ps "count_sketch:density=0.0470194,$FS" $U
$R W64_fs10_rate_s3 64 3 fixed_sketch_ps "count_sketch:density=0.047035,$FS" $U
$R W64_topkps10_rate_s1 64 1 topk_ps "topk:density=0.0798337" $U
$R W256_fs10_rate_s1 256 1 fixed_sketch_ps "count_sketch:density=0.0470108,$FS" $U
$R W256_topkps10_rate_s1 256 1 topk_ps "topk:density=0.0798376" $U
$R W64_fs100_rate_s1 64 1 fixed_sketch_ps "count_sketch:density=0.00445496,$FS" $U
$R W256_fs100_rate_s1 256 1 fixed_sketch_ps "count_sketch:density=0.00446508,$FS" $U
# The old rule with the same binary (it reproduces ../../runs/mlp_large_W64_fixed_sketch_ps_10x.out):
$R W64_fs10_raw_s1 64 1 fixed_sketch_ps "count_sketch:density=0.0470074,$FS" --residual_in_rate_units=false
# The baselines with the new rule (the default of /tmp/worker_rate2), at their study specs:
$R W64_spardl10_rate_s1 64 1 spardl "topk:density=0.0253572" $U
$R W64_topkag10_rate_s1 64 1 topk_allgather "topk:density=0.000793177" $U
$R W64_gtopk10_rate_s1 64 1 gtopk "topk:density=0.0253963" $U
