"""Fashion-MNIST with PyTorch DDP and SketchFuse's communication hook.

    bash scripts/build_python.sh
    /usr/bin/python3 -m torch.distributed.run --standalone --nproc_per_node=4 \\
        examples/pytorch_ddp.py --scheme=sketch_allreduce
    /usr/bin/python3 examples/pytorch_ddp.py --nproc_per_node=4 --scheme=sketch_allreduce

The second form starts the processes itself (torch.multiprocessing, a free
loopback port): Debian 12's torch.distributed.run (PyTorch 1.13 on Python 3.11)
stops at its start with "AttributeError: 'NoneType' object has no attribute
'get'" (its Std.from_str iterates an IntFlag, which skips the value 0 from
Python 3.11 on); PyTorch 2.x's launcher works.

It trains the C++ worker's models ("cnn" by default, "cnn_wide", "mlp" or
"mlp_large"; the same layers,
the same initial weights for the same --seed, the same shards of the data and
the same order of examples through sf_epoch_order), or torchvision's ResNet-18
(--model=resnet18: 11.2M parameters, batch norm; --model=resnet50: 23.5M;
Debian: python3-torchvision), or a CNN with batch norm that is not the worker's
(--model=cnn_bn) and the same CNN without its batch norm (--model=cnn_plain),
or the C++ worker's char_lm transformer (--model=char_lm: 0.47M parameters,
next-byte prediction over Debian's fortunes, split as the worker splits them;
its accuracy is the next byte's, its loss nats per byte),
with the hook aggregating every DDP bucket, and prints the test accuracy, the
time per step, the bytes a worker sent per step and the hook's own time
(compress and decode) per step, also as a share of the backward pass it runs in.
--device=cuda puts each rank's model and batches on GPU (rank mod GPU count);
over Gloo several ranks share one GPU and the hook stages the CUDA buckets
through the host, unless --hook_device=cuda (sketch_allreduce): then error
feedback, selection, the sketch and its peeling decode run on the GPU and only
the sketch crosses to the host; --backend=nccl needs a GPU per rank. On the
GPU machine:
scripts/gpu_bundle.sh build-hook here, then run-hook there.
--optimizer=adamw trains with AdamW (--beta2, --weight_decay; --lr_schedule=cosine and
--lr_warmup_steps for any optimizer): through the hook sketchfuse.torch.AdamW, whose
moments the hook keeps on each rank (python/README.md, "Adam and AdamW"),
under DDP torch's AdamW; --optimizer=torch_adamw hands torch's AdamW to the
hook instead (Adam on the aggregated update, for comparison). The transformer
as the AdamW study trains it:

    /usr/bin/python3 examples/pytorch_ddp.py --nproc_per_node=4 --model=char_lm --scheme=topk_allgather \
        --optimizer=adamw --learning_rate=2e-3 --beta2=0.95 --weight_decay=0.1 --lr_schedule=cosine \
        --lr_warmup_steps=30 --batch_size=8 --train_examples=19200 --test_examples=2000 --epochs=1

The same settings on the C++ worker:

    scripts/local_cluster.sh --workload=cnn --schemes=SCHEME -- --seed=1 [--compressor=SPEC]

Schemes: every scheme of the registry, and plain DDP (--scheme=ddp: no hook,
DDP's own allreduce) for comparison; results: docs/BENCHMARKS.md, "The
PyTorch DDP hook". The decentralized ones (sketch_allreduce,
fixed_sketch_allreduce, topk_allgather, dense_allreduce, dense_bf16_allreduce,
gtopk, spardl, importance_allreduce) run over DDP's process group. The
centralized and hybrid ones (sketch_ps, fixed_sketch_ps, topk_ps, dense_ps,
auto, fixed_sketch_auto) push to aggregation servers:

    # the example starts the servers itself (shard 0 also serves the coordinator)
    /usr/bin/python3 examples/pytorch_ddp.py --nproc_per_node=4 --scheme=sketch_ps --start_servers=2
    # or they run elsewhere: write the job's configuration, start them, point the ranks at them
    /usr/bin/python3 examples/pytorch_ddp.py --scheme=sketch_ps --write_job_config=job.json --world_size=4
    bazel-bin/server/sketchfuse_server --job_config=job.json --shard_index=0 --num_shards=1 --coordinator \
        --port=7070 &
    /usr/bin/python3 examples/pytorch_ddp.py --nproc_per_node=4 --scheme=sketch_ps --coordinator=127.0.0.1:7070
"""
import argparse
import gzip
import json
import math
import os
import socket
import subprocess
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))
import sketchfuse.torch as sft  # noqa: E402
from sketchfuse import _native  # noqa: E402

