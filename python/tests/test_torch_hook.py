"""Tests of sketchfuse.torch, the DDP communication hook, with Debian's PyTorch.

Real processes (torch.multiprocessing) in a real Gloo process group on
loopback. Run from Bazel (//python:torch_hook_test), or by hand after
scripts/build_python.sh:
    SKETCHFUSE_HOOK_REFERENCE=bazel-bin/worker/hook/hook_reference \\
        PYTHONPATH=python /usr/bin/python3 -m unittest python/tests/test_torch_hook.py
"""
import csv
import functools
import json
import os
import signal
import struct
import subprocess
import sys
import tempfile
import time
import traceback
import unittest
import warnings

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import sketchfuse.torch as sft  # noqa: E402
from sketchfuse.adam import RankMoments  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
REFERENCE = os.environ.get("SKETCHFUSE_HOOK_REFERENCE", os.path.join(ROOT, "bazel-bin/worker/hook/hook_reference"))
SERVER = os.environ.get("SKETCHFUSE_SERVER", os.path.join(ROOT, "bazel-bin/server/sketchfuse_server"))


class FakeBucket:
    """What the hook reads of a DDP GradBucket, around given tensors."""

    def __init__(self, index, buffer, params, last):
        self._index, self._buffer, self._params, self._last = index, buffer, params, last

    def index(self):
        return self._index

    def buffer(self):
        return self._buffer

    def parameters(self):
        return self._params

    def is_last(self):
        return self._last


def gradients(world, steps, dim, seed=7):
    rng = np.random.RandomState(seed)
    g = rng.normal(0, 0.1, size=(steps, world, dim)).astype(np.float32)
    g[:, :, ::97] += 1.0  # heavy coordinates shared by the ranks
    return g


def _spawn(fn, world, *args, backend="gloo"):
    """Runs fn(rank, world, *args) on `world` processes in a `backend` group; returns each rank's result dict."""
    with tempfile.TemporaryDirectory() as tmp:
        init_file = os.path.join(tmp, "init")
        mp.spawn(_entry, args=(fn, world, init_file, tmp, args, backend), nprocs=world, join=True)
        return [torch.load(os.path.join(tmp, f"rank{r}.pt"), map_location="cpu") for r in range(world)]


def _entry(rank, fn, world, init_file, out_dir, args, backend):
    torch.set_num_threads(1)
    dist.init_process_group(backend, init_method=f"file://{init_file}", rank=rank, world_size=world)
    try:
        result = fn(rank, world, *args)
    except BaseException:  # noqa: BLE001 - reported to the parent
        result = {"exception": traceback.format_exc()}
    torch.save(result, os.path.join(out_dir, f"rank{rank}.pt"))
    try:
        dist.barrier()
    finally:
        dist.destroy_process_group()


# -- the processes' work -------------------------------------------------------

def _aggregate(rank, world, schemes, grads, split):
    out = {}
    params = [torch.zeros(n) for n in split]
    for scheme, compressor in schemes:
        state = sft.HookState(scheme, compressor, seed=3)
        means = []
        for step in range(grads.shape[0]):
            bucket = FakeBucket(0, torch.from_numpy(grads[step, rank].copy()), params, True)
            means.append(sft.hook(state, bucket).wait().numpy().copy())
        out[scheme] = np.stack(means)
        out[scheme + "/stats"] = state.stats()
        del state
    return out


class SmallNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(20, 64)
        self.fc2 = torch.nn.Linear(64, 32)
        self.fc3 = torch.nn.Linear(32, 5)

    def forward(self, x):
        return self.fc3(torch.relu(self.fc2(torch.relu(self.fc1(x)))))


def _batch(rank, step):
    g = torch.Generator().manual_seed(1000 * step + rank)
    x = torch.randn(16, 20, generator=g)
    return x, (x[:, 0] > 0).long() + 2 * (x[:, 1] > 0).long()


def _falling_rate(step):
    """A learning rate that changes every step (0.1, then down by a tenth a step, then up again)."""
    return 0.1 * (1.0 - 0.1 * (step % 7))


def _train(rank, scheme, compressor, steps, bucket_cap_mb, load=None, save=False, nan_at=None, nan_rank=None,
           before_step=None, device="cpu", hook_device=None, adamw=False, dense_warmup=0, lr_at=None, **hook_options):
    if hook_device is not None:
        hook_options["device"] = hook_device
    torch.manual_seed(0)
    model = SmallNet().to(device)
    ddp = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=bucket_cap_mb,
                                                    device_ids=[0] if device == "cuda" else None)
    if adamw:  # Adam's moments in the hook
        optimizer = sft.AdamW(ddp.parameters(), lr=0.01, betas=(0.9, 0.95), weight_decay=0.1,
                              dense_warmup_steps=dense_warmup)
    else:
        optimizer = torch.optim.SGD(ddp.parameters(), lr=0.1)
    state = sft.HookState(scheme, compressor, seed=5, optimizer=optimizer, **hook_options)
    ddp.register_comm_hook(state, sft.hook)
    first = 0
    if load is not None:
        model.load_state_dict(load["model"])
        optimizer.load_state_dict(load["optimizer"])
        state.load_state_dict(load["hook"])
        first = load["step"]
    for step in range(first, first + steps):
        if before_step is not None:
            before_step(step)
        if lr_at is not None:
            for group in optimizer.param_groups:
                group["lr"] = lr_at(step)
        x, y = _batch(rank, step)
        if step == nan_at and rank == nan_rank:
            x[3, 4] = float("nan")
        x, y = x.to(device), y.to(device)
        loss = torch.nn.functional.cross_entropy(ddp(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    saved = None
    if save:
        saved = {"model": {k: v.clone() for k, v in model.state_dict().items()},
                 "optimizer": optimizer.state_dict(), "hook": state.state_dict(), "step": first + steps}
    params = [p.detach().cpu().clone() for p in model.parameters()]
    stats = state.stats()
    del ddp, state
    return params, saved, stats


def _as_version_1(hook):
    """A version-2 hook state as version 1 wrote it: FetchSGD's sketches under "sketch_state", the error
    as "residual" and the momentum as "velocity"."""
    old = {k: v for k, v in hook.items() if k != "method_state"}
    old["version"] = 1
    old["sketch_state"] = {}
    for index, entry in hook["method_state"].items():
        half = entry["state"].numel() // 2
        old["sketch_state"][index] = {"signature": entry["signature"], "velocity": entry["state"][:half],
                                      "residual": entry["state"][half:]}
    old["job_groups"] = {g: {"residual": e["residual"], "velocity": e["velocity"]}
                         for g, e in hook["job_groups"].items()}
    return old


def _resume(rank, world, scheme, compressor, bucket_cap_mb, as_version_1=False, adamw=False, dense_warmup=0,
            lr_at=None):
    adam = {"adamw": adamw, "dense_warmup": dense_warmup, "lr_at": lr_at}
    whole, _, stats = _train(rank, scheme, compressor, 8, bucket_cap_mb, **adam)
    _, saved, _ = _train(rank, scheme, compressor, 4, bucket_cap_mb, save=True, **adam)
    saved = _roundtrip(saved, rank)
    if as_version_1:
        saved["hook"] = _as_version_1(saved["hook"])
    resumed, _, resumed_stats = _train(rank, scheme, compressor, 4, bucket_cap_mb, load=saved, **adam)
    return {"whole": whole, "resumed": resumed, "stats": stats, "resumed_stats": resumed_stats,
            "saved_keys": sorted(saved["hook"]["params"]), "saved_rates": saved["hook"].get("residual_rates"),
            "saved_moments": sorted((saved["hook"].get("adam_moments") or {}).items(),
                                    key=lambda item: item[0]),
            "method_state": {i: e["signature"] for i, e in saved["hook"].get("method_state", {}).items()}}


def _rate_units(rank, world, rate_units):
    """Two steps of Top-k with error feedback and no momentum, the rate down from 0.1 to 0.025 between them.
    Returns, per parameter key and summed over the ranks, the residual after step 1 (e1) and after step 2
    (e2), the raw gradient of step 2 (g2, the same model without DDP on the same batch) and the mean update
    the hook gave step 2 (out2, in .grad)."""
    torch.manual_seed(0)
    model = SmallNet()
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.1)
    options = {} if rate_units is None else {"residual_in_rate_units": rate_units}
    state = sft.HookState("topk_allgather", "topk:density=0.05", seed=5, momentum=0.0, optimizer=optimizer, **options)
    ddp.register_comm_hook(state, sft.hook)

    def residuals():
        return {k: v["residual"].clone() for k, v in state.state_dict()["params"].items()}

    def step(s):
        x, y = _batch(rank, s)
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(ddp(x), y).backward()
        grads = {state._key_of[id(p)]: p.grad.reshape(-1).clone() for p in model.parameters()}
        optimizer.step()
        return grads

    step(0)
    e1 = residuals()
    for group in optimizer.param_groups:
        group["lr"] = 0.025
    plain = SmallNet()
    plain.load_state_dict(model.state_dict())
    x, y = _batch(rank, 1)
    torch.nn.functional.cross_entropy(plain(x), y).backward()
    g2 = {state._key_of[id(p)]: q.grad.reshape(-1).clone() for p, q in zip(model.parameters(), plain.parameters())}
    out2 = step(1)
    e2 = residuals()
    out = {"settings": state._agreed_settings(), "rates": state.state_dict()["residual_rates"]}
    for name, values in (("e1", e1), ("e2", e2), ("g2", g2)):
        for v in values.values():
            dist.all_reduce(v)
        out[name] = values
    out["out2"] = out2
    del ddp, state
    return out


def _roundtrip(obj, rank):
    """obj saved with torch.save and loaded back, as a checkpoint would be; the file is removed."""
    with tempfile.TemporaryDirectory(prefix=f"sketchfuse_hook_state_{rank}_") as folder:
        path = os.path.join(folder, "state.pt")
        torch.save(obj, path)
        return torch.load(path)


def _other_model(rank, world):
    _, saved, _ = _train(rank, "topk_allgather", "topk:density=0.05", 2, 25, save=True)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(20, 5), torch.nn.Linear(5, 5))
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    state = sft.HookState("topk_allgather", "topk:density=0.05", seed=5,
                          optimizer=torch.optim.SGD(ddp.parameters(), lr=0.1))
    ddp.register_comm_hook(state, sft.hook)
    state.load_state_dict(saved["hook"])
    try:
        ddp(torch.randn(4, 20)).sum().backward()
    except Exception as e:  # noqa: BLE001 - DDP wraps the hook's error
        return {"error": str(e)}
    return {"error": None}


