#!/usr/bin/env python3
"""One runner for training studies: a study spec in, a tidy results.csv out.

  python3 bench/study.py --out=DIR [--models=mlp] [--workers=4] [--links=none]
      [--schemes=a,b,...] [--baselines=dense_allreduce,dense_bf16_allreduce]
      [--ratios=default | 10,30,100,300] [--budget=moved|sent] [--seeds=1] [--epochs=2]
      [--train_examples=24000] [--batch_size=32] [--shards=2] [--virtual]
      [--worker_flags='--release_cap=0 ...']

For every cell of the spec (model x workers x link x seed) it launches real
local clusters (scripts/local_cluster.sh: server shards and W worker
processes, each a host of its own behind --links' rate where the machine
allows it; with --virtual the W workers in one process) and writes one row
per run to DIR/results.csv (columns: bench/harness/results.py RUN_FIELDS),
every curve point to DIR/curves.csv, and prints a table.

The schemes, their routes and default compressors are the worker's registry
(sketchfuse_worker --list_schemes=json); --schemes defaults to every
compressing scheme on one route (the hybrids equal their centralized route
while their shards answer; name them to run them), --baselines to the dense
ones. With --ratios=default every scheme runs at its default compressor, all
of a cell's schemes in one launch. With numeric ratios the baselines run
once per cell and each scheme once per ratio R at the density whose bytes
sent plus received per worker per step are 2 D / R (D: the dense float32
gradient's bytes; --budget=sent: whose bytes sent are D / R, the worker's
own ratio), found by two-step probe runs of virtual workers
(bench/harness/budget.py; kept in DIR/probes/), the same budget for every
scheme whatever its algorithm.

Each run's time to target is the wall time until its accuracy curve first
reaches the cell's dense_allreduce final accuracy minus one point
(bench/harness/targets.py). Launches are kept in DIR/launches/<tag>/; one
whose comparison was written by the same command is not run again, so a
study can be stopped and resumed. Exit status: 0 when every run finished
(a run that diverged is a result), 1 when one failed (named, with its log),
2 for a bad spec.
"""
import argparse
import csv
import json
import os
import shlex
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import budget, cluster_report, registry, results, targets  # noqa: E402
from harness.worker_runs import ReusingRunner, StudyError  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LAUNCHER = os.path.join(ROOT, "scripts", "local_cluster.sh")


def split_list(text, name, convert=str):
    try:
        values = [convert(v) for v in text.split(",") if v]
    except ValueError:
        raise StudyError(f"--{name}: '{text}' is not a comma-separated list of {convert.__name__}s") from None
    if not values:
        raise StudyError(f"--{name} is empty")
    return list(dict.fromkeys(values))


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True)
    parser.add_argument("--models", default="mlp")
    parser.add_argument("--workers", default="4")
    parser.add_argument("--links", default="none", help="none (loopback), auto, or rates such as 200mbit,1gbit")
    parser.add_argument("--schemes", default=None, help="default: every compressing scheme on one route")
    parser.add_argument("--baselines", default=None, help="default: the registry's dense schemes; empty: none")
    parser.add_argument("--ratios", default="default")
    parser.add_argument("--budget", choices=sorted(budget.BUDGETS), default="moved",
                        help="what a ratio counts: moved (sent plus received, 2D/R) or sent (D/R)")
    parser.add_argument("--seeds", default="1")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--train_examples", type=int, default=24000)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--shards", type=int, default=2)
    parser.add_argument("--virtual", action="store_true")
    parser.add_argument("--worker_flags", default="", help="more worker flags for every run, space-separated")
    parser.add_argument("--worker", default=None, help="the worker binary (default: bazel-bin's)")
    args = parser.parse_args(argv)
    args.models = split_list(args.models, "models")
    args.workers = split_list(args.workers, "workers", int)
    args.links = split_list(args.links, "links")
    args.seeds = split_list(args.seeds, "seeds", int)
    if args.ratios == "default":
        args.ratios = None
    else:
        args.ratios = split_list(args.ratios, "ratios", float)
        if any(not r > 1 for r in args.ratios):
            raise StudyError(f"--ratios: every ratio must be above 1 (or 'default'); got {args.ratios}")
    if any(w < 2 for w in args.workers):
        raise StudyError(f"--workers: a study needs at least 2 workers; got {args.workers}")
    for name in ("epochs", "train_examples", "batch_size", "shards"):
        if getattr(args, name) < 1:
            raise StudyError(f"--{name} must be a positive integer; got {getattr(args, name)}")
    args.worker_flags = shlex.split(args.worker_flags)
    if any(not f.startswith("--") for f in args.worker_flags):
        raise StudyError(f"--worker_flags takes worker flags (--name=value); got {args.worker_flags}")
    if args.virtual and any(link != "none" for link in args.links):
        raise StudyError("--virtual runs the workers in one process: it has no link (--links=none)")
    return args


