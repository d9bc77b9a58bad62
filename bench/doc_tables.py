#!/usr/bin/env python3
"""The docs' tables, generated from the kept studies' results.

  python3 bench/doc_tables.py [--check] [FILE.md ...]

Every table the docs quote from a study sits between two markers,

    <!-- table <study>/<name> -->
    ...
    <!-- end table -->

and is made by bench/tables/<study>.py from bench/results/<study>/results.csv.
Without --check, rewrites each marked table of the files (README.md,
worker/README.md and the docs under docs/ when none is named) from its study's data. With --check,
changes nothing and exits 1 naming every table that differs from its data (a
table edited by hand, or data re-measured without regenerating its tables),
and 2 for a marker that names no known study or table, or markers that do not
pair up.
"""
import argparse
import difflib
import glob
import importlib
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))

BEGIN = re.compile(r"^<!-- table ([a-z0-9_]+)/([a-z0-9_]+) -->$")
END = "<!-- end table -->"


class MarkerError(Exception):
    pass


def table_lines(study, name):
    """The markdown lines of table `name` of `study`."""
    try:
        module = importlib.import_module(f"tables.{study}")
    except ModuleNotFoundError as e:
        if e.name != f"tables.{study}":
            raise
        raise MarkerError(f"no study '{study}' (bench/tables/{study}.py)")
    tables = getattr(module, "TABLES", {})
    if name not in tables:
        raise MarkerError(f"study '{study}' has no table '{name}' (it has: {', '.join(sorted(tables))})")
    return tables[name](module.rows())


def regenerate(text, path):
    """(the text with every marked table regenerated, names of the tables that changed)."""
    lines = text.split("\n")
    out, changed, i = [], [], 0
    while i < len(lines):
        line = lines[i]
        out.append(line)
        m = BEGIN.match(line.strip())
        if line.strip() == END:
            raise MarkerError(f"{path}:{i + 1}: '{END}' without a table marker before it")
        if not m:
            i += 1
            continue
        try:
            end = next(j for j in range(i + 1, len(lines)) if lines[j].strip() == END
                       or BEGIN.match(lines[j].strip()))
        except StopIteration:
            raise MarkerError(f"{path}:{i + 1}: table {m.group(1)}/{m.group(2)} has no '{END}'")
        if lines[end].strip() != END:
            raise MarkerError(f"{path}:{i + 1}: table {m.group(1)}/{m.group(2)} ends at another table's marker")
        current = lines[i + 1:end]
        fresh = table_lines(m.group(1), m.group(2))
        if fresh != current:
            changed.append((f"{m.group(1)}/{m.group(2)}", current, fresh))
        out.extend(fresh)
        out.append(lines[end])
        i = end + 1
    return "\n".join(out), changed


def default_files():
    """README.md, docs/*.md and the package READMEs that quote a study (worker/README.md)."""
    return ([os.path.join(ROOT, "README.md"), os.path.join(ROOT, "worker", "README.md")]
            + sorted(glob.glob(os.path.join(ROOT, "docs", "*.md"))))


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="change nothing; fail on a table that differs")
    parser.add_argument("files", nargs="*")
    args = parser.parse_args(argv)
    stale, count = [], 0
    for path in args.files or default_files():
        with open(path) as f:
            text = f.read()
        try:
            fresh, changed = regenerate(text, os.path.relpath(path, ROOT))
        except (MarkerError, LookupError, KeyError) as e:
            print(f"doc_tables: {os.path.relpath(path, ROOT)}: {e}", file=sys.stderr)
            return 2
        count += sum(1 for l in text.split("\n") if BEGIN.match(l.strip()))
        for name, current, new in changed:
            stale.append(name)
            if args.check:
                print(f"doc_tables: {os.path.relpath(path, ROOT)}: table {name} differs from its data:")
                sys.stdout.writelines(l + "\n" for l in difflib.unified_diff(
                    current, new, "in the doc", "from results.csv", lineterm="", n=0))
        if changed and not args.check:
            with open(path, "w") as f:
                f.write(fresh)
            print(f"doc_tables: {os.path.relpath(path, ROOT)}: rewrote {', '.join(n for n, _, _ in changed)}")
    if args.check and stale:
        print(f"doc_tables: {len(stale)} of {count} tables differ from their data; "
              "run python3 bench/doc_tables.py to regenerate them")
        return 1
    print(f"doc_tables: {count} tables {'match their data' if args.check else 'up to date'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
