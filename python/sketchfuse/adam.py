"""AdamW through the hook with Adam's moments on each rank (the C++ worker's default with Adam).

    import sketchfuse.torch as sft
    optimizer = sft.AdamW(ddp_model.parameters(), lr=2e-3, betas=(0.9, 0.95), weight_decay=0.1)
    state = sft.HookState("topk_allgather", optimizer=optimizer)
    ddp_model.register_comm_hook(state, sft.hook)
    # then as usual: loss.backward(); optimizer.step() (a scheduler may change each group's lr)

Handed this optimizer, the hook keeps Adam's first and second moments of each
rank's own gradients and hands the step's update, Adam's direction times the
parameter's current learning rate, to the compressor and its error feedback
(common/adam_moments.h's direction, element for element torch.optim.Adam's).
Error feedback thus keeps what was not sent in units of the parameters, as the
worker's residuals in units of the rate (--residual_in_rate_units): what
waited through the warm-up is applied at the rate of the steps that made it,
not at a later, larger one. After the backward pass each .grad holds the mean
of the decoded updates, and AdamW.step() applies it with AdamW's decoupled
weight decay: p -= update + lr * weight_decay * p. (So .grad is an update
there, not a gradient: clip the gradients before the hook, not after.)

Under error feedback a coordinate sent after k steps then moves by the k
updates it owes; Adam on a sparse aggregated gradient (torch.optim.AdamW
handed to the hook) sees one spike and k - 1 zeros and steps about sqrt(k)
times too short (docs/BENCHMARKS.md, "The transformer with AdamW and SGD").

One rank's second moment sees its own batch's noise, and so steps short where
the noise dominates: by default (second_moment="scaled") each parameter's is
used times the share of a rank's squared gradient that survives the averaging
over the ranks, estimated from count sketches the hook sums over the process
group (RankMoments); second_moment="rank" uses each rank's own.

With a scheme that does not compress (dense_allreduce, dense_bf16_allreduce)
the hook keeps the moments of the aggregated mean gradient instead, after the
exchange, so the run is torch.optim.AdamW's to rounding.
"""
import math
import zlib

import torch

__all__ = ["AdamW", "RankMoments", "SECOND_MOMENTS"]

# sketchfuse AdamW's second_moment choices (RankMoments's scaled).
SECOND_MOMENTS = ("scaled", "rank")


