#!/bin/bash
# The simulator's exact global top k at density 0.047 (the fixed sketch's k at
# 10x) on mlp_large at 64 workers, the scale study's rate schedule, with the
# momentum in three places (--mom_place), and dense beside it. From the
# repository root: bash bench/data/scale/study_large_grid/momentum_at/sim.sh SEED
s=${1:-1}
out=bench/data/scale/study_large_grid/momentum_at/sim
common="--model=mlp_large --workers=64 --epochs=4 --train=60000 --lr=0.2 --warmup=29 --warmup_from=0.05 --density=0.047 --eval_every=29 --seed=$s"
sfx=$([ "$s" = 1 ] && echo "" || echo "_s$s")
/usr/bin/python3.11 bench/quality_sim.py --method=dense $common > $out/w64_dense_corr$sfx.json
for mp in corr nomask post; do
  /usr/bin/python3.11 bench/quality_sim.py --method=global_topk --mom_place=$mp $common > $out/w64_global_topk_$mp$sfx.json
done
