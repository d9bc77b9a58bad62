"""The time to target every comparison reports: wall seconds until a run's
accuracy curve first reaches dense_allreduce's final accuracy on the curve
minus one point (or, without a dense_allreduce run that finished, the best
final curve accuracy among the runs minus one point)."""

MARGIN = 0.01  # one point of accuracy


def final_on_curve(curve):
    """The last accuracy of a curve (points with step, elapsed_s, test_accuracy), or None."""
    points = [c for c in curve if c["test_accuracy"] is not None]
    return points[-1]["test_accuracy"] if points else None


def target_of(curves, diverged, dense="dense_allreduce"):
    """(target accuracy, the sentence saying how it was set), or (None, "").

    curves: {run name: its curve}; diverged: the names of runs that diverged
    (never the reference)."""
    healthy = {name: final_on_curve(c) for name, c in curves.items()
               if name not in diverged and final_on_curve(c) is not None}
    if dense in healthy:
        target = healthy[dense] - MARGIN
        return target, f"{dense}'s final accuracy on the curve ({100 * healthy[dense]:.2f}%) minus one point"
    if not healthy:
        return None, ""
    best = max(healthy, key=healthy.get)
    why = "diverged" if dense in curves else "was not run"
    return (healthy[best] - MARGIN,
            f"{dense} {why}: the best final accuracy on the curves ({best}, {100 * healthy[best]:.2f}%) "
            "minus one point")


def time_to(curve, target):
    """Elapsed seconds of the first curve point at or above `target`, or None when none is."""
    reached = [c for c in curve if c["test_accuracy"] is not None and c["test_accuracy"] >= target]
    return reached[0]["elapsed_s"] if reached else None
