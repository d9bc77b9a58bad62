#!/usr/bin/env python3
"""The comparison of one local cluster launch (scripts/local_cluster.sh):
reads each scheme's worker summaries and shard logs from the launch's
folder, sets the target and each run's time to it (harness/targets.py), and
writes OUT/comparison.csv, OUT/comparison.json, OUT/curves.csv and a
timeline per run, then prints the table.

  cluster_report.py OUT WORKERS VIRTUAL(0|1) LINK SCHEME...

collect() is what bench/study.py reads a launch with."""
import csv
import json
import math
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from harness import targets  # noqa: E402

FIELDS = ["scheme", "compressor", "final_test_accuracy", "final_test_loss", "time_to_target_s", "mean_step_ms",
          "bytes_sent_per_worker_per_step", "bytes_received_per_worker_per_step", "compression_ratio", "wall_s",
          "steps", "peel_recovered_share", "diverged_step", "diverged_group", "diverged_worker", "diverged_what"]


def summaries(out, scheme, workers):
    """Every worker's summary of a run that wrote one, worker-0's first."""
    found = []
    for w in range(workers):
        path = f"{out}/{scheme}/summary{w}.json"
        if os.path.exists(path):
            with open(path) as f:
                found.append(json.load(f))
    return found


def shard_loads(out, scheme, steps):
    """Each shard's groups (partitions), and its bytes in and out and decode
    time per step, from the line its log ends with when it stops."""
    loads = []
    for s in range(64):
        path = f"{out}/{scheme}/server{s}.log"
        if not os.path.exists(path):
            break
        with open(path, errors="replace") as f:
            text = f.read()
        owned = re.search(r"groups ([0-9,]*); listening", text)
        stopped = re.findall(r"stopped after \d+ rounds [^;]*; (\d+) pushes, bytes in (\d+), bytes out (\d+), "
                             r"decode ([0-9.e+-]+) s", text)
        if not stopped or not steps:
            continue
        pushes, bytes_in, bytes_out, decode = stopped[-1]
        loads.append({"shard": s, "groups": owned.group(1) if owned else "", "pushes": int(pushes),
                      "bytes_in_per_step": int(bytes_in) / steps, "bytes_out_per_step": int(bytes_out) / steps,
                      "decode_ms_per_step": 1e3 * float(decode) / steps})
    return loads


CURVE_FIELDS = ["scheme", "step", "elapsed_s", "test_accuracy", "bytes_sent_per_worker", "test_loss"]


def metric_of(out, schemes, workers):
    """What the launch's runs are judged by (their summaries' quality_metric): test accuracy
    (classifiers, and summaries written before the field) or test loss (a language model)."""
    for scheme in schemes:
        for s in summaries(out, scheme, workers)[:1]:
            return s.get("quality_metric", targets.ACCURACY)
    return targets.ACCURACY


