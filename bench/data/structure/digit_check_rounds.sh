#!/usr/bin/env bash
# The collective schemes the rounds algorithm took over (dense_allreduce and
# topk_allgather, beside the sketch routes of digit_check.sh), with two that
# kept their own files as controls: the same runs before and after.
# usage: digit_check_rounds.sh BINARY OUTDIR
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
for s in dense_allreduce topk_allgather dense_bf16_allreduce gtopk; do run mlp_$s --scheme=$s; done
for s in dense_allreduce topk_allgather; do run cnn_$s --scheme=$s --workload=cnn; done
