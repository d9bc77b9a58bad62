#!/usr/bin/env python3
"""The digit check: a change that moves code, not arithmetic, must leave
training the same to the digit.

  python3 bench/digit_check.py --out=DIR [--compare=bench/results/digit_check/results.csv]
                               [--worker=PATH] [--only=SUBSTRING]

Runs a fixed set of short virtual-worker jobs (sketchfuse_worker
--virtual_workers=W, seed 1: the in-process collectives and the servers'
aggregation cores, the code the processes run) that covers every route and
method: every scheme at its default on the MLP at 4 workers and the main
ones on the CNN, FetchSGD and the estimate sketch with its exact second
round on both routes, the collective schemes, and the peel and fixed-sketch
routes at 8 and 16 workers at 10x and 50x. Writes DIR/results.csv, one row
per run: final test accuracy, the last epoch's test and train loss (6
decimals) and bytes sent per worker per step. With --compare it then fails
(exit 1), naming every run whose row differs from the reference's (runs it
lacks, such as a scheme added since, are listed as unchecked), so a
structural change is checked against a reference made on the same machine
and BLAS before it (bench/results/digit_check/ keeps one; the digits depend
on the machine and the BLAS, so record the reference where you compare).
Exit status 2 for bad flags or a run that left no summary.
"""
import argparse
import csv
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import registry  # noqa: E402
from harness.worker_runs import read_summary  # noqa: E402

FETCHSGD = "count_sketch:method=fetchsgd,density=0.01,rows=5,width=10"
ESTIMATE = "count_sketch:method=estimate,density=0.01,rows=3,width=10"
FIELDS = ["name", "model", "workers", "scheme", "flags", "test_accuracy", "test_loss", "train_loss",
          "sent_bytes_per_step"]


def runs(schemes):
    """(name, model, workers, train_examples, scheme, extra flags) of every run of
    the check; `schemes`: every scheme the worker lists (registry.load().names()),
    each run at its default on the MLP at 4 workers."""
    out = []

    def add(name, model, workers, scheme, *flags):
        out.append((name, model, workers, 4000 if workers == 4 else 8000, scheme, list(flags)))

    add("mlp_sketch_ps_fetchsgd", "mlp", 4, "sketch_ps", f"--compressor={FETCHSGD}")
    add("mlp_sketch_allreduce_fetchsgd", "mlp", 4, "sketch_allreduce", f"--compressor={FETCHSGD}")
    add("mlp_sketch_ps_second_round", "mlp", 4, "sketch_ps", f"--compressor={ESTIMATE}", "--second_round")
    add("mlp_sketch_allreduce_second_round", "mlp", 4, "sketch_allreduce", f"--compressor={ESTIMATE}",
        "--second_round")
    for s in schemes:
        add(f"mlp_{s}", "mlp", 4, s)
    for s in ("sketch_ps", "fixed_sketch_ps", "fixed_sketch_allreduce", "dense_allreduce", "topk_allgather"):
        add(f"cnn_{s}", "cnn", 4, s)
    add("cnn_sketch_ps_fetchsgd", "cnn", 4, "sketch_ps", f"--compressor={FETCHSGD}")
    for w in (8, 16):
        for s in ("dense_allreduce", "sketch_ps", "sketch_allreduce", "fixed_sketch_ps", "fixed_sketch_allreduce"):
            add(f"mlp_W{w}_{s}_10x", "mlp", w, s)
        add(f"mlp_W{w}_sketch_ps_50x", "mlp", w, "sketch_ps",
            "--compressor=count_sketch:method=peel,density=0.00125,rows=4")
        add(f"mlp_W{w}_sketch_allreduce_50x", "mlp", w, "sketch_allreduce",
            "--compressor=count_sketch:method=peel,density=0.00084,rows=4")
        add(f"mlp_W{w}_fixed_sketch_ps_50x", "mlp", w, "fixed_sketch_ps",
            "--compressor=count_sketch:method=candidates,density=0.00666,rows=1,width=1,candidates=2")
        for s in ("dense_allreduce", "sketch_ps", "sketch_allreduce"):
            add(f"cnn_W{w}_{s}_10x", "cnn", w, s)
        add(f"cnn_W{w}_sketch_ps_50x", "cnn", w, "sketch_ps",
            "--compressor=count_sketch:method=peel,density=0.00125,rows=4")
    return out


