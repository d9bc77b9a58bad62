#!/usr/bin/env python3
"""Plots bench/gpu_worker_bench's JSON: per workload, the step time of the host
and the GPU placement, split into compress, communicate and decode (rank 0's
medians; the rest of the step is fusion and bookkeeping).

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
    phases = ["compress_ms", "communicate_ms", "decode_ms"]
    fig, ax = plt.subplots(figsize=(1.6 * len(rows) + 2, 4))
    bottom = [0.0] * len(rows)
    for phase in phases:
        values = [r[phase] for r in rows]
        ax.bar(labels, values, bottom=bottom, label=phase[:-3])
        bottom = [b + v for b, v in zip(bottom, values)]
    ax.scatter(labels, [r["step_ms"] for r in rows], color="black", marker="_", s=400, label="whole step", zorder=3)
    ax.set_ylabel("ms per step (median)")
    ax.set_yscale("log")
    ax.set_title(f"sketch_allreduce step, {rows[0]['workers']} workers: groups on the host vs on the GPU")
    ax.legend()
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=120)
    print(f"wrote {sys.argv[2]}")


if __name__ == "__main__":
    main()
