#!/usr/bin/env bash
# The sketchfuse_worker daemon answers malformed flags (run, scheme,
# collective and hybrid flags), bad files and an unreachable coordinator with
# a clear error on stderr and a non-zero exit, and writes nothing.
set -uo pipefail
bin="$1"
out_dir="${TEST_TMPDIR:-$(mktemp -d)}"
failures=0

expect_refusal() {
  local needle="$1"; shift
  local stderr_file="$out_dir/stderr"
  if "$bin" "$@" >/dev/null 2>"$stderr_file"; then
    echo "FAIL: '$*' succeeded"; failures=$((failures + 1)); return
  fi
  if ! grep -qF -- "$needle" "$stderr_file"; then
    echo "FAIL: '$*' did not say '$needle'; it said:"; cat "$stderr_file"
    failures=$((failures + 1)); return
  fi
  echo "ok: $* -> $(head -1 "$stderr_file")"
}

plan=(--write_job_config="$out_dir/job.json" --train_examples=2000)
expect_refusal "--world_size must be >= 1" "${plan[@]}"
expect_refusal "--learning_rate must be > 0" "${plan[@]}" --world_size=2 --learning_rate=-1
expect_refusal "--momentum must be in [0, 1)" "${plan[@]}" --world_size=2 --momentum=1
expect_refusal "--momentum must be a number in [0, 1) or empty; got 'fast'" "${plan[@]}" --world_size=2 --momentum=fast
expect_refusal "--optimizer: unknown optimizer 'lion'; known: sgd, adam, adamw" "${plan[@]}" --world_size=2 --optimizer=lion
expect_refusal "--momentum is SGD's: --optimizer=adamw keeps its own first moment" "${plan[@]}" --world_size=2 \
  --optimizer=adamw --momentum=0.9
expect_refusal "--lr_schedule must be constant or cosine; got 'step'" "${plan[@]}" --world_size=2 --lr_schedule=step
expect_refusal "no text corpus at '$out_dir/no-corpus'" "${plan[@]}" --world_size=2 --workload=char_lm \
  --corpus_dir="$out_dir/no-corpus"
expect_refusal "--batch_size must be >= 1" "${plan[@]}" --world_size=2 --batch_size=0
expect_refusal "scheme sketch_ps needs the count_sketch compressor" "${plan[@]}" --world_size=2 --compressor=topk
expect_refusal "--partition_elements must be empty (the job's), 0 (no cut) or a number of elements; got 'many'" \
  "${plan[@]}" --world_size=2 --partition_elements=many
expect_refusal "--partition_elements must be empty (the job's), 0 (no cut) or a number of elements; got '-5'" \
  "${plan[@]}" --world_size=2 --partition_elements=-5
expect_refusal "partition_elements 10 cuts the model into 23515 partitions; at most 4096" "${plan[@]}" --world_size=2 \
  --partition_elements=10
