"""The docs' tables equal what their studies' data make (bench/doc_tables.py
--check), and bench/ holds programs and kept studies only: no token, port
file, partial output, patch or per-run log; every study folder
bench/results/<study>/ holds its README.md, its results.csv and at most two
plots; under 400 files in all."""
import io
import os
import re
import sys
import unittest
from contextlib import redirect_stderr, redirect_stdout

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import doc_tables  # noqa: E402

BENCH = HERE
MAX_FILES = 400
MAX_PLOTS = 2
# Left over from runs, never kept: credentials, ports, outputs in flight,
# patches, and per-run logs and outputs (a study keeps its results.csv).
FORBIDDEN = [
    (re.compile(r"^(shard_)?token$"), "a token"),
    (re.compile(r"^(metrics_)?port\d*$"), "a port file"),
    (re.compile(r"\.partial$"), "an output in flight"),
    (re.compile(r"\.(patch|diff)$"), "a patch"),
    (re.compile(r"\.(log|out|err|stale)$"), "a per-run log or output"),
    (re.compile(r"^(summary|trace)\d*\.json$|^timeline\.json$|^comparison\.json$"), "a run's output"),
]


def bench_files():
    found = []
    for top, dirs, files in os.walk(BENCH):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        found += [os.path.relpath(os.path.join(top, f), BENCH) for f in files]
    return found


class DocTablesTest(unittest.TestCase):
    def test_every_table_matches_its_data(self):
        out, err = io.StringIO(), io.StringIO()
        with redirect_stdout(out), redirect_stderr(err):
            status = doc_tables.main(["--check"])
        self.assertEqual(status, 0, out.getvalue() + err.getvalue())
        self.assertRegex(out.getvalue(), r"doc_tables: [1-9]\d* tables match their data")

    def test_a_table_edited_by_hand_is_caught(self):
        text = "intro\n<!-- table main_job_link/link -->\n| made up |\n<!-- end table -->\nafter\n"
        fresh, changed = doc_tables.regenerate(text, "x.md")
        self.assertEqual([name for name, _, _ in changed], ["main_job_link/link"])
        self.assertNotIn("made up", fresh)
        self.assertTrue(fresh.startswith("intro\n<!-- table main_job_link/link -->\n|"))
        again, changed_again = doc_tables.regenerate(fresh, "x.md")
        self.assertEqual((again, changed_again), (fresh, []))

    def test_bad_markers_are_named(self):
        for text, needle in [
            ("<!-- table nosuch/links -->\n<!-- end table -->\n", "no study 'nosuch'"),
            ("<!-- table main_job_link/nosuch -->\n<!-- end table -->\n", "has no table 'nosuch'"),
            ("<!-- table main_job_link/link -->\nno end\n", "has no '<!-- end table -->'"),
            ("stray\n<!-- end table -->\n", "without a table marker"),
        ]:
            with self.assertRaises(doc_tables.MarkerError) as caught:
                doc_tables.regenerate(text, "x.md")
            self.assertIn(needle, str(caught.exception))


class BenchHoldsNoRunOutputTest(unittest.TestCase):
    def test_no_leftovers_of_runs(self):
        bad = [f"{path} ({what})" for path in bench_files() for pattern, what in FORBIDDEN
               if pattern.search(os.path.basename(path))]
        self.assertEqual(bad, [], "bench/ keeps programs and studies only")

    def test_under_the_file_budget(self):
        self.assertLess(len(bench_files()), MAX_FILES)

    def test_every_study_is_a_readme_a_results_csv_and_at_most_two_plots(self):
        results = os.path.join(BENCH, "results")
        studies = sorted(d for d in os.listdir(results) if os.path.isdir(os.path.join(results, d)))
        self.assertTrue(studies)
        for study in studies:
            files = sorted(os.listdir(os.path.join(results, study)))
            with self.subTest(study=study):
                self.assertIn("README.md", files)
                self.assertIn("results.csv", files)
                plots = [f for f in files if f.endswith(".png")]
                self.assertLessEqual(len(plots), MAX_PLOTS)
                self.assertEqual(sorted(set(files) - {"README.md", "results.csv"} - set(plots)), [])
                with open(os.path.join(results, study, "README.md")) as f:
                    readme = f.read()
                for needle in ("**Question.**", "**Command.**", "**Measured**", "**Answer.**"):
                    self.assertIn(needle, readme)


if __name__ == "__main__":
    unittest.main()