def resolve_schemes(args, reg):
    """The spec's schemes and baselines, checked against the registry."""
    schemes = reg.compressing() if args.schemes is None else reg.check(split_list(args.schemes, "schemes"))
    if args.baselines is None:
        baselines = reg.baselines()
    else:
        baselines = reg.check([b for b in args.baselines.split(",") if b])
    if args.ratios is not None:
        dense = [s for s in schemes if not reg.get(s).compresses]
        if dense:
            raise StudyError(f"{', '.join(dense)} does not compress: name it in --baselines, which run at their "
                             "own bytes, not at a ratio")
    return schemes, baselines


def check_models(args):
    """StudyError naming a model the worker does not train, before anything runs."""
    scratch = os.path.join(args.out, "plan.json")
    for model in args.models:
        cmd = [args.worker, f"--write_job_config={scratch}", "--scheme=dense_allreduce", f"--workload={model}",
               f"--world_size={args.workers[0]}", f"--train_examples={args.train_examples}",
               f"--batch_size={args.batch_size}"]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            raise StudyError(f"--models: {model}: {done.stderr.strip().splitlines()[-1] if done.stderr else 'refused'}")
    if os.path.exists(scratch):
        os.remove(scratch)


class Study:
    def __init__(self, args, reg):
        self.args = args
        self.reg = reg
        self.probes = ReusingRunner()
        self.launches_run = 0
        self.densities = {}  # (model, workers, seed, scheme, ratio) -> compressor spec, or None out of reach

    def launch(self, tag, model, workers, link, seed, schemes, flags):
        """Runs (or reuses) one launch of scripts/local_cluster.sh; returns cluster_report.collect's answer."""
        a = self.args
        out = os.path.join(a.out, "launches", tag)
        cmd = ["bash", LAUNCHER, f"--workload={model}", f"--workers={workers}", f"--shards={a.shards}",
               f"--epochs={a.epochs}", f"--train_examples={a.train_examples}", f"--batch_size={a.batch_size}",
               f"--link={link}", f"--schemes={','.join(schemes)}", f"--out={out}"] \
            + (["--virtual"] if a.virtual else []) + ["--", f"--seed={seed}"] + flags + a.worker_flags
        made_by = os.path.join(out, "command")
        if os.path.exists(os.path.join(out, "comparison.json")) and os.path.exists(made_by):
            with open(made_by) as f:
                if f.read() == shlex.join(cmd):
                    return cluster_report.collect(out, workers, a.virtual, schemes)
        if os.path.exists(out):
            shutil.rmtree(out)
        os.makedirs(out)
        env = dict(os.environ, SKETCHFUSE_WORKER=a.worker)
        with open(out + ".log", "w") as log:
            done = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
        if done.returncode != 0:
            raise StudyError(f"{shlex.join(cmd)} failed (exit {done.returncode}); see {out}.log")
        with open(made_by, "w") as f:
            f.write(shlex.join(cmd))
        self.launches_run += 1
        return cluster_report.collect(out, workers, a.virtual, schemes)

    def probe_command(self, model, workers, seed, scheme, compressor):
        a = self.args
        cmd = [a.worker, f"--virtual_workers={workers}", f"--workload={model}", f"--scheme={scheme}", "--epochs=1",
               f"--train_examples={budget.PROBE_STEPS * workers * a.batch_size}", f"--batch_size={a.batch_size}",
               f"--seed={seed}", "--report_every=0"]
        if compressor is not None:
            cmd.append(f"--compressor={compressor}")
        return cmd + a.worker_flags

    def compressor_for(self, model, workers, seed, scheme, ratio):
        """The compressor spec of `scheme` whose bytes meet ratio's budget, or None when none does."""
        key = (model, workers, seed, scheme)
        if key not in self.densities:
            def probe(name, compressor):
                out = os.path.join(self.args.out, "probes", f"{model}_W{workers}_s{seed}_{scheme}_{name}.out")
                return self.probes.run(out, self.probe_command(model, workers, seed, scheme, compressor))
            measure = budget.BUDGETS[self.args.budget][0]
            _, first, _, spec, points = budget.calibrate(probe, f"{scheme} on {model} at W={workers}",
                                                         measure=measure)
            self.densities[key] = (probe, first, spec, points)
        probe, first, spec, points = self.densities[key]
        measure = budget.BUDGETS[self.args.budget][0]
        density = budget.density_for(probe, ratio, spec, points, budget.budget_for(first, ratio, self.args.budget),
                                     measure)
        return None if density is None else budget.with_density(spec, density)


