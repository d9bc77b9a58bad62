"""The study harness (bench/harness/) against the real worker binary.

  harness_test.py SKETCHFUSE_WORKER
"""
import csv
import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import budget, cluster_report, registry, targets  # noqa: E402
from harness.worker_runs import ReusingRunner, StaleOutput, StudyError  # noqa: E402
import digit_check  # noqa: E402
import scale_model  # noqa: E402

WORKER = None


class RegistryTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.reg = registry.load(WORKER)

    def test_the_worker_lists_every_scheme_with_its_route_and_default(self):
        names = self.reg.names()
        for name in ("sketch_ps", "sketch_allreduce", "fixed_sketch_ps", "topk_allgather", "dense_allreduce",
                     "auto", "fixed_sketch_auto"):
            self.assertIn(name, names)
        self.assertEqual(self.reg.get("sketch_ps").route, "centralized")
        self.assertEqual(self.reg.get("spardl").route, "decentralized")
        self.assertEqual(self.reg.get("auto").hybrid_of, {"centralized": "sketch_ps", "decentralized": "sketch_allreduce"})
        self.assertTrue(self.reg.get("fixed_sketch_ps").traits["two_rounds"])
        self.assertTrue(self.reg.get("fixed_sketch_ps").default_compressor.startswith("count_sketch:method=candidates"))

    def test_baselines_and_compressing_schemes_come_from_the_traits(self):
        self.assertEqual(self.reg.baselines(), ["dense_allreduce", "dense_bf16_allreduce"])
        compressing = self.reg.compressing()
        self.assertNotIn("dense_ps", compressing)
        self.assertNotIn("auto", compressing)  # a hybrid equals its centralized route while the shards answer
        self.assertIn("auto", self.reg.compressing(hybrids=True))
        self.assertEqual(set(compressing) | set(self.reg.baselines()) | {"dense_ps", "auto", "fixed_sketch_auto"},
                         set(self.reg.names()))

    def test_an_unknown_scheme_is_named_with_the_known_ones(self):
        with self.assertRaises(registry.RegistryError) as caught:
            self.reg.check(["sketch_ps", "magic"])
        self.assertIn("unknown scheme 'magic'; the schemes are sketch_ps,", str(caught.exception))

    def test_a_missing_binary_is_named(self):
        with self.assertRaises(registry.RegistryError) as caught:
            registry.load("/nonexistent/sketchfuse_worker")
        self.assertIn("is not built", str(caught.exception))

    def test_the_scale_model_covers_registry_schemes_on_their_routes(self):
        for name in scale_model.TRAFFIC:
            scheme = self.reg.get(name)  # raises for a name the registry lacks
            self.assertEqual(name in scale_model.PS_SCHEMES, scheme.route == "centralized", name)


