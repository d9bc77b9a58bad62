#!/usr/bin/env bash
# Validates SketchFuse's Kubernetes manifests offline, as CI does:
#   1. renders the base and every overlay with `kubectl kustomize` (no cluster needed);
#   2. checks each render with validate.mjs (kubernetes-models schemas, plus unknown fields
#      along its TypeScript declarations) and consistency.mjs (replica counts against the run,
#      the run flags alike in servers and workers, script variables and syntax);
#   3. checks that each count is one value: the example overlay's NUM_SHARDS=4 and WORLD_SIZE=8
#      reach the StatefulSet's replicas and the Job's completions;
#   4. proves the check can fail: renders with an unknown field and with a string port
#      injected must be refused, naming the field, and a render whose replicas differ from
#      NUM_SHARDS must be refused by consistency.mjs.
# Exit status 0 when everything holds, 1 otherwise. Prints `SKIP: ...` and exits 0 only when
# kubectl or node is not installed. Installs the validator's npm packages (package-lock.json)
# when node_modules is missing: next to this script when its folder is writable and not a
# Bazel runfiles tree, else in a temporary copy of the validator. Runs from any directory.
#
#   bash deploy/validate/check_manifests.sh
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# Under `bazel test` the script runs as deploy/manifests_test; its files are in the runfiles.
if [ -n "${TEST_SRCDIR:-}" ]; then here="$TEST_SRCDIR/${TEST_WORKSPACE:-sketchfuse}/deploy/validate"; fi
cd "$here"
k8s="$here/../k8s"
targets=(base overlays/cpu overlays/gpu overlays/cpu-tls examples/eight-workers-four-shards)

for tool in kubectl node; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "SKIP: $tool is not installed; the Kubernetes manifests were not validated."
    exit 0
  fi
done

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
if [ -n "${TEST_SRCDIR:-}" ]; then
  # Runfiles are symlinks, which kustomize refuses to follow out of a root:
  # render real copies. kubectl's cache goes to the scratch folder too.
  cp -rL "$k8s" "$tmp/k8s" && k8s="$tmp/k8s"
  export HOME="$tmp"
fi

if [ ! -d node_modules/kubernetes-models ] || [ ! -d node_modules/js-yaml ]; then
  command -v npm >/dev/null 2>&1 || { echo "check_manifests: node is installed but npm is not; cannot install the validator's packages" >&2; exit 1; }
  if [ -n "${TEST_SRCDIR:-}" ] || [ ! -w . ]; then
    # Under `bazel test` (a runfiles tree) or a read-only checkout: a private copy.
    mkdir -p "$tmp/validator"
    cp -L package.json package-lock.json validate.mjs consistency.mjs "$tmp/validator/" \
      || { echo "check_manifests: cannot copy the validator from $here" >&2; exit 1; }
    cd "$tmp/validator"
    # The sandbox's home is read-only: npm's cache and logs go to the copy.
    export npm_config_cache="$tmp/npm-cache"
  fi
  echo "check_manifests: installing the validator's npm packages (npm ci)"
  # kubernetes-models 5.x declares node >= 22 but runs on node 20: keep npm's engine warning quiet.
  npm ci --no-audit --no-fund --loglevel=error >&2 || { echo "check_manifests: npm ci failed" >&2; exit 1; }
fi
failed=0

# --- the manifests as shipped -----------------------------------------------------------------
for target in "${targets[@]}"; do
  schema="" consistency=""
  out="$tmp/$(echo "$target" | tr / _).yaml"
  if ! kubectl kustomize "$k8s/$target" >"$out" 2>"$tmp/kustomize.err"; then
    echo "FAIL $target: kubectl kustomize failed:"; sed 's/^/    /' "$tmp/kustomize.err"
    failed=1; continue
  fi
  if schema="$(node validate.mjs "$out" 2>&1)" && consistency="$(node consistency.mjs "$out" 2>&1)"; then
    echo "ok   $target: $schema; $consistency"
  else
    echo "FAIL $target:"; { echo "$schema"; echo "${consistency:-}"; } | sed '/^$/d; s/^/    /'
    failed=1
  fi
