"""ctypes binding of the C ABI in worker/hook/sketchfuse_c.h.

Only pointers, sizes and text cross; nothing here depends on PyTorch, so the
same library serves any PyTorch and any Python 3.
"""
import ctypes
import os

ABI_VERSION = 4
_ERR_SIZE = 2048

_lib = None


class sf_collective_ops(ctypes.Structure):
    pass


ALL_REDUCE = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint64)
ALL_GATHER = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint64, ctypes.c_void_p,
                              ctypes.POINTER(ctypes.c_uint64))
BROADCAST = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint64, ctypes.c_int)
BARRIER = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)
SEND = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint64, ctypes.c_int,
                        ctypes.c_uint32)
RECV = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32)
SEND_RECV = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint64, ctypes.c_int,
                             ctypes.c_int, ctypes.c_uint32, ctypes.c_void_p)

sf_collective_ops._fields_ = [
    ("user", ctypes.c_void_p),
    ("all_reduce_sum_f32", ALL_REDUCE),
    ("all_gather_bytes", ALL_GATHER),
    ("broadcast_bytes", BROADCAST),
    ("barrier", BARRIER),
    ("send_bytes", SEND),
    ("recv_bytes", RECV),
    ("send_recv_bytes", SEND_RECV),
]


def library_path():
    """Where the native library is: $SKETCHFUSE_LIB, else next to this file."""
    explicit = os.environ.get("SKETCHFUSE_LIB")
    if explicit:
        return explicit
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "_native", "libsketchfuse_c.so")


def lib():
    """The loaded library (loaded once); ImportError saying how to build it."""
    global _lib
    if _lib is not None:
        return _lib
    path = library_path()
    if not os.path.exists(path):
        raise ImportError(f"sketchfuse: the native library {path} is missing; run `bash scripts/build_python.sh` "
                          "(or set SKETCHFUSE_LIB to a built libsketchfuse_c.so)")
    loaded = ctypes.CDLL(path)
    c_err = ctypes.c_char_p
    u64 = ctypes.c_uint64
    loaded.sf_abi_version.restype = ctypes.c_int
    loaded.sf_bytes_assign.argtypes = [ctypes.c_void_p, ctypes.c_void_p, u64]
    loaded.sf_bytes_assign.restype = None
    loaded.sf_check_settings.argtypes = [ctypes.c_char_p, c_err, u64]
    loaded.sf_resolved_settings.argtypes = [ctypes.c_char_p, ctypes.c_char_p, u64, c_err, u64]
    loaded.sf_schemes_json.argtypes = [ctypes.c_char_p, u64, c_err, u64]
    loaded.sf_scheme_traits.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int),
                                        c_err, u64]
    loaded.sf_session_create.argtypes = [ctypes.c_char_p, ctypes.POINTER(sf_collective_ops), c_err, u64]
    loaded.sf_session_create.restype = ctypes.c_void_p
    loaded.sf_session_destroy.argtypes = [ctypes.c_void_p]
    loaded.sf_session_destroy.restype = None
    loaded.sf_session_join.argtypes = [ctypes.c_char_p, ctypes.POINTER(u64), u64, ctypes.POINTER(sf_collective_ops),
                                       c_err, u64]
    loaded.sf_session_join.restype = ctypes.c_void_p
    loaded.sf_session_exchange_step.argtypes = [ctypes.c_void_p, u64, ctypes.c_void_p, u64, ctypes.c_void_p, c_err,
                                                u64]
    loaded.sf_session_num_groups.argtypes = [ctypes.c_void_p]
    loaded.sf_session_num_groups.restype = ctypes.c_int64
    loaded.sf_session_group_dim.argtypes = [ctypes.c_void_p, ctypes.c_int64]
    loaded.sf_session_group_dim.restype = u64
    loaded.sf_session_finish_step.argtypes = [ctypes.c_void_p, u64, c_err, u64]
    loaded.sf_write_job_config.argtypes = [ctypes.c_char_p, ctypes.POINTER(u64), u64, ctypes.c_char_p, c_err, u64]
    loaded.sf_session_add_group.argtypes = [ctypes.c_void_p, u64, c_err, u64]
    loaded.sf_session_add_group.restype = ctypes.c_int64
    loaded.sf_session_exchange.argtypes = [ctypes.c_void_p, ctypes.c_int64, u64, ctypes.c_void_p, ctypes.c_void_p, u64,
                                           ctypes.c_void_p, c_err, u64]
    loaded.sf_session_exchange_device.argtypes = [ctypes.c_void_p, ctypes.c_int64, u64, ctypes.c_void_p,
                                                  ctypes.c_void_p, u64, c_err, u64]
    loaded.sf_session_state_size.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int]
    loaded.sf_session_state_size.restype = u64
    loaded.sf_session_save_state.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p,
                                             ctypes.c_void_p, c_err, u64]
    loaded.sf_session_restore_state.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p, u64,
                                                ctypes.c_void_p, u64, ctypes.c_void_p, u64, c_err, u64]
    loaded.sf_session_stats_json.argtypes = [ctypes.c_void_p, ctypes.c_char_p, u64]
    loaded.sf_plan_groups.argtypes = [ctypes.POINTER(u64), u64, ctypes.c_char_p, ctypes.POINTER(u64), u64, c_err,
                                      u64]
    loaded.sf_plan_groups.restype = ctypes.c_int64
    loaded.sf_epoch_order.argtypes = [u64, ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p]
    if loaded.sf_abi_version() != ABI_VERSION:
        raise ImportError(f"sketchfuse: {path} has C ABI version {loaded.sf_abi_version()}; this package needs "
                          f"{ABI_VERSION} (rebuild with `bash scripts/build_python.sh`)")
    _lib = loaded
    return _lib


