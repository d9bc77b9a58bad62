#!/bin/bash
# usage: OUT=DIR WORKER=BIN bash run.sh NAME W SEED SCHEME COMPRESSOR [extra flags]
# The scale study's protocol on mlp_large (../README.md) for one run; its output in DIR/runs/NAME.out.
n=$1; W=$2; s=$3; sch=$4; comp=$5; shift 5
case $W in 4) tr=14848; ep=1; base=16;; 16) tr=59392; ep=1; base=16;; 64) tr=60000; ep=4; base=16;; 256) tr=60000; ep=17; base=64;; esac
cmd="${WORKER:-bazel-bin/worker/sketchfuse_worker} --virtual_workers=$W --workload=mlp_large --scheme=$sch --epochs=$ep --train_examples=$tr --batch_size=32 --learning_rate=0.05 --seed=$s --report_every=0 --collective_timeout_s=3600 --lr_base_workers=$base --lr_warmup_steps=29"
[ -n "$comp" ] && cmd="$cmd --compressor=$comp"
cmd="$cmd $*"
echo "# $cmd" > ${OUT:-.}/runs/$n.out
$cmd >> ${OUT:-.}/runs/$n.out 2>&1
