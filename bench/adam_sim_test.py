"""bench/adam_sim.py against simple references: the DCT basis, the Top-k selection, and one worker at density 1
(every coordinate sent) against torch.optim.AdamW, the recipe's placement reducing to AdamW exactly there."""
import contextlib
import io
import os
import sys
import tempfile
import unittest

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import adam_sim  # noqa: E402


class AdamSimTest(unittest.TestCase):
    def test_the_dct_basis_is_orthonormal_and_its_first_row_is_constant(self):
        for n in (1, 2, 7, 64):
            basis = adam_sim.dct_basis(n).double()
            torch.testing.assert_close(basis @ basis.T, torch.eye(n, dtype=torch.float64), atol=1e-6, rtol=0)
            torch.testing.assert_close(basis[0], torch.full((n,), n ** -0.5, dtype=torch.float64), atol=1e-7, rtol=0)

    def test_keep_largest_keeps_the_k_largest_magnitudes_as_a_sort_does(self):
        generator = torch.Generator().manual_seed(7)
        for n in (1, 5, 64, 1000):
            x = torch.randn(n, generator=generator)
            for k in (1, max(1, n // 3), n, n + 4):
                kept = adam_sim.keep_largest(x, k)
                order = x.abs().argsort(descending=True)
                expected = torch.zeros_like(x)
                expected[order[:k]] = x[order[:k]]
                torch.testing.assert_close(kept, expected, atol=0, rtol=0)

    def _run(self, recipe, argv):
        args = adam_sim.parse_args(["--out=/unused", "--workers=1", "--train_examples=24", "--batch_size=8",
                                    "--warmup_steps=1"] + argv)
        windows = torch.randint(0, 256, (24, 65), generator=torch.Generator().manual_seed(3))
        return adam_sim.run(args, recipe, 5, windows, windows[:8])

    def test_one_worker_sending_every_coordinate_is_adamw(self):
        dense = self._run("dense", [])
        for recipe in ("topk", "topk_per_tensor", "topk_small", "topk_embed", "topk_small_embed"):
            sent = self._run(recipe, ["--density=1"])
            self.assertEqual(sent["steps"], 3)
            self.assertAlmostEqual(sent["validation_loss"], dense["validation_loss"], places=3, msg=recipe)
        # A compressing recipe does move elsewhere: the test can tell the two apart.
        self.assertNotAlmostEqual(self._run("sign", [])["validation_loss"], dense["validation_loss"], places=3)

    def test_bytes_count_what_each_recipe_sends(self):
        n = sum(p.numel() for p in adam_sim.pytorch_ddp.CharTransformer().parameters())
        topk = self._run("topk", ["--density=0.01"])
        self.assertEqual(topk["sent_bytes_per_step"], 8.0 * round(0.01 * n))
        embed = adam_sim.pytorch_ddp.CharTransformer()
        embedding = embed.position_embedding.numel() + embed.token_embedding.weight.numel()
        exact = self._run("topk_embed", ["--density=0.01"])
        self.assertEqual(exact["sent_bytes_per_step"], 8.0 * round(0.01 * n) + 4.0 * embedding)
        own = self._run("topk_embed", ["--density=0.01", "--embedding_density=0.1"])
        self.assertEqual(own["sent_bytes_per_step"], 8.0 * (round(0.01 * n) + round(0.1 * embedding)))
        token = self._run("topk_embed", ["--density=0.01", "--embeddings=token"])
        self.assertEqual(token["sent_bytes_per_step"],
                         8.0 * round(0.01 * n) + 4.0 * embed.token_embedding.weight.numel())
        demo = self._run("demo", ["--demo_topk=4"])
        self.assertEqual(demo["sent_bytes_per_step"], 5.0 * 4 * -(-n // 64))
        self.assertAlmostEqual(demo["compression_ratio"], 4.0 * n / demo["sent_bytes_per_step"], places=2)

    def test_bad_flags_are_refused_by_name(self):
        for argv, message in ((["--recipes=topk,adam"], "unknown recipe 'adam'"),
                              (["--seeds=1,x"], "--seeds must be comma-separated integers"),
                              (["--density=0"], "--density must be in (0, 1]"),
                              (["--embedding_density=1.5"], "--embedding_density must be in (0, 1]; got 1.5"),
                              (["--demo_topk=65"], "--demo_topk must be <= 64"),
                              (["--workers=0"], "--workers must be >= 1"),
                              (["--embeddings=head"], "--embeddings: invalid choice: 'head'"),
                              (["--learning_rate=0"], "--learning_rate must be a finite number > 0; got 0.0"),
                              (["--weight_decay=nan"], "--weight_decay must be a finite number >= 0; got nan"),
                              (["--beta2=1"], "--beta2 must be in [0, 1); got 1.0"),
                              (["--demo_beta=-0.1"], "--demo_beta must be in [0, 1); got -0.1"),
                              (["--train_examples=8", "--workers=2"], "every worker one batch")):
            stderr = io.StringIO()
            with self.assertRaises(SystemExit), contextlib.redirect_stderr(stderr):
                adam_sim.parse_args(["--out=/unused"] + argv)
            self.assertIn(message, stderr.getvalue())

    def test_main_writes_one_row_a_run(self):
        with tempfile.TemporaryDirectory() as out:
            with contextlib.redirect_stdout(io.StringIO()):
                adam_sim.main([f"--out={out}", "--recipes=dense,topk", "--workers=1", "--train_examples=16",
                               "--validation_examples=4", "--warmup_steps=1"])
            with open(os.path.join(out, "results.csv")) as f:
                lines = f.read().splitlines()
            self.assertEqual(lines[0].split(","), adam_sim.COLUMNS)
            self.assertEqual([line.split(",")[0] for line in lines[1:]], ["dense", "topk"])
            # A results.csv of other columns is refused, not appended to.
            with open(os.path.join(out, "results.csv"), "w") as f:
                f.write("recipe,workers,seed\n")
            with self.assertRaises(SystemExit) as refused, contextlib.redirect_stdout(io.StringIO()):
                adam_sim.main([f"--out={out}", "--recipes=dense", "--workers=1", "--train_examples=16"])
            self.assertIn("has the columns recipe,workers,seed", str(refused.exception))


if __name__ == "__main__":
    unittest.main()
