// The deterministic workload shared by tests/push_client and the tests that
// check its results: each worker's payload for a (step, group), and the update
// the servers must answer with, computed in process.
#ifndef SKETCHFUSE_TESTS_PUSH_WORKLOAD_H_
#define SKETCHFUSE_TESTS_PUSH_WORKLOAD_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "common/payload.h"
#include "proto/job_config.pb.h"

namespace sketchfuse {

// Worker `worker`'s encoded gradient for (step, group): heavy-tailed values
// from a seed of (worker, step, group), encoded with the group's compressor.
absl::StatusOr<Payload> WorkerPayload(const v1::GroupConfig& group, uint32_t worker,
                                      uint64_t step);

// The update a correct shard answers for (step, group) of a job of
// `world_size` workers: merge of every worker's payload, decoded (and
// re-selected when the group asks for it).
absl::StatusOr<Update> ExpectedUpdate(const v1::GroupConfig& group, uint32_t world_size,
                                      uint64_t step);

// A short fingerprint of an update: entry count and sums of indices and values.
std::string UpdateChecksum(const Update& update);

}  // namespace sketchfuse

#endif  // SKETCHFUSE_TESTS_PUSH_WORKLOAD_H_
