"""Tables of bench/results/torch_hook/ (the PyTorch DDP hook on the CPU: accuracy against DDP
and the C++ worker, its cost per step, and torchvision's ResNets through it)."""
from tables.common import fmt, markdown, one, signed, study_rows, value, where

CNN_SCHEMES = ["ddp", "dense_allreduce", "dense_bf16_allreduce", "dense_ps", "importance_allreduce", "topk_ps",
               "gtopk", "sketch_allreduce", "spardl", "topk_allgather", "sketch_ps", "fixed_sketch_ps",
               "fixed_sketch_allreduce"]
MODELS = ["cnn", "cnn_wide", "cnn_bn", "cnn_plain"]
# The plain CNN's runs by seed: (scheme, release_cap) -- "" is the scheme's default cap.
PLAIN_CNN_RUNS = [("ddp", ""), ("sketch_allreduce", ""), ("sketch_allreduce", "2"), ("sketch_allreduce", "0"),
                  ("topk_allgather", ""), ("topk_allgather", "2"), ("topk_allgather", "0")]


def rows():
    return study_rows(__file__)


def _pct(x):
    return fmt(x, 2, "%")


def _ratio(row):
    return fmt(value(row, "compression_ratio"), 1, "x")


def table_accuracy(rows):
    """The table of docs/BENCHMARKS.md "The PyTorch DDP hook": examples/pytorch_ddp.py on the
    worker's CNN and two CNNs of about 0.4M parameters (4 ranks, seed 1, each scheme at its
    default): final test accuracy, its difference from DDP's own allreduce (points), and the
    ratio of the dense gradient's bytes to the bytes a rank sends. (`auto` ran too: the same
    figures as sketch_ps.) The plain CNN, cnn_bn without its batch norm, is issue 69's."""
    runs = where(rows, runner="pytorch_ddp_example", seed=1, release_cap="")
    ddp = {m: value(one(runs, model=m, scheme="ddp"), "test_accuracy_pct") for m in MODELS}
    body = []
    for s in CNN_SCHEMES:
        cells = []
        for m in MODELS:
            found = where(runs, model=m, scheme=s)
            if not found:
                cells += ["", ""]
                continue
            acc = value(found[0], "test_accuracy_pct")
            cells += [_pct(acc) if s == "ddp" else f"{_pct(acc)} ({signed(acc - ddp[m])})",
                      "" if s == "ddp" else _ratio(found[0])]
        body.append([s + (" (no hook)" if s == "ddp" else "")] + cells)
    return markdown(["scheme", "CNN (29K)", "ratio", "`cnn_wide` (403K)", "ratio", "`cnn_bn` (422K)", "ratio",
                     "`cnn_plain` (422K)", "ratio"], body)


def table_plain_cnn(rows):
    """The plain CNN (cnn_plain) through the hook by seed, each scheme with its default release
    cap (1), twice it (--release_cap=2) and without one (--release_cap=0): final test accuracy
    and its difference from DDP's allreduce of the same seed (points), and their mean."""
    runs = where(rows, runner="pytorch_ddp_example", model="cnn_plain")
    seeds = sorted({int(r["seed"]) for r in runs})
    ddp = {s: value(one(runs, scheme="ddp", seed=s), "test_accuracy_pct") for s in seeds}
    body = []
    for scheme, cap in PLAIN_CNN_RUNS:
        name = ("ddp (no hook)" if scheme == "ddp" else
                scheme + {"": "", "0": ", no release cap"}.get(cap, f", release cap {cap}"))
        cells, gaps = [], []
        for s in seeds:
            found = where(runs, scheme=scheme, seed=s, release_cap=cap)
            acc = value(found[0], "test_accuracy_pct") if found else None
            if acc is not None:
                gaps.append(acc - ddp[s])
            cells.append("" if acc is None else _pct(acc) if scheme == "ddp" else f"{_pct(acc)} ({signed(acc - ddp[s])})")
        mean = "" if scheme == "ddp" or len(gaps) != len(seeds) else signed(sum(gaps) / len(gaps))
        body.append([name] + cells + [mean])
    return markdown(["configuration"] + [f"seed {s}" for s in seeds] + ["mean gap"], body)


def table_worker(rows):
    """The hook against the C++ worker (//tests:torch_hook_accuracy_test): the CNN, 4 workers
    or ranks, the same initial weights, shards and example order; final test accuracy."""
    body = [[r["scheme"], _pct(value(r, "test_accuracy_pct")),
             _pct(value(one(rows, runner="pytorch_ddp_example", model="cnn", scheme=r["scheme"]), "test_accuracy_pct"))]
            for r in where(rows, runner="sketchfuse_worker")]
    return markdown(["scheme", "sketchfuse_worker", "PyTorch DDP + hook"], body)


def table_cost(rows):
    """The hook's cost per step (bench/torch_hook_bench.py, the CNN, 4 ranks on 2 cores): rank
    0's step, against DDP's allreduce hook, the hook's compress + decode and its divergence check."""
    runs = where(rows, runner="torch_hook_bench")
    base = value(one(runs, scheme="ddp_allreduce_hook"), "step_ms")
    names = {"ddp": "DDP, no hook", "ddp_allreduce_hook": "DDP's `allreduce_hook`",
             "ddp_fp16_hook": "DDP's `fp16_compress_hook`"}
    body = []
    for r in runs:
        s = r["scheme"]
        if s in names:
            name = names[s]
        else:
            name = f"sketchfuse {s}" + ("" if s == "dense_allreduce" else f" ({_ratio(r)})")
            if r["divergence_check"] == "false":
                name = f"sketchfuse {s}, `check_finite=False`"
        step = value(r, "step_ms")
        body.append([name, fmt(step, 2), fmt(step / base, 2, "x"), fmt(value(r, "hook_compress_decode_ms"), 2),
                     fmt(value(r, "finite_check_ms"), 2)])
    return markdown(["configuration", "ms/step", "vs DDP's allreduce hook", "hook compress + decode, ms",
                     "divergence check, ms"], body)


def table_resnet(rows):
    """torchvision's ResNet-18 (2 ranks, 93 steps, one core each) and ResNet-50 (4 steps, a
    check) through the hook on the host: accuracy on 2,000 test images (ResNet-18), step,
    backward pass, the hook's compress + decode and its share of the backward pass."""
    body = []
    for r in where(rows, runner="pytorch_ddp_example"):
        if r["model"] not in ("resnet18", "resnet50"):
            continue
        hook = value(r, "hook_compress_decode_ms")
        body.append([r["model"], r["scheme"], _pct(value(r, "test_accuracy_pct")) if r["model"] == "resnet18" else "",
                     fmt(value(r, "step_ms")), fmt(value(r, "backward_ms")), fmt(hook),
                     fmt(value(r, "hook_share_of_backward_pct"), 1, "%"),
                     "" if r["scheme"] == "ddp" else _ratio(r)])
    return markdown(["model", "scheme", "test accuracy", "ms/step", "backward ms", "hook compress + decode ms",
                     "share of backward", "ratio"], body, ["l", "l"] + ["r"] * 6)


TABLES = {"accuracy": table_accuracy, "worker": table_worker, "cost": table_cost, "resnet": table_resnet,
          "plain_cnn": table_plain_cnn}
