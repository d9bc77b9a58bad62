#!/usr/bin/python3.11
"""A single-process simulator of the main job's training, for ruling causes in
and out fast: W workers' gradients are computed one after another in one
process (the same Fashion-MNIST data, strided shards, batch 32, lr 0.05,
momentum 0.9, 2 epochs of 24,000 examples, the same MLP and CNN), then
aggregated by a Python model of a method: dense, Top-k with momentum
correction (optionally the release cap), gTop-k and importance variants, and
the sketch methods tried for the training-quality issue (one-round estimates,
the second round, FetchSGD, sparse-then-sketch with peeling, with one seed or
a seed per step). It is not the system: its hash is a random table, not
common/sketch_hash.h, and its initialization and data order differ from
LibTorch's. Figures that came from it say "simulator"; their raw output is in
git history (bench/data/quality/sim/ at commit ca70cd0). Debian's python3-torch (scripts/setup.sh
--bench), e.g.:

  /usr/bin/python3.11 bench/quality_sim.py --model=cnn --method=topk --ratio=402 --cap=1 --eval_every=50

prints one JSON line: final accuracy, status, and the curve.
"""
import argparse, gzip, json, math, sys, time
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.set_num_threads(1)
D = "/usr/share/datasets/fashion-mnist/"


def idx(path):
    with gzip.open(path) as f:
        data = f.read()
    magic = int.from_bytes(data[0:4], "big")
    nd = magic & 0xFF
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(nd)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * nd).reshape(dims)


def load(split):
    x = idx(D + f"{split}-images-idx3-ubyte.gz").astype(np.float32) / 255.0
    y = idx(D + f"{split}-labels-idx1-ubyte.gz").astype(np.int64)
    x = (x - 0.2860) / 0.3530
    return torch.from_numpy(x).unsqueeze(1), torch.from_numpy(y)


