// The gRPC transport's retries against a real aggregation server in this
// process: injected faults, a shard that never answers, rounds the shard
// fails (shutdown, round deadline), a push that waits for its round outside
// the step window, and a refusal that is not retried.
#include "worker/rpc/grpc_ps_transport.h"

#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/aggregation_core.h"
#include "server/aggregator_service.h"
#include "server/job_config.h"
#include "tests/in_process_server.h"
#include "worker/pipeline/job_plan.h"

namespace sketchfuse {
namespace {

using ::testing::HasSubstr;

constexpr int kDim = 100;

// A dense job of `world` workers (one: each round completes with its push).
v1::JobConfig DenseJob(uint32_t world = 1) {
  v1::RunConfig run;
  run.set_workload("test");
  run.set_scheme("dense_ps");
  run.set_compressor("dense");
  run.set_fusion("1");
  run.add_layer_sizes(kDim);
  absl::StatusOr<v1::JobConfig> job = MakeJobConfig("transport-test", world, run);
  EXPECT_TRUE(job.ok()) << job.status();
  job->set_finished_rounds_kept(16);
  return *job;
}

std::shared_ptr<const Payload> DensePayload(float base) {
  auto payload = std::make_shared<Payload>();
  payload->dim = kDim;
  for (int i = 0; i < kDim; ++i) payload->values.push_back(base + i);
  return payload;
}

// A shard of DenseJob(world) served on a free loopback port.
struct Shard {
  std::unique_ptr<AggregationCore> core;
  std::unique_ptr<AggregatorService> service;
  std::unique_ptr<InProcessServer> server;

