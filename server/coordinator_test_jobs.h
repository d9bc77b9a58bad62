// Small job configurations and registrations for the coordinator's tests (testonly).
#ifndef SKETCHFUSE_SERVER_COORDINATOR_TEST_JOBS_H_
#define SKETCHFUSE_SERVER_COORDINATOR_TEST_JOBS_H_

#include <cstdint>
#include <string>

#include "common/sketch_hash.h"
#include "proto/coordinator.pb.h"
#include "proto/job_config.pb.h"
#include "proto/run_config.h"

namespace sketchfuse {

// Job "j" of `world_size` "mlp" workers with one layer of 100 elements in one
// dense group: the least a coordinator accepts.
inline v1::JobConfig SmallDenseJob(uint32_t world_size) {
  v1::JobConfig job;
  job.set_job("j");
  job.set_world_size(world_size);
  v1::RunConfig* run = job.mutable_run();
  run->set_workload("mlp");
  run->add_layer_sizes(100);
  v1::GroupConfig* group = job.add_groups();
  group->set_dim(100);
  group->set_layer_end(1);
  group->set_compressor("dense");
  return job;
}

// Shard 0 of `job`'s single shard registering `address`, stating the job's
// config as the shard server does.
inline v1::RegisterShardRequest ShardZeroRegistration(const v1::JobConfig& job, const std::string& address) {
  v1::RegisterShardRequest request;
  request.set_job(job.job());
  request.set_job_fingerprint(JobFingerprint(job));
  request.set_partitioning(DescribeGroups(job));
  request.set_shard(0);
  request.set_num_shards(1);
  request.set_address(address);
  request.set_sketch_hash_family(kSketchHashFamily);
  return request;
}

}  // namespace sketchfuse

#endif  // SKETCHFUSE_SERVER_COORDINATOR_TEST_JOBS_H_
