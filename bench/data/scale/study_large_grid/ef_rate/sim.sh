#!/bin/bash
# The simulator's exact global top k at density 0.047 (the fixed sketch's k at
# 10x) on mlp_large under the scale study's rate schedule (0.05 rising to 0.2
# over 29 steps), with the error-feedback residual kept in units of the
# current rate (--ef_lr_scaled=1) or not (0, the worker's rule today).
# From the repository root: bash bench/data/scale/study_large_grid/ef_rate/sim.sh
out=bench/data/scale/study_large_grid/ef_rate/sim
py=/usr/bin/python3.11
rate="--model=mlp_large --lr=0.2 --warmup=29 --warmup_from=0.05 --density=0.047 --method=global_topk --mom_place=corr"
# 64 workers, seeds 1 and 2 (the unscaled runs are ../momentum_at/sim/w64_global_topk_corr*.json):
for s in 1 2; do
  sfx=$([ "$s" = 1 ] && echo "" || echo "_s$s")
  $py bench/quality_sim.py $rate --workers=64 --epochs=4 --train=60000 --eval_every=29 --seed=$s \
      --ef_lr_scaled=1 > $out/w64_global_topk_corr_scaled$sfx.json
done
# 256 workers, seed 1, both rules (evaluated on 2,000 test examples every 7 steps):
$py bench/quality_sim.py $rate --workers=256 --epochs=17 --train=60000 --eval_every=7 --seed=1 \
    --ef_lr_scaled=0 > $out/w256_global_topk_corr.json
$py bench/quality_sim.py $rate --workers=256 --epochs=17 --train=60000 --eval_every=7 --seed=1 \
    --ef_lr_scaled=1 > $out/w256_global_topk_corr_scaled.json
