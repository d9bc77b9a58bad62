// The char_lm workload's parts against simple references: the corpus and
// its split (Debian's fortunes, read here file by file), the windows and
// the workers' shards, the transformer (its size, its causality, its loss
// against a log-softmax written out in double precision) and the
// evaluation.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "torch/nn/functional.h"
#include "torch/optim/adamw.h"
#include "worker/training/language_model_workload.h"
#include "worker/training/text_corpus.h"
#include "worker/training/transformer.h"

namespace sketchfuse {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

TEST(TextCorpusTest, TheFortunesSplitIntoEveryTenthChunkForValidation) {
  absl::StatusOr<TextCorpus> corpus = LoadTextCorpus(kFortunesDir);
  ASSERT_TRUE(corpus.ok()) << corpus.status() << " (scripts/setup.sh installs Debian's fortunes)";
  // The reference: every extension-less regular file but the pictures, by name.
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(kFortunesDir)) {
    const std::string name = entry.path().filename().string();
    if (entry.is_regular_file() && !entry.is_symlink() && name.find('.') == std::string::npos && name != "art" &&
        name != "ascii-art") {
      names.push_back(name);
    }
  }
  std::sort(names.begin(), names.end());
  EXPECT_EQ(corpus->files, names);
  EXPECT_NE(std::find(names.begin(), names.end(), "science"), names.end());
  std::string text;
  for (const std::string& name : names) text += ReadFile(std::string(kFortunesDir) + "/" + name);
  ASSERT_GT(text.size(), 2000000u);
  std::string train, validation;
  for (size_t begin = 0, chunk = 1; begin < text.size(); begin += 4096, ++chunk) {
    (chunk % 10 == 0 ? validation : train) += text.substr(begin, 4096);
  }
  EXPECT_EQ(corpus->train, train);
  EXPECT_EQ(corpus->validation, validation);
  EXPECT_NEAR(static_cast<double>(validation.size()) / text.size(), 0.1, 0.002);
}

TEST(TextCorpusTest, AMissingOrTinyCorpusIsRefusedByName) {
  absl::StatusOr<TextCorpus> missing = LoadTextCorpus("/nonexistent/fortunes");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("apt-get install fortunes"), std::string::npos) << missing.status();
  const std::string dir = ::testing::TempDir() + "/tiny_corpus";
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/only") << "a short text\n";
  absl::StatusOr<TextCorpus> tiny = LoadTextCorpus(dir);
  EXPECT_EQ(tiny.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(tiny.status().message().find("not Debian's fortunes"), std::string::npos) << tiny.status();
  const std::string empty = ::testing::TempDir() + "/empty_corpus";
  std::filesystem::create_directories(empty);
  std::ofstream(empty + "/index.dat") << "x";
  EXPECT_EQ(LoadTextCorpus(empty).status().code(), absl::StatusCode::kNotFound);
}

TEST(TextWindowsTest, WindowsOverlapByOneByteAndShardsCoverThemOnce) {
  for (int64_t size : {0, 5, 64, 65, 66, 129, 1000}) {
    std::string text(static_cast<size_t>(size), ' ');
    for (int64_t i = 0; i < size; ++i) text[i] = static_cast<char>(i * 7 + 3);
    const torch::Tensor windows = TextWindows(text, 64);
    ASSERT_EQ(windows.size(0), WindowCount(size, 64)) << size;
    ASSERT_EQ(windows.size(1), 65);
    for (int64_t w = 0; w < windows.size(0); ++w) {
      for (int64_t j = 0; j < 65; ++j) {
        ASSERT_EQ(windows[w][j].item<int64_t>(), static_cast<unsigned char>(text[w * 64 + j])) << size;
      }
    }
    // Shards of the first 10 windows: rows rank, rank + 3, ...
    std::set<int64_t> seen;
    for (int64_t rank = 0; rank < 3; ++rank) {
      const torch::Tensor shard = TextWindows(text, 64, 10, rank, 3);
      for (int64_t r = 0; r < shard.size(0); ++r) {
        const int64_t first = shard[r][0].item<int64_t>();
        const int64_t w = rank + 3 * r;
        EXPECT_EQ(first, windows[w][0].item<int64_t>());
        EXPECT_TRUE(seen.insert(w).second);
      }
    }
    EXPECT_EQ(static_cast<int64_t>(seen.size()), std::min<int64_t>(10, windows.size(0)));
  }
  EXPECT_EQ(WindowCount(65, 64), 1);
  EXPECT_EQ(WindowCount(64, 64), 0);
  EXPECT_EQ(WindowCount(129, 64), 2);
}

TEST(CharTransformerTest, HasTheStatedSizeAndOrder) {
  const std::shared_ptr<CharTransformer> model = MakeCharTransformer(1);
  std::vector<int64_t> sizes;
  int64_t total = 0;
  for (const torch::Tensor& p : model->parameters()) {
    sizes.push_back(p.numel());
    total += p.numel();
  }
  EXPECT_EQ(total, 470784);
  ASSERT_EQ(sizes.size(), 2u + 2 * 12 + 4);
  EXPECT_EQ(sizes[0], 64 * 128) << "the position embedding";
  EXPECT_EQ(sizes[1], 256 * 128) << "the token embedding";
  EXPECT_EQ(sizes[4], 3 * 128 * 128) << "block 0's qkv";
  EXPECT_EQ(sizes.back(), 256) << "the head's bias";
  // The same seed, the same parameters.
  const std::shared_ptr<CharTransformer> again = MakeCharTransformer(1);
  const std::vector<torch::Tensor> a = model->parameters(), b = again->parameters();
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(torch::equal(a[i], b[i])) << i;
}

