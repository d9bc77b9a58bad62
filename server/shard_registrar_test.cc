#include "server/shard_registrar.h"

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "common/sketch_hash.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/coordinator.grpc.pb.h"
#include "proto/run_config.h"
#include "server/coordinator_core.h"
#include "server/coordinator_service.h"
#include "server/coordinator_test_jobs.h"
#include "tests/in_process_server.h"

namespace sketchfuse {
namespace {

// A coordinator whose answers a test scripts: answer(n) for the n-th call.
class ScriptedCoordinator {
 public:
  explicit ScriptedCoordinator(std::function<absl::Status(int)> answer) : answer_(std::move(answer)) {}
  ShardRegistrar::RegisterOnce Register() {
    return [this](const v1::RegisterShardRequest&) {
      std::lock_guard<std::mutex> lock(mu_);
      return answer_(calls_++);
    };
  }
  int calls() {
    std::lock_guard<std::mutex> lock(mu_);
    return calls_;
  }

 private:
  std::function<absl::Status(int)> answer_;
  std::mutex mu_;
  int calls_ = 0;
};

// Collects a registrar's log lines and failures.
struct Observed {
  std::mutex mu;
  std::vector<std::string> lines;
  std::vector<absl::Status> failures;
  absl::Notification failed;

  RegistrarOptions Options(absl::Duration retry, absl::Duration refresh, absl::Duration give_up = absl::Minutes(1)) {
    RegistrarOptions options;
    options.retry_every = retry;
    options.refresh_every = refresh;
    options.give_up_after = give_up;
    options.log = [this](const std::string& line) {
      std::lock_guard<std::mutex> lock(mu);
      lines.push_back(line);
    };
    return options;
  }
  std::function<void(const absl::Status&)> OnFailure() {
    return [this](const absl::Status& status) {
      {
        std::lock_guard<std::mutex> lock(mu);
        failures.push_back(status);
      }
      failed.Notify();
    };
  }
  std::vector<std::string> Lines() {
    std::lock_guard<std::mutex> lock(mu);
    return lines;
  }
};

// Waits (up to 20 s, never timing anything) for `done`.
bool Eventually(const std::function<bool()>& done) {
  for (absl::Time give_up = absl::Now() + absl::Seconds(20); absl::Now() < give_up;) {
    if (done()) return true;
    absl::SleepFor(absl::Milliseconds(5));
  }
  return done();
}

TEST(ShardRegistrarTest, RetriesWhileTheCoordinatorIsNotUpYet) {
  ScriptedCoordinator coordinator([](int call) {
    if (call == 0) return absl::UnavailableError("connection refused");
    if (call == 1) return absl::DeadlineExceededError("deadline");
    return call == 2 ? absl::UnavailableError("connection refused") : absl::OkStatus();
  });
  Observed observed;
  ShardRegistrar registrar(coordinator.Register(), ShardZeroRegistration(SmallDenseJob(1), "10.0.0.1:7000"), "c:1",
                           observed.Options(absl::Milliseconds(1), absl::Hours(1)), observed.OnFailure());
  ASSERT_TRUE(Eventually([&] { return registrar.registered(); }));
  EXPECT_EQ(coordinator.calls(), 4);
  EXPECT_EQ(registrar.registrations(), 1);
  registrar.Stop();
  EXPECT_TRUE(observed.failures.empty());
  ASSERT_EQ(observed.Lines().size(), 1u);
  EXPECT_EQ(observed.Lines()[0], "registered as 10.0.0.1:7000 with the coordinator at c:1");
}

TEST(ShardRegistrarTest, ARefusalEndsTheFirstRegistrationAtOnce) {
  ScriptedCoordinator coordinator([](int) { return absl::PermissionDeniedError("RegisterShard is for shards"); });
  Observed observed;
  ShardRegistrar registrar(coordinator.Register(), ShardZeroRegistration(SmallDenseJob(1), "10.0.0.1:7000"), "c:1",
                           observed.Options(absl::Milliseconds(1), absl::Hours(1)), observed.OnFailure());
  ASSERT_TRUE(observed.failed.WaitForNotificationWithTimeout(absl::Seconds(20)));
  registrar.Stop();
  EXPECT_EQ(coordinator.calls(), 1);
  ASSERT_EQ(observed.failures.size(), 1u);
  EXPECT_EQ(observed.failures[0].code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(observed.failures[0].message(),
            "registering with the coordinator at c:1: RegisterShard is for shards");
  EXPECT_FALSE(registrar.registered());
}

TEST(ShardRegistrarTest, GivesUpOnACoordinatorThatNeverComesUp) {
  ScriptedCoordinator coordinator([](int) { return absl::UnavailableError("connection refused"); });
  Observed observed;
  ShardRegistrar registrar(coordinator.Register(), ShardZeroRegistration(SmallDenseJob(1), "10.0.0.1:7000"), "c:1",
                           observed.Options(absl::Milliseconds(2), absl::Hours(1), absl::Milliseconds(50)),
                           observed.OnFailure());
  ASSERT_TRUE(observed.failed.WaitForNotificationWithTimeout(absl::Seconds(20)));
  registrar.Stop();
  EXPECT_GT(coordinator.calls(), 1);
  ASSERT_EQ(observed.failures.size(), 1u);
  EXPECT_EQ(observed.failures[0].code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(observed.failures[0].message().find("coordinator at c:1"), std::string::npos);
}

TEST(ShardRegistrarTest, RefreshesAndLogsOnlyChangesOfOutcome) {
  // Up; then down for two refreshes (a coordinator restarting); then up.
  ScriptedCoordinator coordinator([](int call) {
    return call == 2 || call == 3 ? absl::UnavailableError("connection refused") : absl::OkStatus();
  });
  Observed observed;
  ShardRegistrar registrar(coordinator.Register(), ShardZeroRegistration(SmallDenseJob(1), "10.0.0.1:7000"), "c:1",
                           observed.Options(absl::Milliseconds(1), absl::Milliseconds(1)), observed.OnFailure());
  ASSERT_TRUE(Eventually([&] { return coordinator.calls() >= 8; }));
  registrar.Stop();
  EXPECT_TRUE(registrar.registered());
  EXPECT_EQ(registrar.registrations(), coordinator.calls() - 2);
  EXPECT_TRUE(observed.failures.empty()) << "a failed refresh is never fatal";
  const std::vector<std::string> lines = observed.Lines();
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0], "registered as 10.0.0.1:7000 with the coordinator at c:1");
  EXPECT_EQ(lines[1], "cannot reach the coordinator at c:1 to register again (will retry): connection refused");
  EXPECT_EQ(lines[2], "registered again with the coordinator at c:1");
}

TEST(ShardRegistrarTest, StoppingWhileWaitingForTheCoordinatorReportsNoFailure) {
  ScriptedCoordinator coordinator([](int) { return absl::UnavailableError("connection refused"); });
  Observed observed;
  auto registrar = std::make_unique<ShardRegistrar>(coordinator.Register(), ShardZeroRegistration(SmallDenseJob(1), "10.0.0.1:7000"), "c:1",
                                                    observed.Options(absl::Hours(1), absl::Hours(1), absl::Hours(2)),
                                                    observed.OnFailure());
  ASSERT_TRUE(Eventually([&] { return coordinator.calls() == 1; }));
  registrar.reset();  // returns although the next retry is an hour away
  EXPECT_TRUE(observed.failures.empty());
}

// The real thing: a coordinator served over gRPC learns the shard's address,
// and a restarted coordinator (which forgot it) learns it again.
class RegistrarWithCoordinatorTest : public ::testing::Test {
 protected:
  absl::Status StartCoordinator(const std::string& address) {
    absl::StatusOr<std::unique_ptr<CoordinatorCore>> core = CoordinatorCore::Create(SmallDenseJob(1), {});
    if (!core.ok()) return core.status();
    core_ = *std::move(core);
    service_ = std::make_unique<CoordinatorService>(core_.get(), "secret", "shard-secret");
    absl::StatusOr<std::unique_ptr<InProcessServer>> server = InProcessServer::Start({service_.get()}, {address});
    if (!server.ok()) return server.status();
    server_ = *std::move(server);
    return absl::OkStatus();
  }
  void StopCoordinator() {
    server_.reset();
    service_.reset();
    core_.reset();
  }
  // The shard address a worker joining the coordinator is given.
  absl::StatusOr<std::string> AddressAWorkerGets() {
    auto stub = v1::Coordinator::NewStub(grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials()));
    grpc::ClientContext context;
    context.AddMetadata("authorization", "Bearer secret");
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    v1::JoinRequest request;
    request.set_job("j");
    request.set_worker_id("w0");
    *request.mutable_run() = SmallDenseJob(1).run();
    request.set_fingerprint(RunFingerprint(request.run()));
    request.set_sketch_hash_family(kSketchHashFamily);
    v1::JoinReply reply;
    grpc::Status status = stub->Join(&context, request, &reply);
    if (!status.ok()) return absl::InternalError(status.error_message());
    if (reply.shards_size() != 1) return absl::InternalError("no shard in the join reply");
    return reply.shards(0).address();
  }

