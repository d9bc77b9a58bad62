"""Tables of bench/results/gpu_worker_step/: a worker's step (fusion, compression, allreduce,
decode) with its groups on the host and on the GPU (H200)."""
from tables.common import fmt, markdown, one, study_rows, value, where

PEEL = "count_sketch:method=peel,density=0.0042,rows=4,width=4"
ESTIMATE = "count_sketch:method=estimate,density=0.001,rows=5,width=10"
WORKLOADS = [("resnet50", "ResNet-50"), ("vgg16", "VGG-16"), ("bert_base", "BERT-base"), ("gpt2_small", "GPT-2 small")]
FUSIONS = [("per_layer", "per_layer (161 groups)"), ("omgs", "omgs"), ("optimal", "optimal"),
           ("4", "4 equal groups"), ("single", "single (1 group)")]


def rows():
    return study_rows(__file__)


def ms(x):
    return fmt(x, 1, " ms")


def host_vs_gpu(rows, compressor, steps, workloads):
    body = []
    for workload, name in workloads:
        cell = where(rows, gpu="H200", workload=workload, compressor=compressor, fusion="4", steps=steps)
        if not cell:
            continue
        host, gpu = one(cell, device="cpu"), one(cell, device="gpu")
        label = f"{name} ({value(gpu, 'parameters') / 1e6:.1f}M)"
        body.append([label, ms(value(host, "step_ms")), ms(value(gpu, "step_ms")), ms(value(gpu, "compress_ms")),
                     ms(value(gpu, "communicate_ms")), ms(value(gpu, "decode_ms")),
                     fmt(value(host, "step_ms") / value(gpu, "step_ms"), 1, "×")])
    return markdown(["workload", "host step", "GPU step", "GPU compress", "GPU communicate", "GPU decode",
                     "speed-up"], body)


def table_peel(rows):
    """The table of docs/BENCHMARKS.md "On the GPU (H200)": a worker's step with the sketch schemes'
    default (the peel) on the four profiles, host against GPU."""
    return host_vs_gpu(rows, PEEL, 6, WORKLOADS)


def table_estimate(rows):
    """The same with the 5-row estimate sketch (the H100's earlier table, re-run on the H200)."""
    return host_vs_gpu(rows, ESTIMATE, 6, WORKLOADS)


def table_fusion(rows):
    """Fusion plans on the GPU worker (ResNet-50, 5-row estimate, 5 steps): the scale model's GPU costs."""
    body = []
    for fusion, label in FUSIONS:
        cell = where(rows, gpu="H200", workload="resnet50", compressor=ESTIMATE, fusion=fusion, steps=5)
        host, gpu = one(cell, device="cpu"), one(cell, device="gpu")
        body.append([label, ms(value(gpu, "step_ms")), ms(value(gpu, "compress_ms")),
                     ms(value(gpu, "communicate_ms")), ms(value(gpu, "decode_ms")), ms(value(host, "step_ms"))])
    return markdown(["fusion plan", "GPU step", "compress", "communicate", "decode", "host step (same run)"], body)


TABLES = {"peel": table_peel, "estimate": table_estimate, "fusion": table_fusion}
