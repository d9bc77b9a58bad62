#!/usr/bin/env bash
# The layering rule of docs/ARCHITECTURE.md: the aggregation shards (server/),
# the worker's schemes (worker/schemes/) and the rounds algorithm with its
# reducers (worker/rounds/) hold a method's state and run its rounds without
# naming the method. A method's own code lives in common/ (its
# compressor and its AggregationState) and worker/decentralized/ (its
# collective algorithm); here nothing may name FetchSGD or switch on
# count_sketch's methods. Test files are exempt (they compare against the
# methods' references). Fails listing each offending line.
#   method_names_test.sh FILE...   (the sources of server/, worker/schemes/ and worker/rounds/)
set -euo pipefail
[ "$#" -gt 0 ] || { echo "method_names_test: no files given" >&2; exit 2; }
status=0
checked=0
for file in "$@"; do
  case "$file" in *_test.cc|*_test.h|*_test.sh) continue ;; esac
  checked=$((checked + 1))
  if hits=$(grep -n -i -E 'fetch_?sgd|SketchLayout::Method' "$file"); then
    while IFS= read -r hit; do echo "$file:$hit: names a method" >&2; done <<<"$hits"
    status=1
  fi
done
[ "$checked" -ge 10 ] || { echo "method_names_test: only $checked sources checked; the file lists are wrong" >&2; exit 1; }
[ "$status" -eq 0 ] && echo "method_names_test: $checked sources of server/, worker/schemes/ and worker/rounds/ name no method"
exit "$status"