def run_one(worker, out, name, model, workers, examples, scheme, flags):
    cmd = [worker, f"--virtual_workers={workers}", f"--workload={model}", f"--scheme={scheme}", "--epochs=1",
           f"--train_examples={examples}", "--report_every=0", "--seed=1"] + flags
    path = os.path.join(out, "runs", f"{name}.out")
    with open(path, "w") as f:
        subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT)
    s = read_summary(path)
    if s is None:
        raise RuntimeError(f"{name}: no summary (see {path})")
    last = s["epochs"][-1]
    accuracy = s["final_test_accuracy"]
    return {"name": name, "model": model, "workers": workers, "scheme": scheme, "flags": " ".join(flags),
            "test_accuracy": "" if accuracy is None else f"{accuracy:.4f}",
            "test_loss": f"{last['test_loss']:.6f}", "train_loss": f"{last['train_loss']:.6f}",
            "sent_bytes_per_step": f"{s['bytes_sent_per_step']:.1f}"}


def compare(rows, reference_path):
    """(moved, new): the runs whose row differs from the reference's, with
    what moved, and the names of the runs the reference lacks (a scheme or run
    added since it was recorded: not a failure, but nothing checks them)."""
    with open(reference_path, newline="") as f:
        reference = {r["name"]: r for r in csv.DictReader(f)}
    moved, new = [], []
    for r in rows:
        ref = reference.get(r["name"])
        if ref is None:
            new.append(r["name"])
            continue
        differ = [k for k in FIELDS if str(r[k]) != ref.get(k, "")]
        if differ:
            moved.append(f"{r['name']}: " + ", ".join(f"{k} {ref.get(k)} -> {r[k]}" for k in differ))
    return moved, new


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True)
    parser.add_argument("--compare", default=None, help="a reference results.csv to compare with")
    parser.add_argument("--worker", default=None, help="the worker binary (default: bazel-bin's)")
    parser.add_argument("--only", default="", help="run only the runs whose name contains this")
    args = parser.parse_args(argv)
    try:
        reg = registry.load(args.worker)  # checks the binary, and every scheme named here
    except registry.RegistryError as e:
        print(f"digit_check: {e}", file=sys.stderr)
        return 2
    worker = args.worker or os.environ.get("SKETCHFUSE_WORKER") or registry.DEFAULT_WORKER
    plan = [r for r in runs(reg.names()) if args.only in r[0]]
    for r in plan:
        reg.get(r[4])
    if not plan:
        print(f"digit_check: no run's name contains '{args.only}'", file=sys.stderr)
        return 2
    if args.compare and not os.path.exists(args.compare):
        print(f"digit_check: no reference at {args.compare}", file=sys.stderr)
        return 2
    os.makedirs(os.path.join(args.out, "runs"), exist_ok=True)
    rows = []
    for n, (name, model, workers, examples, scheme, flags) in enumerate(plan, 1):
        try:
            row = run_one(worker, args.out, name, model, workers, examples, scheme, flags)
        except RuntimeError as e:
            print(f"digit_check: {e}", file=sys.stderr)
            return 2
        rows.append(row)
        print(f"[{n}/{len(plan)}] {name:<36} acc {row['test_accuracy']} test_loss {row['test_loss']} "
              f"train_loss {row['train_loss']} sent {row['sent_bytes_per_step']}", flush=True)
    with open(os.path.join(args.out, "results.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)
        w.writeheader()
        w.writerows(rows)
    print(f"written: {args.out}/results.csv")
    if args.compare:
        moved, new = compare(rows, args.compare)
        for p in moved:
            print(f"differs: {p}")
        if new:
            print(f"not in the reference (unchecked; record a new reference to keep them): {', '.join(new)}")
        print(f"digit_check: {len(rows) - len(moved) - len(new)} of {len(rows)} runs equal {args.compare} "
              f"to the digit, {len(moved)} moved")
        return 1 if moved else 0
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
