"""The time to target every comparison reports: wall seconds until a run's
curve first reaches dense_allreduce's final value on the curve within a
margin (or, without a dense_allreduce run that finished, the best final value
among the runs within it). A classifier is judged by test accuracy (the
margin: one point below), a language model by validation loss (the margin:
2% above); a summary says which (quality_metric)."""

MARGIN = 0.01  # one point of accuracy
LOSS_MARGIN = 0.02  # 2% of the reference loss
ACCURACY, LOSS = "test_accuracy", "test_loss"


def final_on_curve(curve, metric=ACCURACY):
    """The last value of `metric` on a curve (points with step, elapsed_s, test_accuracy,
    test_loss), or None."""
    points = [c for c in curve if c.get(metric) is not None]
    return points[-1][metric] if points else None


def _target_near(value, metric):
    return value * (1 + LOSS_MARGIN) if metric == LOSS else value - MARGIN


def _describe(value, metric):
    if metric == LOSS:
        return f"final validation loss on the curve ({value:.4f}) plus 2%"
    return f"final accuracy on the curve ({100 * value:.2f}%) minus one point"


def target_of(curves, diverged, dense="dense_allreduce", metric=ACCURACY):
    """(target, the sentence saying how it was set), or (None, "").

    curves: {run name: its curve}; diverged: the names of runs that diverged
    (never the reference); metric: ACCURACY (higher is better) or LOSS
    (lower is better)."""
    healthy = {name: final_on_curve(c, metric) for name, c in curves.items()
               if name not in diverged and final_on_curve(c, metric) is not None}
    if dense in healthy:
        return _target_near(healthy[dense], metric), f"{dense}'s {_describe(healthy[dense], metric)}"
    if not healthy:
        return None, ""
    best = (min if metric == LOSS else max)(healthy, key=healthy.get)
    why = "diverged" if dense in curves else "was not run"
    return (_target_near(healthy[best], metric),
            f"{dense} {why}: the best {_describe(healthy[best], metric)} ({best})")


def time_to(curve, target, metric=ACCURACY):
    """Elapsed seconds of the first curve point at or past `target` (at or above an accuracy, at
    or below a loss), or None when none is."""
    def reached(value):
        return value <= target if metric == LOSS else value >= target
    hits = [c for c in curve if c.get(metric) is not None and reached(c[metric])]
    return hits[0]["elapsed_s"] if hits else None
