"""Tables of bench/results/main_job_link/ (the main job's time to dense - 1 point on shaped links, OpenBLAS)."""
from tables.common import fmt, markdown, one, study_rows, value, where

LINKS = [("none", "loopback"), ("1gbit", "1 Gbit/s"), ("300mbit", "300 Mbit/s"),
         ("200mbit", "200 Mbit/s (default)"), ("100mbit", "100 Mbit/s")]
LINK_NAME = dict(LINKS)


def rows():
    return study_rows(__file__)


def kib(row, key="sent_bytes_per_step"):
    return fmt(value(row, key) / 1024, 1, " KiB")


def seconds(row):
    return fmt(value(row, "time_to_target_s"), 1, " s", empty="never")


def regime_rows(rows, model, workers, link):
    """The launcher runs of one regime (the every-scheme run at 4 workers and 200 Mbit/s)."""
    found = [r for r in where(rows, model=model, workers=workers, link=link)
             if r["launch"] != "main_job_sh"]
    return found


def table_link(rows):
    """The table of README "Which link the main job runs on" and docs/BENCHMARKS.md "The main
    job on a shaped link": each scheme's mean step and time to dense_allreduce's final curve
    accuracy minus a point, by link (MLP, 4 workers, 200 Mbit/s from the every-scheme run)."""
    schemes = ["dense_allreduce", "sketch_ps", "sketch_allreduce"]
    body = []
    for link, name in LINKS:
        runs = [one(regime_rows(rows, "mlp", 4, link), scheme=s) for s in schemes]
        first = min(runs, key=lambda r: value(r, "time_to_target_s"))
        cells = []
        for r in runs:
            t = seconds(r)
            cells.append(f"{fmt(value(r, 'step_ms'), 1, ' ms')}, " + (f"**{t}**" if r is first else t))
        body.append([name] + cells)
    return markdown(["link"] + [f"{s}: step, to target" for s in schemes], body)


def table_regimes(rows):
    """The table of docs/BENCHMARKS.md "Which scheme reaches dense's accuracy first": per regime, the two schemes that
    reached dense_allreduce's final curve accuracy minus a point soonest, dense's time, and the
    schemes that never did."""
    regimes = sorted({(r["model"], int(r["workers"]), r["link"]) for r in rows},
                     key=lambda k: (k[0] != "mlp", k[1], [l for l, _ in LINKS].index(k[2])))
    body = []
    for model, workers, link in regimes:
        runs = regime_rows(rows, model, workers, link)
        timed = sorted([r for r in runs if r["time_to_target_s"]],
                       key=lambda r: value(r, "time_to_target_s"))
        dense = one(runs, scheme="dense_allreduce")
        cell = lambda r: f"{r['scheme']}: {seconds(r)}, {kib(r)}"
        never = [f"{r['scheme']} {fmt(value(r, 'test_accuracy_pct'), 2, '%')}"
                 for r in runs if not r["time_to_target_s"]]
        body.append([workers, LINK_NAME[link].replace(" (default)", ""), model.upper(),
                     len(runs), f"**{cell(timed[0])}**", cell(timed[1]),
                     f"{seconds(dense)}, {kib(dense)}",
                     f"{'; '.join(never)} (target {fmt(value(dense, 'target_pct'), 2, '%')})" if never else ""])
    return markdown(["workers", "link", "model", "schemes", "soonest to dense − 1", "runner-up",
                     "dense_allreduce", "never (final accuracy)"], body,
                    ["r", "l", "l", "r", "l", "l", "l", "l"])


def table_every_scheme(rows):
    """The table of docs/BENCHMARKS.md "Which scheme reaches dense's accuracy first": every scheme on the MLP
    at 4 workers and 200 Mbit/s, in the order they reached the target."""
    runs = sorted(where(rows, launch="every_scheme"), key=lambda r: value(r, "time_to_target_s"))
    body = [[r["scheme"], fmt(value(r, "test_accuracy_pct"), 2, "%"), seconds(r),
             r["steps_to_target"], fmt(value(r, "step_ms"), 1, " ms"),
             f"{fmt(value(r, 'sent_bytes_per_step') / 1024)} / {fmt(value(r, 'received_bytes_per_step') / 1024)}",
             fmt(value(r, "compression_ratio"), 1, "x"), fmt(value(r, "wall_s"), 1, " s")]
            for r in runs]
    return markdown(["scheme", "accuracy", "to target", "steps to target", "step",
                     "sent / received KiB per step", "ratio", "wall"], body)


def table_main_job(rows):
    """README's quick start: what the main job prints for its three schemes (the MLP, 4 workers,
    200 Mbit/s; the every-scheme launch, which carries bytes)."""
    body = []
    for scheme in ("dense_allreduce", "sketch_ps", "sketch_allreduce"):
        r = one(rows, launch="every_scheme", scheme=scheme)
        body.append([scheme, fmt(value(r, "test_accuracy_pct"), 2, "%"), seconds(r),
                     fmt(value(r, "step_ms"), 1, " ms"), fmt(value(r, "sent_bytes_per_step") / 1024, 1),
                     fmt(value(r, "compression_ratio"), 1, "x")])
    return markdown(["scheme", "accuracy", "to target", "step", "sent KiB/step", "ratio"], body)


TABLES = {"main_job": table_main_job, "link": table_link, "regimes": table_regimes, "every_scheme": table_every_scheme}
