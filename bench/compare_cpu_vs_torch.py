#!/usr/bin/python3.11
"""Merges the SketchFuse and PyTorch results of bench/cpu_vs_torch.sh.

Reads Google Benchmark's JSON (ours) and bench/torch_reference.py's JSON,
prints one table with the speedups and the targets of the compression-core
issue, and writes PREFIX.csv, PREFIX.json and PREFIX.png (a gnuplot bar chart,
when gnuplot is installed). The targets are checked against PyTorch as it
comes (TORCH_JSON), as the issue states them. TORCH_MAPPED_JSON, if given, is
PyTorch with freed memory kept mapped (the allocator setting SketchFuse's side
runs with); its column and speedups are shown beside, like for like.
Usage: compare_cpu_vs_torch.py SKETCHFUSE_JSON TORCH_JSON PREFIX [TORCH_MAPPED_JSON]
"""

import json
import platform
import shutil
import subprocess
import sys

# Google Benchmark name -> the op name torch_reference.py uses.
OPS = {
    "BM_SketchInsert/real_time": "sketch_insert",
    "BM_SketchEstimateTopK/real_time": "sketch_estimate_topk",
    "BM_TopK/real_time": "topk",
    "BM_SketchMerge/real_time": "sketch_merge",
    "BM_MemcpyGradient/real_time": "memcpy",
}
# Minimum speedup over PyTorch asked for by the issue.
SPEEDUP_TARGETS = {"sketch_insert": 3.0, "sketch_estimate_topk": 10.0, "topk": 5.0}
UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}


def load_ours(path):
    with open(path) as f:
        data = json.load(f)
    ours, bandwidth = {}, {}
    for b in data["benchmarks"]:
        seconds = b["real_time"] * UNIT_SECONDS[b["time_unit"]]
        name = b["name"]
        if name in OPS:
            ours[OPS[name]] = seconds
        bandwidth[name] = b.get("bytes_per_second", 0.0)
    return data.get("context", {}), ours, bandwidth


def load_torch(path):
    with open(path) as f:
        data = json.load(f)
    return data, {r["op"]: r["median_s"] for r in data["results"]}


def main(argv):
    if len(argv) not in (4, 5):
        sys.exit(__doc__)
    context, ours, bandwidth = load_ours(argv[1])
    torch_meta, theirs = load_torch(argv[2])
    prefix = argv[3]
    mapped = load_torch(argv[4])[1] if len(argv) == 5 else {}

    rows = []
    for op in ["sketch_insert", "sketch_estimate_topk", "topk", "sketch_merge", "memcpy"]:
        if op not in ours or op not in theirs:
            continue
        speedup = theirs[op] / ours[op]
        target = SPEEDUP_TARGETS.get(op)
        rows.append({"op": op, "sketchfuse_s": ours[op], "torch_s": theirs[op],
                     "speedup": speedup, "target_speedup": target,
                     "met": None if target is None else speedup >= target,
                     "torch_mapped_s": mapped.get(op),
                     "speedup_mapped": mapped[op] / ours[op] if op in mapped else None})
    merge_bw = bandwidth.get("BM_SketchMerge/real_time", 0.0)
    copy_bw = bandwidth.get("BM_MemcpySketchTable/real_time", 0.0)
    merge_ratio = merge_bw / copy_bw if copy_bw else float("nan")

    print(f"\nmachine: {platform.processor() or platform.machine()}, "
          f"{context.get('num_cpus', '?')} CPUs at {context.get('mhz_per_cpu', '?')} MHz; "
          f"dim {torch_meta['dim']:,}, sketch {torch_meta['rows']} x {torch_meta['cols']:,}, "
          f"k {torch_meta['k']:,}; torch {torch_meta['torch_version']}, one thread each")
    mapped_head = f"{'PyTorch kept mapped':>21}{'speedup':>9}" if mapped else ""
    print(f"{'op':<22}{'SketchFuse':>12}{'PyTorch':>12}{'speedup':>10}{'target':>9}  met{mapped_head}")
    for r in rows:
        target = f"{r['target_speedup']:.0f}x" if r["target_speedup"] else "-"
        met = "-" if r["met"] is None else ("yes" if r["met"] else "NO ")
        extra = ""
        if r["speedup_mapped"] is not None:
            extra = f"{r['torch_mapped_s'] * 1e3:>19.2f}ms{r['speedup_mapped']:>8.1f}x"
        print(f"{r['op']:<22}{r['sketchfuse_s'] * 1e3:>10.2f}ms{r['torch_s'] * 1e3:>10.2f}ms"
              f"{r['speedup']:>9.1f}x{target:>9}  {met}{extra}")
    print(f"sketch merge bandwidth {merge_bw / 1e9:.1f} GB/s = {100 * merge_ratio:.0f}% of "
          f"memcpy of the same table ({copy_bw / 1e9:.1f} GB/s); target 80%: "
          f"{'yes' if merge_ratio >= 0.8 else 'NO'}")

    summary = {"machine": context, "torch": {k: v for k, v in torch_meta.items() if k != "results"},
               "rows": rows, "merge_bandwidth_bytes_per_s": merge_bw,
               "memcpy_table_bandwidth_bytes_per_s": copy_bw, "merge_vs_memcpy": merge_ratio}
    with open(prefix + ".json", "w") as f:
        json.dump(summary, f, indent=2)
    with open(prefix + ".csv", "w") as f:
        f.write("op,sketchfuse_s,torch_s,speedup,target_speedup,torch_mapped_s,speedup_mapped\n")
        for r in rows:
            f.write(f"{r['op']},{r['sketchfuse_s']:.6f},{r['torch_s']:.6f},{r['speedup']:.3f},"
                    f"{r['target_speedup'] or ''},"
                    f"{'' if r['torch_mapped_s'] is None else format(r['torch_mapped_s'], '.6f')},"
                    f"{'' if r['speedup_mapped'] is None else format(r['speedup_mapped'], '.3f')}\n")
    print(f"wrote {prefix}.csv, {prefix}.json", end="")
    if shutil.which("gnuplot"):
        script = f"""
set terminal pngcairo size 900,500 noenhanced
set output '{prefix}.png'
set title 'CPU, one thread: SketchFuse vs PyTorch (dim {torch_meta['dim']:,})'
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set logscale y
set ylabel 'seconds (log scale)'
set datafile separator ','
set key top right
set xtics rotate by -20
plot '{prefix}.csv' every ::1 using 2:xtic(1) title 'SketchFuse', '' every ::1 using 3 title 'PyTorch'""" + (
            ", '' every ::1 using 6 title 'PyTorch, freed memory kept mapped'" if mapped else "") + """
"""
        subprocess.run(["gnuplot"], input=script, text=True, check=True)
        print(f", {prefix}.png")
    else:
        print(" (no gnuplot: no plot)")


if __name__ == "__main__":
    main(sys.argv)