class BudgetTest(unittest.TestCase):
    def test_specs_keep_their_shape_when_the_density_changes(self):
        spec = "count_sketch:method=candidates,density=0.0333,rows=1,width=1,candidates=2,table=bf16"
        self.assertEqual(budget.density_of(spec), 0.0333)
        self.assertEqual(budget.with_density(spec, 0.01),
                         "count_sketch:density=0.01,method=candidates,rows=1,width=1,candidates=2,table=bf16")
        with self.assertRaises(StudyError):
            budget.density_of("dense")

    def fake_probe(self, bytes_of_density):
        """A probe whose total bytes follow bytes_of_density; records what it was asked."""
        asked = []

        def probe(name, compressor):
            spec = compressor or "topk:density=0.01"
            asked.append((name, spec))
            d = budget.density_of(spec)
            sent = bytes_of_density(d)
            return {"compressor": spec, "bytes_sent_per_step": sent / 2, "bytes_received_per_step": sent / 2,
                    "compression_ratio": 1000.0 / (sent / 2)}
        return probe, asked

    def test_an_affine_scheme_meets_its_budget_at_the_first_check(self):
        probe, asked = self.fake_probe(lambda d: 100 + 1e5 * d)
        _, first, fit, spec, points = budget.calibrate(probe, "topk_allgather")
        self.assertAlmostEqual(fit["b"], 1e5)
        self.assertAlmostEqual(fit["a"], 100)
        self.assertAlmostEqual(budget.dense_bytes(first), 1000.0)
        target = budget.budget_for(first, 10)  # 2 x 1000 / 10 = 200 bytes
        self.assertAlmostEqual(target, 200)
        density = budget.density_for(probe, 10, spec, points, target)
        self.assertAlmostEqual(density, 0.001)
        self.assertEqual([n for n, _ in asked], ["default", "quarter", "10x_check1"])

    def test_a_curved_scheme_is_refined_by_secants(self):
        probe, asked = self.fake_probe(lambda d: 50 + 4e7 * d * d)
        _, first, _, spec, points = budget.calibrate(probe, "sketch_ps")
        target = 150.0
        density = budget.density_for(probe, 10, spec, points, target)
        got = 50 + 4e7 * density ** 2
        self.assertLess(abs(got / target - 1), budget.BUDGET_TOLERANCE + 0.02)
        self.assertGreater(len(asked), 3)

    def test_a_budget_below_every_density_is_out_of_reach(self):
        probe, _ = self.fake_probe(lambda d: 1000 + 10 * d)
        _, first, _, spec, points = budget.calibrate(probe, "dense-like")
        self.assertIsNone(budget.density_for(probe, 10, spec, points, 10.0))

    def test_bytes_that_do_not_grow_with_the_density_are_refused(self):
        probe, _ = self.fake_probe(lambda d: 500.0)
        with self.assertRaises(StudyError) as caught:
            budget.calibrate(probe, "flat")
        self.assertIn("its bytes do not grow with the density", str(caught.exception))


class TargetsTest(unittest.TestCase):
    def curve(self, *accuracies):
        return [{"step": i, "elapsed_s": float(i), "test_accuracy": a} for i, a in enumerate(accuracies)]

    def test_dense_sets_the_target_and_times_are_to_its_first_crossing(self):
        curves = {"dense_allreduce": self.curve(0.5, 0.80, 0.85), "sketch_ps": self.curve(0.4, 0.84, 0.86),
                  "spardl": self.curve(0.3, 0.5, 0.6)}
        target, basis = targets.target_of(curves, set())
        self.assertAlmostEqual(target, 0.84)
        self.assertIn("dense_allreduce's final accuracy on the curve (85.00%)", basis)
        self.assertEqual(targets.time_to(curves["sketch_ps"], target), 1.0)
        self.assertEqual(targets.time_to(curves["dense_allreduce"], target), 2.0)
        self.assertIsNone(targets.time_to(curves["spardl"], target))

    def test_without_dense_the_best_run_sets_it(self):
        curves = {"dense_allreduce": self.curve(0.5, float("nan")), "a": self.curve(0.7), "b": self.curve(0.9)}
        target, basis = targets.target_of(curves, {"dense_allreduce"})
        self.assertAlmostEqual(target, 0.89)
        self.assertIn("dense_allreduce diverged: the best final accuracy on the curve (90.00%) minus one point (b)",
                      basis)
        self.assertEqual(targets.target_of({}, set()), (None, ""))

    def test_a_loss_target_is_dense_plus_two_percent_and_reached_from_above(self):
        curves = {name: [{"step": i, "elapsed_s": float(i), "test_accuracy": 0.3, "test_loss": v}
                         for i, v in enumerate(losses)]
                  for name, losses in (("dense_allreduce", (3.0, 2.2, 2.0)), ("sketch_ps", (3.1, 2.03, 1.9)),
                                       ("spardl", (3.5, 2.5, 2.3)))}
        target, basis = targets.target_of(curves, set(), metric=targets.LOSS)
        self.assertAlmostEqual(target, 2.04)
        self.assertIn("final validation loss on the curve (2.0000) plus 2%", basis)
        self.assertEqual(targets.time_to(curves["sketch_ps"], target, targets.LOSS), 1.0)
        self.assertEqual(targets.time_to(curves["dense_allreduce"], target, targets.LOSS), 2.0)
        self.assertIsNone(targets.time_to(curves["spardl"], target, targets.LOSS))
        # Without dense the lowest loss sets it.
        target, basis = targets.target_of(curves, {"dense_allreduce"}, metric=targets.LOSS)
        self.assertAlmostEqual(target, 1.9 * 1.02)
        self.assertIn("(sketch_ps)", basis)