TEST(CharTransformerTest, APredictionDependsOnlyOnTheBytesBeforeIt) {
  const std::shared_ptr<CharTransformer> model = MakeCharTransformer(3);
  torch::NoGradGuard no_grad;
  torch::manual_seed(5);
  const torch::Tensor tokens = torch::randint(0, 256, {2, 64}, torch::kInt64);
  const torch::Tensor logits = model->forward(tokens);
  ASSERT_EQ(logits.sizes(), (std::vector<int64_t>{2, 64, 256}));
  for (int64_t t : {0, 17, 63}) {
    torch::Tensor changed = tokens.clone();
    if (t + 1 < 64) changed.slice(1, t + 1, 64).fill_(42);
    changed.slice(1, 0, t + 1).copy_(tokens.slice(1, 0, t + 1));
    const torch::Tensor again = model->forward(changed);
    EXPECT_TRUE(torch::allclose(again.slice(1, 0, t + 1), logits.slice(1, 0, t + 1), 1e-5, 1e-6)) << t;
    if (t < 63) {
      changed[0][t] = (tokens[0][t].item<int64_t>() + 1) % 256;
      EXPECT_FALSE(torch::allclose(model->forward(changed).slice(1, t, t + 1), logits.slice(1, t, t + 1)))
          << "position " << t << " sees its own byte";
    }
  }
  // A shorter context is the prefix of the longer one.
  const torch::Tensor prefix = model->forward(tokens.slice(1, 0, 10));
  EXPECT_TRUE(torch::allclose(prefix, logits.slice(1, 0, 10), 1e-5, 1e-6));
}

// The evaluation's loss and accuracy against a log-softmax written out in
// double precision, window by window.
TEST(CharTransformerTest, TheEvaluationIsTheMeanNextByteCrossEntropy) {
  const std::shared_ptr<CharTransformer> model = MakeCharTransformer(7);
  torch::manual_seed(8);
  const torch::Tensor windows = torch::randint(0, 256, {5, 65}, torch::kInt64);
  const Evaluation eval = EvaluateLanguageModel(*model, windows, 2);
  EXPECT_TRUE(model->is_training()) << "the mode is restored";
  double loss = 0;
  int64_t correct = 0;
  {
    torch::NoGradGuard no_grad;
    model->eval();
    const torch::Tensor logits = model->forward(windows.slice(1, 0, 64)).to(torch::kFloat64);
    model->train();
    for (int64_t w = 0; w < 5; ++w) {
      for (int64_t t = 0; t < 64; ++t) {
        const torch::Tensor row = logits[w][t];
        const double max = row.max().item<double>();
        const double log_sum = max + std::log((row - max).exp().sum().item<double>());
        const int64_t next = windows[w][t + 1].item<int64_t>();
        loss += log_sum - row[next].item<double>();
        correct += row.argmax().item<int64_t>() == next ? 1 : 0;
      }
    }
  }
  EXPECT_NEAR(eval.loss, loss / (5 * 64), 1e-5);
  EXPECT_DOUBLE_EQ(eval.accuracy, static_cast<double>(correct) / (5 * 64));
  // An untrained model is near a uniform guess: ln 256.
  EXPECT_NEAR(eval.loss, std::log(256.0), 0.1);
  EXPECT_TRUE(std::isnan(EvaluateLanguageModel(*model, windows.slice(0, 0, 0), 2).loss));
}

// The model learns: AdamW on the corpus's first windows brings the
// validation loss well under a uniform guess in a few dozen steps.
TEST(CharTransformerTest, AdamWOnTheCorpusLowersTheValidationLoss) {
  absl::StatusOr<TextCorpus> corpus = LoadTextCorpus(kFortunesDir);
  ASSERT_TRUE(corpus.ok()) << corpus.status();
  const std::shared_ptr<CharTransformer> model = MakeCharTransformer(1);
  const torch::Tensor train = TextWindows(corpus->train, 64, 4096);
  const torch::Tensor validation = TextWindows(corpus->validation, 64, 64);
  const double before = EvaluateLanguageModel(*model, validation, 64).loss;
  torch::optim::AdamW adamw(model->parameters(), torch::optim::AdamWOptions(3e-3));
  for (int64_t step = 0; step < 60; ++step) {
    const torch::Tensor batch = train.slice(0, step * 16 % 4096, step * 16 % 4096 + 16);
    const torch::Tensor logits = model->forward(batch.slice(1, 0, 64));
    const torch::Tensor loss =
        torch::nn::functional::cross_entropy(logits.reshape({-1, 256}), batch.slice(1, 1, 65).reshape({-1}));
    adamw.zero_grad();
    loss.backward();
    adamw.step();
  }
  const double after = EvaluateLanguageModel(*model, validation, 64).loss;
  EXPECT_NEAR(before, std::log(256.0), 0.1);
  EXPECT_LT(after, 3.5) << "from " << before;
}

}  // namespace
}  // namespace sketchfuse
