"""Tables of bench/results/cpu_vs_torch/ (the CPU compression core against PyTorch, one thread
each, and the shard's sum of sketch payloads against memcpy)."""
from tables.common import fmt, markdown, one, study_rows, value


def rows():
    return study_rows(__file__)


OPS = [("sketch_insert", "Count-Sketch insert, 5 rows"), ("sketch_estimate_topk", "estimate all + heavy-hitter top-k"),
       ("topk", "exact top-k"), ("sketch_merge", "sketch merge"), ("memcpy_gradient", "memcpy of the gradient")]


def ms(seconds, digits=2):
    return fmt(None if seconds is None else 1e3 * seconds, digits, " ms")


def table_ops(rows):
    """The table of docs/BENCHMARKS.md "CPU compression core against PyTorch (one thread each)":
    each operation's time, PyTorch's (as it comes, and with freed memory kept mapped), the
    speed-ups and the issue's targets; the merge's target is 80% of a memcpy's bandwidth."""
    body = []
    for op, label in OPS:
        r = one(rows, op=op)
        ours, torch, mapped = value(r, "sketchfuse_s"), value(r, "torch_s"), value(r, "torch_mapped_s")
        target = value(r, "target_speedup")
        if target is not None:
            goal = f"{fmt(target, 0)}x: {'met' if torch / ours >= target else 'not met'}"
        elif op == "sketch_merge":
            table = one(rows, op="memcpy_sketch_table")
            share = (value(r, "bytes_moved") / ours) / (value(table, "bytes_moved") / value(table, "sketchfuse_s"))
            goal = f"80% of memcpy: {fmt(100 * share, 0)}%, {'met' if share >= 0.8 else 'not met'}"
        else:
            goal = ""
        body.append([label, ms(ours), ms(torch), fmt(torch / ours, 1, "x"), goal, ms(mapped), fmt(mapped / ours, 1, "x")])
    return markdown(["operation", "SketchFuse", "PyTorch", "speed-up", "target", "PyTorch, freed memory kept mapped",
                     "speed-up"], body)


def table_server_sum(rows):
    """The table of docs/BENCHMARKS.md "The aggregation servers": the shard's sum of W sketch payloads
    (5 x 500,000) against memcpy of the same tables (issue 36's goal: at most 1.1 times)."""
    body = []
    for w in (4, 16):
        s, m = value(one(rows, op="server_sum", payloads=w), "sketchfuse_s"), \
            value(one(rows, op="memcpy_server_tables", payloads=w), "sketchfuse_s")
        body.append([str(w), ms(s), ms(m), fmt(s / m, 2, "x")])
    return markdown(["payloads summed", "sum", "memcpy of the same tables", "sum / memcpy"], body)


TABLES = {"ops": table_ops, "server_sum": table_server_sum}
