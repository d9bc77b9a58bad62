#!/usr/bin/env bash
# The sketchfuse_compression_report binary answers malformed flags with a clear
# error on stderr and a non-zero exit, and writes nothing.
set -uo pipefail
bin="$1"
out_dir="${TEST_TMPDIR:-$(mktemp -d)}"
failures=0

expect_refusal() {
  local needle="$1"; shift
  local stderr_file="$out_dir/stderr"
  if "$bin" "$@" --csv="$out_dir/should_not_exist.csv" >/dev/null 2>"$stderr_file"; then
    echo "FAIL: '$*' succeeded"; failures=$((failures + 1)); return
  fi
  if ! grep -qF -- "$needle" "$stderr_file"; then
    echo "FAIL: '$*' did not say '$needle'; it said:"; cat "$stderr_file"
    failures=$((failures + 1)); return
  fi
  if [ -e "$out_dir/should_not_exist.csv" ]; then
    echo "FAIL: '$*' wrote its CSV"; failures=$((failures + 1)); return
  fi
  echo "ok: $* -> $(head -1 "$stderr_file")"
}

expect_refusal "Illegal value 'abc' specified for flag 'density'" --density=abc
expect_refusal "density must be in (0, 1]" --density=0
expect_refusal "unknown parameter 'rows' (accepted: density, k)" --compressors='topk:rows=3'
expect_refusal "unknown compressor 'sketchy'" --compressors='sketchy'
expect_refusal "parameter 'k' is repeated" --compressors='topk:k=1,k=2'
expect_refusal 'unknown model profile "resnet51"' --model=resnet51
expect_refusal "unexpected argument 'extra'" extra
expect_refusal "link_gbps must be > 0" --link_gbps=-1
expect_refusal "fusion" --fusion=sometimes
expect_refusal "Unknown command line flag 'modle'" --modle=resnet50

if "$bin" --help >"$out_dir/help" 2>&1; then :; fi
for flag in model compressors density fusion link_gbps csv json; do
  grep -q -- "-$flag" "$out_dir/help" || { echo "FAIL: --help does not explain --$flag"; failures=$((failures + 1)); }
done

echo "$failures failure(s)"
[ "$failures" -eq 0 ]
