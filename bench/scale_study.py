#!/usr/bin/env python3
"""The scale study: every scheme at equal bytes per worker per step, from 4 to
256 workers, on the models named, with the learning rate scaled with W.

  python3 bench/scale_study.py --out=DIR [--models=mlp,cnn] [--workers=4,16,64,256]
        [--ratios=10,100] [--schemes=...] [--baselines=dense_allreduce,dense_bf16_allreduce]
        [--steps=116] [--batch_size=32] [--learning_rate=0.05] [--lr_base_workers=16]
        [--lr_warmup_steps=29] [--lr_cap=0.2] [--seed=1] [--worker=PATH] [--worker_flags='...']
        [--start_spec=SCHEME=SPEC ...] [--replace_stale] [--report_only]

Every run is one process of W virtual workers (sketchfuse_worker
--virtual_workers=W: each worker its own data shard, batch and compressor
state, the collectives and the shards in process, bytes counted as the real
transports count them).

The protocol, the same for every scheme:
  - about --steps steps of --batch_size examples per worker at every W: the
    first steps*W*batch training examples for one epoch while they fit in
    Fashion-MNIST's 60,000, else all of them for as many epochs as make the
    steps (so more workers see more examples, as on a real cluster);
  - the learning rate --learning_rate at --lr_base_workers workers, scaled
    linearly with W, reached linearly over --lr_warmup_steps steps (Goyal et
    al.; the worker's --lr_base_workers and --lr_warmup_steps), and held at
    --lr_cap (0.05 at 16 workers, 0.2 from 64 on by default);
  - at ratio R, every compressed scheme sends plus receives 2 D / R bytes per
    worker per step, where D is the dense float32 gradient's bytes: what a
    worker would send and receive if it sent its gradient R times smaller once
    and received the sum once. The density that meets that budget is found
    per scheme, model and W by probe runs of two steps: at the scheme's default
    density and at a quarter of it (an affine fit), then at the fitted density
    and, where that misses by more than 5%, at the secant's (bytes are not
    quite affine in the density). --start_spec=SCHEME=SPEC starts that
    scheme's probes at SPEC (its density, and a quarter of it) instead of the
    registry's default: where the default does not fit in memory (the peel's
    ring at 256 workers on mlp_large holds 256 tables of 4 x the group's size
    in one process, 21 GB). The full run's measured bytes are reported
    next to the budget, and flagged in the tables where they drift more than
    5% from it over the run.
  - the baselines run once per (model, W) at their own bytes. --baselines=
    (empty) runs only the schemes, for a second study process sharing the
    work of one DIR.

Writes DIR/results.csv (one line per run; bench/harness/results.py), DIR/scale.json (the runs and the
probes), DIR/scale.md (a table per model and ratio: accuracy against W, and
the difference from dense_allreduce), DIR/accuracy_vs_workers.png (one panel
per model and ratio) and DIR/bytes_vs_workers.png (each scheme's bytes at its
default density against W, from the probes; gnuplot). These are the folder's
report, not one process's: a study merges its rows into what DIR/scale.json
already holds (its own replace those of the same model, W, scheme and ratio),
under a lock on DIR, so studies that share a folder, one per scheme or W and
running at the same time, all land in one set of tables. A folder holds one
protocol: a study whose --steps, --batch_size, learning-rate flags, --seed or
--worker_flags differ from those of DIR's report is refused before it runs
anything. Each run's output is
kept as DIR/runs/<model>_W<W>_<scheme>_<ratio>.out and each probe's as
DIR/probes/...; a run or probe whose output already holds a summary is not
run again, so a study can be stopped and resumed (delete an output to redo
it). An output made with other flags (its first line is its command) stops
the study, or with --replace_stale is moved aside and made again. A run that
diverges (the worker's exit status 3) is a result: "diverged" in the tables.
"""
import argparse
import fcntl
import json
import math
import os
import shutil
import subprocess
import sys
import time
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import registry, results as results_csv  # noqa: E402
from harness.budget import (BUDGET_TOLERANCE, PROBE_STEPS, budget_for, calibrate, dense_bytes,  # noqa: E402
                            density_for, density_of, total_bytes, with_density)
