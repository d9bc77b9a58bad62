#!/bin/bash
# Does the gap of the exact global top k to dense close with more steps? The
# simulator's exact global top k at density 0.047 (the fixed sketch's k at 10x)
# on mlp_large at 64 workers under the scale study's rate schedule (0.05 rising
# to 0.2 over 29 steps), and dense beside it, trained 2 and 4 times as long as
# the study (8 and 16 epochs of the 60,000 examples: 232 and 464 steps; the
# study's 4 epochs, 116 steps, are ../momentum_at/sim/w64_*_corr.json and
# ../ef_rate/sim/w64_global_topk_corr_scaled.json). The top k runs with the
# worker's residual rule (raw gradients) and with the residual in units of the
# current rate (--ef_lr_scaled=1).
# From the repository root: bash bench/data/scale/study_large_grid/horizon/sim.sh
out=bench/data/scale/study_large_grid/horizon/sim
py=/usr/bin/python3.11
common="--model=mlp_large --workers=64 --train=60000 --lr=0.2 --warmup=29 --warmup_from=0.05 --eval_every=29 --seed=1"
for ep in 8 16; do
  $py bench/quality_sim.py --method=dense $common --epochs=$ep > $out/w64_dense_ep$ep.json
  for sc in 0 1; do
    $py bench/quality_sim.py --method=global_topk --mom_place=corr --density=0.047 $common --epochs=$ep \
        --ef_lr_scaled=$sc > $out/w64_global_topk_ep${ep}_scaled$sc.json
  done
done
# The same 116 steps as the study with the peak rate at 0.1 instead of 0.2
# (dense and the exact top k, the worker's residual rule): does the gap
# depend on the rate?
rate01="--model=mlp_large --workers=64 --train=60000 --lr=0.1 --warmup=29 --warmup_from=0.05 --eval_every=29 --seed=1 --epochs=4"
$py bench/quality_sim.py --method=dense $rate01 > $out/w64_dense_lr01.json
$py bench/quality_sim.py --method=global_topk --mom_place=corr --density=0.047 $rate01 > $out/w64_global_topk_lr01.json
