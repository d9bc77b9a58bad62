// The classifiers: shapes, deterministic seeding, parameter layout, the
// evaluation contract, and that the MLP really learns Fashion-MNIST.
#include "worker/training/models.h"

#include <cmath>
#include <cstdint>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "torch/nn/functional/loss.h"
#include "torch/optim/sgd.h"
#include "torch/utils.h"
#include "worker/training/fashion_mnist.h"

namespace sketchfuse {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::shared_ptr<ClassifierImpl> Make(const std::string& name, uint64_t seed) {
  absl::StatusOr<std::shared_ptr<ClassifierImpl>> model = MakeClassifier(name, seed);
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? *model : nullptr;
}

bool SameParameters(ClassifierImpl& a, ClassifierImpl& b) {
  const std::vector<torch::Tensor> pa = a.parameters(), pb = b.parameters();
  if (pa.size() != pb.size()) return false;
  for (size_t i = 0; i < pa.size(); ++i) {
    if (!pa[i].sizes().equals(pb[i].sizes()) || !torch::equal(pa[i], pb[i])) return false;
  }
  return true;
}

int64_t Sum(const std::vector<int64_t>& v) {
  return std::accumulate(v.begin(), v.end(), int64_t{0});
}

class ModelNameTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ModelNameTest, OutputIsBatchByTenLogits) {
  std::shared_ptr<ClassifierImpl> model = Make(GetParam(), 1);
  ASSERT_NE(model, nullptr);
  for (int64_t batch : {1, 3, 64}) {
    const torch::Tensor logits = model->forward(torch::randn({batch, 1, 28, 28}));
    EXPECT_EQ(logits.sizes(), (std::vector<int64_t>{batch, 10}));
    EXPECT_EQ(logits.scalar_type(), torch::kFloat32);
    EXPECT_TRUE(torch::isfinite(logits).all().item<bool>());
  }
  EXPECT_EQ(model->forward(torch::zeros({0, 1, 28, 28})).sizes(), (std::vector<int64_t>{0, 10}));
}

TEST_P(ModelNameTest, SameSeedGivesIdenticalParametersDifferentSeedDifferent) {
  std::shared_ptr<ClassifierImpl> a = Make(GetParam(), 42);
  torch::rand({1000});  // Unrelated draws between the two builds do not matter.
  std::shared_ptr<ClassifierImpl> b = Make(GetParam(), 42);
  std::shared_ptr<ClassifierImpl> c = Make(GetParam(), 43);
  ASSERT_TRUE(a && b && c);
  EXPECT_TRUE(SameParameters(*a, *b));
  EXPECT_FALSE(SameParameters(*a, *c));
  // Every weight tensor (not just one) depends on the seed.
  const std::vector<torch::Tensor> pa = a->parameters(), pc = c->parameters();
  for (size_t i = 0; i < pa.size(); ++i) {
    EXPECT_FALSE(torch::equal(pa[i], pc[i])) << "parameter " << i;
  }
}

TEST_P(ModelNameTest, StartsInTrainingModeAndRequiresGrad) {
  std::shared_ptr<ClassifierImpl> model = Make(GetParam(), 3);
  ASSERT_NE(model, nullptr);
  EXPECT_TRUE(model->is_training());
  for (const torch::Tensor& p : model->parameters()) EXPECT_TRUE(p.requires_grad());
}

INSTANTIATE_TEST_SUITE_P(AllModels, ModelNameTest, ::testing::Values("mlp", "cnn"));

TEST(MakeClassifierTest, UnknownNameListsKnownModels) {
  absl::StatusOr<std::shared_ptr<ClassifierImpl>> model = MakeClassifier("resnet50", 1);
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(model.status().message()), HasSubstr("resnet50"));
  EXPECT_THAT(std::string(model.status().message()), HasSubstr("mlp"));
  EXPECT_THAT(std::string(model.status().message()), HasSubstr("cnn"));
  EXPECT_FALSE(MakeClassifier("MLP", 1).ok());
  EXPECT_FALSE(MakeClassifier("", 1).ok());
  EXPECT_THAT(KnownClassifiers(), ElementsAre("mlp", "cnn", "mlp_large", "cnn_wide"));
}

