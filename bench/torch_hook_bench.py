#!/usr/bin/python3
"""The PyTorch DDP hook's cost: time per training step against DDP's own
allreduce, and the hook's compress and decode per step.

    /usr/bin/python3 bench/torch_hook_bench.py [--model=cnn] [--world=4] [--steps=100] [--rounds=2] \\
        [--out=out/torch_hook]

Starts `world` processes (a Gloo group on loopback, one torch thread each),
builds the C++ worker's model (examples/pytorch_ddp.py), and trains on
Fashion-MNIST batches of 32 with each configuration in turn, `rounds` times
round-robin (the machine's noise spreads over all of them): DDP without a
hook (its built-in allreduce), DDP's own allreduce_hook and fp16_compress_hook
(torch.distributed.algorithms.ddp_comm_hooks.default_hooks), and
sketchfuse.torch's hook with dense_allreduce, topk_allgather and
sketch_allreduce at their defaults (and sketch_allreduce without the
divergence check, ":no_check"). A step is forward, backward (with the
hook) and the optimizer, timed on rank 0 between two barriers; the hook's own
compute (compress + decode) comes from its stats. Prints a table, writes
OUT/torch_hook.{csv,json} and OUT/torch_hook.png (gnuplot). Needs
scripts/build_python.sh first (or SKETCHFUSE_LIB).
"""
import argparse
import json
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
sys.path.insert(0, os.path.join(HERE, "..", "examples"))
import pytorch_ddp  # noqa: E402
import sketchfuse.torch as sft  # noqa: E402

CONFIGS = ["ddp", "ddp_allreduce_hook", "ddp_fp16_hook", "sketchfuse:dense_allreduce", "sketchfuse:topk_allgather",
           "sketchfuse:sketch_allreduce", "sketchfuse:sketch_allreduce:no_check"]


def one_config(name, args, rank, x, y):
    torch.manual_seed(1)
    model = pytorch_ddp.build_model(args.model)
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    state = None
    momentum = 0.9
    if name == "ddp_allreduce_hook":
        ddp.register_comm_hook(None, default_hooks.allreduce_hook)
    elif name == "ddp_fp16_hook":
        ddp.register_comm_hook(None, default_hooks.fp16_compress_hook)
    elif name.startswith("sketchfuse:"):
        parts = name.split(":")
        state = sft.HookState(parts[1], check_finite=parts[2:] != ["no_check"])
        if state.compresses:
            momentum = 0.0
        ddp.register_comm_hook(state, sft.hook)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=momentum)
    g = torch.Generator().manual_seed(rank)

    def step():
        index = torch.randint(0, x.shape[0], (32,), generator=g)
        loss = F.cross_entropy(ddp(x[index]), y[index])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    for _ in range(args.warmup):
        step()
    before = state.stats() if state is not None else None
    dist.barrier()
    begin = time.perf_counter()
    for _ in range(args.steps):
        step()
    dist.barrier()
    seconds = (time.perf_counter() - begin) / args.steps
    result = {"config": name, "step_s": seconds}
    if state is not None:
        after = state.stats()
        n = after["steps"] - before["steps"]
        result["hook_compress_s"] = (after["compress_s"] - before["compress_s"]) / n
        result["hook_decode_s"] = (after["decode_s"] - before["decode_s"]) / n
        result["hook_check_s"] = (after["check_s"] - before["check_s"]) / n
        result["bytes_per_step"] = (after["bytes_sent"] - before["bytes_sent"]) / n
        result["compression_ratio"] = after["compression_ratio"]
    del ddp, state
    return result