class NativeError(Exception):
    """A call into the library failed; str() is its message (status code first)."""


def err_buffer():
    return ctypes.create_string_buffer(_ERR_SIZE)


def text(buffer):
    return buffer.value.decode("utf-8", "replace")


def check_settings(settings):
    err = err_buffer()
    if lib().sf_check_settings(settings.encode(), err, _ERR_SIZE) != 0:
        raise NativeError(text(err))


def resolved_settings(settings):
    err = err_buffer()
    out = ctypes.create_string_buffer(8192)
    if lib().sf_resolved_settings(settings.encode(), out, 8192, err, _ERR_SIZE) != 0:
        raise NativeError(text(err))
    return text(out)


def scheme_traits(scheme):
    """(compresses, needs_parameters) of a registry scheme."""
    compresses, needs = ctypes.c_int(), ctypes.c_int()
    err = err_buffer()
    if lib().sf_scheme_traits(scheme.encode(), ctypes.byref(compresses), ctypes.byref(needs), err, _ERR_SIZE) != 0:
        raise NativeError(text(err))
    return bool(compresses.value), bool(needs.value)


def schemes_json():
    """The registry's schemes as the worker lists them (--list_schemes=json), as text."""
    err = err_buffer()
    out = ctypes.create_string_buffer(1 << 16)
    if lib().sf_schemes_json(out, 1 << 16, err, _ERR_SIZE) != 0:
        raise NativeError(text(err))
    return text(out)


def epoch_order(seed, rank, epoch, n):
    """The permutation of range(n) a sketchfuse_worker of `rank` visits in `epoch` (a list of ints)."""
    out = (ctypes.c_int64 * max(n, 1))()
    if lib().sf_epoch_order(seed, rank, epoch, n, ctypes.addressof(out)) != 0:
        raise NativeError(f"epoch_order: bad arguments (seed {seed}, rank {rank}, epoch {epoch}, n {n})")
    return list(out[:n])


def plan_groups(layer_sizes, settings):
    """The fusion planner's group sizes for layers of these sizes (backward order)."""
    n = len(layer_sizes)
    layers = (ctypes.c_uint64 * max(n, 1))(*layer_sizes)
    groups = (ctypes.c_uint64 * max(n, 1))()
    err = err_buffer()
    count = lib().sf_plan_groups(layers, n, settings.encode(), groups, max(n, 1), err, _ERR_SIZE)
    if count < 0:
        raise NativeError(text(err))
    return list(groups[:count])


def write_job_config(settings, layer_sizes, path):
    n = len(layer_sizes)
    layers = (ctypes.c_uint64 * max(n, 1))(*layer_sizes)
    err = err_buffer()
    if lib().sf_write_job_config(settings.encode(), layers, n, path.encode(), err, _ERR_SIZE) != 0:
        raise NativeError(text(err))
