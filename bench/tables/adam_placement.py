"""Tables of bench/results/adam_placement/ (the char_lm transformer with AdamW: Adam's moments on each worker,
before compression, against Adam on the aggregated update, whose runs are transformer_schemes')."""
from statistics import mean

from tables.common import markdown, read_rows, study_rows, value, where

ADAMW = "adamw:beta1=0.9,beta2=0.95,eps=1e-08,weight_decay=0.1"
SCHEMES = ["topk_allgather", "sketch_allreduce", "gtopk", "topk_ps", "fixed_sketch_ps"]
WORKERS = [4, 16, 64]


# Top-k's densities with Adam on the worker (the density table), the default (1%) among them.
DENSITIES = ["0.0003", "0.0015", "0.003", "0.01", "0.0128", "0.0333"]


def rows():
    """This study's runs (Adam on the worker) tagged adam_at=worker, and transformer_schemes' AdamW runs (Adam on
    the aggregated update, dense_allreduce's among them) tagged adam_at=update; each tagged default=yes when it ran
    its scheme's default compressor (the density table's runs of Top-k at other densities are not)."""
    own = [dict(r, adam_at="worker") for r in study_rows(__file__)]
    update = [dict(r, adam_at="update") for r in read_rows("transformer_schemes") if r["optimizer"] == ADAMW]
    defaults = {}
    for r in update:  # every scheme of transformer_schemes ran its default
        defaults[r["scheme"]] = r["compressor"]
    return [dict(r, default="yes" if r["compressor"] == defaults.get(r["scheme"]) else "no") for r in own + update]


def _runs(rows, scheme, workers, adam_at):
    return [r for r in where(rows, scheme=scheme, workers=workers, adam_at=adam_at, default="yes") if r["test_loss"]]


def _seed_gaps(rows, scheme, workers, adam_at):
    """{seed: the run's loss over dense_allreduce's of the same seed, minus 1}."""
    dense = {r["seed"]: value(r, "test_loss") for r in _runs(rows, "dense_allreduce", workers, "update")}
    return {r["seed"]: value(r, "test_loss") / dense[r["seed"]] - 1 for r in _runs(rows, scheme, workers, adam_at)
            if r["seed"] in dense}


def _cell(rows, scheme, workers, adam_at, seeds):
    """The mean loss and gaps over `seeds` (those both placements ran)."""
    gaps = {s: g for s, g in _seed_gaps(rows, scheme, workers, adam_at).items() if s in seeds}
    if not gaps:
        return ""
    runs = [r for r in _runs(rows, scheme, workers, adam_at) if r["seed"] in gaps]
    loss = mean(value(r, "test_loss") for r in runs)
    seeds = sorted(gaps, key=int)
    spread = " / ".join(f"{100 * gaps[s]:+.1f}" for s in seeds)
    return f"{loss:.3f} ({100 * mean(gaps.values()):+.1f}%; {spread})"


def table_placement(rows):
    """docs/BENCHMARKS.md "The transformer with AdamW and SGD": the final validation loss (nats per byte, the mean
    over the seeds both placements ran) with Adam on the aggregated update and with Adam's moments on each worker,
    and its gap to dense_allreduce's of the same seed (the mean, then each seed's, in percent), at 4, 16 and 64
    virtual workers, with the ratio (the dense gradient's bytes over a worker's sent bytes, the same for both
    placements)."""
    body = []
    for scheme in SCHEMES:
        for workers in WORKERS:
            seeds = (set(_seed_gaps(rows, scheme, workers, "update"))
                     & set(_seed_gaps(rows, scheme, workers, "worker")))
            ratio = [value(r, "compression_ratio") for r in _runs(rows, scheme, workers, "worker")]
            body.append([f"`{scheme}`", str(workers), _cell(rows, scheme, workers, "update", seeds),
                         _cell(rows, scheme, workers, "worker", seeds), f"{mean(ratio):.1f}x" if ratio else ""])
    return markdown(["scheme", "W", "Adam on the update", "Adam on the worker", "ratio"], body)


