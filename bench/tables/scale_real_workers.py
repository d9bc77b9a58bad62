"""Tables of bench/results/scale_real_workers/ (accuracy and bytes of the sketch routes and the
fixed-size sketch with 4, 8 and 16 real worker processes, the reference BLAS)."""
from statistics import mean

from tables.common import fmt, markdown, one, signed, study_rows, value, where


def rows():
    return study_rows(__file__)


DEFAULT_FIXED = "count_sketch:method=candidates,density=0.0333,rows=1,width=1,candidates=2,table=f32"


def by_seed(found, seeds=("1", "2", "3")):
    """One row per seed among `seeds`: the real-process run where there is one, else the virtual."""
    chosen = {}
    for r in sorted(found, key=lambda r: r["processes"] != "real"):
        if r["seed"] in seeds and r["epochs"] == "2":
            chosen.setdefault(r["seed"], r)
    return [chosen[s] for s in sorted(chosen)]


def acc_mean(found):
    return mean(value(r, "test_accuracy_pct") for r in found) if found else None


def cell(found):
    """The mean accuracy of the runs and, for more than one, how many seeds."""
    if not found:
        return "", None
    m = acc_mean(found)
    n = f" ({len(found)} seeds)" if len(found) > 1 else ""
    return fmt(m, 2, "%") + n, m


def dense_runs(rows, model, workers):
    return by_seed(where(rows, model=model, workers=workers, scheme="dense_allreduce"))


def table_peel(rows):
    """The table of docs/BENCHMARKS.md "Scale out: 8 and 16 worker processes": the
    peel routes at their default (table sized for W, release cap x W/4), means of the seeds run,
    against dense_allreduce's mean over the same kind of seeds; sketch_allreduce seed 1 only."""
    body = []
    for model, workers in (("mlp", 8), ("mlp", 16), ("cnn", 8), ("cnn", 16)):
        cap = str(workers // 4)
        dense_text, d = cell(dense_runs(rows, model, workers))
        ps = by_seed(where(rows, model=model, workers=workers, scheme="sketch_ps", release_cap_x=cap))
        ps_text, p = cell(ps)
        ar = by_seed(where(rows, model=model, workers=workers, scheme="sketch_allreduce", release_cap_x=cap), ("1",))
        d1 = one(dense_runs(rows, model, workers), seed=1)
        ar_text = ""
        if ar:
            a = value(ar[0], "test_accuracy_pct")
            ar_text = f"{fmt(a, 2, '%')} ({signed(a - value(d1, 'test_accuracy_pct'))}), {fmt(value(ar[0], 'compression_ratio'), 1, 'x')}"
        body.append([workers, model.upper(), dense_text, ps_text, signed(p - d),
                     fmt(value(ps[0], "compression_ratio"), 1, "x"), ar_text])
    return markdown(["workers", "model", "dense_allreduce", "sketch_ps", "vs dense", "sketch_ps ratio",
                     "sketch_allreduce, seed 1 (vs dense seed 1), ratio"], body,
                    ["r", "l", "r", "r", "r", "r", "r"])


def table_fixed_sketch(rows):
    """The table of docs/BENCHMARKS.md "Scale out: a sketch whose bytes do not grow with the
    workers": on the MLP, fixed_sketch_allreduce at the default shape (float32 table, no release
    cap), mean of seeds 1-3, against dense's mean (at 4 workers seeds 2 and 3 of virtual
    workers); its bytes sent against the peel's ring (seed 1) at the same W."""
    body = []
    for model, workers in (("mlp", 4), ("mlp", 8), ("mlp", 16)):
        dense_text, d = cell(dense_runs(rows, model, workers))
        fs = by_seed(where(rows, model=model, workers=workers, scheme="fixed_sketch_allreduce",
                           compressor=DEFAULT_FIXED, release_cap_x=""))
        fs_text, f = cell(fs)
        peel = where(rows, model=model, workers=workers, scheme="sketch_allreduce", seed=1,
                     release_cap_x=str(workers // 4))
        fs_bytes = value(fs[0], "sent_bytes_per_step")
        peel_bytes = value(peel[0], "sent_bytes_per_step") if peel else None
        body.append([workers, model.upper(), dense_text, fs_text, signed(f - d), fmt(fs_bytes, 0),
                     fmt(peel_bytes, 0), fmt(peel_bytes and peel_bytes / fs_bytes, 2, "x")])
    return markdown(["workers", "model", "dense_allreduce", "fixed_sketch_allreduce", "vs dense",
                     "its bytes sent", "sketch_allreduce's bytes sent", "peel / fixed"], body,
                    ["r", "l", "r", "r", "r", "r", "r", "r"])


def table_cnn(rows):
    """The table of docs/BENCHMARKS.md "On the CNN it does not hold yet" (seed 1): the fixed
    sketch at 10x without a cap and at today's default cap (2 x max(1, W/4)), against dense and
    the peel (sketch_ps, table for W, cap x W/4)."""
    body = []
    for workers in (4, 8, 16):
        r = lambda **m: one(rows, model="cnn", workers=workers, seed=1, epochs=2, **m)
        d = value(r(scheme="dense_allreduce"), "test_accuracy_pct")
        def acc(row):
            a = value(row, "test_accuracy_pct")
            return f"{fmt(a, 2, '%')} ({signed(a - d)})"
        body.append([workers, fmt(d, 2, "%"),
                     acc(r(scheme="fixed_sketch_allreduce", compressor=DEFAULT_FIXED, release_cap_x="")),
                     acc(r(scheme="fixed_sketch_allreduce", compressor=DEFAULT_FIXED, release_cap_x=str(2 * workers // 4))),
                     acc(r(scheme="sketch_ps", release_cap_x=str(workers // 4)))])
    return markdown(["workers", "dense_allreduce", "fixed_sketch_allreduce, no cap", "at the default cap",
                     "sketch_ps (peel)"], body, ["r"] * 5)


def table_cnn16(rows):
    """The table of docs/BENCHMARKS.md "Scale out: 8 and 16 worker processes" (seed 1): the fixed
    sketch at 10x at the default cap, at the cap that trains (0.5), at density 0.1,
    and the exact top k of the sums (gtopk) at the same density, against dense and the peel."""
    pick = [("dense_allreduce", dict(scheme="dense_allreduce")),
            ("sketch_ps (peel, 2.5x)", dict(scheme="sketch_ps", release_cap_x="4")),
            ("fixed_sketch_allreduce 10x, default cap (8)", dict(scheme="fixed_sketch_allreduce", compressor=DEFAULT_FIXED, release_cap_x="8")),
            ("fixed_sketch_allreduce 10x, cap 0.5", dict(scheme="fixed_sketch_allreduce", compressor=DEFAULT_FIXED, release_cap_x="0.5")),
            ("fixed_sketch_allreduce density 0.1", dict(scheme="fixed_sketch_allreduce", compressor=DEFAULT_FIXED.replace("0.0333", "0.1"))),
            ("gtopk topk:density=0.0333 (exact top k)", dict(scheme="gtopk", compressor="topk:density=0.0333"))]
    body = []
    for label, match in pick:
        r = one(rows, model="cnn", workers=16, seed=1, epochs=2, **match)
        body.append([label, fmt(value(r, "test_accuracy_pct"), 2, "%"), fmt(value(r, "sent_bytes_per_step"), 0)])
    return markdown(["CNN, 16 workers, seed 1", "accuracy", "bytes sent / worker / step"], body)


TABLES = {"peel": table_peel, "fixed_sketch": table_fixed_sketch, "cnn": table_cnn, "cnn16": table_cnn16}
