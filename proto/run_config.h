// Identity of a run configuration: the fingerprint a worker sends when it
// joins, and the readable difference the coordinator answers with when a
// worker's configuration is not the job's.
#ifndef SKETCHFUSE_PROTO_RUN_CONFIG_H_
#define SKETCHFUSE_PROTO_RUN_CONFIG_H_

#include <cstdint>
#include <string>

#include "google/protobuf/message_lite.h"
#include "proto/job_config.pb.h"

namespace sketchfuse {

// FNV-1a (64 bit) of a message's deterministic serialization. Equal messages
// have equal fingerprints in every process of one build.
uint64_t MessageFingerprint(const google::protobuf::MessageLite& message);

// MessageFingerprint of the run as 16 hex digits.
std::string RunFingerprint(const v1::RunConfig& run);

// One line per differing field, "field: job has X, worker has Y" (repeated
// fields: their lengths and the first differing position), joined by "; ".
// Each value is cut to a short prefix with its length (a diff quoting a
// 1 MiB string would be a status no gRPC client can receive). Empty when the
// two are equal.
std::string DiffRunConfigs(const v1::RunConfig& job, const v1::RunConfig& worker);

// MessageFingerprint of what a job config says about the aggregation (its
// groups and partitions, world size, run, hash seed; not the round deadline
// or the finished rounds kept, which a restarted shard may change) as 16 hex
// digits. Shards and the coordinator compare it.
std::string JobFingerprint(const v1::JobConfig& job);

// The job's groups in words: "3 groups", or with partitions "8 partitions
// of 2 fused groups (partition_elements 27347)".
std::string DescribeGroups(const v1::JobConfig& job);

// The rounds each group takes per step: 1, or 2 where the run has the exact
// second round (run.second_round: round 1 sums the workers' exact values at
// round 0's candidates). Shards and workers number rounds from 0 below it.
inline uint32_t RoundsPerStep(const v1::RunConfig& run) { return run.second_round() ? 2 : 1; }

}  // namespace sketchfuse

#endif  // SKETCHFUSE_PROTO_RUN_CONFIG_H_
