#!/usr/bin/env bash
# The scale study's plots from this folder's CSVs (gnuplot):
#   bytes_vs_workers.png    bytes per worker per step (sent + received) against W, each scheme at its default
#   accuracy_vs_workers.png final test accuracy against W (the MLP, 116 steps; accuracy.csv)
#   bash bench/data/scale/virtual/plot.sh
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
bytes_cmds="" acc_cmds=""
for scheme in $(tail -n +2 bytes.csv | cut -d, -f1 | awk '!seen[$0]++'); do
  awk -F, -v s="$scheme" '$1 == s {print $2, ($3 + $4) / 1024}' bytes.csv >"$tmp/bytes_$scheme.dat"
  bytes_cmds+="'$tmp/bytes_$scheme.dat' using 1:2 with linespoints title '$scheme',"
done
for scheme in $(tail -n +2 accuracy.csv | cut -d, -f2 | awk '!seen[$0]++'); do
  awk -F, -v s="$scheme" '$2 == s && $5 != "diverged" {print $1, 100 * $5}' accuracy.csv | sort -n >"$tmp/acc_$scheme.dat"
  acc_cmds+="'$tmp/acc_$scheme.dat' using 1:2 with linespoints title '$scheme',"
done
gnuplot -e "set terminal png size 900,600; set output 'bytes_vs_workers.png'; set termoption noenhanced; \
  set title 'MLP: KiB per worker per step, sent + received, each scheme at its default'; \
  set logscale xy; set xlabel 'workers (virtual)'; set ylabel 'KiB per worker per step'; set key outside; \
  plot ${bytes_cmds%,}"
gnuplot -e "set terminal png size 900,600; set output 'accuracy_vs_workers.png'; set termoption noenhanced; \
  set title 'MLP: final test accuracy after 116 steps of batch 32 per worker'; \
  set logscale x; set xlabel 'workers (virtual)'; set ylabel 'test accuracy (%)'; set key bottom left; \
  plot ${acc_cmds%,}"
echo "wrote $here/bytes_vs_workers.png and $here/accuracy_vs_workers.png"
