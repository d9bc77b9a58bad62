"""Tables of bench/results/scale_study/ (every scheme at equal bytes, 4 to 256 virtual workers, the rate scaled with W)."""
from tables.common import fmt, markdown, one, signed, study_rows, value, where

MODELS = ["mlp", "cnn", "mlp_large", "cnn_wide"]
WORKERS = [4, 16, 64, 256]
SCHEMES = ["topk_allgather", "gtopk", "spardl", "topk_ps", "sketch_ps", "sketch_allreduce", "fixed_sketch_ps",
           "fixed_sketch_allreduce"]
CHANCE = 11.0  # the study's rule: a run that ends under 11% (ten classes) has diverged
RULE = {"true": "rate", "false": "raw"}


def rows():
    return study_rows(__file__)


def _cell(r, minority):
    """A run's gap to dense (points), or what became of it; '*' marks the row's other residual rule."""
    if r["out_of_reach"] == "true":
        return "out of reach"
    if r["diverged_step"]:
        text = f"div. {r['diverged_step']}"
    elif value(r, "test_accuracy_pct") < CHANCE:
        text = "chance"
    else:
        text = signed(value(r, "vs_dense_points"))
    dev = value(r, "budget_deviation_pct")
    if dev is not None and abs(dev) > 5:
        text += f" [{dev:+.0f}% B]"
    return text + ("*" if RULE[r["residual_in_rate_units"]] == minority else "")


def _gaps(rows, ratio):
    body = []
    for model in MODELS:
        for w in WORKERS:
            cells = {s: where(rows, model=model, workers=w, scheme=s, ratio_target=ratio, seed=1) for s in SCHEMES}
            rules = [RULE[c[0]["residual_in_rate_units"]] for c in cells.values() if c]
            if not rules:
                continue
            major = max(set(rules), key=rules.count)
            minority = None if len(set(rules)) == 1 else ({"rate", "raw"} - {major}).pop()
            dense = where(rows, model=model, workers=w, scheme="dense_allreduce", seed=1)
            dense = min(dense, key=lambda r: r["blas"] != "reference")  # the MLP's: the reference BLAS's
            body.append([model, w, fmt(value(dense, "test_accuracy_pct"), 2, "%"),
                         major + ("" if minority is None else f" (*{minority})")]
                        + [_cell(cells[s][0], minority) if cells[s] else "" for s in SCHEMES])
    return markdown(["model", "W", "dense", "residual"] + [f"`{s}`" for s in SCHEMES], body,
                    ["l", "r", "r", "l"] + ["r"] * len(SCHEMES))


def table_gaps_10x(rows):
    """docs/BENCHMARKS.md "Scale out: 4 to 256 virtual workers at equal bytes" and README's scheme table: every scheme's gap to dense
    (points) at 10x, seed 1, by model and W."""
    return _gaps(rows, 10)


def table_gaps_100x(rows):
    """The same at 100x."""
    return _gaps(rows, 100)


def table_seeds_mlp_large(rows):
    """README "64 and 256, 10x": fixed_sketch_ps against dense on mlp_large, three seeds, the
    rate-unit residual."""
    body = []
    for w in (64, 256):
        dense, fs = [], []
        for seed in (1, 2, 3):
            dense.append(one(rows, model="mlp_large", workers=w, scheme="dense_allreduce", seed=seed))
            fs.append(one(rows, model="mlp_large", workers=w, scheme="fixed_sketch_ps", ratio_target=10, seed=seed,
                          residual_in_rate_units="true"))
        mean = lambda rs, k: sum(value(r, k) for r in rs) / len(rs)
        d, f = mean(dense, "test_accuracy_pct"), mean(fs, "test_accuracy_pct")
        last3 = ""
        if all(int(r["epochs"]) > 4 for r in fs):  # evaluations a few steps apart (at 64 workers 29 apart: none)
            last3 = signed(mean(fs, "last3_test_accuracy_mean_pct") - mean(dense, "last3_test_accuracy_mean_pct"))
        body.append([w, fmt(d, 2, "%"), fmt(f, 2, "%"), signed(f - d),
                     ", ".join(signed(value(r, "vs_dense_points")) for r in fs), last3])
    return markdown(["W", "dense (mean)", "`fixed_sketch_ps` (mean)", "gap", "gap, seeds 1, 2, 3",
                     "gap, last 3 evaluations"], body)


TABLES = {"gaps_10x": table_gaps_10x, "gaps_100x": table_gaps_100x, "seeds_mlp_large": table_seeds_mlp_large}
