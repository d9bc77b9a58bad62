#!/usr/bin/env python3
"""The training-quality sweep: every scheme at target compression ratios on
both models, each run a real local cluster (scripts/local_cluster.sh: server
shards and 4 worker processes on loopback, LibTorch, Fashion-MNIST), next to
dense_allreduce (and a 16-bit dense allreduce when the build has one) trained
the same way.

  python3 bench/quality_sweep.py [--models=mlp,cnn] [--ratios=10,30,100,300]
                                 [--schemes=...] [--seeds=1] [--out=DIR]
                                 [--worker_flags='--release_cap=0 ...']

For each (model, scheme, ratio, seed) it derives the compressor spec that
sends about 1/ratio of the dense gradient's bytes per worker (the ratio the
run reports is the one measured), runs the cluster, and collects the final
test accuracy, the measured ratio and bytes, whether the run diverged, and
the time until it first reaches the model's dense_allreduce final accuracy
minus one point (on the curve's fixed test subset). Writes DIR/quality.csv,
DIR/quality.json, DIR/quality.md (the table) and DIR/quality.png (test
accuracy against bytes sent per worker per step, one line per scheme, one
panel per model; needs gnuplot). A scheme whose spec cannot reach a ratio
(a selection above every coordinate) is skipped for it and listed.

Every scheme of the registry that compresses has a ratio rule (the dense ones
are the baselines): the fixed-size sketch's routes (fixed_sketch_ps,
fixed_sketch_allreduce, fixed_sketch_auto) at the registry's shape, and the
hybrids at their centralized route's bytes; --schemes names them (the default
list is the sweep's of 2026-11-25). Scheme names are the registry's,
optionally with a variant after a slash:
  sketch_ps/fetchsgd, sketch_allreduce/fetchsgd  FetchSGD (sketch-space state)
  sketch_ps/estimate, sketch_allreduce/estimate  the estimate decode with
                                                 worker-side error feedback
  sketch_ps/estimate2r, sketch_allreduce/estimate2r   the same with the
                                                 exact second round
"""
import argparse
import csv
import json
import os
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_SCHEMES = ["sketch_ps", "sketch_allreduce", "topk_allgather", "gtopk", "spardl", "importance_allreduce",
                   "topk_ps"]
BASELINES = ["dense_allreduce", "dense_bf16_allreduce"]

# Bytes a worker sends per selected coordinate of its group, in floats of
# the dense gradient, measured on the runs of the main job (W = 4; see
# docs/BENCHMARKS.md): the density for a target ratio R is 1 / (c * R).
SPARSE_FLOATS_PER_SELECTED = {
    "topk_ps": 2.0,  # (index, value) pushed once
    "gtopk": 4.0,
    "spardl": 3.0,
    "importance_allreduce": 2.3 * 4,  # density is per rank; all allreduce the union (up to P k values)
}


# The two-round fixed-size sketch's shape, the registry's (kFixedSketchSpec in
# worker/schemes/scheme_registry.cc, checked by quality_sweep_test): a 1 x k
# table of bfloat16 cells and 2k candidate values, k = density x group size.
FIXED_SKETCH_SHAPE = "rows=1,width=1,candidates=2,table=bf16"
FIXED_SKETCHES = ("fixed_sketch_ps", "fixed_sketch_allreduce", "fixed_sketch_auto")


def ring_factor(workers):
    """A ring allreduce sends 2(W-1)/W of its data per worker."""
    return 2.0 * (workers - 1) / workers


def fixed_sketch_floats_per_selected(base, workers):
    """Floats of the dense gradient a worker sends per selected coordinate (k)
    on a fixed-size sketch route (docs/BENCHMARKS.md, "Scale out: a sketch whose
    bytes do not grow with the workers"): its table at 2 bytes a cell and 2k
    float32 candidate values, pushed once to a shard (fixed_sketch_ps; the
    hybrid while its shards answer); the ring sums the table in float32 and
    moves 2(W-1)/W of both each way."""
    if base == "fixed_sketch_allreduce":
        return (1.0 + 2.0) * ring_factor(workers)
    return 0.5 + 2.0


