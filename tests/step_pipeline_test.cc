// The worker pipeline against a real aggregation server (in process, gRPC on
// a loopback port): fused groups reach the server as the backward pass
// produces them, the updates are the sums of the workers' gradients, and the
// exchange of an early group starts before the backward pass ends.
#include "worker/pipeline/step_pipeline.h"

#include <future>
#include <limits>
#include <mutex>
#include <numeric>
#include <string>

#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "server/aggregator_service.h"
#include "server/job_config.h"
#include "worker/core/divergence.h"
#include "worker/pipeline/job_plan.h"
#include "tests/in_process_server.h"
#include "worker/rpc/grpc_ps_transport.h"
#include "worker/schemes/ps_scheme.h"

namespace sketchfuse {
namespace {

class PipelineTest : public ::testing::Test {
 protected:
  // A job of `world` workers over `sizes` (backward order), one shard.
  void StartJob(uint32_t world, std::vector<uint64_t> sizes, const std::string& scheme,
                const std::string& compressor, const std::string& fusion) {
    v1::RunConfig run;
    run.set_workload("test");
    run.set_scheme(scheme);
    run.set_compressor(compressor);
    run.set_fusion(fusion);
    run.set_error_feedback(true);
    for (uint64_t s : sizes) run.add_layer_sizes(s);
    absl::StatusOr<v1::JobConfig> job = MakeJobConfig("test-job", world, run);
    ASSERT_TRUE(job.ok()) << job.status();
    job_ = *job;
    absl::StatusOr<AggregationConfig> shard = ShardConfig(job_, 0, 1);
    ASSERT_TRUE(shard.ok()) << shard.status();
    absl::StatusOr<std::unique_ptr<AggregationCore>> core = AggregationCore::Create(*shard);
    ASSERT_TRUE(core.ok());
    core_ = *std::move(core);
    service_ = std::make_unique<AggregatorService>(core_.get(), "");
    absl::StatusOr<std::unique_ptr<InProcessServer>> server = InProcessServer::Start({service_.get()});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    joined_.clear();
    for (uint32_t rank = 0; rank < world; ++rank) {
      v1::JoinReply reply;
      reply.set_rank(rank);
      reply.set_world_size(world);
      *reply.mutable_job() = job_;
      v1::ShardAddress* address = reply.add_shards();
      address->set_address(server_->address());
      for (int g = 0; g < job_.groups_size(); ++g) reply.add_shard_of_group(0);
      joined_.push_back(reply);
    }
  }
  void TearDown() override {
    if (server_) server_->Shutdown();
  }

