#!/usr/bin/env python3
"""Prints the rule comparison of this folder's README: each run of the wide CNN at 4, 16, 64 and
256 workers, 10x, made with the worker's default since 2026-11-29 (error feedback's residual in
units of the learning rate; this folder's runs/) beside the same command made with the old rule
(the raw residual; ../runs/, the study of 2026-11-29), each with its gap to dense.

    python3 bench/data/scale/study_cnn_wide/ef_rate/compare.py

Reads only the runs' summaries; a run missing on either side prints as 'not run'."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", ".."))  # bench/ (scale_study.py)
from scale_study import DIVERGED_BELOW, read_summary  # noqa: E402
OLD = os.path.join(HERE, "..", "runs")
NEW = os.path.join(HERE, "runs")
SCHEMES = ["fixed_sketch_ps", "topk_ps", "sketch_ps", "spardl", "topk_allgather", "gtopk",
           "sketch_allreduce", "fixed_sketch_allreduce"]


def cell(s, dense):
    """The table's cell for summary `s` (None: not run) and its accuracy in points, None where
    the run did not train; with its gap to `dense` (points) where that is known."""
    if s is None:
        return "not run", None
    if s.get("diverged"):
        return f"diverged (step {s['diverged']['step']})", None
    acc = 100 * s["final_test_accuracy"]
    if acc < 100 * DIVERGED_BELOW:  # the study's rule: a run that ends at chance has diverged
        return f"at chance ({acc:.2f}%)", None
    if dense is None:
        return f"{acc:.2f}%", acc
    return f"{acc:.2f}% ({acc - dense:+.2f})", acc


def main():
    print("| workers, scheme (10x) | raw residual (the old rule, ../runs/) | units of the rate (the default, runs/) "
          "| change | bytes per step, sent + received |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for w in (4, 16, 64, 256):
        base = f"cnn_wide_W{w}_dense_allreduce_base.out"
        d_old, d_new = read_summary(os.path.join(OLD, base)), read_summary(os.path.join(NEW, base))
        dense_old = None if d_old is None else 100 * d_old["final_test_accuracy"]
        dense_new = None if d_new is None else 100 * d_new["final_test_accuracy"]
        print(f"| {w}, `dense_allreduce` | {cell(d_old, None)[0]} | {cell(d_new, None)[0]} | | "
              f"{'' if d_new is None else round(d_new['bytes_sent_per_step'] + d_new['bytes_received_per_step'])} |")
        for scheme in SCHEMES:
            name = f"cnn_wide_W{w}_{scheme}_10x.out"
            old, new = read_summary(os.path.join(OLD, name)), read_summary(os.path.join(NEW, name))
            if old is None and new is None:
                continue
            (c_old, a_old), (c_new, a_new) = cell(old, dense_old), cell(new, dense_new)
            change = "" if a_old is None or a_new is None else f"{a_new - a_old:+.2f}"
            b = new or old
            print(f"| {w}, `{scheme}` | {c_old} | {c_new} | {change} | "
                  f"{round(b['bytes_sent_per_step'] + b['bytes_received_per_step'])} |")


if __name__ == "__main__":
    main()
