"""proto_grpc_library: protoc + gRPC + gMock code generation with Debian's tools.

Three targets per proto library `name` (as in Ray's protobuf/BUILD):
  <name>_proto    the .proto sources (a filegroup other proto libraries import)
  <name>_cc_proto the generated messages (cc_library)
  <name>_cc_grpc  the generated service stubs, with gMock mocks in
                  <file>_mock.grpc.pb.h (cc_library; only when has_services)
protoc and grpc_cpp_plugin come from /usr/bin (packages protobuf-compiler and
protobuf-compiler-grpc); imports resolve from the workspace root, so a .proto
imports "proto/payload.proto".
"""

_PROTOC = "/usr/bin/protoc"
_GRPC_PLUGIN = "/usr/bin/grpc_cpp_plugin"

def proto_grpc_library(name, srcs, deps = [], has_services = False, visibility = None):
    """Generates C++ messages (and gRPC stubs with mocks) for `srcs`.

    Args:
      name: base name of the three targets.
      srcs: .proto files in this package.
      deps: other proto_grpc_library base names (labels without suffix).
      has_services: whether the files declare services (adds <name>_cc_grpc).
      visibility: visibility of the generated targets.
    """
    stems = [src[:-len(".proto")] for src in srcs]
    dep_protos = [dep + "_proto" for dep in deps]
    native.filegroup(
        name = name + "_proto",
        srcs = srcs + dep_protos,
        visibility = visibility,
    )

    pb_outs = [s + ".pb.h" for s in stems] + [s + ".pb.cc" for s in stems]
    grpc_outs = []
    if has_services:
        grpc_outs = ([s + ".grpc.pb.h" for s in stems] + [s + ".grpc.pb.cc" for s in stems] +
                     [s + "_mock.grpc.pb.h" for s in stems])
    grpc_flags = ""
    if has_services:
        grpc_flags = ("--plugin=protoc-gen-grpc=%s --grpc_out=generate_mock_code=true:$(GENDIR) " %
                      _GRPC_PLUGIN)
    native.genrule(
        name = name + "_codegen",
        srcs = srcs + dep_protos,
        outs = pb_outs + grpc_outs,
        cmd = ("%s --proto_path=. --cpp_out=$(GENDIR) %s" % (_PROTOC, grpc_flags) +
               " ".join(["$(location %s)" % src for src in srcs])),
        message = "Generating C++ from %s" % ", ".join(srcs),
    )

    native.cc_library(
        name = name + "_cc_proto",
        srcs = [s + ".pb.cc" for s in stems],
        hdrs = [s + ".pb.h" for s in stems],
        deps = [dep + "_cc_proto" for dep in deps] + ["//third_party:protobuf"],
        visibility = visibility,
    )
    if has_services:
        native.cc_library(
            name = name + "_cc_grpc",
            srcs = [s + ".grpc.pb.cc" for s in stems],
            hdrs = [s + ".grpc.pb.h" for s in stems] + [s + "_mock.grpc.pb.h" for s in stems],
            deps = [":" + name + "_cc_proto"] + [dep + "_cc_proto" for dep in deps] + [
                "//third_party:grpc",
            ],
            visibility = visibility,
        )
