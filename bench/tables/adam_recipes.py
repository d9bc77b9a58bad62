"""Tables of bench/results/adam_recipes/ (bench/adam_sim.py: the char_lm transformer with AdamW, W simulated
workers, Adam recipes against the mean gradient into AdamW)."""
from statistics import mean

from tables.common import markdown, study_rows, value, where

# The rows of the table: a recipe; Top-k's density, the embeddings sent apart and their density where it takes
# them; what a worker sends.
RECIPES = [
    ("topk", "0.01", "", "", "Top-k (1%) of each worker's Adam update under error feedback (the worker's and the "
     "hook's placement)"),
    ("topk", "0.0575", "", "", "the same at 5.75%, `topk_small_embed`'s bytes"),
    ("topk_per_tensor", "0.01", "", "", "Top-k (1%) of each tensor"),
    ("topk_small", "0.01", "", "", "Top-k (1%), the 1-D tensors (biases, LayerNorms) sent exactly"),
    ("topk_embed", "0.01", "both", "1.0", "Top-k (1%), both embeddings sent exactly"),
    ("topk_embed", "0.01", "token", "1.0", "Top-k (1%), the token embedding sent exactly"),
    ("topk_embed", "0.01", "position", "1.0", "Top-k (1%), the position embedding sent exactly"),
    ("topk_embed", "0.01", "both", "0.1", "Top-k (1%), the embeddings' own Top-k (10%)"),
    ("topk_embed", "0.003", "both", "1.0", "Top-k (0.3%), both embeddings sent exactly"),
    ("topk_small_embed", "0.01", "both", "1.0", "Top-k (1%), the 1-D tensors and both embeddings sent exactly"),
    ("sign", "", "", "", "each worker's Adam update as sign times a scale a tensor, under error feedback (1 bit)"),
    ("demo", "", "", "", "decoupled momentum (DeMo): 4 of each 64-element chunk's DCT, the sign of their mean"),
]


def rows():
    return study_rows(__file__)


def _gaps(rows, workers, recipe, density, embeddings, embedding_density):
    """{seed: (the run's validation loss over dense's of the same seed, minus 1), ratio}."""
    dense = {r["seed"]: value(r, "validation_loss") for r in where(rows, workers=workers, recipe="dense")}
    found = [r for r in where(rows, workers=workers, recipe=recipe, density=density, embeddings=embeddings,
                              embedding_density=embedding_density) if r["seed"] in dense]
    return {r["seed"]: (value(r, "validation_loss") / dense[r["seed"]] - 1, value(r, "compression_ratio"))
            for r in found}


def table_recipes(rows):
    """docs/BENCHMARKS.md "The transformer with AdamW and SGD": each recipe's final validation loss over dense
    AdamW's of the same seed (the mean gap in percent, each seed's under it) at each simulated W, and the ratio (the dense float32 gradient's bytes over a worker's sent bytes)."""
    workers = sorted({r["workers"] for r in rows}, key=int)
    body = []
    for recipe, density, embeddings, embedding_density, what in RECIPES:
        cells, ratios = [], []
        for w in workers:
            gaps = _gaps(rows, w, recipe, density, embeddings, embedding_density)
            if not gaps:
                cells.append("")
                continue
            seeds = sorted(gaps, key=int)
            cells.append(f"{100 * mean(g for g, _ in gaps.values()):+.1f}% <br> "
                         + " / ".join(f"{100 * gaps[s][0]:+.1f}" for s in seeds))
            ratios.extend(r for _, r in gaps.values())
        if not ratios:
            continue
        body.append([f"`{recipe}`", what] + cells + [f"{mean(ratios):.1f}x"])
    return markdown(["recipe", "what a worker sends", *[f"{w} W" for w in workers], "ratio (sent)"], body,
                    align=["l", "l"] + ["r"] * (len(workers) + 1))


TABLES = {"recipes": table_recipes}
