"""SketchFuse as a PyTorch DDP communication hook.

    import sketchfuse.torch as sft
    state = sft.HookState("sketch_allreduce", "count_sketch:method=peel,density=0.005,rows=4")
    ddp_model.register_comm_hook(state, sft.hook)
    optimizer = torch.optim.SGD(ddp_model.parameters(), lr=0.05)  # no momentum: the hook keeps it

Each DDP bucket is one fused group of the C++ worker: it is compressed with the
same compressor stacks (error feedback, momentum correction with momentum-factor
masking, the release cap) and aggregated by the same decentralized scheme
(worker/decentralized) over the DDP process group, whose collectives the native
core calls back into (torch.distributed: Gloo on CPUs, NCCL on GPUs).

The optimizer: with a compressing scheme (everything but dense_allreduce and
dense_bf16_allreduce) and SGD the hook keeps the momentum (``momentum=``,
default 0.9, the worker's) before compression, as DGC's momentum correction
does, so the optimizer must be plain SGD without momentum; pass ``optimizer=``
and the hook refuses one with momentum. Handed the SGD, the hook keeps error
feedback's residual in units of each parameter's learning rate, as the worker
does (``residual_in_rate_units``, default True with SGD): when a param group's
lr goes from r to r' the residual of its parameters is multiplied by r / r'
before the next step adds to it, so under a warm-up or a decay what waited is
applied at the rate of the steps that made it. With a dense scheme the optimizer
keeps momentum as usual. With AdamW use ``sketchfuse.torch.AdamW``
(sketchfuse/adam.py): handed it, the hook keeps Adam's moments of each rank's
gradients and compresses the update (the current lr times Adam's direction)
under error feedback (the worker's default with Adam), and the optimizer
applies the mean update with AdamW's decoupled decay. Handed torch's Adam or AdamW, the hook keeps no momentum of
its own (momentum 0 unless stated; a stated momentum above 0 is kept, with a
warning) and its error feedback keeps raw gradients: Adam on the aggregated
update, as the worker's ``--momentum_at=update``, which a compressing scheme
pays for (a warning says so, with the figures). The ranks must hand it the
same optimizer.
The hook returns the mean update; the optimizer steps on it.
Global momentum (the C++ worker's ``--momentum_at=update``) is ``momentum=0``
here with the momentum in the optimizer (``SGD(..., momentum=0.9)``): error
feedback then keeps the raw gradients, no release cap applies (it is measured
against the hook's velocity), and the optimizer's momentum acts on the
aggregated update, the same on every rank. In the C++ worker it trained 2.1 to
2.5 points worse than the default on mlp_large at 64 workers and 10x.

Buckets: DDP rebuilds its buckets after the first iteration. The hook keeps its
error-feedback residual and velocity per parameter across such a change, and
``state_dict()`` saves them per parameter, keyed by each parameter's place in
the first iteration's buckets (the same in every run of the same model), so a
resumed run continues as an uninterrupted one whatever the bucket layout.
"""
import ctypes
import json
import math
import warnings

import torch
import torch.distributed as dist

from sketchfuse import _native
from sketchfuse.adam import AdamW, RankMoments

__all__ = ["AdamW", "HookState", "hook", "DivergedError", "optimizer_spec", "suggest_bucket_cap_mb",
           "write_job_config"]

_SETTING_OPTIONS = ("seed", "momentum", "error_feedback", "release_cap", "second_round", "check_finite", "device",
                    "job",
                    "tls_cert", "tls_key", "join_credential_file", "join_timeout_s", "push_timeout_s", "push_attempts",
                    "probe_every", "partition_elements")
# The counters stats() adds up.
# The parts of a group's state, in the C ABI's order (sf_session_save_state).
_STATE_PARTS = ("residual", "velocity", "method_state")
_STATE_PARTS_INDEX = (0, 1, 2)
_ZERO_STATS = {"steps": 0, "bytes_sent": 0, "bytes_received": 0, "dense_bytes": 0, "compress_s": 0.0, "communicate_s": 0.0,
               "decode_s": 0.0, "check_s": 0.0}
# Settings that differ by rank by design.
_PER_RANK = ("rank", "worker_id", "gpu", "join_credential_file")


def optimizer_spec(optimizer):
    """The worker's spec of a torch optimizer (its --optimizer): "sgd" for torch.optim.SGD,
    "adam:beta1=...,beta2=...,eps=...,weight_decay=..." for Adam and the same with "adamw" for
    AdamW (from its first param group), and for sketchfuse.torch.AdamW, None for any other kind."""
    if isinstance(optimizer, (torch.optim.AdamW, AdamW)):
        name = "adamw"
    elif isinstance(optimizer, torch.optim.Adam):
        name = "adam"
    elif isinstance(optimizer, torch.optim.SGD):
        return "sgd"
    else:
        return None
    group = optimizer.param_groups[0]
    beta1, beta2 = group["betas"]
    return (f"{name}:beta1={float(beta1)!r},beta2={float(beta2)!r},eps={float(group['eps'])!r},"
            f"weight_decay={float(group['weight_decay'])!r}")


def schemes():
    """Every scheme of the registry, as sketchfuse_worker --list_schemes=json lists it: dicts with
    name, route (centralized, decentralized or hybrid), compressor, default_compressor, compresses,
    summary, traits and hybrid_of."""
    return json.loads(_native.schemes_json())


class DivergedError(RuntimeError):
    """A non-finite gradient or update: raised on every rank at the same step."""


def _format(value):
    if isinstance(value, bool):
        return "1" if value else "0"
    return repr(value) if isinstance(value, float) else str(value)


def _settings_dict(settings_text):
    out = {}
    for line in settings_text.splitlines():
        if "=" in line:
            key, value = line.split("=", 1)
            out[key] = value
    return out


def _global_rank(group, group_rank):
    if group is None or group is dist.group.WORLD:
        return group_rank
    if hasattr(dist, "get_global_rank"):
        return dist.get_global_rank(group, group_rank)
    return dist.distributed_c10d._get_global_rank(group, group_rank)  # PyTorch 1.x