class AdamW(torch.optim.Optimizer):
    """AdamW whose moments the hook keeps: hand it to HookState(optimizer=) and step it as usual.

    lr, betas, eps and weight_decay mean what they mean for torch.optim.AdamW; the betas and eps must
    be the same in every param group (the hook keeps one set of moments per parameter); the hook reads
    each group's lr when it exchanges the step. step() applies the update in each .grad with the decay,
    and refuses to run before a HookState has taken the optimizer (without the hook .grad holds a
    gradient). second_moment: "scaled" (the default) or "rank" (see the module's note; with a
    compressing scheme and no dense warm-up, which freezes a dense second moment instead)."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, dense_warmup_steps=0,
                 second_moment=None):
        _check_hyperparameters(lr, betas, eps, weight_decay)
        if isinstance(dense_warmup_steps, bool) or not isinstance(dense_warmup_steps, int) or dense_warmup_steps < 0:
            raise ValueError(f"sketchfuse AdamW: dense_warmup_steps must be an integer >= 0; got {dense_warmup_steps!r}")
        if second_moment is not None and second_moment not in SECOND_MOMENTS:
            raise ValueError(f"sketchfuse AdamW: second_moment must be one of {', '.join(SECOND_MOMENTS)}; got "
                             f"{second_moment!r}")
        if second_moment is not None and dense_warmup_steps:
            raise ValueError(f"sketchfuse AdamW: second_moment={second_moment!r} with dense_warmup_steps "
                             f"{dense_warmup_steps}: after a dense warm-up the second moment is frozen")
        super().__init__(params, {"lr": lr, "betas": tuple(betas), "eps": eps, "weight_decay": weight_decay})
        # > 0: 1-bit Adam's recipe (see RankMoments): this many steps of dense AdamW on the mean gradient,
        # then the second moment frozen and the first kept on each rank. 0: both moments on each rank.
        self.dense_warmup_steps = dense_warmup_steps
        # With compression and no warm-up: "scaled" (each rank's second moment rescaled per parameter to the
        # mean gradient's size, see RankMoments) or "rank" (each rank's own). "frozen" after a warm-up.
        self.second_moment = "frozen" if dense_warmup_steps else (second_moment or "scaled")
        self.hook_state = None  # set by HookState(optimizer=self)

    def add_param_group(self, param_group):
        super().add_param_group(param_group)
        group = self.param_groups[-1]
        _check_hyperparameters(group["lr"], group["betas"], group["eps"], group["weight_decay"])
        first = self.param_groups[0]
        if (tuple(group["betas"]), group["eps"]) != (tuple(first["betas"]), first["eps"]):
            raise ValueError(f"sketchfuse AdamW: param group {len(self.param_groups) - 1} has betas "
                             f"{tuple(group['betas'])} and eps {group['eps']}; group 0 has {tuple(first['betas'])} and "
                             f"{first['eps']} (the hook keeps one set of moments: only lr and weight_decay may differ)")

    def hyperparameters(self):
        """(beta1, beta2, eps) of every param group."""
        beta1, beta2 = self.param_groups[0]["betas"]
        return float(beta1), float(beta2), float(self.param_groups[0]["eps"])

    @torch.no_grad()
    def step(self, closure=None):
        if self.hook_state is None:
            raise RuntimeError("sketchfuse AdamW steps the Adam directions a HookState computes: pass it to "
                               "sketchfuse.torch.HookState(..., optimizer=) and register that hook (without the "
                               "hook use torch.optim.AdamW)")
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            lr, decay = group["lr"], group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                if decay:
                    p.mul_(1.0 - lr * decay)
                p.sub_(p.grad)  # the hook's mean update: lr times Adam's direction
        return loss


def _check_hyperparameters(lr, betas, eps, weight_decay):
    try:
        beta1, beta2 = (float(b) for b in betas)
    except (TypeError, ValueError):
        raise ValueError(f"sketchfuse AdamW: betas must be two numbers; got {betas!r}") from None
    checks = (("lr", lr, lambda x: x >= 0), ("betas[0]", beta1, lambda x: 0 <= x < 1),
              ("betas[1]", beta2, lambda x: 0 <= x < 1), ("eps", eps, lambda x: x > 0),
              ("weight_decay", weight_decay, lambda x: x >= 0))
    for name, value, fits in checks:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                or not fits(value):
            raise ValueError(f"sketchfuse AdamW: {name} {value!r} is out of range")


class RankMoments:
    """Adam's moments per parameter key, and the direction they give (common/adam_moments.h):

        m = beta1 m + (1 - beta1) g;  v = beta2 v + (1 - beta2) g^2;  t += 1
        d = (m / (1 - beta1^t)) / (sqrt(v) / sqrt(1 - beta2^t) + eps)

    Kept per parameter (each with its own t), so DDP's rebuilt buckets and checkpoints keep them.

    With dense_warmup > 0 (1-bit Adam's recipe): while a parameter's t < dense_warmup the caller hands
    update() the MEAN gradient over the ranks (warming() says when), so the moments are dense AdamW's,
    alike on every rank; at t = dense_warmup the denominator sqrt(v) / sqrt(1 - beta2^t) + eps is frozen,
    and from then on only m moves, with this rank's gradients: the update is then linear in m, so the
    mean of the ranks' updates is the update of the mean first moment (the second moment of one rank's
    gradients overestimates the mean gradient's by the batch noise, and steps too short).

    With scaled=True (sketchfuse AdamW's second_moment="scaled", the default without a warm-up) each
    parameter's second moment is used times s = E||mean_r g_r||^2 / E[mean_r ||g_r||^2], the share of a
    rank's squared gradient that survives the averaging over the ranks (exponential averages with beta2's
    decay, clamped to [1 / world, 1]): v of one rank's gradients is E[g^2] = mu^2 + sigma^2, the mean
    gradient's mu^2 + sigma^2 / world, so per parameter it is rescaled to the mean gradient's size. The
    caller sums noise_summary() over the ranks (one allreduce of SKETCH_BUCKETS + 1 floats per parameter:
    a count sketch of the gradient, linear, whose squared norm estimates the mean gradient's, and the
    squared norm) and hands the sum to update()."""

    SKETCH_BUCKETS = 64

    def __init__(self, beta1, beta2, eps, dense_warmup=0, scaled=False, world=1):
        self.beta1, self.beta2, self.eps = beta1, beta2, eps
        self.dense_warmup = dense_warmup
        self.scaled = scaled and dense_warmup == 0
        self.world = world
        self.moments = {}  # key -> [m, v, t]
        self.frozen = {}  # key -> the denominator frozen after the dense warm-up
        self.noise = {}  # key -> [E||mean g||^2, E mean_r ||g_r||^2] (scaled)

    def warming(self, keys):
        """True while any of these parameters is in the dense warm-up (the caller averages first)."""
        return self.dense_warmup > 0 and any(key not in self.frozen for key in keys)

    def _ids(self, key, n, device):
        """Element i of parameter `key` goes to bucket ids[i] mod B with sign + below B, - from B (B =
        SKETCH_BUCKETS): the same on every rank, drawn anew each step (from a generator seeded by the key
        and the parameter's step), so the sketch's error on a gradient that changes slowly averages out
        over the steps instead of staying."""
        step = self.moments[key][2] if key in self.moments else 0
        generator = torch.Generator().manual_seed(zlib.crc32(f"{key}/{step}".encode()))
        return torch.randint(0, 2 * self.SKETCH_BUCKETS, (n,), generator=generator).to(device)

    def noise_summary(self, grad, pieces):
        """What the ranks sum for scaled: per piece, a count sketch of its gradient (SKETCH_BUCKETS floats)
        then its squared norm; one flat tensor on grad's device."""
        width = self.SKETCH_BUCKETS + 1
        out = torch.zeros(len(pieces) * width, dtype=torch.float32, device=grad.device)
        for i, (key, at, n, _) in enumerate(pieces):
            g = grad[at:at + n]
            signed = torch.zeros(2 * self.SKETCH_BUCKETS, dtype=torch.float32, device=grad.device)
            signed.index_add_(0, self._ids(key, n, grad.device), g)
            out[i * width:i * width + self.SKETCH_BUCKETS] = signed[:self.SKETCH_BUCKETS] - signed[self.SKETCH_BUCKETS:]
            out[i * width + self.SKETCH_BUCKETS] = g.pow(2).sum()
        return out

    def _scales(self, pieces, summed):
        """Each piece's second-moment scale after this step's summed noise_summary() (scaled)."""
        width = self.SKETCH_BUCKETS + 1
        fresh = summed is not None and bool(torch.isfinite(summed).all())
        if fresh:
            values = summed.detach().to("cpu", torch.float64).reshape(len(pieces), width) / self.world
            mean_norms = values[:, :self.SKETCH_BUCKETS].pow(2).sum(1).tolist()
            rank_norms = values[:, self.SKETCH_BUCKETS].tolist()
        scales = []
        for i, (key, _, _, _) in enumerate(pieces):
            entry = self.noise.setdefault(key, [0.0, 0.0])
            if fresh:  # a non-finite sum (some rank's gradient) moves nothing
                entry[0] = self.beta2 * entry[0] + (1.0 - self.beta2) * mean_norms[i]
                entry[1] = self.beta2 * entry[1] + (1.0 - self.beta2) * rank_norms[i]
            ratio = entry[0] / entry[1] if entry[1] > 0 else 1.0
            scales.append(min(1.0, max(1.0 / self.world, ratio)))
        return scales

    def update(self, grad, pieces, summed_noise=None):
        """Adam's update of the flat gradient `grad` whose parameter `key` is grad[at:at + n] for each
        (key, at, n, rate) of `pieces`: rate times Adam's direction, as a new tensor; the moments move on.
        summed_noise: with scaled, noise_summary(grad, pieces) summed over the ranks.
        A non-finite gradient leaves the moments as they were and returns `grad` itself (the hook's finite
        check then stops the step)."""
        if self.scaled and summed_noise is None:
            raise ValueError("sketchfuse hook: the scaled second moment needs the ranks' summed noise summary")
        if not torch.isfinite(grad).all():
            return grad
        for key, _, n, _ in pieces:  # checked before anything moves
            entry = self.moments.get(key)
            if entry is not None and entry[0].numel() != n:
                raise ValueError(f"sketchfuse hook: the saved Adam moments of parameter {key} have "
                                 f"{entry[0].numel()} elements; the parameter has {n} (a checkpoint of another model?)")
        scales = self._scales(pieces, summed_noise) if self.scaled else [1.0] * len(pieces)
        out = torch.empty_like(grad)
        for (key, at, n, rate), scale in zip(pieces, scales):
            g = grad[at:at + n]
            entry = self.moments.get(key)
            if entry is None:
                entry = self.moments[key] = [torch.zeros_like(g), torch.zeros_like(g), 0]
            elif entry[0].device != g.device:  # loaded on the CPU, used where the buckets are
                entry[0], entry[1] = entry[0].to(g.device), entry[1].to(g.device)
            m, v = entry[0], entry[1]
            entry[2] += 1
            t = entry[2]
            m.mul_(self.beta1).add_(g, alpha=1.0 - self.beta1)
            denominator = self.frozen.get(key)
            if denominator is None:
                v.mul_(self.beta2).addcmul_(g, g, value=1.0 - self.beta2)
                denominator = (v.sqrt() * math.sqrt(scale / (1.0 - self.beta2 ** t))).add_(self.eps)
                if self.dense_warmup > 0 and t >= self.dense_warmup:
                    self.frozen[key] = denominator
            elif denominator.device != g.device:
                denominator = self.frozen[key] = denominator.to(g.device)
            torch.div(m, denominator, out=out[at:at + n]).mul_(rate / (1.0 - self.beta1 ** t))
        return out

    def state_dict(self):
        out = {key: {"first": m.detach().cpu().clone(), "second": v.detach().cpu().clone(), "steps": t}
               for key, (m, v, t) in self.moments.items()}
        for key, denominator in self.frozen.items():
            out[key]["frozen_denominator"] = denominator.detach().cpu().clone()
        for key, (mean_norm, rank_norm) in self.noise.items():
            if key in out:
                out[key]["noise"] = [mean_norm, rank_norm]
        return out

    def load_state_dict(self, saved):
        """Replaces the moments with state_dict()'s; ValueError naming a misfit, and nothing changed."""
        if not isinstance(saved, dict):
            raise ValueError("sketchfuse hook: the saved Adam moments are not a dict")
        moments, frozen, noise = {}, {}, {}
        for key, entry in saved.items():
            try:
                m = torch.as_tensor(entry["first"], dtype=torch.float32).reshape(-1).clone()
                v = torch.as_tensor(entry["second"], dtype=torch.float32).reshape(-1).clone()
                t = entry["steps"]
            except (KeyError, TypeError, ValueError, RuntimeError) as e:
                raise ValueError(f"sketchfuse hook: saved Adam moments of parameter {key} are malformed ({e})") from None
            if isinstance(t, bool) or not isinstance(t, int) or t < 0:
                raise ValueError(f"sketchfuse hook: saved Adam step count of parameter {key} is {t!r}")
            if m.numel() != v.numel() or not torch.isfinite(m).all() or not torch.isfinite(v).all() \
                    or (v < 0).any():
                raise ValueError(f"sketchfuse hook: saved Adam moments of parameter {key} are not two finite "
                                 "vectors of one size with a second moment >= 0")
            moments[key] = [m, v, t]
            if entry.get("frozen_denominator") is not None:
                d = torch.as_tensor(entry["frozen_denominator"], dtype=torch.float32).reshape(-1).clone()
                if d.numel() != m.numel() or not torch.isfinite(d).all() or not (d > 0).all():
                    raise ValueError(f"sketchfuse hook: saved frozen Adam denominator of parameter {key} is not a "
                                     "finite vector > 0 of the moments' size")
                frozen[key] = d
            elif self.dense_warmup > 0 and t >= self.dense_warmup:
                raise ValueError(f"sketchfuse hook: saved Adam moments of parameter {key} are past the dense "
                                 f"warm-up ({t} >= {self.dense_warmup} steps) without a frozen denominator")
            if entry.get("noise") is not None:
                pair = entry["noise"]
                if (not isinstance(pair, (list, tuple)) or len(pair) != 2
                        or not all(not isinstance(x, bool) and isinstance(x, (int, float)) and math.isfinite(x)
                                   and x >= 0 for x in pair)):
                    raise ValueError(f"sketchfuse hook: saved second-moment noise of parameter {key} is not two "
                                     "finite numbers >= 0")
                noise[key] = [float(pair[0]), float(pair[1])]
            elif self.scaled and t > 0:
                raise ValueError(f"sketchfuse hook: saved Adam moments of parameter {key} have no second-moment "
                                 "noise (saved without second_moment='scaled'?)")
        self.moments = moments
        self.frozen = frozen
        self.noise = noise