  std::unique_ptr<CoordinatorCore> core_;
  std::unique_ptr<CoordinatorService> service_;
  std::unique_ptr<InProcessServer> server_;
};

TEST_F(RegistrarWithCoordinatorTest, ACoordinatorLearnsTheShardAndLearnsItAgainAfterARestart) {
  ASSERT_TRUE(StartCoordinator("127.0.0.1:0").ok());
  const std::string address = server_->address();
  RpcChannelOptions options;
  options.token = "shard-secret";
  Observed observed;
  ShardRegistrar registrar(ShardRegistrar::OverGrpc(address, options), ShardZeroRegistration(SmallDenseJob(1), "10.0.0.7:7000"), address,
                           observed.Options(absl::Milliseconds(20), absl::Milliseconds(20)), observed.OnFailure());
  ASSERT_TRUE(Eventually([&] { return registrar.registered(); }));
  absl::StatusOr<std::string> learned = AddressAWorkerGets();
  ASSERT_TRUE(learned.ok()) << learned.status();
  EXPECT_EQ(*learned, "10.0.0.7:7000");

  StopCoordinator();
  ASSERT_TRUE(StartCoordinator(address).ok());  // a fresh coordinator, same address, no shard known
  const int64_t before = registrar.registrations();
  ASSERT_TRUE(Eventually([&] { return registrar.registrations() > before + 1 && registrar.registered(); }));
  learned = AddressAWorkerGets();
  ASSERT_TRUE(learned.ok()) << learned.status();
  EXPECT_EQ(*learned, "10.0.0.7:7000");
  registrar.Stop();
  EXPECT_TRUE(observed.failures.empty());
}

TEST_F(RegistrarWithCoordinatorTest, TheWorkersTokenIsRefusedAndReportedOnce) {
  ASSERT_TRUE(StartCoordinator("127.0.0.1:0").ok());
  RpcChannelOptions options;
  options.token = "secret";  // the workers' token: RegisterShard is not theirs
  Observed observed;
  ShardRegistrar registrar(ShardRegistrar::OverGrpc(server_->address(), options), ShardZeroRegistration(SmallDenseJob(1), "10.0.0.7:7000"),
                           server_->address(), observed.Options(absl::Milliseconds(20), absl::Milliseconds(20)),
                           observed.OnFailure());
  ASSERT_TRUE(observed.failed.WaitForNotificationWithTimeout(absl::Seconds(20)));
  registrar.Stop();
  ASSERT_EQ(observed.failures.size(), 1u);
  EXPECT_EQ(observed.failures[0].code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(observed.failures[0].message().find("registering with the coordinator at " + server_->address()),
            std::string::npos)
      << observed.failures[0];
}

}  // namespace
}  // namespace sketchfuse