def _cuda_and_host(rank, world):
    out = {}
    for scheme in ("dense_allreduce", "sketch_allreduce"):
        out[scheme] = {device: _train(rank, scheme, SKETCH if scheme == "sketch_allreduce" else None, 6, 25,
                                      device=device)[0] for device in ("cpu", "cuda")}
    return out


def _device_path(rank, world):
    """sketch_allreduce on CUDA buckets, staged through the host (device="cpu") and kept on the GPU
    (device="cuda"), from the same start; and the device path's state through a checkpoint."""
    out = {}
    for hook_device in ("cpu", "cuda"):
        params, saved, stats = _train(rank, "sketch_allreduce", SKETCH, 6, 25, save=True, device="cuda",
                                      hook_device=hook_device)
        out[hook_device] = params
        out[hook_device + "/stats"] = stats
        out[hook_device + "/state"] = saved["hook"]
    return out


def _resnet18(rank, world, device, steps=3, sketch_on_gpu=False):
    """torchvision's ResNet-18 of the example (examples/pytorch_ddp.py) on random 28x28 batches: DDP's own
    allreduce, then the hook with dense_allreduce and sketch_allreduce (sketch_on_gpu: with device="cuda"),
    from the same initial weights."""
    sys.path.insert(0, os.path.join(ROOT, "examples"))
    import pytorch_ddp  # noqa: E402 - the example's model, as a user runs it
    # cuDNN's default convolution algorithms add in an order that varies from run to run, so two runs of
    # DDP itself drift apart by 1e-2 within two steps (seen on an H200): compare with deterministic ones.
    torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = True, False
    out = {}
    for scheme in ("ddp", "dense_allreduce", "sketch_allreduce"):
        torch.manual_seed(0)
        model = pytorch_ddp.resnet18().to(device)
        out.setdefault("initial", [p.detach().cpu().clone() for p in model.parameters()])
        ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[0] if device == "cuda" else None)
        optimizer = torch.optim.SGD(ddp.parameters(), lr=0.05)
        state = None
        if scheme != "ddp":
            on_gpu = {"device": "cuda"} if sketch_on_gpu and scheme == "sketch_allreduce" else {}
            state = sft.HookState(scheme, None, seed=5, optimizer=optimizer, **on_gpu)
            ddp.register_comm_hook(state, sft.hook)
        g = torch.Generator().manual_seed(100 + rank)
        for _ in range(steps):
            x = torch.randn(8, 1, 28, 28, generator=g).to(device)
            y = torch.randint(0, 10, (8,), generator=g).to(device)
            loss = torch.nn.functional.cross_entropy(ddp(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        out[scheme] = [p.detach().cpu().clone() for p in model.parameters()]
        if state is not None:
            out[scheme + "/stats"] = state.stats()
        del ddp, state
    return out


def _nccl_one_rank(rank, world):
    params, _, stats = _train(rank, "sketch_allreduce", SKETCH, 4, 25, device="cuda")
    return {"params": params, "stats": stats}


def _bad_checkpoints(rank, world):
    _, saved, _ = _train(rank, "topk_allgather", "topk:density=0.05", 2, 25, save=True)
    # _train's optimizer (SGD: the residual in units of its rate)
    state = sft.HookState("topk_allgather", "topk:density=0.05", seed=5,
                          optimizer=torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.1))
    errors = []
    key = sorted(saved["hook"]["params"])[0]
    bad_cases = [
        {"version": 3},
        dict(saved["hook"], step=-1),
        dict(saved["hook"], stats=dict(saved["hook"]["stats"], bytes_sent=float("nan"))),
        dict(saved["hook"], params={key: {"residual": torch.tensor([float("inf")]), "velocity": None}}),
        dict(saved["hook"], settings=dict(saved["hook"]["settings"], compressor="topk:density=0.5")),
        dict(saved["hook"], residual_rates={key: float("nan")}),
        dict(saved["hook"], settings={k: v for k, v in saved["hook"]["settings"].items()
                                      if k != "residual_in_rate_units"}),
    ]
    for bad in bad_cases:
        try:
            state.load_state_dict(bad)
            errors.append(None)
        except ValueError as e:
            errors.append(str(e))
    return {"errors": errors, "step_after": state.step}


def _mismatch(rank, world):
    compressor = "topk:density=0.01" if rank == 1 else "topk:density=0.02"
    try:
        sft.HookState("topk_allgather", compressor)
    except ValueError as e:
        return {"error": str(e)}
    return {"error": None}


def _optimizers(rank, world):
    """The hook handed each optimizer: its settings, any warning, and rank 1's AdamW of another beta2."""
    p = torch.nn.Parameter(torch.zeros(3))
    out = {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        adamw = torch.optim.AdamW([p], lr=1e-3, betas=(0.9, 0.95), weight_decay=0.1)
        out["adamw"] = sft.HookState("sketch_allreduce", optimizer=adamw).settings
        out["sgd"] = sft.HookState("sketch_allreduce", optimizer=torch.optim.SGD([p], lr=0.1)).settings
        out["adam_with_momentum"] = sft.HookState("sketch_allreduce", optimizer=torch.optim.Adam([p]),
                                                  momentum=0.9).settings
        out["warnings"] = [str(w.message) for w in caught]
    beta2 = 0.95 if rank == 0 else 0.99
    try:
        sft.HookState("sketch_allreduce", optimizer=torch.optim.AdamW([p], betas=(0.9, beta2)))
        out["differing"] = None
    except ValueError as e:
        out["differing"] = str(e)
    return out


def _diverge(rank, world):
    try:
        _train(rank, "sketch_allreduce", None, 5, 25, nan_at=2, nan_rank=1)
    except Exception as e:  # noqa: BLE001 - DDP wraps the hook's error
        return {"error": f"{type(e).__name__}: {e}"}
    return {"error": None}


SKETCH = "count_sketch:method=peel,density=0.05,rows=4,width=4"


def _routes(rank, world, sketch_ps_address, dense_ps_address, adamw=False, lr_at=None):
    """Each scheme on both routes (adamw: with sketchfuse's AdamW, the moments on each rank for the
    sketch and of the mean for dense; lr_at: the learning rate of each step)."""
    out = {}
    # 0.004 MiB buckets: several buckets, rebuilt by DDP; the job's groups are the planner's.
    out["sketch_ps"] = _train(rank, "sketch_ps", SKETCH, 6, 0.004, coordinator=sketch_ps_address, job="ps",
                              adamw=adamw, lr_at=lr_at)
    out["sketch_allreduce"] = _train(rank, "sketch_allreduce", SKETCH, 6, 0.004, adamw=adamw, lr_at=lr_at)
    out["dense_ps"] = _train(rank, "dense_ps", None, 6, 25, coordinator=dense_ps_address, job="dense", adamw=adamw,
                             lr_at=lr_at)
    out["dense_allreduce"] = _train(rank, "dense_allreduce", None, 6, 25, adamw=adamw, lr_at=lr_at)
    return {k: (v[0], v[2]) for k, v in out.items()}


def _partitions(rank, world, address):
    refused = ""
    try:
        _train(rank, "dense_ps", None, 1, 25, coordinator=address, job="dense", partition_elements=500,
               join_timeout_s=10)
    except Exception as e:  # noqa: BLE001 - DDP wraps the hook's error
        refused = str(e)
    dense_ps = _train(rank, "dense_ps", None, 6, 25, coordinator=address, job="dense")[0]
    dense_allreduce = _train(rank, "dense_allreduce", None, 6, 25)[0]
    return {"dense_ps": dense_ps, "dense_allreduce": dense_allreduce, "refused": refused}


def _resume_centralized(rank, world, whole_address, split_address):
    whole, _, _ = _train(rank, "sketch_ps", SKETCH, 8, 0.004, coordinator=whole_address, job="ps")
    _, saved, _ = _train(rank, "sketch_ps", SKETCH, 4, 0.004, save=True, coordinator=split_address, job="ps")
    saved = _roundtrip(saved, rank)
    # A new DDP, a new hook: the workers restart and join the same job again (the servers keep running).
    resumed, _, stats = _train(rank, "sketch_ps", SKETCH, 4, 0.004, load=saved, coordinator=split_address,
                               job="ps")
    return {"whole": whole, "resumed": resumed, "job_groups": sorted(saved["hook"]["job_groups"]), "stats": stats}


def _auto_failover(rank, world, address, server_pid):
    def kill_server_at_step_3(step):
        if step == 3:
            dist.barrier()
            if rank == 0:
                os.kill(server_pid, signal.SIGKILL)
            dist.barrier()

    auto = _train(rank, "auto", SKETCH, 6, 25, before_step=kill_server_at_step_3, coordinator=address, job="auto",
                  push_attempts=2, probe_every=2)
    allreduce = _train(rank, "sketch_allreduce", SKETCH, 6, 25)
    return {"auto": auto[0], "allreduce": allreduce[0], "stats": auto[2]}


def _unreachable(rank, world):
    begin = time.monotonic()
    try:
        _train(rank, "sketch_ps", None, 1, 25, coordinator="127.0.0.1:1", join_timeout_s=2)
    except Exception as e:  # noqa: BLE001 - DDP wraps the hook's error
        return {"error": str(e), "seconds": time.monotonic() - begin}
    return {"error": None}


class Server:
    """A sketchfuse_server on free loopback ports: shard `shard` of `num_shards`, with the job's
    coordinator when it is shard 0, else registering with the coordinator at `coordinator`; its
    metrics endpoint too."""

    def __init__(self, job_config, tmp, name, shard=0, num_shards=1, coordinator=None):
        port_file = os.path.join(tmp, f"{name}.port")
        metrics_file = os.path.join(tmp, f"{name}.metrics_port")
        self.log = open(os.path.join(tmp, f"{name}.log"), "w")
        role = ["--coordinator"] if shard == 0 else [f"--coordinator_address={coordinator}"]
        self.process = subprocess.Popen([SERVER, f"--job_config={job_config}", f"--shard_index={shard}",
                                         f"--num_shards={num_shards}", *role, "--port=0", f"--port_file={port_file}",
                                         "--metrics_port=0", f"--metrics_port_file={metrics_file}"],
                                        stdout=self.log, stderr=subprocess.STDOUT)
        self.address = f"127.0.0.1:{self._wait_for(port_file)}"
        self.metrics_address = f"127.0.0.1:{self._wait_for(metrics_file)}"

    def _wait_for(self, port_file):
        deadline = time.monotonic() + 30
        while True:
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise RuntimeError(f"{SERVER} did not start; see {self.log.name}")
            if os.path.exists(port_file):
                with open(port_file) as f:
                    port = f.read().strip()
                if port:
                    return port
            time.sleep(0.05)

    def completed_rounds(self):
        """The rounds this shard completed (its metrics endpoint)."""
        import urllib.request
        with urllib.request.urlopen(f"http://{self.metrics_address}/metrics", timeout=10) as response:
            text = response.read().decode()
        return sum(float(line.split()[-1]) for line in text.splitlines()
                   if line.startswith("sketchfuse_server_rounds_total") and 'result="completed"' in line)

    def stop(self):
        if self.process.poll() is None:
            self.process.terminate()
        self.process.wait(timeout=30)
        self.log.close()


def _spawn_with_servers(fn, world, tmp, configs):
    """_spawn(fn, world, *addresses) with one server per entry of configs (name -> job config file in tmp)."""
    servers = []
    try:
        for name, config in configs.items():
            servers.append(Server(os.path.join(tmp, config), tmp, name))
        return _spawn(fn, world, *[server.address for server in servers])
    finally:
        for server in servers:
            server.stop()


def _shards_of_one_job(fn, world, tmp, config, num_shards):
    """_spawn(fn, world, coordinator) against `num_shards` shards of the job config `config` (in tmp);
    returns the ranks' results and each shard's completed rounds."""
    servers = []
    try:
        for s in range(num_shards):
            servers.append(Server(os.path.join(tmp, config), tmp, f"{config}-{num_shards}-{s}", shard=s,
                                  num_shards=num_shards, coordinator=servers[0].address if servers else None))
        results = _spawn(fn, world, servers[0].address)
        return results, [server.completed_rounds() for server in servers]
    finally:
        for server in servers:
            server.stop()


def _centralized_run(rank, world, address, scheme, compressor):
    params, _, stats = _train(rank, scheme, compressor, 6, 25, coordinator=address, job=scheme)
    return {"params": params, "stats": stats}


# -- the tests -------------------------------------------------------------------

class HookMatchesTheWorkersScheme(unittest.TestCase):
    def test_same_aggregates_as_the_cpp_scheme(self):
        world, steps, dim = 4, 5, 3000
        grads = gradients(world, steps, dim)
        schemes = [("sketch_allreduce", None), ("topk_allgather", "topk:density=0.02"), ("dense_allreduce", None),
                   ("dense_bf16_allreduce", None), ("gtopk", None), ("spardl", None)]
        results = _spawn(_aggregate, world, schemes, grads, [dim])
        for r, result in enumerate(results):
            self.assertNotIn("exception", result, result.get("exception"))
        with tempfile.TemporaryDirectory() as tmp:
            grads_path = os.path.join(tmp, "grads")
            with open(grads_path, "wb") as f:
                f.write(struct.pack("<3i", world, steps, dim))
                f.write(grads.astype("<f4").tobytes())
            for scheme, compressor in schemes:
                settings = os.path.join(tmp, "settings")
                with open(settings, "w") as f:
                    f.write(f"scheme={scheme}\ncompressor={compressor or ''}\nseed=3\n")
                out = os.path.join(tmp, "out")
                subprocess.run([REFERENCE, settings, grads_path, out], check=True)
                reference = np.fromfile(out, dtype="<f4").reshape(steps, world, dim)
                for r in range(world):
                    hooked = results[r][scheme]
                    # Torch's Gloo and the worker's add the ranks' values in
                    # the same ring order: the same bits are expected; 1e-6 of
                    # the largest value allows for a reordered sum.
                    scale = float(np.abs(reference).max())
                    np.testing.assert_allclose(hooked, reference[:, r], rtol=0, atol=1e-6 * scale,
                                               err_msg=f"{scheme}, rank {r}")
                    np.testing.assert_array_equal(hooked, results[0][scheme], err_msg=f"{scheme}: ranks differ")
                stats = results[0][scheme + "/stats"]
                self.assertEqual(stats["steps"], steps)
                self.assertEqual(stats["dense_bytes"], steps * dim * 4)
                self.assertGreater(stats["bytes_sent"], 0)
                if scheme not in ("dense_allreduce", "dense_bf16_allreduce"):
                    # The sketch's table has at least 512 cells (common/peel_capacity.h): 3.9x on this
                    # 3,000-element model; the others select 2% or less.
                    self.assertGreater(stats["compression_ratio"], 3.5 if scheme == "sketch_allreduce" else 5, scheme)
                if scheme == "sketch_allreduce":  # the table is sized for the 4 ranks: the peel gives ~all back
                    self.assertGreaterEqual(stats["peel_recovered_share"], 0.95)
                    self.assertEqual(stats["warnings"], [])
                else:
                    self.assertIsNone(stats["peel_recovered_share"], scheme)


class CentralizedRoute(unittest.TestCase):
    def _both_routes(self, adamw, lr_at=None, **job_options):
        """Trains _routes on both routes (servers started here); each rank's results, checked to match."""
        with tempfile.TemporaryDirectory() as tmp:
            torch.manual_seed(0)
            sft.write_job_config(SmallNet(), os.path.join(tmp, "ps.json"), "sketch_ps", SKETCH, world_size=2,
                                 job="ps", seed=5, **job_options)
            sft.write_job_config(SmallNet(), os.path.join(tmp, "dense.json"), "dense_ps", world_size=2, job="dense",
                                 seed=5, **job_options)
            results = _spawn_with_servers(functools.partial(_routes, adamw=adamw, lr_at=lr_at), 2, tmp,
                                          {"ps": "ps.json", "dense": "dense.json"})
        for r, result in enumerate(results):
            self.assertNotIn("exception", result, result.get("exception"))
            for central, decentral in (("sketch_ps", "sketch_allreduce"), ("dense_ps", "dense_allreduce")):
                for a, b in zip(result[central][0], result[decentral][0]):
                    torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6, msg=f"rank {r}: {central}")
            self.assertEqual(result["sketch_ps"][1]["steps"], 6)
        return results

    def test_through_the_servers_as_through_the_process_group(self):
        # Sketches and dense sums are linear: the shard's sum decodes to what
        # the allreduced sum decodes to, so both routes train alike.
        for result in self._both_routes(adamw=False):
            self.assertGreater(result["sketch_ps"][1]["compression_ratio"], 1.2)  # a sketch of 0.8 times the gradient

    def test_a_changing_rate_through_the_servers_as_through_the_process_group(self):
        # SGD's residual in units of the rate: rescaled per parameter over the job's groups on one route
        # and over DDP's buckets on the other, to the same residuals.
        self._both_routes(adamw=False, lr_at=_falling_rate)

    def test_sketchfuse_adamw_through_the_servers_as_through_the_process_group(self):
        # Adam's moments in the hook on the centralized route: the same updates as on the ring.
        self._both_routes(adamw=True, optimizer="adamw:beta1=0.9,beta2=0.95,eps=1e-08,weight_decay=0.1", momentum=0.0)

    def test_partitions_train_as_whole_groups(self):
        # The job cuts SmallNet's 3,589 elements into 4 partitions: a dense sum per partition is the dense
        # sum, so dense_ps over partitions ends where dense_allreduce does; a rank that states another bound
        # than the job's is refused at join, naming the field.
        with tempfile.TemporaryDirectory() as tmp:
            torch.manual_seed(0)
            config = os.path.join(tmp, "dense.json")
            sft.write_job_config(SmallNet(), config, "dense_ps", world_size=2, job="dense", seed=5,
                                 partition_elements=1000)
            with open(config) as f:
                self.assertEqual(len(json.load(f)["groups"]), 4)
            results = _spawn_with_servers(_partitions, 2, tmp, {"dense": "dense.json"})
        for r, result in enumerate(results):
            self.assertNotIn("exception", result, result.get("exception"))
            for a, b in zip(result["dense_ps"], result["dense_allreduce"]):
                torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6, msg=f"rank {r}: dense_ps over partitions")
            self.assertIn("partition_elements: job has 1000, worker has 500", result["refused"])

    def test_partitions_on_two_shards_end_as_on_one(self):
        # The hook's centralized schemes over a job cut into 4 partitions: served by two shards (each
        # completes rounds of its own partitions) they end, to the bit, where the same job on one shard
        # ends, since every partition is summed and decoded alone wherever it is served.
        schemes = [("sketch_ps", SKETCH), ("topk_ps", "topk:density=0.05"), ("dense_ps", None)]
        with tempfile.TemporaryDirectory() as tmp:
            for scheme, compressor in schemes:
                with self.subTest(scheme=scheme):
                    torch.manual_seed(0)
                    config = f"{scheme}.json"
                    sft.write_job_config(SmallNet(), os.path.join(tmp, config), scheme, compressor, world_size=2,
                                         job=scheme, seed=5, partition_elements=1000)
                    with open(os.path.join(tmp, config)) as f:
                        self.assertEqual(len(json.load(f)["groups"]), 4)
                    runs = {}
                    for shards in (1, 2):
                        results, rounds = _shards_of_one_job(
                            functools.partial(_centralized_run, scheme=scheme, compressor=compressor), 2, tmp,
                            config, shards)
                        for r, result in enumerate(results):
                            self.assertNotIn("exception", result, result.get("exception"))
                        # 6 steps of 4 partitions (a partition's rounds: 1 per step for these schemes).
                        self.assertEqual(sum(rounds), 6 * 4, rounds)
                        self.assertTrue(all(n > 0 for n in rounds), f"{shards} shards: rounds per shard {rounds}")
                        runs[shards] = results
                    for r in range(2):
                        for a, b in zip(runs[1][r]["params"], runs[2][r]["params"]):
                            torch.testing.assert_close(a, b, rtol=0, atol=0, msg=f"{scheme}, rank {r}: 2 shards")
                        self.assertEqual(runs[1][r]["stats"]["steps"], 6)

    def test_auto_trains_on_when_its_server_is_killed(self):
        # auto pushes to the shard, falls back to the process group (sketch_allreduce's algorithm) when the
        # shard dies after step 2, and ends where sketch_allreduce does: the two routes' updates are equal.
        with tempfile.TemporaryDirectory() as tmp:
            torch.manual_seed(0)
            config = os.path.join(tmp, "auto.json")
            sft.write_job_config(SmallNet(), config, "auto", SKETCH, world_size=2, job="auto", seed=5,
                                 push_attempts=2, probe_every=2)
            server = Server(config, tmp, "auto")
            try:
                results = _spawn(_auto_failover, 2, server.address, server.process.pid)
            finally:
                server.stop()
        for r, result in enumerate(results):
            self.assertNotIn("exception", result, result.get("exception"))
            self.assertEqual(result["stats"]["steps"], 6)
            for a, b in zip(result["auto"], result["allreduce"]):
                torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6, msg=f"rank {r}")

    def test_a_resumed_run_ends_as_an_uninterrupted_one(self):
        with tempfile.TemporaryDirectory() as tmp:
            torch.manual_seed(0)
            config = os.path.join(tmp, "ps.json")
            sft.write_job_config(SmallNet(), config, "sketch_ps", SKETCH, world_size=2, job="ps", seed=5)
            results = _spawn_with_servers(_resume_centralized, 2, tmp, {"whole": "ps.json", "split": "ps.json"})
        for r, result in enumerate(results):
            self.assertNotIn("exception", result, result.get("exception"))
            self.assertGreaterEqual(len(result["job_groups"]), 1)
            self.assertEqual(result["stats"]["steps"], 8)
            for a, b in zip(result["whole"], result["resumed"]):
                self.assertTrue(torch.equal(a, b), f"rank {r}: the resumed sketch_ps run ends elsewhere")

    def test_an_unreachable_coordinator_fails_within_the_join_timeout(self):
        results = _spawn(_unreachable, 1)
        self.assertNotIn("exception", results[0], results[0].get("exception"))
        self.assertIsNotNone(results[0]["error"])
        self.assertIn("joining job 'sketchfuse' at 127.0.0.1:1", results[0]["error"])
        self.assertLess(results[0]["seconds"], 30)