MEAN, STD = 0.2860, 0.3530  # worker/training/fashion_mnist.h


class Cnn(torch.nn.Module):
    """worker/training/models.h's "cnn" (its modules built in the same order)."""

    def __init__(self, channels1=16, channels2=32):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, channels1, 5, padding=2)
        self.conv2 = torch.nn.Conv2d(channels1, channels2, 5, padding=2)
        self.fc = torch.nn.Linear(channels2 * 7 * 7, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc(x.flatten(1))


class Mlp(torch.nn.Module):
    """worker/training/models.h's "mlp"."""

    def __init__(self, hidden1=256, hidden2=128):
        super().__init__()
        self.fc1 = torch.nn.Linear(784, hidden1)
        self.fc2 = torch.nn.Linear(hidden1, hidden2)
        self.fc3 = torch.nn.Linear(hidden2, 10)

    def forward(self, x):
        x = x.flatten(1)
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


def small_image_resnet(name):
    """torchvision's ResNet `name` for 28x28 grey images, 10 classes: the usual small-image stem
    (a 3x3, stride-1 first convolution of one channel, no max-pool) on torchvision's blocks.
    Needs torchvision (Debian: python3-torchvision)."""
    import torchvision  # only these models need it
    model = getattr(torchvision.models, name)(weights=None, num_classes=10)
    model.conv1 = torch.nn.Conv2d(1, 64, 3, stride=1, padding=1, bias=False)
    model.maxpool = torch.nn.Identity()
    return model


def resnet18():
    """ResNet-18 (11.2M parameters) for 28x28 grey images."""
    return small_image_resnet("resnet18")


def resnet50():
    """ResNet-50 (23.5M parameters, bottleneck blocks) for 28x28 grey images: the model of issue 24's
    backward-share target (batch 64 per rank)."""
    return small_image_resnet("resnet50")


def cnn_wide():
    """worker/training/models.h's "cnn_wide" (0.40M parameters): the CNN with 64 and 192 channels."""
    return Cnn(64, 192)


def mlp_large():
    """worker/training/models.h's "mlp_large" (1.86M parameters): 784-1024-1024-10."""
    return Mlp(1024, 1024)


class CnnBatchNorm(torch.nn.Module):
    """A conventional small PyTorch CNN that is not the C++ worker's (0.42M parameters): two blocks of
    a 3x3 convolution, batch norm, ReLU and 2x2 max-pool (32 and 64 channels), then a 128-unit hidden
    layer. Its batch norm's and biases' few parameters share each bucket with the large layers.
    batch_norm=False leaves the batch norm out (the same weights for the same seed: it draws none)."""

    def __init__(self, batch_norm=True):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, 32, 3, padding=1)
        self.bn1 = torch.nn.BatchNorm2d(32) if batch_norm else torch.nn.Identity()
        self.conv2 = torch.nn.Conv2d(32, 64, 3, padding=1)
        self.bn2 = torch.nn.BatchNorm2d(64) if batch_norm else torch.nn.Identity()
        self.fc1 = torch.nn.Linear(64 * 7 * 7, 128)
        self.fc2 = torch.nn.Linear(128, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        x = F.max_pool2d(F.relu(self.bn2(self.conv2(x))), 2)
        return self.fc2(F.relu(self.fc1(x.flatten(1))))


def cnn_plain():
    """CnnBatchNorm without its batch norm (0.42M parameters, 95% of them in the 3136x128 layer): a CNN as
    plain as they get, with PyTorch's default initialization; issue 69's "plain CNN"."""
    return CnnBatchNorm(batch_norm=False)


class CausalSelfAttention(torch.nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.qkv = torch.nn.Linear(width, 3 * width)
        self.proj = torch.nn.Linear(width, width)

    def forward(self, x):
        batch, time_steps, width = x.shape
        q, k, v = self.qkv(x).split(width, dim=2)
        q, k, v = (t.view(batch, time_steps, self.heads, width // self.heads).transpose(1, 2) for t in (q, k, v))
        scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(width // self.heads))
        future = torch.ones(time_steps, time_steps, dtype=torch.bool, device=x.device).triu(1)
        attention = scores.masked_fill(future, float("-inf")).softmax(dim=-1)
        return self.proj((attention @ v).transpose(1, 2).reshape(batch, time_steps, width))


class TransformerBlock(torch.nn.Module):
    def __init__(self, width, heads, mlp_factor):
        super().__init__()
        self.ln1 = torch.nn.LayerNorm(width)
        self.attention = CausalSelfAttention(width, heads)
        self.ln2 = torch.nn.LayerNorm(width)
        self.fc1 = torch.nn.Linear(width, mlp_factor * width)
        self.fc2 = torch.nn.Linear(mlp_factor * width, width)

    def forward(self, x):
        x = x + self.attention(self.ln1(x))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class CharTransformer(torch.nn.Module):
    """worker/training/transformer.h's CharTransformer, the char_lm workload's model (0.47M parameters: 2
    pre-LayerNorm blocks, width 128, 4 heads, context 64, the 256 byte values): the same parameters in the
    same order (the position embedding first), initialized as GPT-2 (weights N(0, 0.02), the projections
    into the residual stream N(0, 0.02 / sqrt(2 * layers)), biases 0). Its embeddings, LayerNorms and
    biases are 1- and 2-D tensors of every size, which the image models lack."""

    def __init__(self, context=64, width=128, heads=4, layers=2, mlp_factor=4, vocabulary=256):
        super().__init__()
        self.position_embedding = torch.nn.Parameter(torch.zeros(context, width))
        self.token_embedding = torch.nn.Embedding(vocabulary, width)
        self.blocks = torch.nn.ModuleList(TransformerBlock(width, heads, mlp_factor) for _ in range(layers))
        self.final_norm = torch.nn.LayerNorm(width)
        self.head = torch.nn.Linear(width, vocabulary)
        with torch.no_grad():
            for module in self.modules():
                if isinstance(module, (torch.nn.Linear, torch.nn.Embedding)):
                    module.weight.normal_(0.0, 0.02)
                if isinstance(module, torch.nn.Linear):
                    module.bias.zero_()
            self.position_embedding.normal_(0.0, 0.02)
            for block in self.blocks:
                for projection in (block.attention.proj, block.fc2):
                    projection.weight.normal_(0.0, 0.02 / math.sqrt(2 * layers))

    def forward(self, tokens):
        """tokens: [B, T] byte values, T <= context; the logits of each next byte, [B, T, vocabulary]."""
        x = self.token_embedding(tokens) + self.position_embedding[:tokens.shape[1]]
        for block in self.blocks:
            x = block(x)
        return self.head(self.final_norm(x))


MODELS = {"char_lm": CharTransformer, "cnn": Cnn, "cnn_bn": CnnBatchNorm, "cnn_plain": cnn_plain,
          "cnn_wide": cnn_wide, "mlp": Mlp, "mlp_large": mlp_large,
          "resnet18": resnet18, "resnet50": resnet50}
# The models that read text (the rest read Fashion-MNIST's images).
TEXT_MODELS = ("char_lm",)


def build_model(name):
    """A new model by --model name (the caller seeds torch first)."""
    return MODELS[name]()


def read_idx(path, expected_magic):
    """An IDX file (gzip) as a uint8 tensor; ValueError naming the file when it is not one."""
    with gzip.open(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        raise ValueError(f"{path}: too short for an IDX header")
    magic = int.from_bytes(data[0:4], "big")
    if magic != expected_magic:
        raise ValueError(f"{path}: IDX magic {magic:#x}, expected {expected_magic:#x}")
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(magic & 0xFF)]
    header = 4 + 4 * len(dims)
    count = 1
    for d in dims:
        count *= d
    if len(data) - header != count:
        raise ValueError(f"{path}: {len(data) - header} payload bytes for dimensions {dims}")
    return torch.frombuffer(bytearray(data[header:]), dtype=torch.uint8).reshape(dims)


def load(data_dir, split):
    prefix = "train" if split == "train" else "t10k"
    images = read_idx(os.path.join(data_dir, f"{prefix}-images-idx3-ubyte.gz"), 0x803)
    labels = read_idx(os.path.join(data_dir, f"{prefix}-labels-idx1-ubyte.gz"), 0x801)
    if images.shape[0] != labels.shape[0]:
        raise ValueError(f"{data_dir}: {images.shape[0]} {split} images but {labels.shape[0]} labels")
    x = images.float().div_(255.0).sub_(MEAN).div_(STD).unsqueeze(1)
    return x, labels.long()


FORTUNES_DIR = "/usr/share/games/fortunes"  # worker/training/text_corpus.h
CORPUS_CHUNK_BYTES, VALIDATION_EVERY, CORPUS_MIN_BYTES = 4096, 10, 1 << 20


def load_text(directory, split, context=64):
    """worker/training/text_corpus.h's corpus (Debian's fortunes: every regular file whose name has no '.',
    but the ASCII pictures art and ascii-art, in name order, concatenated; every 10th 4 KiB chunk held out
    for validation) as its non-overlapping windows of context + 1 bytes, [N, context + 1] int64: a window's
    first `context` bytes predict its last `context`. ValueError naming the directory when it holds no such
    corpus."""
    try:
        names = sorted(n for n in os.listdir(directory)
                       if "." not in n and n not in ("art", "ascii-art")
                       and os.path.isfile(os.path.join(directory, n)) and not os.path.islink(os.path.join(directory, n)))
    except OSError as e:
        raise ValueError(f"no text corpus at {directory!r} ({e.strerror}; Debian's fortunes: apt-get install "
                         "fortunes, or run scripts/setup.sh)") from None
    pieces = []
    for name in names:
        with open(os.path.join(directory, name), "rb") as f:
            pieces.append(f.read())
    text = b"".join(pieces)
    if len(text) < CORPUS_MIN_BYTES:
        raise ValueError(f"the text corpus in {directory!r} has {len(text)} bytes, fewer than {CORPUS_MIN_BYTES}: "
                         "not Debian's fortunes")
    held_out = split != "train"
    chunks = [text[begin:begin + CORPUS_CHUNK_BYTES] for begin in range(0, len(text), CORPUS_CHUNK_BYTES)]
    kept = b"".join(c for i, c in enumerate(chunks, start=1) if (i % VALIDATION_EVERY == 0) == held_out)
    data = torch.frombuffer(bytearray(kept), dtype=torch.uint8).long()
    return data.unfold(0, context + 1, context).contiguous()


def load_examples(args, split):
    """(inputs, targets) of --model's task: images and labels, or text windows and each next byte."""
    if args.model in TEXT_MODELS:
        windows = load_text(args.text_dir, split)
        return windows[:, :-1], windows[:, 1:]
    return load(args.data_dir, split)


def task_loss(logits, targets):
    """Cross-entropy of a class per image ([B, 10] against [B]) or of each next byte ([B, T, 256] against [B, T])."""
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def evaluate(model, x, y, batch=1000):
    """(accuracy in %, mean loss): the share of the right classes (next bytes), and their cross-entropy."""
    model.eval()
    correct = loss_sum = 0.0
    with torch.no_grad():
        for i in range(0, x.shape[0], batch):
            logits = model(x[i:i + batch])
            correct += (logits.argmax(-1) == y[i:i + batch]).sum().item()
            loss_sum += task_loss(logits, y[i:i + batch]).item() * y[i:i + batch].numel()
    model.train()
    return 100.0 * correct / y.numel(), loss_sum / y.numel()


def learning_rate_factor(step, total_steps, schedule, warmup_steps):
    """The step's learning rate over --learning_rate: a linear warm-up over warmup_steps, then 1 (constant)
    or a cosine from 1 to 0 at total_steps (worker/training/learning_rate.h's schedules)."""
    if step < warmup_steps:
        return (step + 1) / warmup_steps
    if schedule == "constant":
        return 1.0
    progress = (step - warmup_steps) / max(total_steps - warmup_steps, 1)
    return 0.5 * (1.0 + math.cos(math.pi * min(progress, 1.0)))


def make_optimizer(args, parameters, momentum):
    """--optimizer's optimizer: SGD with `momentum` (0 where the hook keeps it), or AdamW with betas
    0.9/--beta2 and --weight_decay: sketchfuse's through the hook (unless torch_adamw), torch's under DDP."""
    if args.optimizer in ("adamw", "torch_adamw"):
        if args.optimizer == "adamw" and args.scheme != "ddp":
            return sft.AdamW(parameters, lr=args.learning_rate, betas=(0.9, args.beta2), weight_decay=args.weight_decay,
                             dense_warmup_steps=args.adam_dense_warmup,
                             second_moment=None if args.adam_dense_warmup else args.adam_second_moment)
        return torch.optim.AdamW(parameters, lr=args.learning_rate, betas=(0.9, args.beta2),
                                 weight_decay=args.weight_decay)
    return torch.optim.SGD(parameters, lr=args.learning_rate, momentum=momentum, weight_decay=args.weight_decay)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scheme", default="sketch_allreduce")
    parser.add_argument("--compressor", default=None, help="compressor spec (default: the scheme's)")
    parser.add_argument("--model", default="cnn", choices=sorted(MODELS),
                        help="cnn, cnn_wide, mlp and mlp_large are the C++ worker's; cnn_bn is a conventional "
                             "CNN with batch norm that is not, cnn_plain the same without batch norm; "
                             "resnet18 and resnet50 are torchvision's")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"],
                        help="where the model, its gradients and the batches live (cuda: rank r on GPU r mod count)")
    parser.add_argument("--hook_device", default="cpu", choices=["cpu", "cuda"],
                        help="where the hook compresses CUDA buckets: staged to the host (cpu) or on the GPU (cuda: "
                             "sketch_allreduce, with --device=cuda)")
    parser.add_argument("--backend", default="gloo", choices=["gloo", "nccl"],
                        help="DDP's process group; nccl needs --device=cuda and a GPU per rank")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--train_examples", type=int, default=24000)
    parser.add_argument("--test_examples", type=int, default=10000)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--learning_rate", type=float, default=0.05)
    parser.add_argument("--momentum", type=float, default=0.9,
                        help="SGD's momentum (in the hook with a compressing scheme, in the optimizer otherwise)")
    parser.add_argument("--optimizer", default="sgd", choices=["sgd", "adamw", "torch_adamw"],
                        help="adamw: AdamW with betas 0.9/--beta2 (through the hook sketchfuse.torch.AdamW, whose "
                             "moments the hook keeps on each rank before compression; with --scheme=ddp "
                             "torch.optim.AdamW); torch_adamw: torch.optim.AdamW through the hook too (Adam on the "
                             "aggregated update)")
    parser.add_argument("--beta2", type=float, default=0.999, help="AdamW's second-moment decay")
    parser.add_argument("--adam_dense_warmup", type=int, default=0,
                        help="--optimizer=adamw through the hook: this many dense steps, then the second moment "
                             "frozen and the first kept on each rank (sketchfuse.torch.AdamW's dense_warmup_steps; "
                             "0: both moments on each rank)")
    parser.add_argument("--adam_second_moment", default="scaled", choices=["scaled", "rank"],
                        help="--optimizer=adamw through a compressing hook without a dense warm-up: each rank's "
                             "second moment rescaled to the mean gradient's size (scaled), or its own (rank)")
    parser.add_argument("--weight_decay", type=float, default=0.0)
    parser.add_argument("--lr_schedule", default="constant", choices=["constant", "cosine"],
                        help="after the warm-up: constant, or a cosine to 0 at the last step")
    parser.add_argument("--lr_warmup_steps", type=int, default=0, help="linear warm-up steps")
    parser.add_argument("--deterministic", action="store_true",
                        help="cuDNN's deterministic convolutions: two runs of the same scheme, and DDP against the "
                             "hook's dense_allreduce, then train the same model (default: cuDNN's fastest, whose "
                             "sums vary in order from run to run)")
    parser.add_argument("--release_cap", type=float, default=1.0)
    parser.add_argument("--raw_residual", action="store_true",
                        help="--optimizer=sgd through a compressing hook: keep error feedback's residual in raw "
                             "gradients (HookState residual_in_rate_units=False) instead of units of the learning rate")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--threads", type=int, default=1, help="torch threads per process")
    parser.add_argument("--data_dir", default="/usr/share/datasets/fashion-mnist")
    parser.add_argument("--text_dir", default=FORTUNES_DIR, help="char_lm's corpus (Debian's fortunes)")
    parser.add_argument("--json", default="", help="write the summary here too")
    parser.add_argument("--checkpoint", default="", help="save model, optimizer and hook state here at the end")
    parser.add_argument("--resume", default="", help="resume from a --checkpoint file of this rank (ignoring {rank})")
    parser.add_argument("--stop_after_steps", type=int, default=0, help="stop after this many steps (0: all)")
    parser.add_argument("--nproc_per_node", type=int, default=0,
                        help="start this many processes on loopback here (instead of torch.distributed.run)")
    parser.add_argument("--coordinator", default=None, help="centralized schemes: the job's coordinator, host:port")
    parser.add_argument("--start_servers", type=int, default=0,
                        help="centralized schemes, with --nproc_per_node: start this many server shards here")
    parser.add_argument("--server_binary", default=os.path.join(ROOT, "bazel-bin", "server", "sketchfuse_server"),
                        help="the sketchfuse_server for --start_servers")
    parser.add_argument("--write_job_config", default="",
                        help="write the servers' job configuration for this run here and exit (needs --world_size)")
    parser.add_argument("--world_size", type=int, default=0, help="with --write_job_config: the number of ranks")
    args = parser.parse_args(argv)
    for name in ("epochs", "train_examples", "test_examples", "batch_size", "threads"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be >= 1; got {getattr(args, name)}")
    if not (args.learning_rate > 0):
        parser.error(f"--learning_rate must be > 0; got {args.learning_rate}")
    if not (0 <= args.beta2 < 1):
        parser.error(f"--beta2 must be in [0, 1); got {args.beta2}")
    if not (0 <= args.weight_decay < 1):
        parser.error(f"--weight_decay must be in [0, 1); got {args.weight_decay}")
    if not (0 <= args.momentum < 1):
        parser.error(f"--momentum must be in [0, 1); got {args.momentum}")
    if args.lr_warmup_steps < 0:
        parser.error(f"--lr_warmup_steps must be >= 0; got {args.lr_warmup_steps}")
    if args.raw_residual and (args.optimizer != "sgd" or args.scheme == "ddp"):
        parser.error("--raw_residual is for --optimizer=sgd through the hook (sketchfuse AdamW keeps its updates in "
                     "units of the parameters)")
    if args.adam_dense_warmup < 0:
        parser.error(f"--adam_dense_warmup must be >= 0; got {args.adam_dense_warmup}")
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device=cuda: PyTorch sees no CUDA device here")
    if args.hook_device == "cuda" and args.device != "cuda":
        parser.error("--hook_device=cuda needs --device=cuda (the buckets on the GPU)")
    if args.hook_device == "cuda" and args.scheme != "sketch_allreduce":
        parser.error(f"--hook_device=cuda runs sketch_allreduce on the GPU; got --scheme={args.scheme}")
    if args.backend == "nccl" and args.device != "cuda":
        parser.error("--backend=nccl needs --device=cuda")
    ranks = args.nproc_per_node or int(os.environ.get("WORLD_SIZE", "1"))
    if args.backend == "nccl" and ranks > torch.cuda.device_count():
        parser.error(f"--backend=nccl: {ranks} ranks on {torch.cuda.device_count()} GPU(s); NCCL needs a GPU per "
                     "rank (use --backend=gloo to share a GPU: the hook stages CUDA buckets through the host)")
    if args.nproc_per_node < 0:
        parser.error(f"--nproc_per_node must be >= 0; got {args.nproc_per_node}")
    if args.start_servers < 0 or (args.start_servers and not args.nproc_per_node):
        parser.error("--start_servers needs --nproc_per_node (the example starts servers and ranks together)")
    if args.start_servers and args.coordinator:
        parser.error("--start_servers and --coordinator exclude each other")
    if args.scheme != "ddp":
        try:
            _native.scheme_traits(args.scheme)
        except _native.NativeError as e:
            parser.error(f"--scheme: {e} (or ddp: DDP's own allreduce)")
    return parser, args


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spawned(local_rank, world, port, argv):
    os.environ.update({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "RANK": str(local_rank),
                       "LOCAL_RANK": str(local_rank), "WORLD_SIZE": str(world)})
    train(*parse_args(argv))


def write_job(args, world_size, path, job):
    torch.manual_seed(args.seed)
    model = build_model(args.model)
    sft.write_job_config(model, path, args.scheme, args.compressor, world_size=world_size, job=job, seed=args.seed,
                         momentum=args.momentum, release_cap=args.release_cap)


def start_servers(args, directory):
    """Writes the job configuration and starts --start_servers shards; returns (coordinator address, processes)."""
    if not os.path.exists(args.server_binary):
        raise SystemExit(f"{args.server_binary} is missing: bazel build //server:sketchfuse_server "
                         "(or give --server_binary)")
    config = os.path.join(directory, "job.json")
    write_job(args, args.nproc_per_node, config, "sketchfuse")
    processes, coordinator = [], None
    for shard in range(args.start_servers):
        port_file = os.path.join(directory, f"shard{shard}.port")
        command = [args.server_binary, f"--job_config={config}", f"--shard_index={shard}",
                   f"--num_shards={args.start_servers}", "--port=0", f"--port_file={port_file}"]
        command += ["--coordinator"] if shard == 0 else [f"--coordinator_address={coordinator}"]
        log = open(os.path.join(directory, f"shard{shard}.log"), "w")
        processes.append(subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT))
        deadline = time.monotonic() + 30
        port = ""
        while not port:
            if time.monotonic() > deadline or processes[-1].poll() is not None:
                raise SystemExit(f"shard {shard} did not start: see {log.name}")
            time.sleep(0.05)
            if os.path.exists(port_file):
                with open(port_file) as f:
                    port = f.read().strip()
        if shard == 0:
            coordinator = f"127.0.0.1:{port}"
    print(f"started {args.start_servers} server shard(s); coordinator {coordinator} (logs in {directory})", flush=True)
    return coordinator, processes


def main():
    parser, args = parse_args()
    if args.write_job_config:
        if args.world_size < 1:
            parser.error("--write_job_config needs --world_size >= 1")
        try:
            write_job(args, args.world_size, args.write_job_config, "sketchfuse")
        except ValueError as e:
            parser.error(f"--write_job_config (for the centralized and hybrid schemes): {e}")
        print(f"wrote {args.write_job_config}")
        return
    if args.nproc_per_node > 0 and "RANK" not in os.environ:
        servers = []
        argv = sys.argv[1:]
        with tempfile.TemporaryDirectory(prefix="sketchfuse_example_") as directory:
            try:
                if args.start_servers:
                    coordinator, servers = start_servers(args, directory)
                    argv = [a for a in argv if not a.startswith("--start_servers")] + [f"--coordinator={coordinator}"]
                torch.multiprocessing.spawn(spawned, args=(args.nproc_per_node, free_port(), argv),
                                            nprocs=args.nproc_per_node)
            finally:
                for process in servers:
                    process.terminate()
                for process in servers:
                    process.wait(timeout=30)
        return
    train(parser, args)


def train(parser, args):
    torch.set_num_threads(args.threads)
    if args.deterministic:
        torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = True, False
    device = torch.device("cpu")
    if args.device == "cuda":
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")) % torch.cuda.device_count())
        torch.cuda.set_device(device)
    dist.init_process_group(args.backend)
    rank, world = dist.get_rank(), dist.get_world_size()

    x_train, y_train = load_examples(args, "train")
    x_test, y_test = load_examples(args, "test")
    used = min(args.train_examples, x_train.shape[0])
    rows = torch.arange(rank, used, world)
    x_shard, y_shard = x_train[rows], y_train[rows]
    steps_per_epoch = (used // world) // args.batch_size
    if steps_per_epoch < 1:
        parser.error(f"--batch_size {args.batch_size} is larger than a worker's {used // world} examples")
    x_test, y_test = x_test[:args.test_examples].to(device), y_test[:args.test_examples].to(device)
    x_shard, y_shard = x_shard.to(device), y_shard.to(device)

    torch.manual_seed(args.seed)
    model = build_model(args.model).to(device)
    ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[device] if device.type == "cuda" else None)
    state = None
    momentum_in_optimizer = args.momentum
    if args.scheme != "ddp":
        compresses = _native.scheme_traits(args.scheme)[0]
        momentum_in_optimizer = 0.0 if compresses else args.momentum
    optimizer = make_optimizer(args, ddp.parameters(), momentum_in_optimizer)
    if args.scheme != "ddp":
        hook_options = {"device": "cuda"} if args.hook_device == "cuda" else {}
        # With AdamW the hook keeps no momentum (the optimizer's first moment is one).
        if args.optimizer == "sgd":
            hook_options["momentum"] = args.momentum
        if args.raw_residual:
            hook_options["residual_in_rate_units"] = False
        state = sft.HookState(args.scheme, args.compressor, coordinator=args.coordinator, seed=args.seed,
                              release_cap=args.release_cap, optimizer=optimizer, **hook_options)
        ddp.register_comm_hook(state, sft.hook)

    first_step = 0
    if args.resume:
        saved = torch.load(args.resume.replace("{rank}", str(rank)), map_location="cpu")
        model.load_state_dict(saved["model"])
        optimizer.load_state_dict(saved["optimizer"])
        if state is not None:
            state.load_state_dict(saved["hook"])
        first_step = saved["step"]

    total_steps = steps_per_epoch * args.epochs
    last_step = total_steps if args.stop_after_steps <= 0 else min(total_steps, first_step + args.stop_after_steps)
    step_seconds = backward_seconds = 0.0

    def synchronized_clock():
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        return time.perf_counter()

    wall_start = time.perf_counter()
    order = None
    loss_value = float("nan")
    for step in range(first_step, last_step):
        epoch, in_epoch = divmod(step, steps_per_epoch)
        if in_epoch == 0 or order is None:
            order = torch.tensor(_native.epoch_order(args.seed, rank, epoch, x_shard.shape[0]), dtype=torch.int64,
                                 device=device)
        index = order[in_epoch * args.batch_size:(in_epoch + 1) * args.batch_size]
        for group in optimizer.param_groups:
            group["lr"] = args.learning_rate * learning_rate_factor(step, total_steps, args.lr_schedule,
                                                                    args.lr_warmup_steps)
        begin = synchronized_clock()
        loss = task_loss(ddp(x_shard[index]), y_shard[index])
        optimizer.zero_grad()
        backward_begin = synchronized_clock()
        loss.backward()  # DDP runs the hook on each bucket inside it and waits for every bucket's result
        backward_seconds += synchronized_clock() - backward_begin
        optimizer.step()
        step_seconds += synchronized_clock() - begin
        loss_value = loss.item()
        if in_epoch == steps_per_epoch - 1 and rank == 0:
            epoch_accuracy, epoch_test_loss = evaluate(model, x_test, y_test)
            print(f"epoch {epoch + 1}: loss {loss_value:.4f}, test accuracy {epoch_accuracy:.2f}%, test loss "
                  f"{epoch_test_loss:.4f}", flush=True)
    wall = time.perf_counter() - wall_start
    steps = max(last_step - first_step, 1)
    accuracy, test_loss = evaluate(model, x_test, y_test)
    stats = state.stats() if state is not None else None
    hook_seconds = ((stats["compress_s"] + stats["decode_s"]) / steps) if stats else None
    summary = {
        "scheme": args.scheme, "compressor": args.compressor, "learning_rate": args.learning_rate,
        "deterministic": args.deterministic, "model": args.model, "device": str(device),
        "hook_device": args.hook_device,
        "backend": args.backend, "parameters": sum(p.numel() for p in model.parameters()), "rank": rank,
        "world_size": world, "batch_size": args.batch_size,
        "seed": args.seed, "steps": last_step, "test_accuracy": accuracy, "test_loss": test_loss,
        "final_loss": loss_value, "optimizer": args.optimizer, "momentum": args.momentum,
        "step_time_s": step_seconds / steps, "backward_s_per_step": backward_seconds / steps, "wall_s": wall,
        "bytes_per_step": (stats["bytes_sent"] / stats["steps"]) if stats and stats["steps"] else None,
        "compression_ratio": stats["compression_ratio"] if stats else None,
        "hook_compress_decode_s_per_step": hook_seconds,
        # The hook's own compute against the backward pass it runs in (which includes it and the transfers).
        "hook_share_of_backward": (hook_seconds / (backward_seconds / steps)) if stats and backward_seconds > 0 else None,
        "hook": stats,
    }
    if args.checkpoint:
        torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                    "hook": state.state_dict() if state is not None else None, "step": last_step},
                   args.checkpoint.replace("{rank}", str(rank)))
    if rank == 0:
        ratio = f"{summary['compression_ratio']:.1f}x" if summary["compression_ratio"] else "1x (DDP)"
        bytes_text = f"{summary['bytes_per_step']:.0f}" if summary["bytes_per_step"] else "-"
        share = (f"; hook compress+decode {100 * summary['hook_share_of_backward']:.1f}% of the backward pass"
                 if summary["hook_share_of_backward"] is not None else "")
        print(f"{args.scheme}: test accuracy {accuracy:.2f}% (test loss {test_loss:.4f}) after {last_step} steps; {1e3 * summary['step_time_s']:.1f} "
              f"ms/step; {bytes_text} bytes/step per worker ({ratio}){share}", flush=True)
    if args.json:
        with open(args.json.replace("{rank}", str(rank)), "w") as f:
            json.dump(summary, f, indent=1)
    dist.barrier()
    del ddp, state
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