def suggest_bucket_cap_mb(model, scheme, compressor=None, world_size=None):
    """DDP's bucket_cap_mb for `model` from the C++ worker's fusion planner.

    The planner (common/fusion_planner.h, mode "optimal") groups the model's
    parameters, in backward order, as a sketchfuse_worker would for this scheme
    and compressor; DDP fills buckets in the same order up to the cap, so a
    cap of the largest planned group gives about the planned groups. Returns
    (bucket_cap_mb, planned group sizes). DDP caps its first bucket at 1 MiB
    whatever bucket_cap_mb says (torch.distributed._DEFAULT_FIRST_BUCKET_BYTES).
    ValueError for a bad scheme or compressor, or a model without trainable
    parameters.
    """
    sizes = [p.numel() for p in reversed(list(model.parameters())) if p.requires_grad]
    if not sizes:
        raise ValueError("the model has no trainable parameters")
    if world_size is None:
        world_size = dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1
    settings = f"scheme={scheme}\ncompressor={compressor or ''}\nworld_size={world_size}\n"
    try:
        groups = _native.plan_groups(sizes, settings)
    except _native.NativeError as e:
        raise ValueError(f"sketchfuse: {e}") from None
    # A hair above the largest group, so DDP's "fill until past the cap" closes each bucket there.
    return (max(groups) + 1) * 4 / 2 ** 20, groups


def _key_order(key):
    """Canonical order: DDP's first buckets hold the model's last parameters
    first, each in forward order; reversing the order within each bucket gives
    the model's backward order, in which the C++ worker fuses its layers."""
    index, pos = key.split(".")
    return int(index), -int(pos)


class _Group:
    """One bucket layout's native group.

    The native group holds the bucket's parameters in their canonical order
    (by key, _key_order: the model's backward order, as the C++ worker fuses
    layers), whatever order DDP's rebuilt bucket has them in:
    the sketch hashes positions, so a resumed run, which starts with the
    first iteration's buckets again, must see the same positions.
    """

    def __init__(self, index, native_group, bucket_keys, numels):
        self.index = index
        self.native_group = native_group
        self.bucket_keys = bucket_keys  # in the bucket's order
        offsets, at = {}, 0
        for key, n in zip(bucket_keys, numels):
            offsets[key] = (at, n)
            at += n
        self.keys = sorted(bucket_keys, key=_key_order)  # canonical order
        self.signature = tuple(offsets[k][1] for k in self.keys)
        # (bucket offset, size) of each canonical piece, or None when the bucket is in canonical order.
        self.pieces = None if self.keys == bucket_keys else [offsets[k] for k in self.keys]

    def pieces_in_canonical_order(self):
        """(key, offset, size) of each parameter in the canonical flat vector."""
        out, at = [], 0
        for key, n in zip(self.keys, self.signature):
            out.append((key, at, n))
            at += n
        return out

    def to_canonical(self, flat):
        if self.pieces is None:
            return flat
        return torch.cat([flat[at:at + n] for at, n in self.pieces])

    def from_canonical(self, flat):
        if self.pieces is None:
            return flat
        out = torch.empty_like(flat)
        at_canonical = 0
        for at, n in self.pieces:
            out[at:at + n] = flat[at_canonical:at_canonical + n]
            at_canonical += n
        return out