class StateDictRoundTrip(unittest.TestCase):
    def _check(self, scheme, compressor, bucket_cap_mb, as_version_1=False):
        results = _spawn(_resume, 2, scheme, compressor, bucket_cap_mb, as_version_1)
        for r, result in enumerate(results):
            self.assertNotIn("exception", result, result.get("exception"))
            for a, b in zip(result["whole"], result["resumed"]):
                self.assertTrue(torch.equal(a, b), f"rank {r}: the resumed run ends elsewhere ({scheme})")
            self.assertEqual(len(result["saved_keys"]), 6)  # every parameter's residual and velocity
            self.assertEqual(result["resumed_stats"]["steps"], 8)
        return results

    def test_fetchsgd_keeps_its_sketches_as_the_method_state(self):
        for as_version_1 in (False, True):  # and a checkpoint of version 1 still resumes exactly
            results = self._check("sketch_allreduce", "count_sketch:method=fetchsgd,density=0.05,rows=1,width=5",
                                  25, as_version_1)
            self.assertEqual(list(results[0]["method_state"]), [] if as_version_1 else [0])

    def test_one_bucket(self):
        self._check("sketch_allreduce", "count_sketch:method=peel,density=0.05,rows=4,width=4", 25)
        self._check("sketch_allreduce", "count_sketch:method=peel,density=0.05,rows=4,width=4", 25, as_version_1=True)

    def test_many_buckets_rebuilt_by_ddp(self):
        # Buckets of about 1,000 elements: DDP splits the 3,600 parameters and
        # rebuilds the buckets after the first iteration.
        self._check("topk_allgather", "topk:density=0.05", 0.004)


