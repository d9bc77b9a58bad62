"""The density at which a scheme's compressor meets a byte budget, found by
short probe runs rather than by byte formulas kept per scheme: every
compressing scheme of the registry is measured the same way.

A probe is a run of a few steps whose summary gives the bytes a worker sent
and received per step. The first two probes (the scheme's default density,
or a start spec, and a quarter of it) fit total bytes = a + b * density; a
probe at the fitted density checks it, and where that misses by more than
BUDGET_TOLERANCE (bytes that are not affine in the density: the peel's
decoded coordinates, the union of the workers' selections) the secant
through the two probes nearest the budget is tried, at most REFINE_PROBES
times."""
import re

from harness.worker_runs import StudyError

PROBE_STEPS = 2
REFINE_PROBES = 3
BUDGET_TOLERANCE = 0.05


def with_density(spec, density):
    """The compressor spec `spec` (name:key=value,...) with its density set to `density`."""
    name, _, params = spec.partition(":")
    kept = [p for p in params.split(",") if p and not p.startswith("density=")]
    return f"{name}:" + ",".join([f"density={density:.6g}"] + kept)


def density_of(spec):
    m = re.search(r"(?:^|[:,])density=([0-9.eE+-]+)", spec)
    if m is None:
        raise StudyError(f"compressor '{spec}' has no density to scale")
    try:
        return float(m.group(1))
    except ValueError:
        raise StudyError(f"compressor '{spec}': density={m.group(1)} is not a number") from None


def total_bytes(summary):
    """Bytes a worker sent plus received per step."""
    return summary["bytes_sent_per_step"] + summary["bytes_received_per_step"]


def sent_bytes(summary):
    """Bytes a worker sent per step."""
    return summary["bytes_sent_per_step"]


# The two budgets a ratio R can mean, as (the bytes measured, the budget in
# multiples of the dense gradient's bytes D):
#   moved  sent plus received, 2 D / R: what a worker would move if it sent its
#          gradient R times smaller once and received the sum once (the scale
#          study's, and the default: a scheme that sends little but receives
#          W times as much pays for it);
#   sent   sent only, D / R: the worker's own compression ratio (the quality
#          sweep of 4 workers measured every scheme this way).
BUDGETS = {"moved": (total_bytes, 2.0), "sent": (sent_bytes, 1.0)}


def dense_bytes(summary):
    """The dense float32 gradient's bytes per step: the worker's ratio is dense bytes / bytes sent."""
    return summary["compression_ratio"] * summary["bytes_sent_per_step"]


def budget_for(summary, ratio, kind="moved"):
    """The budget of ratio R (BUDGETS[kind]): 2 D / R bytes sent plus received per worker per
    step, or D / R sent, D the dense gradient's bytes."""
    return BUDGETS[kind][1] * dense_bytes(summary) / ratio


def calibrate(probe, label, start_spec=None, measure=total_bytes):
    """Probes at the default density (or `start_spec`'s) and a quarter of it.

    probe(name, compressor) runs a probe (compressor None: the scheme's
    default) and returns its summary; measure(summary) is the bytes the
    budget counts (total_bytes or sent_bytes). Returns (the first probe's
    name, "default" or "start"; its summary; the affine fit {a, b}: bytes =
    a + b * density; the spec; the probes' (density, bytes) points)."""
    first_name = "default" if start_spec is None else "start"
    first = probe(first_name, start_spec)
    spec = first["compressor"]
    d0 = density_of(spec)
    second = probe("quarter", with_density(spec, d0 / 4))
    t0, t1 = measure(first), measure(second)
    b = (t0 - t1) / (d0 - d0 / 4)
    a = t0 - b * d0
    if b <= 0:
        raise StudyError(f"{label}: its bytes do not grow with the density "
                         f"({t1:.0f} B at {d0 / 4:g}, {t0:.0f} B at {d0:g})")
    return first_name, first, {"a": a, "b": b}, spec, [(d0, t0), (d0 / 4, t1)]


def density_for(probe, ratio, spec, points, budget, measure=total_bytes):
    """The density whose bytes are `budget`, or None when no density in (0, 1] meets it.

    `points` are the probes' (density, total bytes) so far (calibrate's); the
    checks are added to it. Returns the last density tried (each probe moves
    closer)."""
    density = None
    for attempt in range(1 + REFINE_PROBES):
        (da, ta), (db, tb) = sorted(points, key=lambda p: abs(p[1] - budget))[:2]
        if ta == tb:
            return density
        density = float(f"{da + (budget - ta) * (db - da) / (tb - ta):.6g}")
        if density <= 0 and attempt < REFINE_PROBES:
            # The line's intercept is above the budget (a table clamped at the
            # group's size at the probed densities, say): look further down.
            density = float(f"{min(d for d, _ in points) / 4:.6g}")
        if not 0 < density <= 1:
            return None
        if attempt == REFINE_PROBES:
            return density
        s = probe(f"{ratio:g}x_check{attempt + 1}", with_density(spec, density))
        points.append((density, measure(s)))
        if abs(measure(s) / budget - 1) <= BUDGET_TOLERANCE:
            return density
