#!/usr/bin/python3.11
"""PyTorch reference for the SketchFuse compression benchmark.

This script is the "same work in PyTorch" side of a side-by-side benchmark:
it times, on the CPU with ONE thread, the gradient-compression operations that
SketchFuse's C++ kernels implement, written the way FetchSGD's ``CSVec`` does
them (precomputed hash buckets and signs, one scatter per sketch row, median
of the per-row estimates, then top-k).

Operations measured on a float32 vector of ``d`` elements (default: the
ResNet-50 parameter count) holding a heavy-tailed synthetic gradient
(Student-t, df=3, fixed seed):

  sketch_insert         Count-Sketch insert of the vector into an r x c table
  sketch_estimate_topk  estimate all d coordinates (median over rows) + top-k
  topk                  exact top-k by magnitude of the vector
  memcpy                copy of the vector (reference memory bandwidth)
  sketch_merge          element-wise sum of two r x c tables

Each op gets one warm-up call, then ``--reps`` timed calls (time.perf_counter);
the median and minimum seconds are reported, along with GB/s computed from the
bytes of the input (d*4; 2*d*4 for memcpy; 3*r*c*4 for merge) over the median.

Run it with Debian's interpreter and torch:  /usr/bin/python3.11 torch_reference.py
"""

import argparse
import json
import statistics
import sys
import time

try:
    import torch
except ImportError as exc:  # pragma: no cover - depends on the host
    sys.exit(
        f"error: cannot import torch ({exc}).\n"
        "Install Debian's PyTorch (apt-get install python3-torch) and run this "
        "script with /usr/bin/python3.11, not another python3 on PATH."
    )

RESNET50_PARAMS = 25_557_032
DEFAULT_ROWS = 5
DEFAULT_COLS = 500_000
DEFAULT_REPS = 3
DEFAULT_SEED = 42
QUICK_DIM = 1_000_000
QUICK_COLS = 20_000
QUICK_REPS = 2

# CSVec uses the Mersenne prime 2**61 - 1, whose products with int64 indices
# silently overflow int64.  We use the Mersenne prime 2**31 - 1 instead: every
# coefficient and every reduced intermediate is < 2**31, and indices are
# reduced mod p first, so each product is < 2**62 and fits exactly in int64.
PRIME = 2**31 - 1
HEAVY_HITTER_SCALE = 100.0  # planted values are this many times median |g|


# --------------------------------------------------------------------------
# Count Sketch (FetchSGD CSVec style)
# --------------------------------------------------------------------------

def make_hashes(d, rows, cols, seed):
    """Precompute per-row buckets (int64, rows x d) and signs (float32, ±1).

    buckets = ((a*i + b) mod p) mod c            (2-wise independent)
    signs   = (((c3*i + c2)*i + c1)*i + c0 mod p) mod 2 -> ±1   (4-wise)
    Evaluated with Horner's rule, reducing mod p after every step.
    """
    gen = torch.Generator().manual_seed(seed)
    coeffs = torch.randint(1, PRIME, (rows, 6), generator=gen, dtype=torch.int64)
    idx = torch.arange(d, dtype=torch.int64) % PRIME
    buckets = torch.empty(rows, d, dtype=torch.int64)
    signs = torch.empty(rows, d, dtype=torch.float32)
    for r in range(rows):
        a, b, c3, c2, c1, c0 = coeffs[r].tolist()
        h = (idx * a + b) % PRIME
        buckets[r] = h % cols
        h = (idx * c3 + c2) % PRIME
        h = (h * idx + c1) % PRIME
        h = (h * idx + c0) % PRIME
        signs[r] = (h % 2).to(torch.float32) * 2 - 1
    return buckets, signs


def sketch_insert(table, buckets, signs, vec):
    """Add vec into the table: one scatter-add per row (CSVec.accumulateVec)."""
    for r in range(table.shape[0]):
        table[r].scatter_add_(0, buckets[r], signs[r] * vec)


def sketch_estimate(table, buckets, signs):
    """Estimate every coordinate: median over rows of signed bucket values."""
    rows, d = buckets.shape
    vals = torch.empty(rows, d, dtype=table.dtype)
    for r in range(rows):
        vals[r] = table[r][buckets[r]] * signs[r]
    return vals.median(dim=0).values


def topk_indices(vec, k):
    """Indices of the k largest-magnitude entries (unsorted, as FetchSGD)."""
    return torch.topk(vec.abs(), k, sorted=False).indices


def sketch_estimate_topk(table, buckets, signs, k):
    """FetchSGD's unSketch: estimate all coordinates, keep the top k."""
    est = sketch_estimate(table, buckets, signs)
    idx = topk_indices(est, k)
    return idx, est[idx]


# --------------------------------------------------------------------------
# Data, sanity check, timing
# --------------------------------------------------------------------------

def make_gradient(d, seed):
    """Heavy-tailed synthetic gradient: Student-t (df=3) samples, float32."""
    torch.manual_seed(seed)
    dist = torch.distributions.StudentT(torch.tensor(3.0))
    return dist.sample((d,)).to(torch.float32).contiguous()