def run_rows(runs, cell, ratio, compressor_rows):
    """results.csv rows of a launch's runs in `cell`."""
    rows = []
    for r in runs:
        d = r["diverged"]
        rows.append({**cell, "scheme": r["scheme"], "ratio_target": ratio, "compressor": r["compressor"],
                     "optimizer": r["optimizer"], "steps": r["steps"],
                     "test_accuracy_pct": results.pct(r["final_test_accuracy"]),
                     "test_loss": None if r["final_test_loss"] is None else round(r["final_test_loss"], 6),
                     "quality_metric": r["quality_metric"],
                     "diverged_step": None if d is None else d["step"], "step_ms": r["mean_step_ms"],
                     "sent_bytes_per_step": r["bytes_sent_per_worker_per_step"],
                     "received_bytes_per_step": r["bytes_received_per_worker_per_step"],
                     "compression_ratio": r["compression_ratio"],
                     "peel_recovered_pct": results.pct(r["peel_recovered_share"]), "wall_s": r["wall_s"],
                     **compressor_rows.get(r["scheme"], {})})
    return rows


def run_cell(study, model, workers, link, seed, schemes, baselines):
    """Every run of one cell: (rows, curve points, failures)."""
    a = study.args
    cell = {"model": model, "workers": workers, "link": link, "virtual": int(a.virtual), "seed": seed,
            "epochs": a.epochs, "train_examples": a.train_examples}
    base_tag = f"{model}_W{workers}_{link}_s{seed}"
    rows, curves, failed = [], {}, []
    plan = []  # (tag, schemes, extra flags, ratio)
    if a.ratios is None:
        plan.append((base_tag, baselines + schemes, [], None))
    else:
        if baselines:
            plan.append((f"{base_tag}_base", baselines, [], None))
        for ratio in a.ratios:
            for scheme in schemes:
                try:
                    spec = study.compressor_for(model, workers, seed, scheme, ratio)
                except StudyError as e:
                    failed.append(f"{base_tag} {scheme} {ratio:g}x: {e}")
                    continue
                if spec is None:
                    rows.append({**cell, "scheme": scheme, "ratio_target": ratio})
                    print(f"  {scheme} at {ratio:g}x: out of reach (no density in (0, 1] meets its budget)")
                    continue
                plan.append((f"{base_tag}_{scheme}_{ratio:g}x", [scheme], [f"--compressor={spec}"], ratio))
    for tag, names, flags, ratio in plan:
        print(f"  {tag}: {','.join(names)} {' '.join(flags)}", flush=True)
        try:
            runs, points, _, _ = study.launch(tag, model, workers, link, seed, names, flags)
        except (StudyError, FileNotFoundError, KeyError, json.JSONDecodeError) as e:
            failed.append(f"{tag}: {e}")
            print(f"  failed: {e}", flush=True)
            continue
        launch_rows = run_rows(runs, cell, ratio, {})
        for r, row in zip(runs, launch_rows):
            key = (r["scheme"], ratio)
            row["_key"] = key
            row["_diverged"] = r["diverged"] is not None
            curves[key] = [c for c in points if c["scheme"] == r["scheme"]]
        rows += launch_rows
    # The cell's target, from its dense_allreduce (at its default) or its best run.
    named = {f"{k[0]}" if k[1] is None else f"{k[0]}@{k[1]:g}x": v for k, v in curves.items()}
    diverged = {f"{r['_key'][0]}" if r["_key"][1] is None else f"{r['_key'][0]}@{r['_key'][1]:g}x"
                for r in rows if r.get("_diverged")}
    metric = next((r["quality_metric"] for r in rows if r.get("quality_metric")), targets.ACCURACY)
    target, _ = targets.target_of(named, diverged, metric=metric)
    for row in rows:
        key = row.pop("_key", None)
        row.pop("_diverged", None)
        if target is not None and key is not None:
            if metric == targets.LOSS:
                row["target_loss"] = round(target, 6)
            else:
                row["target_pct"] = results.pct(target)
            row["time_to_target_s"] = targets.time_to(curves[key], target, metric)
    curve_rows = [{**cell, "scheme": k[0], "ratio_target": k[1], **{x: c.get(x) for x in
                   ("step", "elapsed_s", "test_accuracy", "test_loss", "bytes_sent_per_worker")}}
                  for k, points in curves.items() for c in points]
    return rows, curve_rows, failed


