// The job configuration's file, written and read by one unit: the worker's
// planner writes it (sketchfuse_worker --write_job_config), the servers and
// test clients read it.
//
// The file is a v1.JobConfig (proto/job_config.proto) in JSON
// ({"job": "j", "worldSize": 4, "groups": [{"group": 0, "dim": 1000,
// "compressor": "dense"}]}) or protobuf text format; the extension decides
// (.json, else text). Written files are JSON.
#ifndef SKETCHFUSE_PROTO_JOB_CONFIG_FILE_H_
#define SKETCHFUSE_PROTO_JOB_CONFIG_FILE_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/job_config.pb.h"

namespace sketchfuse {

// Reads and parses the file. A run without partition_elements gets 0 (its
// groups are not cut), so every reader of one file holds the same job.
// NOT_FOUND if it cannot be read, INVALID_ARGUMENT naming the file and the
// parse error otherwise.
absl::StatusOr<v1::JobConfig> ReadJobConfig(const std::string& path);

// Writes `job` as JSON to `path`, atomically (a temporary file renamed into
// place). PERMISSION_DENIED naming the file when it cannot be written.
absl::Status WriteJobConfig(const v1::JobConfig& job, const std::string& path);

}  // namespace sketchfuse

#endif  // SKETCHFUSE_PROTO_JOB_CONFIG_FILE_H_
