"""Tables of bench/results/virtual_bytes/ (bytes per worker per step at each scheme's default compressor, 4 to 256 virtual workers)."""
from tables.common import fmt, markdown, one, signed, study_rows, value, where

WORKERS = [4, 16, 64, 256]
SCHEMES = ["fixed_sketch_ps", "fixed_sketch_allreduce", "sketch_ps", "sketch_allreduce", "topk_allgather", "gtopk",
           "spardl", "topk_ps", "dense_allreduce"]


def rows():
    return study_rows(__file__)


def table_mlp(rows):
    """docs/BENCHMARKS.md "Bytes per worker per step against W" and README "Many workers on one
    machine": the MLP, sent / received KiB per worker per step, and what a worker sends at 256
    workers as a multiple of the dense float32 gradient (D)."""
    body = []
    for s in SCHEMES:
        cells = []
        for w in WORKERS:
            r = one(rows, model="mlp", scheme=s, workers=w)
            cells.append(f"{fmt(value(r, 'sent_bytes_per_step') / 1024)} / "
                         f"{fmt(value(r, 'received_bytes_per_step') / 1024)}")
        r = one(rows, model="mlp", scheme=s, workers=256)
        ratio = value(r, "sent_bytes_per_step") / value(r, "dense_gradient_bytes")
        body.append([f"`{s}`"] + cells + [fmt(ratio, 2)])
    return markdown(["scheme (default)"] + [f"W = {w}" for w in WORKERS] + ["sent at 256, x D"], body)


TABLES = {"mlp": table_mlp}
