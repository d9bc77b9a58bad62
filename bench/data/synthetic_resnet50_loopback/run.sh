#!/usr/bin/env bash
# Synthetic ResNet-50 on loopback, every scheme of docs/BENCHMARKS.md's section
# of that name (4 workers, 2 shards, 10 steps, each scheme's default
# compressor). From the repository root:
#   bash bench/data/synthetic_resnet50_loopback/run.sh
set -euo pipefail
here=bench/data/synthetic_resnet50_loopback
bash scripts/local_cluster.sh --workers=4 --shards=2 \
  --schemes=dense_allreduce,dense_ps,sketch_ps,sketch_allreduce,topk_allgather,gtopk,spardl \
  --workload=resnet50 --epochs=1 --out=out/synthetic_resnet50 -- --synthetic_steps=10 >"$here/output.txt" 2>&1
cp out/synthetic_resnet50/comparison.json out/synthetic_resnet50/comparison.csv "$here/"