from harness.worker_runs import NotRun, ReusingRunner, StaleOutput, StudyError  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRAIN_EXAMPLES = 60000  # Fashion-MNIST's training set
MODELS = ["mlp", "cnn", "mlp_large", "cnn_wide"]  # the worker's Fashion-MNIST classifiers
DIVERGED_BELOW = 0.11  # ten classes: a run that ends at chance has diverged, whether or not its loss went non-finite


def int_list(text, name):
    try:
        values = [int(v) for v in text.split(",") if v]
    except ValueError:
        raise StudyError(f"--{name} is not a comma-separated list of integers: '{text}'")
    if not values or any(v <= 0 for v in values):
        raise StudyError(f"--{name}: every entry must be a positive integer, got '{text}'")
    return values


def float_list(text, name):
    try:
        values = [float(v) for v in text.split(",") if v]
    except ValueError:
        raise StudyError(f"--{name} is not a comma-separated list of numbers: '{text}'")
    if not values or any(not math.isfinite(v) or v <= 1 for v in values):
        raise StudyError(f"--{name}: every ratio must be a finite number above 1, got '{text}'")
    return values


def data_plan(workers, steps, batch):
    """(train_examples, epochs) that make about `steps` steps of `batch` per worker at `workers`."""
    per_step = workers * batch
    if per_step > TRAIN_EXAMPLES:
        raise StudyError(f"{workers} workers x batch {batch} is more than the {TRAIN_EXAMPLES} training examples")
    if steps * per_step <= TRAIN_EXAMPLES:
        return steps * per_step, 1
    steps_per_epoch = TRAIN_EXAMPLES // per_step
    return TRAIN_EXAMPLES, max(1, round(steps / steps_per_epoch))


class Runner(ReusingRunner):
    """Runs the worker binary with the study's flags, reusing any output that already holds a summary."""

    def __init__(self, args):
        super().__init__(replace_stale=args.replace_stale, report_only=args.report_only)
        self.args = args

    def command(self, model, workers, scheme, train_examples, epochs, compressor):
        a = self.args
        cmd = [a.worker, f"--virtual_workers={workers}", f"--workload={model}", f"--scheme={scheme}",
               f"--epochs={epochs}", f"--train_examples={train_examples}", f"--batch_size={a.batch_size}",
               f"--learning_rate={a.learning_rate}", f"--seed={a.seed}", "--report_every=0",
               f"--collective_timeout_s={a.collective_timeout_s}"] + lr_flags(a, workers)
        if compressor is not None:
            cmd.append(f"--compressor={compressor}")
        return cmd + a.worker_flags.split()

    def run_study_cell(self, out, model, workers, scheme, train_examples, epochs, compressor=None):
        """The summary of the run `out` holds, or of a new run written there."""
        return self.run(out, self.command(model, workers, scheme, train_examples, epochs, compressor))


def lr_base_workers(args, workers):
    """The worker's --lr_base_workers at `workers`: --lr_base_workers, or a larger count (rounded up)
    where the scaled rate would pass --lr_cap; None without scaling."""
    if args.lr_base_workers == 0:
        return None
    if args.lr_cap > 0 and args.learning_rate * workers / args.lr_base_workers > args.lr_cap:
        return math.ceil(args.learning_rate * workers / args.lr_cap - 1e-9)
    return args.lr_base_workers


def lr_flags(args, workers):
    """The worker's learning-rate flags at `workers`."""
    base = lr_base_workers(args, workers)
    return [] if base is None else [f"--lr_base_workers={base}", f"--lr_warmup_steps={args.lr_warmup_steps}"]


def peak_learning_rate(args, workers):
    base = lr_base_workers(args, workers)
    return args.learning_rate if base is None else args.learning_rate * workers / base


