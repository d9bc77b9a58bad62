#!/usr/bin/env python3
"""Shards that share the load: the main job's MLP on 1, 2 and 4 shards.

Runs scripts/local_cluster.sh once per shard count (each process on a host of
its own behind a shaped link, --link; the job partitioned for its shards, as
--write_job_config --num_shards does by default), and reports per run:

  - each shard's partitions, bytes in and out per step and decode time per
    step (from the line each shard prints when it stops), and the largest
    shard's share of the bytes and of the decode time;
  - worker 0's mean step time, and its communicate + decode phase: per step,
    from the first push of the step to the last answer (the shards' merge
    and decode included), as the worker's timeline (trace0.json) records
    it, the median over the steps after the first. (The summary's phases_s
    adds the groups' times up, which counts partitions exchanged at once
    several times over.)
  - final accuracy (the partitions change what a sketch selects per part, so
    accuracy is reported, not assumed).

Targets (issue "Sharded servers that share the load"): with 2 shards no shard
carries more than 55% of the bytes or of the decode time; the communicate +
decode phase falls by at least 1.6x from 1 to 2 shards and 2.5x from 1 to 4
shards where the shards have their own cores. The machine's core count is
printed beside the figures: on a machine with fewer cores than processes the
shards share cores with the workers.

  python3 bench/shard_scaling.py [--shards=1,2,4] [--link=200mbit] [--workers=4]
                                 [--schemes=sketch_ps] [--epochs=1]
                                 [--train_examples=12000] [--out=DIR] [--reuse]

Writes DIR/shard_scaling.csv, DIR/shard_scaling.json, DIR/shard_scaling.txt
(this report) and, with gnuplot, DIR/shard_scaling.png; each run's own output
under DIR/s<S>/ (their shards' journals, tokens and merged timelines are
removed; worker 0's timeline is kept). --reuse reads runs already under DIR
instead of running them again.
"""
import argparse
import csv
import json
import os
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def positive_list(text):
    try:
        values = [int(v) for v in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated positive integers; got {text!r}")
    if not values or any(v < 1 for v in values):
        raise argparse.ArgumentTypeError(f"expected comma-separated positive integers; got {text!r}")
    return values


def exchange_wall_ms(trace_path):
    """Median over steps (after the first) of the time from a step's first
    push to its last answer in worker 0's timeline."""
    events = json.load(open(trace_path))["traceEvents"]
    spans = {}
    for e in events:
        if e.get("ph") != "X" or e.get("tid", 0) == 0 or e.get("name") == "compress":
            continue
        step = int(e["args"]["step"])
        begin, end = e["ts"], e["ts"] + e["dur"]
        low, high = spans.get(step, (begin, end))
        spans[step] = (min(low, begin), max(high, end))
    walls = sorted(1e-3 * (high - low) for step, (low, high) in spans.items() if step > 0)
    return walls[len(walls) // 2] if walls else None


def prune(out):
    """Drops what a run leaves that is not its record: journals, tokens,
    ports and the merged timelines (worker 0's own is kept)."""
    for scheme_dir in [os.path.join(out, d) for d in os.listdir(out) if os.path.isdir(os.path.join(out, d))]:
        shutil.rmtree(os.path.join(scheme_dir, "state"), ignore_errors=True)
        for name in os.listdir(scheme_dir):
            if name in ("token", "shard_token", "timeline.json") or name.startswith("port") or \
                    (name.startswith("trace") and name != "trace0.json"):
                os.remove(os.path.join(scheme_dir, name))


def run_cluster(args, shards, out):
    if args.reuse and os.path.exists(os.path.join(out, "comparison.json")):
        return json.load(open(os.path.join(out, "comparison.json")))
    command = ["bash", os.path.join(ROOT, "scripts/local_cluster.sh"), f"--workers={args.workers}",
               f"--shards={shards}", f"--schemes={args.schemes}", "--workload=mlp", f"--epochs={args.epochs}",
               f"--train_examples={args.train_examples}", f"--link={args.link}", f"--out={out}"]
    print("$ " + " ".join(command), flush=True)
    with open(os.path.join(out + ".log"), "w") as log:
        done = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT)
    if done.returncode != 0:
        sys.exit(f"shard_scaling: the cluster with {shards} shard(s) failed; see {out}.log")
    prune(out)
    return json.load(open(os.path.join(out, "comparison.json")))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shards", type=positive_list, default=[1, 2, 4])
    parser.add_argument("--link", default="200mbit")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--schemes", default="sketch_ps")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--train_examples", type=int, default=12000)
    parser.add_argument("--out", default="out/shard_scaling")
    parser.add_argument("--reuse", action="store_true", help="read the runs already under --out")
    args = parser.parse_args()
    if args.workers < 1 or args.epochs < 1 or args.train_examples < 1:
        sys.exit("shard_scaling: --workers, --epochs and --train_examples must be >= 1")
    os.makedirs(args.out, exist_ok=True)

    rows = []
    for shards in args.shards:
        out = os.path.join(args.out, f"s{shards}")
        comparison = run_cluster(args, shards, out)
        for run in comparison["runs"]:
            summary = json.load(open(os.path.join(out, run["scheme"], "summary0.json")))
            phases = summary.get("phases_s") or {}
            loads = run.get("shards") or []
            total_in = sum(x["bytes_in_per_step"] for x in loads) or None
            total_decode = sum(x["decode_ms_per_step"] for x in loads) or None
            rows.append({
                "scheme": run["scheme"], "shards": shards, "link": args.link, "workers": args.workers,
                "final_test_accuracy": run["final_test_accuracy"], "mean_step_ms": run["mean_step_ms"],
                "backward_ms": 1e3 * phases.get("backward", 0), "compress_ms": 1e3 * phases.get("compress", 0),
                "communicate_decode_ms": exchange_wall_ms(os.path.join(out, run["scheme"], "trace0.json")),
                "max_shard_bytes_share": None if total_in is None else
                    max(x["bytes_in_per_step"] for x in loads) / total_in,
                "max_shard_decode_share": None if total_decode is None else
                    max(x["decode_ms_per_step"] for x in loads) / total_decode,
                "shard_loads": loads})

    lines = [f"MLP, {args.workers} workers, every process on its own host behind a {args.link} link; "
             f"{os.cpu_count()} cores on this machine"]
    lines.append(f"{'scheme':<12} {'shards':>6} {'accuracy':>9} {'step ms':>8} {'comm+dec ms':>12} "
                 f"{'max bytes':>10} {'max decode':>11}  per shard: partitions, KiB in/out per step, decode ms/step")
    for r in rows:
        share = lambda v: f"{'-':>10}" if v is None else f"{100 * v:>9.1f}%"
        per_shard = "; ".join(f"{x['shard']}: [{x['groups']}] {x['bytes_in_per_step'] / 1024:.1f}/"
                              f"{x['bytes_out_per_step'] / 1024:.1f} KiB {x['decode_ms_per_step']:.2f} ms"
                              for x in r["shard_loads"])
        accuracy = "-" if r["final_test_accuracy"] is None else f"{100 * r['final_test_accuracy']:.2f}%"
        lines.append(f"{r['scheme']:<12} {r['shards']:>6} {accuracy:>9} {r['mean_step_ms']:>8.1f} "
                     f"{r['communicate_decode_ms']:>12.2f} {share(r['max_shard_bytes_share'])} "
                     f"{share(r['max_shard_decode_share']):>11}  {per_shard}")
    for scheme in dict.fromkeys(r["scheme"] for r in rows):
        base = next((r for r in rows if r["scheme"] == scheme and r["shards"] == 1), None)
        for r in rows:
            if base is None or r["scheme"] != scheme or r["shards"] == 1 or not r["communicate_decode_ms"] or \
                    not base["communicate_decode_ms"]:
                continue
            goal = 1.6 if r["shards"] == 2 else 2.5 if r["shards"] == 4 else None
            speedup = base["communicate_decode_ms"] / r["communicate_decode_ms"]
            verdict = "" if goal is None else f" (target {goal}x: {'met' if speedup >= goal else 'not met'})"
            lines.append(f"{scheme}: communicate + decode {base['communicate_decode_ms']:.2f} ms on 1 shard, "
                         f"{r['communicate_decode_ms']:.2f} ms on {r['shards']}: {speedup:.2f}x{verdict}")
        two = next((r for r in rows if r["scheme"] == scheme and r["shards"] == 2), None)
        if two is not None and two["max_shard_bytes_share"] is not None:
            met = two["max_shard_bytes_share"] <= 0.55 and two["max_shard_decode_share"] <= 0.55
            lines.append(f"{scheme}: on 2 shards the larger carries {100 * two['max_shard_bytes_share']:.1f}% of "
                         f"the bytes and {100 * two['max_shard_decode_share']:.1f}% of the decode time "
                         f"(target at most 55%: {'met' if met else 'not met'})")
    report = "\n".join(lines)
    print(report)
    with open(os.path.join(args.out, "shard_scaling.txt"), "w") as f:
        f.write(report + "\n")
    fields = [k for k in rows[0] if k != "shard_loads"] if rows else []
    with open(os.path.join(args.out, "shard_scaling.csv"), "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    json.dump({"link": args.link, "workers": args.workers, "cores": os.cpu_count(), "rows": rows},
              open(os.path.join(args.out, "shard_scaling.json"), "w"), indent=2)
    if rows and subprocess.run(["sh", "-c", "command -v gnuplot"], capture_output=True).returncode == 0:
        plots = []
        for scheme in dict.fromkeys(r["scheme"] for r in rows):
            data = os.path.join(args.out, f"shard_scaling.{scheme}.dat")
            with open(data, "w") as f:
                for r in rows:
                    if r["scheme"] == scheme and r["communicate_decode_ms"]:
                        f.write(f"{r['shards']} {r['communicate_decode_ms']} {r['mean_step_ms']}\n")
            plots.append(f"'{data}' using 1:2 with linespoints title '{scheme}: communicate + decode'")
            plots.append(f"'{data}' using 1:3 with linespoints dashtype 2 title '{scheme}: step'")
        subprocess.run(["gnuplot", "-e",
                        f"set terminal png size 900,550; set output '{args.out}/shard_scaling.png'; "
                        f"set termoption noenhanced; set title 'MLP, {args.workers} workers, {args.link} links'; "
                        "set xlabel 'shards'; set ylabel 'ms per step (median phase, mean step)'; set logscale y; "
                        "set key outside right; set xtics 1; plot " + ", ".join(plots)], check=False)
    print(f"written: {args.out}/shard_scaling.csv, .json, .txt")


if __name__ == "__main__":
    main()
