#!/usr/bin/env python3
"""The BLAS under LibTorch: the same training job on the reference BLAS and on OpenBLAS.

Debian's LibTorch calls its matrix products through libblas.so.3, an
alternative that is the reference (netlib) BLAS unless an optimized one is
installed (scripts/setup.sh installs OpenBLAS, libopenblas0-openmp). This
benchmark runs the same job twice per model, side by side in one run: once
with the reference library put first on LD_LIBRARY_PATH
(/usr/lib/<triplet>/blas, package libblas3) and once with the libblas.so.3
the system selects, and reports per model and BLAS:

  - the mean step time and the backward phase per step of virtual worker 0
    (its forward and backward pass, where the products are), from the
    worker's summary;
  - the whole run's wall time;
  - the final test accuracy (the two libraries add in different orders, so
    the figures are reported, not assumed equal).

  python3 bench/blas_compare.py [--models=mlp,cnn,cnn_wide,mlp_large] [--workers=4]
                                [--train_examples=3840] [--threads=1] [--worker=BIN]
                                [--out=DIR]

Each job: --virtual_workers=W --scheme=dense_allreduce, 1 epoch of
--train_examples examples, batch 32, seed 1, --threads threads. Writes
DIR/blas.csv, DIR/blas.json, DIR/blas.txt (this report), DIR/blas.png (with
gnuplot), and each run's output as DIR/<model>_<blas>.out. Exits non-zero,
naming the problem, on a bad flag, a missing worker binary (1) or a missing
reference BLAS (2).
"""
import argparse
import csv
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KNOWN_MODELS = ("mlp", "cnn", "mlp_large", "cnn_wide")  # worker/training/models.cc KnownClassifiers


def triplet():
    out = subprocess.run(["gcc", "-dumpmachine"], capture_output=True, text=True)
    return out.stdout.strip() if out.returncode == 0 and out.stdout.strip() else "x86_64-linux-gnu"


def selected_blas():
    """The file libblas.so.3 resolves to on this system."""
    path = f"/usr/lib/{triplet()}/libblas.so.3"
    return os.path.realpath(path) if os.path.exists(path) else "(none)"


def summary_of(text):
    for line in text.splitlines():
        if line.startswith("summary "):
            return json.loads(line[len("summary "):])
    return None


