// Fuzz target: the coordinator's request handlers (Join, RegisterShard,
// Heartbeat, Set, Get) as the service hands them their parsed requests. An
// input is a sequence of requests, each [kind byte][length byte][bytes of
// the request message], against one fresh coordinator of a 2-worker,
// 2-shard job. Blocking calls get an expired deadline, so none waits.
// Promises, whatever the bytes: nothing crashes; every refusal is a status;
// an accepted join names a rank below the world size and every shard; and
// afterwards the coordinator still works: a shard registers, a key set is
// read back (or the store says it is full), and an unknown worker's
// heartbeat is NOT_FOUND.
#include <string>
#include <vector>

#include "google/protobuf/stubs/logging.h"
#include "common/sketch_hash.h"
#include "proto/coordinator.pb.h"
#include "proto/job_config.pb.h"
#include "proto/run_config.h"
#include "server/coordinator_core.h"
#include "tests/fuzz/fuzz_target.h"

namespace sketchfuse {
namespace {

enum Kind : uint8_t { kJoin, kRegisterShard, kHeartbeat, kSet, kGet, kKinds };

v1::JobConfig ValidJob() {
  v1::JobConfig job;
  job.set_job("fuzz");
  job.set_world_size(2);
  v1::RunConfig* run = job.mutable_run();
  run->set_workload("mlp");
  run->set_scheme("sketch_ps");
  for (uint64_t size : {100, 20, 300}) run->add_layer_sizes(size);
  const std::vector<std::pair<uint32_t, uint32_t>> ranges = {{0, 2}, {2, 3}};
  const std::vector<uint64_t> dims = {120, 300};
  for (size_t g = 0; g < ranges.size(); ++g) {
    v1::GroupConfig* group = job.add_groups();
    group->set_group(static_cast<uint32_t>(g));
    group->set_dim(dims[g]);
    group->set_compressor("dense");
    group->set_layer_begin(ranges[g].first);
    group->set_layer_end(ranges[g].second);
  }
  return job;
}

std::string Frame(Kind kind, const std::string& message) {
  return std::string(1, static_cast<char>(kind)) + std::string(1, static_cast<char>(message.size())) + message;
}

const CoordinatorCore::Cancelled kNever = [] { return false; };

void Apply(CoordinatorCore& core, Kind kind, const std::string& bytes, absl::Time now) {
  const absl::Time expired = now - absl::Seconds(1);
  switch (kind) {
    case kJoin: {
      v1::JoinRequest request;
      if (!request.ParseFromString(bytes)) return;
      absl::StatusOr<v1::JoinReply> reply = core.Join(request, expired, kNever);
      if (reply.ok()) {
        FuzzCheck(reply->rank() < reply->world_size(), "a join answered with a rank beyond the world size");
        FuzzCheck(reply->shards_size() == 2, "a join answered without every shard");
      }
      return;
    }
    case kRegisterShard: {
      v1::RegisterShardRequest request;
      if (request.ParseFromString(bytes)) (void)core.RegisterShard(request);
      return;
    }
    case kHeartbeat: {
      v1::HeartbeatRequest request;
      if (request.ParseFromString(bytes)) (void)core.Heartbeat(request, now);
      return;
    }
    case kSet: {
      v1::KeyValue entry;
      if (entry.ParseFromString(bytes)) (void)core.Set(entry);
      return;
    }
    case kGet: {
      v1::GetRequest request;
      if (request.ParseFromString(bytes)) (void)core.Get(request, expired, kNever);
      return;
    }
    default:
      return;
  }
}

}  // namespace

std::vector<std::string> FuzzSeeds() {
  const v1::JobConfig job = ValidJob();
  v1::JoinRequest join;
  join.set_job("fuzz");
  join.set_worker_id("worker-1");
  *join.mutable_run() = job.run();
  join.set_fingerprint(RunFingerprint(job.run()));
  join.set_sketch_hash_family(kSketchHashFamily);
  v1::RegisterShardRequest shard;
  shard.set_job("fuzz");
  shard.set_shard(1);
  shard.set_num_shards(2);
  shard.set_address("127.0.0.1:7071");
  shard.set_sketch_hash_family(kSketchHashFamily);
  shard.set_job_fingerprint(JobFingerprint(job));
  v1::HeartbeatRequest heartbeat;
  heartbeat.set_job("fuzz");
  heartbeat.set_worker_id("worker-1");
  v1::KeyValue set;
  set.set_job("fuzz");
  set.set_key("collective/rank0");
  set.set_value("address");
  v1::GetRequest get;
  get.set_job("fuzz");
  get.set_key("collective/rank0");
  get.set_wait_ms(10);
  return {Frame(kJoin, join.SerializeAsString()) + Frame(kRegisterShard, shard.SerializeAsString()),
          Frame(kSet, set.SerializeAsString()) + Frame(kGet, get.SerializeAsString()),
          Frame(kHeartbeat, heartbeat.SerializeAsString()) + Frame(kJoin, join.SerializeAsString()) +
              Frame(kHeartbeat, heartbeat.SerializeAsString())};
}

}  // namespace sketchfuse

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace sketchfuse;
  static const bool quiet = (google::protobuf::SetLogHandler(nullptr), true);
  (void)quiet;
  static const v1::JobConfig job = ValidJob();
  CoordinatorOptions options;
  options.num_shards = 2;
  options.max_keys = 16;
  absl::StatusOr<std::unique_ptr<CoordinatorCore>> created = CoordinatorCore::Create(job, options);
  FuzzCheck(created.ok(), "the valid job was refused");
  CoordinatorCore& core = **created;
  const absl::Time now = absl::Now();
  size_t at = 0;
  while (at + 2 <= size) {
    const Kind kind = static_cast<Kind>(data[at] % kKinds);
    const size_t length = std::min<size_t>(data[at + 1], size - at - 2);
    Apply(core, kind, std::string(reinterpret_cast<const char*>(data) + at + 2, length), now);
    at += 2 + length;
  }
  // The coordinator still works.
  v1::RegisterShardRequest shard;
  shard.set_job("fuzz");
  shard.set_shard(0);
  shard.set_num_shards(2);
  shard.set_address("127.0.0.1:7070");
  shard.set_sketch_hash_family(kSketchHashFamily);
  shard.set_job_fingerprint(JobFingerprint(core.job()));
  FuzzCheck(core.RegisterShard(shard).ok(), "a valid shard registration was refused");
  v1::KeyValue entry;
  entry.set_job("fuzz");
  entry.set_key("after-the-fuzz");
  entry.set_value("still here");
  const absl::Status set = core.Set(entry);
  FuzzCheck(set.ok() || set.code() == absl::StatusCode::kResourceExhausted, "a valid Set failed: " + set.ToString());
  if (set.ok()) {
    v1::GetRequest get;
    get.set_job("fuzz");
    get.set_key("after-the-fuzz");
    absl::StatusOr<v1::KeyValue> got = core.Get(get, now + absl::Seconds(1), [] { return false; });
    FuzzCheck(got.ok() && got->value() == "still here", "a key set is not read back");
  }
  v1::HeartbeatRequest stranger;
  stranger.set_job("fuzz");
  stranger.set_worker_id("never-joined-zq9x7w");
  FuzzCheck(core.Heartbeat(stranger, now).status().code() == absl::StatusCode::kNotFound,
            "an unknown worker's heartbeat was not NOT_FOUND");
  return 0;
}
