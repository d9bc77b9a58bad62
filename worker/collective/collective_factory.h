// Picks the collective backend of a worker by name: "gloo" (CPU, TCP) or
// "nccl" (GPU; only in builds with NCCL).
#ifndef SKETCHFUSE_WORKER_COLLECTIVE_COLLECTIVE_FACTORY_H_
#define SKETCHFUSE_WORKER_COLLECTIVE_COLLECTIVE_FACTORY_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "worker/collective/collective.h"
#include "worker/collective/key_value_store.h"

namespace sketchfuse {

struct CollectiveConfig {
  std::string backend = "gloo";
  // Gloo: the address this rank listens on and its peers reach it at.
  std::string hostname = "127.0.0.1";
  // NCCL: the CUDA device of this rank.
  int device = 0;
  absl::Duration timeout = absl::Seconds(60);
  // Key prefix of the rendezvous in the store.
  std::string prefix = "collective";
};

// True when this build has the NCCL backend.
bool NcclBackendBuilt();

// INVALID_ARGUMENT for an unknown backend, or "nccl" in a build without
// NCCL (saying so); otherwise the backend's own Create.
absl::StatusOr<std::unique_ptr<Collective>> MakeCollective(const CollectiveConfig& config, KeyValueStore& store,
                                                           int rank, int size);

}  // namespace sketchfuse

#endif  // SKETCHFUSE_WORKER_COLLECTIVE_COLLECTIVE_FACTORY_H_