class ResidualInRateUnits(unittest.TestCase):
    """Handed torch's SGD, the hook keeps error feedback's residual in units of the learning rate, as the
    worker does (--residual_in_rate_units): when the rate goes from r to r' what waits is multiplied by r / r'
    before the next step adds to it, so it is applied at the rate of the steps that made it."""

    def _owed(self, rate_units, factor):
        results = _spawn(_rate_units, 2, rate_units)
        for r, result in enumerate(results):
            self.assertNotIn("exception", result, result.get("exception"))
        result = results[0]
        self.assertGreater(sum(e1.abs().sum().item() for e1 in result["e1"].values()), 0,
                           "Top-k at 5% left nothing waiting")
        for key, e1 in result["e1"].items():
            # Summed over the two ranks: what they sent (twice the mean update) and what waits now is what
            # waited, rescaled, and the step's gradients (momentum 0: no velocity).
            sent_and_waiting = 2 * result["out2"][key] + result["e2"][key]
            owed = factor * e1 + result["g2"][key]
            torch.testing.assert_close(sent_and_waiting, owed, rtol=1e-5, atol=1e-6, msg=f"parameter {key}")
        return result

    def test_the_default_with_sgd_rescales_the_residual_when_the_rate_changes(self):
        result = self._owed(None, 0.1 / 0.025)
        self.assertTrue(result["settings"]["residual_in_rate_units"])
        self.assertEqual(set(result["rates"].values()), {0.025})

    def test_raw_gradients_when_asked(self):
        result = self._owed(False, 1.0)
        self.assertNotIn("residual_in_rate_units", result["settings"])

    def test_a_resumed_run_under_a_schedule_ends_as_an_uninterrupted_one(self):
        results = _spawn(_resume, 2, "topk_allgather", "topk:density=0.05", 0.004, False, False, 0, _falling_rate)
        for r, result in enumerate(results):
            self.assertNotIn("exception", result, result.get("exception"))
            for a, b in zip(result["whole"], result["resumed"]):
                self.assertTrue(torch.equal(a, b), f"rank {r}: the resumed run ends elsewhere")
            self.assertEqual(set(result["saved_rates"].values()), {_falling_rate(3)})


class Registry(unittest.TestCase):
    def test_schemes_are_the_workers_registry(self):
        listed = sft.schemes()
        names = [s["name"] for s in listed]
        self.assertEqual(len(names), len(set(names)))
        for name in ("sketch_ps", "sketch_allreduce", "fixed_sketch_auto", "dense_allreduce", "spardl"):
            self.assertIn(name, names)
        by = {s["name"]: s for s in listed}
        self.assertEqual(by["sketch_allreduce"]["route"], "decentralized")
        self.assertEqual(by["auto"]["hybrid_of"]["decentralized"], "sketch_allreduce")
        self.assertFalse(by["dense_allreduce"]["compresses"])
        # Every listed scheme is one HookState knows: it gets as far as what its route
        # needs (a coordinator for the centralized and hybrid ones, a process group for
        # the others; neither exists here).
        for s in listed:
            with self.assertRaises((ValueError, RuntimeError), msg=s["name"]) as caught:
                sft.HookState(s["name"])
            needs = "not initialized" if s["route"] == "decentralized" else "aggregates on the servers"
            if s["compressor"] == "powersgd" and s["route"] == "decentralized":
                needs = "needs the layers' shapes"  # PowerSGD: the hook has DDP's flat buckets
            self.assertIn(needs, str(caught.exception), s["name"])