def probe(runner, args, model, workers, scheme, name, compressor):
    """A PROBE_STEPS-step run of `scheme` (its summary), kept as probes/<model>_W<W>_<scheme>_<name>.out."""
    return runner.run_study_cell(os.path.join(args.out, "probes", f"{model}_W{workers}_{scheme}_{name}.out"), model,
                                 workers, scheme, PROBE_STEPS * workers * args.batch_size, 1, compressor)


def plan_rows(args):
    """Every (model, workers, scheme, ratio) of the study, baselines with ratio None."""
    rows = []
    for model in args.models:
        for w in args.workers:
            for b in args.baselines:
                rows.append((model, w, b, None))
            for s in args.schemes:
                for r in args.ratios:
                    rows.append((model, w, s, r))
    return rows


def run_study(args):
    runner = Runner(args)
    results, probes = [], []
    start = time.time()
    jobs = plan_rows(args)
    fits = {}
    for n, (model, w, scheme, ratio) in enumerate(jobs, 1):
        examples, epochs = data_plan(w, args.steps, args.batch_size)
        label = f"{model} W={w} {scheme}" + ("" if ratio is None else f" {ratio:g}x")
        print(f"[{n}/{len(jobs)}] {label} ({time.time() - start:.0f}s)", flush=True)
        row = {"model": model, "workers": w, "scheme": scheme, "ratio": ratio, "train_examples": examples,
               "epochs": epochs, "peak_learning_rate": peak_learning_rate(args, w)}
        try:
            compressor = None
            if ratio is not None:
                key = (model, w, scheme)
                if key not in fits:
                    first_name, first, fit, spec, points = calibrate(
                        lambda name, compressor: probe(runner, args, model, w, scheme, name, compressor),
                        f"{scheme} on {model} at W={w}", args.start_specs.get(scheme))
                    fits[key] = (first, spec, points)
                    probes.append({"model": model, "workers": w, "scheme": scheme, "first_probe": first_name,
                                   "default_compressor": spec,
                                   "default_bytes_sent": first["bytes_sent_per_step"],
                                   "default_bytes_received": first["bytes_received_per_step"],
                                   "dense_bytes": dense_bytes(first), "fit_a": fit["a"], "fit_b": fit["b"]})
                first, spec, points = fits[key]
                budget = budget_for(first, ratio)
                row["budget_bytes"] = budget
                density = density_for(
                    lambda name, compressor: probe(runner, args, model, w, scheme, name, compressor),
                    ratio, spec, list(points), budget)
                if density is None:
                    row["skipped"] = (f"no density in (0, 1] meets {budget:.0f} B per worker per step (probes: "
                                      + ", ".join(f"{t:.0f} B at {d:g}" for d, t in points) + ")")
                    print(f"  skipped: {row['skipped']}", flush=True)
                    results.append(row)
                    continue
                compressor = with_density(spec, density)
            out = os.path.join(args.out, "runs", f"{model}_W{w}_{scheme}_{'base' if ratio is None else f'{ratio:g}x'}.out")
            s = runner.run_study_cell(out, model, w, scheme, examples, epochs, compressor)
        except NotRun:
            row["not_run"] = True
            results.append(row)
            continue
        except StaleOutput:
            raise
        except StudyError as e:
            row["failed"] = str(e)
            print(f"  failed: {e}", flush=True)
            results.append(row)
            continue
        acc = s["final_test_accuracy"]
        diverged = acc is None or acc < DIVERGED_BELOW or s.get("diverged") is not None
        row.update({"compressor": s["compressor"], "steps": s["steps"],
                    "final_test_accuracy": acc, "diverged": diverged,
                    "bytes_sent_per_worker_per_step": s["bytes_sent_per_step"],
                    "bytes_received_per_worker_per_step": s["bytes_received_per_step"],
                    "wall_s": s["wall_s"]})
        if "budget_bytes" in row:
            row["budget_deviation"] = total_bytes(s) / row["budget_bytes"] - 1
        results.append(row)
        extra = "" if "budget_bytes" not in row else f", {100 * row['budget_deviation']:+.1f}% of the budget"
        print(f"  {'diverged' if diverged else f'{100 * acc:.2f}%'} after {s['steps']} steps, "
              f"{total_bytes(s):.0f} B per worker per step{extra}", flush=True)
    return results, probes, runner