def table_density(rows):
    """docs/BENCHMARKS.md "The transformer with AdamW and SGD": Top-k allgather's density with Adam's moments on
    the worker, 4 virtual workers: the gap of the final validation loss to dense_allreduce's of the same seed on
    seed 1 (which every density ran), and over the seeds each ran (the mean, then each seed's), with the ratio (the
    dense gradient's bytes over a worker's sent bytes)."""
    dense = {r["seed"]: value(r, "test_loss") for r in where(rows, scheme="dense_allreduce", workers=4,
                                                              adam_at="update") if r["test_loss"]}
    body = []
    for density in DENSITIES:
        runs = [r for r in where(rows, scheme="topk_allgather", workers=4, adam_at="worker",
                                 compressor=f"topk:density={density}") if r["test_loss"] and r["seed"] in dense]
        if not runs:
            continue
        runs.sort(key=lambda r: int(r["seed"]))
        gaps = [value(r, "test_loss") / dense[r["seed"]] - 1 for r in runs]
        label = f"{100 * float(density):g}%" + (" (default)" if density == "0.01" else "")
        first = [g for r, g in zip(runs, gaps) if r["seed"] == "1"]
        spread = " / ".join(f"{100 * g:+.1f}" for g in gaps)
        over = f"{100 * mean(gaps):+.1f}% <br> {spread} (seeds {', '.join(r['seed'] for r in runs)})" \
            if len(runs) > 1 else ""
        body.append([label, f"{100 * first[0]:+.1f}%" if first else "", over,
                     f"{mean(value(r, 'compression_ratio') for r in runs):.1f}x"])
    return markdown(["density", "seed 1", "over the seeds", "ratio"], body)


# The specs that send PowerSGD's bytes (144,384 a worker a step at 4 workers, 13.0x) with Adam on the worker.
AT_POWERSGD_BYTES = [("topk_allgather", "topk:density=0.0128"),
                     ("sketch_allreduce", "count_sketch:method=peel,density=0.0032,rows=4")]


def table_powersgd_bytes(rows):
    """docs/BENCHMARKS.md "The transformer with AdamW and SGD": at PowerSGD's bytes, 4 virtual workers, PowerSGD
    (its default, Adam on the update, transformer_schemes' runs) against Top-k allgather and the peel sketch with
    Adam's moments on the worker at the specs that send as much: the gap of the final validation loss to
    dense_allreduce's of the same seed (the mean, then each seed's), sent KiB a worker a step and the ratio."""
    dense = {r["seed"]: value(r, "test_loss") for r in where(rows, scheme="dense_allreduce", workers=4,
                                                              adam_at="update") if r["test_loss"]}
    cells = [("powersgd_allreduce", None, "update", "on the aggregated update")]
    cells += [(scheme, spec, "worker", "on the worker") for scheme, spec in AT_POWERSGD_BYTES]
    body = []
    for scheme, spec, adam_at, place in cells:
        runs = where(rows, scheme=scheme, workers=4, adam_at=adam_at)
        runs = [r for r in runs if r["test_loss"] and r["seed"] in dense
                and (r["default"] == "yes" if spec is None else r["compressor"] == spec)]
        if not runs:
            continue
        runs.sort(key=lambda r: int(r["seed"]))
        gaps = [value(r, "test_loss") / dense[r["seed"]] - 1 for r in runs]
        body.append([f"`{scheme}`" + (f" `{spec}`" if spec else ""), place,
                     f"{100 * mean(gaps):+.1f}% <br> " + " / ".join(f"{100 * g:+.1f}" for g in gaps),
                     f"{mean(value(r, 'sent_bytes_per_step') for r in runs) / 1024:,.1f}",
                     f"{mean(value(r, 'compression_ratio') for r in runs):.1f}x"])
    return markdown(["scheme", "Adam's moments", "gap to dense", "sent KiB/step", "ratio"], body)


TABLES = {"placement": table_placement, "density": table_density, "powersgd_bytes": table_powersgd_bytes}
