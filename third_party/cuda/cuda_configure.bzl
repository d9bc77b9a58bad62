"""Detects the CUDA toolkit and NCCL and exposes them as @local_cuda.

The toolkit is not a Debian package, so a user's machine may not have it. This
rule looks for nvcc under $CUDA_PATH (default /usr/local/cuda). When found, the
repository offers:
  :cuda_headers  the toolkit's include/ tree
  :cuda_runtime  cudart, linked statically
  :nccl          libnccl (shared; NCCL is too large to link statically)
and defs.bzl says CUDA_ENABLED = True with the nvcc path. When not found (or
SKETCHFUSE_NO_CUDA=1), the same targets exist but are empty, CUDA_ENABLED is
False, and the build says so once: GPU code is left out and GPU tests skip.
"""

_ENABLED_BUILD = """
package(default_visibility = ["//visibility:public"])

cc_library(
    name = "cuda_headers",
    hdrs = glob(["include/**"]),
    includes = ["include"],
)

cc_library(
    name = "cuda_runtime",
    srcs = ["lib64/libcudart_static.a"],
    linkopts = ["-ldl", "-lrt", "-lpthread"],
    deps = [":cuda_headers"],
)

cc_library(
    name = "nccl",
    linkopts = {nccl_linkopts},
    deps = [":cuda_headers"],
)
"""

_DISABLED_BUILD = """
package(default_visibility = ["//visibility:public"])

# No CUDA toolkit was found: these targets are empty so that CPU-only builds work.
cc_library(name = "cuda_headers")

cc_library(name = "cuda_runtime")

cc_library(name = "nccl")
"""

def _cuda_configure_impl(rctx):
    cuda_path = rctx.os.environ.get("CUDA_PATH", "/usr/local/cuda")
    nvcc = rctx.path(cuda_path + "/bin/nvcc")
    disabled_by_user = rctx.os.environ.get("SKETCHFUSE_NO_CUDA", "") == "1"
    if disabled_by_user or not nvcc.exists:
        reason = "SKETCHFUSE_NO_CUDA=1" if disabled_by_user else "no nvcc at " + str(nvcc)
        print("SketchFuse builds CPU-only (%s): CUDA kernels are left out and GPU tests skip." % reason)
        rctx.file("BUILD", _DISABLED_BUILD)
        rctx.file("defs.bzl", "CUDA_ENABLED = False\nNCCL_ENABLED = False\nNVCC = \"\"\n")
        return

    rctx.symlink(cuda_path + "/include", "include")
    rctx.symlink(cuda_path + "/lib64", "lib64")
    has_nccl = rctx.path(cuda_path + "/include/nccl.h").exists
    lib_dir = str(rctx.path(cuda_path + "/lib64").realpath)
    nccl_linkopts = ["-L" + lib_dir, "-Wl,-rpath," + lib_dir, "-lnccl"] if has_nccl else []
    rctx.file("BUILD", _ENABLED_BUILD.format(nccl_linkopts = repr(nccl_linkopts)))
    rctx.file("defs.bzl", "CUDA_ENABLED = True\nNCCL_ENABLED = %s\nNVCC = %r\n" % (has_nccl, str(nvcc)))

cuda_configure = repository_rule(
    implementation = _cuda_configure_impl,
    environ = ["CUDA_PATH", "SKETCHFUSE_NO_CUDA"],
    local = True,
)
