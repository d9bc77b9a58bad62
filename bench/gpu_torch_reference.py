#!/usr/bin/env python3
"""PyTorch on the GPU doing the work of bench/gpu_compression_bench.

The "same work in PyTorch" side of the GPU benchmark. It reads the SketchFuse
run's JSON (for the sizes, the sketch shape, k and the layer list, so both
sides measure the same problem) and times, on the same GPU and in the same
run, the operations written the way FetchSGD's CSVec does them: hash buckets
and signs precomputed (their cost is not counted), one scatter_add per sketch
row, a gather per row and a median over rows, then torch.topk.

  copy               y.copy_(x)
  sketch_insert      table.zero_(); table[r].scatter_add_(0, buckets[r], signs[r] * x)
  heavy_hitters      median over rows of signs[r] * table[r][buckets[r]], torch.topk(|est|, k)
  (_r1: the same two with a one-row sketch)
  compress_decode    the two above
  compress_decode_r1 the same with a one-row sketch
  *_chunked          sketch_insert, heavy_hitters and compress_decode (and their
                     _r1) with buckets of SketchFuse's chunked layout: runs of
                     consecutive cells at random offsets (common/sketch_hash.h),
                     so PyTorch's scatter and gather coalesce too (like for like)
  topk               torch.topk(x.abs(), k)
  gather             x[idx]
  scatter_add        y.index_add_(0, idx, v)
  ef_momentum        u.mul_(m).add_(g); e.add_(u)
  pack               torch.cat(layers, out=fused)

Times come from CUDA events around each call (3 warm-ups, then --reps timed
calls, median and minimum), as the C++ side does.

Usage: python3 gpu_torch_reference.py SKETCHFUSE_JSON --json OUT_JSON
"""

import argparse
import json
import statistics
import sys

try:
    import torch
except ImportError as exc:  # pragma: no cover - depends on the host
    sys.exit(f"error: cannot import torch ({exc}); run this where PyTorch with CUDA is installed")


def time_op(fn, reps):
    for _ in range(3):
        fn()
    start = torch.cuda.Event(enable_timing=True)
    stop = torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(reps):
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    return statistics.median(times), min(times)


def student_t(n, seed):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    z = torch.randn(n, device="cuda", generator=gen)
    chi2 = torch.randn(3, n, device="cuda", generator=gen).pow_(2).sum(0)
    return (z / torch.sqrt(chi2 / 3) * 1e-3).contiguous()


def make_hashes(n, rows, cols, seed):
    """Buckets (int64) and signs (float32) per row, as CSVec precomputes them."""
    gen = torch.Generator(device="cuda").manual_seed(seed)
    buckets = torch.randint(0, cols, (rows, n), device="cuda", generator=gen, dtype=torch.int64)
    signs = torch.randint(0, 2, (rows, n), device="cuda", generator=gen).float() * 2 - 1
    return buckets, signs


