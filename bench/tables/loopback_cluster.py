"""Tables of bench/results/loopback_cluster/ (the local cluster on loopback, 4 workers: every
scheme's step on synthetic ResNet-50, the MLP's step phases, and the second round of the
3-row estimate sketch)."""
from tables.common import fmt, markdown, one, study_rows, value, where


def rows():
    return study_rows(__file__)


def table_resnet50(rows):
    """The table of docs/BENCHMARKS.md "Other kept studies": the
    launcher's mean step, KiB a worker sends and receives per step, and the ratio, fastest first."""
    runs = sorted(where(rows, series="resnet50_every_scheme"), key=lambda r: value(r, "mean_step_ms"))
    body = [[r["scheme"], fmt(value(r, "mean_step_ms"), 1, " ms"),
             f"{fmt(value(r, 'sent_kib_per_step'), 0)} / {fmt(value(r, 'received_kib_per_step'), 0)} KiB",
             fmt(value(r, "compression_ratio"), 1, "x")] for r in runs]
    return markdown(["scheme", "step", "sent / received per worker per step", "ratio"], body)


def table_phases(rows):
    """The table of "Why the sketch routes are slower than dense on loopback": worker 0's median
    step and its timeline's phases per step (ms), and each shard's decode per step."""
    body = []
    for r in where(rows, series="mlp_phases"):
        comm = fmt(value(r, "communicate_ms"), 1, " ms")
        if r["shard_decode_ms_max"]:
            comm += (f" (partitions in flight; each shard decodes {fmt(value(r, 'shard_decode_ms_min'), 1)} to "
                     f"{fmt(value(r, 'shard_decode_ms_max'), 1)} ms a step)")
        body.append([r["scheme"]] + [fmt(value(r, k), 1, " ms") for k in ("median_step_ms", "backward_ms", "compress_ms")]
                    + [comm, fmt(value(r, "decode_ms"), 1, " ms")])
    return markdown(["scheme", "median step", "backward", "compress", "communicate", "decode on the worker"], body)


def table_second_round(rows):
    """The table of "The second round with a 3-row estimate sketch": final test accuracy
    without and with `--second_round`, and KiB a worker sends per step. (dense_allreduce with
    the same settings: the `mlp_phases` row, 83.77%.)"""
    body = []
    for route in ("sketch_allreduce", "sketch_ps"):
        off = one(rows, series="mlp_second_round", scheme=route, second_round="false")
        on = one(rows, series="mlp_second_round", scheme=route, second_round="true")
        body.append([route, fmt(value(off, "test_accuracy_pct"), 2, "%"), fmt(value(on, "test_accuracy_pct"), 2, "%"),
                     f"{fmt(value(off, 'sent_kib_per_step'))} / {fmt(value(on, 'sent_kib_per_step'))} KiB"])
    return markdown(["route", "without the second round", "with it",
                     "bytes sent per worker per step (without / with)"], body)


TABLES = {"resnet50": table_resnet50, "phases": table_phases, "second_round": table_second_round}
