"""The worker's scheme registry, as `sketchfuse_worker --list_schemes=json`
prints it: the one list of schemes, routes, default compressors and traits
that launchers and studies read (none keeps a list of its own)."""
import json
import os
import subprocess
from dataclasses import dataclass, field

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_WORKER = os.path.join(ROOT, "bazel-bin", "worker", "sketchfuse_worker")


class RegistryError(Exception):
    pass


@dataclass(frozen=True)
class Scheme:
    name: str
    route: str                 # centralized, decentralized or hybrid
    compressor: str            # the compressor family it needs (dense, topk, count_sketch, importance)
    default_compressor: str    # its default spec
    compresses: bool           # False for the dense baselines
    summary: str
    traits: dict = field(default_factory=dict)
    hybrid_of: dict = None     # {"centralized": ..., "decentralized": ...} for a hybrid

    @property
    def on_one_route(self):
        """Not a hybrid: a hybrid's result is its centralized route's while the shards answer."""
        return self.route != "hybrid"


class Registry:
    def __init__(self, entries):
        self.schemes = [Scheme(**e) for e in entries]
        self._by_name = {s.name: s for s in self.schemes}

    def names(self):
        return [s.name for s in self.schemes]

    def get(self, name):
        """The scheme called `name`; RegistryError naming the known ones otherwise."""
        if name not in self._by_name:
            raise RegistryError(f"unknown scheme '{name}'; the schemes are {', '.join(self.names())}")
        return self._by_name[name]

    def check(self, names):
        """`names` once each, every one the registry's (RegistryError naming the first that is not)."""
        for n in names:
            self.get(n)
        return list(dict.fromkeys(names))

    def baselines(self):
        """The allreduce baselines: the schemes that do not compress, on the
        decentralized route, in registry order (dense_ps trains as
        dense_allreduce does, through the shards; name it to run it)."""
        return [s.name for s in self.schemes if not s.compresses and s.route == "decentralized"]

    def compressing(self, hybrids=False):
        """The compressing schemes in registry order; the hybrids only when asked."""
        return [s.name for s in self.schemes if s.compresses and (hybrids or s.on_one_route)]


def load(worker=None):
    """The registry of the worker binary `worker` (default: bazel-bin's)."""
    worker = worker or os.environ.get("SKETCHFUSE_WORKER") or DEFAULT_WORKER
    if not os.access(worker, os.X_OK):
        raise RegistryError(f"{worker} is not built (bash scripts/bazel.sh build //worker:sketchfuse_worker)")
    done = subprocess.run([worker, "--list_schemes=json"], capture_output=True, text=True)
    if done.returncode != 0:
        raise RegistryError(f"{worker} --list_schemes=json failed (exit {done.returncode}): "
                            f"{done.stderr.strip()[-300:]}")
    try:
        return Registry(json.loads(done.stdout))
    except (ValueError, TypeError) as e:
        raise RegistryError(f"{worker} --list_schemes=json printed no registry: {e}") from None
