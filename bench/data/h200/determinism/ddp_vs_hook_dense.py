"""Diagnosis: DDP's allreduce against the hook's dense_allreduce on CUDA buckets, step by step."""
import os, sys, time
import torch, torch.distributed as dist, torch.nn.functional as F
ROOT = os.getcwd()
sys.path.insert(0, os.path.join(ROOT, "examples")); sys.path.insert(0, os.path.join(ROOT, "python"))
import pytorch_ddp
import sketchfuse.torch as sft
from sketchfuse import _native

MODEL = os.environ.get("DIAG_MODEL", "resnet50"); STEPS = int(os.environ.get("DIAG_STEPS", "40"))
BATCH = int(os.environ.get("DIAG_BATCH", "64")); MOM = float(os.environ.get("DIAG_MOMENTUM", "0.9"))

def run(rank, world, port, q):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.cuda.set_device(0)
    x, y = pytorch_ddp.load(".gpu_bundle/hook/data", "train")
    rows = torch.arange(rank, 24000, world); xs, ys = x[rows].cuda(), y[rows].cuda()
    order = torch.tensor(_native.epoch_order(1, rank, 0, xs.shape[0]), dtype=torch.int64, device="cuda")
    out = {}
    for name, scheme, det in (("ddp", "ddp", False), ("ddp_again", "ddp", False), ("dense", "dense_allreduce", False),
                              ("ddp_det", "ddp", True), ("dense_det", "dense_allreduce", True)):
        torch.backends.cudnn.deterministic = det; torch.backends.cudnn.benchmark = False
        torch.manual_seed(1)
        model = pytorch_ddp.build_model(MODEL).cuda()
        ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[0])
        opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=MOM)
        if scheme != "ddp":
            state = sft.HookState(scheme, None, seed=1, momentum=MOM, optimizer=opt)
            ddp.register_comm_hook(state, sft.hook)
        losses, snaps = [], {}
        for step in range(STEPS):
            idx = order[step * BATCH:(step + 1) * BATCH]
            loss = F.cross_entropy(ddp(xs[idx]), ys[idx])
            opt.zero_grad(); loss.backward(); opt.step()
            losses.append(loss.item())
            if step + 1 in (1, 2, 5, 10, 20, 40, 80, 160):
                snaps[step + 1] = torch.cat([p.detach().reshape(-1).cpu() for p in model.parameters()])
        out[name] = (losses, snaps)
        del ddp
    if rank == 0:
        diffs = {}
        for k, v in out.items():
            ref = out["ddp_det" if k.endswith("_det") else "ddp"][1]
            diffs[k] = (v[0], {s: (t - ref[s]).abs().max().item() for s, t in v[1].items()})
        q.put(diffs)
    dist.barrier()

if __name__ == "__main__":
    import torch.multiprocessing as mp
    ctx = mp.get_context("spawn"); q = ctx.Queue()
    port = 29000 + os.getpid() % 1000
    procs = [ctx.Process(target=run, args=(r, 2, port, q)) for r in range(2)]
    [p.start() for p in procs]
    res = q.get(); [p.join() for p in procs]
    names = list(res)
    print("step " + " ".join(f"{n:>10s}" for n in names))
    for s in range(STEPS):
        print(f"{s+1:4d} " + " ".join(f"{res[n][0][s]:10.4f}" for n in names))
    for s in sorted(res["ddp"][1]):
        print(f"after {s} steps, max |param - reference| (ddp, or ddp_det for _det): " + ", ".join(
            f"{n} {res[n][1][s]:.3e}" for n in names))
