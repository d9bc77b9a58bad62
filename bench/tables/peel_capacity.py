"""Tables of bench/results/peel_capacity/ (the peeling decoder alone: the share of 4 workers'
summed selections it recovers by sketch shape and k, on the CNN's 28,938 coordinates)."""
from tables.common import fmt, markdown, one, study_rows, value, where

KS = ["8", "16", "32", "48", "96", "300", "1000"]


def rows():
    return study_rows(__file__)


def table_recovery(rows):
    """The table of docs/BENCHMARKS.md "Training quality at 4 workers, 10x to 300x", *Ruled out and in by the decoder
    alone*: share of the selections recovered with 4 rows, by width (load 1/width, disjoint
    selections) and k, and width 3 with half of each selection common to all workers."""
    cases = [("2", "0", "2 (1/2)"), ("3", "0", "3 (1/3)"), ("4", "0", "4 (1/4, the default)"),
             ("5", "0", "5 (1/5)"), ("3", "0.5", "3, half of each selection shared")]
    body = []
    for width, overlap, label in cases:
        body.append([label] + [fmt(100 * value(one(rows, sketch_rows="4", width=width, overlap=overlap, k=k),
                                               "recovered_fraction"), 1, "%") for k in KS])
    return markdown(["width (load, disjoint)"] + [f"k = {k}" if k == "8" else k for k in KS], body)


def table_errors(rows):
    """The same runs' wrong answers, by rows (both overlaps): the largest share of the returned
    mass at coordinates nobody inserted, and the most values returned wrong (off the true sum),
    as a count and as a share of the coordinates inserted, in one case (200 decodes)."""
    body = []
    for r in ("4", "6"):
        sel = where(rows, sketch_rows=r)
        inserted = lambda x: int(x["nonzeros"]) * int(x["trials"])
        worst_mass = max(sel, key=lambda x: value(x, "false_mass_fraction"))
        most = max(sel, key=lambda x: int(x["wrong_values"]))
        worst_share = max(sel, key=lambda x: int(x["wrong_values"]) / inserted(x))
        body.append([r, fmt(100 * value(worst_mass, "false_mass_fraction"), 3, "%"),
                     f"{int(most['wrong_values']):,} of {inserted(most):,} (width {most['width']}, k = {most['k']})",
                     f"{fmt(100 * int(worst_share['wrong_values']) / inserted(worst_share), 3, '%')} "
                     f"(width {worst_share['width']}, k = {worst_share['k']})"])
    return markdown(["rows", "false mass, largest share", "wrong values, most", "wrong values, largest share"],
                    body)


TABLES = {"recovery": table_recovery, "errors": table_errors}