def collect(out, workers, virtual, schemes):
    """(runs, curves, target, basis) of the launch in `out`: one run record
    per scheme (comparison.json's), every curve point, the target (an
    accuracy or a loss, as the runs are judged: metric_of; None without one)
    and the sentence that says how it was set."""
    runs, curves = [], []
    for scheme in schemes:
        found = summaries(out, scheme, workers)
        if not found:
            raise FileNotFoundError(f"{scheme} left no summary (see {out}/{scheme}/worker*.log)")
        s = found[0]
        # The divergence that stopped the run, as the first worker that wrote one saw it.
        diverged = next((x["diverged"] for x in found if x.get("diverged")), None)
        accuracy, loss = s["final_test_accuracy"], s.get("final_test_loss")
        synthetic = accuracy is not None and accuracy < 0
        if diverged is not None or synthetic:
            accuracy = loss = None  # diverged (its model is lost), or a synthetic profile (no accuracy)
        runs.append({"scheme": scheme, "compressor": s["compressor"], "final_test_accuracy": accuracy,
                     "final_test_loss": loss, "optimizer": s.get("optimizer", "sgd"),
                     "time_to_target_s": None,
                     "mean_step_ms": None if s["mean_step_s"] is None else round(1e3 * s["mean_step_s"], 3),
                     "bytes_sent_per_worker_per_step": s["bytes_sent_per_step"],
                     "bytes_received_per_worker_per_step": s.get("bytes_received_per_step"),
                     "compression_ratio": s["compression_ratio"], "wall_s": s["wall_s"], "steps": s["steps"],
                     "peel_recovered_share": s.get("peel_recovered_share"),
                     "shards": [] if virtual else shard_loads(out, scheme, s["steps"]),
                     "warnings": s.get("warnings", []),
                     "diverged": None if diverged is None else
                         {k: diverged[k] for k in ("step", "group", "worker", "what", "message")},
                     "synthetic": synthetic})
        for c in s.get("curve", []):
            curves.append({"scheme": scheme, "step": c["step"], "elapsed_s": c["elapsed_s"],
                           "test_accuracy": c["test_accuracy"], "bytes_sent_per_worker": c["bytes_sent"],
                           "test_loss": c.get("test_loss")})
    metric = metric_of(out, schemes, workers)
    by_scheme = {r["scheme"]: [c for c in curves if c["scheme"] == r["scheme"]] for r in runs}
    target, basis = targets.target_of(by_scheme, {r["scheme"] for r in runs if r["diverged"] is not None},
                                      metric=metric)
    for r in runs:
        r["quality_metric"] = metric
        if target is not None:
            r["time_to_target_s"] = targets.time_to(by_scheme[r["scheme"]], target, metric)
    return runs, curves, target, basis


