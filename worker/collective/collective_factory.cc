#include "worker/collective/collective_factory.h"

#include "absl/strings/str_cat.h"
#include "worker/collective/gloo_collective.h"
#ifdef SKETCHFUSE_WITH_NCCL
#include "worker/collective/nccl_collective.h"
#endif

namespace sketchfuse {

bool NcclBackendBuilt() {
#ifdef SKETCHFUSE_WITH_NCCL
  return true;
#else
  return false;
#endif
}

absl::StatusOr<std::unique_ptr<Collective>> MakeCollective(const CollectiveConfig& config, KeyValueStore& store,
                                                           int rank, int size) {
  if (config.backend == "gloo") {
    GlooOptions options;
    options.hostname = config.hostname;
    options.timeout = config.timeout;
    options.prefix = config.prefix + "/gloo";
    absl::StatusOr<std::unique_ptr<GlooCollective>> gloo = GlooCollective::Create(store, rank, size, options);
    if (!gloo.ok()) return gloo.status();
    return std::unique_ptr<Collective>(*std::move(gloo));
  }
  if (config.backend == "nccl") {
#ifdef SKETCHFUSE_WITH_NCCL
    NcclOptions options;
    options.device = config.device;
    options.timeout = config.timeout;
    options.prefix = config.prefix + "/nccl";
    absl::StatusOr<std::unique_ptr<NcclCollective>> nccl = NcclCollective::Create(store, rank, size, options);
    if (!nccl.ok()) return nccl.status();
    return std::unique_ptr<Collective>(*std::move(nccl));
#else
    return absl::InvalidArgumentError(
        "the nccl backend is not in this build (no CUDA toolkit with NCCL was found); use gloo");
#endif
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown collective backend '", config.backend, "'; the backends are gloo and nccl"));
}

}  // namespace sketchfuse