done

# --- each count is one value: the example's ConfigMap reaches the replica counts ---------------------
example="$tmp/examples_eight-workers-four-shards.yaml"
if [ -s "$example" ]; then
  # consistency.mjs holds the replicas to the ConfigMap's counts, which it prints.
  if counts="$(node consistency.mjs "$example" 2>&1)" && grep -qF "WORLD_SIZE=8 workers, NUM_SHARDS=4 shards" <<<"$counts"; then
    echo "ok   counts: WORLD_SIZE=8 and NUM_SHARDS=4, set once in the ConfigMap, reach the Job and the StatefulSet"
  else
    echo "FAIL counts: WORLD_SIZE=8 and NUM_SHARDS=4 in the ConfigMap did not reach the replica counts:"
    sed 's/^/    /' <<<"$counts"; failed=1
  fi
else
  echo "FAIL counts: no render of examples/eight-workers-four-shards"; failed=1
fi

# --- the check must fail on broken manifests -----------------------------------------------------
good="$tmp/overlays_cpu.yaml"
# expect_refused NAME SED_EXPRESSION EXPECTED_MESSAGE: the render edited by SED_EXPRESSION must
# be refused by validate.mjs with a line containing EXPECTED_MESSAGE.
expect_refused() {
  local name="$1" edit="$2" expected="$3" broken="$tmp/broken.yaml" output status
  sed -e "$edit" "$good" >"$broken"
  if cmp -s "$good" "$broken"; then
    echo "FAIL self-test $name: the edit changed nothing (the manifests moved?)"; failed=1; return
  fi
  output="$(node validate.mjs "$broken" 2>&1)"; status=$?
  if [ "$status" -eq 1 ] && grep -qF -- "$expected" <<<"$output"; then
    echo "ok   self-test $name: refused: $(grep -F -m1 -- "$expected" <<<"$output")"
  else
    echo "FAIL self-test $name: expected exit 1 and '$expected'; got exit $status:"
    sed 's/^/    /' <<<"$output"
    failed=1
  fi
}
if [ -s "$good" ]; then
  expect_refused "unknown field" '0,/imagePullPolicy:/s//imagePullPolcy:/' 'imagePullPolcy is not a field'
  expect_refused "string port" 's/containerPort: 7070/containerPort: "7070"/' 'containerPort must be integer'
  expect_refused "unknown kind" 's/^kind: PodDisruptionBudget$/kind: PodDisruptionBudgit/' "unsupported kind 'PodDisruptionBudgit'"
  # A count patched past components/counts: the replicas no longer follow NUM_SHARDS.
  sed -e 's/^  replicas: 2$/  replicas: 3/' "$good" >"$tmp/broken.yaml"
  if cmp -s "$good" "$tmp/broken.yaml"; then
    echo "FAIL self-test replicas: the edit changed nothing (the manifests moved?)"; failed=1
  elif output="$(node consistency.mjs "$tmp/broken.yaml" 2>&1)"; then
    echo "FAIL self-test replicas: replicas 3 with NUM_SHARDS 2 was accepted: $output"; failed=1
  elif grep -qF "replicas (3) must equal NUM_SHARDS (2)" <<<"$output"; then
    echo "ok   self-test replicas: refused: $(grep -F -m1 "replicas (3)" <<<"$output")"
  else
    echo "FAIL self-test replicas: refused without naming the replicas:"; sed 's/^/    /' <<<"$output"; failed=1
  fi
else
  echo "FAIL self-test: no render of overlays/cpu to break"; failed=1
fi

if [ "$failed" -ne 0 ]; then
  echo "check_manifests: FAILED"
  exit 1
fi
echo "check_manifests: all manifests valid; broken ones refused"