def write(out, workers, virtual, link, schemes, runs, curves, target, basis):
    """comparison.csv, comparison.json, curves.csv and each run's timeline (processes only)."""
    with open(f"{out}/comparison.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)  # null: an empty field
        w.writeheader()
        for r in runs:
            d = r["diverged"] or {}
            w.writerow({**{k: r[k] for k in FIELDS if k in r},
                        **{f"diverged_{k}": d.get(k) for k in ("step", "group", "worker", "what")}})
    with open(f"{out}/curves.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=CURVE_FIELDS)
        w.writeheader()
        w.writerows(curves)
    with open(f"{out}/comparison.json", "w") as f:
        json.dump({"link": None if link == "none" else link, "workers": workers,
                   "target": None if target is None else {metric_name(runs): target, "basis": basis},
                   "runs": [{k: v for k, v in r.items() if k != "synthetic"} for r in runs],
                   "curves": curves}, f, indent=2)
    # One timeline per run: every worker's trace events in one Chrome trace
    # file (virtual workers write none).
    for scheme in [] if virtual else schemes:
        events = []
        for w in range(workers):
            try:
                with open(f"{out}/{scheme}/trace{w}.json") as f:
                    events += json.load(f)["traceEvents"]
            except (FileNotFoundError, json.JSONDecodeError):
                continue  # a worker that stopped before writing it
        with open(f"{out}/{scheme}/timeline.json", "w") as f:
            json.dump({"displayTimeUnit": "ms", "traceEvents": events}, f)


def metric_name(runs):
    """The launch's quality metric (its runs'), test_accuracy without runs."""
    return runs[0]["quality_metric"] if runs else targets.ACCURACY


def number(value, fmt, width):
    return f"{'-':>{width}}" if value is None else f"{value:>{width}{fmt}}"


def print_table(out, workers, virtual, link, schemes, runs, curves, target, basis):
    print(f"\non {'loopback' if link == 'none' else 'a ' + link + ' link per host'}:")
    by_loss = metric_name(runs) == targets.LOSS
    print(f"{'scheme':<22} {'val. loss' if by_loss else 'accuracy':>9} {'to target':>10} {'step ms':>8} "
          f"{'sent KiB/step':>14} {'recv KiB/step':>14} {'ratio':>7} {'wall s':>7}")
    for r in runs:
        if r["diverged"] is not None:
            accuracy = f"{'diverged':>9}"
        elif by_loss and r["final_test_loss"] is not None:
            accuracy = f"{r['final_test_loss']:>9.4f}"
        elif r["final_test_accuracy"] is None or by_loss:
            accuracy = f"{'-':>9}"
        else:
            accuracy = f"{100 * r['final_test_accuracy']:>8.2f}%"
        if target is None:
            to_target = f"{'-':>10}"
        elif r["time_to_target_s"] is None:
            to_target = f"{'never':>10}"
        else:
            to_target = f"{r['time_to_target_s']:>9.1f}s"
        sent = r["bytes_sent_per_worker_per_step"]
        received = r["bytes_received_per_worker_per_step"]
        ratio = "      -" if r["compression_ratio"] is None else f"{r['compression_ratio']:>6.1f}x"
        line = (f"{r['scheme']:<22} {accuracy} {to_target} {number(r['mean_step_ms'], '.1f', 8)} "
                f"{number(None if sent is None else sent / 1024, '.1f', 14)} "
                f"{number(None if received is None else received / 1024, '.1f', 14)} {ratio} "
                f"{number(r['wall_s'], '.1f', 7)}")
        if r["diverged"] is not None:
            d = r["diverged"]
            where = "the loss" if d["group"] is None else f"group {d['group']}'s {d['what']}"
            line += f"  diverged at step {d['step']} ({d['worker']}: {where})"
        print(line)
    if virtual:
        print(f"(virtual: the {workers} workers of each run trained in one process; step ms and times are the whole "
              "job's on this machine, not one worker's; accuracy and bytes are what the processes would get)")
    print("(sent, recv: per worker per step, as the collectives' algorithms move them or as the pushes and the "
          "shards' replies are serialized; ratio: the dense gradient's bytes over the bytes a worker sends; a ring "
          "allreduce sends 2(W-1)/W of its data)")
    for r in runs:
        if len(r["shards"]) > 1:
            total_in = sum(x["bytes_in_per_step"] for x in r["shards"]) or 1
            total_decode = sum(x["decode_ms_per_step"] for x in r["shards"]) or 1
            print(f"({r['scheme']}: per step, " + "; ".join(
                f"shard {x['shard']} (groups {x['groups']}) in {x['bytes_in_per_step'] / 1024:.1f} KiB "
                f"({100 * x['bytes_in_per_step'] / total_in:.0f}%), out {x['bytes_out_per_step'] / 1024:.1f} KiB, "
                f"decode {x['decode_ms_per_step']:.2f} ms ({100 * x['decode_ms_per_step'] / total_decode:.0f}%)"
                for x in r["shards"]) + ")")
        share = r["peel_recovered_share"]
        if share is not None:
            print(f"({r['scheme']}: the peel decodes gave back {100 * share:.1f}% of the energy worker 0 inserted)")
        for warning in r["warnings"]:
            print(f"warning: {r['scheme']}: {warning}")
    if target is not None and by_loss:
        print(f"(to target: wall seconds until the run's curve first reaches a validation loss of {target:.4f} "
              f"nats per byte ({target / math.log(2):.3f} bits): {basis}; curves are the loss on a fixed validation "
              "subset, evaluated every few steps; val. loss: on the whole validation split)")
    elif target is not None:
        print(f"(to target: wall seconds until the run's curve first reaches {100 * target:.2f}%: {basis}; "
              "curves are test accuracy on a fixed test subset, evaluated every few steps)")
    elif curves or any(not r["synthetic"] for r in runs):
        print("(to target: no run that finished has an accuracy curve to set the target by; see --eval_every)")
    print(f"\nwritten: {out}/comparison.csv, {out}/comparison.json, {out}/curves.csv")
    if not virtual:
        print("timelines (open in ui.perfetto.dev or chrome://tracing): " +
              ", ".join(f"{out}/{s}/timeline.json" for s in schemes))


def main(argv):
    if len(argv) < 5 or argv[2] not in ("0", "1"):
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    out, workers, virtual, link, schemes = argv[0], int(argv[1]), argv[2] == "1", argv[3], argv[4:]
    try:
        runs, curves, target, basis = collect(out, workers, virtual, schemes)
    except FileNotFoundError as e:
        print(f"local_cluster: {e}", file=sys.stderr)
        return 1
    write(out, workers, virtual, link, schemes, runs, curves, target, basis)
    print_table(out, workers, virtual, link, schemes, runs, curves, target, basis)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
