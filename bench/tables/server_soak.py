"""Tables of bench/results/server_soak/ (a real sketchfuse_server under load for 10,000 and
50,000 rounds: throughput, push latency, resident memory)."""
from tables.common import fmt, markdown, study_rows, value


def rows():
    return study_rows(__file__)


def table_soak(rows):
    """The table of docs/RELIABILITY.md "Load and soak" (8 workers x 4 groups)."""
    body = []
    for r in sorted(rows, key=lambda r: value(r, "rounds")):
        mib = lambda key: fmt(value(r, key) / 1024, 1)
        body.append([f"soak, `--steps={r['steps']}`", fmt(value(r, "rounds"), 0), fmt(value(r, "rounds_per_s"), 0),
                     f"{fmt(value(r, 'push_p50_ms'), 2)} / {fmt(value(r, 'push_p99_ms'), 2)} / "
                     f"{fmt(value(r, 'push_max_ms'), 2)} ms",
                     f"{mib('rss_after_10pct_kib')} → {mib('rss_end_kib')} MiB ({mib('rss_peak_kib')})",
                     f"{r['failed_pushes']}, {r['wrong_updates']}"])
    return markdown(["run", "rounds", "rounds/s", "push latency p50 / p99 / max", "server RSS: after 10% → end (peak)",
                     "failed, wrong"], body, ["l", "r", "r", "l", "l", "r"])


TABLES = {"soak": table_soak}