def heavy_hitter_recovery(vec, buckets, signs, cols, k, seed):
    """Plant k/10 large values, sketch them, return fraction found by top-k."""
    n_plant = max(1, k // 10)
    gen = torch.Generator().manual_seed(seed + 1)
    planted = torch.randperm(vec.numel(), generator=gen)[:n_plant]
    plant_signs = torch.randint(0, 2, (n_plant,), generator=gen).float() * 2 - 1
    magnitude = HEAVY_HITTER_SCALE * vec.abs().median()
    spiked = vec.clone()
    spiked[planted] = plant_signs * magnitude

    table = torch.zeros(buckets.shape[0], cols, dtype=torch.float32)
    sketch_insert(table, buckets, signs, spiked)
    found, _ = sketch_estimate_topk(table, buckets, signs, k)
    hit = torch.isin(planted, found).sum().item()
    return n_plant, hit / n_plant


def time_op(fn, reps):
    """One warm-up call, then reps timed calls; return (median_s, min_s)."""
    fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), min(times)


def run_benchmarks(vec, buckets, signs, rows, cols, k, reps):
    """Time every operation; return a list of result dicts."""
    d = vec.numel()
    table = torch.zeros(rows, cols, dtype=torch.float32)
    sketch_insert(table, buckets, signs, vec)  # a realistic, filled table
    table_b = table.clone()
    dst = torch.empty_like(vec)

    ops = [
        ("sketch_insert", lambda: sketch_insert(table, buckets, signs, vec), d * 4),
        ("sketch_estimate_topk",
         lambda: sketch_estimate_topk(table, buckets, signs, k), d * 4),
        ("topk", lambda: topk_indices(vec, k), d * 4),
        ("memcpy", lambda: dst.copy_(vec), 2 * d * 4),
        ("sketch_merge", lambda: table.add_(table_b), 3 * rows * cols * 4),
    ]
    results = []
    for name, fn, nbytes in ops:
        median_s, min_s = time_op(fn, reps)
        results.append({"op": name, "median_s": median_s, "min_s": min_s,
                        "bytes": nbytes})
    return results


# --------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------

def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dim", type=int, default=None,
                   help=f"vector length (default {RESNET50_PARAMS:,}; "
                        f"{QUICK_DIM:,} with --quick)")
    p.add_argument("--rows", type=int, default=DEFAULT_ROWS,
                   help="sketch rows r (default %(default)s)")
    p.add_argument("--cols", type=int, default=None,
                   help=f"sketch columns c (default {DEFAULT_COLS:,}; "
                        f"{QUICK_COLS:,} with --quick)")
    p.add_argument("--k", type=int, default=None,
                   help="top-k size (default dim // 1000)")
    p.add_argument("--reps", type=int, default=None,
                   help=f"timed repetitions (default {DEFAULT_REPS}; "
                        f"{QUICK_REPS} with --quick)")
    p.add_argument("--seed", type=int, default=DEFAULT_SEED,
                   help="RNG seed (default %(default)s)")
    p.add_argument("--json", metavar="PATH", help="write results as JSON")
    p.add_argument("--quick", action="store_true",
                   help="small run: dim 1,000,000, cols 20,000, reps 2")
    args = p.parse_args(argv)

    quick = args.quick
    if args.dim is None:
        args.dim = QUICK_DIM if quick else RESNET50_PARAMS
    if args.cols is None:
        args.cols = QUICK_COLS if quick else DEFAULT_COLS
    if args.reps is None:
        args.reps = QUICK_REPS if quick else DEFAULT_REPS
    if args.k is None:
        args.k = max(1, args.dim // 1000)
    for name in ("dim", "rows", "cols", "k", "reps"):
        if getattr(args, name) < 1:
            p.error(f"--{name} must be >= 1")
    if args.k > args.dim:
        p.error("--k must be <= --dim")
    return args


def main(argv=None):
    args = parse_args(argv)
    torch.set_num_threads(1)

    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, "
          f"dim {args.dim:,}, rows {args.rows}, cols {args.cols:,}, "
          f"k {args.k:,}, reps {args.reps}")

    vec = make_gradient(args.dim, args.seed)
    buckets, signs = make_hashes(args.dim, args.rows, args.cols, args.seed)

    n_plant, frac = heavy_hitter_recovery(vec, buckets, signs, args.cols,
                                          args.k, args.seed)
    print(f"sanity: sketch top-{args.k} recovers {frac:.3f} of "
          f"{n_plant} planted heavy hitters")

    results = run_benchmarks(vec, buckets, signs, args.rows, args.cols,
                             args.k, args.reps)
    print(f"{'op':<22}{'median_s':>12}{'min_s':>12}{'GB/s':>10}")
    for r in results:
        gbps = r["bytes"] / r["median_s"] / 1e9
        print(f"{r['op']:<22}{r['median_s']:>12.6f}{r['min_s']:>12.6f}"
              f"{gbps:>10.3f}")

    if args.json:
        report = {
            "tool": "torch",
            "torch_version": torch.__version__,
            "threads": torch.get_num_threads(),
            "dim": args.dim, "rows": args.rows, "cols": args.cols,
            "k": args.k, "reps": args.reps, "seed": args.seed,
            "sanity_recovery": frac,
            "results": results,
        }
        with open(args.json, "w") as f:
            json.dump(report, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
