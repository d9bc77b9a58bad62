"""Tables of bench/results/gpu_kernels/: SketchFuse's CUDA kernels against the same work in PyTorch (H200)."""
from tables.common import fmt, markdown, one, study_rows, value, where

# The operations the docs show, in order, with their labels.
OPS = [
    ("topk", "exact top-k (k = d/1000)"),
    ("topk_cub_sort", "CUB radix sort of all keys (yardstick)"),
    ("compress_decode", "compress + decode, 5 rows (estimate)"),
    ("compress_decode_r1", "compress + decode, 1 row (estimate)"),
    ("peel_compress", "`peel_compress` (top-k, insert k = d/160 into 4 rows)"),
    ("peel_decode", "`peel_decode` (4 workers' summed sketch)"),
    ("peel_round", "**`peel_round`** (the two: the sketch schemes' default)"),
    ("peel_decode_cpu", "`peel_decode_cpu` (the host's decoder, one core)"),
    ("ef_momentum", "error feedback + momentum"),
]
PROFILES = ("resnet50", "gpt2_small")
HOST_OPS = ("peel_decode_cpu",)  # run on the host: no share of the GPU's copy bandwidth


def rows():
    return study_rows(__file__)


def ms(x):
    """Milliseconds as the docs give them: 3 decimals under 10 ms, else 4 significant digits."""
    if x is None:
        return ""
    return fmt(x, 3 if x < 10 else max(0, 4 - len(str(int(x)))), " ms")


def times(x):
    return fmt(x, 1, "×")


def share(fraction):
    if fraction is None:
        return ""
    pct = 100 * fraction
    return fmt(pct, 0 if pct >= 1 else 1, "%")


def table_ops(rows):
    """The table of docs/BENCHMARKS.md "On the GPU (H200)": each kernel against PyTorch (FetchSGD's
    layout), ResNet-50 and GPT-2 small, with ResNet-50's share of the copy bandwidth."""
    r50, gpt = (where(rows, gpu="H200", profile=p) for p in PROFILES)
    copy = value(one(r50, op="copy"), "sketchfuse_gbps")
    body = []
    for op, label in OPS:
        a, b = one(r50, op=op), one(gpt, op=op)
        if op == "peel_decode":
            label = label[:-1] + f", {a['peel_passes']} / {b['peel_passes']} passes)"
        body.append([label, ms(value(a, "sketchfuse_ms")), ms(value(a, "torch_ms")), times(value(a, "speedup")),
                     "" if op in HOST_OPS else share(value(a, "fraction_of_copy")), ms(value(b, "sketchfuse_ms")), ms(value(b, "torch_ms")),
                     times(value(b, "speedup"))])
    return markdown(["operation", "ResNet-50", "PyTorch", "speed-up", f"of copy ({fmt(copy, 0)} GB/s)",
                     "GPT-2 small", "PyTorch", "speed-up"], body)


def table_targets(rows):
    """The targets of the GPU issue (35) for ResNet-50, "On the GPU (H200)": met or not, from the figures."""
    r50 = where(rows, gpu="H200", profile="resnet50")
    body = []

    def round_target(label, op, has_torch=True):
        r = one(r50, op=op)
        t, x = value(r, "sketchfuse_ms"), value(r, "speedup")
        met = t <= 0.3 and x is not None and x >= 10
        measured = ms(t) + (f", {times(x)} PyTorch" if has_torch else ", no PyTorch counterpart")
        body.append([label, measured, "met" if met else "**not met**"])

    round_target("round ≤ 0.3 ms and ≥ 10× PyTorch: the peel (the default)", "peel_round", has_torch=False)
    round_target("the same, 5-row estimate", "compress_decode")
    round_target("the same, 1-row estimate", "compress_decode_r1")
    x = value(one(r50, op="topk"), "speedup")
    x_gpt = value(one(rows, gpu="H200", profile="gpt2_small", op="topk"), "speedup")
    body.append(["exact top-k ≥ 8× `torch.topk`", f"{times(x)} (GPT-2 small {times(x_gpt)})",
                 "met" if x >= 8 else "**not met**"])
    return markdown(["target (issue 35, ResNet-50)", "measured", ""], body, align=["l", "l", "l"])


TABLES = {"ops": table_ops, "targets": table_targets}