def add_gaps(results):
    """Sets each run's vs_dense_points: its gap to dense_allreduce of the same model and W, where both ended."""
    dense = {(r["model"], r["workers"]): r.get("final_test_accuracy") for r in results
             if r["scheme"] == "dense_allreduce" and "final_test_accuracy" in r}
    for r in results:
        r.pop("vs_dense_points", None)
        ref = dense.get((r["model"], r["workers"]))
        if ref is not None and r.get("final_test_accuracy") is not None and not r.get("diverged"):
            r["vs_dense_points"] = 100 * (r["final_test_accuracy"] - ref)


# The settings that change a run's result: one folder's tables never mix two of them.
PROTOCOL = ("steps", "batch_size", "learning_rate", "lr_base_workers", "lr_warmup_steps", "lr_cap", "seed",
            "worker_flags")


def read_report(out):
    """The folder's scale.json as a dict, or None where it has none yet."""
    path = os.path.join(out, "scale.json")
    try:
        with open(path) as f:
            report = json.load(f)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        raise StudyError(f"{path} is not a study's report ({e}): move it aside or use another --out") from None
    if not (isinstance(report, dict) and isinstance(report.get("settings"), dict)
            and isinstance(report.get("runs"), list) and isinstance(report.get("probes"), list)):
        raise StudyError(f"{path} is not a study's report (it needs settings, runs and probes): "
                         "move it aside or use another --out")
    # Every entry needs the key the merge and the tables file it under.
    def keyed(entry, with_ratio):
        return (isinstance(entry, dict) and isinstance(entry.get("model"), str)
                and isinstance(entry.get("scheme"), str) and type(entry.get("workers")) is int
                and (not with_ratio or entry.get("ratio") is None or type(entry.get("ratio")) in (int, float)))
    for name, entries, with_ratio in (("run", report["runs"], True), ("probe", report["probes"], False)):
        bad = next((e for e in entries if not keyed(e, with_ratio)), None)
        if bad is not None:
            raise StudyError(f"{path} is not a study's report: a {name} without a model, W, scheme"
                             + (" and ratio" if with_ratio else "") + f" ({str(bad)[:80]}): "
                             "move it aside or use another --out")
    return report


def check_protocol(args, report):
    """StudyError where the folder's `report` was made with another protocol than this study's."""
    if report is None:
        return
    made = report["settings"]
    differ = [k for k in PROTOCOL if k in made and made[k] != getattr(args, k)]
    if differ:
        raise StudyError(f"{args.out} holds a study made with "
                         + ", ".join(f"--{k}={made[k]}" for k in differ) + "; this one has "
                         + ", ".join(f"--{k}={getattr(args, k)}" for k in differ)
                         + ": use another --out, so that one folder's tables compare like with like")


def merged(previous, current, key):
    """`previous` with each entry of `current` in place of the one with its key (new keys added)."""
    mine = {key(x) for x in current}
    return [x for x in previous if key(x) not in mine] + current


def ordered(names, known):
    """`names` once each: those in `known` in its order, then the rest in their order of appearance."""
    names = list(dict.fromkeys(names))
    return [n for n in known if n in names] + [n for n in names if n not in known]


def report_axes(args, results):
    """The tables' models, workers, ratios, baselines and schemes: every one that the runs
    (this study's and those the folder held) or this study's flags name."""
    return types.SimpleNamespace(
        models=ordered(args.models + [r["model"] for r in results], MODELS),
        workers=sorted(set(args.workers) | {r["workers"] for r in results}),
        ratios=sorted(set(args.ratios) | {r["ratio"] for r in results if r["ratio"] is not None}),
        baselines=ordered(args.baselines + [r["scheme"] for r in results if r["ratio"] is None],
                          args.registry.baselines()),
        schemes=ordered(args.schemes + [r["scheme"] for r in results if r["ratio"] is not None],
                        args.registry.names()))


