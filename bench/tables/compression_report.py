"""Tables of bench/results/compression_report/ (every compressor on the four model profiles'
gradients, one thread of the 2-core VM: ratio, L2 mass kept against exact top-k, time)."""
from tables.common import fmt, markdown, one, study_rows, value, where

PROFILES = ["resnet50", "vgg16", "bert_base", "gpt2_small"]


def rows():
    return study_rows(__file__)


def _kind(compressor):
    return compressor.split(":")[0] + (" (peel)" if "method=peel" in compressor else "")


def table_resnet50(rows):
    """The table of docs/BENCHMARKS.md "Compression report": ResNet-50 (25.6M), each compressor
    at density 0.001 (the sketch at the peel's default for 4 workers): the ratio, the L2 mass it
    keeps against exact top-k's, and one thread's encode and decode."""
    body = [[_kind(r["compressor"]), fmt(value(r, "compression_ratio"), 1, "x"),
             fmt(100 * value(r, "mass_vs_topk"), 1, "%"), fmt(value(r, "encode_ms")), fmt(value(r, "decode_ms"))]
            for r in where(rows, profile="resnet50")]
    return markdown(["compressor", "ratio", "L2 mass vs exact top-k", "encode ms", "decode ms"], body)


def table_mass(rows):
    """The L2 mass each compressor keeps against exact top-k's, on the four profiles."""
    kinds = [r["compressor"] for r in where(rows, profile="resnet50") if r["compressor"] != "dense"]
    body = [[_kind(c)] + [fmt(100 * value(one(rows, profile=p, compressor=c), "mass_vs_topk"), 1, "%")
                          for p in PROFILES] for c in kinds]
    return markdown(["compressor"] + PROFILES, body)


TABLES = {"resnet50": table_resnet50, "mass": table_mass}