class BadInput(unittest.TestCase):
    def test_refused_before_any_communication(self):
        # No process group exists here: each of these must fail before needing one.
        cases = [
            (("nope",), {}, "scheme 'nope'"),
            (("sketch_allreduce", "count_sketch:rows=x"), {}, "compressor"),
            (("sketch_allreduce",), {"device": "tpu"}, "setting 'device'"),
            (("sketch_allreduce", "topk:density=0.1"), {}, "compressor"),
            (("topk_allgather",), {"momentun": 0.9}, "unknown option(s) momentun"),
            (("topk_allgather",), {"momentum": 1.5}, "momentum"),
            (("topk_allgather",), {"release_cap": float("nan")}, "release_cap"),
            (("sketch_ps",), {}, "aggregates on the servers"),
            (("topk_allgather",), {"coordinator": "127.0.0.1:7070"}, "joins no coordinator"),
            (("sketch_ps",), {"coordinator": "h:1", "push_attempts": 0}, "push_attempts"),
            (("sketch_ps",), {"coordinator": "h:1\nscheme=dense_ps"}, "one-line string"),
            ((3,), {}, "scheme must be"),
        ]
        for args, kwargs, expected in cases:
            with self.assertRaises(ValueError, msg=str((args, kwargs))) as caught:
                sft.HookState(*args, **kwargs)
            self.assertIn(expected, str(caught.exception), str((args, kwargs)))

    def test_the_device_path_needs_a_gpu_and_a_sketch(self):
        if not torch.cuda.is_available():
            with self.assertRaisesRegex(ValueError, "needs a GPU"):
                sft.HookState("sketch_allreduce", device="cuda")
        else:
            with self.assertRaisesRegex(ValueError, "count_sketch schemes"):
                sft.HookState("topk_allgather", device="cuda")
            with self.assertRaisesRegex(ValueError, "second round"):
                sft.HookState("sketch_allreduce", device="cuda", second_round=True)

    def test_residual_in_rate_units_needs_sgd_and_a_residual(self):
        p = torch.nn.Parameter(torch.zeros(3))
        cases = [(dict(optimizer=sft.AdamW([p]), residual_in_rate_units=True), "sketchfuse AdamW keeps its updates"),
                 (dict(residual_in_rate_units=True), "got None"),
                 (dict(optimizer=torch.optim.SGD([p], lr=0.1), residual_in_rate_units="yes"), "True or False"),
                 (dict(optimizer=torch.optim.SGD([p], lr=0.1), residual_in_rate_units=True, error_feedback=False),
                  "no residual to keep")]
        for options, words in cases:
            with self.assertRaisesRegex(ValueError, words):
                sft.HookState("topk_allgather", **options)
        with self.assertRaisesRegex(ValueError, "no residual to keep"):
            sft.HookState("dense_allreduce", optimizer=torch.optim.SGD([p], lr=0.1), residual_in_rate_units=True)

    def test_optimizer_with_momentum_is_refused(self):
        p = torch.nn.Parameter(torch.zeros(3))
        with self.assertRaisesRegex(ValueError, "keeps momentum"):
            sft.HookState("sketch_allreduce", optimizer=torch.optim.SGD([p], lr=0.1, momentum=0.9))

    def test_needs_a_process_group(self):
        with self.assertRaisesRegex(RuntimeError, "not initialized"):
            sft.HookState("sketch_allreduce")

    def test_malformed_checkpoints_are_refused_and_change_nothing(self):
        result = _spawn(_bad_checkpoints, 1)[0]
        self.assertNotIn("exception", result, result.get("exception"))
        expected = ["not a hook state of version 1 or 2", "saved step -1", "saved counter bytes_sent",
                    "is not finite", "settings differ in compressor", "saved residual_rates",
                    "settings differ in residual_in_rate_units (saved None, now True)"]
        self.assertEqual(len(result["errors"]), len(expected))
        for error, words in zip(result["errors"], expected):
            self.assertIsNotNone(error, f"accepted a checkpoint with {words!r}")
            self.assertIn(words, error)
        self.assertEqual(result["step_after"], 0)

    def test_a_checkpoint_of_another_model_is_refused(self):
        results = _spawn(_other_model, 1)
        self.assertNotIn("exception", results[0], results[0].get("exception"))
        self.assertIsNotNone(results[0]["error"], "another model's state was taken")
        self.assertIn("a checkpoint of another model", results[0]["error"])

    def test_ranks_with_different_settings_all_fail_naming_the_field(self):
        results = _spawn(_mismatch, 2)
        for r, result in enumerate(results):
            self.assertNotIn("exception", result, result.get("exception"))
            self.assertIsNotNone(result["error"], f"rank {r} accepted differing settings")
            self.assertIn("differ in compressor", result["error"])

    def test_the_hook_follows_the_optimizer_it_is_handed(self):
        self.assertEqual(sft.optimizer_spec(torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.1)), "sgd")
        self.assertIsNone(sft.optimizer_spec(torch.optim.RMSprop([torch.nn.Parameter(torch.zeros(1))])))
        results = _spawn(_optimizers, 2)
        for r, result in enumerate(results):
            self.assertNotIn("exception", result, result.get("exception"))
            adamw = dict(line.split("=", 1) for line in result["adamw"].splitlines())
            self.assertEqual(float(adamw["momentum"]), 0.0, "AdamW keeps the momentum: the hook keeps none")
            self.assertEqual(adamw["optimizer"], "adamw:beta1=0.9,beta2=0.95,eps=1e-08,weight_decay=0.1")
            sgd = dict(line.split("=", 1) for line in result["sgd"].splitlines())
            self.assertEqual(float(sgd["momentum"]), 0.9, "SGD without momentum: the hook keeps it")
            self.assertNotIn("optimizer", sgd)
            self.assertIn("momentum=0.9", result["adam_with_momentum"])
            # torch's AdamW and Adam on the aggregated update of a compressing scheme: named, with the fix;
            # and two momenta.
            self.assertEqual(len(result["warnings"]), 3, result["warnings"])
            self.assertIn("AdamW on the aggregated update of 'sketch_allreduce'", result["warnings"][0])
            self.assertIn("sketchfuse.torch.AdamW keeps Adam's moments on each rank", result["warnings"][0])
            self.assertIn("two momenta", result["warnings"][1])
            self.assertIn("Adam on the aggregated update", result["warnings"][2])
            self.assertIsNotNone(result["differing"], f"rank {r} accepted another rank's AdamW")
            self.assertIn("differ in optimizer", result["differing"])

    def test_a_nan_on_one_rank_stops_every_rank_at_that_step(self):
        results = _spawn(_diverge, 2)
        for r, result in enumerate(results):
            self.assertNotIn("exception", result, result.get("exception"))
            self.assertIsNotNone(result["error"], f"rank {r} trained through a NaN")
            self.assertIn("non-finite gradient at step 2", result["error"])
            self.assertIn("on rank 1", result["error"])


