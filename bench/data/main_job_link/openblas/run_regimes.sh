#!/usr/bin/env bash
# The other regimes of docs/BENCHMARKS.md's "Which scheme to pick" again on
# OpenBLAS, with the schemes the reference-BLAS runs one folder up had
# (run_w8.sh, run_cnn.sh, run_w16.sh there), each one launcher run at the main
# job's 200mbit per host. Run from the repository root as root, after building:
#   bash bench/data/main_job_link/openblas/run_regimes.sh [w8] [cnn] [w16]
set -euo pipefail
here=bench/data/main_job_link/openblas
source "$here/keep.sh"
regimes=("$@")
[ ${#regimes[@]} -gt 0 ] || regimes=(w8 cnn w16)
for regime in "${regimes[@]}"; do
  case "$regime" in
    w8) flags=(--workers=8 --schemes=dense_allreduce,dense_bf16_allreduce,sketch_ps,sketch_allreduce,fixed_sketch_ps,topk_allgather,gtopk) ;;
    cnn) flags=(--workload=cnn --schemes=dense_allreduce,dense_bf16_allreduce,sketch_ps,sketch_allreduce,fixed_sketch_ps,topk_allgather,gtopk,spardl) ;;
    w16) flags=(--workers=16 --schemes=dense_allreduce,dense_bf16_allreduce,sketch_ps,fixed_sketch_ps,fixed_sketch_allreduce,spardl) ;;
    *) echo "run_regimes.sh: unknown regime '$regime' (w8, cnn, w16)" >&2; exit 2 ;;
  esac
  out="out/main_job_link/openblas_$regime"
  bash scripts/local_cluster.sh --link=200mbit "${flags[@]}" --out="$out" >"$here/${regime}_200mbit.txt" 2>&1
  keep "${regime}_200mbit" "$out"
done
