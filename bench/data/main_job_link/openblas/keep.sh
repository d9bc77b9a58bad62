# Sourced by run.sh and run_regimes.sh here (with `here` set to this folder):
# keep NAME OUTDIR copies a launcher run's comparison, curves and plot to NAME.*.
keep() {
  cp "$2/comparison.json" "$here/$1.comparison.json"
  cp "$2/curves.csv" "$here/$1.curves.csv"
  [ -f "$2/accuracy_vs_time.png" ] && cp "$2/accuracy_vs_time.png" "$here/$1.png"
  return 0
}