def write_report(args, results, probes):
    """Merges this study's runs and probes into the folder's report and writes results.csv,
    scale.json, scale.md and the plots from the merge: a study sharing the folder
    (another W, ratio or scheme) keeps the others' rows, and this one's replace
    theirs where both have the same (model, W, scheme, ratio). Holds a lock on
    the folder meanwhile, so two studies that end together both land. Returns
    (the merged runs, the plots written)."""
    folder = os.open(args.out, os.O_RDONLY)
    try:
        fcntl.flock(folder, fcntl.LOCK_EX)
        previous = read_report(args.out)
        check_protocol(args, previous)  # again: another study may have written the folder meanwhile
        if previous is not None:
            results = merged(previous["runs"], results, lambda r: (r["model"], r["workers"], r["scheme"], r["ratio"]))
            probes = merged(previous["probes"], probes, lambda p: (p["model"], p["workers"], p["scheme"]))
        add_gaps(results)
        axes = report_axes(args, results)
        rank = {name: i for i, name in enumerate(axes.models + axes.baselines + axes.schemes)}
        results.sort(key=lambda r: (rank[r["model"]], r["workers"], r["ratio"] or 0, rank[r["scheme"]]))
        write_csv(os.path.join(args.out, "results.csv"), results, args.seed)
        settings = {k: v for k, v in vars(args).items() if k not in ("worker", "registry")}
        settings.update(vars(axes))
        tmp = os.path.join(args.out, "scale.json.partial")
        with open(tmp, "w") as f:
            json.dump({"settings": settings, "runs": results, "probes": probes}, f, indent=1)
        os.replace(tmp, os.path.join(args.out, "scale.json"))
        write_markdown(os.path.join(args.out, "scale.md"), results, args, axes)
        return results, plot(args, axes, results, probes)
    finally:
        os.close(folder)


# results.csv: the harness's column names (bench/harness/results.py) for what
# the runs share with every study, and the scale study's own after them.
CSV_COLUMNS = [("model", "model"), ("workers", "workers"), ("scheme", "scheme"), ("ratio_target", "ratio"),
               ("seed", "seed"), ("compressor", "compressor"), ("train_examples", "train_examples"),
               ("epochs", "epochs"), ("steps", "steps"), ("peak_learning_rate", "peak_learning_rate"),
               ("test_accuracy_pct", "test_accuracy_pct"), ("diverged", "diverged"),
               ("vs_dense_points", "vs_dense_points"), ("sent_bytes_per_step", "bytes_sent_per_worker_per_step"),
               ("received_bytes_per_step", "bytes_received_per_worker_per_step"), ("budget_bytes", "budget_bytes"),
               ("budget_deviation", "budget_deviation"), ("wall_s", "wall_s"), ("skipped", "skipped"),
               ("not_run", "not_run"), ("failed", "failed")]


def write_csv(path, results, seed):
    rows = [{**{column: r.get(key) for column, key in CSV_COLUMNS}, "seed": seed,
             "test_accuracy_pct": results_csv.pct(r.get("final_test_accuracy"))} for r in results]
    results_csv.write_csv(path, rows, [column for column, _ in CSV_COLUMNS])


def cell(r):
    if r is None:
        return ""
    if r.get("not_run"):
        return "not run"
    if "skipped" in r:
        return "out of reach"
    if "failed" in r:
        return "failed"
    if r["diverged"]:
        return "diverged"
    gap = r.get("vs_dense_points")
    text = f"{100 * r['final_test_accuracy']:.2f}%" + ("" if gap is None or r["scheme"] == "dense_allreduce"
                                                       else f" ({gap:+.2f})")
    dev = r.get("budget_deviation")
    if dev is not None and abs(dev) > BUDGET_TOLERANCE:
        text += f" [{100 * dev:+.0f}% bytes]"
    return text