class ClusterReportTest(unittest.TestCase):
    def test_a_launch_folder_gives_runs_targets_and_shard_loads(self):
        out = tempfile.mkdtemp()
        for scheme, curve, diverged in (("dense_allreduce", [0.6, 0.8], None),
                                        ("sketch_ps", [0.5, 0.795], None),
                                        ("spardl", [0.2], {"step": 7, "group": 0, "worker": "worker-1",
                                                           "what": "gradient", "message": "NaN"})):
            os.makedirs(os.path.join(out, scheme))
            for w in range(2):
                summary = {"compressor": "dense", "final_test_accuracy": curve[-1], "mean_step_s": 0.01,
                           "bytes_sent_per_step": 1000.0, "bytes_received_per_step": 900.0,
                           "compression_ratio": 1.0, "wall_s": 3.0, "steps": 10, "diverged": diverged,
                           "curve": [{"step": 5 * i, "elapsed_s": 1.5 * i, "test_accuracy": a, "bytes_sent": i}
                                     for i, a in enumerate(curve)]}
                with open(os.path.join(out, scheme, f"summary{w}.json"), "w") as f:
                    json.dump(summary, f)
        with open(os.path.join(out, "sketch_ps", "server0.log"), "w") as f:
            f.write("shard 0: groups 0,2; listening on 127.0.0.1:1\n"
                    "stopped after 10 rounds of 2 groups; 20 pushes, bytes in 20480, bytes out 10240, decode 0.05 s\n")
        runs, curves, target, basis = cluster_report.collect(out, 2, False, ["dense_allreduce", "sketch_ps", "spardl"])
        self.assertAlmostEqual(target, 0.79)
        by = {r["scheme"]: r for r in runs}
        self.assertEqual(by["dense_allreduce"]["time_to_target_s"], 1.5)
        self.assertEqual(by["sketch_ps"]["time_to_target_s"], 1.5)
        self.assertIsNone(by["spardl"]["final_test_accuracy"])
        self.assertEqual(by["spardl"]["diverged"]["step"], 7)
        self.assertEqual(by["sketch_ps"]["shards"][0]["bytes_in_per_step"], 2048.0)
        self.assertEqual(len(curves), 5)
        with self.assertRaises(FileNotFoundError):
            cluster_report.collect(out, 2, False, ["gtopk"])

    def test_a_language_models_launch_is_judged_by_its_validation_loss(self):
        out = tempfile.mkdtemp()
        for scheme, losses in (("dense_allreduce", [3.0, 2.0]), ("sketch_allreduce", [3.2, 2.1])):
            os.makedirs(os.path.join(out, scheme))
            summary = {"compressor": "dense", "optimizer": "adamw:beta1=0.9,beta2=0.95,eps=1e-08,weight_decay=0.1",
                       "quality_metric": "test_loss", "final_test_accuracy": 0.4, "final_test_loss": losses[-1],
                       "mean_step_s": 0.01, "bytes_sent_per_step": 1000.0, "bytes_received_per_step": 900.0,
                       "compression_ratio": 1.0, "wall_s": 3.0, "steps": 10, "diverged": None,
                       "curve": [{"step": 5 * i, "elapsed_s": 1.5 * i, "test_accuracy": 0.4, "test_loss": v,
                                  "bytes_sent": i} for i, v in enumerate(losses)]}
            with open(os.path.join(out, scheme, "summary0.json"), "w") as f:
                json.dump(summary, f)
        runs, curves, target, basis = cluster_report.collect(out, 1, True, ["dense_allreduce", "sketch_allreduce"])
        self.assertAlmostEqual(target, 2.04)
        by = {r["scheme"]: r for r in runs}
        self.assertEqual(by["dense_allreduce"]["time_to_target_s"], 1.5)
        self.assertIsNone(by["sketch_allreduce"]["time_to_target_s"])
        self.assertEqual(by["sketch_allreduce"]["final_test_loss"], 2.1)
        self.assertEqual(by["sketch_allreduce"]["quality_metric"], "test_loss")
        self.assertTrue(by["dense_allreduce"]["optimizer"].startswith("adamw:"))
        cluster_report.write(out, 1, True, "none", ["dense_allreduce", "sketch_allreduce"], runs, curves, target,
                             basis)
        with open(os.path.join(out, "comparison.json")) as f:
            self.assertAlmostEqual(json.load(f)["target"]["test_loss"], 2.04)


