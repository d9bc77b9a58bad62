"""Tables of bench/results/transformer_schemes/ (the char_lm transformer: dense and every compressing scheme at
its default, AdamW and SGD, 4 and 16 virtual workers)."""
from statistics import mean

from tables.common import fmt, markdown, study_rows, value, where

ADAMW = "adamw:beta1=0.9,beta2=0.95,eps=1e-08,weight_decay=0.1"
SGD = "sgd"
# (column title, optimizer, workers); each cell: the mean over the seeds the study ran.
CELLS = [("AdamW, 4 W", ADAMW, 4), ("AdamW, 16 W", ADAMW, 16), ("AdamW, 64 W", ADAMW, 64), ("SGD, 4 W", SGD, 4)]
RATIO_WORKERS = [4, 16, 64]  # the AdamW cells' bytes


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


def table_losses(rows):
    """docs/BENCHMARKS.md "The transformer with AdamW and SGD": each scheme's final validation loss (nats per
    byte; the mean of the seeds run, their count in brackets), its gap to dense_allreduce's in the same cell, and
    the bytes a worker sends per step at 4 workers, and the ratio they give at 4, 16 and 64 (the dense
    gradient's bytes over them)."""
    body = []
    for scheme in _schemes(rows):
        cells = []
        sent = None
        for _, optimizer, workers in CELLS:
            got = _loss(rows, scheme, optimizer, workers)
            dense = _loss(rows, "dense_allreduce", optimizer, workers)
            if got is None:
                cells.append("")
                continue
            loss, seeds, bytes_sent, _ = got
            if sent is None and workers == 4:
                sent = bytes_sent
            gap = "" if dense is None or scheme == "dense_allreduce" else f" ({100 * (loss / dense[0] - 1):+.1f}%)"
            cells.append(f"{loss:.3f}{gap}" + (f" [{seeds}]" if seeds > 1 else ""))
        ratios = [_loss(rows, scheme, ADAMW, w) for w in RATIO_WORKERS]
        ratio = " / ".join(fmt(r[3], 1, "x") if r else "-" for r in ratios)
        body.append([f"`{scheme}`"] + cells + [fmt(None if sent is None else sent / 1024, 1), ratio])
    return markdown(["scheme"] + [c[0] for c in CELLS] + ["sent KiB/step (4 W)", "ratio at 4 / 16 / 64 W"], body)


TABLES = {"losses": table_losses}
