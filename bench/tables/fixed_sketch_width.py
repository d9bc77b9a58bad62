"""Tables of bench/results/fixed_sketch_width/ (the MLP at 8 and 16 real worker processes, 8 and 2 epochs: the
fixed-size sketch at its default table of k cells and at twice that, against dense)."""
from statistics import mean

from tables.common import markdown, study_rows, value, where


def rows():
    return study_rows(__file__)


def _accuracy(rows, workers, epochs, seed, scheme, variant="default"):
    found = where(rows, workers=workers, epochs=epochs, seed=seed, scheme=scheme, variant=variant)
    return value(found[0], "test_accuracy_pct") if found else None


def _gap_cell(rows, workers, epochs, seeds, variant):
    """The mean gap to dense in points over the seeds, each seed's under it, and the ratio."""
    gaps, ratios = [], []
    for seed in seeds:
        dense = _accuracy(rows, workers, epochs, seed, "dense_allreduce")
        found = where(rows, workers=workers, epochs=epochs, seed=seed, scheme="fixed_sketch_ps", variant=variant)
        if dense is None or not found:
            continue
        gaps.append(value(found[0], "test_accuracy_pct") - dense)
        ratios.append(value(found[0], "compression_ratio"))
    if not gaps:
        return "", ""
    return (f"{mean(gaps):+.2f} <br> " + " / ".join(f"{g:+.2f}" for g in gaps), f"{mean(ratios):.1f}x")


def table_width(rows):
    """docs/BENCHMARKS.md "Scale out: 8 and 16 worker processes": for each number of workers and epochs, dense's
    accuracy (the mean over the seeds) and fixed_sketch_ps's gap to it in points at its default table (width=1: k
    cells) and at width=2, with each one's ratio (the dense gradient's bytes over a worker's sent bytes)."""
    body = []
    for workers, epochs in (("8", "8"), ("16", "8"), ("16", "2")):
        seeds = sorted({r["seed"] for r in where(rows, workers=workers, epochs=epochs, scheme="dense_allreduce")},
                       key=int)
        dense = [_accuracy(rows, workers, epochs, s, "dense_allreduce") for s in seeds]
        default, default_ratio = _gap_cell(rows, workers, epochs, seeds, "default")
        wide, wide_ratio = _gap_cell(rows, workers, epochs, seeds, "width=2")
        body.append([workers, epochs, f"{mean(dense):.2f}% ({len(seeds)} seeds)", default, default_ratio, wide,
                     wide_ratio])
    return markdown(["workers", "epochs", "dense_allreduce", "fixed_sketch_ps (width=1, default)", "ratio",
                     "width=2", "ratio"], body)


def table_variants(rows):
    """docs/BENCHMARKS.md "Scale out: 8 and 16 worker processes": seed 1 at 16 workers and 8 epochs, each variant of the
    fixed-size sketch and the flat-bytes Top-k schemes, their accuracy, gap to dense and ratio."""
    dense = _accuracy(rows, "16", "8", "1", "dense_allreduce")
    body = []
    for r in where(rows, workers="16", epochs="8", seed="1"):
        if r["scheme"] == "dense_allreduce":
            continue
        name = f"`{r['scheme']}`" + (f", {r['variant']}" if r["variant"] != "default" else "")
        accuracy = value(r, "test_accuracy_pct")
        body.append([name, f"{accuracy:.2f}%", f"{accuracy - dense:+.2f}", f"{value(r, 'compression_ratio'):.1f}x"])
    return markdown(["scheme", "accuracy", "vs dense", "ratio"], body)


TABLES = {"width": table_width, "variants": table_variants}
