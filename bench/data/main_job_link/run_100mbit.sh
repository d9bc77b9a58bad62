#!/usr/bin/env bash
# The main job on a 100mbit link (after run.sh's three: where the sketch routes' crossover lies).
#   bash bench/data/main_job_link/run_100mbit.sh
set -euo pipefail
here=bench/data/main_job_link
link=100mbit
bash scripts/local_cluster.sh --link="$link" --out="out/main_job_link/$link" >"$here/$link.txt" 2>&1
cp "out/main_job_link/$link/comparison.json" "$here/$link.comparison.json"
cp "out/main_job_link/$link/curves.csv" "$here/$link.curves.csv"
[ -f "out/main_job_link/$link/accuracy_vs_time.png" ] && cp "out/main_job_link/$link/accuracy_vs_time.png" "$here/$link.png"