def spec_for(scheme, ratio, workers):
    """(scheme to run, extra worker flags) for about `ratio`x, or None when out of reach."""
    base, _, variant = scheme.partition("/")
    run_as = base
    if base == "auto":
        # The peel's hybrid pushes like sketch_ps while its shards answer.
        if variant:
            raise ValueError(f"auto has no variant '{variant}'")
        base = "sketch_ps"
    allreduce = base == "sketch_allreduce"
    factor = ring_factor(workers) if allreduce else 1.0
    if base in ("sketch_ps", "sketch_allreduce"):
        if variant in ("", "peel"):
            # 4 rows of width = workers per selected coordinate: cells = 16 k at
            # 4 workers, a quarter load for the union of 4 disjoint selections.
            rows, width = 4, workers
            density = 1.0 / (rows * width * ratio * factor)
            return run_as, [f"--compressor=count_sketch:method=peel,density={density:.6g},rows={rows},width={width}"]
        rows, width = 5, 10  # FetchSGD's and Sketched-SGD's r = 5, c/k = 10
        density = 1.0 / (rows * width * ratio * factor)
        if variant == "fetchsgd":
            return run_as, [f"--compressor=count_sketch:method=fetchsgd,density={density:.6g},rows={rows},width={width}"]
        if variant == "estimate":
            return run_as, [f"--compressor=count_sketch:method=estimate,density={density:.6g},rows={rows},width={width}"]
        if variant == "estimate2r":
            # The second round sends one more value per decoded coordinate.
            density = 1.0 / ((rows * width + 2) * ratio * factor)
            return run_as, [f"--compressor=count_sketch:method=estimate,density={density:.6g},rows={rows},width={width}",
                            "--second_round"]
        raise ValueError(f"unknown variant '{variant}' of {base}")
    if variant:
        raise ValueError(f"{base} has no variant '{variant}'")
    if base in FIXED_SKETCHES:
        density = 1.0 / (fixed_sketch_floats_per_selected(base, workers) * ratio)
        if density > 1:
            return None
        return base, [f"--compressor=count_sketch:method=candidates,density={density:.6g},{FIXED_SKETCH_SHAPE}"]
    if base == "topk_allgather":
        density = 1.0 / (2.0 * (workers - 1) * ratio)
    elif base in SPARSE_FLOATS_PER_SELECTED:
        density = 1.0 / (SPARSE_FLOATS_PER_SELECTED[base] * ratio)
    else:
        raise ValueError(f"no ratio rule for scheme '{base}'")
    if density > 1:
        return None
    name = "importance" if base == "importance_allreduce" else "topk"
    return base, [f"--compressor={name}:density={density:.6g}"]


def run_cluster(model, scheme, flags, seed, args, out):
    """Runs one local cluster; returns its run record (comparison.json's) or raises."""
    if os.path.exists(out):
        shutil.rmtree(out)
    cmd = ["bash", os.path.join(ROOT, "scripts/local_cluster.sh"), f"--workload={model}", f"--schemes={scheme}",
           f"--workers={args.workers}", f"--epochs={args.epochs}", f"--train_examples={args.train_examples}",
           f"--out={out}"] + (["--virtual"] if args.virtual else []) + ["--", f"--seed={seed}"] + flags \
        + args.worker_flags.split()
    with open(out + ".log", "w") as log:
        done = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed (exit {done.returncode}); see {out}.log")
    with open(os.path.join(out, "comparison.json")) as f:
        report = json.load(f)
    return report["runs"][0], [c for c in report["curves"] if c["scheme"] == scheme]