TEST(ParameterSizesTest, MlpLayout) {
  std::shared_ptr<ClassifierImpl> model = Make("mlp", 1);
  ASSERT_NE(model, nullptr);
  const std::vector<int64_t> sizes = ParameterSizes(*model);
  EXPECT_THAT(sizes, ElementsAre(784 * 256, 256, 256 * 128, 128, 128 * 10, 10));
  EXPECT_EQ(Sum(sizes), 784 * 256 + 256 + 256 * 128 + 128 + 128 * 10 + 10);
  int64_t numel = 0;
  for (const torch::Tensor& p : model->parameters()) numel += p.numel();
  EXPECT_EQ(Sum(sizes), numel);
  // Order is registration order: weight before bias, layer by layer.
  const auto named = model->named_parameters();
  EXPECT_EQ(named.keys(), (std::vector<std::string>{"fc1.weight", "fc1.bias", "fc2.weight",
                                                    "fc2.bias", "fc3.weight", "fc3.bias"}));
}

TEST(ParameterSizesTest, TheScaleStudysLargerModels) {
  std::shared_ptr<ClassifierImpl> large = Make("mlp_large", 1);
  ASSERT_NE(large, nullptr);
  EXPECT_THAT(ParameterSizes(*large), ElementsAre(784 * 1024, 1024, 1024 * 1024, 1024, 1024 * 10, 10));
  EXPECT_GT(Sum(ParameterSizes(*large)), 1500000);
  std::shared_ptr<ClassifierImpl> wide = Make("cnn_wide", 1);
  ASSERT_NE(wide, nullptr);
  EXPECT_THAT(ParameterSizes(*wide), ElementsAre(64 * 25, 64, 192 * 64 * 25, 192, 10 * 192 * 7 * 7, 10));
  EXPECT_GT(Sum(ParameterSizes(*wide)), 400000);
  // Both classify a batch.
  const torch::Tensor x = torch::zeros({2, 1, 28, 28});
  EXPECT_EQ(large->forward(x).sizes(), (std::vector<int64_t>{2, 10}));
  EXPECT_EQ(wide->forward(x).sizes(), (std::vector<int64_t>{2, 10}));
}

TEST(ParameterSizesTest, MlpHiddenSizesAreConfigurable) {
  MlpClassifier model(32, 16);
  EXPECT_THAT(ParameterSizes(model), ElementsAre(784 * 32, 32, 32 * 16, 16, 16 * 10, 10));
  EXPECT_EQ(model.forward(torch::randn({2, 1, 28, 28})).sizes(), (std::vector<int64_t>{2, 10}));
}

TEST(ParameterSizesTest, CnnLayout) {
  std::shared_ptr<ClassifierImpl> model = Make("cnn", 1);
  ASSERT_NE(model, nullptr);
  const std::vector<int64_t> sizes = ParameterSizes(*model);
  EXPECT_THAT(sizes, ElementsAre(16 * 1 * 5 * 5, 16, 32 * 16 * 5 * 5, 32, 32 * 7 * 7 * 10, 10));
  int64_t numel = 0;
  for (const torch::Tensor& p : model->parameters()) numel += p.numel();
  EXPECT_EQ(Sum(sizes), numel);
  const auto named = model->named_parameters();
  EXPECT_EQ(named.keys(), (std::vector<std::string>{"conv1.weight", "conv1.bias", "conv2.weight",
                                                    "conv2.bias", "fc.weight", "fc.bias"}));
}

// ---------------------------------------------------------------------------
// Evaluation and training on the real data.

class TrainingTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    torch::set_num_threads(1);
    absl::StatusOr<ImageDataset> train = LoadFashionMnist(kFashionMnistDir, Split::kTrain);
    absl::StatusOr<ImageDataset> test = LoadFashionMnist(kFashionMnistDir, Split::kTest);
    ASSERT_TRUE(train.ok()) << train.status();
    ASSERT_TRUE(test.ok()) << test.status();
    // Clone so that the full splits can be freed.
    train_ = new ImageDataset(Clone(Head(*train, 6000)));
    test_ = new ImageDataset(Clone(Head(*test, 1000)));
  }
  static void TearDownTestSuite() {
    delete train_;
    delete test_;
    train_ = test_ = nullptr;
  }
  void SetUp() override { ASSERT_TRUE(train_ != nullptr && test_ != nullptr); }

  static ImageDataset Clone(const ImageDataset& d) { return {d.images.clone(), d.labels.clone()}; }

  // `steps` SGD steps (no momentum) over reshuffled epochs of train_.
  static void Train(ClassifierImpl& model, int steps, int64_t batch, double lr, uint64_t seed) {
    torch::optim::SGD sgd(model.parameters(), torch::optim::SGDOptions(lr));
    torch::manual_seed(seed);
    const int64_t n = train_->size();
    torch::Tensor order = torch::randperm(n);
    int64_t pos = 0;
    model.train();
    for (int step = 0; step < steps; ++step) {
      if (pos + batch > n) {
        order = torch::randperm(n);
        pos = 0;
      }
      const torch::Tensor idx = order.slice(0, pos, pos + batch);
      pos += batch;
      sgd.zero_grad();
      const torch::Tensor loss = torch::nn::functional::cross_entropy(
          model.forward(train_->images.index_select(0, idx)), train_->labels.index_select(0, idx));
      loss.backward();
      sgd.step();
    }
  }

  static ImageDataset* train_;
  static ImageDataset* test_;
};