def run_one(args, model, blas, reference_dir, out_path):
    cmd = [args.worker, f"--virtual_workers={args.workers}", f"--workload={model}",
           "--scheme=dense_allreduce", "--epochs=1", f"--train_examples={args.train_examples}",
           "--batch_size=32", "--seed=1", "--report_every=0", f"--threads={args.threads}"]
    env = dict(os.environ)
    if blas == "reference":
        lapack = os.path.join(os.path.dirname(reference_dir), "lapack")
        env["LD_LIBRARY_PATH"] = ":".join(p for p in [reference_dir, lapack, env.get("LD_LIBRARY_PATH", "")] if p)
    start = time.time()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall = time.time() - start
    prefix = "LD_LIBRARY_PATH=" + env["LD_LIBRARY_PATH"] + " " if blas == "reference" else ""
    with open(out_path, "w") as f:
        f.write("# " + prefix + " ".join(cmd) + "\n" + proc.stdout + proc.stderr)
    summary = summary_of(proc.stdout)
    if proc.returncode != 0 or summary is None:
        sys.exit(f"blas_compare: {model} on the {blas} BLAS failed (exit {proc.returncode}); see {out_path}")
    return {
        "model": model,
        "blas": blas,
        "mean_step_s": summary["mean_step_s"],
        "backward_s": summary["phases_s"]["backward"],
        "wall_s": round(wall, 2),
        "final_test_accuracy": summary["final_test_accuracy"],
        "steps": summary["steps"],
    }


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default="mlp,cnn,cnn_wide,mlp_large")
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--train_examples", type=int, default=3840)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--worker", default=os.path.join(ROOT, "bazel-bin/worker/sketchfuse_worker"))
    p.add_argument("--out", default=os.path.join(ROOT, "out/blas"))
    args = p.parse_args()
    models = [m for m in args.models.split(",") if m]
    for m in models:
        if m not in KNOWN_MODELS:
            sys.exit(f"blas_compare: unknown model '{m}' in --models (known: {', '.join(KNOWN_MODELS)})")
    if not models:
        sys.exit("blas_compare: --models names no model")
    if args.workers < 1 or args.workers > 256:
        sys.exit(f"blas_compare: --workers must be in [1, 256]; got {args.workers}")
    if args.threads < 1 or args.threads > 256:
        sys.exit(f"blas_compare: --threads must be in [1, 256]; got {args.threads}")
    if args.train_examples < 32 * args.workers:
        sys.exit(f"blas_compare: --train_examples must be at least 32 * --workers ({32 * args.workers}) for one step; "
                 f"got {args.train_examples}")
    if not os.access(args.worker, os.X_OK):
        sys.exit(f"blas_compare: no worker binary at {args.worker} (bash scripts/bazel.sh build //worker:sketchfuse_worker)")
    reference_dir = f"/usr/lib/{triplet()}/blas"
    if not os.path.exists(os.path.join(reference_dir, "libblas.so.3")):
        print(f"blas_compare: the reference BLAS is not installed ({reference_dir}/libblas.so.3; "
              "apt-get install libblas3, or scripts/setup.sh)", file=sys.stderr)
        sys.exit(2)
    os.makedirs(args.out, exist_ok=True)
    selected = selected_blas()

    rows = []
    for model in models:
        for blas in ("reference", "selected"):
            rows.append(run_one(args, model, blas, reference_dir, os.path.join(args.out, f"{model}_{blas}.out")))
            r = rows[-1]
            print(f"{model:10s} {blas:9s} step {r['mean_step_s'] * 1000:8.1f} ms  backward {r['backward_s'] * 1000:7.1f} ms"
                  f"  wall {r['wall_s']:6.1f} s  accuracy {r['final_test_accuracy'] * 100:.2f}%", flush=True)

    lines = [
        "# The BLAS under LibTorch",
        "",
        f"Command: python3 bench/blas_compare.py --models={','.join(models)} --workers={args.workers} "
        f"--train_examples={args.train_examples} --threads={args.threads}",
        f"Machine: {os.cpu_count()} cores; {time.strftime('%Y-%m-%d', time.gmtime())}. "
        f"reference: {reference_dir}/libblas.so.3 first on LD_LIBRARY_PATH; selected: libblas.so.3 -> {selected}.",
        f"Each job: {args.workers} virtual workers, dense_allreduce, one epoch of {args.train_examples} examples "
        f"(batch 32 per worker), {args.threads} thread(s). Step and backward: virtual worker 0's mean per step.",
        "",
        "| model | step, reference | step, selected | speed-up | backward, reference | backward, selected | speed-up "
        "| accuracy, reference | accuracy, selected |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    pairs = {m: ({r["blas"]: r for r in rows if r["model"] == m}) for m in models}
    for model in models:
        ref, sel = pairs[model]["reference"], pairs[model]["selected"]
        lines.append(
            f"| {model} | {ref['mean_step_s'] * 1000:.1f} ms | {sel['mean_step_s'] * 1000:.1f} ms | "
            f"{ref['mean_step_s'] / sel['mean_step_s']:.1f}x | {ref['backward_s'] * 1000:.1f} ms | "
            f"{sel['backward_s'] * 1000:.1f} ms | {ref['backward_s'] / sel['backward_s']:.1f}x | "
            f"{ref['final_test_accuracy'] * 100:.2f}% | {sel['final_test_accuracy'] * 100:.2f}% |")
    report = "\n".join(lines) + "\n"
    print(report)
    with open(os.path.join(args.out, "blas.txt"), "w") as f:
        f.write(report)
    with open(os.path.join(args.out, "blas.json"), "w") as f:
        json.dump({"selected_blas": selected, "reference_blas": reference_dir, "workers": args.workers,
                   "train_examples": args.train_examples, "threads": args.threads, "rows": rows}, f, indent=1)
    with open(os.path.join(args.out, "blas.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
        w.writeheader()
        w.writerows(rows)
    if subprocess.run(["sh", "-c", "command -v gnuplot"], capture_output=True).returncode == 0:
        data = os.path.join(args.out, "blas.dat")
        with open(data, "w") as f:
            for i, model in enumerate(models):
                ref, sel = pairs[model]["reference"], pairs[model]["selected"]
                f.write(f"{i} {model} {ref['mean_step_s'] / sel['mean_step_s']:.3f} "
                        f"{ref['backward_s'] / sel['backward_s']:.3f}\n")
        png = os.path.join(args.out, "blas.png")
        subprocess.run(["gnuplot", "-e",
                        f"set terminal png size 800,450; set output '{png}'; set style data histogram; "
                        "set style histogram clustered; set style fill solid 0.8; set yrange [0:*]; "
                        f"set ylabel 'reference time / selected time ({args.workers} virtual workers)'; "
                        f"set title 'The BLAS under LibTorch: speed-up of {os.path.basename(os.path.dirname(selected))}'; "
                        f"plot '{data}' using 3:xtic(2) title 'step', '' using 4 title 'backward pass'"],
                       check=False)
        os.remove(data)


if __name__ == "__main__":
    main()
