"""The tidy results.csv every study writes: one row per run, the
configuration first, then the figures, null as an empty field. Its columns
are RUN_FIELDS; bench/results/<study>/results.csv keeps what the docs quote."""
import csv

# A training run of a local cluster or of virtual workers.
RUN_FIELDS = [
    # configuration
    "model", "workers", "link", "virtual", "seed", "epochs", "train_examples", "scheme", "ratio_target",
    "compressor", "optimizer",
    # figures (a classifier is judged by test_accuracy_pct against target_pct, a language model by
    # test_loss, nats per byte on its validation split, against target_loss)
    "quality_metric", "steps", "test_accuracy_pct", "test_loss", "diverged_step", "target_pct", "target_loss", "time_to_target_s",
    "step_ms", "sent_bytes_per_step", "received_bytes_per_step", "compression_ratio", "peel_recovered_pct",
    "wall_s",
]


def pct(share):
    """A share in [0, 1] as a percentage (None stays None)."""
    return None if share is None else round(100 * share, 4)


def write_csv(path, rows, fields):
    """Writes `rows` (dicts) with the columns `fields`, None as an empty field."""
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow({k: "" if r.get(k) is None else r.get(k) for k in fields})


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))
