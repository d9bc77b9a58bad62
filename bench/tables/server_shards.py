"""Tables of bench/results/server_shards/ (the main job's MLP on 1, 2 and 4 aggregation shards,
its one group cut into partitions: load per shard, the exchange's time, accuracy)."""
from tables.common import fmt, markdown, one, study_rows, value, where


def rows():
    return study_rows(__file__)


SCHEMES = ["dense_ps", "sketch_ps", "topk_ps"]


def kib(x):
    return fmt(None if x is None else x / 1024, 0)


def table_scaling(rows):
    """The table of docs/BENCHMARKS.md "The aggregation servers": 4 workers behind 200 Mbit/s
    links, the default job plan (two partitions per shard); worker 0's mean step and its
    communicate + decode phase (speed-up over 1 shard), the largest shard's share of the bytes
    and of the decode time (target on 2 shards: at most 55%), and its load per step."""
    body = []
    for scheme in SCHEMES:
        base = value(one(rows, job_plan="two_per_shard", link="200mbit", scheme=scheme, shards=1, partitions=1),
                     "communicate_decode_ms")
        for shards in (1, 2, 4):
            r = one(rows, job_plan="two_per_shard", link="200mbit", scheme=scheme, shards=shards,
                    partitions=1 if shards == 1 else 2 * shards)
            phase = value(r, "communicate_decode_ms")
            speedup = "" if shards == 1 else f" ({fmt(base / phase, 2)}x)"
            body.append([scheme, str(shards), fmt(value(r, "step_ms"), 1), fmt(phase, 2) + speedup,
                         fmt(100 * value(r, "largest_shard_bytes_share"), 1, "%"),
                         fmt(100 * value(r, "largest_shard_decode_share"), 1, "%"),
                         f"{kib(value(r, 'shard_bytes_in_per_step_max'))} / "
                         f"{kib(value(r, 'shard_bytes_out_per_step_max'))} KiB, "
                         f"{fmt(value(r, 'shard_decode_ms_per_step_max'), 2)} ms"])
    return markdown(["scheme", "shards", "step ms", "communicate + decode ms", "largest shard's bytes",
                     "largest shard's decode", "largest shard in / out, decode per step"], body,
                    ["l"] + ["r"] * 5 + ["l"])


def table_plans(rows):
    """Two partitions per shard (the default) against one (the trial default), 200 Mbit/s:
    worker 0's communicate + decode ms per step, and one shard holding the partitions that
    two shards hold (the cost of the partitions' rounds without a second shard)."""
    def phase(plan, scheme, shards, partitions):
        found = where(rows, job_plan=plan, link="200mbit", scheme=scheme, shards=shards, partitions=partitions)
        return fmt(value(found[0], "communicate_decode_ms"), 2) if found else "-"
    body = []
    for scheme in SCHEMES:
        body.append([scheme, f"{phase('two_per_shard', scheme, 1, 1)} / {phase('one_per_shard', scheme, 1, 1)}",
                     f"{phase('two_per_shard', scheme, 2, 4)} / {phase('one_per_shard', scheme, 2, 2)}",
                     f"{phase('two_per_shard', scheme, 4, 8)} / {phase('one_per_shard', scheme, 4, 4)}",
                     f"{phase('two_per_shard', scheme, 1, 4)} / {phase('one_per_shard', scheme, 1, 2)}"])
    return markdown(["communicate + decode ms, two / one partitions per shard", "1 shard", "2 shards", "4 shards",
                     "1 shard, the partitions of 2"], body)


def table_accuracy(rows):
    """Final accuracy with partitions, loopback, 2 epochs, one seed: the main job's sketch_ps
    on 1, 2 and 4 shards under both plans, and, in one sitting, sketch_ps on the default 2
    shards (4 partitions) beside the routes that partitions do not touch."""
    def acc(**match):
        found = where(rows, link="none", **match)
        return fmt(value(found[0], "final_test_accuracy_pct"), 2, "%") if len(found) == 1 else ""
    body = []
    for plan, label in (("two_per_shard", "MLP, 4 workers, two partitions per shard"),
                        ("one_per_shard", "MLP, 4 workers, one partition per shard")):
        body.append([label] + [acc(job_plan=plan, workload="mlp", workers=4, scheme="sketch_ps", shards=s, compressor="")
                               for s in (1, 2, 4)] + ["", ""])
    peel50 = "count_sketch:method=peel,density=0.00125,rows=4"
    for label, match, compressor in (("CNN, 4 workers", dict(workload="cnn", workers=4), ""),
                                     ("MLP at 50x, 4 workers", dict(workload="mlp", workers=4), peel50),
                                     ("MLP, 16 workers", dict(workload="mlp", workers=16), "")):
        body.append([label, "", acc(scheme="sketch_ps", shards=2, compressor=compressor, **match), "",
                     acc(scheme="sketch_allreduce", compressor=compressor, **match),
                     acc(scheme="dense_allreduce", **match)])
    return markdown(["loopback, 2 epochs, one seed", "sketch_ps, 1 shard", "sketch_ps, 2 shards", "sketch_ps, 4 shards",
                     "sketch_allreduce", "dense_allreduce"], body)


TABLES = {"scaling": table_scaling, "plans": table_plans, "accuracy": table_accuracy}