class MLP(nn.Module):
    """The worker's MLPs: 784-256-128-10 ("mlp"), 784-1024-1024-10 ("mlp_large", 1.86M parameters)."""
    def __init__(self, hidden1=256, hidden2=128):
        super().__init__()
        self.fc1 = nn.Linear(784, hidden1); self.fc2 = nn.Linear(hidden1, hidden2); self.fc3 = nn.Linear(hidden2, 10)

    def forward(self, x):
        x = x.flatten(1)
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 5, padding=2); self.conv2 = nn.Conv2d(16, 32, 5, padding=2)
        self.fc = nn.Linear(32 * 49, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc(x.flatten(1))


class Hash:
    """rows x cols Count-Sketch hash: chunked (runs of L coordinates on runs of
    cells at a random offset) or scattered."""

    def __init__(self, d, rows, cols, chunked, seed):
        g = torch.Generator().manual_seed(seed)
        self.rows, self.cols, self.d = rows, cols, d
        import warnings; warnings.filterwarnings("ignore")
        i = torch.arange(d)
        self.bucket, self.sign = [], []
        for r in range(rows):
            if chunked:
                L = 1 << int(math.floor(math.log2(min(cols, 1024))))
                nchunks = (d + L - 1) // L
                off = torch.randint(0, cols, (nchunks,), generator=g)
                b = (off[i // L] + i % L) % cols
            else:
                b = torch.randint(0, cols, (d,), generator=g)
            self.bucket.append(b)
            self.sign.append(torch.randint(0, 2, (d,), generator=g).float() * 2 - 1)

    def sketch(self, x):
        t = torch.zeros(self.rows, self.cols)
        for r in range(self.rows):
            t[r].index_add_(0, self.bucket[r], self.sign[r] * x)
        return t

    def estimate(self, t):
        est = torch.stack([self.sign[r] * t[r][self.bucket[r]] for r in range(self.rows)])
        if self.rows == 1:
            return est[0]
        return est.median(0).values if self.rows % 2 else est.sort(0).values[self.rows // 2 - 1:self.rows // 2 + 1].mean(0)

    def minest(self, t):
        est = torch.stack([self.sign[r] * t[r][self.bucket[r]] for r in range(self.rows)])
        same = (est > 0).all(0) | (est < 0).all(0)
        return torch.where(same, est.abs().min(0).values, torch.zeros(()))

    def zero_cells(self, t, coords):
        for r in range(self.rows):
            t[r][self.bucket[r][coords]] = 0


def peel(h, S, d, a, Kmax):
    """Returns (indices, values) decoded from S by peeling: a coordinate whose
    row estimates agree in >= 2 rows (and are nonzero in every row) is taken,
    each pure cell explaining at most one coordinate (conflicts: more agreeing
    rows wins, ties lose); then it is subtracted and the pass repeats."""
    rows, cols = h.rows, h.cols
    T = S.clone()
    fl = 1e-6 * T.abs().max()
    found = torch.zeros(d, dtype=torch.bool); upd = torch.zeros(d)
    nfound = 0
    for it in range(a.peel_iters):
        est = torch.stack([h.sign[q] * T[q][h.bucket[q]] for q in range(rows)])
        nz = est.abs() > fl
        best_cnt = torch.zeros(d, dtype=torch.int32); val = torch.zeros(d); agree_rows = torch.zeros(rows, d, dtype=torch.bool)
        for qa in range(rows):
            ea = est[qa]
            m = torch.stack([((ea - est[qb]).abs() <= a.tol * torch.maximum(ea.abs(), est[qb].abs())) & nz[qa] & nz[qb] for qb in range(rows)])
            cnt = m.sum(0).int()
            better = cnt > best_cnt
            best_cnt = torch.where(better, cnt, best_cnt); val = torch.where(better, ea, val)
            agree_rows = torch.where(better.unsqueeze(0), m, agree_rows)
        ok = (best_cnt >= 2) & nz.all(0) & ~found
        cand = ok.nonzero().flatten()
        if len(cand):
            score = best_cnt[cand].float()
            win = torch.ones(len(cand), dtype=torch.bool)
            for q in range(rows):
                sel = agree_rows[q, cand]
                cid = h.bucket[q][cand]
                top = torch.full((cols,), -1.0).scatter_reduce(0, cid[sel], score[sel], reduce="amax")
                ntop = torch.zeros(cols).index_add_(0, cid[sel], (score[sel] == top[cid[sel]]).float())
                win &= ~(sel & ((score < top[cid]) | (ntop[cid] > 1)))
            cand = cand[win]
        if len(cand) == 0:
            break
        if nfound + len(cand) > Kmax:
            cand = cand[val[cand].abs().topk(Kmax - nfound).indices]
        upd[cand] = val[cand]; found[cand] = True; nfound += len(cand)
        dv = torch.zeros(d); dv[cand] = val[cand]
        T -= h.sketch(dv)
        if nfound >= Kmax:
            break
    return found, upd


LAYERS = None  # (offset, size) of each layer in the fused group, for per-layer selection


def topk_idx(v, k):
    if LAYERS is None or k >= v.numel():
        return v.abs().topk(k, sorted=False).indices
    out = []
    d = v.numel()
    for off, n in LAYERS:
        kl = max(1, round(k * n / d))
        out.append(off + v[off:off + n].abs().topk(min(kl, n), sorted=False).indices)
    return torch.cat(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="mlp")
    ap.add_argument("--method", default="dense")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--train", type=int, default=24000)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--ratio", type=float, default=10, help="d / (floats a worker sends)")
    ap.add_argument("--rows", type=int, default=1)
    ap.add_argument("--kfrac", type=float, default=0.2, help="k / sketch cells (sketch); topk: k from ratio")
    ap.add_argument("--p2", type=float, default=1.0, help="second round candidates / k")
    ap.add_argument("--scattered", action="store_true")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--eval_every", type=int, default=0)
    ap.add_argument("--diag", type=int, default=0)
    ap.add_argument("--perlayer", type=int, default=0)
    ap.add_argument("--cap", type=float, default=0)
    ap.add_argument("--warmup", type=int, default=0, help="linear lr warm-up steps")
    ap.add_argument("--warmup_from", type=float, default=0.0,
                    help="the rate at step 0 of the warm-up (the worker's --lr_base_workers rule starts at its "
                         "--learning_rate; 0: from (step + 1) / warmup of --lr, as before)")
    ap.add_argument("--ef_lr_scaled", type=int, default=0, choices=(0, 1),
                    help="1: keep the error-feedback residual in units of the current rate (rescaled by "
                         "lr_prev / lr_now when the rate changes), so delayed mass is applied at the rate of "
                         "the steps that made it")
    ap.add_argument("--mom_place", default="corr",
                    help="global_topk: corr (momentum correction with masking, the worker's), nomask (correction, "
                         "velocity kept), post (error feedback on gradients, momentum on the applied mean: global "
                         "momentum, every worker the same velocity)")
    ap.add_argument("--score", default="median")
    ap.add_argument("--peel_iters", type=int, default=8)
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("--floor", type=float, default=1e-7)
    ap.add_argument("--rehash", type=int, default=0)
    ap.add_argument("--klocal", type=float, default=0.1, help="sk_sparse: local top-k / cells")
    ap.add_argument("--kdec", type=float, default=0.3, help="sk_sparse: decoded coordinates / cells")
    ap.add_argument("--decres", type=int, default=1, help="sk_sparse: keep the decode residual in sketch space")
    ap.add_argument("--density", type=float, default=0.01, help="topk_allgather/gtopk/importance: k = density * d")
    ap.add_argument("--imp_eps", type=float, default=1e-8)
    ap.add_argument("--imp_score", default="ratio", help="ratio: |e|/(|w|+eps); mag: |e|; oracle: ratio on the summed residual")
    ap.add_argument("--imp_root", default="rotate", help="rotate | own (each worker its own indices, union; diagnostic)")
    ap.add_argument("--gtopk_mask", default="own", help="own: mask velocity at own sent coords; applied: only where applied")
    ap.add_argument("--gtopk_back", default="receiver", help="receiver: dropped values to the rank that dropped; owner: back to their owners")
    ap.add_argument("--imp_eps_rel", type=float, default=0.0, help="epsilon = this * mean |w| of the group")
    ap.add_argument("--imp_mom", default="corr", help="corr: momentum correction on workers; post: momentum in the optimizer")
    ap.add_argument("--imp_floor", default="group", help="group | layer: the eps_rel floor's mean |w| over the group or the coordinate's layer")
    ap.add_argument("--nomask", type=int, default=0, help="ta/global_topk: keep the velocity at released coordinates")
    ap.add_argument("--track", type=int, default=0, help="print per-layer diagnostics every N steps")
    a = ap.parse_args()

    torch.manual_seed(a.seed)
    model = {"mlp": MLP, "mlp_large": lambda: MLP(1024, 1024), "cnn": CNN}[a.model]()
    params = list(model.parameters())
    names = [n for n, _ in model.named_parameters()][::-1]
    bparams = params[::-1]  # backward order, as the C++ fusion buffer
    d = sum(p.numel() for p in params)
    if a.perlayer:
        global LAYERS
        LAYERS, off = [], 0
        for p in bparams:
            LAYERS.append((off, p.numel())); off += p.numel()
    xtr, ytr = load("train")
    xte, yte = load("t10k")
    xtr, ytr = xtr[:a.train], ytr[:a.train]
    W = a.workers
    shards = [(xtr[r::W], ytr[r::W]) for r in range(W)]
    steps_per_epoch = len(shards[0][0]) // a.batch

    meth = a.method
    dense_mom = meth in ("dense", "topk_gm")
    post_mom = (meth == "imp" and a.imp_mom == "post") or (meth == "global_topk" and a.mom_place == "post")
    if a.mom_place not in ("corr", "nomask", "post"):
        raise SystemExit("--mom_place must be corr, nomask or post")
    opt = torch.optim.SGD(params, lr=a.lr, momentum=a.momentum if (dense_mom or post_mom) else 0.0)
    cells = int(round(d / a.ratio))
    if meth == "sk_sparse2":
        cells = int(round(d / a.ratio / (1 + a.kdec)))
    if meth.startswith("topk"):
        k = max(1, int(d / a.ratio / 2))
    else:
        k = max(1, int(a.kfrac * cells))
    cols = max(1, cells // a.rows)
    h = None if meth in ("dense",) or meth.startswith("topk") else Hash(d, a.rows, cols, not a.scattered, a.seed)
    u = [torch.zeros(d) for _ in range(W)]
    e = [torch.zeros(d) for _ in range(W)]
    Su = torch.zeros(a.rows, cols) if h else None
    Se = torch.zeros(a.rows, cols) if h else None
    Serr = torch.zeros(a.rows, cols) if h else None
    m = 0.0 if post_mom else a.momentum
    maxrel = 0.0
    curve = []
    t0 = time.time()
    status = "ok"

    def evaluate(n=None):
        model.eval()
        with torch.no_grad():
            xs, ys = (xte, yte) if n is None else (xte[:n], yte[:n])
            acc = (model(xs).argmax(1) == ys).float().mean().item()
        model.train()
        return acc

    def lr_at(step):
        if not a.warmup:
            return a.lr
        if a.warmup_from > 0:
            return a.lr if step >= a.warmup else a.warmup_from + (a.lr - a.warmup_from) * step / a.warmup
        return a.lr * min(1.0, (step + 1) / a.warmup)

    lr_prev = lr_at(0)
    step = 0
    for ep in range(a.epochs):
        orders = []
        for r in range(W):
            g = torch.Generator().manual_seed(a.seed * 1000003 + r * 7919 + ep)
            orders.append(torch.randperm(len(shards[r][0]), generator=g))
        for s in range(steps_per_epoch):
            grads = []
            for r in range(W):
                ix = orders[r][s * a.batch:(s + 1) * a.batch]
                model.zero_grad()
                loss = F.cross_entropy(model(shards[r][0][ix]), shards[r][1][ix])
                loss.backward()
                grads.append(torch.cat([p.grad.flatten() for p in bparams]))
            if not math.isfinite(loss.item()):
                status = f"nonfinite loss at step {step}"
                break
            upd = torch.zeros(d)
            lr_now = lr_at(step)
            if a.ef_lr_scaled and lr_now != lr_prev:
                for r in range(W):
                    e[r].mul_(lr_prev / lr_now)
            lr_prev = lr_now
            if a.rehash and h is not None:
                h = Hash(d, a.rows, cols, not a.scattered, a.seed * 1000 + step)
            if meth == "dense":
                upd = sum(grads)
            elif meth == "topk_gm":
                for r in range(W):
                    e[r].add_(grads[r])
                    ix = topk_idx(e[r], k)
                    upd[ix] += e[r][ix]
                    e[r][ix] = 0
            elif meth in ("ta", "imp", "gtopk"):
                kk = max(1, int(round(a.density * d)))
                for r in range(W):
                    u[r].mul_(m).add_(grads[r]); e[r].add_(u[r])
                if meth == "ta":
                    if a.track and step % a.track == 0:
                        U = torch.unique(torch.cat([topk_idx(e[r], kk) for r in range(W)]))
                        print(f"ta step {step} union={len(U)} k={kk} ratio={len(U)/kk:.2f}", file=sys.stderr)
                    for r in range(W):
                        ix = topk_idx(e[r], kk)
                        sel = e[r][ix]
                        if a.cap > 0:
                            lim = a.cap * u[r].norm()
                            if sel.norm() > lim:
                                sel = sel * (lim / sel.norm())
                        upd[ix] += sel
                        e[r][ix] -= sel
                        if not a.nomask:
                            u[r][ix] = 0
                elif meth == "imp":
                    wv = torch.cat([p.detach().flatten() for p in bparams])
                    def score(v):
                        if a.imp_score == "vel":
                            eps = a.imp_eps + a.imp_eps_rel * wv.abs().mean()
                            return u[root if a.imp_root == "rotate" else 0].abs() / (wv.abs() + eps)
                        if a.imp_score == "mag":
                            return v.abs()
                        if a.imp_floor == "layer":
                            lm = torch.cat([torch.full((p.numel(),), p.detach().abs().mean().item()) for p in bparams])
                            eps = a.imp_eps + a.imp_eps_rel * lm
                        else:
                            eps = a.imp_eps + a.imp_eps_rel * wv.abs().mean()
                        return v.abs() / (wv.abs() + eps)
                    root = step % W
                    if a.imp_root == "rotate":
                        src_v = sum(e) if a.imp_score == "oracle" else e[root]
                        ix = topk_idx(score(src_v), kk)
                        sel = [ix] * W
                    elif a.imp_root == "split":
                        kp = max(1, -(-kk // W))
                        U = torch.unique(torch.cat([topk_idx(score(e[r]), kp) for r in range(W)]))
                        sel = [U] * W
                    else:
                        sel = [topk_idx(score(e[r]), kk) for r in range(W)]
                    if a.track:
                        ov_pre = [len(set(sel[0].tolist()) & set(topk_idx(score(e[r]), kk).tolist())) / kk for r in range(W)]
                        if step == 0:
                            last = [torch.zeros(d) for _ in range(W)]
                        agew = 0.0; tot = 0.0; maxage = 0
                    for r in range(W):
                        ix = sel[r]
                        upd[ix] += e[r][ix]
                        if a.track:
                            age = step - last[r][ix]
                            v = e[r][ix].abs()
                            agew += (age * v).sum().item(); tot += v.sum().item(); maxage = max(maxage, age.max().item())
                            last[r][ix] = step + 1
                        e[r][ix] = 0; u[r][ix] = 0
                    if a.track and step < 200 and step % 5 == 0:
                        wv2 = wv
                        dw = a.lr * upd.abs() / W
                        j = dw.argmax().item()
                        off = 0
                        for nm, p in zip(names, bparams):
                            if j < off + p.numel(): lay = nm; break
                            off += p.numel()
                        ratios = [score(e[r]) for r in range(W)]
                        taus = [ratios[r].topk(kk).values[-1].item() for r in range(W)]
                        ov = ov_pre
                        print(f"step {step} loss={loss.item():.3f} maxdw={dw.max().item():.3g} at {lay} |w|={wv[j].abs().item():.2g} age_w={agew/max(tot,1e-30):.2f} |e|={sum(er.norm().item() for er in e):.3g} maxage={maxage:.0f} |upd|={upd.norm().item():.3g} overlap={[round(o,2) for o in ov]}", file=sys.stderr)
                    if a.track and step % a.track == 0:
                        allsel = torch.cat(sel)
                        off = 0; parts = []
                        for nm, p in zip(names, bparams):
                            n = p.numel()
                            cnt = ((allsel >= off) & (allsel < off + n)).sum().item()
                            en = sum(er[off:off + n].abs().max().item() for er in e) / W
                            parts.append(f"{nm}:{cnt}/{n} emax={en:.3g} wmin={p.detach().abs().min().item():.2g}")
                            off += n
                        print(f"step {step} loss={loss.item():.3f} " + " ".join(parts), file=sys.stderr)
                else:  # gtopk
                    own = []
                    held = []
                    for r in range(W):
                        ix = topk_idx(e[r], kk)
                        hv = torch.zeros(d); hv[ix] = e[r][ix]
                        own.append(ix); held.append(hv)
                    back = [torch.zeros(d) for _ in range(W)]
                    origin = None
                    gap = 1
                    alive = list(range(W))
                    while gap < W:
                        for r in range(W):
                            if r % (2 * gap) == 0 and r + gap < W:
                                s = held[r] + held[r + gap]
                                held[r + gap] = torch.zeros(d)
                                nz = (s != 0).nonzero().flatten()
                                if len(nz) > kk:
                                    keep = nz[topk_idx(s[nz], kk)]
                                    dropped = s.clone(); dropped[keep] = 0
                                    s2 = torch.zeros(d); s2[keep] = s[keep]
                                    back[r] += dropped
                                    s = s2
                                held[r] = s
                        gap *= 2
                    upd = held[0].clone()
                    applied = (upd != 0)
                    if a.gtopk_back == "owner":
                        for r in range(W):
                            ai = own[r][applied[own[r]]]
                            e[r][ai] = 0; u[r][ai] = 0
                            e[r] += back[r] * applied
                    else:
                        for r in range(W):
                            e[r][own[r]] = 0
                            if a.gtopk_mask == "own":
                                u[r][own[r]] = 0
                            else:
                                ai = own[r][applied[own[r]]]
                                u[r][ai] = 0
                        for r in range(W):
                            e[r] += back[r]
            elif meth == "topk":
                for r in range(W):
                    u[r].mul_(m).add_(grads[r]); e[r].add_(u[r])
                    ix = topk_idx(e[r], k)
                    sel = e[r][ix]
                    if a.cap > 0:
                        lim = a.cap * u[r].norm()
                        nrm = sel.norm()
                        if nrm > lim:
                            sel = sel * (lim / nrm)
                    upd[ix] += sel
                    e[r][ix] -= sel; u[r][ix] = 0
            elif meth == "global_topk":
                # The exact global top-k of the summed residuals (what a
                # perfect candidate decode with an exact second round gives):
                # every worker releases its residual at the k coordinates.
                for r in range(W):
                    u[r].mul_(m).add_(grads[r]); e[r].add_(u[r])
                kk = max(1, int(round(a.density * d)))
                ix = topk_idx(sum(e), kk)
                upd[ix] = sum(er[ix] for er in e)
                for r in range(W):
                    e[r][ix] = 0
                    if not (a.nomask or a.mom_place == "nomask"):
                        u[r][ix] = 0
            elif meth in ("sk_local", "sk_local2"):
                S = torch.zeros(a.rows, cols)
                for r in range(W):
                    u[r].mul_(m).add_(grads[r]); e[r].add_(u[r])
                    S += h.sketch(e[r])
                est = h.estimate(S)
                if meth == "sk_local":
                    ix = topk_idx(est, k)
                    upd[ix] = est[ix]
                else:
                    cand = topk_idx(est, min(d, int(a.p2 * k)))
                    exact = sum(er[cand] for er in e)
                    ix = cand[topk_idx(exact, k)]
                    upd[ix] = sum(er[ix] for er in e)
                    if a.diag and step % a.diag == 0:
                        es = sum(e)
                        tot = es.pow(2).sum().item()
                        best = es[topk_idx(es, k)].pow(2).sum().item()
                        got = upd[ix].pow(2).sum().item()
                        truek = set(topk_idx(es, k).tolist()); recall = len(truek & set(ix.tolist())) / k
                        print(f"step {step} |e|={tot**0.5:.3g} best_frac={best/tot:.3f} got_frac={got/tot:.3f} recall={recall:.3f} loss={loss.item():.3f}", file=sys.stderr)
                for r in range(W):
                    e[r][ix] = 0; u[r][ix] = 0
            elif meth == "sk_sparse":
                kl = max(1, int(a.klocal * cells))
                S = Serr.clone() if a.decres else torch.zeros(a.rows, cols)
                for r in range(W):
                    u[r].mul_(m).add_(grads[r]); e[r].add_(u[r])
                    ixl = topk_idx(e[r], kl)
                    sp = torch.zeros(d); sp[ixl] = e[r][ixl]
                    S += h.sketch(sp)
                    e[r][ixl] = 0; u[r][ixl] = 0
                est = h.estimate(S)
                K = min(d, max(1, int(a.kdec * cells)))
                ix = topk_idx(est, K)
                upd[ix] = est[ix]
                if a.decres:
                    Serr = S - h.sketch(upd)
                if a.diag and step % a.diag == 0:
                    print(f"step {step} |S|={S.norm():.3g} |Serr|={(S - h.sketch(upd)).norm():.3g} nnz_est={(est!=0).sum().item()} loss={loss.item():.3f}", file=sys.stderr)
            elif meth == "sk_sparse2":
                kl = max(1, int(a.klocal * cells))
                S = torch.zeros(a.rows, cols)
                sps = []
                for r in range(W):
                    u[r].mul_(m).add_(grads[r]); e[r].add_(u[r])
                    ixl = topk_idx(e[r], kl)
                    sp = torch.zeros(d); sp[ixl] = e[r][ixl]
                    S += h.sketch(sp)
                    e[r][ixl] = 0; u[r][ixl] = 0
                    sps.append(sp)
                est = h.estimate(S) if a.score == "median" else h.minest(S)
                K = min(d, max(1, int(a.kdec * cells)))
                ix = topk_idx(est, K)
                tot = sum(sps)
                upd[ix] = tot[ix]
                missed = tot.clone(); missed[ix] = 0
                for r in range(W):
                    back = sps[r].clone(); back[ix] = 0
                    e[r].add_(back)
                if a.diag and step % a.diag == 0:
                    supp = (tot != 0).sum().item()
                    print(f"step {step} support={supp} K={K} missed_frac={(missed.pow(2).sum()/tot.pow(2).sum()).item():.4f} loss={loss.item():.3f}", file=sys.stderr)
            elif meth in ("sk_peel", "sk_pexact"):
                kl = max(1, int(a.klocal * cells))
                S = Serr.clone() if meth == "sk_peel" else torch.zeros(a.rows, cols)
                locs = []
                for r in range(W):
                    u[r].mul_(m).add_(grads[r]); e[r].add_(u[r])
                    ixl = topk_idx(e[r], kl)
                    sp = torch.zeros(d); sp[ixl] = e[r][ixl]
                    S += h.sketch(sp)
                    locs.append(ixl)
                    if meth == "sk_peel":
                        e[r][ixl] = 0; u[r][ixl] = 0
                found, dec = peel(h, S, d, a, d)
                upd[found] = dec[found]
                T = S - h.sketch(upd)
                it = 0
                if meth == "sk_peel":
                    Serr = T
                else:
                    for r in range(W):
                        rel = locs[r][found[locs[r]]]
                        e[r][rel] = 0; u[r][rel] = 0
                if a.diag and step % a.diag == 0:
                    print(f"step {step} |S|={S.norm():.3g} |R|={T.norm():.3g} found={found.sum().item()} iters={it} loss={loss.item():.3f}", file=sys.stderr)
            elif meth == "sk_peel2":
                kl = max(1, int(a.klocal * cells))
                S = torch.zeros(a.rows, cols)
                for r in range(W):
                    u[r].mul_(m).add_(grads[r]); e[r].add_(u[r])
                    ixl = topk_idx(e[r], kl)
                    sp = torch.zeros(d); sp[ixl] = e[r][ixl]
                    S += h.sketch(sp)
                Kmax = max(1, int(a.kdec * cells))
                cand = peel(h, S, d, a, Kmax)[0].nonzero().flatten()
                upd[cand] = sum(er[cand] for er in e)
                for r in range(W):
                    e[r][cand] = 0; u[r][cand] = 0
                if a.diag and step % a.diag == 0:
                    print(f"step {step} cand={len(cand)} Kmax={Kmax} loss={loss.item():.3f}", file=sys.stderr)
            elif meth in ("fetch", "fetch_sub"):
                S = sum(h.sketch(g) for g in grads)
                Su.mul_(m).add_(S); Se.add_(Su)
                est = h.estimate(Se)
                ix = topk_idx(est, k)
                upd[ix] = est[ix]
                if meth == "fetch":
                    h.zero_cells(Su, ix); h.zero_cells(Se, ix)
                else:
                    Se -= h.sketch(upd)
                    h.zero_cells(Su, ix)
            else:
                raise SystemExit("unknown method " + meth)
            upd /= W
            if meth == "imp":
                wv2 = torch.cat([p.detach().flatten() for p in bparams])
                rel = (a.lr * upd.abs() / (wv2.abs() + 1e-3)).max().item()
                maxrel = max(maxrel, rel)
            off = 0
            for p in bparams:
                n = p.numel()
                p.grad = upd[off:off + n].view_as(p).clone()
                off += n
            for grp in opt.param_groups:
                grp["lr"] = lr_now
            opt.step()
            step += 1
            if a.eval_every and step % a.eval_every == 0:
                curve.append((step, evaluate(2000)))
        if status != "ok":
            break
    acc = evaluate() if status == "ok" else float("nan")
    if status == "ok" and not all(torch.isfinite(p).all() for p in params):
        status, acc = "nonfinite params", float("nan")
    tail = [c[1] for c in curve[-4:]]
    print(json.dumps({"tail_mean": sum(tail) / len(tail) if tail else None,"model": a.model, "method": meth, "ratio": a.ratio, "rows": a.rows, "kfrac": a.kfrac,
                      "p2": a.p2, "ef_lr_scaled": a.ef_lr_scaled, "klocal": a.klocal, "kdec": a.kdec, "decres": a.decres, "rehash": a.rehash, "seed": a.seed, "scattered": a.scattered, "d": d, "k": k, "cells": cells, "acc": acc, "maxrel": maxrel,
                      "status": status, "secs": round(time.time() - t0, 1), "curve": curve}))


if __name__ == "__main__":
    main()
