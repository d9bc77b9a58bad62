#!/usr/bin/env bash
# Reruns a scale-study run with one knob changed: the command on the first line of
# STUDY_OUTPUT (bench/scale_study.py writes it there), with the worker flags given after it
# (later flags override earlier ones), its output into OUT; prints the final accuracy and
# the step it diverged at, if it did. SKETCHFUSE_WORKER replaces the recorded binary.
#   bash rerun_with.sh STUDY_OUTPUT OUT [worker flags]
set -euo pipefail
if [ $# -lt 2 ] || [ ! -f "$1" ]; then
  echo "usage: rerun_with.sh STUDY_OUTPUT OUT [worker flags] (STUDY_OUTPUT: a study run's .out)" >&2; exit 2
fi
src="$1"; out="$2"; shift 2
first="$(head -n 1 "$src")"
if [ "${first:0:2}" != "# " ] || [[ "$first" != *" --virtual_workers="* ]]; then
  echo "rerun_with.sh: $src is not a study run's output (its first line is not '# WORKER --virtual_workers=...')" >&2; exit 2
fi
read -r -a cmd <<<"${first:2}"
cmd[0]="${SKETCHFUSE_WORKER:-${cmd[0]}}"
status=0
"${cmd[@]}" "$@" >"$out" 2>&1 || status=$?
accuracy="$(grep -o '"final_test_accuracy": [^,]*' "$out" || true)"
if [ -z "$accuracy" ]; then  # no summary: the run failed before it ended; say how
  echo "$(basename "$out" .out): no summary (exit $status): $(tail -n 1 "$out")"; exit 0
fi
echo "$(basename "$out" .out): $accuracy, $(grep -o 'diverged at step [0-9]*' "$out" | head -1)"
