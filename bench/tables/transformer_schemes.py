"""Tables of bench/results/transformer_schemes/ (the char_lm transformer: dense and every compressing scheme at
its default, AdamW and SGD, 4, 16 and 64 virtual workers)."""
from statistics import mean

from tables.common import fmt, markdown, study_rows, value, where

ADAMW = "adamw:beta1=0.9,beta2=0.95,eps=1e-08,weight_decay=0.1"
SGD = "sgd"
WORKERS = [4, 16, 64]


def rows():
    return study_rows(__file__)


def _schemes(rows):
    """Dense first, then the compressing schemes in the order the study ran them."""
    order = []
    for r in rows:
        if r["scheme"] not in order:
            order.append(r["scheme"])
    return sorted(order, key=lambda s: (not s.startswith("dense"), order.index(s)))


def _loss(rows, scheme, optimizer, workers):
    """(mean validation loss over the seeds, seeds, mean sent bytes per step, mean ratio), or None without runs."""
    runs = [r for r in where(rows, scheme=scheme, optimizer=optimizer, workers=workers) if r["test_loss"]]
    if not runs:
        return None
    return (mean(value(r, "test_loss") for r in runs), len(runs), mean(value(r, "sent_bytes_per_step") for r in runs),
            mean(value(r, "compression_ratio") for r in runs))


def _loss_cells(rows, scheme, optimizer):
    """One cell per worker count: the mean loss, its gap to dense_allreduce's mean in the same cell, and the
    number of seeds in brackets where it is fewer than the most any cell of the optimizer has."""
    most = max(len(where(rows, scheme="dense_allreduce", optimizer=optimizer, workers=w)) for w in WORKERS)
    cells = []
    for workers in WORKERS:
        got = _loss(rows, scheme, optimizer, workers)
        dense = _loss(rows, "dense_allreduce", optimizer, workers)
        if got is None:
            cells.append("")
            continue
        loss, seeds, _, _ = got
        gap = "" if dense is None or scheme == "dense_allreduce" else f" ({100 * (loss / dense[0] - 1):+.1f}%)"
        cells.append(f"{loss:.3f}{gap}" + (f" [{seeds}]" if seeds < most else ""))
    return cells


def table_losses(rows):
    """docs/BENCHMARKS.md "The transformer with AdamW and SGD": with AdamW, each scheme's final validation loss
    (nats per byte; the mean of the seeds, fewer than the study's in brackets), its gap to dense_allreduce's in
    the same cell, the bytes a worker sends per step at 4 workers, and the ratio they give at 4, 16 and 64 (the
    dense gradient's bytes over them)."""
    body = []
    for scheme in _schemes(rows):
        at4 = _loss(rows, scheme, ADAMW, 4)
        ratios = [_loss(rows, scheme, ADAMW, w) for w in WORKERS]
        ratio = " / ".join(fmt(r[3], 1, "x") if r else "-" for r in ratios)
        body.append([f"`{scheme}`"] + _loss_cells(rows, scheme, ADAMW)
                    + [fmt(None if at4 is None else at4[2] / 1024, 1), ratio])
    return markdown(["scheme"] + [f"{w} W" for w in WORKERS] + ["sent KiB/step (4 W)", "ratio at 4 / 16 / 64 W"],
                    body)


def table_sgd_losses(rows):
    """docs/BENCHMARKS.md "The transformer with AdamW and SGD": the same with SGD (momentum 0.9), each seed's
    loss beside the mean, since a run either leaves the unigram plateau or stays on it."""
    body = []
    for scheme in _schemes(rows):
        cells = _loss_cells(rows, scheme, SGD)
        for i, workers in enumerate(WORKERS):
            runs = sorted(where(rows, scheme=scheme, optimizer=SGD, workers=workers), key=lambda r: int(r["seed"]))
            if cells[i] and len(runs) > 1:
                cells[i] += " <br> " + " / ".join(f"{value(r, 'test_loss'):.2f}" for r in runs)
        body.append([f"`{scheme}`"] + cells)
    return markdown(["scheme"] + [f"{w} W" for w in WORKERS], body)


TABLES = {"losses": table_losses, "sgd_losses": table_sgd_losses}
