"""Tables of bench/results/release_cap/ (the release cap's multiple on the worker's MLP and CNN:
the default 1, twice it, and none, against dense_allreduce of the same seed)."""
from statistics import mean

from tables.common import markdown, study_rows, value, where

SCHEMES = ["topk_allgather", "sketch_allreduce"]
CAPS = ["1", "2", "0"]
CAP_NAMES = {"1": "cap 1 (default)", "2": "cap 2", "0": "no cap"}


def rows():
    return study_rows(__file__)


def _cell(rows, model, workers, scheme, cap):
    """The mean gap to dense over the seeds (points) and each seed's, or "" when none ran."""
    runs = where(rows, model=model, workers=workers)
    dense = {r["seed"]: value(r, "test_accuracy_pct") for r in where(runs, scheme="dense_allreduce")}
    gaps = {r["seed"]: value(r, "test_accuracy_pct") - dense[r["seed"]]
            for r in where(runs, scheme=scheme, release_cap=cap) if r["seed"] in dense}
    if not gaps:
        return ""
    seeds = sorted(gaps, key=int)
    if len(seeds) == 1:
        return f"{gaps[seeds[0]]:+.2f}"
    return f"{mean(gaps.values()):+.2f} <br> " + " / ".join(f"{gaps[s]:+.2f}" for s in seeds)


def table_gaps(rows):
    """docs/BENCHMARKS.md "The plain CNN": the worker's MLP and CNN at 4 (seeds 1 to 3) and 16
    (seed 1) virtual workers, each scheme's final test accuracy minus dense_allreduce's of the
    same seed, in points, by release cap: the mean, each seed's under it."""
    body = []
    for workers in sorted({int(r["workers"]) for r in rows}):
        for model in ["mlp", "cnn"]:
            for scheme in SCHEMES:
                cells = [_cell(rows, model, workers, scheme, cap) for cap in CAPS]
                if any(cells):
                    body.append([f"{model}, {workers} W", f"`{scheme}`"] + cells)
    return markdown(["model", "scheme"] + [CAP_NAMES[c] for c in CAPS], body, ["l", "l"] + ["r"] * len(CAPS))


TABLES = {"gaps": table_gaps}
