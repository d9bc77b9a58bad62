#!/usr/bin/env bash
# The sketchfuse_server daemon answers malformed flags and files with a clear
# error on stderr and a non-zero exit before it listens.
set -uo pipefail
bin="$1"
dir="${TEST_TMPDIR:-$(mktemp -d)}"
failures=0

expect_refusal() {
  local needle="$1"; shift
  if timeout 30 "$bin" "$@" >/dev/null 2>"$dir/stderr"; then
    echo "FAIL: '$*' succeeded"; failures=$((failures + 1)); return
  fi
  if ! grep -qF -- "$needle" "$dir/stderr"; then
    echo "FAIL: '$*' did not say '$needle'; it said:"; cat "$dir/stderr"; failures=$((failures + 1)); return
  fi
  echo "ok: $* -> $(head -1 "$dir/stderr")"
}

# A job for the servers alone (no run section) and one with a run.
echo '{"job": "j", "worldSize": 2, "groups": [{"group": 0, "dim": 100, "compressor": "dense"}]}' >"$dir/servers.json"
echo '{"job": "j", "worldSize": 2, "run": {"workload": "mlp", "layerSizes": ["100"]},
  "groups": [{"group": 0, "dim": 100, "compressor": "dense", "layerEnd": 1}]}' >"$dir/run.json"
echo '{"job": "j", "worldSize": 2, "run": {"layerSizes": ["100", "5"]},
  "groups": [{"group": 0, "dim": 100, "compressor": "dense", "layerEnd": 1}]}' >"$dir/untiled.json"
echo '{"job": "j", "worldSize": ' >"$dir/broken.json"
: >"$dir/empty_token"

expect_refusal "--job_config is required" --port=0
expect_refusal "cannot read job config file" --job_config="$dir/missing.json"
expect_refusal "is not valid JSON for JobConfig" --job_config="$dir/broken.json"
expect_refusal "the coordinator needs the workers' run configuration" --job_config="$dir/servers.json" --coordinator
expect_refusal "the groups cover layers [0, 1) of the run's 2 layers" --job_config="$dir/untiled.json"
expect_refusal "--coordinator and --coordinator_address exclude each other" \
  --job_config="$dir/run.json" --coordinator --coordinator_address=127.0.0.1:1
expect_refusal "--coordinator_ca needs --coordinator_address" --job_config="$dir/run.json" --coordinator_ca=x
expect_refusal "--liveness_timeout_ms must be in [100, 3600000]" --job_config="$dir/run.json" --liveness_timeout_ms=5
expect_refusal "--port must be in [0, 65535]" --job_config="$dir/run.json" --port=70000
expect_refusal "--step_window must be in [1, 2^31]; got 0" --job_config="$dir/run.json" --step_window=0
expect_refusal "--max_open_rounds must be in [1, 2^31]; got -1" --job_config="$dir/run.json" --max_open_rounds=-1
expect_refusal "--max_held_mb must be in [1, 2^20]; got 0" --job_config="$dir/run.json" --max_held_mb=0
expect_refusal "shard index 2 is out of range for 2 shards" --job_config="$dir/run.json" --shard_index=2 --num_shards=2
expect_refusal "is empty" --job_config="$dir/run.json" --token_file="$dir/empty_token"
echo "same" >"$dir/same_token"
expect_refusal "--shard_identities needs mutual TLS (--tls_client_ca)" --job_config="$dir/run.json" --shard_identities=shard-0
expect_refusal "--shard_token_file needs --token_file" --job_config="$dir/run.json" --shard_token_file="$dir/same_token"
expect_refusal "hold the same token; roles need two" --job_config="$dir/run.json" --token_file="$dir/same_token" \
  --shard_token_file="$dir/same_token"
expect_refusal "cannot read --coordinator_ca file" --job_config="$dir/run.json" --shard_index=1 --num_shards=2 \
  --coordinator_address=127.0.0.1:1 --coordinator_ca="$dir/missing.pem"
expect_refusal "--tls_cert and --tls_key must be given together" --job_config="$dir/run.json" --tls_cert=x
expect_refusal "--metrics_port must be -1 (off) or in [0, 65535]; got -7" --job_config="$dir/run.json" --metrics_port=-7
# Join credentials: issued from the job and the shard token, one per id, and
# required only by a coordinator that has a shard token.
echo "the-shard-token" >"$dir/shard_token"
echo "the-worker-token" >"$dir/worker_token"
expect_refusal "--print_join_credential needs --shard_token_file" --job_config="$dir/run.json" \
  --print_join_credential=worker-0
expect_refusal "worker_id 'a b' has a character other than" --job_config="$dir/run.json" \
  --shard_token_file="$dir/shard_token" --print_join_credential="a b"
expect_refusal "--require_join_credentials is for the shard that serves the coordinator" --job_config="$dir/run.json" \
  --require_join_credentials
