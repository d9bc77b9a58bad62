// The coordinator over real gRPC on a loopback port: authentication, a join
// of two workers, blocking Get, and statuses carried to the client intact.
#include "server/coordinator_service.h"

#include <future>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "common/sketch_hash.h"
#include "proto/run_config.h"
#include "server/coordinator_test_jobs.h"
#include "tests/in_process_server.h"

namespace sketchfuse {
namespace {

v1::JobConfig TestJob() { return SmallDenseJob(2); }

class CoordinatorServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<CoordinatorCore>> core = CoordinatorCore::Create(TestJob(), {});
    ASSERT_TRUE(core.ok()) << core.status();
    core_ = *std::move(core);
    service_ = std::make_unique<CoordinatorService>(core_.get(), "secret", shard_token_);
    absl::StatusOr<std::unique_ptr<InProcessServer>> server = InProcessServer::Start({service_.get()});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    stub_ = v1::Coordinator::NewStub(grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials()));
  }
  void TearDown() override { server_->Shutdown(); }

  std::unique_ptr<grpc::ClientContext> Context(const std::string& token = "secret") {
    auto context = std::make_unique<grpc::ClientContext>();
    if (!token.empty()) context->AddMetadata("authorization", "Bearer " + token);
    context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    return context;
  }

  v1::JoinRequest JoinOf(const std::string& id) {
    v1::JoinRequest request;
    request.set_job("j");
    request.set_worker_id(id);
    *request.mutable_run() = TestJob().run();
    request.set_fingerprint(RunFingerprint(request.run()));
    request.set_sketch_hash_family(kSketchHashFamily);
    return request;
  }

  std::string shard_token_;  // set by fixtures that separate the roles
  std::unique_ptr<CoordinatorCore> core_;
  std::unique_ptr<CoordinatorService> service_;
  std::unique_ptr<InProcessServer> server_;
  std::unique_ptr<v1::Coordinator::Stub> stub_;
};

TEST_F(CoordinatorServiceTest, RefusesCallsWithoutTheTokenTouchingNothing) {
  v1::KeyValue entry;
  entry.set_job("j");
  entry.set_key("k");
  v1::SetReply set_reply;
  EXPECT_EQ(stub_->Set(Context("").get(), entry, &set_reply).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(stub_->Set(Context("wrong").get(), entry, &set_reply).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  v1::JoinReply join_reply;
  EXPECT_EQ(stub_->Join(Context("").get(), JoinOf("w-0"), &join_reply).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  v1::GetRequest get;
  get.set_job("j");
  get.set_key("k");
  v1::KeyValue got;
  EXPECT_EQ(stub_->Get(Context().get(), get, &got).error_code(), grpc::StatusCode::NOT_FOUND);
  v1::HeartbeatRequest beat;
  beat.set_job("j");
  beat.set_worker_id("w-0");
  v1::HeartbeatReply beat_reply;
  EXPECT_EQ(stub_->Heartbeat(Context().get(), beat, &beat_reply).error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(CoordinatorServiceTest, AssemblesAJobAndServesTheStore) {
  v1::RegisterShardRequest shard;
  shard.set_job("j");
  shard.set_num_shards(1);
  shard.set_address("127.0.0.1:9");
  shard.set_sketch_hash_family(kSketchHashFamily);
  shard.set_job_fingerprint(JobFingerprint(TestJob()));
  v1::RegisterShardReply shard_reply;
  ASSERT_TRUE(stub_->RegisterShard(Context().get(), shard, &shard_reply).ok());

  auto second = std::async(std::launch::async, [this] {
    v1::JoinReply reply;
    grpc::Status status = stub_->Join(Context().get(), JoinOf("w-1"), &reply);
    return std::make_pair(status.error_code(), reply.rank());
  });
  // A blocking Get and the Set that releases it.
  auto waiting = std::async(std::launch::async, [this] {
    v1::GetRequest get;
    get.set_job("j");
    get.set_key("nccl/id");
    get.set_wait_ms(10000);
    v1::KeyValue got;
    grpc::Status status = stub_->Get(Context().get(), get, &got);
    return status.ok() ? got.value() : status.error_message();
  });
  v1::JoinReply reply;
  grpc::Status status = stub_->Join(Context().get(), JoinOf("w-0"), &reply);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(reply.rank(), 0u);
  EXPECT_EQ(reply.shards(0).address(), "127.0.0.1:9");
  auto [code, rank] = second.get();
  EXPECT_EQ(code, grpc::StatusCode::OK);
  EXPECT_EQ(rank, 1u);

  v1::KeyValue entry;
  entry.set_job("j");
  entry.set_key("nccl/id");
  entry.set_value("0123");
  v1::SetReply set_reply;
  ASSERT_TRUE(stub_->Set(Context().get(), entry, &set_reply).ok());
  EXPECT_EQ(waiting.get(), "0123");
}

TEST_F(CoordinatorServiceTest, ConfigurationMismatchReachesTheClientReadably) {
  v1::JoinRequest request = JoinOf("w-0");
  request.mutable_run()->set_workload("cnn");
  request.set_fingerprint(RunFingerprint(request.run()));
  v1::JoinReply reply;
  grpc::Status status = stub_->Join(Context().get(), request, &reply);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(status.error_message().find("workload: job has \"mlp\", worker has \"cnn\""), std::string::npos)
      << status.error_message();
}

class CoordinatorRolesTest : public CoordinatorServiceTest {
 protected:
  void SetUp() override {
    shard_token_ = "shard-secret";
    CoordinatorServiceTest::SetUp();
  }
};

TEST_F(CoordinatorRolesTest, AWorkersTokenCannotRegisterOrMoveAShard) {
  v1::RegisterShardReply reply;
  grpc::Status status = stub_->RegisterShard(Context("shard-secret").get(), ShardZeroRegistration(TestJob(), "127.0.0.1:7000"), &reply);
  ASSERT_TRUE(status.ok()) << status.error_message();
  // The worker token holder tries to move shard 0 to its own address.
  status = stub_->RegisterShard(Context("secret").get(), ShardZeroRegistration(TestJob(), "10.6.6.6:7000"), &reply);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_NE(status.error_message().find("RegisterShard is for shards"), std::string::npos) << status.error_message();
  status = stub_->RegisterShard(Context("wrong").get(), ShardZeroRegistration(TestJob(), "10.6.6.6:7000"), &reply);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  // The shard token is no worker's: Join, Set and Get refuse it.
  v1::JoinReply joined;
  status = stub_->Join(Context("shard-secret").get(), JoinOf("w0"), &joined);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  v1::KeyValue entry;
  entry.set_job("j");
  entry.set_key("k");
  v1::SetReply set;
  EXPECT_EQ(stub_->Set(Context("shard-secret").get(), entry, &set).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  // The workers who join still get shard 0 at its registered address.
  std::vector<std::thread> joins;
  std::vector<v1::JoinReply> replies(2);
  for (int w = 0; w < 2; ++w) {
    joins.emplace_back([&, w] {
      grpc::Status s = stub_->Join(Context("secret").get(), JoinOf("w" + std::to_string(w)), &replies[w]);
      EXPECT_TRUE(s.ok()) << s.error_message();
    });
  }
  for (std::thread& t : joins) t.join();
  for (const v1::JoinReply& r : replies) {
    ASSERT_EQ(r.shards_size(), 1);
    EXPECT_EQ(r.shards(0).address(), "127.0.0.1:7000");
  }
}

}  // namespace
}  // namespace sketchfuse
