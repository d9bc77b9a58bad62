// Fuzz target: a job configuration as a server daemon reads it (--job_config,
// JSON or binary protobuf) and turns it into its shard's aggregation config.
// Promises, whatever the bytes: nothing crashes; every refusal is a status;
// a shard config that is accepted creates an aggregation core whose groups
// all have a legal size (1 to 2^32 - 1 elements), and the groups of all
// shards together are the job's groups, each exactly once.
#include <set>
#include <string>
#include <vector>

#include "google/protobuf/util/json_util.h"
#include "proto/job_config.pb.h"
#include "server/job_config.h"
#include "google/protobuf/stubs/logging.h"
#include "tests/fuzz/fuzz_target.h"

namespace sketchfuse {
namespace {

v1::JobConfig ValidJob() {
  v1::JobConfig job;
  job.set_job("fuzz");
  job.set_world_size(3);
  job.set_round_deadline_ms(5000);
  job.set_finished_rounds_kept(4);
  v1::RunConfig* run = job.mutable_run();
  run->set_workload("mlp");
  run->set_scheme("sketch_ps");
  run->set_compressor("count_sketch:k=4,rows=3");
  run->set_second_round(true);
  for (uint64_t size : {100, 20, 300, 7}) run->add_layer_sizes(size);
  const std::vector<std::pair<uint32_t, uint32_t>> ranges = {{0, 2}, {2, 3}, {3, 4}};
  const std::vector<uint64_t> dims = {120, 300, 7};
  for (size_t g = 0; g < ranges.size(); ++g) {
    v1::GroupConfig* group = job.add_groups();
    group->set_group(static_cast<uint32_t>(g));
    group->set_dim(dims[g]);
    group->set_compressor(g == 2 ? "dense" : "count_sketch:k=4,rows=3");
    group->set_layer_begin(ranges[g].first);
    group->set_layer_end(ranges[g].second);
  }
  return job;
}

void Check(const v1::JobConfig& job) {
  (void)ValidateGroupLayers(job);
  for (int shards = 1; shards <= 3; ++shards) {
    absl::StatusOr<std::vector<int>> map = ShardOfGroups(job, shards);
    if (map.ok()) FuzzCheck(static_cast<int>(map->size()) == job.groups_size(), "a shard map of the wrong size");
    std::multiset<uint32_t> served;
    bool all_ok = true;
    for (int shard = 0; shard < shards; ++shard) {
      absl::StatusOr<AggregationConfig> config = ShardConfig(job, shard, shards);
      if (!config.ok()) {
        all_ok = false;
        continue;
      }
      for (const GroupSpec& group : config->groups) {
        FuzzCheck(group.dim >= 1 && group.dim < (1ull << 32), "an accepted group of illegal size");
        served.insert(group.group);
      }
    }
    if (all_ok) {
      std::multiset<uint32_t> groups;
      for (const v1::GroupConfig& g : job.groups()) groups.insert(g.group());
      FuzzCheck(served == groups, "the shards do not serve the job's groups exactly once");
    }
    FuzzCheck(!ShardConfig(job, shards, shards).ok(), "a shard index out of range was accepted");
  }
}

}  // namespace

std::vector<std::string> FuzzSeeds() {
  const v1::JobConfig job = ValidJob();
  std::string json;
  FuzzCheck(google::protobuf::util::MessageToJsonString(job, &json).ok(), "writing the JSON seed");
  return {job.SerializeAsString(), json};
}

}  // namespace sketchfuse

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace sketchfuse;
  // Protobuf logs every malformed string it meets; the inputs are meant to be malformed.
  static const bool quiet = (google::protobuf::SetLogHandler(nullptr), true);
  (void)quiet;
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  v1::JobConfig job;
  if (job.ParseFromString(bytes)) Check(job);
  v1::JobConfig from_json;
  if (google::protobuf::util::JsonStringToMessage(bytes, &from_json).ok()) Check(from_json);
  return 0;
}
