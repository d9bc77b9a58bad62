#!/usr/bin/env bash
# The same check at 8 and 16 workers, 10x (defaults) and 50x (a fifth of the default density).
# usage: digit_check_w.sh BINARY OUTDIR
set -u
bin="$1"; out="$2"; mkdir -p "$out"
run() {
  name="$1"; w="$2"; shift 2
  "$bin" --virtual_workers="$w" --epochs=1 --train_examples=8000 --report_every=0 --seed=1 "$@" > "$out/$name.out" 2>&1
  python3 - "$out/$name.out" "$name" <<'PY'
import json,sys
l=[x for x in open(sys.argv[1]) if x.startswith("summary ")]
if not l: print(sys.argv[2], "NO SUMMARY"); sys.exit()
s=json.loads(l[0][8:]); e=s["epochs"][-1]
print("%-34s acc %.4f test_loss %.6f train_loss %.6f sent %.1f" % (sys.argv[2], s["final_test_accuracy"] or -1, e["test_loss"], e["train_loss"], s["bytes_sent_per_step"]))
PY
}
for w in 8 16; do
  for s in dense_allreduce sketch_ps sketch_allreduce fixed_sketch_ps fixed_sketch_allreduce; do run mlp_W${w}_${s}_10x $w --scheme=$s; done
  run mlp_W${w}_sketch_ps_50x $w --scheme=sketch_ps --compressor=count_sketch:method=peel,density=0.00125,rows=4
  run mlp_W${w}_sketch_allreduce_50x $w --scheme=sketch_allreduce --compressor=count_sketch:method=peel,density=0.00084,rows=4
  run mlp_W${w}_fixed_sketch_ps_50x $w --scheme=fixed_sketch_ps --compressor=count_sketch:method=candidates,density=0.00666,rows=1,width=1,candidates=2
  for s in dense_allreduce sketch_ps sketch_allreduce; do run cnn_W${w}_${s}_10x $w --workload=cnn --scheme=$s; done
  run cnn_W${w}_sketch_ps_50x $w --workload=cnn --scheme=sketch_ps --compressor=count_sketch:method=peel,density=0.00125,rows=4
done
