#!/usr/bin/python3
"""A single-process simulator of W workers training the char_lm transformer with AdamW under a
compressor, for ruling Adam recipes in or out fast (issue 69's candidates: leaving the small
tensors uncompressed, decoupled momentum, a 1-bit update).

The W workers' gradients are computed one after another in one process at the same parameters
(examples/pytorch_ddp.py's CharTransformer and corpus: one pass over 19,200 windows, batch 8 a
worker, each worker a W-th of the windows in a shuffled order; AdamW lr 2e-3, betas
0.9/0.95, weight decay 0.1, 30 warm-up steps then a cosine to 0), then combined by a recipe:

  dense         the mean gradient into AdamW (DDP's allreduce).
  topk          Adam's moments of each worker's own gradients; each worker adds the step's update
                (its Adam direction times the rate) to its residual and sends the residual's k
                largest (--density of the model, one Top-k over the whole flattened model); the
                mean of what was sent is applied with AdamW's decoupled decay. The C++ worker's
                and the hook's placement (common/adam_moments.h), with Top-k over the whole model
                where they take it per group.
  topk_per_tensor  topk, but each tensor's own k largest (--density of the tensor, 1 at least).
  topk_small    topk, but every 1-D tensor (biases, LayerNorms) is sent exactly each step (no
                residual), the Top-k taken over the rest with the same k.
  topk_embed    topk, but the two embeddings (token and position) are sent exactly each step.
  topk_small_embed  both: the 1-D tensors and the embeddings sent exactly.
                With --embedding_density < 1 the two embed recipes send the embeddings' own k largest
                (that share of their coordinates, under error feedback) instead of all of them;
                --embeddings=token or position: that embedding only.
  sign          each worker's residual as sign times one scale a tensor (its mean magnitude),
                under error feedback: 1 bit a coordinate (1-bit Adam's kind of compression,
                without its frozen second moment).
  demo          decoupled momentum (DeMo, Peng et al. 2024): each worker keeps a momentum of its
                raw gradients (decay --demo_beta), sends the --demo_topk largest of each 64-element
                chunk's DCT and takes what it sent out of its momentum; the parameters move by
                the rate times the sign of the workers' mean decoded update (no Adam). A 1-D
                variant of the paper's chunking (there 2-D for matrices).

Bytes a worker sends a step: a sparse value with its index, 8 bytes (DeMo: 5, an index within a
chunk is one byte); a sign, 1 bit, and 4 bytes a tensor. The ratio is the dense float32
gradient's bytes over them. It is not the system: no fusion groups, no release cap, no
sketches; its figures say "simulator". Writes results.csv (one row a run) under --out and prints
each run's line, e.g.:

  /usr/bin/python3 bench/adam_sim.py --out=out/adam_sim --recipes=dense,topk,topk_small --seeds=1,2,3
"""
import argparse
import csv
import math
import os
import sys
import time

import torch
import torch.nn.functional as F

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.join(ROOT, "examples"))
sys.path.insert(0, os.path.join(ROOT, "python"))
import pytorch_ddp  # noqa: E402  (the model, the corpus and the schedule of the hook's example)

RECIPES = ("dense", "topk", "topk_per_tensor", "topk_small", "topk_embed", "topk_small_embed", "sign", "demo")
COLUMNS = ["recipe", "workers", "seed", "steps", "density", "embeddings", "embedding_density", "demo_topk",
           "validation_loss", "sent_bytes_per_step", "compression_ratio", "wall_s"]
