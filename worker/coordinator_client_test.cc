// CoordinatorClient against a coordinator on a real loopback port: a join of
// this build, a refusal carried to the worker intact, and a coordinator of
// another Count-Sketch hash family refused by the worker.
#include "worker/coordinator_client.h"

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/sketch_hash.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/grpc_status.h"
#include "server/coordinator_core.h"
#include "server/coordinator_service.h"
#include "server/coordinator_test_jobs.h"

namespace sketchfuse {
namespace {

v1::JobConfig OneWorkerJob() { return SmallDenseJob(1); }

// What a coordinator built before hash families were numbered answers: the
// real coordinator's reply without the sketch_hash_family field, which such a
// build does not know.
class UnnumberedCoordinator final : public v1::Coordinator::Service {
 public:
  explicit UnnumberedCoordinator(CoordinatorCore* core) : core_(core) {}
  grpc::Status Join(grpc::ServerContext*, const v1::JoinRequest* request, v1::JoinReply* reply) override {
    absl::StatusOr<v1::JoinReply> joined = core_->Join(*request, absl::Now() + absl::Seconds(10), nullptr);
    if (!joined.ok()) return ToGrpcStatus(joined.status());
    *reply = *std::move(joined);
    reply->clear_sketch_hash_family();
    return grpc::Status::OK;
  }

 private:
  CoordinatorCore* core_;
};

class CoordinatorClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<CoordinatorCore>> core = CoordinatorCore::Create(OneWorkerJob(), {});
    ASSERT_TRUE(core.ok()) << core.status();
    core_ = *std::move(core);
    v1::RegisterShardRequest shard;
    shard.set_job("j");
    shard.set_num_shards(1);
    shard.set_address("127.0.0.1:9");
    shard.set_sketch_hash_family(kSketchHashFamily);
    ASSERT_TRUE(core_->RegisterShard(shard).ok());
  }

  // Serves `service` on a free loopback port; returns "127.0.0.1:port".
  std::string Serve(grpc::Service* service) {
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(service);
    server_ = builder.BuildAndStart();
    EXPECT_NE(port, 0);
    return absl::StrCat("127.0.0.1:", port);
  }

  void TearDown() override {
    if (server_) server_->Shutdown();
  }

  std::unique_ptr<CoordinatorCore> core_;
  std::unique_ptr<grpc::Server> server_;
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
  UnnumberedCoordinator service(core_.get());
  const std::string address = Serve(&service);
  CoordinatorClient client(address, "j", "w-0", {});
  absl::Status status = client.Join(OneWorkerJob().run(), absl::Seconds(20)).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(status.message().find(absl::StrCat("the coordinator of job 'j' at ", address,
                                               " uses Count-Sketch hash family 0")),
            std::string::npos) << status;
  EXPECT_NE(status.message().find(absl::StrCat("this build uses family ", kSketchHashFamily)), std::string::npos)
      << status;
}

}  // namespace
}  // namespace sketchfuse
