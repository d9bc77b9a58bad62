// The workloads a worker runs: real training with LibTorch of a Fashion-MNIST
// classifier ("mlp", "cnn", "mlp_large", "cnn_wide"; worker/training/
// classifier_workload.h) or of a character-level transformer on Debian's
// fortunes ("char_lm"; worker/training/language_model_workload.h), or a
// synthetic profile of a
// large model for throughput work ("resnet50", "vgg16", "bert_base",
// "gpt2_small"; worker/training/synthetic_runner.h): the model's real layer sizes,
// heavy-tailed gradients and a modelled backward time per layer.
#ifndef SKETCHFUSE_WORKER_TRAINING_WORKLOADS_H_
#define SKETCHFUSE_WORKER_TRAINING_WORKLOADS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "proto/job_config.pb.h"

namespace sketchfuse {

// True for the synthetic-profile workloads.
bool IsSyntheticWorkload(const std::string& workload);

// Every workload name, classifiers first.
std::vector<std::string> WorkloadNames();

// Fills the run's data-dependent fields: layer sizes (the model's parameter
// tensors in backward order) and steps per epoch (the LibTorch models: a
// worker's share of the training examples over the batch size, the language
// model's examples being the windows of the corpus in `corpus_dir`;
// synthetic profiles: synthetic_steps). INVALID_ARGUMENT for an unknown
// workload, a batch larger than a worker's shard, or a synthetic run without
// steps or with a negative backward time; the corpus's errors (NOT_FOUND
// naming its package when missing).
absl::Status DescribeRun(uint32_t world_size, v1::RunConfig* run, const std::string& corpus_dir = "");

}  // namespace sketchfuse

#endif  // SKETCHFUSE_WORKER_TRAINING_WORKLOADS_H_
