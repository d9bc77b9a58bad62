"""Tests of the alpha-beta scale model against hand-computed cases."""
import math
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import scale_model as sm  # noqa: E402

LINK = sm.Link(alpha_s=1e-3, beta_s_per_byte=1e-6)


class TrafficTest(unittest.TestCase):
    def test_ring_allreduce(self):
        # W = 4: 6 messages, 1.5 P bytes on each link.
        self.assertAlmostEqual(sm.comm_seconds("dense_allreduce", 4, 1, 1000, 0, LINK), 6e-3 + 1.5e-3)
        self.assertAlmostEqual(sm.comm_seconds("sketch_allreduce", 4, 1, 1000, 0, LINK), 6e-3 + 1.5e-3)

    def test_nccl_allreduce_takes_the_tree_when_latency_dominates(self):
        ring = sm.allreduce_seconds(256, 1000, LINK, "ring")
        nccl = sm.allreduce_seconds(256, 1000, LINK, "nccl")
        self.assertAlmostEqual(nccl, 2 * 8 * 1e-3 + 2 * 1000 * 1e-6)
        self.assertLess(nccl, ring)
        # Bandwidth-bound: the ring's 2(W-1)/W P beats the tree's 2 P.
        big = sm.Link(1e-9, 1e-6)
        self.assertAlmostEqual(sm.allreduce_seconds(4, 1e6, big, "nccl"), sm.allreduce_seconds(4, 1e6, big, "ring"))
        with self.assertRaises(ValueError):
            sm.allreduce_seconds(4, 1, LINK, "bcube")

    def test_allgather_grows_with_workers_and_gtopk_with_log(self):
        self.assertAlmostEqual(sm.comm_seconds("topk_allgather", 8, 1, 100, 0, LINK), 7e-3 + 700e-6)
        self.assertAlmostEqual(sm.comm_seconds("gtopk", 8, 1, 100, 0, LINK), 6 * (1e-3 + 100e-6))
        self.assertAlmostEqual(sm.comm_seconds("gtopk", 5, 1, 100, 0, LINK), 6 * (1e-3 + 100e-6))  # ceil(log2 5)

    def test_parameter_server_is_bound_by_the_shard_link(self):
        # 8 workers on 2 shards: a group's 8 pushes and answers cross one shard's link, groups alternate shards.
        self.assertAlmostEqual(sm.comm_seconds("sketch_ps", 8, 2, 100, 20, LINK), 2e-3 + 4 * 120e-6)
        # More shards than workers: each worker's own link bounds it.
        self.assertAlmostEqual(sm.comm_seconds("topk_ps", 2, 4, 100, 20, LINK), 2e-3 + 120e-6)

    def test_one_worker_sends_nothing_and_unknown_schemes_are_refused(self):
        self.assertEqual(sm.comm_seconds("dense_allreduce", 1, 1, 1e9, 0, LINK), 0.0)
        with self.assertRaises(ValueError):
            sm.comm_seconds("magic", 4, 1, 1, 1, LINK)


class SpecTest(unittest.TestCase):
    def test_payload_bytes(self):
        self.assertEqual(sm.payload_bytes_per_element("dense"), 4.0)
        self.assertAlmostEqual(sm.payload_bytes_per_element("count_sketch:density=0.02,rows=1,width=5"), 0.4)
        self.assertAlmostEqual(sm.payload_bytes_per_element("topk:density=0.01"), 0.08)
        self.assertAlmostEqual(sm.answer_bytes_per_element("count_sketch:density=0.001,rows=5,width=10"), 0.008)

    def test_bad_specs_name_the_problem(self):
        for spec, needle in (("topk", "no density"), ("topk:density", "not key=value"),
                             ("topk:density=x", "not a number")):
            with self.assertRaises(ValueError) as e:
                sm.payload_bytes_per_element(spec)
            self.assertIn(needle, str(e.exception))