ImageDataset* TrainingTest::train_ = nullptr;
ImageDataset* TrainingTest::test_ = nullptr;

TEST_F(TrainingTest, EvaluateIsBatchIndependentAndRestoresMode) {
  std::shared_ptr<ClassifierImpl> model = Make("mlp", 5);
  ASSERT_NE(model, nullptr);
  const Evaluation whole = Evaluate(*model, *test_, 0);
  const Evaluation batched = Evaluate(*model, *test_, 7);
  EXPECT_NEAR(whole.loss, batched.loss, 1e-5);
  EXPECT_DOUBLE_EQ(whole.accuracy, batched.accuracy);
  EXPECT_GE(whole.accuracy, 0.0);
  EXPECT_LE(whole.accuracy, 1.0);
  // An untrained classifier is near chance: loss about ln(10) = 2.30.
  EXPECT_GT(whole.loss, 1.8);
  EXPECT_LT(whole.loss, 2.8);
  EXPECT_TRUE(model->is_training());
  model->eval();
  Evaluate(*model, *test_, 100);
  EXPECT_FALSE(model->is_training());
  // Evaluate builds no graph.
  for (const torch::Tensor& p : model->parameters()) EXPECT_FALSE(p.grad().defined());
}

TEST_F(TrainingTest, EvaluateCountsCorrectPredictions) {
  // A model whose logits are a fixed one-hot of class 3 is right exactly on
  // the examples labelled 3, with loss -log_softmax at the label.
  class Constant final : public ClassifierImpl {
   public:
    torch::Tensor forward(torch::Tensor x) override {
      torch::Tensor logits = torch::zeros({x.size(0), 10});
      logits.select(1, 3).fill_(2.0);
      return logits;
    }
  } model;
  const Evaluation e = Evaluate(model, *test_, 64);
  const double expected_accuracy = test_->labels.eq(3).sum().item<double>() / test_->size();
  EXPECT_DOUBLE_EQ(e.accuracy, expected_accuracy);
  const double z = std::log(9.0 + std::exp(2.0));
  const double expected_loss = expected_accuracy * (z - 2.0) + (1 - expected_accuracy) * z;
  EXPECT_NEAR(e.loss, expected_loss, 1e-5);
  const Evaluation empty = Evaluate(model, Head(*test_, 0), 64);
  EXPECT_TRUE(std::isnan(empty.loss));
  EXPECT_TRUE(std::isnan(empty.accuracy));
}

TEST_F(TrainingTest, MlpLearnsFashionMnist) {
  std::shared_ptr<ClassifierImpl> model = Make("mlp", 1);
  ASSERT_NE(model, nullptr);
  const Evaluation before = Evaluate(*model, *test_, 250);
  Train(*model, /*steps=*/300, /*batch=*/64, /*lr=*/0.1, /*seed=*/11);
  const Evaluation after = Evaluate(*model, *test_, 250);
  EXPECT_GT(after.accuracy, 0.70) << "before: " << before.accuracy;
  EXPECT_LT(after.loss, before.loss - 1.0);
}

TEST_F(TrainingTest, CnnLearnsFashionMnist) {
  std::shared_ptr<ClassifierImpl> model = Make("cnn", 1);
  ASSERT_NE(model, nullptr);
  const Evaluation before = Evaluate(*model, *test_, 250);
  Train(*model, /*steps=*/100, /*batch=*/32, /*lr=*/0.05, /*seed=*/12);
  const Evaluation after = Evaluate(*model, *test_, 250);
  EXPECT_GT(after.accuracy, 0.60) << "before: " << before.accuracy;
  EXPECT_LT(after.loss, before.loss - 0.5);
}

TEST_F(TrainingTest, TrainingIsDeterministicGivenSeeds) {
  std::shared_ptr<ClassifierImpl> a = Make("mlp", 9);
  Train(*a, 20, 64, 0.1, 4);
  std::shared_ptr<ClassifierImpl> b = Make("mlp", 9);
  Train(*b, 20, 64, 0.1, 4);
  ASSERT_TRUE(a && b);
  EXPECT_TRUE(SameParameters(*a, *b));
}

}  // namespace
}  // namespace sketchfuse