def print_table(rows):
    by_loss = any(r.get("quality_metric") == targets.LOSS for r in rows)
    quality = "test_loss" if by_loss else "test_accuracy_pct"
    print(f"\n{'model':<10} {'W':>4} {'link':<8} {'seed':>4} {'scheme':<22} {'ratio':>6} "
          f"{'val. loss' if by_loss else 'accuracy':>9} {'vs dense':>8} {'to target':>9} {'sent KiB':>9} "
          f"{'measured':>8}")
    dense = {(r["model"], r["workers"], r["link"], r["seed"]): r.get(quality) for r in rows
             if r["scheme"] == "dense_allreduce" and r.get("ratio_target") is None}
    for r in rows:
        acc = r.get(quality)
        ref = dense.get((r["model"], r["workers"], r["link"], r["seed"]))
        if r.get("steps") is None:
            shown, vs = "no run", ""
        elif r.get("diverged_step") is not None:
            shown, vs = f"div@{r['diverged_step']}", ""
        elif by_loss:
            shown = "-" if acc is None else f"{acc:.4f}"
            vs = "" if acc is None or not ref else f"{100 * (acc / ref - 1):+.1f}%"
        else:
            shown = "-" if acc is None else f"{acc:.2f}%"
            vs = "" if acc is None or ref is None else f"{acc - ref:+.2f}"
        ttt = r.get("time_to_target_s")
        has_target = r.get("target_pct") is not None or r.get("target_loss") is not None
        ttt = "" if not has_target else "never" if ttt is None else f"{ttt:.1f}s"
        ratio = "" if r.get("ratio_target") is None else f"{r['ratio_target']:g}x"
        sent = r.get("sent_bytes_per_step")
        measured = r.get("compression_ratio")
        print(f"{r['model']:<10} {r['workers']:>4} {r['link']:<8} {r['seed']:>4} {r['scheme']:<22} {ratio:>6} "
              f"{shown:>9} {vs:>8} {ttt:>9} {'' if sent is None else f'{sent / 1024:.1f}':>9} "
              f"{'' if measured is None else f'{measured:.1f}x':>8}")


def main(argv):
    try:
        args = parse_args(argv)
        reg = registry.load(args.worker)
        args.worker = args.worker or os.environ.get("SKETCHFUSE_WORKER") or registry.DEFAULT_WORKER
        schemes, baselines = resolve_schemes(args, reg)
        os.makedirs(args.out, exist_ok=True)
        check_models(args)
    except (StudyError, registry.RegistryError) as e:
        print(f"study: {e}", file=sys.stderr)
        return 2
    study = Study(args, reg)
    rows, curve_rows, failed = [], [], []
    start = time.time()
    cells = [(m, w, link, s) for m in args.models for w in args.workers for link in args.links for s in args.seeds]
    for n, (model, workers, link, seed) in enumerate(cells, 1):
        print(f"[{n}/{len(cells)}] {model}, {workers} workers, link {link}, seed {seed} "
              f"({time.time() - start:.0f} s)", flush=True)
        cell_rows, cell_curves, cell_failed = run_cell(study, model, workers, link, seed, schemes, baselines)
        rows += cell_rows
        curve_rows += cell_curves
        failed += cell_failed
    results.write_csv(os.path.join(args.out, "results.csv"), rows, results.RUN_FIELDS)
    if curve_rows:
        results.write_csv(os.path.join(args.out, "curves.csv"), curve_rows, list(curve_rows[0]))
    print_table(rows)
    print(f"\nwritten: {args.out}/results.csv, curves.csv ({study.launches_run} launches and "
          f"{study.probes.ran} probes run, the rest reused)")
    for f in failed:
        print(f"failed: {f}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
