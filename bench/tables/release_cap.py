"""Tables of bench/results/release_cap/ (the release cap's multiple on the worker's MLP and CNN:
the default 1, twice it, and none, against dense_allreduce of the same seed)."""
from statistics import mean

from tables.common import markdown, study_rows, value, where

SCHEMES = ["topk_allgather", "sketch_allreduce"]
CAPS = ["1", "2", "0"]
CAP_NAMES = {"1": "cap 1 (default)", "2": "cap 2", "0": "no cap"}


def rows():
    return study_rows(__file__)


def _cell(rows, model, workers, ratio, scheme, cap):
    """The mean gap to dense over the seeds (points) and each seed's, or "" when none ran."""
    runs = where(rows, model=model, workers=workers)
    dense = {r["seed"]: value(r, "test_accuracy_pct") for r in where(runs, scheme="dense_allreduce")}
    found = {r["seed"]: r for r in where(runs, scheme=scheme, release_cap=cap, ratio_target=ratio) if r["seed"] in dense}
    if not found:
        return ""
    seeds = sorted(found, key=int)
    diverged = [s for s in seeds if found[s]["diverged_step"]]
    gaps = {s: value(found[s], "test_accuracy_pct") - dense[s] for s in seeds if s not in diverged}
    each = [f"div@{found[s]['diverged_step']}" if s in diverged else f"{gaps[s]:+.2f}" for s in seeds]
    if len(seeds) == 1:
        return each[0]
    head = f"{len(diverged)} of {len(seeds)} diverged" if diverged else f"{mean(gaps.values()):+.2f}"
    return f"{head} <br> " + " / ".join(each)


def table_gaps(rows):
    """docs/BENCHMARKS.md "The plain CNN": the worker's MLP and CNN at 4 (seeds 1 to 3) and 16
    (seed 1) virtual workers, each scheme at its default compressor (and at 100x where the
    study's --ratios=100 ran), its final test accuracy minus dense_allreduce's of the same
    seed, in points, by release cap: the mean, each seed's under it (div@N: diverged at step N)."""
    body = []
    ratios = sorted({r["ratio_target"] for r in rows}, key=lambda x: float(x or 0))
    for ratio in ratios:
        for workers in sorted({int(r["workers"]) for r in rows}):
            for model in ["mlp", "cnn"]:
                for scheme in SCHEMES:
                    cells = [_cell(rows, model, workers, ratio, scheme, cap) for cap in CAPS]
                    if any(cells):
                        at = f", {float(ratio):g}x" if ratio else ""
                        body.append([f"{model}, {workers} W{at}", f"`{scheme}`"] + cells)
    return markdown(["model", "scheme"] + [CAP_NAMES[c] for c in CAPS], body, ["l", "l"] + ["r"] * len(CAPS))


TABLES = {"gaps": table_gaps}