class ReusingRunnerTest(unittest.TestCase):
    def test_an_output_is_reused_only_when_made_by_the_same_command(self):
        out = os.path.join(tempfile.mkdtemp(), "run.out")
        runner = ReusingRunner()
        cmd = [sys.executable, "-c", "print('summary {\"steps\": 3}')"]
        self.assertEqual(runner.run(out, cmd), {"steps": 3})
        self.assertEqual(runner.run(out, cmd), {"steps": 3})
        self.assertEqual((runner.ran, runner.reused), (1, 1))
        with self.assertRaises(StaleOutput):
            runner.run(out, cmd[:-1] + ["print('summary {\"steps\": 4}')"])
        self.assertEqual(ReusingRunner(replace_stale=True).run(out, cmd[:-1] + ["print('summary {\"steps\": 4}')"]),
                         {"steps": 4})
        with self.assertRaises(StudyError):
            runner.run(os.path.join(os.path.dirname(out), "bad.out"), [sys.executable, "-c", "raise SystemExit(1)"])


class DigitCheckTest(unittest.TestCase):
    def test_every_run_has_its_own_name_and_a_registry_scheme(self):
        reg = registry.load(WORKER)
        plan = digit_check.runs(reg.names())
        names = [r[0] for r in plan]
        self.assertEqual(len(names), len(set(names)))
        for name, model, workers, examples, scheme, flags in plan:
            reg.get(scheme)
            self.assertIn(model, ("mlp", "cnn"), name)
        mlp_at_four = {scheme for name, model, workers, _, scheme, flags in plan
                       if model == "mlp" and workers == 4 and not flags}
        self.assertEqual(mlp_at_four, set(reg.names()), "every scheme runs at its default on the MLP")

    def test_a_run_that_moved_is_named_with_what_moved(self):
        ref = os.path.join(tempfile.mkdtemp(), "ref.csv")
        row = {"name": "mlp_gtopk", "model": "mlp", "workers": 4, "scheme": "gtopk", "flags": "",
               "test_accuracy": "0.4611", "test_loss": "1.745760", "train_loss": "2.135912",
               "sent_bytes_per_step": "56451.0"}
        with open(ref, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=digit_check.FIELDS)
            w.writeheader()
            w.writerow(row)
        self.assertEqual(digit_check.compare([row], ref), ([], []))
        moved = dict(row, test_loss="1.745761")
        self.assertEqual(digit_check.compare([moved, dict(row, name="new")], ref),
                         (["mlp_gtopk: test_loss 1.745760 -> 1.745761"], ["new"]))


if __name__ == "__main__":
    WORKER = os.path.abspath(sys.argv.pop(1))
    unittest.main()