def worker(rank, args, port, out_path):
    os.environ.update({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)})
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=args.world)
    x, y = pytorch_ddp.load(args.data_dir, "train")
    rows = torch.arange(rank, 24000, args.world)
    x, y = x[rows], y[rows]
    results = []
    for round_index in range(args.rounds):
        for name in args.configs.split(","):
            r = one_config(name, args, rank, x, y)
            r["round"] = round_index
            results.append(r)
    if rank == 0:
        with open(out_path, "w") as f:
            json.dump(results, f)
    dist.barrier()
    dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="cnn", choices=sorted(pytorch_ddp.MODELS))
    parser.add_argument("--world", type=int, default=4)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--configs", default=",".join(CONFIGS))
    parser.add_argument("--data_dir", default="/usr/share/datasets/fashion-mnist")
    parser.add_argument("--out", default="out/torch_hook")
    args = parser.parse_args()
    for name in ("world", "steps", "rounds"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be >= 1")
    if args.warmup < 2:
        parser.error("--warmup must be >= 2 (DDP rebuilds its buckets after the first step)")
    unknown = [c for c in args.configs.split(",") if c not in CONFIGS]
    if unknown:
        parser.error(f"unknown config(s) {', '.join(unknown)}; known: {', '.join(CONFIGS)}")
    os.makedirs(args.out, exist_ok=True)
    raw = os.path.join(args.out, "torch_hook_raw.json")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    torch.multiprocessing.spawn(worker, args=(args, port, raw), nprocs=args.world)
    with open(raw) as f:
        results = json.load(f)

    rows = []
    for name in args.configs.split(","):
        runs = [r for r in results if r["config"] == name]
        row = {"config": name, "step_ms": 1e3 * statistics.median(r["step_s"] for r in runs),
               "step_ms_rounds": [round(1e3 * r["step_s"], 3) for r in runs]}
        if "hook_compress_s" in runs[0]:
            row["compress_ms"] = 1e3 * statistics.median(r["hook_compress_s"] for r in runs)
            row["decode_ms"] = 1e3 * statistics.median(r["hook_decode_s"] for r in runs)
            row["finite_check_ms"] = 1e3 * statistics.median(r["hook_check_s"] for r in runs)
            row["bytes_per_step"] = runs[0]["bytes_per_step"]
            row["compression_ratio"] = runs[0]["compression_ratio"]
        rows.append(row)
    base = next((r["step_ms"] for r in rows if r["config"] == "ddp_allreduce_hook"), None)
    meta = {"model": args.model, "world": args.world, "steps": args.steps, "rounds": args.rounds,
            "torch": torch.__version__, "python": platform.python_version(), "cpus": os.cpu_count(),
            "machine": platform.machine(), "command": " ".join(sys.argv)}
    print(f"{args.model}, {args.world} processes, batch 32, {args.steps} steps x {args.rounds} rounds "
          f"(median of rounds), PyTorch {torch.__version__}, {os.cpu_count()} CPUs")
    print(f"{'config':30s} {'ms/step':>8s} {'vs allreduce hook':>18s} {'compress+decode ms':>19s} "
          f"{'finite check ms':>16s} {'bytes/step':>11s} {'ratio':>6s}")
    for r in rows:
        rel = f"{r['step_ms'] / base:.2f}x" if base else "-"
        cd = f"{r['compress_ms'] + r['decode_ms']:.3f}" if "compress_ms" in r else "-"
        ck = f"{r['finite_check_ms']:.3f}" if "finite_check_ms" in r else "-"
        b = f"{r['bytes_per_step']:.0f}" if "bytes_per_step" in r else "-"
        ratio = f"{r['compression_ratio']:.1f}x" if r.get("compression_ratio") else "-"
        print(f"{r['config']:30s} {r['step_ms']:8.2f} {rel:>18s} {cd:>19s} {ck:>16s} {b:>11s} {ratio:>6s}")
    prefix = os.path.join(args.out, "torch_hook")
    with open(prefix + ".json", "w") as f:
        json.dump({"meta": meta, "rows": rows}, f, indent=1)
    with open(prefix + ".csv", "w") as f:
        f.write("config,step_ms,compress_ms,decode_ms,finite_check_ms,bytes_per_step,compression_ratio\n")
        for r in rows:
            f.write(",".join([r["config"], f"{r['step_ms']:.4f}"] + [
                "" if r.get(k) is None else f"{r[k]:.4f}"
                for k in ("compress_ms", "decode_ms", "finite_check_ms", "bytes_per_step", "compression_ratio")])
                + "\n")
    print(f"wrote {prefix}.csv, {prefix}.json", end="")
    if shutil.which("gnuplot"):
        script = f"""
set terminal pngcairo size 1000,560 noenhanced
set output '{prefix}.png'
set title 'DDP step time, {args.model}, {args.world} processes on {os.cpu_count()} CPUs (PyTorch {torch.__version__})'
set style data histograms
set style histogram rowstacked
set style fill solid 0.8 border -1
set boxwidth 0.6
set ylabel 'ms per step'
set datafile separator ','
set key top left
set xtics rotate by -20
c(k) = valid(k) ? column(k) : 0
plot '{prefix}.csv' every ::1 using ($2-c(3)-c(4)-c(5)):xtic(1) title 'rest of the step', '' every ::1 using (c(3)) title 'hook compress', '' every ::1 using (c(4)) title 'hook decode', '' every ::1 using (c(5)) title 'divergence check'
"""
        subprocess.run(["gnuplot"], input=script, text=True, check=True)
        print(f", {prefix}.png")
    else:
        print(" (no gnuplot: no plot)")


if __name__ == "__main__":
    main()
