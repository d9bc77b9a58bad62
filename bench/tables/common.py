"""What every study's table module shares: reading a study's results.csv and
writing markdown tables from its rows.

A table module (bench/tables/<study>.py) names its study and maps each table
name to a function of the study's rows (dicts of strings, as csv.DictReader
reads them) that returns the table's markdown lines. bench/doc_tables.py
puts each table into the docs between its markers:

    <!-- table <study>/<name> -->
    | ... |
    <!-- end table -->
"""
import csv
import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RESULTS = os.path.join(ROOT, "bench", "results")


def read_rows(study):
    """The rows of bench/results/<study>/results.csv."""
    with open(os.path.join(RESULTS, study, "results.csv"), newline="") as f:
        return list(csv.DictReader(f))


def value(row, key):
    """A field as a float, or None when it is empty (the CSV's null)."""
    text = row.get(key)
    if text is None:
        raise KeyError(f"no column '{key}'")
    return None if text == "" else float(text)


def fmt(x, digits=1, suffix="", empty=""):
    """x rounded to `digits` decimals, with thousands separators, or `empty` for None."""
    if x is None:
        return empty
    return f"{x:,.{digits}f}{suffix}"


def signed(x, digits=2, empty=""):
    """x with its sign (the difference from a baseline), or `empty` for None."""
    return empty if x is None else f"{x:+.{digits}f}"


def where(rows, **match):
    """The rows whose fields equal every keyword's value (compared as strings)."""
    return [r for r in rows if all(r.get(k) == str(v) for k, v in match.items())]


def one(rows, **match):
    """The single row matching every keyword; raises when there is none or several."""
    found = where(rows, **match)
    if len(found) != 1:
        raise LookupError(f"{len(found)} rows match {match}, expected one")
    return found[0]


def markdown(header, body, align=None):
    """A markdown table: header cells, body rows (lists of cells), and an
    alignment per column ('l' or 'r'; numbers right by default)."""
    align = align or ["l"] + ["r"] * (len(header) - 1)
    rule = ["---" if a == "l" else "---:" for a in align]
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join(rule) + " |"]
    lines += ["| " + " | ".join(str(c) for c in cells) + " |" for cells in body]
    return lines


def study_rows(module_file):
    """The rows of the study a table module is named after (bench/tables/<study>.py)."""
    return read_rows(os.path.splitext(os.path.basename(module_file))[0])
