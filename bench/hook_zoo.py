#!/usr/bin/python3
"""A zoo of models through the PyTorch DDP hook: how far each compressing scheme ends from DDP.

    bash scripts/build_python.sh
    /usr/bin/python3 bench/hook_zoo.py --out=out/hook_zoo [--models=mlp,cnn,cnn_bn,cnn_plain,cnn_wide,char_lm] \\
        [--schemes=ddp,sketch_allreduce,topk_allgather] [--seeds=1,2,3] [--optimizer=sgd|adamw|torch_adamw] \\
        [--ranks=4]

Trains every model with every scheme and seed through examples/pytorch_ddp.py
(`ranks` Gloo processes on loopback, DDP's default buckets, each scheme at its
default compressor), as a user would, with one recipe per kind of model and
optimizer (RECIPES; no scheme or model is tuned): the Fashion-MNIST models
2 epochs of 24,000 images, batch 32 a rank; the char_lm transformer one pass
over 19,200 windows of Debian's fortunes, batch 8 a rank, 30 warm-up steps
then a cosine. `ddp` is DDP's own allreduce (no hook); with --optimizer=adamw
the hook's runs use sketchfuse.torch.AdamW (Adam's moments on each rank),
with torch_adamw torch's AdamW (Adam on the aggregated update).

Prints each model's final test accuracy (next-byte accuracy for char_lm) and
test loss per scheme, the mean over the seeds and its gap to DDP's mean (points
of accuracy; percent of loss), and writes OUT/results.csv (one row per run)
and OUT/hook_zoo.png (gnuplot, when installed). Each run's summary is kept in
OUT/runs/ and reused when the program is run again with the same OUT.
"""
import argparse
import csv
import json
import os
import shutil
import statistics
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
EXAMPLE = os.path.join(ROOT, "examples", "pytorch_ddp.py")
IMAGE_MODELS = ("mlp", "cnn", "cnn_bn", "cnn_plain", "cnn_wide")
TEXT_MODELS = ("char_lm",)
ZOO = IMAGE_MODELS + TEXT_MODELS

# The example's flags per (kind of model, optimizer): the same for every scheme and model of the kind.
RECIPES = {
    ("image", "sgd"): ["--learning_rate=0.05", "--momentum=0.9", "--batch_size=32", "--epochs=2",
                       "--train_examples=24000"],
    ("image", "adamw"): ["--learning_rate=1e-3", "--weight_decay=0.01", "--batch_size=32", "--epochs=2",
                         "--train_examples=24000"],
    ("text", "sgd"): ["--learning_rate=0.2", "--momentum=0.9", "--lr_schedule=cosine", "--lr_warmup_steps=30",
                      "--batch_size=8", "--epochs=1", "--train_examples=19200", "--test_examples=2000"],
    ("text", "adamw"): ["--learning_rate=2e-3", "--beta2=0.95", "--weight_decay=0.1", "--lr_schedule=cosine",
                        "--lr_warmup_steps=30", "--batch_size=8", "--epochs=1", "--train_examples=19200",
                        "--test_examples=2000"],
}
FIELDS = ["model", "optimizer", "variant", "scheme", "seed", "ranks", "steps", "parameters", "test_accuracy_pct", "test_loss",
          "sent_bytes_per_step", "compression_ratio", "wall_s"]


def recipe(model, optimizer):
    kind = "text" if model in TEXT_MODELS else "image"
    return RECIPES[(kind, "sgd" if optimizer == "sgd" else "adamw")] + [f"--optimizer={optimizer}"]


def names(parser, text, known, what):
    """The comma-separated names of --what; exit 2 naming the flag for none, or one not in `known`."""
    items = [x for x in text.split(",") if x]
    unknown = [x for x in items if known is not None and x not in known]
    if not items:
        parser.error(f"--{what}: none given")
    if unknown:
        parser.error(f"--{what}: unknown {', '.join(unknown)} (known: {', '.join(known)})")
    return items


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, help="results folder (runs/ inside it is reused)")
    parser.add_argument("--models", default=",".join(ZOO))
    parser.add_argument("--schemes", default="ddp,sketch_allreduce,topk_allgather",
                        help="ddp (DDP's allreduce, no hook) and the hook's schemes")
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--optimizer", default="sgd", choices=["sgd", "adamw", "torch_adamw"])
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--extra", default="", help="more flags for every run of the example (space-separated)")
    parser.add_argument("--hook_flags", default="", help="more flags for the hook's runs only (a variant: needs --tag)")
    parser.add_argument("--tag", default="", help="names the variant --hook_flags makes (the CSV's variant column)")
    args = parser.parse_args(argv)
    args.models = names(parser, args.models, ZOO, "models")
    args.schemes = names(parser, args.schemes, None, "schemes")
    try:
        args.seeds = [int(s) for s in names(parser, args.seeds, None, "seeds")]
    except ValueError:
        parser.error(f"--seeds: integers separated by commas; got {args.seeds!r}")
    if args.ranks < 1:
        parser.error(f"--ranks must be >= 1; got {args.ranks}")
    if bool(args.hook_flags) != bool(args.tag):
        parser.error("--hook_flags and --tag go together (the tag names the variant in the CSV and its runs)")
    return args