expect_refusal "--num_shards must be >= 1; got 0" "${plan[@]}" --world_size=2 --num_shards=0
expect_refusal "unknown scheme 'gossip'" "${plan[@]}" --world_size=2 --scheme=gossip
expect_refusal "unknown parameter 'depth'" "${plan[@]}" --world_size=2 --compressor=count_sketch:depth=3
expect_refusal "unknown workload 'resnet'; the workloads are mlp, cnn, mlp_large, cnn_wide, char_lm, resnet50, vgg16, bert_base, gpt2_small" "${plan[@]}" --world_size=2 --workload=resnet
expect_refusal "--synthetic_steps must be >= 1; got 0" "${plan[@]}" --world_size=2 --workload=resnet50 --synthetic_steps=0
expect_refusal "the backward time per element must be >= 0; got -1" "${plan[@]}" --world_size=2 --workload=vgg16 --backward_ns_per_element=-1
expect_refusal "is larger than a worker's" "${plan[@]}" --world_size=2 --batch_size=5000
expect_refusal "fusion" "${plan[@]}" --world_size=2 --fusion=sometimes
expect_refusal "Illegal value 'many' specified for flag 'epochs'" "${plan[@]}" --world_size=2 --epochs=many
expect_refusal "unexpected argument 'extra'" "${plan[@]}" --world_size=2 extra
expect_refusal "--second_round is for --scheme=sketch_ps or sketch_allreduce only" "${plan[@]}" --world_size=2 --scheme=topk_ps --second_round
expect_refusal "scheme gtopk needs the topk compressor" "${plan[@]}" --world_size=2 --scheme=gtopk --compressor=dense
expect_refusal "the schemes are sketch_ps, topk_ps, dense_ps, dense_allreduce" --scheme=ring --print_route
expect_refusal "--device: device must be cpu or gpu; got 'tpu'" "${plan[@]}" --world_size=2 --device=tpu
expect_refusal "--device=gpu is for the synthetic workloads; mlp trains with LibTorch on the CPU" "${plan[@]}" --world_size=2 --device=gpu
expect_refusal "device=gpu serves the count_sketch schemes (sketch_ps, sketch_allreduce, fixed_sketch_allreduce, fixed_sketch_ps, auto, fixed_sketch_auto); got scheme topk_ps" "${plan[@]}" --world_size=2 --workload=resnet50 --scheme=topk_ps --device=gpu
[ -e "$out_dir/job.json" ] && { echo "FAIL: a refused run wrote its job config"; failures=$((failures + 1)); }

run=(--world_size=1 --train_examples=2000 --worker_id=w-0)
expect_refusal "--coordinator is required" "${run[@]}"
expect_refusal "cannot read --token_file file" "${run[@]}" --coordinator=127.0.0.1:1 --token_file="$out_dir/missing"
: >"$out_dir/empty_token"
expect_refusal "is empty" "${run[@]}" --coordinator=127.0.0.1:1 --token_file="$out_dir/empty_token"
expect_refusal "--tls_cert and --tls_key must be given together" "${run[@]}" --coordinator=127.0.0.1:1 --tls_cert=x
expect_refusal "no answer from the coordinator at 127.0.0.1:1 within 1s" "${run[@]}" --coordinator=127.0.0.1:1 --join_timeout_s=1
decentralized=("${run[@]}" --coordinator=127.0.0.1:1 --scheme=sketch_allreduce)
expect_refusal "--collective must be gloo or nccl; got 'mpi'" "${decentralized[@]}" --collective=mpi
expect_refusal "--collective_host is empty" "${decentralized[@]}" --collective_host=
expect_refusal "--metrics_port must be -1 (off) or in [0, 65535]; got 70000" "${decentralized[@]}" --metrics_port=70000
expect_refusal "--inject_faults: unknown fault 'explode'" "${decentralized[@]}" --inject_faults=explode=1
expect_refusal "--trace_steps must be >= 1; got 0" "${decentralized[@]}" --trace_file="$out_dir/trace.json" --trace_steps=0
expect_refusal "--collective_timeout_s and --probe_every must be >= 1" "${decentralized[@]}" --collective_timeout_s=0
expect_refusal "--collective_timeout_s and --probe_every must be >= 1" "${run[@]}" --coordinator=127.0.0.1:1 --scheme=auto --probe_every=0
if ! command -v nvidia-smi >/dev/null 2>&1; then
  expect_refusal "device=gpu needs a GPU; there is none" "${run[@]}" --coordinator=127.0.0.1:1 --workload=resnet50 \
    --scheme=sketch_allreduce --device=gpu
fi

# A valid run writes its job config.
if "$bin" "${plan[@]}" --world_size=2 >/dev/null 2>&1 && grep -q '"layerSizes"' "$out_dir/job.json"; then
  echo "ok: a valid run writes its job config"
else
  echo "FAIL: a valid run did not write its job config"; failures=$((failures + 1))
fi

