#!/usr/bin/env bash
# Old binary (HEAD 6f2ffff) against new: the same runs, final accuracy and test loss.
# usage: digit_check.sh BINARY OUTDIR
set -u
bin="$1"; out="$2"; mkdir -p "$out"
run() {
  name="$1"; shift
  "$bin" --virtual_workers=4 --epochs=1 --train_examples=4000 --report_every=0 --seed=1 "$@" > "$out/$name.out" 2>&1
  python3 - "$out/$name.out" "$name" <<'PY'
import json,sys
l=[x for x in open(sys.argv[1]) if x.startswith("summary ")]
if not l: print(sys.argv[2], "NO SUMMARY"); sys.exit()
s=json.loads(l[0][8:]); e=s["epochs"][-1]
print("%-28s acc %.4f test_loss %.6f train_loss %.6f sent %.1f" % (sys.argv[2], s["final_test_accuracy"] or -1, e["test_loss"], e["train_loss"], s["bytes_sent_per_step"]))
PY
}
run mlp_sketch_ps_fetchsgd --scheme=sketch_ps --compressor=count_sketch:method=fetchsgd,density=0.01,rows=5,width=10
run mlp_sketch_allreduce_fetchsgd --scheme=sketch_allreduce --compressor=count_sketch:method=fetchsgd,density=0.01,rows=5,width=10
run mlp_sketch_ps_second_round --scheme=sketch_ps --compressor=count_sketch:method=estimate,density=0.01,rows=3,width=10 --second_round
run mlp_sketch_allreduce_second_round --scheme=sketch_allreduce --compressor=count_sketch:method=estimate,density=0.01,rows=3,width=10 --second_round
for s in sketch_ps sketch_allreduce fixed_sketch_ps fixed_sketch_allreduce fixed_sketch_auto auto topk_ps dense_ps; do run mlp_$s --scheme=$s; done
for s in sketch_ps fixed_sketch_ps fixed_sketch_allreduce; do run cnn_$s --scheme=$s --workload=cnn; done
run cnn_sketch_ps_fetchsgd --workload=cnn --scheme=sketch_ps --compressor=count_sketch:method=fetchsgd,density=0.01,rows=5,width=10
