#!/usr/bin/env python3
"""Tabulates this folder's runs (runs/*.out, one worker run each, its last
line the worker's JSON summary) into runs.csv and runs.json, and plots the
256-worker 10x runs' test accuracy by epoch into w256_curves.png (gnuplot,
when installed). Prints the table. Usage, from anywhere:
    python3 bench/data/scale/study_large_grid/ef_rate/worker/summarize.py
"""
import csv
import json
import pathlib
import shutil
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve().parent
FIELDS = ["run", "workers", "scheme", "compressor", "seed", "residual_in_rate_units", "steps",
          "final_test_accuracy", "diverged", "bytes_sent_per_step", "bytes_received_per_step"]


def read_run(path):
    """One row from a run's output, or None (with a message) if it has no summary."""
    lines = path.read_text().splitlines()
    command = lines[0].lstrip("# ").split() if lines and lines[0].startswith("#") else []
    flags = dict(arg[2:].split("=", 1) for arg in command if arg.startswith("--") and "=" in arg)
    summaries = [line[len("summary "):] for line in lines if line.startswith("summary {")]
    if not summaries:
        print(f"{path.name}: no summary line (the run did not finish)", file=sys.stderr)
        return None
    summary = json.loads(summaries[-1])
    rate_units = "--residual_in_rate_units" in command or flags.get("residual_in_rate_units") == "true"
    if flags.get("residual_in_rate_units") == "false":
        rate_units = False
    return {
        "run": path.stem,
        "workers": int(flags["virtual_workers"]),
        "scheme": summary["scheme"],
        "compressor": summary["compressor"],
        "seed": int(flags["seed"]),
        # Dense keeps no residual; the flag is moot there.
        "residual_in_rate_units": rate_units if summary["scheme"] != "dense_allreduce" else "",
        "steps": summary["steps"],
        "final_test_accuracy": summary["final_test_accuracy"],
        "diverged": summary["diverged"] is not None,
        "bytes_sent_per_step": summary["bytes_sent_per_step"],
        "bytes_received_per_step": summary["bytes_received_per_step"],
        "curve": [(e["step"], e["test_accuracy"]) for e in summary.get("epochs", [])],
    }


def main():
    rows = [r for r in (read_run(p) for p in sorted((HERE / "runs").glob("*.out"))) if r is not None]
    with open(HERE / "runs.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=FIELDS, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    (HERE / "runs.json").write_text(json.dumps(rows, indent=1) + "\n")
    for r in rows:
        acc = "diverged" if r["diverged"] else f"{100 * r['final_test_accuracy']:.2f}%"
        print(f"{r['run']:<24} W={r['workers']:<4} {r['scheme']:<16} seed {r['seed']} {acc:>9} "
              f"sent {r['bytes_sent_per_step']:>12,.1f} received {r['bytes_received_per_step']:>12,.1f}")
    curves = [r for r in rows if r["workers"] == 256 and r["curve"] and "fs100" not in r["run"]]
    if not shutil.which("gnuplot") or not curves:
        print("(no gnuplot or no curves: no plot)")
        return
    data = HERE / "w256_curves.dat"
    with open(data, "w") as f:
        for r in curves:
            f.write(f'"{r["run"]}"\n')
            for step, acc in r["curve"]:
                f.write(f"{step} {100 * acc:.2f}\n")
            f.write("\n\n")
    script = (f'set terminal pngcairo size 1000,600; set output "{HERE / "w256_curves.png"}";'
              'set termoption noenhanced; set title "mlp_large, 256 virtual workers, 10x: test accuracy by epoch";'
              'set xlabel "step"; set ylabel "test accuracy (%)"; set yrange [40:90]; set key bottom right;'
              f'plot for [i=0:{len(curves) - 1}] "{data}" index i using 1:2 with linespoints title columnheader(1)')
    subprocess.run(["gnuplot"], input=script, text=True, check=True)
    print(f"wrote {HERE / 'w256_curves.png'}")


if __name__ == "__main__":
    main()