  v1::JobConfig job_;
  std::vector<v1::JoinReply> joined_;
  std::unique_ptr<AggregationCore> core_;
  std::unique_ptr<AggregatorService> service_;
  std::unique_ptr<InProcessServer> server_;
};

std::vector<float> Gradient(int worker, int layer, int64_t size, uint64_t step) {
  std::vector<float> g(size);
  for (int64_t i = 0; i < size; ++i) g[i] = static_cast<float>((worker + 1) * 0.5 + layer - 0.001 * i + step);
  return g;
}

// Runs one step of one worker; returns the updates.
absl::StatusOr<std::vector<Update>> RunStep(StepPipeline& pipeline, int worker, const std::vector<uint64_t>& sizes,
                                            uint64_t step, absl::Duration pause_between_layers) {
  pipeline.BeginStep(step);
  for (size_t l = 0; l < sizes.size(); ++l) {
    std::vector<float> g = Gradient(worker, static_cast<int>(l), sizes[l], step);
    if (absl::Status s = pipeline.AddLayerGradient(static_cast<int>(l), g); !s.ok()) return s;
    absl::SleepFor(pause_between_layers);
  }
  pipeline.MarkBackwardEnd();
  absl::StatusOr<std::vector<Update>> updates = pipeline.FinishStep(absl::Seconds(30));
  if (!updates.ok()) return updates;
  if (absl::Status s = pipeline.Applied(*updates); !s.ok()) return s;
  return updates;
}

TEST_F(PipelineTest, DenseUpdatesAreTheSumsOfTheWorkersFusedGradients) {
  const std::vector<uint64_t> sizes = {30, 5, 100, 7, 64};
  StartJob(2, sizes, "dense_ps", "dense", "2");
  ASSERT_EQ(job_.groups_size(), 2);
  std::vector<std::unique_ptr<PsScheme>> schemes;
  std::vector<std::unique_ptr<StepPipeline>> pipelines;
  for (int w = 0; w < 2; ++w) {
    absl::StatusOr<std::unique_ptr<PsScheme>> scheme = PsScheme::Create(joined_[w], GrpcTransports({}, {}));
    ASSERT_TRUE(scheme.ok()) << scheme.status();
    schemes.push_back(*std::move(scheme));
    absl::StatusOr<std::unique_ptr<StepPipeline>> pipeline = StepPipeline::Create(
        std::vector<int64_t>(sizes.begin(), sizes.end()), GroupLayouts(job_), schemes.back().get());
    ASSERT_TRUE(pipeline.ok()) << pipeline.status();
    pipelines.push_back(*std::move(pipeline));
  }
  for (uint64_t step = 0; step < 3; ++step) {
    auto other = std::async(std::launch::async, [&] { return RunStep(*pipelines[1], 1, sizes, step, absl::ZeroDuration()); });
    absl::StatusOr<std::vector<Update>> mine = RunStep(*pipelines[0], 0, sizes, step, absl::ZeroDuration());
    absl::StatusOr<std::vector<Update>> theirs = other.get();
    ASSERT_TRUE(mine.ok()) << mine.status();
    ASSERT_TRUE(theirs.ok()) << theirs.status();
    for (int g = 0; g < 2; ++g) {
      const Update& update = (*mine)[g];
      ASSERT_TRUE(update.dense);
      std::vector<float> expected;
      const v1::GroupConfig& group = job_.groups(g);
      for (uint32_t l = group.layer_begin(); l < group.layer_end(); ++l) {
        std::vector<float> a = Gradient(0, l, sizes[l], step), b = Gradient(1, l, sizes[l], step);
        for (size_t i = 0; i < a.size(); ++i) expected.push_back(a[i] + b[i]);
      }
      ASSERT_EQ(update.values.size(), expected.size());
      for (size_t i = 0; i < expected.size(); ++i) EXPECT_NEAR(update.values[i], expected[i], 1e-4) << i;
      EXPECT_EQ(update.values, (*theirs)[g].values);
    }
    const StepTraffic traffic = pipelines[0]->traffic();
    EXPECT_EQ(traffic.dense_bytes, 4 * std::accumulate(sizes.begin(), sizes.end(), uint64_t{0}));
    EXPECT_GT(traffic.bytes_sent, traffic.dense_bytes);  // dense plus framing
  }
}

TEST_F(PipelineTest, SketchUpdatesAreSparseAndIdenticalOnEveryWorker) {
  const std::vector<uint64_t> sizes = {5000, 50, 20000, 10};
  StartJob(2, sizes, "sketch_ps", "count_sketch:density=0.01,rows=5,width=10", "per_layer");
  std::vector<std::unique_ptr<PsScheme>> schemes;
  std::vector<std::unique_ptr<StepPipeline>> pipelines;
  for (int w = 0; w < 2; ++w) {
    schemes.push_back(*PsScheme::Create(joined_[w], GrpcTransports({}, {})));
    pipelines.push_back(*StepPipeline::Create(std::vector<int64_t>(sizes.begin(), sizes.end()),
                                              GroupLayouts(job_), schemes.back().get()));
  }
  auto other = std::async(std::launch::async, [&] { return RunStep(*pipelines[1], 1, sizes, 0, absl::ZeroDuration()); });
  absl::StatusOr<std::vector<Update>> mine = RunStep(*pipelines[0], 0, sizes, 0, absl::ZeroDuration());
  absl::StatusOr<std::vector<Update>> theirs = other.get();
  ASSERT_TRUE(mine.ok()) << mine.status();
  ASSERT_TRUE(theirs.ok()) << theirs.status();
  ASSERT_EQ(mine->size(), 4u);
  for (size_t g = 0; g < 4; ++g) {
    EXPECT_FALSE((*mine)[g].dense);
    EXPECT_EQ((*mine)[g].indices, (*theirs)[g].indices);
    EXPECT_EQ((*mine)[g].values, (*theirs)[g].values);
    EXPECT_LE((*mine)[g].indices.size(), std::max<size_t>(1, sizes[g] / 100 + 1));
  }
  EXPECT_LT(pipelines[0]->traffic().bytes_sent, pipelines[0]->traffic().dense_bytes);
}

TEST_F(PipelineTest, EarlyGroupsAreExchangedWhileTheBackwardPassContinues) {
  const std::vector<uint64_t> sizes = {100, 100, 100, 100};
  StartJob(1, sizes, "dense_ps", "dense", "per_layer");
  std::unique_ptr<PsScheme> scheme = *PsScheme::Create(joined_[0], GrpcTransports({}, {}));
  std::unique_ptr<StepPipeline> pipeline =
      *StepPipeline::Create({100, 100, 100, 100}, GroupLayouts(job_), scheme.get());
  // A backward pass that takes 50 ms per layer.
  ASSERT_TRUE(RunStep(*pipeline, 0, sizes, 0, absl::Milliseconds(50)).ok());
  const std::vector<PipelineEvent> events = pipeline->events();
  int64_t backward_end = -1;
  std::vector<int64_t> exchange_start(4, -1);
  for (const PipelineEvent& e : events) {
    if (e.kind == PipelineEvent::Kind::kBackwardEnd) backward_end = e.seq;
    if (e.kind == PipelineEvent::Kind::kExchangeStart) exchange_start[e.group] = e.seq;
  }
  ASSERT_GE(backward_end, 0);
  // Every group but the last starts its exchange before the backward pass ends.
  for (int g = 0; g < 3; ++g) {
    ASSERT_GE(exchange_start[g], 0);
    EXPECT_LT(exchange_start[g], backward_end) << "group " << g;
  }
}

TEST_F(PipelineTest, RefusesBadLayerGradientsAndFailsTheStep) {
  const std::vector<uint64_t> sizes = {10, 10};
  StartJob(1, sizes, "dense_ps", "dense", "single");
  std::unique_ptr<PsScheme> scheme = *PsScheme::Create(joined_[0], GrpcTransports({}, {}));
  std::unique_ptr<StepPipeline> pipeline = *StepPipeline::Create({10, 10}, GroupLayouts(job_), scheme.get());
  pipeline->BeginStep(0);
  std::vector<float> g(10, 1.0f), wrong(9, 1.0f);
  EXPECT_EQ(pipeline->AddLayerGradient(2, g).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(pipeline->AddLayerGradient(0, wrong).code(), absl::StatusCode::kInvalidArgument);
  // A view of device memory cannot be fused into host buffers (the pointer
  // is never read).
  const absl::Status misplaced = pipeline->AddLayerGradient(1, GradientView::OnDevice(g.data(), g.size()));
  EXPECT_EQ(misplaced.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(misplaced.message().find("layer 1: a gradient in device memory"), absl::string_view::npos) << misplaced;
  EXPECT_TRUE(pipeline->AddLayerGradient(0, g).ok());
  EXPECT_EQ(pipeline->AddLayerGradient(0, g).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(pipeline->FinishStep(absl::Seconds(5)).ok());
  // A layer missing at the end of the backward pass fails the step at once.
  pipeline->BeginStep(1);
  EXPECT_TRUE(pipeline->AddLayerGradient(0, g).ok());
  pipeline->MarkBackwardEnd();
  absl::Status status = pipeline->FinishStep(absl::Seconds(5)).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(status.message().find("layer 1 produced no gradient"), absl::string_view::npos) << status;
  // The next step is fine.
  EXPECT_TRUE(RunStep(*pipeline, 0, sizes, 2, absl::ZeroDuration()).ok());
}

// A scheme that records which groups it was given and answers each with
// the gradient itself, at once or when the test says (Release).
class HeldScheme : public AggregationScheme {
 public:
  explicit HeldScheme(bool hold) : hold_(hold) {}
  std::string name() const override { return "held"; }
  void Exchange(uint64_t, int group, GradientView grad, absl::Span<const float>, ExchangeDone done) override {
    ExchangeResult result;
    result.update.dense = true;
    result.update.dim = grad.size();
    result.update.values.assign(grad.host().begin(), grad.host().end());
    std::lock_guard<std::mutex> lock(mu_);
    exchanged_.push_back(group);
    if (!hold_) {
      done(std::move(result));
      return;
    }
    held_.push_back([done, result] { done(result); });
  }
  absl::Status OnApplied(int group, const Update&) override {
    std::lock_guard<std::mutex> lock(mu_);
    settled_.push_back("applied " + std::to_string(group));
    return absl::OkStatus();
  }
  absl::Status ScaleResiduals(float factor) override {
    if (absl::Status valid = AggregationScheme::ScaleResiduals(factor); !valid.ok()) return valid;
    std::lock_guard<std::mutex> lock(mu_);
    settled_.push_back("scaled " + std::to_string(factor));
    return absl::OkStatus();
  }
  std::vector<GroupState> SaveState() const override { return {}; }
  absl::Status RestoreState(const std::vector<GroupState>&) override { return absl::OkStatus(); }

  // What Applied did, in order: "applied G" per OnApplied, "scaled F" per
  // ScaleResiduals.
  std::vector<std::string> settled() {
    std::lock_guard<std::mutex> lock(mu_);
    return settled_;
  }
  std::vector<int> exchanged() {
    std::lock_guard<std::mutex> lock(mu_);
    return exchanged_;
  }
  // Answers every exchange held so far.
  void Release() {
    std::vector<std::function<void()>> held;
    {
      std::lock_guard<std::mutex> lock(mu_);
      held.swap(held_);
    }
    for (auto& answer : held) answer();
  }

 private:
  const bool hold_;
  std::mutex mu_;
  std::vector<int> exchanged_;
  std::vector<std::string> settled_;
  std::vector<std::function<void()>> held_;
};

// Applied settles every group in order, then rescales the residuals once when
// the run asks for it (a factor other than 1), and refuses a factor that is
// not finite and > 0 before it settles anything.
TEST(StepPipelineAppliedTest, SettlesEveryGroupThenRescalesTheResidualsOnce) {
  HeldScheme scheme(/*hold=*/false);
  std::unique_ptr<StepPipeline> pipeline = *StepPipeline::Create({4, 3}, {{0, 4}, {4, 3}}, &scheme);
  auto step = [&](uint64_t n) -> std::vector<Update> {
    pipeline->BeginStep(n);
    std::vector<float> a(4, 1.0f), b(3, 2.0f);
    EXPECT_TRUE(pipeline->AddLayerGradient(0, a).ok());
    EXPECT_TRUE(pipeline->AddLayerGradient(1, b).ok());
    pipeline->MarkBackwardEnd();
    absl::StatusOr<std::vector<Update>> updates = pipeline->FinishStep(absl::Seconds(30));
    EXPECT_TRUE(updates.ok()) << updates.status();
    return updates.ok() ? *updates : std::vector<Update>();
  };
  std::vector<Update> updates = step(0);
  ASSERT_TRUE(pipeline->Applied(updates).ok());
  EXPECT_EQ(scheme.settled(), std::vector<std::string>({"applied 0", "applied 1"}));

  updates = step(1);
  ASSERT_TRUE(pipeline->Applied(updates, 0.5f).ok());
  EXPECT_EQ(scheme.settled(),
            std::vector<std::string>({"applied 0", "applied 1", "applied 0", "applied 1", "scaled 0.500000"}));

  updates = step(2);
  for (float bad : {0.0f, -1.0f, std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    const absl::Status refused = pipeline->Applied(updates, bad);
    EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(refused.message().find("rescale must be finite and > 0"), std::string::npos) << refused;
  }
  EXPECT_EQ(scheme.settled().size(), 5u);  // nothing settled by a refused call
  EXPECT_EQ(pipeline->Applied({updates[0]}, 0.5f).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(scheme.settled().size(), 5u);
  ASSERT_TRUE(pipeline->Applied(updates, 2.0f).ok());
  EXPECT_EQ(scheme.settled().back(), "scaled 2.000000");
  EXPECT_EQ(scheme.settled().size(), 8u);
}

TEST(StepPipelineDivergenceTest, ANonFiniteGroupIsNeverExchangedAndStopsThePipeline) {
  HeldScheme scheme(/*hold=*/false);
  // Three groups of one layer each: layers 0, 1, 2 (elements 0-3, 4-6, 7-11).
  std::unique_ptr<StepPipeline> pipeline = *StepPipeline::Create({4, 3, 5}, {{0, 4}, {4, 3}, {7, 5}}, &scheme);
  pipeline->BeginStep(6);
  std::vector<float> good(4, 1.0f), bad(3, 2.0f), last(5, 0.5f);
  bad[2] = std::numeric_limits<float>::infinity();
  EXPECT_TRUE(pipeline->AddLayerGradient(0, good).ok());
  EXPECT_TRUE(pipeline->AddLayerGradient(1, bad).ok());
  pipeline->AddLayerGradient(2, last).IgnoreError();  // may already be refused: the pipeline stopped
  pipeline->MarkBackwardEnd();
  const absl::Status status = pipeline->FinishStep(absl::Seconds(30)).status();
  const std::optional<Divergence> d = DivergenceOf(status);
  ASSERT_TRUE(d.has_value()) << status;
  EXPECT_EQ(d->step, 6);
  EXPECT_EQ(d->group, 1);
  EXPECT_EQ(d->what, "gradient");
  EXPECT_EQ(d->index, 2);
  EXPECT_NE(status.message().find("step 6: group 1's fused gradient holds a non-finite value (element 2 = inf)"),
            std::string::npos)
      << status;
  // Group 0 went out; neither the bad group nor the one after it did.
  EXPECT_EQ(scheme.exchanged(), std::vector<int>({0}));
  // The pipeline stays stopped: a later step fails with the same reason
  // without exchanging anything.
  pipeline->BeginStep(7);
  EXPECT_EQ(pipeline->AddLayerGradient(0, good).code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(DivergenceOf(pipeline->FinishStep(absl::Seconds(30)).status()), d);
  EXPECT_EQ(scheme.exchanged(), std::vector<int>({0}));
}

TEST(StepPipelineDivergenceTest, AbortEndsTheStepWithoutWaitingForExchangesInFlight) {
  HeldScheme scheme(/*hold=*/true);
  std::unique_ptr<StepPipeline> pipeline = *StepPipeline::Create({4, 3}, {{0, 4}, {4, 3}}, &scheme);
  pipeline->BeginStep(0);
  std::vector<float> a(4, 1.0f), b(3, 1.0f);
  ASSERT_TRUE(pipeline->AddLayerGradient(0, a).ok());
  ASSERT_TRUE(pipeline->AddLayerGradient(1, b).ok());
  pipeline->MarkBackwardEnd();
  // Both exchanges are held, as if a peer never came; another worker's
  // divergence is announced meanwhile.
  Divergence posted;
  posted.step = 0;
  posted.group = 1;
  posted.worker = "worker-2";
  posted.what = "gradient";
  posted.index = 0;
  posted.value = std::numeric_limits<double>::quiet_NaN();
  auto finished = std::async(std::launch::async, [&] { return pipeline->FinishStep(absl::Minutes(5)).status(); });
  pipeline->Abort(DivergenceError(posted));
  const absl::Status status = finished.get();
  EXPECT_EQ(DivergenceOf(status), posted) << status;
  EXPECT_EQ(DivergenceOf(pipeline->aborted()), posted);
  // The first reason is kept.
  pipeline->Abort(absl::CancelledError("later"));
  EXPECT_EQ(DivergenceOf(pipeline->aborted()), posted);
  scheme.Release();  // the destructor waits for the exchanges in flight
}

TEST(StepPipelineCreateTest, RefusesLayoutsThatDoNotTileTheLayers) {
  class NoScheme : public AggregationScheme {
    std::string name() const override { return "none"; }
    void Exchange(uint64_t, int, GradientView, absl::Span<const float>, ExchangeDone done) override {
      done(absl::UnimplementedError("none"));
    }
    absl::Status OnApplied(int, const Update&) override { return absl::OkStatus(); }
    std::vector<GroupState> SaveState() const override { return {}; }
    absl::Status RestoreState(const std::vector<GroupState>&) override { return absl::OkStatus(); }
  } none;
  // Groups are ranges of the flat gradient: {begin, size}.
  EXPECT_FALSE(StepPipeline::Create({10, 10}, {{0, 10}}, &none).ok());
  EXPECT_FALSE(StepPipeline::Create({10, 10}, {{10, 10}, {0, 10}}, &none).ok());
  EXPECT_FALSE(StepPipeline::Create({10, 0}, {{0, 10}}, &none).ok());
  EXPECT_FALSE(StepPipeline::Create({10}, {{0, 10}}, nullptr).ok());
  EXPECT_TRUE(StepPipeline::Create({10, 10}, {{0, 10}, {10, 10}}, &none).ok());
  EXPECT_TRUE(StepPipeline::Create({10, 10}, {{0, 7}, {7, 6}, {13, 7}}, &none).ok());
}

// Partitions cut layers: a group is handed over once every layer with a
// piece in it is in, and each group's buffer holds exactly its range of the
// layers' values (the scheme answers with the gradient itself).
TEST(StepPipelinePartitionTest, ALayerCutByPartitionsFillsEachAndReadiesThemInOrder) {
  HeldScheme scheme(/*hold=*/false);
  // Layers of 4 and 6 elements; partitions [0, 3), [3, 7), [7, 10).
  std::unique_ptr<StepPipeline> pipeline = *StepPipeline::Create({4, 6}, {{0, 3}, {3, 4}, {7, 3}}, &scheme);
  pipeline->BeginStep(1);
  const std::vector<float> first = {1, 2, 3, 4}, second = {5, 6, 7, 8, 9, 10};
  ASSERT_TRUE(pipeline->AddLayerGradient(0, first).ok());
  // Partition 0 lies in layer 0 alone: it goes out before layer 1 is in;
  // partition 1 waits for layer 1.
  const absl::Time give_up = absl::Now() + absl::Seconds(30);
  while (scheme.exchanged().empty() && absl::Now() < give_up) absl::SleepFor(absl::Milliseconds(1));
  EXPECT_EQ(scheme.exchanged(), std::vector<int>({0}));
  ASSERT_TRUE(pipeline->AddLayerGradient(1, second).ok());
  pipeline->MarkBackwardEnd();
  absl::StatusOr<std::vector<Update>> updates = pipeline->FinishStep(absl::Seconds(30));
  ASSERT_TRUE(updates.ok()) << updates.status();
  ASSERT_EQ(updates->size(), 3u);
  EXPECT_EQ((*updates)[0].values, std::vector<float>({1, 2, 3}));
  EXPECT_EQ((*updates)[1].values, std::vector<float>({4, 5, 6, 7}));
  EXPECT_EQ((*updates)[2].values, std::vector<float>({8, 9, 10}));
  EXPECT_EQ(scheme.exchanged(), std::vector<int>({0, 1, 2}));
}

}  // namespace
}  // namespace sketchfuse
