#!/usr/bin/env python3
"""Sets the GPU benchmark's two sides (SketchFuse, PyTorch) next to each other.

Prints one table per model profile (median milliseconds of each side, the
speed-up, and SketchFuse's bandwidth as a fraction of the copy bandwidth of the
same run) with the targets of the GPU issue, and writes PREFIX.csv,
PREFIX.json and, when matplotlib is importable, PREFIX.png. For the sketch
operations, PyTorch runs twice: with FetchSGD's scattered buckets (the
"PyTorch" column, what the targets name) and with SketchFuse's chunked layout
(the "same layout" column, like for like).

Usage: compare_gpu_vs_torch.py SKETCHFUSE_JSON TORCH_JSON PREFIX
"""

import csv
import json
import sys

# (profile, op) -> (what the target says, check on (ours_ms, speedup)).
TARGETS = {
    ("resnet50", "compress_decode"): ("<= 0.3 ms and >= 10x PyTorch",
                                      lambda ms, x: ms <= 0.3 and x >= 10),
    ("resnet50", "compress_decode_r1"): ("<= 0.3 ms and >= 10x PyTorch",
                                         lambda ms, x: ms <= 0.3 and x >= 10),
    ("resnet50", "topk"): (">= 5x torch.topk", lambda ms, x: x >= 5),
}


def load(path):
    try:
        with open(path) as f:
            data = json.load(f)
        return data, {(r["profile"], r["op"]): r for r in data["results"]}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        sys.exit(f"error: {path}: cannot read benchmark figures ({exc})")


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    ours_data, ours = load(sys.argv[1])
    torch_data, theirs = load(sys.argv[2])
    prefix = sys.argv[3]
    rows = []
    for (profile, op), r in ours.items():
        t = theirs.get((profile, op))
        same = theirs.get((profile, op + "_chunked"))
        copy = ours.get((profile, "copy"))
        speedup = t["median_ms"] / r["median_ms"] if t else float("nan")
        rows.append({
            "profile": profile, "op": op, "n": r["n"],
            "sketchfuse_ms": r["median_ms"], "torch_ms": t["median_ms"] if t else float("nan"),
            "speedup": speedup,
            "torch_same_layout_ms": same["median_ms"] if same else float("nan"),
            "speedup_same_layout": same["median_ms"] / r["median_ms"] if same else float("nan"),
            "sketchfuse_gbps": r["gbps"],
            "fraction_of_copy": r["gbps"] / copy["gbps"] if copy else float("nan"),
        })
    print(f"\nSketchFuse vs PyTorch {torch_data.get('torch', '?')} on {ours_data['device']} "
          f"(median of {ours_data['reps']} runs each, same run)")
    for profile in dict.fromkeys(r["profile"] for r in rows):
        print(f"\n{profile}")
        print(f"  {'operation':<30}{'SketchFuse ms':>14}{'PyTorch ms':>12}{'speed-up':>10}"
              f"{'same layout':>12}{'speed-up':>10}{'GB/s':>9}{'of copy':>9}  target")
        for r in (r for r in rows if r["profile"] == profile):
            target = TARGETS.get((profile, r["op"]))
            verdict = ""
            if target:
                met = target[1](r["sketchfuse_ms"], r["speedup"])
                verdict = f"{target[0]}: {'met' if met else 'NOT met'}"
            torch_ms = f"{r['torch_ms']:>12.3f}" if r["torch_ms"] == r["torch_ms"] else f"{'-':>12}"
            speedup = f"{r['speedup']:>9.1f}x" if r["speedup"] == r["speedup"] else f"{'-':>10}"
            same = r["torch_same_layout_ms"]
            same_ms = f"{same:>12.3f}" if same == same else f"{'-':>12}"
            same_x = (f"{r['speedup_same_layout']:>9.1f}x" if same == same else f"{'-':>10}")
            print(f"  {r['op']:<30}{r['sketchfuse_ms']:>14.3f}{torch_ms}{speedup}{same_ms}{same_x}"
                  f"{r['sketchfuse_gbps']:>9.0f}"
                  f"{100 * r['fraction_of_copy']:>8.0f}%  {verdict}")
    with open(prefix + ".csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
        writer.writeheader()
        writer.writerows(rows)
    with open(prefix + ".json", "w") as f:
        json.dump({"device": ours_data["device"], "torch": torch_data.get("torch"),
                   "rows": rows}, f, indent=2)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"\n(no matplotlib: {prefix}.png not drawn)")
        return
    profiles = list(dict.fromkeys(r["profile"] for r in rows))
    fig, axes = plt.subplots(1, len(profiles), figsize=(7 * len(profiles), 4.5), squeeze=False)
    for ax, profile in zip(axes[0], profiles):
        sel = [r for r in rows if r["profile"] == profile and r["op"] != "copy"
               and r["torch_ms"] == r["torch_ms"]]
        xs = range(len(sel))
        ax.bar([x - 0.2 for x in xs], [r["sketchfuse_ms"] for r in sel], 0.4, label="SketchFuse")
        ax.bar([x + 0.2 for x in xs], [r["torch_ms"] for r in sel], 0.4, label="PyTorch")
        ax.set_yscale("log")
        ax.set_xticks(list(xs))
        ax.set_xticklabels([r["op"] for r in sel], rotation=40, ha="right")
        ax.set_ylabel("median ms (log)")
        ax.set_title(f"{profile} on {ours_data['device']}")
        ax.legend()
    fig.tight_layout()
    fig.savefig(prefix + ".png", dpi=110)


if __name__ == "__main__":
    main()
