// The optimizer a run names (v1::RunConfig optimizer): "sgd" (the default;
// momentum is the run's momentum field), "adam" or "adamw", each with its
// parameters as "name:key=value,...":
//   beta1 (0.9), beta2 (0.999), eps (1e-8) and weight_decay (adam: 0, an L2
//   term added to the gradient; adamw: 0.01, decoupled from it, as
//   torch.optim.AdamW).
// No LibTorch here: run_request.cc checks the spec; worker/training/
// optimizer.h builds it.
#ifndef SKETCHFUSE_WORKER_TRAINING_OPTIMIZER_SPEC_H_
#define SKETCHFUSE_WORKER_TRAINING_OPTIMIZER_SPEC_H_

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/job_config.pb.h"

namespace sketchfuse {

struct OptimizerSpec {
  enum class Kind { kSgd, kAdam, kAdamW };
  Kind kind = Kind::kSgd;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0;

  bool adam_family() const { return kind != Kind::kSgd; }
  // adam's weight decay: an L2 term added to the gradient (adamw's is decoupled).
  bool decays_in_the_gradient() const { return kind == Kind::kAdam && weight_decay > 0; }
  // "sgd", "adam" or "adamw".
  std::string name() const;
  // The spec with every parameter, in a fixed order, each the shortest
  // decimal that reads back as the same double (what the run records, so
  // that two workers agree on it exactly), e.g.
  // "adamw:beta1=0.9,beta2=0.95,eps=1e-08,weight_decay=0.1"; "" for sgd, so
  // a run without the field (a job file written before it) is an SGD run.
  std::string Canonical() const;
};

// The longest spec ParseOptimizerSpec reads (the canonical form of any
// spec is under 120 bytes).
inline constexpr size_t kOptimizerSpecMaxBytes = 256;

// Parses "" or "sgd", "adam[:...]", "adamw[:...]". INVALID_ARGUMENT naming
// the problem: an unknown optimizer (listing the known ones), an unknown
// parameter, a spec over kOptimizerSpecMaxBytes, sgd with parameters (its momentum is --momentum), beta1 or
// beta2 outside [0, 1), eps outside (0, 1], weight_decay outside [0, 10].
absl::StatusOr<OptimizerSpec> ParseOptimizerSpec(absl::string_view text);

// The run's optimizer (its optimizer field parsed; SGD where it does not
// parse, which BuildRunConfig and the coordinator never let through).
OptimizerSpec OptimizerOf(const v1::RunConfig& run);

// True for adam and adamw: the optimizer keeps its own first and second
// moments of the aggregated update, so the run has no momentum of its own
// (run.momentum 0) and a compressed scheme's error feedback keeps raw
// gradients.
bool IsAdamFamily(const v1::RunConfig& run);

}  // namespace sketchfuse

#endif  // SKETCHFUSE_WORKER_TRAINING_OPTIMIZER_SPEC_H_
