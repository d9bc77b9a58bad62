#!/usr/bin/env bash
# The second round with a 3-row estimate sketch, on both routes, with and
# without it (4 workers, the MLP, 2 epochs of 24,000 examples, loopback).
# From the repository root:
#   bash bench/data/second_round/run.sh
set -euo pipefail
here=bench/data/second_round
sketch=count_sketch:method=estimate,density=0.01,rows=3,width=10
for second in "" --second_round; do
  name=first_round_only; [ -n "$second" ] && name=second_round
  bash scripts/local_cluster.sh --link=none --workers=4 --shards=1 --schemes=sketch_allreduce --epochs=2 \
    --out="out/second_round/allreduce_$name" -- --compressor="$sketch" $second >"$here/sketch_allreduce_$name.txt" 2>&1
  bash scripts/local_cluster.sh --link=none --workers=4 --shards=2 --schemes=sketch_ps --epochs=2 \
    --out="out/second_round/ps_$name" -- --compressor="$sketch" $second >"$here/sketch_ps_$name.txt" 2>&1
done
