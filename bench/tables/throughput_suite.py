"""Tables of bench/results/throughput_suite/ (every scheme's step on shaped 1 and 10 Gbit/s
links, the scale model's fit to those runs, and its projection to 16-256 GPU workers)."""
from tables.common import fmt, markdown, one, study_rows, value, where

SCHEMES = ["dense_allreduce", "topk_allgather", "gtopk", "spardl", "topk_ps", "sketch_ps",
           "sketch_allreduce", "importance_allreduce"]
COMPRESSED = SCHEMES[1:]


def rows():
    return study_rows(__file__)


def _ms(x):
    return fmt(x, 0)


def table_steps(rows):
    """The table of docs/BENCHMARKS.md "Throughput on shaped links, and projected on GPU clusters": ResNet-50's measured step (ms) per
    scheme on shaped 1 and 10 Gbit/s links, the optimal fusion plan, S = 1 for the PS schemes;
    the fastest in bold."""
    body = []
    for link in ("1", "10"):
        for w in ("2", "4", "8"):
            steps = {s: value(one(rows, measurement="measured", profile="resnet50", link_gbps=link,
                                  workers=w, shards=1, scheme=s, fusion="optimal"), "step_ms")
                     for s in SCHEMES}
            best = min(steps.values())
            cells = [f"**{_ms(steps[s])}**" if steps[s] == best else _ms(steps[s]) for s in SCHEMES]
            body.append([f"{link} Gbit/s", w] + cells)
    return markdown(["link", "W"] + SCHEMES, body)


def table_projection(rows):
    """The table of docs/BENCHMARKS.md "Which scheme reaches dense's accuracy first" (projected): ResNet-50 on GPU
    workers (the H200's costs), fused plans, the step (ms) of dense, of the fastest compressed
    scheme and of the two sketch routes, and dense's step over the fastest compressed one."""
    body = []
    for link in ("25", "100"):
        for w in ("16", "64", "256"):
            r = {s: one(rows, measurement="projected", link_gbps=link, workers=w, scheme=s,
                        fusion="optimal") for s in SCHEMES}
            dense = value(r["dense_allreduce"], "step_ms")
            fastest = min(COMPRESSED, key=lambda s: value(r[s], "step_ms"))
            fast = value(r[fastest], "step_ms")
            body.append([f"{link} Gbit/s", w, fmt(dense), f"{fastest} {fmt(fast)}",
                         fmt(value(r["sketch_ps"], "step_ms")), fmt(value(r["sketch_allreduce"], "step_ms")),
                         fmt(dense / fast, 2, "x")])
    return markdown(["link", "W", "dense_allreduce", "fastest compressed", "sketch_ps", "sketch_allreduce",
                     "dense ÷ fastest"], body)


def _abs_errors(runs, key):
    return sorted(abs(value(r, key) / value(r, "step_ms") - 1) for r in runs)


def _median(xs):
    n = len(xs)
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2


def table_model_validation(rows):
    """The scale model against the measured runs ("Throughput on shaped links, and projected on GPU clusters"): median absolute error
    of the simulated step and how many runs it gets within 15%, per link model."""
    body = []
    for link in ("1", "10"):
        measured = where(rows, measurement="measured", link_gbps=link)
        for label, runs, key in [
                ("raw TCP link (physics only)", measured, "raw_link_model_step_ms"),
                ("each scheme's fitted link, runs in the fit", where(measured, model_held_out="false"), "model_step_ms"),
                ("each scheme's fitted link, held-out runs", where(measured, model_held_out="true"), "model_step_ms")]:
            errors = _abs_errors(runs, key)
            within = sum(e <= 0.15 for e in errors)
            body.append([f"{link} Gbit/s", label, fmt(100 * _median(errors), 1, "%"), f"{within} of {len(runs)}"])
    return markdown(["link", "link model", "median abs. error", "within 15%"], body, ["l", "l", "r", "r"])


def table_fusion(rows):
    """The fusion planners ("Throughput on shaped links, and projected on GPU clusters"): ResNet-50 at 4 workers, step (ms) per plan,
    and one group per layer over the best fused plan."""
    plans = ["optimal", "omgs", "mergecomp", "4", "single", "per_layer"]
    body = []
    for link in ("1", "10"):
        for s in ("dense_allreduce", "topk_allgather", "sketch_ps", "sketch_allreduce"):
            shards = "2" if s == "sketch_ps" else "1"  # the suite ran sketch_ps's plans on 2 shards
            r = {p: one(rows, measurement="measured", profile="resnet50", link_gbps=link, workers=4,
                        shards=shards, scheme=s, fusion=p) for p in plans}
            steps = {p: value(r[p], "step_ms") for p in plans}
            best = min(steps[p] for p in plans if p != "per_layer")
            body.append([f"{link} Gbit/s", s + (f" (S = {shards})" if shards != "1" else "")]
                        + [f"**{_ms(steps[p])}**" if steps[p] == min(steps.values()) else _ms(steps[p]) for p in plans]
                        + [fmt(steps["per_layer"] / best, 2, "x")])
    return markdown(["link", "scheme", "optimal", "OMGS", "MergeComp", "4 groups", "one group", "per layer",
                     "per layer ÷ best fused"], body, ["l", "l"] + ["r"] * 7)


TABLES = {"steps": table_steps, "projection": table_projection,
          "model_validation": table_model_validation, "fusion": table_fusion}
