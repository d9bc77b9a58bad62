// A shard started in-process on port 0 (server/shard_server.h): it serves a
// real round over gRPC, takes its answers up again from its state directory
// after a restart, serves the coordinator when asked, and refuses bad
// settings by name.
#include "server/shard_server.h"

#include <filesystem>
#include <future>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/aggregator.grpc.pb.h"
#include "proto/coordinator.grpc.pb.h"
#include "common/sketch_hash.h"
#include "proto/payload_convert.h"
#include "proto/run_config.h"

namespace sketchfuse {
namespace {

constexpr uint64_t kDim = 1000;

v1::JobConfig Job() {
  v1::JobConfig job;
  job.set_job("s");
  job.set_world_size(2);
  job.set_round_deadline_ms(30000);
  job.set_finished_rounds_kept(4);
  job.mutable_run()->set_workload("mlp");
  job.mutable_run()->add_layer_sizes(kDim);
  v1::GroupConfig* group = job.add_groups();
  group->set_group(0);
  group->set_dim(kDim);
  group->set_compressor("dense");
  group->set_layer_end(1);
  return job;
}

ShardServerConfig Config(const std::string& state_dir = "") {
  ShardServerConfig config;
  config.job = Job();
  config.state_dir = state_dir;
  config.auth.worker_token = "w-token";
  return config;
}

// Both workers push `step` (values 1 and 2); returns the answers' first values.
std::vector<float> Round(const std::string& address, uint64_t step) {
  auto stub = v1::Aggregator::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  std::vector<std::future<float>> answers;
  for (uint32_t w = 0; w < 2; ++w) {
    answers.push_back(std::async(std::launch::async, [&, w] {
      Payload payload;
      payload.dim = kDim;
      payload.values.assign(kDim, static_cast<float>(w + 1));
      v1::PushRequest request;
      request.mutable_round()->set_job("s");
      request.mutable_round()->set_step(step);
      request.mutable_round()->set_group(0);
      request.set_worker(w);
      PayloadToProto(payload, request.mutable_payload());
      grpc::ClientContext context;
      context.AddMetadata("authorization", "Bearer w-token");
      context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
      v1::PushReply reply;
      const grpc::Status status = stub->Push(&context, request, &reply);
      EXPECT_TRUE(status.ok()) << status.error_message();
      absl::StatusOr<Update> update = UpdateFromProto(reply.update());
      return update.ok() && !update->values.empty() ? update->values[0] : -1.0f;
    }));
  }
  std::vector<float> out;
  for (auto& a : answers) out.push_back(a.get());
  return out;
}

TEST(ShardServerTest, ServesARoundOnAFreePort) {
  absl::StatusOr<std::unique_ptr<ShardServer>> server = ShardServer::Start(Config());
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_GT((*server)->port(), 0);
  EXPECT_EQ((*server)->advertised_address(), absl::StrCat("127.0.0.1:", (*server)->port()));
  EXPECT_EQ(Round((*server)->advertised_address(), 0), (std::vector<float>{3, 3}));
  EXPECT_EQ((*server)->stats().rounds_completed, 1u);
  EXPECT_EQ((*server)->Shutdown(), 0);
  EXPECT_EQ((*server)->Shutdown(), 0);  // idempotent
}

// Restarted with the same state directory, a shard answers a re-push of a
// round its predecessor finished with the same answer.
TEST(ShardServerTest, TakesItsAnswersUpAfterARestart) {
  const std::string dir = absl::StrCat(::testing::TempDir(), "/shard_server_state");
  std::filesystem::remove_all(dir);
  {
    absl::StatusOr<std::unique_ptr<ShardServer>> first = ShardServer::Start(Config(dir));
    ASSERT_TRUE(first.ok()) << first.status();
    EXPECT_EQ(first->get()->restored_answers(), 0u);
    EXPECT_EQ(Round((*first)->advertised_address(), 5), (std::vector<float>{3, 3}));
  }
  absl::StatusOr<std::unique_ptr<ShardServer>> second = ShardServer::Start(Config(dir));
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ((*second)->restored_answers(), 1u);
  EXPECT_EQ(Round((*second)->advertised_address(), 5), (std::vector<float>{3, 3}));
  EXPECT_EQ((*second)->stats().rounds_completed, 0u);  // answered from the journal
}

TEST(ShardServerTest, ServesTheCoordinatorWhenAsked) {
  ShardServerConfig config = Config();
  config.serve_coordinator = true;
  absl::StatusOr<std::unique_ptr<ShardServer>> server = ShardServer::Start(config);
  ASSERT_TRUE(server.ok()) << server.status();
  ASSERT_NE((*server)->coordinator(), nullptr);
  auto stub = v1::Coordinator::NewStub(
      grpc::CreateChannel((*server)->advertised_address(), grpc::InsecureChannelCredentials()));
  // Both workers join (a Join waits for the job to assemble); each learns the
  // shard's address, which the shard registered in-process.
  std::vector<std::future<v1::JoinReply>> joins;
  for (int w = 0; w < 2; ++w) {
    joins.push_back(std::async(std::launch::async, [&, w] {
      v1::JoinRequest request;
      request.set_job("s");
      request.set_worker_id(absl::StrCat("w", w));
      *request.mutable_run() = config.job.run();
      request.set_fingerprint(RunFingerprint(config.job.run()));
      request.set_sketch_hash_family(kSketchHashFamily);
      grpc::ClientContext context;
      context.AddMetadata("authorization", "Bearer w-token");
      context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
      v1::JoinReply reply;
      const grpc::Status status = stub->Join(&context, request, &reply);
      EXPECT_TRUE(status.ok()) << status.error_message();
      return reply;
    }));
  }
  for (auto& join : joins) {
    const v1::JoinReply reply = join.get();
    ASSERT_EQ(reply.shards_size(), 1);
    EXPECT_EQ(reply.shards(0).address(), (*server)->advertised_address());
  }
}

TEST(ShardServerTest, RefusesBadSettingsByName) {
  struct Case {
    std::function<void(ShardServerConfig&)> change;
    std::string needle;
  };
  const Case cases[] = {
      {[](ShardServerConfig& c) { c.shard_index = 3; }, "shard index 3 is out of range"},
      {[](ShardServerConfig& c) { c.port = 70000; }, "the port must be in [0, 65535]"},
      {[](ShardServerConfig& c) { c.max_message_mb = 0; }, "the largest message must be 1 to 2047 MiB"},
      {[](ShardServerConfig& c) {
         c.serve_coordinator = true;
         c.coordinator_address = "h:1";
       },
       "either serves the coordinator or registers with one"},
      {[](ShardServerConfig& c) { c.host = "256.1.1.1"; }, "cannot listen on 256.1.1.1:0"},
  };
  for (const Case& c : cases) {
    ShardServerConfig config = Config();
    c.change(config);
    absl::StatusOr<std::unique_ptr<ShardServer>> server = ShardServer::Start(config);
    ASSERT_FALSE(server.ok()) << c.needle;
    EXPECT_NE(server.status().message().find(c.needle), std::string::npos) << server.status();
  }
}

}  // namespace
}  // namespace sketchfuse
