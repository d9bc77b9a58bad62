#include "worker/training/language_model_workload.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "torch/nn/functional.h"

namespace sketchfuse {

namespace F = torch::nn::functional;

torch::Tensor TextWindows(const std::string& text, int64_t context, int64_t limit, int64_t rank, int64_t world) {
  const int64_t count = WindowCount(static_cast<int64_t>(text.size()), context);
  if (count == 0) return torch::empty({0, std::max<int64_t>(context, 0) + 1}, torch::kInt64);
  const torch::Tensor bytes =
      torch::from_blob(const_cast<char*>(text.data()), {static_cast<int64_t>(text.size())}, torch::kUInt8)
          .to(torch::kInt64);
  torch::Tensor windows = bytes.unfold(0, context + 1, context);
  if (limit > 0) windows = windows.slice(0, 0, std::min(limit, count));
  if (world > 1) windows = windows.slice(0, rank, windows.size(0), world);
  return windows.contiguous();
}

Evaluation EvaluateLanguageModel(CharTransformer& model, const torch::Tensor& windows, int64_t batch_size) {
  const int64_t n = windows.size(0);
  if (n == 0) return {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::quiet_NaN()};
  if (batch_size < 1) batch_size = n;
  struct ModeGuard {
    CharTransformer& model;
    bool was_training;
    ~ModeGuard() { model.train(was_training); }
  } mode_guard{model, model.is_training()};
  model.eval();
  torch::NoGradGuard no_grad;
  double loss_sum = 0;
  int64_t correct = 0, predicted = 0;
  for (int64_t begin = 0; begin < n; begin += batch_size) {
    const torch::Tensor batch = windows.slice(0, begin, std::min(n, begin + batch_size));
    const int64_t context = batch.size(1) - 1;
    const torch::Tensor logits = model.forward(batch.slice(1, 0, context));
    const torch::Tensor next = batch.slice(1, 1, context + 1);
    loss_sum += F::cross_entropy(logits.reshape({-1, logits.size(2)}), next.reshape({-1}),
                                 F::CrossEntropyFuncOptions().reduction(torch::kSum))
                    .item<double>();
    correct += logits.argmax(2).eq(next).sum().item<int64_t>();
    predicted += next.numel();
  }
  return {loss_sum / static_cast<double>(predicted), static_cast<double>(correct) / static_cast<double>(predicted)};
}

absl::StatusOr<std::unique_ptr<LanguageModelWorkload>> LanguageModelWorkload::Create(TorchWorkloadConfig config) {
  if (config.eval_examples < 1) {
    return absl::InvalidArgumentError(absl::StrCat("the curve needs eval_examples >= 1; got ", config.eval_examples));
  }
  if (config.corpus_dir.empty()) config.corpus_dir = kFortunesDir;
  std::unique_ptr<LanguageModelWorkload> w(new LanguageModelWorkload(std::move(config)));
  const TorchWorkloadConfig& c = w->config();
  const v1::RunConfig& run = c.run;
  absl::StatusOr<TextCorpus> corpus = LoadTextCorpus(c.corpus_dir);
  if (!corpus.ok()) return corpus.status();
  w->model_ = MakeCharTransformer(run.seed());
  const int64_t context = w->model_->shape().context;
  for (const uint32_t rank : c.ranks) {
    torch::Tensor shard = TextWindows(corpus->train, context, run.train_examples(), rank, c.world);
    if (shard.size(0) < static_cast<int64_t>(run.batch_size())) {
      return absl::InvalidArgumentError(absl::StrCat("worker ", rank, "'s shard has ", shard.size(0),
                                                     " windows, fewer than a batch of ", run.batch_size()));
    }
    w->train_.push_back(std::move(shard));
  }
  w->validation_ = TextWindows(corpus->validation, context, run.test_examples());
  w->eval_ = w->validation_.slice(0, 0, std::min<int64_t>(c.eval_examples, w->validation_.size(0)));
  if (absl::Status s = w->Init(w->model_->parameters()); !s.ok()) return s;
  return w;
}

absl::StatusOr<double> LanguageModelWorkload::Forward(uint32_t participant, int64_t step,
                                                      absl::Span<const int64_t> batch) {
  BeginForward(participant, step);
  const torch::Tensor index =
      torch::from_blob(const_cast<int64_t*>(batch.data()), {static_cast<int64_t>(batch.size())}, torch::kInt64)
          .clone();
  const torch::Tensor windows = train_[participant].index_select(0, index);
  const int64_t context = windows.size(1) - 1;
  const torch::Tensor logits = model_->forward(windows.slice(1, 0, context));
  loss_ = F::cross_entropy(logits.reshape({-1, logits.size(2)}), windows.slice(1, 1, context + 1).reshape({-1}));
  return loss_.item<double>();
}

std::optional<Evaluation> LanguageModelWorkload::Evaluate(bool whole_test_set) {
  return EvaluateLanguageModel(*model_, whole_test_set ? validation_ : eval_, 256);
}

absl::StatusOr<LanguageModelDescription> DescribeLanguageModel(const std::string& corpus_dir, uint64_t seed) {
  absl::StatusOr<TextCorpus> corpus = LoadTextCorpus(corpus_dir.empty() ? kFortunesDir : corpus_dir);
  if (!corpus.ok()) return corpus.status();
  const std::shared_ptr<CharTransformer> model = MakeCharTransformer(seed);
  LanguageModelDescription description;
  for (const torch::Tensor& p : model->parameters()) {
    description.parameter_sizes.push_back(p.numel());
    description.parameter_rows.push_back(p.dim() > 1 ? p.size(0) : 1);
  }
  description.train_windows = WindowCount(static_cast<int64_t>(corpus->train.size()), model->shape().context);
  return description;
}

}  // namespace sketchfuse
