// The char_lm workload: a small causal transformer (worker/training/
// transformer.h, 0.47M parameters: 2 blocks, width 128, 4 heads, context
// 64) learning to predict the next byte of Debian's fortunes (worker/
// training/text_corpus.h), as a step loop's Workload.
//
// An example is a window of 65 bytes of the training split (windows start
// every 64 bytes); worker `rank` trains on windows rank, rank + W, ... of
// the first run.train_examples of them (all when 0). The loss is the mean
// cross-entropy of the 64 next-byte predictions, in nats per byte (bits per
// character: loss / ln 2). Evaluate scores the validation split's windows
// (run.test_examples of them, or all; the curve: the first
// `eval_examples`) in batches of 256: its accuracy is the share of bytes
// predicted exactly. The run is judged by validation loss (quality_metric).
#ifndef SKETCHFUSE_WORKER_TRAINING_LANGUAGE_MODEL_WORKLOAD_H_
#define SKETCHFUSE_WORKER_TRAINING_LANGUAGE_MODEL_WORKLOAD_H_

#include <memory>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "torch/types.h"
#include "worker/training/text_corpus.h"
#include "worker/training/torch_workload.h"
#include "worker/training/transformer.h"

namespace sketchfuse {

inline constexpr char kCharLmWorkload[] = "char_lm";

// Windows of context + 1 bytes of `text` starting every `context` bytes
// ([WindowCount, context + 1] int64); rows rank, rank + world, ... of its
// first `limit` rows (all when limit <= 0) with world > 1.
torch::Tensor TextWindows(const std::string& text, int64_t context, int64_t limit = 0, int64_t rank = 0,
                          int64_t world = 1);

// Mean next-byte cross-entropy (nats) and the share of bytes predicted
// exactly by `model` over `windows` ([N, context + 1]), in batches of
// `batch_size`, under no-grad and in eval mode (the mode restored). NaN
// loss and accuracy for no windows.
Evaluation EvaluateLanguageModel(CharTransformer& model, const torch::Tensor& windows, int64_t batch_size);

class LanguageModelWorkload final : public TorchWorkload {
 public:
  // Reads the corpus (config.corpus_dir) and builds the model and its
  // optimizer. INVALID_ARGUMENT for a participant's shard smaller than a
  // batch, eval_examples < 1, or mismatched ranks and pipelines; the
  // corpus's and the optimizer's errors.
  static absl::StatusOr<std::unique_ptr<LanguageModelWorkload>> Create(TorchWorkloadConfig config);

  int64_t examples(uint32_t participant) const override { return train_[participant].size(0); }
  int loss_classes() const override { return static_cast<int>(model_->shape().vocabulary); }
  bool judged_by_loss() const override { return true; }
  absl::StatusOr<double> Forward(uint32_t participant, int64_t step, absl::Span<const int64_t> batch) override;
  std::optional<Evaluation> Evaluate(bool whole_test_set) override;

 private:
  explicit LanguageModelWorkload(TorchWorkloadConfig config) : TorchWorkload(std::move(config)) {}

  std::shared_ptr<CharTransformer> model_;
  std::vector<torch::Tensor> train_;  // each participant's windows
  torch::Tensor validation_, eval_;
};

// The run's model shape, parameter sizes (backward order) and training
// windows, without building the workload: DescribeRun's share.
// NOT_FOUND / INVALID_ARGUMENT as LoadTextCorpus.
struct LanguageModelDescription {
  std::vector<int64_t> parameter_sizes;  // forward order
  std::vector<int64_t> parameter_rows;   // each one's first dimension (1 for a vector)
  int64_t train_windows = 0;
};
absl::StatusOr<LanguageModelDescription> DescribeLanguageModel(const std::string& corpus_dir, uint64_t seed);

}  // namespace sketchfuse

#endif  // SKETCHFUSE_WORKER_TRAINING_LANGUAGE_MODEL_WORKLOAD_H_
