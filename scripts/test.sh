#!/usr/bin/env bash
# The README's test command: installs what is missing, builds everything, runs
# every test (then the unit tests under ASan+UBSan and TSan), and prints one
# closing line "tests: N passed, N failed, N skipped" (a test run under a
# sanitizer counts again).
# Extra arguments go to `bazel test` (e.g. --config=asan).
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash scripts/setup.sh || exit 1

log="$(mktemp)"
trap 'rm -f "$log"' EXIT
bash scripts/bazel.sh test //... --test_summary=short "$@" 2>&1 \
  | grep --line-buffered -v -E 'linux-sandbox(-pid1)?\.cc' | tee "$log"
status=${PIPESTATUS[0]}

# Then the unit and in-process tests again under ASan+UBSan (any undefined
# behaviour fails), and the concurrent cores under TSan. The multi-process
# and LibTorch tests are left out: each sanitized build recompiles what it
# runs. SKETCHFUSE_SKIP_SANITIZERS=1 skips this part.
sanitized=(//common/... //daemon/... //proto/... //server/... //tests/fuzz/... //worker/decentralized/...
           //worker/collective:gloo_collective_test //worker/compression:group_compressors_test
           //tests:step_pipeline_test //worker/rpc:transport_faults_test //worker/core:divergence_test
           //worker/rpc:divergence_notice_test //worker/pipeline:step_stats_test //worker/pipeline:fusion_layout_test
           //tests:grpc_ps_transport_test //tests:hybrid_failover_test //worker/hook:hook_session_test)
# TSan: only tests free of gRPC and Gloo, whose Debian builds are not
# instrumented (TSan then reports their internal synchronization as races).
threaded=(//server:aggregation_core_test //server:coordinator_core_test //worker/rpc:transport_faults_test
          //worker/rpc:divergence_notice_test)
if [ "$status" -eq 0 ] && [ -z "${SKETCHFUSE_SKIP_SANITIZERS:-}" ] && [ $# -eq 0 ]; then
  for config in asan tsan; do
    if [ "$config" = asan ]; then targets=("${sanitized[@]}"); else targets=("${threaded[@]}"); fi
    echo "== the same tests under --config=$config: ${targets[*]}"
    bash scripts/bazel.sh test --config="$config" "${targets[@]}" --test_summary=short 2>&1 \
      | grep --line-buffered -v -E 'linux-sandbox(-pid1)?\.cc' | tee -a "$log"
    status=${PIPESTATUS[0]}
    [ "$status" -eq 0 ] || break
  done
fi

# Count test cases: for each test target in the summary, its GoogleTest log
# (or unittest's; each shard's, for a sharded target) says how many cases
# passed, failed and skipped (GPU tests skip on machines without a GPU). A
# target that failed without a log counts as one failure.
passed=0; failed=0; skipped=0
# count_log LOG: adds the cases LOG reports to the counts (and its failures
# to target_failed); status 1, adding nothing, when LOG reports none.
count_log() {
  local testlog="$1" p f s n e verdict
  if [ -f "$testlog" ] && grep -q '^\[==========\] .* ran\.' "$testlog"; then
    p=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) tests\?\.$/\1/p' "$testlog" | tail -1)
    f=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) tests\?, listed below:$/\1/p' "$testlog" | tail -1)
    s=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) tests\?, listed below:$/\1/p' "$testlog" | tail -1)
    p=${p:-0}
  elif [ -f "$testlog" ] && grep -q -E '^Ran [0-9]+ tests? in' "$testlog"; then
    # Python's unittest (the PyTorch front end's tests): "Ran N tests", then
    # "OK (skipped=S)" or "FAILED (failures=F, errors=E, skipped=S)".
    n=$(sed -n -E 's/^Ran ([0-9]+) tests? in.*/\1/p' "$testlog" | tail -1)
    verdict=$(grep -E '^(OK|FAILED)' "$testlog" | tail -1)
    s=$(sed -n -E 's/.*skipped=([0-9]+).*/\1/p' <<< "$verdict")
    f=$(sed -n -E 's/.*failures=([0-9]+).*/\1/p' <<< "$verdict")
    e=$(sed -n -E 's/.*errors=([0-9]+).*/\1/p' <<< "$verdict")
    f=$(( ${f:-0} + ${e:-0} ))
    p=$(( n - ${s:-0} - f ))
  else
    return 1
  fi
  passed=$((passed + p)); failed=$((failed + ${f:-0})); skipped=$((skipped + ${s:-0}))
  target_failed=$((target_failed + ${f:-0}))
}
while read -r target result; do
  pkg="${target#//}"; pkg="${pkg%%:*}"; name="${target##*:}"
  logs=("bazel-testlogs/$pkg/$name/test.log")
  [ -f "${logs[0]}" ] || logs=(bazel-testlogs/"$pkg"/"$name"/shard_*_of_*/test.log)
  counted=0 target_failed=0
  for testlog in "${logs[@]}"; do
    if count_log "$testlog"; then counted=1; fi
  done
  # A target that passed with no log to count is one case; one that failed
  # without a failed case in its logs (a crash, a timeout, a shard cut off)
  # is one failure.
  if [ "$result" = PASSED ]; then
    [ "$counted" -eq 1 ] || passed=$((passed + 1))
  elif [ "$target_failed" -eq 0 ]; then
    failed=$((failed + 1))
  fi
done < <(sed -n -E 's#^(//[^ ]+) +(\([0-9/ ]*cached\) )?(PASSED|FAILED|TIMEOUT|NO STATUS|FAILED TO BUILD).*#\1 \3#p' "$log" | sed 's/NO STATUS/NO_STATUS/; s/FAILED TO BUILD/FAILED_TO_BUILD/')
if [ "$status" -ne 0 ] && [ "$failed" -eq 0 ]; then
  echo "test.sh: bazel exited with status $status before reporting results" >&2
  failed=1
fi
echo "tests: $passed passed, $failed failed, $skipped skipped"
exit "$status"
