// The worker's run settings: defaults, every refusal naming its flag, and
// device=auto's choice.
#include "worker/training/run_request.h"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/schemes/scheme_registry.h"

namespace sketchfuse {
namespace {

using ::testing::HasSubstr;

absl::Status NoGpu() { return absl::FailedPreconditionError("no GPU here"); }
absl::Status AGpu() { return absl::OkStatus(); }

RunRequest Request() {
  RunRequest request;
  request.world_size = 4;
  return request;
}

// An Adam-family optimizer: no momentum of the run's own, raw-gradient
// residuals, the spec recorded whole; SGD records nothing (old job files).
TEST(RunRequestTest, AnAdamRunKeepsNoMomentumOfItsOwnAndRecordsItsSpec) {
  RunRequest request = Request();
  request.optimizer = "adamw:beta2=0.95,weight_decay=0.1";
  request.lr_schedule = "cosine";
  request.lr_warmup_steps = 30;
  absl::StatusOr<v1::RunConfig> run = BuildRunConfig(request, NoGpu);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->momentum(), 0);
  // By default sketch_ps keeps Adam's moments on the worker: its residual
  // holds Adam's directions, applied at the rate, so it is kept in units of
  // the rate.
  EXPECT_TRUE(KeepsAdamOnTheWorker(*run));
  EXPECT_TRUE(run->residual_in_rate_units());
  EXPECT_EQ(run->optimizer(), "adamw:beta1=0.9,beta2=0.95,eps=1e-08,weight_decay=0.1");
  EXPECT_EQ(run->lr_schedule(), "cosine");
  EXPECT_DOUBLE_EQ(run->lr_final_fraction(), 0.1);
  EXPECT_EQ(MomentumPlaceOf(*run), MomentumPlace::kNone);
  request.momentum = 0;  // stated: the same run
  EXPECT_EQ(BuildRunConfig(request, NoGpu)->optimizer(), run->optimizer());

  // Adam on the aggregated update: its step is not proportional to the
  // rate, so the residual holds raw gradients.
  request.momentum_at = "update";
  absl::StatusOr<v1::RunConfig> on_update = BuildRunConfig(request, NoGpu);
  ASSERT_TRUE(on_update.ok()) << on_update.status();
  EXPECT_FALSE(KeepsAdamOnTheWorker(*on_update));
  EXPECT_FALSE(on_update->residual_in_rate_units());
  EXPECT_EQ(MomentumPlaceOf(*on_update), MomentumPlace::kNone);
  request.momentum_at = "";

  absl::StatusOr<v1::RunConfig> sgd = BuildRunConfig(Request(), NoGpu);
  ASSERT_TRUE(sgd.ok());
  EXPECT_EQ(sgd->optimizer(), "");
  EXPECT_EQ(sgd->lr_schedule(), "");
  EXPECT_EQ(sgd->momentum(), 0.9) << "SGD's default momentum";
}

// The language model's run: the transformer's layers and the corpus's
// windows per worker over the batch.
TEST(RunRequestTest, TheLanguageModelIsDescribedFromItsCorpus) {
  RunRequest request = Request();
  request.workload = "char_lm";
  request.batch_size = 8;
  request.train_examples = 3200;
  absl::StatusOr<v1::RunConfig> run = BuildRunConfig(request, NoGpu);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->steps_per_epoch(), 100u) << "3200 windows over 4 workers, 8 a step";
  uint64_t parameters = 0;
  for (uint64_t size : run->layer_sizes()) parameters += size;
  EXPECT_EQ(parameters, 470784u);
  EXPECT_EQ(run->layer_sizes(0), 256u) << "the head's bias comes first (backward order)";
}

TEST(RunRequestTest, DefaultsGiveTheSchemesCompressorAndADescribedRun) {
  absl::StatusOr<v1::RunConfig> run = BuildRunConfig(Request(), NoGpu);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->scheme(), "sketch_ps");
  EXPECT_EQ(run->compressor(), FindScheme("sketch_ps")->default_compressor_spec);
  EXPECT_EQ(run->workload(), "mlp");
  EXPECT_EQ(run->device(), "cpu");
  EXPECT_GT(run->layer_sizes_size(), 0) << "DescribeRun filled the model's layers";
  EXPECT_GT(run->steps_per_epoch(), 0u);
  EXPECT_DOUBLE_EQ(run->learning_rate(), 0.05);
  EXPECT_EQ(run->synthetic_steps(), 0u) << "only synthetic workloads carry synthetic settings";
}

