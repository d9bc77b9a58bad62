// Runs a function on every rank of a real Gloo group whose ranks are threads
// of this process (real TCP connections on loopback, one InMemoryKeyValueStore
// for the rendezvous). Tests of the collectives and of the decentralized
// schemes use it; so does the scheme benchmark.
#ifndef SKETCHFUSE_WORKER_COLLECTIVE_LOCAL_GROUP_H_
#define SKETCHFUSE_WORKER_COLLECTIVE_LOCAL_GROUP_H_

#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "worker/collective/gloo_collective.h"

namespace sketchfuse {

// Calls fn(rank's collective) on `size` threads at once and returns each
// rank's status (a failed rendezvous is that rank's status).
std::vector<absl::Status> RunOnLocalGlooGroup(int size, const std::function<absl::Status(Collective&)>& fn,
                                              GlooOptions options = {});

}  // namespace sketchfuse

#endif  // SKETCHFUSE_WORKER_COLLECTIVE_LOCAL_GROUP_H_