def make_chunked_hashes(n, rows, cols, seed):
    """Buckets of the chunked layout: chunk j of L consecutive coordinates lands
    on L consecutive cells (cyclically) at a random offset per row, with a
    random sign per coordinate; L as common/sketch_hash.h chooses it."""
    length = 1
    while 2 * length <= min(cols, 1024):
        length *= 2
    gen = torch.Generator(device="cuda").manual_seed(seed)
    chunks = (n + length - 1) // length
    offsets = torch.randint(0, cols, (rows, chunks), device="cuda", generator=gen,
                            dtype=torch.int64)
    i = torch.arange(n, device="cuda", dtype=torch.int64)
    buckets = (offsets[:, i // length] + i % length) % cols
    signs = torch.randint(0, 2, (rows, n), device="cuda", generator=gen).float() * 2 - 1
    return buckets, signs


def run_profile(name, n, layer_sizes, rows, cols_divisor, k_fraction, reps):
    cols = int(n / cols_divisor)
    k = max(1, int(n * k_fraction))
    x = student_t(n, 1)
    y = torch.empty_like(x)
    u = student_t(n, 2)
    e = student_t(n, 3)
    hashes = {"": make_hashes(n, rows, cols, 7), "_chunked": make_chunked_hashes(n, rows, cols, 8)}
    table = torch.zeros(rows, cols, device="cuda")
    table1 = torch.zeros(1, cols, device="cuda")
    idx = torch.randperm(n, device="cuda")[:k].sort().values
    v = x[idx].clone()
    layers = [torch.randn(s, device="cuda") for s in layer_sizes]
    fused = torch.empty(sum(layer_sizes), device="cuda")

    def insert(t, r, layout=""):
        buckets, signs = hashes[layout]
        t.zero_()
        for row in range(r):
            t[row].scatter_add_(0, buckets[row], signs[row] * x)

    def heavy_hitters(t, r, layout=""):
        buckets, signs = hashes[layout]
        est = torch.stack([signs[row] * t[row][buckets[row]] for row in range(r)])
        est = est.median(dim=0).values if r > 1 else est[0]
        top = torch.topk(est.abs(), k, sorted=False).indices
        return top, est[top]

    ops = [
        ("copy", 8.0 * n, lambda: y.copy_(x)),
        ("sketch_insert", 4.0 * n, lambda: insert(table, rows)),
        ("sketch_insert_r1", 4.0 * n, lambda: insert(table1, 1)),
        ("heavy_hitters_r1", 4.0 * n, lambda: heavy_hitters(table1, 1)),
        ("heavy_hitters", 4.0 * n, lambda: heavy_hitters(table, rows)),
        ("compress_decode", 4.0 * n, lambda: (insert(table, rows), heavy_hitters(table, rows))),
        ("compress_decode_r1", 4.0 * n, lambda: (insert(table1, 1), heavy_hitters(table1, 1))),
        ("topk", 4.0 * n, lambda: torch.topk(x.abs(), k, sorted=False)),
        ("gather", 12.0 * k, lambda: x[idx]),
        ("scatter_add", 16.0 * k, lambda: y.index_add_(0, idx, v)),
        ("ef_momentum", 20.0 * n, lambda: (u.mul_(0.9).add_(x), e.add_(u))),
        ("pack", 8.0 * n, lambda: torch.cat(layers, out=fused)),
    ]
    c = "_chunked"  # the same sketch work with SketchFuse's layout
    ops += [
        ("sketch_insert" + c, 4.0 * n, lambda: insert(table, rows, c)),
        ("sketch_insert_r1" + c, 4.0 * n, lambda: insert(table1, 1, c)),
        ("heavy_hitters_r1" + c, 4.0 * n, lambda: heavy_hitters(table1, 1, c)),
        ("heavy_hitters" + c, 4.0 * n, lambda: heavy_hitters(table, rows, c)),
        ("compress_decode" + c, 4.0 * n,
         lambda: (insert(table, rows, c), heavy_hitters(table, rows, c))),
        ("compress_decode_r1" + c, 4.0 * n,
         lambda: (insert(table1, 1, c), heavy_hitters(table1, 1, c))),
    ]
    print(f"\n{name}: {n} parameters, sketch {rows} x {cols}, k = {k} (PyTorch {torch.__version__})")
    results = []
    for op, nbytes, fn in ops:
        median, minimum = time_op(fn, reps)
        gbps = nbytes / (median * 1e-3) / 1e9
        print(f"  {op:<20} {median:10.3f} ms (min {minimum:8.3f})  {gbps:8.1f} GB/s")
        results.append({"profile": name, "op": op, "n": n, "median_ms": median,
                        "min_ms": minimum, "bytes": nbytes, "gbps": gbps})
    del hashes, table, layers, fused
    torch.cuda.empty_cache()
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sketchfuse_json", help="the JSON written by gpu_compression_bench")
    parser.add_argument("--json", required=True, help="write PyTorch's figures here")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("error: PyTorch sees no CUDA device")
    try:
        with open(args.sketchfuse_json) as f:
            ours = json.load(f)
        sizes = {r["profile"]: r["n"] for r in ours["results"]}
        layer_sizes = ours["layer_sizes"]
        rows, cols_divisor = int(ours["rows"]), float(ours["cols_divisor"])
        k_fraction, reps = float(ours["k_fraction"]), int(ours["reps"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        sys.exit(f"error: {args.sketchfuse_json}: not a gpu_compression_bench JSON ({exc})")
    results = []
    for name, n in sizes.items():
        results += run_profile(name, n, layer_sizes[name], rows, cols_divisor, k_fraction, reps)
    with open(args.json, "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                   "results": results}, f, indent=2)


if __name__ == "__main__":
    main()