class HookState:
    """The hook's state: the native session, the bucket groups, counters.

    scheme: a scheme of the registry (schemes() lists them with their
      routes). The decentralized ones run over process_group; the
      centralized and hybrid ones join the job's coordinator at `coordinator` (host:port) as a sketchfuse_worker
      does and push to its shards (auto falls back to the process group when
      they fail). compressor: the worker's spec string (None: the scheme's
      default); process_group: DDP's (None: the default group); worker_id
      (default "hook-<rank>"), token_file and tls_ca: as the worker's flags.
    options: seed (1), momentum (0.9), error_feedback (True), release_cap
      (1.0), second_round (False), check_finite (True: a non-finite gradient
      on any rank stops every rank at that step), device ("cpu"; "cuda":
      sketch_allreduce on CUDA buckets keeps error feedback, selection, the
      sketch and its peeling decode on the rank's current GPU, and only the
      sketch crosses to the host for the collectives; with "cpu" CUDA buckets
      are staged through host memory); for the centralized schemes
      job ("sketchfuse"), tls_cert, tls_key, join_credential_file (this
      rank's join credential, for a coordinator that requires them),
      join_timeout_s (120),
      push_timeout_s (60), push_attempts (5), probe_every (20),
      partition_elements (unset: the job's partitions; a rank that states
      another bound than the job's is refused at join); optimizer (the
      torch optimizer the caller steps: SGD with momentum is refused where the
      hook keeps the momentum; SGD has the residual kept in units of its
      learning rates, residual_in_rate_units (True; False: raw gradients;
      refused without SGD or without a residual);
      sketchfuse.torch.AdamW has the hook keep Adam's
      moments, and refuses a momentum above 0; torch's Adam and AdamW set the
      hook's momentum to 0 unless stated; an Adam-family spec,
      optimizer_spec(), must be the same on every rank and the job's).

    A centralized hook aggregates the job's groups (the worker's fusion plan
    over the model's parameters, see write_job_config), not DDP's buckets: it
    gathers the buckets of a step and exchanges the groups at the last one.
    It joins the coordinator there in the first step (the parameters are
    known then); an unreachable coordinator is an error after join_timeout_s.

    Raises ValueError for an unknown scheme or option, a malformed
    compressor, a centralized scheme without a coordinator (or the reverse),
    or a setting that differs between ranks (on every rank, naming the field)
    -- all but the last before any communication.
    """

    def __init__(self, scheme, compressor=None, process_group=None, coordinator=None, worker_id=None,
                 token_file=None, tls_ca=None, **options):
        if not isinstance(scheme, str) or not scheme:
            raise ValueError(f"scheme must be a scheme name; got {scheme!r}")
        if compressor is not None and not isinstance(compressor, str):
            raise ValueError(f"compressor must be a spec string or None; got {compressor!r}")
        optimizer = options.pop("optimizer", None)
        rate_units = options.pop("residual_in_rate_units", None)
        unknown = sorted(set(options) - set(_SETTING_OPTIONS))
        if unknown:
            raise ValueError(f"unknown option(s) {', '.join(unknown)} (known: {', '.join(_SETTING_OPTIONS)}, "
                             "optimizer, residual_in_rate_units)")
        try:
            compresses, needs_parameters = _native.scheme_traits(scheme)
        except _native.NativeError as e:
            raise ValueError(f"scheme {scheme!r}: {e}") from None
        spec = optimizer_spec(optimizer) if optimizer is not None else None
        # sketchfuse.torch.AdamW: Adam's moments kept here, per rank before compression ("rank") or of the
        # aggregated mean where nothing is compressed ("mean"); torch's Adam and AdamW: on the update.
        self._moments = None
        self._adam_place = None
        if isinstance(optimizer, AdamW):
            if optimizer.dense_warmup_steps and coordinator is not None:
                raise ValueError("sketchfuse hook: sketchfuse AdamW's dense_warmup_steps runs its warm-up over the "
                                 "process group: decentralized schemes only (the servers number their rounds from "
                                 f"the job's first step); got {scheme!r} with a coordinator")
            if float(options.get("momentum", 0.0)) > 0:
                raise ValueError(f"sketchfuse hook: momentum {options['momentum']} with sketchfuse.torch.AdamW, whose "
                                 "first moment the hook keeps already (leave momentum unset, or 0)")
            self._adam_place = "rank" if compresses else "mean"
            self._moments = RankMoments(*optimizer.hyperparameters(),
                                        dense_warmup=optimizer.dense_warmup_steps if compresses else 0,
                                        scaled=compresses and optimizer.second_moment == "scaled")
        if spec is not None and spec != "sgd":
            options["optimizer"] = spec
            if "momentum" not in options:
                options["momentum"] = 0.0  # the optimizer's first moment is the momentum
            elif compresses and float(options["momentum"]) > 0:
                warnings.warn(f"sketchfuse hook: momentum {options['momentum']} kept in the hook before compression, "
                              f"and {spec.split(':')[0]} keeps its own first moment of the update: two momenta "
                              "(leave momentum unset, or 0, with Adam-family optimizers)", stacklevel=2)
            if compresses and self._moments is None:
                warnings.warn(f"sketchfuse hook: {type(optimizer).__name__} on the aggregated update of {scheme!r}: "
                              "Adam steps a coordinate that error feedback sent after k steps about sqrt(k) times too "
                              "short (through the hook the transformer's validation loss ended 35 to 43% above DDP's at "
                              "10x to 17x); sketchfuse.torch.AdamW keeps Adam's moments on each rank before "
                              "compression (10 to 12% above): see python/README.md, \"Adam and AdamW\"",
                              stacklevel=2)
        # torch's SGD: error feedback's residual kept in units of each parameter's learning rate (the worker's
        # --residual_in_rate_units): rescaled by r / r' when its param group's lr goes from r to r'.
        if rate_units is not None and not isinstance(rate_units, bool):
            raise ValueError(f"residual_in_rate_units must be True or False; got {rate_units!r}")
        sgd = isinstance(optimizer, torch.optim.SGD)
        if rate_units and not sgd:
            raise ValueError("sketchfuse hook: residual_in_rate_units reads the learning rates of the torch.optim.SGD "
                             f"handed as optimizer=; got {type(optimizer).__name__ if optimizer is not None else None}"
                             " (sketchfuse AdamW keeps its updates in units of the parameters already)")
        keeps_residual = compresses and bool(options.get("error_feedback", True))
        if rate_units and not keeps_residual:
            raise ValueError(f"sketchfuse hook: residual_in_rate_units with scheme {scheme!r} and error_feedback "
                             f"{options.get('error_feedback', True)}: there is no residual to keep")
        self._rate_units = (sgd and keeps_residual) if rate_units is None else rate_units
        self._rate_optimizer = optimizer if (self._rate_units or self._moments is not None) else None
        self._residual_rates = {}  # key -> the lr its residual is in units of (with _rate_units)
        named = {"coordinator": coordinator, "worker_id": worker_id, "token_file": token_file, "tls_ca": tls_ca}
        for key, value in named.items():
            if value is not None and (not isinstance(value, str) or "\n" in value):
                raise ValueError(f"{key} must be a one-line string; got {value!r}")
        lines = [f"scheme={scheme}", f"compressor={compressor or ''}"]
        lines += [f"{key}={value}" for key, value in named.items() if value is not None]
        lines += [f"{key}={_format(value)}" for key, value in options.items()]
        self._on_gpu = str(options.get("device", "cpu")) == "cuda"
        if self._on_gpu:
            if not torch.cuda.is_available():
                raise ValueError("sketchfuse hook: device='cuda' needs a GPU; torch.cuda.is_available() is False")
            lines.append(f"gpu={torch.cuda.current_device()}")
        # Checked for one rank of two first: no process group is touched yet.
        try:
            _native.check_settings("\n".join(lines + ["rank=0", "world_size=2"]))
        except _native.NativeError as e:
            raise ValueError(f"sketchfuse hook: {e}") from None
        momentum = float(options.get("momentum", 0.9))
        if optimizer is not None and compresses and momentum > 0:
            for i, group in enumerate(optimizer.param_groups):
                if group.get("momentum", 0) != 0:
                    raise ValueError(
                        f"optimizer param group {i} has momentum {group['momentum']}: with scheme {scheme!r} the hook "
                        f"keeps momentum {momentum} before compression; use SGD without momentum (or momentum=0 here)")

        if not dist.is_available() or not dist.is_initialized():
            raise RuntimeError("sketchfuse hook: torch.distributed is not initialized (call init_process_group first)")
        self.process_group = process_group if process_group is not None else dist.group.WORLD
        self.rank = dist.get_rank(self.process_group)
        self.world_size = dist.get_world_size(self.process_group)
        self._backend = dist.get_backend(self.process_group)
        self._comm_device = torch.device("cuda", torch.cuda.current_device()) if self._backend == "nccl" else None
        lines += [f"rank={self.rank}", f"world_size={self.world_size}"]
        if self._moments is not None:
            self._moments.world = self.world_size
        try:
            self.settings = _native.resolved_settings("\n".join(lines))
        except _native.NativeError as e:
            raise ValueError(f"sketchfuse hook: {e}") from None
        self._check_ranks_agree()
        if self._moments is not None:
            optimizer.hook_state = self

        self.scheme = scheme
        self.compresses = compresses
        self.joins_coordinator = coordinator is not None
        self._needs_parameters = needs_parameters
        self._error = None
        self._ops = self._make_ops()
        self._session = None
        if not self.joins_coordinator:
            err = _native.err_buffer()
            self._session = _native.lib().sf_session_create(self.settings.encode(), ctypes.byref(self._ops), err,
                                                             len(err))
            if not self._session:
                raise ValueError(f"sketchfuse hook: {_native.text(err)}")
        self.step = 0
        self._groups = {}  # bucket index -> _Group (decentralized)
        self._key_of = {}  # id(parameter) -> key
        self._first_step_seen = False
        self._pending = {}  # key -> (residual, velocity): loaded, not yet in a group
        self._method_state = {}  # bucket index -> (signature, method state) of buckets whose method keeps one
        # Centralized: the step's buckets until its last one, the model's
        # canonical layout (key -> (offset, numel)) and the job's groups over it
        # ((group, offset, numel), consecutive) once joined, and the job groups'
        # state loaded before the join.
        self._step_buckets = []
        self._layout = None
        self._job_groups = None
        self._job_state = None
        # Counters of a run this state was loaded from (state_dict()["stats"]), added to the live ones.
        self._retired = dict(_ZERO_STATS)
        # The allreduces of sketchfuse AdamW's dense warm-up and scaled second moment, which the native
        # session does not see.
        self._adam_counts = dict(_ZERO_STATS)

    # -- settings agreement -------------------------------------------------

    def _agreed_settings(self):
        """The settings every rank (and a resumed run) must share: the native ones but the per-rank ones, and
        where Adam's moments are kept when the hook keeps them."""
        mine = {k: v for k, v in _settings_dict(self.settings).items() if k not in _PER_RANK}
        if self._rate_units:
            mine["residual_in_rate_units"] = True
        if self._adam_place is not None:
            mine["adam_moments"] = self._adam_place
            if self._moments.dense_warmup:
                mine["adam_dense_warmup"] = self._moments.dense_warmup
            if self._moments.scaled:
                mine["adam_second_moment"] = "scaled"
        return mine

    def _check_ranks_agree(self):
        mine = self._agreed_settings()
        everyone = [None] * self.world_size
        dist.all_gather_object(everyone, mine, group=self.process_group)
        differing = sorted({key for other in everyone for key in set(other) | set(mine)
                            if other.get(key) != mine.get(key)})
        if differing:
            detail = "; ".join(f"{key}: " + ", ".join(f"rank {r}={other.get(key)!r}" for r, other in enumerate(everyone))
                               for key in differing)
            raise ValueError(f"sketchfuse hook: the ranks' settings differ in {', '.join(differing)} ({detail})")

    # -- collectives over the process group ---------------------------------

    def _make_ops(self):
        lib = _native.lib()
        group = self.process_group

        def guarded(fn):
            def call(*args):
                try:
                    fn(*args)
                    return 0
                except BaseException as e:  # noqa: BLE001 - kept and re-raised after the native call
                    if self._error is None:
                        self._error = e
                    return 1
            return call

        def on_comm_device(t):
            return t.to(self._comm_device) if self._comm_device is not None else t

        # Tensors given to torch.distributed own their memory: a tensor over
        # the library's buffer (torch.frombuffer) keeps a Python object alive,
        # and Gloo's threads may drop their last reference to it late, even
        # during interpreter shutdown, which aborts the process.
        def copied(ptr, size, dtype, element):
            t = torch.empty(size, dtype=dtype)
            if size:
                ctypes.memmove(t.data_ptr(), ptr, size * element)
            return t

        def copy_back(t, ptr, element):
            t = t.cpu().contiguous()
            if t.numel():
                ctypes.memmove(ptr, t.data_ptr(), t.numel() * element)

        def all_reduce(_user, ptr, count):
            t = on_comm_device(copied(ptr, count, torch.float32, 4))
            dist.all_reduce(t, group=group)
            copy_back(t, ptr, 4)

        def all_gather(_user, mine_ptr, size, all_handle, sizes):
            sizes_t = on_comm_device(torch.tensor([size], dtype=torch.int64))
            gathered_sizes = [torch.zeros_like(sizes_t) for _ in range(self.world_size)]
            dist.all_gather(gathered_sizes, sizes_t, group=group)
            counts = [int(s.item()) for s in gathered_sizes]
            longest = max(counts)
            padded = torch.zeros(max(longest, 1), dtype=torch.uint8)
            if size:
                ctypes.memmove(padded.data_ptr(), mine_ptr, size)
            padded = on_comm_device(padded)
            blocks = [torch.empty_like(padded) for _ in range(self.world_size)]
            dist.all_gather(blocks, padded, group=group)
            joined = torch.cat([b[:c].cpu() for b, c in zip(blocks, counts)]).contiguous()
            for r, c in enumerate(counts):
                sizes[r] = c
            lib.sf_bytes_assign(all_handle, joined.data_ptr() if joined.numel() else None, joined.numel())

        def broadcast(_user, ptr, size, root):
            t = on_comm_device(copied(ptr, size, torch.uint8, 1))
            dist.broadcast(t, src=_global_rank(group, root), group=group)
            copy_back(t, ptr, 1)

        def barrier(_user):
            dist.barrier(group=group)

        def send(_user, ptr, size, peer, tag):
            dst = _global_rank(group, peer)
            dist.send(on_comm_device(torch.tensor([size], dtype=torch.int64)), dst, group=group, tag=tag)
            if size:
                dist.send(on_comm_device(copied(ptr, size, torch.uint8, 1)), dst, group=group, tag=tag)

        def receive(peer, tag):
            src = _global_rank(group, peer)
            size_t = on_comm_device(torch.zeros(1, dtype=torch.int64))
            dist.recv(size_t, src, group=group, tag=tag)
            size = int(size_t.item())
            data = on_comm_device(torch.empty(size, dtype=torch.uint8))
            if size:
                dist.recv(data, src, group=group, tag=tag)
            return data.cpu().contiguous()

        def recv(_user, out_handle, peer, tag):
            data = receive(peer, tag)
            lib.sf_bytes_assign(out_handle, data.data_ptr() if data.numel() else None, data.numel())

        def send_recv(_user, ptr, size, send_to, recv_from, tag, out_handle):
            dst = _global_rank(group, send_to)
            size_t = on_comm_device(torch.tensor([size], dtype=torch.int64))
            payload = on_comm_device(copied(ptr, size, torch.uint8, 1))
            pending = [dist.isend(size_t, dst, group=group, tag=tag)]
            if size:
                pending.append(dist.isend(payload, dst, group=group, tag=tag))
            data = receive(recv_from, tag)
            for work in pending:
                work.wait()
            lib.sf_bytes_assign(out_handle, data.data_ptr() if data.numel() else None, data.numel())

        ops = _native.sf_collective_ops()
        ops.user = None
        # The ctypes function objects must live as long as the session: kept on ops.
        ops.all_reduce_sum_f32 = _native.ALL_REDUCE(guarded(all_reduce))
        ops.all_gather_bytes = _native.ALL_GATHER(guarded(all_gather))
        ops.broadcast_bytes = _native.BROADCAST(guarded(broadcast))
        ops.barrier = _native.BARRIER(guarded(barrier))
        ops.send_bytes = _native.SEND(guarded(send))
        ops.recv_bytes = _native.RECV(guarded(recv))
        ops.send_recv_bytes = _native.SEND_RECV(guarded(send_recv))
        return ops

    # -- groups --------------------------------------------------------------

    def _raise_native(self, err, what):
        message = _native.text(err)
        error, self._error = self._error, None
        if "diverged:" in message:
            raise DivergedError(f"sketchfuse hook, rank {self.rank}: {message}") from error
        raise RuntimeError(f"sketchfuse hook, rank {self.rank}, {what}: {message}") from error

    def _group_state(self, group):
        return self._native_state(group.native_group)

    def _native_state(self, native_group):
        """The group's (residual, velocity, method state); an empty tensor for a part not kept."""
        lib = _native.lib()
        sizes = [lib.sf_session_state_size(self._session, native_group, e) for e in _STATE_PARTS_INDEX]
        arrays = [torch.zeros(n, dtype=torch.float32) for n in sizes]
        err = _native.err_buffer()
        ptrs = [a.data_ptr() if a.numel() else None for a in arrays]
        if lib.sf_session_save_state(self._session, native_group, *ptrs, err, len(err)) != 0:
            self._raise_native(err, "saving state")
        return arrays

    def _per_parameter(self, group, arrays, numels):
        """Splits a group's residual and velocity per parameter key (the method state is the bucket's)."""
        out = {}
        offset = 0
        for key, n in zip(group.keys, numels):
            out[key] = tuple(a[offset:offset + n].clone() if a.numel() else None for a in arrays[:2])
            offset += n
        return out

    def _restore(self, group, arrays):
        self._restore_native(group.native_group, arrays, f"bucket {group.index}")

    def _restore_native(self, native_group, arrays, label):
        """Restores (residual, velocity, method state); None or a missing part: not kept."""
        lib = _native.lib()
        err = _native.err_buffer()
        arrays = [a.contiguous() if a is not None else None for a in arrays]
        arrays += [None] * (len(_STATE_PARTS) - len(arrays))
        args = []
        for a in arrays:
            args += [a.data_ptr() if a is not None and a.numel() else None, a.numel() if a is not None else 0]
        if lib.sf_session_restore_state(self._session, native_group, *args, err, len(err)) != 0:
            self._raise_native(err, f"restoring {label}")

    def _group_for(self, bucket, params):
        index = bucket.index()
        keys = self._assign_keys(bucket, params)
        numels = [p.numel() for p in params]
        group = self._groups.get(index)
        if group is not None and group.bucket_keys == keys:
            return group
        # A new layout (the first iteration, or DDP's rebuilt buckets): the
        # state of these parameters moves to the new group.
        self._collect_into_pending(lambda g: g.index == index or any(k in keys for k in g.keys))
        err = _native.err_buffer()
        native_group = _native.lib().sf_session_add_group(self._session, sum(numels), err, len(err))
        if native_group < 0:
            self._raise_native(err, f"bucket {index}")
        group = _Group(index, native_group, keys, numels)
        self._groups[index] = group
        keys, signature = group.keys, group.signature
        dim = sum(signature)
        method = self._method_state.pop(index, None)
        method_state = method[1] if method is not None and method[0] == signature else None
        if any(k in self._pending for k in keys) or method_state is not None:
            arrays = []
            for entry in (0, 1):
                parts = [self._pending.get(k, (None, None))[entry] for k in keys]
                if all(p is None for p in parts):
                    arrays.append(None)
                else:
                    arrays.append(torch.cat([p if p is not None else torch.zeros(n) for p, n in zip(parts, signature)]))
            for k in keys:
                self._pending.pop(k, None)
            if any(a is not None and a.numel() != dim for a in arrays):
                raise ValueError(f"sketchfuse hook: the loaded state does not fit bucket {index} (a checkpoint of "
                                 "another model?)")
            self._restore(group, arrays + [method_state])
        return group

    def _collect_into_pending(self, selected):
        """Moves the state of the groups `selected` picks into _pending (per parameter) and retires them."""
        for index, group in list(self._groups.items()):
            if not selected(group):
                continue
            arrays = self._group_state(group)
            self._pending.update(self._per_parameter(group, arrays, group.signature))
            if arrays[2].numel():  # the method's state stays with the bucket it belongs to
                self._method_state[index] = (group.signature, arrays[2])
            del self._groups[index]

    # -- the hook ------------------------------------------------------------

    def _assign_keys(self, bucket, params):
        if not self._first_step_seen:
            for pos, p in enumerate(params):
                self._key_of.setdefault(id(p), f"{bucket.index()}.{pos}")
        keys = []
        for p in params:
            if id(p) not in self._key_of:
                raise RuntimeError(f"sketchfuse hook: bucket {bucket.index()} has a parameter the first iteration's "
                                   "buckets did not have")
            keys.append(self._key_of[id(p)])
        return keys

    def _end_of_step(self, bucket):
        if not bucket.is_last():
            return
        self.step += 1
        if not self._first_step_seen:
            self._first_step_seen = True
            unknown = sorted(set(self._pending) - set(self._key_of.values()), key=_key_order)
            if unknown:
                raise ValueError(f"sketchfuse hook: the loaded state has parameters {', '.join(unknown[:5])}"
                                 f"{' ...' if len(unknown) > 5 else ''} that this model's buckets do not have "
                                 "(a checkpoint of another model?)")

    def _dense_adam_step(self, grad, pieces, what):
        """Adam's dense warm-up (sketchfuse AdamW's dense_warmup_steps): the mean gradient over the process
        group (one allreduce), and the moments' update of it, alike on every rank. DivergedError on every
        rank for a non-finite mean (any rank's non-finite gradient makes it so)."""
        device = self._comm_device or torch.device("cpu")
        mean = grad.to(device, copy=True)
        dist.all_reduce(mean, group=self.process_group)
        mean = mean.to(grad.device).div_(self.world_size)
        if not torch.isfinite(mean).all():
            raise DivergedError(f"sketchfuse hook: a non-finite gradient at step {self.step} ({what}, in Adam's dense "
                                "warm-up) on some rank")
        ring = 4 * grad.numel() * 2 * (self.world_size - 1) // self.world_size  # a ring allreduce's bytes
        for key, n in (("bytes_sent", ring), ("bytes_received", ring), ("dense_bytes", 4 * grad.numel())):
            self._adam_counts[key] += n
        return self._moments.update(mean, pieces)

    def _summed_noise(self, grad, pieces):
        """The ranks' summed RankMoments.noise_summary (the scaled second moment): one allreduce over the
        process group, counted in stats(); None when the moments are not scaled."""
        if not self._moments.scaled:
            return None
        local = self._moments.noise_summary(grad, pieces)
        device = self._comm_device or torch.device("cpu")
        summed = local.to(device, copy=True)
        dist.all_reduce(summed, group=self.process_group)
        ring = 4 * summed.numel() * 2 * (self.world_size - 1) // self.world_size
        self._adam_counts["bytes_sent"] += ring
        self._adam_counts["bytes_received"] += ring
        return summed.to(grad.device)

    def _rated(self, pieces):
        """(key, offset, size) pieces with the learning rate of each key's param group now (the optimizer handed
        to the hook: sketchfuse AdamW, or SGD with the residual in units of the rate)."""
        rates = {id(p): float(group["lr"]) for group in self._rate_optimizer.param_groups for p in group["params"]}
        rate_of_key = {key: rates[pid] for pid, key in self._key_of.items() if pid in rates}
        missing = [key for key, _, _ in pieces if key not in rate_of_key]
        if missing:
            raise RuntimeError(f"sketchfuse hook: parameter(s) {', '.join(missing[:5])} of DDP's buckets are in no "
                               f"param group of the {type(self._rate_optimizer).__name__} handed to the hook")
        return [(key, at, n, rate_of_key[key]) for key, at, n in pieces]

    def _rescale_residuals(self, native_groups, pieces):
        """The residual in units of the rate (residual_in_rate_units): before a step encodes, each parameter's
        part of the residual is multiplied by r / r', r the lr it is in units of and r' its param group's lr
        now, as the worker's AggregationScheme::ScaleResiduals does, so what waits is applied at the rate of
        the steps that made it. native_groups: (native group, offset, size) of consecutive groups laid over
        the pieces' flat vector. A rate of 0 rescales nothing (the residual stays in units of the last
        non-zero one); a factor that is not finite is refused (RuntimeError naming the parameter)."""
        factors = []
        for key, at, n, rate in self._rated(pieces):
            last = self._residual_rates.get(key)
            if rate > 0:
                self._residual_rates[key] = rate
            if last is not None and rate > 0 and rate != last:
                factor = last / rate
                if not math.isfinite(factor):
                    raise RuntimeError(f"sketchfuse hook: parameter {key}'s lr went from {last!r} to {rate!r}: its "
                                       "residual cannot be rescaled by a factor that is not finite")
                factors.append((at, n, factor))
        if not factors:
            return
        for native_group, begin, size in native_groups:
            end = begin + size
            mine = [(max(at, begin) - begin, min(at + n, end) - begin, f) for at, n, f in factors
                    if at < end and at + n > begin]
            if not mine:
                continue
            arrays = self._native_state(native_group)
            if not arrays[0].numel():
                continue
            for lo, hi, f in mine:
                arrays[0][lo:hi] *= f
            self._restore_native(native_group, arrays, f"group {native_group}'s rescaled residual")

    def exchange(self, bucket):
        """Aggregates one DDP bucket (decentralized schemes); returns the mean update (a tensor like the bucket's
        buffer). With a centralized scheme, see hook(): the buckets of a step are exchanged together."""
        buffer = bucket.buffer()
        params = list(bucket.parameters())
        group = self._group_for(bucket, params)
        grad = buffer.detach()
        if self._on_gpu:
            # device="cuda": the bucket stays on its GPU.
            if grad.device.type != "cuda":
                raise RuntimeError(f"sketchfuse hook: device='cuda' exchanges CUDA buckets; bucket {bucket.index()} "
                                   f"is on {grad.device} (move the model to the GPU before wrapping it in DDP)")
            grad = grad.to(dtype=torch.float32)
        elif grad.device.type != "cpu" or grad.dtype != torch.float32:
            grad = grad.to("cpu", torch.float32)
        grad = group.to_canonical(grad.reshape(-1)).contiguous()
        if grad.numel() != sum(group.signature):
            raise RuntimeError(f"sketchfuse hook: bucket {bucket.index()} holds {grad.numel()} elements; its "
                               f"parameters have {sum(group.signature)}")
        if self._rate_units:
            self._rescale_residuals([(group.native_group, 0, grad.numel())], group.pieces_in_canonical_order())
        if self._adam_place == "rank" and self._moments.warming(group.keys):
            out = self._dense_adam_step(grad, self._rated(group.pieces_in_canonical_order()),
                                        f"bucket {bucket.index()}")
            self._end_of_step(bucket)
            out = group.from_canonical(out)
            return out.to(buffer.device, buffer.dtype).reshape(buffer.shape)
        if self._adam_place == "rank":
            rated = self._rated(group.pieces_in_canonical_order())
            grad = self._moments.update(grad, rated, self._summed_noise(grad, rated))
        out = torch.empty_like(grad)
        err = _native.err_buffer()
        if self._on_gpu:
            # The native side works on its own stream: the bucket must be complete.
            torch.cuda.current_stream(grad.device).synchronize()
            rc = _native.lib().sf_session_exchange_device(self._session, group.native_group, self.step,
                                                          grad.data_ptr(), out.data_ptr(), grad.numel(), err,
                                                          len(err))
        else:
            param_values = None
            if self._needs_parameters:
                param_values = group.to_canonical(
                    torch.cat([p.detach().reshape(-1).to("cpu", torch.float32) for p in params])).contiguous()
            rc = _native.lib().sf_session_exchange(
                self._session, group.native_group, self.step, grad.data_ptr(),
                param_values.data_ptr() if param_values is not None else None, grad.numel(), out.data_ptr(), err,
                len(err))
        if rc != 0:
            self._raise_native(err, f"bucket {bucket.index()} at step {self.step}")
        if bucket.is_last() and _native.lib().sf_session_finish_step(self._session, self.step, err, len(err)) != 0:
            self._raise_native(err, f"step {self.step}")
        self._end_of_step(bucket)
        if self._adam_place == "mean":
            out = self._moments.update(out, self._rated(group.pieces_in_canonical_order()))
        out = group.from_canonical(out)
        if out.device != buffer.device or out.dtype != buffer.dtype:
            out = out.to(buffer.device, buffer.dtype)
        return out.reshape(buffer.shape)

    # -- the centralized route: whole steps over the job's groups ----------------

    def gather(self, bucket):
        """Centralized schemes: keeps the bucket until the step's last one, then exchanges the job's groups and
        completes every bucket's future. Returns the bucket's future."""
        params = list(bucket.parameters())
        keys = self._assign_keys(bucket, params)
        future = torch.futures.Future()
        self._step_buckets.append((bucket.buffer(), keys, [p.numel() for p in params], future))
        if not bucket.is_last():
            return future
        buckets, self._step_buckets = self._step_buckets, []
        try:
            if self._session is None:
                self._join(buckets)
            total = sum(n for _, n in self._layout.values())
            grad = torch.empty(total, dtype=torch.float32)
            for buffer, bucket_keys, numels, _ in buckets:
                flat = buffer.detach().reshape(-1).to("cpu", torch.float32)
                at = 0
                for key, n in zip(bucket_keys, numels):
                    offset = self._layout[key][0]
                    grad[offset:offset + n] = flat[at:at + n]
                    at += n
            if self._rate_units:
                self._rescale_residuals(self._job_groups, [(key, offset, n) for key, (offset, n) in self._layout.items()])
            if self._moments is not None:
                pieces = self._rated([(key, offset, n) for key, (offset, n) in self._layout.items()])
            if self._adam_place == "rank":
                grad = self._moments.update(grad, pieces, self._summed_noise(grad, pieces))
            out = torch.empty_like(grad)
            err = _native.err_buffer()
            if _native.lib().sf_session_exchange_step(self._session, self.step, grad.data_ptr(), total,
                                                      out.data_ptr(), err, len(err)) != 0:
                self._raise_native(err, f"step {self.step}")
            if self._adam_place == "mean":
                out = self._moments.update(out, pieces)
        except BaseException as e:
            for _, _, _, f in buckets:
                if not f.done():
                    f.set_exception(e)
            raise
        for buffer, bucket_keys, numels, f in buckets:
            result = torch.cat([out[self._layout[k][0]:self._layout[k][0] + n] for k, n in zip(bucket_keys, numels)])
            f.set_result(result.to(buffer.device, buffer.dtype).reshape(buffer.shape))
        self._end_of_step(bucket)
        return future

    def _join(self, buckets):
        """Joins the job with the model's parameters in canonical order (all of them are in the first step's
        buckets), and restores job-group state loaded before."""
        numel_of = {}
        for _, bucket_keys, numels, _ in buckets:
            numel_of.update(zip(bucket_keys, numels))
        keys = sorted(numel_of, key=_key_order)
        layout, at = {}, 0
        for key in keys:
            layout[key] = (at, numel_of[key])
            at += numel_of[key]
        sizes = [numel_of[k] for k in keys]
        layers = (ctypes.c_uint64 * len(sizes))(*sizes)
        err = _native.err_buffer()
        session = _native.lib().sf_session_join(self.settings.encode(), layers, len(sizes), ctypes.byref(self._ops),
                                                err, len(err))
        if not session:
            self._raise_native(err, "joining the job")
        self._session = session
        self._layout = layout
        lib, at, self._job_groups = _native.lib(), 0, []
        for g in range(lib.sf_session_num_groups(session)):
            self._job_groups.append((g, at, lib.sf_session_group_dim(session, g)))
            at += self._job_groups[-1][2]
        if self._job_state is not None:
            state, self._job_state = self._job_state, None
            groups = _native.lib().sf_session_num_groups(self._session)
            if set(state) != set(range(groups)):
                raise RuntimeError(f"sketchfuse hook: the saved state has groups {sorted(state)}; the job has "
                                   f"{groups}")
            for g, arrays in state.items():
                self._restore_native(g, arrays, f"job group {g}")

    # -- checkpoints ----------------------------------------------------------

    def state_dict(self):
        """Version 2: residuals and velocities per parameter, each bucket's method state (FetchSGD's
        sketches), the job's groups' state when joined, Adam's moments per parameter (with
        sketchfuse.torch.AdamW; None otherwise), the step and counters (CPU tensors)."""
        params = {k: v for k, v in self._pending.items()}
        method = dict(self._method_state)
        for index, group in (self._groups.items() if not self.joins_coordinator else []):
            arrays = self._group_state(group)
            params.update(self._per_parameter(group, arrays, group.signature))
            if arrays[2].numel():
                method[index] = (group.signature, arrays[2])
        job_groups = {}
        if self.joins_coordinator:
            if self._session is None:
                job_groups = dict(self._job_state or {})
            else:
                for g in range(_native.lib().sf_session_num_groups(self._session)):
                    job_groups[g] = tuple(self._native_state(g))
        return {
            "version": 2,
            "job_groups": {g: dict(zip(_STATE_PARTS, arrays)) for g, arrays in job_groups.items()},
            "settings": self._agreed_settings(),
            "step": self.step,
            "adam_moments": self._moments.state_dict() if self._moments is not None else None,
            "residual_rates": dict(self._residual_rates),
            "params": {k: {"residual": r, "velocity": v} for k, (r, v) in params.items()},
            "method_state": {i: {"signature": list(sig), "state": m} for i, (sig, m) in method.items()},
            "stats": self.stats(),
        }

    def load_state_dict(self, state):
        """Restores what state_dict() saved (with the same settings); ValueError naming a misfit."""
        if not isinstance(state, dict) or state.get("version") not in (1, 2):
            raise ValueError("sketchfuse hook: not a hook state of version 1 or 2 (state_dict's)")
        version = state["version"]
        mine = self._agreed_settings()
        theirs = state.get("settings", {})
        differing = sorted(k for k in set(mine) | set(theirs) if mine.get(k) != theirs.get(k))
        if differing:
            raise ValueError("sketchfuse hook: the saved state's settings differ in " + ", ".join(
                f"{k} (saved {theirs.get(k)!r}, now {mine.get(k)!r})" for k in differing))
        step = state.get("step")
        if not isinstance(step, int) or step < 0:
            raise ValueError(f"sketchfuse hook: saved step {step!r} is not an integer >= 0")
        pending = {}
        for key, entry in state.get("params", {}).items():
            arrays = []
            for name in ("residual", "velocity"):
                a = entry.get(name)
                if a is not None:
                    a = torch.as_tensor(a, dtype=torch.float32).reshape(-1).contiguous()
                    if not torch.isfinite(a).all():
                        raise ValueError(f"sketchfuse hook: saved {name} of parameter {key} is not finite")
                arrays.append(a)
            pending[key] = tuple(arrays)
        method = {}
        # Version 1 kept FetchSGD's sketches under "sketch_state", its error as "residual" and its momentum as
        # "velocity"; version 2 keeps the method state whole (momentum, then error).
        for index, entry in state.get("method_state" if version == 2 else "sketch_state", {}).items():
            try:
                signature = tuple(int(n) for n in entry["signature"])
                if version == 2:
                    saved = torch.as_tensor(entry["state"], dtype=torch.float32).reshape(-1)
                else:
                    saved = torch.cat([torch.as_tensor(entry["velocity"], dtype=torch.float32).reshape(-1),
                                       torch.as_tensor(entry["residual"], dtype=torch.float32).reshape(-1)])
            except (KeyError, TypeError, ValueError, RuntimeError) as e:
                raise ValueError(f"sketchfuse hook: saved method state of bucket {index!r} is malformed ({e})") from None
            if not torch.isfinite(saved).all():
                raise ValueError(f"sketchfuse hook: saved method state of bucket {index} is not finite")
            method[int(index)] = (signature, saved)
        job_groups = {}
        for g, entry in state.get("job_groups", {}).items():
            arrays = tuple(None if entry.get(n) is None else torch.as_tensor(entry[n], dtype=torch.float32).reshape(-1)
                           for n in _STATE_PARTS)
            if any(a is not None and not torch.isfinite(a).all() for a in arrays):
                raise ValueError(f"sketchfuse hook: saved state of job group {g} is not finite")
            job_groups[int(g)] = arrays
        moments = None
        if self._moments is not None:
            moments = RankMoments(self._moments.beta1, self._moments.beta2, self._moments.eps,
                                  dense_warmup=self._moments.dense_warmup, scaled=self._moments.scaled,
                                  world=self._moments.world)
            moments.load_state_dict(state.get("adam_moments") or {})
        residual_rates = state.get("residual_rates") or {}
        if not isinstance(residual_rates, dict) or not all(
                isinstance(k, str) and not isinstance(r, bool) and isinstance(r, (int, float)) and 0 < r < float("inf")
                for k, r in residual_rates.items()):
            raise ValueError("sketchfuse hook: saved residual_rates must map parameter keys to finite rates > 0")
        retired = {k: state.get("stats", {}).get(k, v) for k, v in _ZERO_STATS.items()}
        for key, value in retired.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not (0 <= value < float("inf")):
                raise ValueError(f"sketchfuse hook: saved counter {key} is {value!r}, not a finite number >= 0")
        # Everything checked: from here on the state changes.
        if self.joins_coordinator:
            if self._session is not None:
                for g, arrays in job_groups.items():
                    self._restore_native(g, arrays, f"job group {g}")
            else:
                self._job_state = job_groups
        # Live groups give their state up: it is replaced at their next exchange.
        self._groups.clear()
        self._pending = pending
        self._method_state = method
        if moments is not None:
            self._moments = moments
        self._residual_rates = {k: float(r) for k, r in residual_rates.items()}
        self.step = step
        self._retired = retired
        self._adam_counts = dict(_ZERO_STATS)
        # Parameter keys are assigned in this process's first iteration.

    # -- counters ---------------------------------------------------------------

    def stats(self):
        """steps, bytes_sent, bytes_received, dense_bytes, compression_ratio and where the time went (seconds);
        peel_recovered_share (the share of the energy this rank inserted into peeled sketches
        that the decodes gave back, None without them) and warnings (a sketch too small for
        the world size, a peel that recovered under 90%)."""
        live = {}
        if self._session:
            size = 1 << 16
            out = ctypes.create_string_buffer(size)
            if _native.lib().sf_session_stats_json(self._session, out, size) == 0:
                live = json.loads(_native.text(out))
        merged = {k: self._retired[k] + self._adam_counts[k] + live.get(k, 0) for k in _ZERO_STATS}
        merged["steps"] = self.step
        merged["compression_ratio"] = (merged["dense_bytes"] / merged["bytes_sent"]) if merged["bytes_sent"] else None
        merged["scheme"] = self.scheme
        merged["peel_recovered_share"] = live.get("peel_recovered_share")
        merged["warnings"] = live.get("warnings", [])
        return merged

    def __del__(self):
        session = getattr(self, "_session", None)
        if session:
            _native.lib().sf_session_destroy(session)
            self._session = None