class SimulateStepTest(unittest.TestCase):
    def test_two_groups_by_hand(self):
        # Layers of 1000 and 3000 elements, 1 ns per element: ready at 21 us and 20+1+20+3 = 44 us.
        sizes, ns = [1000, 3000], 1.0
        link = sm.Link(0.0, 1e-9)
        costs = sm.Costs(compress=(0.0, 1e-9), decode=(0.0, 2e-9))
        # dense_allreduce W=2: payload 4 B/element, comm = 4n * 1e-9.
        step, parts = sm.simulate_step(sizes, [1, 2], "dense_allreduce", 2, 1, "dense", link, costs, ns)
        g1_end = 21e-6 + 1e-6 + 4e-6 + 2e-6             # ready, compress, comm, decode
        g2_end = max(44e-6, g1_end) + 3e-6 + 12e-6 + 6e-6
        self.assertAlmostEqual(step, g2_end)
        self.assertAlmostEqual(parts["communicate"], 16e-6)
        self.assertAlmostEqual(parts["backward"], 44e-6)

    def test_compress_on_device_delays_the_backward(self):
        sizes = [1000, 3000]
        link = sm.Link(0.0, 1e-9)
        costs = sm.Costs(compress=(10e-6, 0.0))
        step, parts = sm.simulate_step(sizes, [1, 2], "dense_allreduce", 2, 1, "dense", link, costs, 1.0,
                                       compress_on_device=True)
        # Group 1 compresses 21..31 us, layer 2 runs 31..54 us, its compress to 64 us, then 12 us of comm.
        self.assertAlmostEqual(step, 64e-6 + 12e-6)
        self.assertAlmostEqual(parts["backward"], 44e-6)

    def test_parameter_server_pushes_overlap_the_next_compress(self):
        sizes = [1000, 1000]
        link = sm.Link(0.0, 1e-9)
        costs = sm.Costs(compress=(0.0, 10e-9))
        # dense_ps W=2 S=1: a group's comm = 2 * (4000 + 4000) ns = 16 us; compress 10 us per group.
        step, _ = sm.simulate_step(sizes, [1, 2], "dense_ps", 2, 1, "dense", link, costs, 1.0)
        # Thread: g1 compress 21..31, g2 ready at 42, compress 42..52. Network: g1 31..47, g2 52..68.
        self.assertAlmostEqual(step, 68e-6)
        # The same groups on an allreduce wait for each exchange: g1 21..31..35, g2 42..52..56.
        step, _ = sm.simulate_step(sizes, [1, 2], "dense_allreduce", 2, 1, "dense", link, costs, 1.0)
        self.assertAlmostEqual(step, 56e-6)

    def test_groups_must_tile_the_layers(self):
        for ends in ([], [1], [2, 1, 3], [1, 1, 3], [4]):
            with self.assertRaises(ValueError):
                sm.simulate_step([1, 2, 3], ends, "dense_allreduce", 2, 1, "dense", LINK, sm.Costs(), 1.0)

    def test_fusion_saves_the_per_group_latency(self):
        sizes = [1000] * 100
        fused, _ = sm.simulate_step(sizes, [100], "sketch_allreduce", 8, 1, "count_sketch:density=0.01,rows=1,width=5",
                                    LINK, sm.Costs(), 1.0)
        per_layer, _ = sm.simulate_step(sizes, sm.per_layer_ends(sizes), "sketch_allreduce", 8, 1,
                                        "count_sketch:density=0.01,rows=1,width=5", LINK, sm.Costs(), 1.0)
        # Fused: 14 ms of latency + 35 ms of bytes; per layer: 100 x (14 ms + 0.35 ms).
        self.assertAlmostEqual(fused, 100 * 21e-6 + 14e-3 + 35e-3, places=6)
        self.assertAlmostEqual(per_layer, 21e-6 + 100 * (14e-3 + 0.35e-3), places=6)


class FitTest(unittest.TestCase):
    def test_recovers_a_line(self):
        a, b, r2 = sm.fit_line([1, 2, 3, 4], [3.5, 5.5, 7.5, 9.5])
        self.assertAlmostEqual(a, 1.5)
        self.assertAlmostEqual(b, 2.0)
        self.assertAlmostEqual(r2, 1.0)

    def test_needs_two_distinct_points(self):
        with self.assertRaises(ValueError):
            sm.fit_line([1, 1], [2, 3])

    def test_links_are_checked(self):
        with self.assertRaises(ValueError):
            sm.Link(-1.0, 1e-9)
        with self.assertRaises(ValueError):
            sm.Link(0.0, 0.0)
        self.assertTrue(math.isclose(sm.Link.of_rate(25, 0).beta, 8e-9 / 25))


if __name__ == "__main__":
    unittest.main()
