// CoordinatorClient against a coordinator on a real loopback port: a join of
// this build, a refusal carried to the worker intact, and a coordinator of
// another Count-Sketch hash family refused by the worker, at its first join
// and when the coordinator restarts as such a build.
#include "worker/rpc/coordinator_client.h"

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/sketch_hash.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/grpc_status.h"
#include "proto/run_config.h"
#include "server/coordinator_core.h"
#include "server/coordinator_service.h"
#include "server/coordinator_test_jobs.h"
#include "tests/in_process_server.h"

namespace sketchfuse {
namespace {

v1::JobConfig OneWorkerJob() { return SmallDenseJob(1); }

// A coordinator of another build: the real coordinator's answers, with the
// reply's sketch_hash_family set to `family` (0: a build from before families
// were numbered, which leaves the field out).
class CoordinatorOfFamily final : public v1::Coordinator::Service {
 public:
  CoordinatorOfFamily(CoordinatorCore* core, uint32_t family) : core_(core), family_(family) {}
  grpc::Status Join(grpc::ServerContext*, const v1::JoinRequest* request, v1::JoinReply* reply) override {
    v1::JoinRequest as_ours = *request;
    as_ours.set_sketch_hash_family(kSketchHashFamily);  // such a build does not check it
    absl::StatusOr<v1::JoinReply> joined = core_->Join(as_ours, absl::Now() + absl::Seconds(10), nullptr);
    if (!joined.ok()) return ToGrpcStatus(joined.status());
    *reply = *std::move(joined);
    reply->set_sketch_hash_family(family_);
    return grpc::Status::OK;
  }
  grpc::Status Heartbeat(grpc::ServerContext*, const v1::HeartbeatRequest* request,
                         v1::HeartbeatReply* reply) override {
    absl::StatusOr<v1::HeartbeatReply> beat = core_->Heartbeat(*request, absl::Now());
    if (!beat.ok()) return ToGrpcStatus(beat.status());
    *reply = *std::move(beat);
    return grpc::Status::OK;
  }

 private:
  CoordinatorCore* core_;
  const uint32_t family_;
};

std::unique_ptr<CoordinatorCore> AssembledCore() {
  absl::StatusOr<std::unique_ptr<CoordinatorCore>> core = CoordinatorCore::Create(OneWorkerJob(), {});
  EXPECT_TRUE(core.ok()) << core.status();
  v1::RegisterShardRequest shard;
  shard.set_job("j");
  shard.set_num_shards(1);
  shard.set_address("127.0.0.1:9");
  shard.set_sketch_hash_family(kSketchHashFamily);
  shard.set_job_fingerprint(JobFingerprint((*core)->job()));
  EXPECT_TRUE((*core)->RegisterShard(shard).ok());
  return *std::move(core);
}

class CoordinatorClientTest : public ::testing::Test {
 protected:
  void SetUp() override { core_ = AssembledCore(); }

  // Serves `service` on `address` ("127.0.0.1:0": a free port); returns the
  // address it listens on.
  std::string Serve(grpc::Service* service, const std::string& address = "127.0.0.1:0") {
    InProcessServerOptions options;
    options.address = address;
    absl::StatusOr<std::unique_ptr<InProcessServer>> server = InProcessServer::Start({service}, options);
    EXPECT_TRUE(server.ok()) << server.status();
    if (!server.ok()) return "";
    server_ = *std::move(server);
    return server_->address();
  }

  void TearDown() override {
    if (server_) server_->Shutdown();
  }

  std::unique_ptr<CoordinatorCore> core_;
  std::unique_ptr<InProcessServer> server_;
};

TEST_F(CoordinatorClientTest, JoinsACoordinatorOfThisBuild) {
  CoordinatorService service(core_.get(), "");
  CoordinatorClient client(Serve(&service), "j", "w-0", {});
  absl::StatusOr<v1::JoinReply> reply = client.Join(OneWorkerJob().run(), absl::Seconds(20));
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ(reply->rank(), 0u);
  EXPECT_EQ(reply->sketch_hash_family(), kSketchHashFamily);
}

TEST_F(CoordinatorClientTest, TheCoordinatorsRefusalReachesTheWorkerIntact) {
  CoordinatorService service(core_.get(), "");
  CoordinatorClient client(Serve(&service), "j", "w-0", {});
  v1::RunConfig other = OneWorkerJob().run();
  other.set_seed(99);
  absl::Status status = client.Join(other, absl::Seconds(20)).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(status.message().find("joining job 'j' as 'w-0'"), std::string::npos) << status;
  EXPECT_NE(status.message().find("seed: job has 0, worker has 99"), std::string::npos) << status;
}

TEST_F(CoordinatorClientTest, RefusesACoordinatorOfAnotherSketchHashFamily) {
  for (uint32_t family : {0u, kSketchHashFamily + 1}) {
    core_ = AssembledCore();
    CoordinatorOfFamily service(core_.get(), family);
    const std::string address = Serve(&service);
    CoordinatorClient client(address, "j", "w-0", {});
    absl::Status status = client.Join(OneWorkerJob().run(), absl::Seconds(20)).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_NE(status.message().find(absl::StrCat("the coordinator of job 'j' at ", address,
                                                 " uses Count-Sketch hash family ", family)),
              std::string::npos) << status;
    EXPECT_NE(status.message().find(absl::StrCat("this build uses family ", kSketchHashFamily)), std::string::npos)
        << status;
    server_->Shutdown();
  }
}

// The coordinator restarts on its address as a build of another family: the
// heartbeat thread's rejoin finds out and reports it instead of carrying on.
TEST_F(CoordinatorClientTest, ARejoinFindsARestartedCoordinatorOfAnotherFamily) {
  CoordinatorService ours(core_.get(), "");
  const std::string address = Serve(&ours);
  CoordinatorClient client(address, "j", "w-0", {});
  ASSERT_TRUE(client.Join(OneWorkerJob().run(), absl::Seconds(20)).ok());
  client.StartHeartbeats(absl::Milliseconds(50));
  server_->Shutdown();
  server_.reset();

  std::unique_ptr<CoordinatorCore> restarted = AssembledCore();  // knows no worker: heartbeats get NOT_FOUND
  CoordinatorOfFamily foreign(restarted.get(), kSketchHashFamily + 1);
  ASSERT_EQ(Serve(&foreign, address), address);
  const absl::Time give_up = absl::Now() + absl::Seconds(20);
  while (client.rejoin_refusal().ok() && absl::Now() < give_up) absl::SleepFor(absl::Milliseconds(20));
  const absl::Status refusal = client.rejoin_refusal();
  EXPECT_EQ(refusal.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(refusal.message().find(absl::StrCat("the restarted coordinator at ", address,
                                                " uses Count-Sketch hash family ", kSketchHashFamily + 1)),
            std::string::npos) << refusal;
  EXPECT_GE(client.rejoins(), 1);
}

}  // namespace
}  // namespace sketchfuse
