"""Tests of the quality sweep's ratio rules (bench/quality_sweep.py).

  quality_sweep_test.py REGISTRY_CC PROBE.out...

REGISTRY_CC is worker/schemes/scheme_registry.cc: every compressing scheme
registered there must have a rule, and the fixed-size sketch's shape must be
the registry's. Each PROBE is a scale-study probe of a fixed-size sketch route
(bench/data/scale/study_large_grid/probes/): its worker-measured compression
ratio at its density must be the one the rule predicts, within 0.5%.
"""
import json
import os
import re
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import quality_sweep as qs  # noqa: E402

REGISTRY_CC = None
PROBES = []


def registry_entries(text):
    """(name, compressor) of every scheme entry in scheme_registry.cc."""
    return re.findall(r'\{"(\w+)", Route::k\w+, "(\w+)",', text)


def registry_constant(text, name):
    m = re.search(r'constexpr char ' + name + r'\[\] =\s*"([^"]+)";', text)
    if m is None:
        raise AssertionError(f"{name} not found in the registry")
    return m.group(1)


def summary_of(path):
    with open(path) as f:
        for line in f:
            if line.startswith("summary "):
                return json.loads(line[len("summary "):])
    raise AssertionError(f"{path}: no summary line")


class RatioRuleTest(unittest.TestCase):
    def setUp(self):
        with open(REGISTRY_CC) as f:
            self.registry = f.read()

    def test_every_compressing_scheme_of_the_registry_has_a_rule(self):
        entries = registry_entries(self.registry)
        self.assertGreaterEqual(len(entries), 14, entries)
        for name, compressor in entries:
            if compressor == "dense":
                continue  # the baselines run at their own bytes
            for workers in (4, 16):
                with self.subTest(scheme=name, workers=workers):
                    rule = qs.spec_for(name, 10, workers)
                    self.assertIsNotNone(rule)
                    run_as, flags = rule
                    self.assertEqual(run_as, name)
                    self.assertTrue(flags[0].startswith(f"--compressor={compressor}:"), flags)

    def test_the_fixed_sketch_shape_is_the_registrys(self):
        spec = registry_constant(self.registry, "kFixedSketchSpec")
        name, _, params = spec.partition(":")
        registry = {p for p in params.split(",") if not p.startswith("density=")}
        for scheme in qs.FIXED_SKETCHES:
            _, flags = qs.spec_for(scheme, 10, 8)
            swept_name, _, swept_params = flags[0][len("--compressor="):].partition(":")
            self.assertEqual(swept_name, name)
            self.assertEqual({p for p in swept_params.split(",") if not p.startswith("density=")}, registry, scheme)

    def test_the_hybrids_have_their_centralized_routes_bytes(self):
        for workers in (4, 16, 64):
            self.assertEqual(qs.spec_for("auto", 10, workers)[1], qs.spec_for("sketch_ps", 10, workers)[1])
            self.assertEqual(qs.spec_for("fixed_sketch_auto", 30, workers)[1],
                             qs.spec_for("fixed_sketch_ps", 30, workers)[1])
        with self.assertRaises(ValueError):
            qs.spec_for("auto/fetchsgd", 10, 4)

    def test_the_fixed_sketch_rule_predicts_the_measured_ratio(self):
        self.assertGreaterEqual(len(PROBES), 4)
        seen = set()
        for path in PROBES:
            s = summary_of(path)
            workers = int(re.search(r"_W(\d+)_", os.path.basename(path)).group(1))
            density = float(re.search(r"density=([0-9.eE+-]+)", s["compressor"]).group(1))
            predicted = 1.0 / (qs.fixed_sketch_floats_per_selected(s["scheme"], workers) * density)
            with self.subTest(probe=os.path.basename(path)):
                self.assertAlmostEqual(s["compression_ratio"] / predicted, 1.0, delta=0.005)
            seen.add((s["scheme"], workers))
        # Both routes, at more than one W (the ring's factor changes with W).
        self.assertGreaterEqual(len({w for scheme, w in seen if scheme == "fixed_sketch_allreduce"}), 2)
        self.assertIn("fixed_sketch_ps", {scheme for scheme, _ in seen})

    def test_the_sweep_aims_at_the_ratio_it_is_asked_for(self):
        for scheme in qs.FIXED_SKETCHES:
            for workers in (2, 4, 16, 256):
                for ratio in (10, 100, 300):
                    _, flags = qs.spec_for(scheme, ratio, workers)
                    density = float(re.search(r"density=([0-9.eE+-]+)", flags[0]).group(1))
                    aimed = 1.0 / (qs.fixed_sketch_floats_per_selected(scheme, workers) * density)
                    self.assertAlmostEqual(aimed / ratio, 1.0, delta=1e-4)
        # The ring sends more per coordinate as W grows, so it selects fewer.
        ring = [float(re.search(r"density=([0-9.eE+-]+)", qs.spec_for("fixed_sketch_allreduce", 10, w)[1][0])
                      .group(1)) for w in (2, 4, 16)]
        self.assertGreater(ring[0], ring[1])
        self.assertGreater(ring[1], ring[2])


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    REGISTRY_CC = sys.argv[1]
    PROBES = sys.argv[2:]
    unittest.main(argv=sys.argv[:1])
