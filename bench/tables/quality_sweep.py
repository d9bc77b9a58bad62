"""Tables of bench/results/quality_sweep/ (every scheme's final test accuracy at 10x to 300x
on the MLP and the CNN, 4 workers; the sketch routes and the baselines on three seeds)."""
from tables.common import fmt, markdown, signed, study_rows, value, where

RATIOS = ["10", "30", "50", "100", "300"]
SCHEMES = ["sketch_ps", "sketch_allreduce", "topk_allgather", "gtopk", "spardl", "importance_allreduce", "topk_ps"]


def rows():
    return study_rows(__file__)


def _mean(xs):
    return sum(xs) / len(xs)


def _accs(runs):
    return [value(r, "test_accuracy_pct") for r in runs]


def _dense(rows, model, seeds=None):
    """dense_allreduce's mean accuracy over `seeds` (all its seeds when None)."""
    runs = [r for r in where(rows, model=model, scheme="dense_allreduce")
            if seeds is None or r["seed"] in seeds]
    if seeds is not None and len(runs) != len(seeds):
        raise LookupError(f"dense_allreduce on {model} lacks a seed of {sorted(seeds)}")
    return _mean(_accs(runs))


def _cell(runs):
    """A cell: the accuracy (mean of seeds, '(n)' when n > 1) or where it diverged."""
    if not runs:
        return ""
    diverged = [r for r in runs if r["diverged_step"]]
    if diverged:
        return "diverged (step " + ", ".join(r["diverged_step"] for r in diverged) + ")"
    n = len(runs)
    return fmt(_mean(_accs(runs)), 2, "%") + (f" ({n})" if n > 1 else "")


def table_accuracy(rows):
    """The table of docs/BENCHMARKS.md "Training quality: every scheme at 10x to 300x, MLP and
    CNN": final test accuracy by scheme and target ratio, seed 1, or the mean of n seeds where
    the cell says (n) (seeds 1-3); dense_allreduce's seed 1 and three-seed mean beside its name."""
    body = []
    for model in ("cnn", "mlp"):
        d1 = _dense(rows, model, {"1"})
        d3 = _dense(rows, model, {"1", "2", "3"})
        body.append([model, f"dense_allreduce ({fmt(d1, 2, '%')}; {fmt(d3, 2, '%')} (3))"] + [""] * len(RATIOS))
        bf16 = where(rows, model=model, scheme="dense_bf16_allreduce")
        if bf16:
            ratio = _mean([value(r, "compression_ratio") for r in bf16])
            body.append([model, f"dense_bf16_allreduce ({fmt(ratio, 1, 'x')}; {_cell(bf16)})"] + [""] * len(RATIOS))
        for scheme in SCHEMES:
            cells = [_cell([r for r in where(rows, model=model, scheme=scheme)
                            if r["ratio_target"] and float(r["ratio_target"]) == float(t)]) for t in RATIOS]
            if any(cells):
                body.append([model, scheme] + cells)
    return markdown(["model", "scheme"] + [f"{t}x" for t in RATIOS], body, ["l", "l"] + ["r"] * len(RATIOS))


def table_by_ratio(rows):
    """docs/BENCHMARKS.md "Training quality at 4 workers": final test accuracy by scheme and
    target ratio, both models side by side (seed 1, or the mean of n seeds where a cell says
    (n)); dense_allreduce's seed-1 accuracy in the first header cell."""
    ratios = ["10", "30", "100", "300"]
    dense = {m: _dense(rows, m, {"1"}) for m in ("mlp", "cnn")}
    header = [f"scheme (dense: MLP {fmt(dense['mlp'], 2, '%')}, CNN {fmt(dense['cnn'], 2, '%')})"]
    header += [f"{m.upper()} {t}x" for m in ("mlp", "cnn") for t in ratios]
    body = []
    for scheme in SCHEMES:
        cells = [_cell([r for r in where(rows, model=m, scheme=scheme)
                        if r["ratio_target"] and float(r["ratio_target"]) == float(t)])
                 for m in ("mlp", "cnn") for t in ratios]
        if any(cells):
            body.append([scheme] + [c.replace("diverged (step ", "div. ").rstrip(")") if c.startswith("diverged")
                                    else c for c in cells])
    return markdown(header, body)


def _mean_gap(rows, model, scheme, **match):
    """(mean accuracy over the seeds run, points against dense_allreduce on the same seeds)."""
    runs = where(rows, model=model, scheme=scheme, **match)
    if not runs or any(r["diverged_step"] for r in runs):
        raise LookupError(f"no complete runs of {scheme} on {model} {match}")
    acc = _mean(_accs(runs))
    return acc, acc - _dense(rows, model, {r["seed"] for r in runs}), len(runs)


def table_three_seeds(rows):
    """docs/BENCHMARKS.md "Training quality at 4 workers, 10x to 300x", three seeds: dense_allreduce against the sketch
    routes (and Top-k allgather at the same bytes) at 10x and 50x, mean of seeds 1-3 and the
    gap to dense in points."""
    cols = ["sketch_ps", "sketch_allreduce", "topk_allgather"]
    body = []
    for model in ("cnn", "mlp"):
        for ratio in ("10", "50"):
            cells = []
            for scheme in cols:
                acc, gap, n = _mean_gap(rows, model, scheme, ratio_target=ratio)
                if n != 3:
                    raise LookupError(f"{scheme} {model} {ratio}x: {n} seeds")
                cells.append(f"{fmt(acc, 2, '%')} ({signed(gap)})")
            body.append([model, f"{ratio}x", fmt(_dense(rows, model, {"1", "2", "3"}), 2, "%")] + cells)
    return markdown(["model", "ratio", "dense_allreduce"] + cols, body)


def table_baselines(rows):
    """docs/BENCHMARKS.md "Training quality at 4 workers, 10x to 300x" (and worker/README.md "Baselines"): the baselines
    at their defaults (topk_ps's default is its 10x) and SparDL at 10x, mean of seeds 1-3 and
    the gap to dense_allreduce's mean in points; the ratio measured, CNN / MLP."""
    picks = [("topk_ps", "10"), ("importance_allreduce", ""), ("topk_allgather", ""), ("spardl", "10")]
    body = [["dense_allreduce", "dense", "0.67x", fmt(_dense(rows, "cnn"), 2, "%"), fmt(_dense(rows, "mlp"), 2, "%")]]
    for scheme, ratio in picks:
        runs = where(rows, scheme=scheme, ratio_target=ratio)
        specs = sorted({r["compressor"] for r in runs})
        if len(specs) != 1:
            raise LookupError(f"{scheme}: specs {specs}")
        label = scheme if scheme != "spardl" else "spardl (10x; default 33x)"
        ratios = " / ".join(fmt(_mean([value(r, "compression_ratio") for r in where(runs, model=m)]), 1, "x")
                            for m in ("cnn", "mlp"))
        cells = []
        for model in ("cnn", "mlp"):
            acc, gap, n = _mean_gap(rows, model, scheme, ratio_target=ratio)
            if n != 3:
                raise LookupError(f"{scheme} {model}: {n} seeds")
            cells.append(f"{fmt(acc, 2, '%')} ({signed(gap)})")
        body.append([label, f"`{specs[0]}`", ratios] + cells)
    return markdown(["scheme", "compressor", "ratio (CNN / MLP)", "CNN", "MLP"], body,
                    ["l", "l", "r", "r", "r"])


TABLES = {"by_ratio": table_by_ratio, "accuracy": table_accuracy, "three_seeds": table_three_seeds, "baselines": table_baselines}