expect_refusal "--require_join_credentials needs --shard_token_file" --job_config="$dir/run.json" --coordinator \
  --require_join_credentials
first="$("$bin" --job_config="$dir/run.json" --shard_token_file="$dir/shard_token" --print_join_credential=worker-0)"
again="$("$bin" --job_config="$dir/run.json" --shard_token_file="$dir/shard_token" --print_join_credential=worker-0)"
other="$("$bin" --job_config="$dir/run.json" --shard_token_file="$dir/shard_token" --print_join_credential=worker-1)"
if [[ "$first" =~ ^[0-9a-f]{64}$ ]] && [ "$first" = "$again" ] && [ "$first" != "$other" ]; then
  echo "ok: --print_join_credential prints one 64-hex-digit credential per id, the same each time"
else
  echo "FAIL: --print_join_credential printed '$first', '$again', '$other'"; failures=$((failures + 1))
fi
# A --state_dir that is a file, and one holding a corrupt answer or another
# run's: the shard names the problem and does not start (nothing is removed).
: >"$dir/a_file"
expect_refusal "cannot create --state_dir '$dir/a_file/shard-0': Not a directory" --job_config="$dir/run.json" \
  --state_dir="$dir/a_file"
mkdir -p "$dir/state/shard-0"
printf 'not an answer' >"$dir/state/shard-0/g0-r0-s3.answer"
expect_refusal "g0-r0-s3.answer' is not a valid kept answer" --job_config="$dir/run.json" --state_dir="$dir/state"
[ -s "$dir/state/shard-0/g0-r0-s3.answer" ] || { echo "FAIL: the refused answer file was removed"; failures=$((failures + 1)); }

# A metrics port already taken: the shard says so and does not start.
python3 -c 'import socket,time,sys; s=socket.socket(); s.bind(("127.0.0.1",0)); s.listen(); print(s.getsockname()[1], flush=True); time.sleep(30)' >"$dir/taken" &
holder=$!
for _ in $(seq 50); do [ -s "$dir/taken" ] && break; sleep 0.1; done
expect_refusal "cannot serve metrics on 127.0.0.1:$(cat "$dir/taken")" --job_config="$dir/run.json" \
  --metrics_port="$(cat "$dir/taken")"
kill "$holder" 2>/dev/null

# Partitions: a job whose partitions are not the ones its bound makes is
# refused; a shard whose job file is not the coordinator's (other
# partitions) is refused at registration, naming both, and exits.
partitions() {  # partitions BOUND DIM... : a one-layer job of 100 elements cut into parts of DIM
  local bound="$1" offset=0 groups="" g=0; shift
  for dim in "$@"; do
    groups+="${groups:+, }{\"group\": $g, \"dim\": $dim, \"offset\": $offset, \"compressor\": \"dense\", \"layerEnd\": 1}"
    offset=$((offset + dim)); g=$((g + 1))
  done
  echo "{\"job\": \"j\", \"worldSize\": 2, \"run\": {\"workload\": \"mlp\", \"layerSizes\": [\"100\"],
    \"partitionElements\": \"$bound\"}, \"groups\": [$groups]}"
}
partitions 50 50 50 >"$dir/halves.json"
partitions 0 100 >"$dir/whole.json"
partitions 40 50 50 >"$dir/not_the_bounds.json"
expect_refusal "group 0 (offset 0, 50 elements) is not a partition that partition_elements 40 makes" \
  --job_config="$dir/not_the_bounds.json"
"$bin" --job_config="$dir/halves.json" --num_shards=2 --coordinator --port=0 --port_file="$dir/coordinator_port" \
  >"$dir/coordinator.log" 2>&1 &
coordinator=$!
for _ in $(seq 100); do [ -s "$dir/coordinator_port" ] && break; sleep 0.1; done
expect_refusal "serves another job config (config '" --job_config="$dir/whole.json" --shard_index=1 --num_shards=2 \
  --coordinator_address="127.0.0.1:$(cat "$dir/coordinator_port")"
grep -qF "'1 group') than the coordinator's (config" "$dir/stderr" \
  && grep -qF "2 partitions of 1 fused group (partition_elements 50))" "$dir/stderr" \
  || { echo "FAIL: the refusal does not name both partitionings:"; cat "$dir/stderr"; failures=$((failures + 1)); }
kill "$coordinator" 2>/dev/null; wait "$coordinator" 2>/dev/null

if "$bin" --help >"$dir/help" 2>&1; then :; fi
for flag in job_config shard_index num_shards port token_file tls_cert tls_key tls_client_ca coordinator \
            coordinator_address coordinator_ca advertise_address liveness_timeout_ms max_message_mb metrics_port \
            state_dir; do
  grep -q -- "-$flag" "$dir/help" || { echo "FAIL: --help does not explain --$flag"; failures=$((failures + 1)); }
done
[ "$failures" -eq 0 ] && echo "all refusals are clear" || echo "$failures failure(s)"
exit "$failures"
