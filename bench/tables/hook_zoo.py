"""Tables of bench/results/hook_zoo/ (bench/hook_zoo.py: a zoo of models through the PyTorch DDP hook,
each compressing scheme against DDP's own allreduce of the same seed)."""
from statistics import mean

from tables.common import fmt, markdown, study_rows, value, where

MODELS = ["mlp", "cnn", "cnn_bn", "cnn_plain", "cnn_wide", "char_lm"]
SCHEMES = ["topk_allgather", "sketch_allreduce"]


def rows():
    return study_rows(__file__)


def _runs(rows, model, optimizer, scheme, variant=""):
    return [r for r in where(rows, model=model, optimizer=optimizer, scheme=scheme) if r.get("variant", "") == variant]


def _gaps(rows, model, optimizer, scheme, metric, relative, variant=""):
    """{seed: gap to ddp of the same seed}: points of `metric`, or percent of it with `relative`. DDP runs
    torch's AdamW for both adamw and torch_adamw (its rows say adamw)."""
    ddp_optimizer = "adamw" if optimizer == "torch_adamw" else optimizer
    base = {r["seed"]: value(r, metric) for r in where(rows, model=model, optimizer=ddp_optimizer, scheme="ddp")}
    out = {}
    for r in _runs(rows, model, optimizer, scheme, variant):
        if r["seed"] in base:
            x = value(r, metric)
            out[r["seed"]] = 100.0 * (x - base[r["seed"]]) / base[r["seed"]] if relative else x - base[r["seed"]]
    return out


def _cell(gaps, suffix):
    """The mean gap (points to two decimals, percent to one), and each seed's under it when there are
    several; "" when none ran."""
    if not gaps:
        return ""
    seeds = sorted(gaps, key=int)
    digits = 1 if suffix == "%" else 2
    head = f"{mean(gaps.values()):+.{digits}f}{suffix}"
    if len(seeds) == 1:
        return head
    return f"{head} <br> " + " / ".join(f"{gaps[s]:+.{digits}f}" for s in seeds)


def _ratio(rows, model, optimizer, scheme, variant=""):
    ratios = [value(r, "compression_ratio") for r in _runs(rows, model, optimizer, scheme, variant)]
    ratios = [x for x in ratios if x]
    return f"{mean(ratios):.1f}x" if ratios else ""


# Where Adam's moments are through the hook: (optimizer, variant) -> what the row says.
ADAM_PLACEMENTS = [
    ("torch_adamw", "", "torch's AdamW: Adam on the aggregated update"),
    ("adamw", "second_moment_rank", "sketchfuse AdamW, `second_moment=\"rank\"`: both moments on each rank"),
    ("adamw", "", "sketchfuse AdamW (default): both moments on each rank, the second scaled to the mean "
                  "gradient's size"),
    ("adamw", "100x", "sketchfuse AdamW (default) at about 100x (`topk:density=0.00167`; the sketch's "
                      "`density=0.00042`)"),
    ("adamw", "density_0.022", "sketchfuse AdamW, both moments on each rank, `topk:density=0.022` (the bytes "
                               "of the row below)"),
    ("adamw", "dense_warmup_30", "sketchfuse AdamW, `dense_warmup_steps=30`: 30 dense steps, then the second "
                                 "moment frozen"),
]


def table_adamw(rows):
    """docs/BENCHMARKS.md "AdamW through the hook": the char_lm transformer through the hook on 4
    ranks, AdamW, its final validation loss against DDP's (torch AdamW) of the same seed: the mean
    loss, the mean gap in percent and each seed's, and the ratio (dense bytes over sent bytes, the
    dense warm-up's included), by where Adam's moments are."""
    ddp = [value(r, "test_loss") for r in where(rows, model="char_lm", optimizer="adamw", scheme="ddp")]
    body = [["DDP's allreduce", "torch's AdamW", fmt(mean(ddp), 3) if ddp else "", "", "1x"]]
    for scheme in ["dense_allreduce"] + SCHEMES:
        for optimizer, variant, placement in ADAM_PLACEMENTS:
            runs = _runs(rows, "char_lm", optimizer, scheme, variant)
            if not runs:
                continue
            gaps = _gaps(rows, "char_lm", optimizer, scheme, "test_loss", True, variant)
            body.append([f"`{scheme}`", placement, fmt(mean(value(r, "test_loss") for r in runs), 3),
                         _cell(gaps, "%"), _ratio(rows, "char_lm", optimizer, scheme, variant)])
    return markdown(["scheme", "Adam's moments", "loss", "gap to DDP", "ratio"], body, ["l", "l", "r", "r", "r"])


def table_zoo(rows):
    """docs/BENCHMARKS.md "The zoo through the hook": every model of the zoo through the hook on 4
    ranks with SGD (the example's recipe; momentum in the hook), DDP's final test accuracy (next-byte
    accuracy for char_lm) and each scheme's gap to it in points at the default release cap and
    without one (char_lm: also the validation loss's gap in percent), the mean over the seeds that
    ran and each seed's under it, and each scheme's ratio."""
    body = []
    for model in MODELS:
        ddp = [value(r, "test_accuracy_pct") for r in where(rows, model=model, optimizer="sgd", scheme="ddp")]
        if not ddp:
            continue
        cells = []
        for scheme in SCHEMES:
            for variant in ("", "no_release_cap"):
                cell = _cell(_gaps(rows, model, "sgd", scheme, "test_accuracy_pct", False, variant), "")
                if model == "char_lm" and cell:
                    loss = _gaps(rows, model, "sgd", scheme, "test_loss", True, variant)
                    cell += f" ({mean(loss.values()):+.1f}% loss)"
                cells.append(cell)
            cells.append(_ratio(rows, model, "sgd", scheme))
        params = where(rows, model=model, scheme="ddp")[0]["parameters"]
        body.append([f"`{model}` ({int(params):,})", fmt(mean(ddp), 2)] + cells)
    header = ["model (parameters)", "DDP"]
    for scheme in SCHEMES:
        header += [f"`{scheme}`", "no release cap", "ratio"]
    return markdown(header, body)


def table_rate_units(rows):
    """docs/BENCHMARKS.md "The zoo through the hook": the char_lm transformer with SGD under a warm-up
    and a cosine through the hook, error feedback's residual in raw gradients (raw_residual) against
    units of the rate (the default with SGD), and without the release cap: the validation loss's gap
    to DDP's in percent (mean, and each seed's), and how many seeds left the unigram plateau (a loss
    below 3)."""
    body = []
    for scheme in SCHEMES:
        cells = []
        for variant in ("raw_residual", "", "no_release_cap"):
            gaps = _gaps(rows, "char_lm", "sgd", scheme, "test_loss", True, variant)
            runs = _runs(rows, "char_lm", "sgd", scheme, variant)
            left = sum(1 for r in runs if value(r, "test_loss") < 3.0)
            cells += [_cell(gaps, "%"), f"{left} of {len(runs)}" if runs else ""]
        body.append([f"`{scheme}`"] + cells + [_ratio(rows, "char_lm", "sgd", scheme)])
    return markdown(["scheme", "raw gradients", "off the plateau", "units of the rate (default)", "off the plateau",
                     "units of the rate, no release cap", "off the plateau", "ratio"], body)


TABLES = {"adamw": table_adamw, "zoo": table_zoo, "rate_units": table_rate_units}
