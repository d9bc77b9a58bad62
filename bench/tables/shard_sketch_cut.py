"""Tables of bench/results/shard_sketch_cut/ (a scheme's compressor cut into the four partitions
that two shards would hold, or uncut: final accuracy of the main job's MLP, virtual workers)."""
from tables.common import fmt, markdown, signed, study_rows, value, where


def rows():
    return study_rows(__file__)


def table_cut(rows):
    """The table of docs/BENCHMARKS.md "The aggregation servers" on the fixed-size sketch:
    final accuracy uncut and cut in four (the mean over the seeds run), for the same bytes."""
    body = []
    for scheme, workers in (("fixed_sketch_ps", 16), ("fixed_sketch_allreduce", 16), ("fixed_sketch_ps", 8),
                            ("fixed_sketch_ps", 4), ("topk_ps", 16), ("sketch_ps", 16)):
        def mean(partitions):
            found = where(rows, scheme=scheme, workers=workers, partitions=partitions)
            return sum(value(r, "final_test_accuracy_pct") for r in found) / len(found), len(found)
        (uncut, n), (cut, _) = mean(1), mean(4)
        body.append([scheme, str(workers), str(n), fmt(uncut, 2, "%"), fmt(cut, 2, "%"), signed(cut - uncut, 2)])
    return markdown(["scheme", "workers", "seeds", "uncut", "cut in 4", "points"], body)


TABLES = {"cut": table_cut}