CHUNK = 64
# --embeddings: the parameters each choice names.
EMBEDDINGS = {"both": ("position_embedding", "token_embedding.weight"), "token": ("token_embedding.weight",),
              "position": ("position_embedding",)}


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="folder of results.csv")
    parser.add_argument("--recipes", default="dense,topk", help=f"comma-separated of {', '.join(RECIPES)}")
    parser.add_argument("--seeds", default="1", help="comma-separated seeds")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--train_examples", type=int, default=19200)
    parser.add_argument("--validation_examples", type=int, default=2000)
    parser.add_argument("--batch_size", type=int, default=8)
    parser.add_argument("--learning_rate", type=float, default=2e-3)
    parser.add_argument("--beta2", type=float, default=0.95)
    parser.add_argument("--weight_decay", type=float, default=0.1)
    parser.add_argument("--warmup_steps", type=int, default=30)
    parser.add_argument("--density", type=float, default=0.01, help="Top-k's share of the model's coordinates")
    parser.add_argument("--embeddings", default="both", choices=sorted(EMBEDDINGS),
                        help="topk_embed, topk_small_embed: which embeddings")
    parser.add_argument("--embedding_density", type=float, default=1.0,
                        help="topk_embed, topk_small_embed: the embeddings' own Top-k share (1: sent exactly)")
    parser.add_argument("--demo_topk", type=int, default=4, help="DeMo: coefficients kept of each 64-element chunk")
    parser.add_argument("--demo_beta", type=float, default=0.999, help="DeMo: the momentum's decay")
    parser.add_argument("--demo_learning_rate", type=float, default=0,
                        help="DeMo: the sign step's peak rate (0: --learning_rate)")
    args = parser.parse_args(argv)
    args.recipes = args.recipes.split(",")
    for recipe in args.recipes:
        if recipe not in RECIPES:
            parser.error(f"--recipes: unknown recipe {recipe!r}; one of {', '.join(RECIPES)}")
    try:
        args.seeds = [int(s) for s in args.seeds.split(",")]
    except ValueError:
        parser.error(f"--seeds must be comma-separated integers; got {args.seeds!r}")
    for name in ("workers", "train_examples", "validation_examples", "batch_size", "demo_topk"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be >= 1; got {getattr(args, name)}")
    for name in ("learning_rate", "demo_learning_rate", "weight_decay"):
        value = getattr(args, name)
        if not (math.isfinite(value) and value >= 0) or (name == "learning_rate" and value == 0):
            parser.error(f"--{name} must be a finite number {'> 0' if name == 'learning_rate' else '>= 0'}; "
                         f"got {value}")
    for name in ("beta2", "demo_beta"):
        if not 0 <= getattr(args, name) < 1:
            parser.error(f"--{name} must be in [0, 1); got {getattr(args, name)}")
    for name in ("density", "embedding_density"):
        if not 0 < getattr(args, name) <= 1:
            parser.error(f"--{name} must be in (0, 1]; got {getattr(args, name)}")
    if args.demo_topk > CHUNK:
        parser.error(f"--demo_topk must be <= {CHUNK}; got {args.demo_topk}")
    if args.train_examples < args.workers * args.batch_size:
        parser.error("--train_examples must give every worker one batch at least")
    return args


def dct_basis(n):
    """The orthonormal DCT-II matrix [n, n]: coefficients = x @ basis.T, x = coefficients @ basis."""
    k = torch.arange(n, dtype=torch.float64).unsqueeze(1)
    i = torch.arange(n, dtype=torch.float64).unsqueeze(0)
    basis = torch.cos(math.pi * (2 * i + 1) * k / (2 * n)) * math.sqrt(2.0 / n)
    basis[0] /= math.sqrt(2.0)
    return basis.float()


def keep_largest(x, k):
    """x with all but its k largest-magnitude elements zeroed (x 1-D)."""
    if k >= x.numel():
        return x.clone()
    out = torch.zeros_like(x)
    index = x.abs().topk(k, sorted=False).indices
    out[index] = x[index]
    return out


class Simulation:
    """The model, the workers' state and one recipe's combine step."""

    def __init__(self, args, recipe, seed):
        self.args, self.recipe = args, recipe
        torch.manual_seed(seed)
        self.model = pytorch_ddp.CharTransformer()
        self.params = list(self.model.parameters())
        self.names = [name for name, _ in self.model.named_parameters()]
        self.sizes = [p.numel() for p in self.params]
        self.n = sum(self.sizes)
        def mask(chosen):
            """The flat model's coordinates of the tensors chosen(name, parameter) names."""
            return torch.cat([torch.full((p.numel(),), bool(chosen(name, p)))
                              for name, p in zip(self.names, self.params)])

        # Coordinates sent exactly every step (topk_small, topk_embed, topk_small_embed).
        exact = mask(lambda name, p: recipe in ("topk_small", "topk_small_embed") and p.dim() == 1)
        embeddings = mask(lambda name, p: name in EMBEDDINGS[args.embeddings])
        # The embed recipes: the embeddings exact, or with their own Top-k (embedding_k > 0).
        self.embeddings = embeddings
        self.embedding_k = 0
        if recipe in ("topk_embed", "topk_small_embed"):
            if args.embedding_density < 1:
                self.embedding_k = max(1, round(args.embedding_density * int(embeddings.sum())))
            else:
                exact |= embeddings
        self.exact = exact
        self.k = max(1, round(args.density * self.n))
        self.tensor_k = [max(1, round(args.density * size)) for size in self.sizes]
        w = args.workers
        if recipe == "dense":
            self.optimizer = torch.optim.AdamW(self.params, lr=args.learning_rate, betas=(0.9, args.beta2),
                                               weight_decay=args.weight_decay)
        else:  # DeMo's momentum, or Adam's first moment
            self.m = [torch.zeros(self.n) for _ in range(w)]
        if recipe not in ("dense", "demo"):
            self.v = [torch.zeros(self.n) for _ in range(w)]
            self.residual = [torch.zeros(self.n) for _ in range(w)]
        if recipe == "demo":
            self.basis = dct_basis(CHUNK)
            self.padded = math.ceil(self.n / CHUNK) * CHUNK
        self.sent_bytes = self.bytes_per_step()

    def bytes_per_step(self):
        if self.recipe == "dense":
            return 4.0 * self.n
        if self.recipe == "topk_per_tensor":
            return 8.0 * sum(self.tensor_k)
        if self.recipe.startswith("topk"):
            return 8.0 * (self.k + self.embedding_k) + 4.0 * int(self.exact.sum())
        if self.recipe == "sign":
            return self.n / 8.0 + 4.0 * len(self.params)
        return 5.0 * self.args.demo_topk * (self.padded // CHUNK)

    def flat_grad(self):
        return torch.cat([p.grad.reshape(-1) for p in self.params])

    def step(self, grads, step, rate):
        """Applies the step from the workers' flat gradients `grads` at learning rate `rate`."""
        args = self.args
        if self.recipe == "dense":
            mean = torch.stack(grads).mean(0)
            for p, part in zip(self.params, mean.split(self.sizes)):
                p.grad = part.view_as(p).clone()
            for group in self.optimizer.param_groups:
                group["lr"] = rate
            self.optimizer.step()
            return
        if self.recipe == "demo":
            update = torch.zeros(self.n)
            for w, g in enumerate(grads):
                self.m[w].mul_(args.demo_beta).add_(g)
                chunks = F.pad(self.m[w], (0, self.padded - self.n)).view(-1, CHUNK)
                coefficients = chunks @ self.basis.T
                index = coefficients.abs().topk(args.demo_topk, dim=1).indices
                kept = torch.zeros_like(coefficients).scatter_(1, index, coefficients.gather(1, index))
                sent = (kept @ self.basis).reshape(-1)[:self.n]
                self.m[w].sub_(sent)
                update.add_(sent, alpha=1.0 / len(grads))
            demo_rate = rate * (args.demo_learning_rate / args.learning_rate if args.demo_learning_rate else 1.0)
            self.apply(update.sign().mul_(demo_rate), rate)
            return
        beta1, beta2, eps = 0.9, args.beta2, 1e-8
        bias1, bias2 = 1 - beta1 ** (step + 1), 1 - beta2 ** (step + 1)
        update = torch.zeros(self.n)
        for w, g in enumerate(grads):
            self.m[w].mul_(beta1).add_(g, alpha=1 - beta1)
            self.v[w].mul_(beta2).addcmul_(g, g, value=1 - beta2)
            direction = (self.m[w] / bias1) / ((self.v[w] / bias2).sqrt() + eps)
            e = self.residual[w]
            e.add_(direction, alpha=rate)
            if self.recipe == "sign":
                sent = torch.cat([part.sign() * part.abs().mean() for part in e.split(self.sizes)])
            elif self.recipe == "topk_per_tensor":
                sent = torch.cat([keep_largest(part, k) for part, k in zip(e.split(self.sizes), self.tensor_k)])
            else:
                zeros = torch.zeros_like(e)
                sent = torch.where(self.exact, e, zeros)
                selectable = ~self.exact
                if self.embedding_k:
                    selectable &= ~self.embeddings
                    sent.add_(keep_largest(torch.where(self.embeddings, e, zeros), self.embedding_k))
                sent.add_(keep_largest(torch.where(selectable, e, zeros), self.k))
            e.sub_(sent)
            update.add_(sent, alpha=1.0 / len(grads))
        self.apply(update, rate)

    def apply(self, update, rate):
        """p -= update + rate * weight_decay * p (AdamW's decoupled decay)."""
        with torch.no_grad():
            for p, part in zip(self.params, update.split(self.sizes)):
                p.mul_(1 - rate * self.args.weight_decay)
                p.sub_(part.view_as(p))


def run(args, recipe, seed, train, validation):
    start = time.time()
    simulation = Simulation(args, recipe, seed)
    model = simulation.model
    w, batch = args.workers, args.batch_size
    generator = torch.Generator().manual_seed(seed)
    order = torch.randperm(args.train_examples, generator=generator)
    shards = [order[r::w] for r in range(w)]
    steps = min(len(s) for s in shards) // batch
    inputs, targets = train[:, :-1], train[:, 1:]
    for step in range(steps):
        rate = args.learning_rate * pytorch_ddp.learning_rate_factor(step, steps, "cosine", args.warmup_steps)
        grads = []
        for r in range(w):
            index = shards[r][step * batch:(step + 1) * batch]
            model.zero_grad(set_to_none=True)
            pytorch_ddp.task_loss(model(inputs[index]), targets[index]).backward()
            grads.append(simulation.flat_grad())
        simulation.step(grads, step, rate)
    _, loss = pytorch_ddp.evaluate(model, validation[:, :-1], validation[:, 1:], batch=250)
    if not math.isfinite(loss):
        loss = float("nan")
    return {"recipe": recipe, "workers": w, "seed": seed, "steps": steps,
            "density": args.density if recipe.startswith("topk") else "",
            "embeddings": args.embeddings if recipe in ("topk_embed", "topk_small_embed") else "",
            "embedding_density": args.embedding_density if recipe in ("topk_embed", "topk_small_embed") else "",
            "demo_topk": args.demo_topk if recipe == "demo" else "",
            "validation_loss": round(loss, 4), "sent_bytes_per_step": round(simulation.sent_bytes, 1),
            "compression_ratio": round(4.0 * simulation.n / simulation.sent_bytes, 2),
            "wall_s": round(time.time() - start, 1)}


def main(argv=None):
    args = parse_args(argv)
    torch.set_num_threads(1)
    try:
        windows = pytorch_ddp.load_text(pytorch_ddp.FORTUNES_DIR, "train")
        validation = pytorch_ddp.load_text(pytorch_ddp.FORTUNES_DIR, "validation")[:args.validation_examples]
    except ValueError as e:
        sys.exit(f"adam_sim: {e}")
    if windows.shape[0] < args.train_examples:
        sys.exit(f"adam_sim: --train_examples {args.train_examples} is past the corpus's {windows.shape[0]} windows")
    train = windows[:args.train_examples]
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "results.csv")
    new = not os.path.exists(path) or os.path.getsize(path) == 0
    if not new:
        with open(path, newline="") as f:
            header = next(csv.reader(f), [])
        if header != COLUMNS:
            sys.exit(f"adam_sim: {path} has the columns {','.join(header)}, not this version's {','.join(COLUMNS)}: "
                     "write to another --out")
    with open(path, "a", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        if new:
            writer.writeheader()
        for seed in args.seeds:
            for recipe in args.recipes:
                row = run(args, recipe, seed, train, validation)
                writer.writerow(row)
                f.flush()
                print(" ".join(f"{k}={row[k]}" for k in COLUMNS), flush=True)


if __name__ == "__main__":
    main()