def pct(x):
    return "-" if x is None else f"{100 * x:.2f}%"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="mlp,cnn")
    parser.add_argument("--ratios", default="10,30,100,300")
    parser.add_argument("--schemes", default=",".join(DEFAULT_SCHEMES))
    parser.add_argument("--baselines", default=",".join(BASELINES),
                        help="schemes run once per model and seed at their own ratio")
    parser.add_argument("--seeds", default="1")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--virtual", action="store_true",
                        help="run each cluster's workers in one process (local_cluster.sh --virtual): "
                             "64 or 256 workers on one machine")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--train_examples", type=int, default=24000)
    parser.add_argument("--worker_flags", default="",
                        help="more worker flags for every run, space-separated (e.g. --release_cap=0)")
    parser.add_argument("--out", default=os.path.join(ROOT, "out/quality"))
    args = parser.parse_args()
    try:
        models = [m for m in args.models.split(",") if m]
        ratios = [float(r) for r in args.ratios.split(",") if r]
        seeds = [int(s) for s in args.seeds.split(",") if s]
        schemes = [s for s in args.schemes.split(",") if s]
        baselines = [s for s in args.baselines.split(",") if s]
        for s in schemes:
            spec_for(s, 10, args.workers)  # names are checked before anything runs
    except ValueError as e:
        sys.exit(f"quality_sweep: {e}")
    if any(not f.startswith("--") for f in args.worker_flags.split()):
        sys.exit(f"quality_sweep: --worker_flags takes worker flags (--name=value), got '{args.worker_flags}'")
    if any(r <= 0 for r in ratios) or args.workers < 2:
        sys.exit("quality_sweep: ratios must be positive and --workers at least 2")
    for binary in ("bazel-bin/server/sketchfuse_server", "bazel-bin/worker/sketchfuse_worker"):
        if not os.access(os.path.join(ROOT, binary), os.X_OK):
            sys.exit(f"quality_sweep: {binary} is not built (bash scripts/bazel.sh build //server:sketchfuse_server "
                     "//worker:sketchfuse_worker)")
    os.makedirs(os.path.join(args.out, "runs"), exist_ok=True)

    jobs = []
    for model in models:
        for seed in seeds:
            for b in baselines:
                jobs.append((model, b, None, seed))
            for s in schemes:
                for r in ratios:
                    jobs.append((model, s, r, seed))
    rows, skipped, curves = [], [], []
    start = time.time()
    for n, (model, scheme, ratio, seed) in enumerate(jobs, 1):
        if ratio is None:
            run_scheme, flags = scheme, []
        else:
            got = spec_for(scheme, ratio, args.workers)
            if got is None:
                skipped.append(f"{model} {scheme} {ratio:g}x")
                continue
            run_scheme, flags = got
        tag = f"{model}-{scheme.replace('/', '-')}-{'base' if ratio is None else f'{ratio:g}x'}-s{seed}"
        print(f"[{n}/{len(jobs)}] {tag} {' '.join(flags)} ({time.time() - start:.0f}s)", flush=True)
        try:
            run, curve = run_cluster(model, run_scheme, flags, seed, args, os.path.join(args.out, "runs", tag))
        except (RuntimeError, OSError, KeyError, json.JSONDecodeError) as e:
            print(f"  failed: {e}", flush=True)
            rows.append({"model": model, "scheme": scheme, "target_ratio": ratio, "seed": seed, "failed": str(e)})
            continue
        for c in curve:
            curves.append({"model": model, "scheme": scheme, "target_ratio": ratio, "seed": seed, **c})
        rows.append({"model": model, "scheme": scheme, "target_ratio": ratio, "seed": seed,
                     "compressor": run["compressor"], "measured_ratio": run["compression_ratio"],
                     "bytes_sent_per_worker_per_step": run["bytes_sent_per_worker_per_step"],
                     "bytes_received_per_worker_per_step": run.get("bytes_received_per_worker_per_step"),
                     "final_test_accuracy": run["final_test_accuracy"],
                     "diverged_step": None if run["diverged"] is None else run["diverged"]["step"],
                     "wall_s": run["wall_s"], "curve_final": None})
        print(f"  {pct(run['final_test_accuracy'])} at {run['compression_ratio']:.1f}x"
              + ("" if run["diverged"] is None else f" (diverged at step {run['diverged']['step']})"), flush=True)

    # Time to the target: the first curve point at or above the model's (and
    # seed's) dense_allreduce final curve accuracy minus one point.
    def curve_of(row):
        return [c for c in curves if c["model"] == row["model"] and c["scheme"] == row["scheme"]
                and c["target_ratio"] == row["target_ratio"] and c["seed"] == row["seed"]]
    for row in rows:
        points = [c for c in curve_of(row) if c["test_accuracy"] is not None]
        row["curve_final"] = points[-1]["test_accuracy"] if points else None
    for row in rows:
        dense = next((d for d in rows if d["model"] == row["model"] and d["seed"] == row["seed"]
                      and d["scheme"] == "dense_allreduce" and d.get("curve_final") is not None), None)
        row["time_to_target_s"] = None
        if dense is None or "failed" in row:
            continue
        target = dense["curve_final"] - 0.01
        reached = [c for c in curve_of(row) if c["test_accuracy"] is not None and c["test_accuracy"] >= target]
        row["time_to_target_s"] = reached[0]["elapsed_s"] if reached else "never"
        dense_acc = dense["final_test_accuracy"]
        acc = row.get("final_test_accuracy")
        row["points_vs_dense"] = None if acc is None or dense_acc is None else round(100 * (acc - dense_acc), 2)

    fields = ["model", "scheme", "target_ratio", "seed", "compressor", "measured_ratio",
              "bytes_sent_per_worker_per_step", "bytes_received_per_worker_per_step", "final_test_accuracy",
              "points_vs_dense", "diverged_step",
              "time_to_target_s", "curve_final", "wall_s", "failed"]
    with open(os.path.join(args.out, "quality.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
        w.writeheader()
        for row in rows:
            w.writerow({k: row.get(k) for k in fields})
    with open(os.path.join(args.out, "curves.csv"), "w", newline="") as f:
        if curves:
            w = csv.DictWriter(f, fieldnames=list(curves[0]))
            w.writeheader()
            w.writerows(curves)
    with open(os.path.join(args.out, "quality.json"), "w") as f:
        json.dump({"command": " ".join(sys.argv), "worker_flags": args.worker_flags, "workers": args.workers,
                   "virtual": args.virtual,
                   "epochs": args.epochs,
                   "train_examples": args.train_examples, "runs": rows, "skipped": skipped}, f, indent=2)

    lines = ["| model | scheme | target | measured ratio | KiB/step/worker | test accuracy | vs dense | time to target |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for row in rows:
        if "failed" in row:
            lines.append(f"| {row['model']} | {row['scheme']} | {row['target_ratio']} | | | failed | | |")
            continue
        acc = "diverged at step %s" % row["diverged_step"] if row["diverged_step"] is not None else pct(
            row["final_test_accuracy"])
        vs = "" if row.get("points_vs_dense") is None else f"{row['points_vs_dense']:+.2f}"
        ttt = row.get("time_to_target_s")
        ttt = "" if ttt is None else ttt if isinstance(ttt, str) else f"{ttt:.0f} s"
        target = "-" if row["target_ratio"] is None else f"{row['target_ratio']:g}x"
        lines.append(f"| {row['model']} | {row['scheme']} | {target} | {row['measured_ratio']:.1f}x | "
                     f"{row['bytes_sent_per_worker_per_step'] / 1024:.1f} | {acc} | {vs} | {ttt} |")
    if skipped:
        lines.append("\nOut of reach (a selection above every coordinate): " + ", ".join(skipped))
    table = "\n".join(lines)
    with open(os.path.join(args.out, "quality.md"), "w") as f:
        f.write(table + "\n")
    print("\n" + table)
    plot(args.out, rows, models)
    print(f"\nwritten: {args.out}/quality.csv, quality.json, quality.md, curves.csv"
          + (", quality.png" if os.path.exists(os.path.join(args.out, "quality.png")) else ""))


def plot(out, rows, models):
    """quality.png: accuracy against bytes per worker per step, a line per scheme, a panel per model."""
    if shutil.which("gnuplot") is None:
        print("(no plot: gnuplot is not installed)")
        return
    data_dir = os.path.join(out, "plot")
    os.makedirs(data_dir, exist_ok=True)
    panels = []
    for model in models:
        lines = []
        for scheme in sorted({r["scheme"] for r in rows if r["model"] == model}):
            points = sorted((r["bytes_sent_per_worker_per_step"] / 1024, 100 * r["final_test_accuracy"])
                            for r in rows if r["model"] == model and r["scheme"] == scheme and "failed" not in r
                            and r["final_test_accuracy"] is not None and r["diverged_step"] is None)
            if not points:
                continue
            path = os.path.join(data_dir, f"{model}-{scheme.replace('/', '-')}.dat")
            with open(path, "w") as f:
                f.writelines(f"{x} {y}\n" for x, y in points)
            lines.append(f"'{path}' using 1:2 with linespoints title '{scheme}'")
        if lines:
            panels.append(f"set title '{model}: test accuracy against bytes sent'\nplot " + ", ".join(lines))
    if not panels:
        return
    script = (f"set terminal pngcairo size 1400,{520 * len(panels)}\nset output '{out}/quality.png'\n"
              f"set multiplot layout {len(panels)},1\nset logscale x\nset key outside right\n"
              "set xlabel 'KiB sent per worker per step (log)'\nset ylabel 'test accuracy (%)'\nset grid\nset termoption noenhanced\n"
              + "\n".join(panels) + "\nunset multiplot\n")
    done = subprocess.run(["gnuplot"], input=script, text=True, capture_output=True)
    if done.returncode != 0:
        print(f"(no plot: gnuplot: {done.stderr.strip()})")


if __name__ == "__main__":
    main()