def write_markdown(path, results, args, axes):
    rate = (f"learning rate {args.learning_rate} at {args.lr_base_workers} workers, scaled linearly with W after "
            f"{args.lr_warmup_steps} warm-up steps" + (f", held at {args.lr_cap}" if args.lr_cap else "")
            + " (peak " + ", ".join(f"{peak_learning_rate(args, w):g} at {w}" for w in axes.workers) + ")"
            if args.lr_base_workers else f"learning rate {args.learning_rate} at every W")
    lines = [f"# Scale study: {', '.join(axes.models)}", "",
             f"Virtual workers; {rate}; about {args.steps} steps of batch {args.batch_size} per worker; seed "
             f"{args.seed}. Final test accuracy (points from dense_allreduce at the same W); at each ratio every "
             "compressed scheme sends plus receives the same bytes per worker per step.", ""]
    ws = axes.workers
    for model in axes.models:
        sets = [(None, axes.baselines)] + [(r, axes.schemes) for r in axes.ratios]
        for ratio, schemes in sets:
            found = [x for x in results if x["model"] == model and x["ratio"] == ratio and x["scheme"] in schemes]
            if all(x.get("not_run") for x in found):
                continue  # a table with no run (of this --report_only, say)
            title = ("baselines" if ratio is None else
                     f"{ratio:g}x: sent + received {2 / ratio:.3g} times the dense gradient's bytes per worker per step")
            lines += [f"## {model}, {title}", "", "| scheme | " + " | ".join(f"W = {w}" for w in ws) + " |",
                      "| --- |" + " ---: |" * len(ws)]
            for s in schemes:
                cells = []
                for w in ws:
                    r = next((x for x in results if x["model"] == model and x["workers"] == w
                              and x["scheme"] == s and x["ratio"] == ratio), None)
                    cells.append(cell(r))
                lines.append(f"| `{s}` | " + " | ".join(cells) + " |")
            if ratio is not None:
                dev = [abs(r["budget_deviation"]) for r in results if r["model"] == model and r["ratio"] == ratio
                       and "budget_deviation" in r]
                if dev:
                    lines += ["", f"Measured bytes within {100 * max(dev):.1f}% of the budget; [±N% bytes] marks a "
                              f"run further than {100 * BUDGET_TOLERANCE:g}% from it (the probes' two steps "
                              "misjudged its steady state)."]
            lines.append("")
    with open(path, "w") as f:
        f.write("\n".join(lines))


def plot_command(data, prefix, series):
    """A gnuplot `plot` of one line per named series of (x, y) points (empty ones left out), each
    written to data/<prefix>_<name>.dat; an empty frame when no series has a point."""
    cmds = []
    for name, points in series.items():
        if not points:
            continue
        path = os.path.join(data, f"{prefix}_{name}.dat")
        with open(path, "w") as f:
            f.writelines(f"{x} {y}\n" for x, y in sorted(points))
        cmds.append(f"'{path}' using 1:2 with linespoints title '{name}'")
    return "plot " + ", ".join(cmds) if cmds else "plot [1:2][1:2] -1 notitle"  # [1:2]: valid on log axes too