def run_one(args, model, scheme, seed):
    """The run's summary (rank 0's JSON), from OUT/runs/ when it is there."""
    # DDP runs torch's AdamW for both adamw and torch_adamw: one run serves both.
    optimizer = "adamw" if scheme == "ddp" and args.optimizer == "torch_adamw" else args.optimizer
    name = f"{model}_{optimizer}_{scheme}_seed{seed}" + (f"_{args.tag}" if args.tag and scheme != "ddp" else "")
    path = os.path.join(args.out, "runs", f"{name}_0.json")
    if not os.path.exists(path):
        command = [sys.executable, EXAMPLE, f"--nproc_per_node={args.ranks}", f"--model={model}",
                   f"--scheme={scheme}", f"--seed={seed}", f"--json={os.path.join(args.out, 'runs', name)}_{{rank}}.json"]
        command += recipe(model, args.optimizer) + args.extra.split()
        command += args.hook_flags.split() if scheme != "ddp" else []
        print("$ " + " ".join(command[1:]), flush=True)
        done = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if done.returncode != 0:
            raise SystemExit(f"{name} failed (exit {done.returncode}):\n{done.stdout[-3000:]}")
        print(done.stdout.strip().splitlines()[-1], flush=True)
    with open(path) as f:
        summary = json.load(f)
    return {"model": model, "optimizer": optimizer, "variant": args.tag if scheme != "ddp" else "",
            "scheme": scheme, "seed": seed, "ranks": args.ranks,
            "steps": summary["steps"], "parameters": summary["parameters"],
            "test_accuracy_pct": round(summary["test_accuracy"], 4), "test_loss": round(summary["test_loss"], 6),
            "sent_bytes_per_step": summary["bytes_per_step"] and round(summary["bytes_per_step"], 1),
            "compression_ratio": summary["compression_ratio"] and round(summary["compression_ratio"], 3),
            "wall_s": round(summary["wall_s"], 1)}


def gaps(rows):
    """{(model, scheme): (mean accuracy, mean loss, accuracy gap in points, loss gap in %, mean ratio)} against
    each model's ddp (gaps None without it)."""
    cells = {}
    for r in rows:
        cells.setdefault((r["model"], r["scheme"]), []).append(r)
    out = {}
    for (model, scheme), runs in cells.items():
        accuracy = statistics.mean(r["test_accuracy_pct"] for r in runs)
        loss = statistics.mean(r["test_loss"] for r in runs)
        ratios = [r["compression_ratio"] for r in runs if r["compression_ratio"]]
        base = cells.get((model, "ddp"))
        accuracy_gap = loss_gap = None
        if base:
            accuracy_gap = accuracy - statistics.mean(r["test_accuracy_pct"] for r in base)
            base_loss = statistics.mean(r["test_loss"] for r in base)
            loss_gap = 100.0 * (loss - base_loss) / base_loss
        out[(model, scheme)] = (accuracy, loss, accuracy_gap, loss_gap, statistics.mean(ratios) if ratios else None)
    return out


def print_table(args, rows):
    table = gaps(rows)
    print(f"\n{args.optimizer}, {args.ranks} ranks, seeds {','.join(map(str, args.seeds))}: mean final test accuracy "
          "(gap to ddp, points) and test loss (gap, %)")
    print(f"{'model':<10} {'scheme':<24} {'accuracy':>16} {'loss':>18} {'ratio':>7}")
    for model in args.models:
        for scheme in args.schemes:
            accuracy, loss, accuracy_gap, loss_gap, ratio = table[(model, scheme)]
            a = f"{accuracy:.2f}" + (f" ({accuracy_gap:+.2f})" if accuracy_gap is not None and scheme != "ddp" else "")
            l = f"{loss:.4f}" + (f" ({loss_gap:+.1f}%)" if loss_gap is not None and scheme != "ddp" else "")
            ratio_text = f"{ratio:.1f}x" if ratio else "-"
            print(f"{model:<10} {scheme:<24} {a:>16} {l:>18} {ratio_text:>7}")


def plot(args, rows):
    """OUT/hook_zoo.png: each model's gap to DDP per scheme (gnuplot; skipped without it)."""
    if shutil.which("gnuplot") is None:
        print("gnuplot is missing: no plot (apt-get install gnuplot-nox)")
        return
    table = gaps(rows)
    schemes = [s for s in args.schemes if s != "ddp"]
    data = os.path.join(args.out, "hook_zoo.dat")
    with open(data, "w") as f:
        f.write("model " + " ".join(schemes) + "\n")
        for model in args.models:
            values = []
            for s in schemes:
                _, _, accuracy_gap, loss_gap, _ = table[(model, s)]
                gap = -loss_gap if model in TEXT_MODELS else accuracy_gap  # higher is better for both
                values.append("nan" if gap is None else f"{gap:.4f}")
            f.write(f"{model} " + " ".join(values) + "\n")
    script = f"""set terminal pngcairo size 900,500 noenhanced
set output '{os.path.join(args.out, 'hook_zoo.png')}'
set title 'Gap to DDP through the hook ({args.optimizer}, {args.ranks} ranks): accuracy points (char_lm: -% loss)'
set style data histograms
set style fill solid 0.8
set key top left
set yzeroaxis
set ylabel 'gap to DDP'
plot for [i=2:{len(schemes) + 1}] '{data}' using i:xtic(1) title columnhead
"""
    subprocess.run(["gnuplot"], input=script, text=True, check=True)
    os.remove(data)
    print(f"wrote {os.path.join(args.out, 'hook_zoo.png')}")


def main(argv=None):
    args = parse_args(argv)
    os.makedirs(os.path.join(args.out, "runs"), exist_ok=True)
    rows = [run_one(args, model, scheme, seed) for model in args.models for seed in args.seeds
            for scheme in args.schemes]
    path = os.path.join(args.out, "results.csv")
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=FIELDS)
        writer.writeheader()
        writer.writerows({k: ("" if r[k] is None else r[k]) for k in FIELDS} for r in rows)
    print_table(args, rows)
    print(f"wrote {path}")
    plot(args, rows)


if __name__ == "__main__":
    main()
