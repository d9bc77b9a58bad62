#!/usr/bin/env python3
"""Plots bench/gpu_worker_bench's JSON: per workload and placement (host, GPU),
the whole step and its compress, communicate and decode phases side by side
(rank 0's medians, log scale; the rest of the step is the modelled backward
pass's 20 us per layer, fusion and bookkeeping).

    python3 bench/plot_gpu_worker.py gpu_worker.json gpu_worker.png
"""
import json
import sys


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: plot_gpu_worker.py FIGURES.json OUT.png")
    with open(sys.argv[1]) as f:
        rows = json.load(f)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"(no matplotlib: {sys.argv[2]} not drawn)")
        return
    labels = [f"{r['workload']}\n{r['device']}" for r in rows]
    series = [("step_ms", "whole step"), ("compress_ms", "compress"), ("communicate_ms", "communicate"),
              ("decode_ms", "decode")]
    fig, ax = plt.subplots(figsize=(1.8 * len(rows) + 2, 4))
    width = 0.8 / len(series)
    for j, (key, name) in enumerate(series):
        xs = [i + (j - (len(series) - 1) / 2) * width for i in range(len(rows))]
        ax.bar(xs, [max(r[key], 1e-3) for r in rows], width, label=name)
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels(labels)
    ax.set_ylabel("ms per step (median)")
    ax.set_yscale("log")
    ax.set_title(f"sketch_allreduce step, {rows[0]['workers']} workers: groups on the host vs on the GPU")
    ax.legend()
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=120)
    print(f"wrote {sys.argv[2]}")


if __name__ == "__main__":
    main()