def plot(args, axes, results, probes):
    """accuracy_vs_workers.png and bytes_vs_workers.png with gnuplot; returns the files written."""
    if shutil.which("gnuplot") is None:
        print("scale_study: gnuplot not found; no plots", file=sys.stderr)
        return []
    data = os.path.join(args.out, "plot_data")
    os.makedirs(data, exist_ok=True)
    # One panel per (model, ratio) with a compressed run to show.
    panels = [(m, r) for m in axes.models for r in axes.ratios
              if any(x["model"] == m and x["ratio"] == r and x.get("final_test_accuracy") is not None
                     for x in results)] or [(axes.models[0], axes.ratios[0])]
    cols = min(len(axes.ratios), len(panels))
    rows = -(-len(panels) // cols)
    script = [f"set terminal png size {680 * cols},{400 * rows}",
              f"set output '{os.path.join(args.out, 'accuracy_vs_workers.png')}'", "set termoption noenhanced",
              f"set multiplot layout {rows},{cols}", "set logscale x",
              "set xlabel 'workers (virtual)'", "set ylabel 'test accuracy (%)'",
              "set key outside right top font ',8'"]
    for model, ratio in panels:
        series = {s: [(r["workers"], 100 * r["final_test_accuracy"]) for r in results
                      if r["model"] == model and r["scheme"] == s and (r["ratio"] in (None, ratio))
                      and r.get("final_test_accuracy") is not None and not r.get("diverged")]
                  for s in axes.baselines + axes.schemes}
        script.append(f"set title '{model}, {ratio:g}x (same bytes per worker)'")
        script.append(plot_command(data, f"acc_{model}_{ratio:g}", series))
    script.append("unset multiplot")
    if probes:
        script += [f"set terminal png size 900,{420 * len(axes.models)}",
                   f"set output '{os.path.join(args.out, 'bytes_vs_workers.png')}'", "set termoption noenhanced",
                   "set xlabel 'workers (virtual)'",
                   f"set multiplot layout {len(axes.models)},1", "set logscale xy",
                   "set ylabel 'KiB per worker per step, sent + received'", "set key outside font ',8'"]
        for model in axes.models:
            # A probe started at --start_spec is not at the default density: left out.
            series = {s: [(p["workers"], (p["default_bytes_sent"] + p["default_bytes_received"]) / 1024)
                          for p in probes if p["model"] == model and p["scheme"] == s
                          and p.get("first_probe", "default") == "default"] for s in axes.schemes}
            script.append(f"set title '{model}: each scheme at its default density'")
            script.append(plot_command(data, f"bytes_{model}", series))
        script.append("unset multiplot")
    done = subprocess.run(["gnuplot"], input="\n".join(script), text=True, capture_output=True)
    shutil.rmtree(data, ignore_errors=True)
    if done.returncode != 0:
        print(f"scale_study: gnuplot failed: {done.stderr.strip()}", file=sys.stderr)
        return []
    return [p for p in ("accuracy_vs_workers.png", "bytes_vs_workers.png")
            if os.path.exists(os.path.join(args.out, p))]


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("--out", required=True)
    parser.add_argument("--models", default="mlp,cnn")
    parser.add_argument("--workers", default="4,16,64,256")
    parser.add_argument("--ratios", default="10,100")
    parser.add_argument("--schemes", default=None,
                        help="default: every compressing scheme of the registry on one route (not the hybrids)")
    parser.add_argument("--baselines", default=None, help="default: the registry's allreduce baselines")
    parser.add_argument("--steps", type=int, default=116)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--learning_rate", type=float, default=0.05)
    parser.add_argument("--lr_base_workers", type=int, default=16)
    parser.add_argument("--lr_warmup_steps", type=int, default=29)
    parser.add_argument("--lr_cap", type=float, default=0.2,
                        help="the scaled rate is held here (0: no cap); dense_allreduce on the MLP diverges at 0.8 "
                             "(256 workers) and trains worse at 0.4 than at 0.2 (64 workers)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--collective_timeout_s", type=int, default=3600,
                        help="the in-process collective's limit: long steps at 256 workers on a loaded machine")
    parser.add_argument("--worker", default=os.path.join(ROOT, "bazel-bin/worker/sketchfuse_worker"))
    parser.add_argument("--worker_flags", default="", help="more worker flags for every run, space-separated")
    parser.add_argument("--start_spec", action="append", default=[], metavar="SCHEME=SPEC",
                        help="start SCHEME's probes at the compressor SPEC (it must name a density) instead of the "
                             "registry's default, e.g. sketch_allreduce=count_sketch:method=peel,density=0.0002,rows=4; "
                             "repeatable, one per scheme; a --report_only of the study needs the same")
    parser.add_argument("--replace_stale", action="store_true",
                        help="an output made with other flags is moved aside (.stale) and made again, instead of "
                             "stopping the study")
    parser.add_argument("--report_only", action="store_true",
                        help="run nothing: the tables and plots from the outputs already in --out ('not run' where "
                             "one is missing)")
    args = parser.parse_args(argv)
    args.models = [m for m in args.models.split(",") if m]
    unknown = [m for m in args.models if m not in MODELS]
    if unknown or not args.models:
        raise StudyError(f"--models takes {', '.join(MODELS)}; got '{','.join(unknown)}'")
    args.workers = int_list(args.workers, "workers")
    args.ratios = float_list(args.ratios, "ratios")
    if args.steps < 1 or args.batch_size < 1:
        raise StudyError("--steps and --batch_size must be positive")
    if not (math.isfinite(args.learning_rate) and args.learning_rate > 0):
        raise StudyError(f"--learning_rate must be a positive number, got {args.learning_rate}")
    if args.lr_base_workers < 0 or args.lr_warmup_steps < 0:
        raise StudyError("--lr_base_workers and --lr_warmup_steps must be >= 0")
    if not (math.isfinite(args.lr_cap) and args.lr_cap >= 0):
        raise StudyError(f"--lr_cap must be a number >= 0, got {args.lr_cap}")
    if args.collective_timeout_s < 1:
        raise StudyError("--collective_timeout_s must be >= 1")
    if any(not f.startswith("--") for f in args.worker_flags.split()):
        raise StudyError(f"--worker_flags takes worker flags (--name=value), got '{args.worker_flags}'")
    args.start_specs = {}
    for entry in args.start_spec:
        scheme, sep, spec = entry.partition("=")
        if not sep or not spec:
            raise StudyError(f"--start_spec takes SCHEME=SPEC, got '{entry}'")
        if scheme in args.start_specs:
            raise StudyError(f"--start_spec names '{scheme}' twice")
        try:
            density = density_of(spec)
        except StudyError as e:
            raise StudyError(f"--start_spec {scheme}: {e}") from None
        if not 0 < density <= 1:
            raise StudyError(f"--start_spec {scheme}: the density of '{spec}' is not in (0, 1]")
        args.start_specs[scheme] = spec
    if not (os.path.isfile(args.worker) and os.access(args.worker, os.X_OK)):
        raise StudyError(f"--worker {args.worker} is not an executable (bash scripts/bazel.sh build "
                         "//worker:sketchfuse_worker)")
    for w in args.workers:
        data_plan(w, args.steps, args.batch_size)
    return args


def check_names(args):
    """The schemes and baselines from the worker's registry (--list_schemes=json), so that a typo
    fails before any run; the defaults are the registry's."""
    try:
        args.registry = registry.load(args.worker)
        args.schemes = (args.registry.compressing() if args.schemes is None
                        else args.registry.check([s for s in args.schemes.split(",") if s]))
        args.baselines = (args.registry.baselines() if args.baselines is None
                          else args.registry.check([s for s in args.baselines.split(",") if s]))
    except registry.RegistryError as e:
        raise StudyError(str(e)) from None
    if args.baselines and "dense_allreduce" not in args.baselines:
        raise StudyError("--baselines must include dense_allreduce (every gap is measured from it), "
                         "or be empty to run only the schemes")
    for scheme in args.start_specs:
        if scheme not in args.schemes:
            raise StudyError(f"--start_spec names '{scheme}', which is not in --schemes")


def main(argv):
    try:
        args = parse_args(argv)
        check_names(args)
        os.makedirs(args.out, exist_ok=True)
        check_protocol(args, read_report(args.out))  # before hours of runs, not after
        results, probes, runner = run_study(args)
        mine = len(results)
        results, plots = write_report(args, results, probes)
    except StudyError as e:
        sys.exit(f"scale_study: {e}")
    print(f"scale_study: {runner.ran} runs made, {runner.reused} reused; wrote results.csv, scale.json, scale.md"
          + "".join(f", {p}" for p in plots) + f" in {args.out} ({mine} rows of this study, "
          f"{len(results) - mine} kept from the folder's report)")
    return 1 if any("failed" in r for r in results) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