# --print_route answers for every scheme.
for pair in sketch_ps:centralized dense_allreduce:decentralized dense_bf16_allreduce:decentralized spardl:decentralized \
  auto:hybrid; do
  got="$("$bin" --scheme="${pair%%:*}" --print_route 2>&1)"
  [ "$got" = "${pair##*:}" ] || { echo "FAIL: --print_route of ${pair%%:*} said '$got'"; failures=$((failures + 1)); }
done

# --list_schemes=json: the registry as launchers read it, each entry's route
# the one --print_route gives.
expect_refusal "--list_schemes must be json or text; got 'yaml'" --list_schemes=yaml
if "$bin" --list_schemes=json >"$out_dir/schemes.json" 2>&1 &&
   routes="$(python3 -c '
import json, sys
entries = json.load(open(sys.argv[1]))
for e in entries:
    assert set(e) == {"name", "route", "compressor", "default_compressor", "compresses", "summary", "traits",
                      "hybrid_of"}, e
    assert e["compresses"] == (e["compressor"] != "dense"), e
    assert (e["hybrid_of"] is not None) == (e["route"] == "hybrid"), e
    print(e["name"] + ":" + e["route"])
' "$out_dir/schemes.json")"; then
  listed=0
  for pair in $routes; do
    listed=$((listed + 1))
    got="$("$bin" --scheme="${pair%%:*}" --print_route 2>&1)"
    [ "$got" = "${pair##*:}" ] || { echo "FAIL: --list_schemes says ${pair}, --print_route '$got'"; failures=$((failures + 1)); }
  done
  if [ "$listed" -ge 14 ] && grep -q '"name": "fixed_sketch_auto"' "$out_dir/schemes.json"; then
    echo "ok: --list_schemes=json lists the registry's $listed schemes, each on its route"
  else
    echo "FAIL: --list_schemes=json listed $listed schemes"; failures=$((failures + 1))
  fi
else
  echo "FAIL: --list_schemes=json did not print the registry as JSON:"; head -5 "$out_dir/schemes.json"
  failures=$((failures + 1))
fi
if "$bin" --list_schemes=text | grep -q '^  fixed_sketch_ps: '; then
  echo "ok: --list_schemes=text lists the schemes"
else
  echo "FAIL: --list_schemes=text"; failures=$((failures + 1))
fi

if "$bin" --help >"$out_dir/help" 2>&1; then :; fi
# --virtual_workers: the whole job in one process; a worker process's flags do not apply.
virtual=(--virtual_workers=4 --train_examples=2000 --test_examples=100 --epochs=1 --data_dir="$out_dir/no-data")
expect_refusal "--world_size=8 differs from --virtual_workers=4" "${virtual[@]}" --world_size=8
expect_refusal "--coordinator does not apply to it" "${virtual[@]}" --coordinator=127.0.0.1:1
expect_refusal "--checkpoint_dir does not apply to it" "${virtual[@]}" --checkpoint_dir="$out_dir/ck"
expect_refusal "--trace_file does not apply to it" "${virtual[@]}" --trace_file="$out_dir/t.json"
expect_refusal "--virtual_shards must be >= 1; got 0" "${virtual[@]}" --virtual_shards=0
expect_refusal "--virtual_workers trains the LibTorch models; workload 'resnet50' is a synthetic profile" "${virtual[@]}" --workload=resnet50
expect_refusal "--virtual_workers must be >= 0 (0: this process is one worker); got -2" "${virtual[@]}" --virtual_workers=-2
expect_refusal "no-data" "${virtual[@]}"
for flag in coordinator worker_id world_size workload scheme compressor fusion epochs batch_size \
            learning_rate checkpoint_dir token_file tls_ca tls_cert tls_key write_job_config \
            second_round collective collective_host collective_timeout_s probe_every trace_file trace_steps metrics_port \
            device virtual_workers virtual_shards optimizer lr_schedule lr_final_fraction corpus_dir; do
  grep -q -- "-$flag" "$out_dir/help" || { echo "FAIL: --help does not explain --$flag"; failures=$((failures + 1)); }
done
[ "$failures" -eq 0 ] && echo "all refusals are clear" || echo "$failures failure(s)"
exit "$failures"