  static std::unique_ptr<Shard> Start(uint32_t world = 1, uint64_t step_window = 64) {
    auto shard = std::make_unique<Shard>();
    absl::StatusOr<AggregationConfig> config = ShardConfig(DenseJob(world), 0, 1);
    EXPECT_TRUE(config.ok()) << config.status();
    config->step_window = step_window;
    shard->core = *AggregationCore::Create(*config);
    shard->service = std::make_unique<AggregatorService>(shard->core.get(), "");
    absl::StatusOr<std::unique_ptr<InProcessServer>> server = InProcessServer::Start({shard->service.get()});
    EXPECT_TRUE(server.ok()) << server.status();
    if (!server.ok()) return nullptr;
    shard->server = *std::move(server);
    return shard;
  }
};

// An address nothing listens on (a port just freed).
std::string DeadAddress() {
  std::unique_ptr<Shard> shard = Shard::Start();
  const std::string address = shard->server->address();
  shard->server->Shutdown();
  return address;
}

// Pushes round 0 of (step, group) as `worker`; the future holds its outcome.
std::future<absl::StatusOr<PushOutcome>> PushInBackground(PsTransport& transport, uint64_t step, uint32_t group,
                                                          float base, uint32_t worker = 0) {
  auto promise = std::make_shared<std::promise<absl::StatusOr<PushOutcome>>>();
  std::future<absl::StatusOr<PushOutcome>> outcome = promise->get_future();
  transport.Push(PushTarget{0, "transport-test", step, group, /*round=*/0, worker}, DensePayload(base),
                 [promise](absl::StatusOr<PushOutcome> o) { promise->set_value(std::move(o)); });
  return outcome;
}

absl::StatusOr<PushOutcome> PushAndWait(PsTransport& transport, uint64_t step, uint32_t group, float base,
                                        uint32_t worker = 0) {
  return PushInBackground(transport, step, group, base, worker).get();
}

RetryPolicy QuickRetries(int attempts) {
  RetryPolicy policy;
  policy.max_attempts = attempts;
  policy.initial_backoff = absl::Milliseconds(1);
  policy.max_backoff = absl::Milliseconds(4);
  policy.push_deadline = absl::Seconds(20);
  return policy;
}

TEST(GrpcPsTransportTest, InjectedFaultsAreRetriedUntilEveryPushLands) {
  std::unique_ptr<Shard> shard = Shard::Start();
  RetryPolicy policy = QuickRetries(40);
  policy.inject = *ParseTransportFaults("fail_before_send=0.4,drop_reply=0.3,seed=5");
  GrpcPsTransport transport({shard->server->address()}, {}, policy);
  uint64_t attempts = 0;
  for (uint64_t step = 0; step < 20; ++step) {
    absl::StatusOr<PushOutcome> outcome = PushAndWait(transport, step, 0, static_cast<float>(step));
    ASSERT_TRUE(outcome.ok()) << "step " << step << ": " << outcome.status();
    // One worker: the round's sum is its own payload, also when the answer
    // comes to a re-push after a lost reply (the shard kept it).
    ASSERT_TRUE(outcome->update.dense);
    EXPECT_EQ(outcome->update.values, DensePayload(static_cast<float>(step))->values);
    EXPECT_EQ(outcome->contributors, 1u);
    EXPECT_GT(outcome->bytes_sent, 4u * kDim);
    EXPECT_GT(outcome->bytes_received, 4u * kDim);  // the dense sum came back
    attempts += outcome->attempts;
  }
  EXPECT_GT(transport.injected_faults(), 0u);
  EXPECT_EQ(transport.retries(), attempts - 20) << "every attempt past the first is a retry";
}

TEST(GrpcPsTransportTest, AShardThatNeverAnswersFailsThePushWhenItsBudgetIsSpent) {
  const std::string address = DeadAddress();
  GrpcPsTransport transport({address}, {}, QuickRetries(3));
  absl::StatusOr<PushOutcome> outcome = PushAndWait(transport, 0, 0, 1.0f);
  ASSERT_FALSE(outcome.ok());
  EXPECT_EQ(outcome.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(outcome.status().message(),
              HasSubstr("push of group 0 to shard 0 (" + address + ") failed after 3 attempt(s)"));
  EXPECT_EQ(transport.retries(), 2u);
}

// The shard fails an open round with UNAVAILABLE (as it does when it shuts
// down) and then at its round deadline (DEADLINE_EXCEEDED, before the push's
// own deadline): the waiting worker re-pushes both times, and its push lands
// when the other worker's arrives.
TEST(GrpcPsTransportTest, RoundsTheShardFailsAreRePushedUntilEveryWorkerIsIn) {
  std::unique_ptr<Shard> shard = Shard::Start(/*world=*/2);
  RetryPolicy policy = QuickRetries(100);
  policy.initial_backoff = absl::Milliseconds(2);
  policy.max_backoff = absl::Milliseconds(20);
  GrpcPsTransport early({shard->server->address()}, {}, policy), late({shard->server->address()}, {}, policy);
  std::future<absl::StatusOr<PushOutcome>> early_push = PushInBackground(early, 0, 0, 1.0f, /*worker=*/0);
  // Fail the round each time the early push has opened it again.
  auto fail_the_open_round = [&](const std::function<int()>& fail) {
    for (int i = 0; i < 4000; ++i) {
      if (fail() > 0) return true;
      absl::SleepFor(absl::Milliseconds(1));
    }
    return false;
  };
  ASSERT_TRUE(fail_the_open_round(
      [&] { return shard->core->FailAllRounds(absl::UnavailableError("the aggregation server is shutting down")); }));
  ASSERT_TRUE(fail_the_open_round([&] { return shard->core->ExpireRounds(absl::Now() + absl::Hours(1)); }));
  absl::StatusOr<PushOutcome> second = PushAndWait(late, 0, 0, 10.0f, /*worker=*/1);
  absl::StatusOr<PushOutcome> first = early_push.get();
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_GE(first->attempts, 3);
  EXPECT_GE(early.retries(), 2u);
  EXPECT_EQ(second->attempts, 1);
  std::vector<float> sum;
  for (int i = 0; i < kDim; ++i) sum.push_back((1.0f + i) + (10.0f + i));
  EXPECT_EQ(first->update.values, sum);
  EXPECT_EQ(second->update.values, sum);
  EXPECT_EQ(first->contributors, 2u);
}

// Rounds the shard fails at its round deadline are late workers, not a
// failing shard: the waiting worker re-pushes past its attempts' budget (2
// here) until the late worker comes, and both land in the fresh round. With
// nobody coming, the push fails at its push deadline with the shard's error.
// (Before, such re-pushes spent the budget and backed off to max_backoff,
// and two workers back from a restarted shard could keep missing each
// other's round: tests/fault_recovery_test.cc.)
TEST(GrpcPsTransportTest, RoundsFailedForLateWorkersAreRePushedPastTheBudgetUntilThePushDeadline) {
  std::unique_ptr<Shard> shard = Shard::Start(/*world=*/2);
  RetryPolicy policy = QuickRetries(2);
  policy.initial_backoff = absl::Milliseconds(2);
  policy.max_backoff = absl::Milliseconds(20);
  GrpcPsTransport early({shard->server->address()}, {}, policy), late({shard->server->address()}, {}, policy);
  std::future<absl::StatusOr<PushOutcome>> early_push = PushInBackground(early, 0, 0, 1.0f, /*worker=*/0);
  // The round deadline passes five times, each time after the early push
  // opened the round again.
  for (int expired = 0; expired < 5;) {
    if (shard->core->ExpireRounds(absl::Now() + absl::Hours(1)) > 0) {
      ++expired;
    } else {
      absl::SleepFor(absl::Milliseconds(1));
    }
  }
  absl::StatusOr<PushOutcome> second = PushAndWait(late, 0, 0, 10.0f, /*worker=*/1);
  absl::StatusOr<PushOutcome> first = early_push.get();
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_GE(first->attempts, 6) << "five failed rounds, then the one that completed";
  EXPECT_EQ(second->attempts, 1);
  EXPECT_EQ(first->contributors, 2u);
  EXPECT_EQ(first->update.values, second->update.values);

  // Nobody comes for step 1: the push goes on past its budget, and fails
  // at its push deadline naming the missing worker.
  policy.push_deadline = absl::Milliseconds(400);
  GrpcPsTransport alone({shard->server->address()}, {}, policy);
  std::future<absl::StatusOr<PushOutcome>> outcome = PushInBackground(alone, 1, 0, 1.0f, /*worker=*/0);
  while (outcome.wait_for(std::chrono::milliseconds(1)) != std::future_status::ready) {
    shard->core->ExpireRounds(absl::Now() + absl::Hours(1));
  }
  const absl::StatusOr<PushOutcome> failed = outcome.get();
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kDeadlineExceeded) << failed.status();
  EXPECT_THAT(failed.status().message(), HasSubstr("missing workers 1 of 2"));
  EXPECT_GT(alone.retries(), 1u) << "re-pushed past the attempts' budget of 2";
}

// A flood claiming worker 0 holds its slot and parking outside the shard's
// step window with steps nearer the progress than the job's: worker 0's
// push of the job's step is refused ABORTED, and its transport pushes again
// past its attempts' budget until worker 1 opens the round, then lands.
// With nobody to open it, the push fails at its push deadline, naming the
// window.
TEST(GrpcPsTransportTest, APushRefusedForTheStepWindowWaitsForItsRoundUntilItsDeadline) {
  std::unique_ptr<Shard> shard = Shard::Start(/*world=*/2, /*step_window=*/8);
  std::vector<std::promise<absl::StatusOr<RoundResult>>> answers(6);
  auto core_push = [&](uint64_t step, uint32_t worker, int answer) {
    Payload payload = *DensePayload(1.0f);
    shard->core->Push({"transport-test", step, 0, 0}, worker, std::move(payload), absl::Now(),
                      [&answers, answer](absl::StatusOr<RoundResult> r) { answers[answer].set_value(std::move(r)); });
  };
  core_push(0, 0, 0);
  core_push(0, 1, 1);
  ASSERT_TRUE(answers[1].get_future().get().ok());
  core_push(9, 0, 2);   // the flood takes worker 0's slot outside the window
  core_push(10, 0, 3);  // and its parking
  RetryPolicy policy = QuickRetries(2);
  policy.initial_backoff = absl::Milliseconds(5);
  policy.max_backoff = absl::Milliseconds(20);
  GrpcPsTransport claimed({shard->server->address()}, {}, policy), other({shard->server->address()}, {}, policy);
  std::future<absl::StatusOr<PushOutcome>> claimed_push = PushInBackground(claimed, 500, 0, 1.0f, /*worker=*/0);
  absl::SleepFor(absl::Milliseconds(300));  // past the attempts' budget of 2
  absl::StatusOr<PushOutcome> second = PushAndWait(other, 500, 0, 10.0f, /*worker=*/1);
  absl::StatusOr<PushOutcome> first = claimed_push.get();
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_GT(first->attempts, 2);
  EXPECT_EQ(second->attempts, 1);
  EXPECT_EQ(first->update.values, second->update.values);
  EXPECT_EQ(first->contributors, 2u);

  // The progress is at 500 now. The flood takes worker 0's slot and parking
  // again, nearer than step 700 (superseding and replacing its own farther
  // ones), and nobody opens step 700: the push fails at its deadline, saying
  // why.
  core_push(509, 0, 4);
  core_push(510, 0, 5);
  policy.push_deadline = absl::Milliseconds(300);
  GrpcPsTransport alone({shard->server->address()}, {}, policy);
  const absl::Time begin = absl::Now();
  absl::StatusOr<PushOutcome> refused = PushAndWait(alone, 700, 0, 1.0f, /*worker=*/0);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kAborted) << refused.status();
  EXPECT_THAT(refused.status().message(), HasSubstr("is outside the step window"));
  EXPECT_GE(absl::Now() - begin, absl::Milliseconds(200));
  shard->core->FailAllRounds(absl::UnavailableError("test over"));  // answers the flood's pushes
}

TEST(GrpcPsTransportTest, ARefusalIsReportedAtOnceWithoutRetrying) {
  std::unique_ptr<Shard> shard = Shard::Start();
  GrpcPsTransport transport({shard->server->address()}, {}, QuickRetries(5));
  absl::StatusOr<PushOutcome> outcome = PushAndWait(transport, 0, /*group=*/7, 1.0f);  // no group 7
  ASSERT_FALSE(outcome.ok());
  EXPECT_NE(outcome.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(outcome.status().message(), HasSubstr("push of group 7 to shard 0"));
  EXPECT_THAT(outcome.status().message(), HasSubstr("failed after 1 attempt(s)"));
  EXPECT_EQ(transport.retries(), 0u);
  // A shard index out of range never leaves the worker.
  std::promise<absl::StatusOr<PushOutcome>> promise;
  transport.Push(PushTarget{3, "transport-test", 0, 0, 0, 0}, DensePayload(1.0f),
                 [&promise](absl::StatusOr<PushOutcome> o) { promise.set_value(std::move(o)); });
  absl::StatusOr<PushOutcome> out_of_range = promise.get_future().get();
  EXPECT_EQ(out_of_range.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(out_of_range.status().message(), HasSubstr("group 0 maps to shard 3 of 1"));
}

}  // namespace
}  // namespace sketchfuse