def _adam_runs(rank, world):
    """SmallNet for 5 steps: DDP with torch's AdamW, and the hook's dense_allreduce and topk_allgather
    with sketchfuse's AdamW; then what the hook refuses around it."""
    out = {}
    for scheme in ("ddp", "dense_allreduce", "topk_allgather"):
        torch.manual_seed(0)
        model = SmallNet()
        ddp = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=0.004)  # several buckets, rebuilt
        kind = torch.optim.AdamW if scheme == "ddp" else sft.AdamW
        optimizer = kind(ddp.parameters(), lr=0.01, betas=(0.9, 0.95), weight_decay=0.1)
        state = None
        if scheme != "ddp":
            state = sft.HookState(scheme, "topk:density=0.1" if scheme == "topk_allgather" else None,
                                  optimizer=optimizer)
            ddp.register_comm_hook(state, sft.hook)
        for step in range(5):
            x, y = _batch(rank, step)
            loss = torch.nn.functional.cross_entropy(ddp(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        out[scheme] = [p.detach().clone() for p in model.parameters()]
        if state is not None:
            out[scheme + "/settings"] = state._agreed_settings()
            out[scheme + "/ratio"] = state.stats()["compression_ratio"]
        del ddp, state
    # A checkpoint of torch's AdamW through the hook does not resume sketchfuse's (no moments), and back.
    p = torch.nn.Parameter(torch.zeros(3))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        saved = sft.HookState("topk_allgather", optimizer=torch.optim.AdamW([p])).state_dict()
    mine = sft.HookState("topk_allgather", optimizer=sft.AdamW([p]))
    try:
        mine.load_state_dict(saved)
        out["loaded_without_moments"] = None
    except ValueError as e:
        out["loaded_without_moments"] = str(e)
    broken = mine.state_dict()
    broken["adam_moments"] = {"0.0": {"first": torch.zeros(3), "second": -torch.ones(3), "steps": 2}}
    try:
        mine.load_state_dict(broken)
        out["negative_second_moment"] = None
    except ValueError as e:
        out["negative_second_moment"] = str(e)
    return out


class AdamOnEachRank(unittest.TestCase):
    """sketchfuse.torch.AdamW: the hook keeps Adam's moments (python/sketchfuse/adam.py)."""

    def test_the_moments_give_torch_adams_step(self):
        # Pieces of many sizes in one flat gradient, each at its own rate, 6 steps: the update is
        # torch.optim.Adam's step (no decay) at those rates, to float rounding.
        torch.manual_seed(3)
        sizes = [1, 7, 100, 1000, 4097]
        rates = [1.0, 0.5, 2e-3, 1e-4, 0.25]
        params = [torch.nn.Parameter(torch.zeros(n)) for n in sizes]  # small: the differences keep their digits
        reference = torch.optim.Adam([{"params": [p], "lr": r} for p, r in zip(params, rates)], betas=(0.9, 0.95),
                                     eps=1e-8)
        moments = RankMoments(0.9, 0.95, 1e-8)
        pieces, at = [], 0
        for i, n in enumerate(sizes):
            pieces.append((f"0.{i}", at, n, rates[i]))
            at += n
        for step in range(6):
            grads = [torch.randn(n) * (10.0 ** (i - 2)) for i, n in enumerate(sizes)]
            before = [p.detach().clone() for p in params]
            for p, g in zip(params, grads):
                p.grad = g.clone()
            reference.step()
            update = moments.update(torch.cat(grads), pieces)
            for i, (b, p) in enumerate(zip(before, params)):
                _, at_i, n, rate = pieces[i]
                torch.testing.assert_close(update[at_i:at_i + n], b - p.detach(), rtol=1e-5, atol=1e-6 * rate,
                                           msg=f"step {step}, piece {i}")
        # A non-finite gradient leaves the moments alone (the hook's finite check stops the step).
        saved = moments.state_dict()
        bad = torch.zeros(at)
        bad[5] = float("nan")
        self.assertIs(moments.update(bad, pieces), bad)
        for key, entry in moments.state_dict().items():
            self.assertTrue(torch.equal(entry["first"], saved[key]["first"]))
            self.assertEqual(entry["steps"], 6)

    def test_the_scaled_second_moment_is_the_mean_gradients_size(self):
        # Four simulated ranks whose gradients share a mean mu and differ by noise of mu's size, per
        # piece: a rank's E g^2 is mu^2 + sigma^2, the mean gradient's mu^2 + sigma^2 / 4, so the
        # scale is 1.25 / 2 = 0.625 where the noise is as large as the mean (and 1 with no noise: within 0.05). The
        # sketch estimates it within 0.08 after 150 steps (64 buckets: each step's estimate is within
        # about 18%, the average over beta2's 20 steps within about 4%); the direction is Adam's with
        # v times that scale.
        torch.manual_seed(4)
        world, beta2 = 4, 0.95
        sizes, noise_of = [3000, 5000], [1.0, 0.0]
        pieces = [("0.0", 0, sizes[0], 1e-3), ("0.1", sizes[0], sizes[1], 1e-3)]
        mean = torch.randn(sum(sizes))
        ranks = [RankMoments(0.9, beta2, 1e-8, scaled=True, world=world) for _ in range(world)]
        for step in range(150):
            grads = []
            for _ in range(world):
                g = mean.clone()
                g[:sizes[0]] += noise_of[0] * torch.randn(sizes[0])
                grads.append(g)
            summed = sum(m.noise_summary(g, pieces) for m, g in zip(ranks, grads))
            updates = [m.update(g, pieces, summed) for m, g in zip(ranks, grads)]
        entry = ranks[0].noise
        scales = [min(1.0, max(1 / world, entry[key][0] / entry[key][1])) for key, _, _, _ in pieces]
        self.assertAlmostEqual(scales[0], 0.625, delta=0.08)
        self.assertAlmostEqual(scales[1], 1.0, delta=0.05)
        for m in ranks[1:]:
            self.assertEqual(m.noise, entry, "the ranks' scales differ")
        m, v, t = ranks[1].moments["0.0"]
        expected = 1e-3 * (m / (1 - 0.9 ** t)) / ((v * scales[0] / (1 - beta2 ** t)).sqrt() + 1e-8)
        torch.testing.assert_close(updates[1][:sizes[0]], expected, rtol=1e-5, atol=1e-9)
        # saved and loaded with the moments; a malformed pair is refused
        saved = ranks[1].state_dict()
        self.assertEqual(saved["0.1"]["noise"], entry["0.1"])
        fresh = RankMoments(0.9, beta2, 1e-8, scaled=True, world=world)
        fresh.load_state_dict(saved)
        self.assertEqual(fresh.noise, entry)
        for bad in ([1.0], [float("nan"), 1.0], None):
            broken = {k: dict(v) for k, v in saved.items()}
            broken["0.0"]["noise"] = bad
            if bad is None:
                del broken["0.0"]["noise"]
            with self.assertRaisesRegex(ValueError, "parameter 0.0 (is not two finite|have no second-moment noise)"):
                fresh.load_state_dict(broken)
        self.assertEqual(fresh.noise, entry)

    def test_refusals(self):
        p = torch.nn.Parameter(torch.zeros(3))
        with self.assertRaisesRegex(ValueError, "second_moment must be one of scaled, rank"):
            sft.AdamW([p], second_moment="global")
        with self.assertRaisesRegex(ValueError, "after a dense warm-up the second moment is frozen"):
            sft.AdamW([p], second_moment="scaled", dense_warmup_steps=5)
        with self.assertRaisesRegex(RuntimeError, "steps the Adam directions a HookState computes"):
            sft.AdamW([p]).step()
        with self.assertRaisesRegex(ValueError, "whose first moment the hook keeps already"):
            sft.HookState("topk_allgather", optimizer=sft.AdamW([p]), momentum=0.9)
        with self.assertRaisesRegex(ValueError, "betas\[1\] 1.5 is out of range"):
            sft.AdamW([p], betas=(0.9, 1.5))
        with self.assertRaisesRegex(ValueError, "eps nan is out of range"):
            sft.AdamW([p], eps=float("nan"))
        with self.assertRaisesRegex(ValueError, "dense_warmup_steps must be an integer >= 0"):
            sft.AdamW([p], dense_warmup_steps=-1)
        with self.assertRaisesRegex(ValueError, "decentralized schemes only"):
            sft.HookState("sketch_ps", coordinator="127.0.0.1:1", optimizer=sft.AdamW([p], dense_warmup_steps=5))
        with self.assertRaisesRegex(ValueError, "only lr and weight_decay may differ"):
            sft.AdamW([{"params": [p]}, {"params": [torch.nn.Parameter(torch.zeros(2))], "betas": (0.8, 0.9)}])
        self.assertEqual(sft.optimizer_spec(sft.AdamW([p], betas=(0.9, 0.95), weight_decay=0.1)),
                         "adamw:beta1=0.9,beta2=0.95,eps=1e-08,weight_decay=0.1")

    def test_dense_is_torch_adamw_and_compressed_ranks_agree(self):
        results = _spawn(_adam_runs, 2)
        for r, result in enumerate(results):
            self.assertNotIn("exception", result, result.get("exception"))
            # Nothing compressed: the moments of the mean gradient, torch's AdamW to rounding.
            for a, b in zip(result["ddp"], result["dense_allreduce"]):
                torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-6, msg=f"rank {r}")
            self.assertEqual(result["dense_allreduce/settings"]["adam_moments"], "mean")
            self.assertEqual(result["topk_allgather/settings"]["adam_moments"], "rank")
            self.assertGreater(result["topk_allgather/ratio"], 3)
            for a, b, c in zip(result["topk_allgather"], results[0]["topk_allgather"], result["ddp"]):
                self.assertTrue(torch.equal(a, b), f"rank {r}: the ranks' models differ")
                self.assertFalse(torch.equal(a, c), "the compressed run is dense's")
            self.assertIn("settings differ in adam_moments", result["loaded_without_moments"] or "")
            self.assertIn("second moment >= 0", result["negative_second_moment"] or "")

    def test_a_resumed_run_continues_with_its_moments(self):
        for dense_warmup in (0, 3):  # the checkpoint after the warm-up holds the frozen denominators
            results = _spawn(_resume, 2, "topk_allgather", "topk:density=0.05", 0.004, False, True, dense_warmup)
            for r, result in enumerate(results):
                self.assertNotIn("exception", result, result.get("exception"))
                for a, b in zip(result["whole"], result["resumed"]):
                    self.assertTrue(torch.equal(a, b), f"rank {r}: the resumed run ends elsewhere ({dense_warmup})")
                self.assertEqual([key for key, _ in result["saved_moments"]], result["saved_keys"])
                for _, entry in result["saved_moments"]:
                    self.assertEqual(entry["steps"], 4)
                    self.assertEqual("frozen_denominator" in entry, dense_warmup > 0)
                    self.assertEqual("noise" in entry, dense_warmup == 0)  # the scaled second moment's
                # The warm-up's dense steps are counted: 3 of 8 steps send the whole gradient (a ring of 2);
                # without it the scaled second moment's summaries, 65 floats a parameter, are (SmallNet has
                # 6 parameters of 3,600 elements: 11% of the dense bytes).
                ratio = result["stats"]["compression_ratio"]
                if dense_warmup:
                    self.assertLess(ratio, 8 / 3)
                else:
                    self.assertGreater(ratio, 3)
                    self.assertLess(ratio, 8)

    def test_the_dense_warm_up_freezes_the_second_moment(self):
        # dense_warmup 2: steps 1 and 2 take the mean gradient (dense AdamW); then the denominator is
        # frozen and only the first moment moves, with this rank's gradient.
        torch.manual_seed(4)
        moments = RankMoments(0.9, 0.95, 1e-8, dense_warmup=2)
        pieces = [("0.0", 0, 5, 0.1), ("0.1", 5, 3, 0.2)]
        m, v = torch.zeros(8), torch.zeros(8)
        rates = torch.tensor([0.1] * 5 + [0.2] * 3)
        for t in range(1, 6):
            self.assertEqual(moments.warming(["0.0", "0.1"]), t <= 2, f"step {t}")
            g = torch.randn(8)
            m = 0.9 * m + 0.1 * g
            if t <= 2:
                v = 0.95 * v + 0.05 * g * g
                denominator = v.sqrt() / (1 - 0.95 ** t) ** 0.5 + 1e-8
            expected = rates * m / (1 - 0.9 ** t) / denominator
            torch.testing.assert_close(moments.update(g, pieces), expected, rtol=1e-5, atol=1e-7, msg=f"step {t}")
        self.assertEqual(sorted(moments.frozen), ["0.0", "0.1"])
        saved = moments.state_dict()
        del saved["0.1"]["frozen_denominator"]
        with self.assertRaisesRegex(ValueError, "past the dense warm-up .* without a frozen denominator"):
            RankMoments(0.9, 0.95, 1e-8, dense_warmup=2).load_state_dict(saved)


def _has_torchvision():
    try:
        import torchvision  # noqa: F401
        return True
    except ImportError:
        return False


class ExampleModels(unittest.TestCase):
    """examples/pytorch_ddp.py's models are the C++ worker's (worker/training/models.h)."""

    def test_the_examples_models_are_the_cpp_workers(self):
        # worker/training/models.h's four classifiers, layer for layer: the parameter counts the C++
        # worker's scale study reports (403,146 for cnn_wide, 1,863,690 for mlp_large).
        sys.path.insert(0, os.path.join(ROOT, "examples"))
        import pytorch_ddp  # noqa: E402
        expected = {"cnn": [400, 16, 12800, 32, 15680, 10], "cnn_wide": [1600, 64, 307200, 192, 94080, 10],
                    "mlp": [200704, 256, 32768, 128, 1280, 10],
                    "mlp_large": [802816, 1024, 1048576, 1024, 10240, 10]}
        for name, sizes in expected.items():
            with self.subTest(model=name):
                model = pytorch_ddp.build_model(name)
                self.assertEqual([p.numel() for p in model.parameters()], sizes)
                self.assertEqual(model(torch.zeros(3, 1, 28, 28)).shape, (3, 10))
        self.assertEqual(sum(expected["cnn_wide"]), 403_146)
        self.assertEqual(sum(expected["mlp_large"]), 1_863_690)
        # The one that is not the worker's: batch norm, 0.42M parameters.
        model = pytorch_ddp.build_model("cnn_bn")
        self.assertEqual(sum(p.numel() for p in model.parameters()), 421_834)
        self.assertEqual(model(torch.zeros(3, 1, 28, 28)).shape, (3, 10))
        # The same without batch norm (issue 69's plain CNN): 95% of its parameters in one linear layer.
        model = pytorch_ddp.build_model("cnn_plain")
        self.assertEqual([p.numel() for p in model.parameters()], [288, 32, 18432, 64, 401408, 128, 1280, 10])
        self.assertFalse(any(isinstance(m, torch.nn.BatchNorm2d) for m in model.modules()))
        self.assertEqual(model(torch.zeros(3, 1, 28, 28)).shape, (3, 10))
        # The char_lm transformer, worker/training/transformer.h's: 470,784 parameters, the position
        # embedding first, then the token embedding and the blocks' LayerNorms, projections and biases.
        model = pytorch_ddp.build_model("char_lm")
        sizes = [p.numel() for p in model.parameters()]
        self.assertEqual(sum(sizes), 470_784)
        self.assertEqual(sizes[:6], [64 * 128, 256 * 128, 128, 128, 3 * 128 * 128, 3 * 128])
        self.assertEqual(model(torch.zeros(3, 64, dtype=torch.long)).shape, (3, 64, 256))
        # Causal: a later byte does not change an earlier position's logits.
        tokens = torch.randint(0, 256, (2, 64))
        changed = tokens.clone()
        changed[:, 40] = (changed[:, 40] + 1) % 256
        with torch.no_grad():
            torch.testing.assert_close(model(changed)[:, :40], model(tokens)[:, :40])
            self.assertFalse(torch.allclose(model(changed)[:, 40:], model(tokens)[:, 40:]))

    @unittest.skipUnless(os.path.isdir("/usr/share/games/fortunes"), "Debian's fortunes are missing: "
                         "scripts/setup.sh installs them")
    def test_the_examples_text_is_the_workers_corpus(self):
        # worker/training/text_corpus.h's split of Debian's fortunes: the worker's char_lm has 34,995
        # training windows of 65 bytes (bench/results/transformer_schemes), every 10th 4 KiB chunk held out.
        sys.path.insert(0, os.path.join(ROOT, "examples"))
        import pytorch_ddp  # noqa: E402
        train = pytorch_ddp.load_text("/usr/share/games/fortunes", "train")
        validation = pytorch_ddp.load_text("/usr/share/games/fortunes", "validation")
        self.assertEqual(tuple(train.shape), (34_995, 65))
        self.assertEqual(train.dtype, torch.int64)
        self.assertTrue(torch.equal(train[1:, 0], train[:-1, 64]))  # windows overlap by the predicted byte
        self.assertGreater(validation.shape[0], train.shape[0] // 10)
        self.assertLess(validation.shape[0], train.shape[0] // 8)
        with tempfile.TemporaryDirectory() as tmp:
            with self.assertRaisesRegex(ValueError, "fewer than 1048576: not Debian's fortunes"):
                pytorch_ddp.load_text(tmp, "train")
            with self.assertRaisesRegex(ValueError, "no text corpus at"):
                pytorch_ddp.load_text(os.path.join(tmp, "missing"), "train")


class TorchvisionResNet18(unittest.TestCase):
    """A real convolutional network of 11.2M parameters (batch norm included) through the hook, two ranks."""

    def check(self, results):
        for r, result in enumerate(results):
            self.assertNotIn("exception", result, result.get("exception"))
            # The hook's dense allreduce is DDP's: the same parameters up to the order of the sums.
            for a, b in zip(result["ddp"], result["dense_allreduce"]):
                torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-5, msg=f"rank {r}")
            stats = result["sketch_allreduce/stats"]
            self.assertEqual(stats["steps"], 3)
            self.assertGreater(stats["compression_ratio"], 5)
            for a, b in zip(result["sketch_allreduce"], results[0]["sketch_allreduce"]):
                self.assertTrue(torch.equal(a, b), f"rank {r}: the ranks' models differ")
                self.assertTrue(torch.isfinite(a).all())
            # The sketch's updates reached the weights (three steps: some coordinates of most tensors).
            moved = sum(not torch.equal(a, b) for a, b in zip(result["initial"], result["sketch_allreduce"]))
            self.assertGreater(moved, len(result["initial"]) // 2)

    @unittest.skipUnless(_has_torchvision(), "torchvision is missing: scripts/setup.sh installs python3-torchvision")
    def test_the_examples_resnet50_takes_28x28_grey_images(self):
        # The model of issue 24's backward-share target (run on the GPU machine by run-hook --model resnet50).
        sys.path.insert(0, os.path.join(ROOT, "examples"))
        import pytorch_ddp  # noqa: E402
        torch.manual_seed(0)
        model = pytorch_ddp.build_model("resnet50")
        self.assertEqual(model(torch.randn(2, 1, 28, 28)).shape, (2, 10))
        self.assertEqual(sum(p.numel() for p in model.parameters()), 23_519_690)

    @unittest.skipUnless(_has_torchvision(), "torchvision is missing: scripts/setup.sh installs python3-torchvision")
    def test_resnet18_on_host_buckets(self):
        self.check(_spawn(_resnet18, 2, "cpu"))

    @unittest.skipUnless(_has_torchvision() and torch.cuda.is_available(),
                         "no CUDA device here (or no torchvision): ResNet-18's CUDA buckets run on the GPU machine "
                         "(issue 24)")
    def test_resnet18_on_cuda_buckets(self):
        # Two ranks share the one GPU over Gloo: the hook stages CUDA buckets through the host.
        self.check(_spawn(_resnet18, 2, "cuda"))

    @unittest.skipUnless(_has_torchvision() and torch.cuda.is_available(),
                         "no CUDA device here (or no torchvision): the hook's device path runs on the GPU machine "
                         "(issue 24)")
    def test_resnet18_with_the_sketch_on_the_gpu(self):
        # sketch_allreduce with device="cuda": error feedback, selection, sketch and peel on the GPU.
        self.check(_spawn(_resnet18, 2, "cuda", 3, True))


@unittest.skipUnless(torch.cuda.is_available(),
                     "no CUDA device here: the hook's CUDA buckets are tested on the GPU machine (issue 24)")
class CudaBuckets(unittest.TestCase):
    def test_cuda_buckets_train_as_host_buckets(self):
        # Two ranks share the one GPU over Gloo: the hook stages CUDA buckets through the host.
        results = _spawn(_cuda_and_host, 2)
        for r, result in enumerate(results):
            self.assertNotIn("exception", result, result.get("exception"))
            for a, b in zip(result["dense_allreduce"]["cpu"], result["dense_allreduce"]["cuda"]):
                torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-5, msg=f"rank {r}")
            for a, b in zip(result["sketch_allreduce"]["cuda"], results[0]["sketch_allreduce"]["cuda"]):
                self.assertTrue(torch.equal(a, b), f"rank {r}: the ranks' CUDA models differ")
                self.assertTrue(torch.isfinite(a).all())

    def test_the_device_path_trains_as_the_staged_path(self):
        # The sketch, its peel and the error feedback on the GPU (device="cuda") against the same on the host
        # (device="cpu", the buckets staged): the ranks agree bit for bit, and the models agree within the
        # rounding of the sketches' atomics.
        results = _spawn(_device_path, 2)
        for r, result in enumerate(results):
            self.assertNotIn("exception", result, result.get("exception"))
            self.assertEqual(result["cuda/stats"]["steps"], 6)
            self.assertEqual(result["cuda/stats"]["bytes_sent"], result["cpu/stats"]["bytes_sent"])
            for a, b, mine in zip(result["cpu"], result["cuda"], results[0]["cuda"]):
                self.assertTrue(torch.equal(b, mine), f"rank {r}: the ranks' models differ")
                torch.testing.assert_close(b, a, rtol=1e-3, atol=1e-4, msg=f"rank {r}")
            self.assertEqual(sorted(result["cuda/state"]["params"]), sorted(result["cpu/state"]["params"]))

    def test_an_nccl_group(self):
        # One rank (the machine has one GPU): the callbacks stage the buffers on the device for NCCL.
        results = _spawn(_nccl_one_rank, 1, backend="nccl")
        self.assertNotIn("exception", results[0], results[0].get("exception"))
        self.assertEqual(results[0]["stats"]["steps"], 4)
        for p in results[0]["params"]:
            self.assertTrue(torch.isfinite(p).all())


class HookZoo(unittest.TestCase):
    """bench/hook_zoo.py end to end on a small budget: the MLP, DDP and Top-k allgather, two ranks."""

    def test_two_runs_give_the_csv_and_the_gap(self):
        env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
        with tempfile.TemporaryDirectory() as out:
            command = ["/usr/bin/python3", os.path.join(ROOT, "bench", "hook_zoo.py"), f"--out={out}",
                       "--models=mlp", "--schemes=ddp,topk_allgather", "--seeds=1", "--ranks=2",
                       "--extra=--train_examples=640 --test_examples=200 --epochs=1"]
            done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
            self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
            with open(os.path.join(out, "results.csv")) as f:
                rows = list(csv.DictReader(f))
            self.assertEqual([r["scheme"] for r in rows], ["ddp", "topk_allgather"])
            self.assertEqual({r["steps"] for r in rows}, {"10"})  # 640 examples / 2 ranks / batch 32
            self.assertEqual(rows[0]["compression_ratio"], "")  # DDP: no hook
            self.assertGreater(float(rows[1]["compression_ratio"]), 5)
            gap = float(rows[1]["test_accuracy_pct"]) - float(rows[0]["test_accuracy_pct"])
            self.assertIn(f"({gap:+.2f})", done.stdout)
            # Run again: the kept summaries are reused, nothing retrains.
            again = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
            self.assertEqual(again.returncode, 0, again.stderr)
            self.assertNotIn("$ ", again.stdout)


class CommandLines(unittest.TestCase):
    """The example's and the benchmark's refusals: exit status 2 and a message naming the flag."""

    def _refused(self, script, args, expected):
        env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
        done = subprocess.run(["/usr/bin/python3", os.path.join(ROOT, script)] + args, capture_output=True,
                              text=True, env=env, timeout=120)
        self.assertEqual(done.returncode, 2, f"{script} {args}: {done.stderr}")
        self.assertIn(expected, done.stderr, f"{script} {args}")

    def test_the_example_refuses_bad_flags(self):
        self._refused("examples/pytorch_ddp.py", ["--scheme=nope"], "--scheme: INVALID_ARGUMENT: unknown scheme 'nope'")
        self._refused("examples/pytorch_ddp.py", ["--epochs=0"], "--epochs must be >= 1")
        self._refused("examples/pytorch_ddp.py", ["--learning_rate=nan"], "--learning_rate must be > 0")
        self._refused("examples/pytorch_ddp.py", ["--beta2=1"], "--beta2 must be in [0, 1)")
        self._refused("examples/pytorch_ddp.py", ["--lr_warmup_steps=-1"], "--lr_warmup_steps must be >= 0")
        self._refused("examples/pytorch_ddp.py", ["--optimizer=lion"], "invalid choice: 'lion'")
        self._refused("examples/pytorch_ddp.py", ["--optimizer=adamw", "--raw_residual"],
                      "--raw_residual is for --optimizer=sgd through the hook")
        self._refused("examples/pytorch_ddp.py", ["--adam_second_moment=global"], "invalid choice: 'global'")
        self._refused("examples/pytorch_ddp.py", ["--start_servers=2"], "--start_servers needs --nproc_per_node")
        self._refused("examples/pytorch_ddp.py", ["--write_job_config=/dev/null"], "needs --world_size")
        self._refused("examples/pytorch_ddp.py", ["--write_job_config=/dev/null", "--world_size=2",
                                                  "--scheme=sketch_allreduce"], "joins no coordinator")
        self._refused("examples/pytorch_ddp.py", ["--backend=nccl"], "--backend=nccl needs --device=cuda")
        self._refused("examples/pytorch_ddp.py", ["--model=resnet101"], "invalid choice: 'resnet101'")
        self._refused("examples/pytorch_ddp.py", ["--hook_device=cuda"], "--hook_device=cuda needs --device=cuda")
        if torch.cuda.is_available():
            self._refused("examples/pytorch_ddp.py", ["--device=cuda", "--hook_device=cuda", "--scheme=topk_allgather"],
                          "--hook_device=cuda runs sketch_allreduce")
        if not torch.cuda.is_available():
            self._refused("examples/pytorch_ddp.py", ["--device=cuda"], "PyTorch sees no CUDA device here")
        else:
            self._refused("examples/pytorch_ddp.py", ["--device=cuda", "--backend=nccl",
                                                      f"--nproc_per_node={torch.cuda.device_count() + 1}"],
                          "NCCL needs a GPU per rank")

    def test_the_benchmark_refuses_bad_flags(self):
        self._refused("bench/hook_zoo.py", ["--out=/tmp/unused", "--models=resnet9"], "--models: unknown resnet9")
        self._refused("bench/hook_zoo.py", ["--out=/tmp/unused", "--seeds=1,x"], "--seeds: integers")
        self._refused("bench/hook_zoo.py", ["--out=/tmp/unused", "--ranks=0"], "--ranks must be >= 1")
        self._refused("bench/hook_zoo.py", ["--out=/tmp/unused", "--hook_flags=--adam_dense_warmup=5"],
                      "--hook_flags and --tag go together")
        self._refused("examples/pytorch_ddp.py", ["--adam_dense_warmup=-2"], "--adam_dense_warmup must be >= 0")
        self._refused("bench/torch_hook_bench.py", ["--steps=0"], "--steps must be >= 1")
        self._refused("bench/torch_hook_bench.py", ["--warmup=1"], "--warmup must be >= 2")
        self._refused("bench/torch_hook_bench.py", ["--configs=ddp,nope"], "unknown config(s) nope")


class BucketCap(unittest.TestCase):
    def test_the_planners_groups(self):
        torch.manual_seed(0)
        model = SmallNet()
        cap, groups = sft.suggest_bucket_cap_mb(model, "sketch_allreduce", world_size=4)
        self.assertEqual(sum(groups), sum(p.numel() for p in model.parameters()))
        self.assertAlmostEqual(cap, (max(groups) + 1) * 4 / 2 ** 20)
        with self.assertRaisesRegex(ValueError, "compressor"):
            sft.suggest_bucket_cap_mb(model, "sketch_allreduce", "count_sketch:rows=x", world_size=4)
        with self.assertRaisesRegex(ValueError, "no trainable parameters"):
            sft.suggest_bucket_cap_mb(torch.nn.ReLU(), "sketch_allreduce", world_size=4)


def _this_shards_tests(suite, index, total):
    """The tests of shard `index` of `total` (Bazel's test sharding): every total-th test, in order."""
    flat = []

    def walk(node):
        for child in node:
            if isinstance(child, unittest.TestSuite):
                walk(child)
            else:
                flat.append(child)
    walk(suite)
    return unittest.TestSuite(flat[index::total])


if __name__ == "__main__":
    total = int(os.environ.get("TEST_TOTAL_SHARDS", "1"))
    if total > 1 and len(sys.argv) <= 2:  # under `bazel test` with shard_count (argv: [-v] at most)
        if "TEST_SHARD_STATUS_FILE" in os.environ:
            open(os.environ["TEST_SHARD_STATUS_FILE"], "w").close()  # this runner shards
        suite = _this_shards_tests(unittest.defaultTestLoader.loadTestsFromModule(sys.modules[__name__]),
                                   int(os.environ.get("TEST_SHARD_INDEX", "0")), total)
        result = unittest.TextTestRunner(verbosity=2).run(suite)
        sys.exit(0 if result.wasSuccessful() else 1)
    unittest.main()