def hook(state, bucket):
    """The DDP communication hook: ``model.register_comm_hook(state, hook)``."""
    if state.joins_coordinator:
        return state.gather(bucket)
    future = torch.futures.Future()
    future.set_result(state.exchange(bucket))
    return future


def write_job_config(model, path, scheme, compressor=None, world_size=None, job="sketchfuse", **options):
    """Writes the job configuration the servers of a centralized hook job read
    (``sketchfuse_server --job_config=path``): the worker's fusion plan over the
    model's trainable parameters in backward order, with the scheme's
    compressor and the options (seed, momentum, ... as HookState's;
    ``num_shards=S`` partitions the groups for S shards, as the worker's
    ``--num_shards``, and ``partition_elements=N`` sets the bound itself). Every rank's HookState must then be made with the same
    settings, or the coordinator refuses the join naming what differs."""
    sizes = [p.numel() for p in reversed(list(model.parameters())) if p.requires_grad]
    if not sizes:
        raise ValueError("the model has no trainable parameters")
    if world_size is None:
        world_size = dist.get_world_size() if dist.is_available() and dist.is_initialized() else None
    if not isinstance(world_size, int) or world_size < 1:
        raise ValueError(f"world_size must be an integer >= 1; got {world_size!r}")
    lines = [f"scheme={scheme}", f"compressor={compressor or ''}", f"world_size={world_size}", f"job={job}",
             "coordinator=unused:0"]
    lines += [f"{key}={_format(value)}" for key, value in options.items()]
    try:
        _native.write_job_config("\n".join(lines), sizes, str(path))
    except _native.NativeError as e:
        raise ValueError(f"sketchfuse: {e}") from None
