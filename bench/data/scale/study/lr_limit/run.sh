#!/usr/bin/env bash
# usage: run.sh W EPOCHS SCHEME WARMUP [extra flags]
W=$1 E=$2 S=$3 WU=$4; shift 4
tag=$(echo "$*" | tr -c 'a-z0-9.=\n' '_')
out=OUT/W${W}_${S}_wu${WU}${tag}.out
nice -n 5 /tmp/bench_worker2 --virtual_workers=$W --workload=mlp --scheme=$S --epochs=$E --batch_size=32 --learning_rate=0.05 --seed=1 --report_every=0 --lr_base_workers=4 --lr_warmup_steps=$WU --collective_timeout_s=3600 "$@" > $out 2>&1
echo "$out $(grep -o '"final_test_accuracy":[^,]*' $out) $(grep -o '"wall_s":[^,}]*' $out)"