TEST(RunRequestTest, MomentumAtIsKept) {
  RunRequest request = Request();
  request.scheme = "fixed_sketch_ps";
  request.momentum_at = "update";
  absl::StatusOr<v1::RunConfig> run = BuildRunConfig(request, NoGpu);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->momentum_at(), "update");
}

// The residual follows the rate by default; a run can keep raw gradients,
// and one without error feedback records false (it has no residual).
TEST(RunRequestTest, TheResidualFollowsTheRateByDefault) {
  RunRequest request = Request();
  EXPECT_TRUE(BuildRunConfig(request, NoGpu)->residual_in_rate_units());
  request.residual_in_rate_units = false;
  EXPECT_FALSE(BuildRunConfig(request, NoGpu)->residual_in_rate_units());
  request.residual_in_rate_units = true;
  request.error_feedback = false;
  absl::StatusOr<v1::RunConfig> run = BuildRunConfig(request, NoGpu);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_FALSE(run->residual_in_rate_units());
}

TEST(RunRequestTest, AGivenCompressorIsKept) {
  RunRequest request = Request();
  request.scheme = "topk_allgather";
  request.compressor = "topk:density=0.01";
  absl::StatusOr<v1::RunConfig> run = BuildRunConfig(request, NoGpu);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->compressor(), "topk:density=0.01");
}

