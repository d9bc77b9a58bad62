"""cuda_library and gpu_test: nvcc in Bazel, and GPU tests that skip cleanly.

cuda_library compiles .cu files with the toolkit's nvcc (found by
@local_cuda, see third_party/cuda/cuda_configure.bzl) into position-independent
objects, for sm_80 and sm_90 plus compute_90 PTX so newer GPUs JIT it, and wraps
them in a cc_library linked against the static CUDA runtime. Headers and
include paths of `deps` reach nvcc through their CcInfo.

Without a toolkit, cuda_library builds nothing from .cu files: the library
contains only its `cpu_srcs` (the host code that says CUDA is absent), and
gpu_test builds a test that skips with a message, so that `bazel test //...`
passes on CPU-only machines and still counts every GPU test.
"""

load("@local_cuda//:defs.bzl", "CUDA_ENABLED", "NCCL_ENABLED")
load("@local_cuda//:defs.bzl", _NVCC = "NVCC")

CUDA_ARCH_FLAGS = [
    "-gencode=arch=compute_80,code=sm_80",
    "-gencode=arch=compute_90,code=sm_90",
    "-gencode=arch=compute_90,code=compute_90",
]

def _cuda_objects_impl(ctx):
    compilation = cc_common.merge_cc_infos(
        cc_infos = [dep[CcInfo] for dep in ctx.attr.deps],
    ).compilation_context
    inputs = depset(ctx.files.hdrs, transitive = [compilation.headers])
    objects = []
    for src in ctx.files.srcs:
        obj = ctx.actions.declare_file("_nvcc/%s/%s.pic.o" % (ctx.label.name, src.basename.rsplit(".", 1)[0]))
        args = ctx.actions.args()
        args.add_all(["-c", src.path, "-o", obj.path])
        args.add_all(["-std=c++17", "-O3", "-Xcompiler", "-fPIC", "--expt-relaxed-constexpr"])
        args.add_all(CUDA_ARCH_FLAGS)
        args.add_all(["-I.", "-I" + ctx.bin_dir.path])
        args.add_all(compilation.includes, format_each = "-I%s")
        args.add_all(compilation.quote_includes, format_each = "-I%s")
        args.add_all(compilation.system_includes, format_each = "-isystem=%s")
        args.add_all(compilation.defines, format_each = "-D%s")
        args.add_all(ctx.attr.copts)
        ctx.actions.run(
            executable = _NVCC,
            arguments = [args],
            inputs = depset([src], transitive = [inputs]),
            outputs = [obj],
            mnemonic = "Nvcc",
            progress_message = "Compiling %s with nvcc" % src.short_path,
            use_default_shell_env = True,
        )
        objects.append(obj)
    return [DefaultInfo(files = depset(objects))]

_cuda_objects = rule(
    implementation = _cuda_objects_impl,
    attrs = {
        "srcs": attr.label_list(allow_files = [".cu"]),
        "hdrs": attr.label_list(allow_files = True),
        "deps": attr.label_list(providers = [CcInfo]),
        "copts": attr.string_list(),
    },
)

def cuda_library(name, srcs = [], hdrs = [], cpu_srcs = [], deps = [], copts = [], **kwargs):
    """A cc_library whose .cu `srcs` are compiled by nvcc when CUDA is present.

    Args:
      name: target name.
      srcs: .cu files (only built with a toolkit).
      hdrs: plain C++ headers declaring the host launchers.
      cpu_srcs: .cc files built in both configurations (host code).
      deps: cc_library dependencies (their headers reach nvcc too).
      copts: extra nvcc flags.
      **kwargs: passed to the cc_library.
    """
    cuda_deps = ["//third_party:cuda_runtime"]
    if CUDA_ENABLED and srcs:
        _cuda_objects(
            name = name + "_nvcc",
            srcs = srcs,
            hdrs = hdrs,
            deps = deps + ["@local_cuda//:cuda_headers"],
            copts = copts,
        )
        native.cc_library(
            name = name,
            srcs = [":" + name + "_nvcc"] + cpu_srcs,
            hdrs = hdrs,
            deps = deps + cuda_deps,
            linkstatic = 1,
            **kwargs
        )
    else:
        native.cc_library(
            name = name,
            srcs = cpu_srcs,
            hdrs = hdrs,
            deps = deps + cuda_deps,
            **kwargs
        )

def gpu_test(name, srcs, deps = [], requires_nccl = False, **kwargs):
    """A GoogleTest target that runs on a GPU and skips with a message elsewhere.

    With a toolkit, the test is built from `srcs`; each test body must call
    SKIP_WITHOUT_GPU() (cuda/gpu_test_util.h) so it skips when no device is
    visible. Without a toolkit (or without NCCL, for `requires_nccl` tests),
    the target is a single test that skips and says the build is CPU-only.
    """
    if CUDA_ENABLED and (NCCL_ENABLED or not requires_nccl):
        native.cc_test(
            name = name,
            srcs = srcs,
            deps = deps + ["//cuda:gpu_test_util", "//third_party:gtest_main"],
            tags = kwargs.pop("tags", []) + ["gpu"],
            **kwargs
        )
    else:
        native.cc_test(
            name = name,
            srcs = ["//cuda:no_toolkit_test.cc"],
            deps = ["//third_party:gtest_main"],
            tags = kwargs.pop("tags", []) + ["gpu"],
            **kwargs
        )