TEST(RunRequestTest, EveryRefusalNamesItsFlag) {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  struct Case {
    std::function<void(RunRequest&)> set;
    std::string says;
  };
  const std::vector<Case> cases = {
      {[](RunRequest& r) { r.world_size = 0; }, "--world_size must be >= 1; got 0"},
      {[](RunRequest& r) { r.epochs = 0; }, "--epochs must be >= 1; got 0"},
      {[](RunRequest& r) { r.batch_size = -3; }, "--batch_size must be >= 1; got -3"},
      {[nan](RunRequest& r) { r.learning_rate = nan; }, "--learning_rate must be > 0"},
      {[inf](RunRequest& r) { r.learning_rate = inf; }, "--learning_rate must be > 0"},
      {[](RunRequest& r) { r.momentum = 1.0; }, "--momentum must be in [0, 1); got 1"},
      {[](RunRequest& r) { r.lr_base_workers = -4; }, "--lr_base_workers and --lr_warmup_steps must be >= 0"},
      {[](RunRequest& r) { r.lr_warmup_steps = 10; }, "--lr_warmup_steps warms the rate up to its scaled value"},
      {[](RunRequest& r) { r.train_examples = -1; }, "--train_examples and --test_examples must be >= 0"},

      {[inf](RunRequest& r) { r.release_cap = inf; }, "--release_cap must be a finite number >= 0"},
      {[](RunRequest& r) { r.release_cap = -0.5; }, "--release_cap must be a finite number >= 0; got -0.5"},
      {[](RunRequest& r) { r.momentum_at = "optimizer"; }, "--momentum_at must be worker or update; got 'optimizer'"},
      {[](RunRequest& r) {
         r.scheme = "sketch_ps";
         r.compressor = "count_sketch:method=fetchsgd";
         r.momentum_at = "update";
       },
       "--momentum_at=update: 'count_sketch:method=fetchsgd' keeps its momentum where the sum is"},
      {[](RunRequest& r) {
         r.scheme = "topk_allgather";
         r.optimizer = "adam:weight_decay=0.01";
         r.momentum_at = "worker";
       },
       "--momentum_at=worker with adam: its weight_decay (0.01) is an L2 term in the gradient"},
      {[](RunRequest& r) {
         r.scheme = "sketch_ps";
         r.compressor = "count_sketch:method=fetchsgd";
         r.optimizer = "adamw";
         r.momentum_at = "worker";
       },
       "--momentum_at=worker with adamw: 'count_sketch:method=fetchsgd' keeps its state where the sum is"},
      {[](RunRequest& r) { r.scheme = "bogus"; }, "--scheme: unknown scheme 'bogus'"},
      {[](RunRequest& r) { r.compressor = "topk:density=0.01"; }, "--scheme/--compressor:"},
      {[](RunRequest& r) {
         r.scheme = "topk_allgather";
         r.second_round = true;
       },
       "--second_round is for --scheme="},
      {[](RunRequest& r) { r.device = "tpu"; }, "--device: device must be cpu or gpu"},
      {[](RunRequest& r) { r.device = "gpu"; }, "--device=gpu is for the synthetic workloads; mlp trains with LibTorch"},
      {[](RunRequest& r) {
         r.workload = "resnet50";
         r.scheme = "topk_allgather";
         r.device = "gpu";
       },
       "--device: device=gpu serves the count_sketch schemes"},
      {[](RunRequest& r) {
         r.workload = "resnet50";
         r.synthetic_steps = 0;
       },
       "--synthetic_steps must be >= 1; got 0"},
      {[](RunRequest& r) { r.workload = "nonesuch"; }, "nonesuch"},
      {[](RunRequest& r) { r.optimizer = "lion"; }, "--optimizer: unknown optimizer 'lion'; known: sgd, adam, adamw"},
      {[](RunRequest& r) { r.optimizer = "adamw:beta2=1"; }, "--optimizer: adamw: beta1 and beta2 must be below 1"},
      {[](RunRequest& r) {
         r.optimizer = "adamw";
         r.momentum = 0.9;
       },
       "--momentum is SGD's: --optimizer=adamw keeps its own first moment (beta1=0.9)"},
      {[](RunRequest& r) { r.lr_schedule = "linear"; }, "--lr_schedule must be constant or cosine; got 'linear'"},
      {[](RunRequest& r) {
         r.lr_schedule = "cosine";
         r.lr_final_fraction = 1.5;
       },
       "--lr_final_fraction must be in [0, 1]; got 1.5"},
      {[](RunRequest& r) {
         r.workload = "char_lm";
         r.corpus_dir = "/nonexistent/corpus";
       },
       "no text corpus at '/nonexistent/corpus'"},
  };
  for (const Case& c : cases) {
    RunRequest request = Request();
    c.set(request);
    absl::StatusOr<v1::RunConfig> run = BuildRunConfig(request, AGpu);
    ASSERT_FALSE(run.ok()) << c.says;
    EXPECT_TRUE(run.status().code() == absl::StatusCode::kInvalidArgument ||
                (c.says.rfind("no text corpus", 0) == 0 && run.status().code() == absl::StatusCode::kNotFound))
        << run.status();
    EXPECT_THAT(std::string(run.status().message()), HasSubstr(c.says));
  }
}

TEST(RunRequestTest, DeviceAutoTakesTheGpuOnlyWhereTheRunFitsIt) {
  RunRequest synthetic = Request();
  synthetic.workload = "resnet50";
  EXPECT_EQ(BuildRunConfig(synthetic, AGpu)->device(), "gpu");
  EXPECT_EQ(BuildRunConfig(synthetic, NoGpu)->device(), "cpu") << "no usable GPU here";
  synthetic.scheme = "topk_allgather";
  synthetic.compressor = "";
  EXPECT_EQ(BuildRunConfig(synthetic, AGpu)->device(), "cpu") << "a scheme that does not run on the GPU";
  EXPECT_EQ(BuildRunConfig(Request(), AGpu)->device(), "cpu") << "mlp trains with LibTorch on the CPU";
  // device=gpu is not checked against this machine (a launcher writes GPU
  // jobs' configurations anywhere).
  RunRequest on_gpu = Request();
  on_gpu.workload = "resnet50";
  on_gpu.device = "gpu";
  EXPECT_EQ(BuildRunConfig(on_gpu, NoGpu)->device(), "gpu");
}

}  // namespace
}  // namespace sketchfuse
