#include "worker/training/run_request.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "worker/gpu/device_memory.h"
#include "worker/schemes/scheme_registry.h"
#include "common/error_text.h"
#include "worker/training/learning_rate.h"
#include "worker/training/optimizer_spec.h"
#include "worker/training/workloads.h"

namespace sketchfuse {

absl::StatusOr<v1::RunConfig> BuildRunConfig(const RunRequest& request, const GpuCheck& gpu) {
  const GpuCheck check_gpu = gpu ? gpu : GpuCheck(CheckGpuWorker);
  const double lr = request.learning_rate;
  absl::StatusOr<OptimizerSpec> optimizer = ParseOptimizerSpec(request.optimizer);
  if (!optimizer.ok()) return absl::InvalidArgumentError(absl::StrCat("--", optimizer.status().message()));
  const double momentum = request.momentum.value_or(optimizer->adam_family() ? 0.0 : 0.9);
  if (request.world_size < 1) {
    return absl::InvalidArgumentError(absl::StrCat("--world_size must be >= 1; got ", request.world_size));
  }
  if (request.epochs < 1) return absl::InvalidArgumentError(absl::StrCat("--epochs must be >= 1; got ", request.epochs));
  if (request.batch_size < 1) {
    return absl::InvalidArgumentError(absl::StrCat("--batch_size must be >= 1; got ", request.batch_size));
  }
  if (!(lr > 0) || !std::isfinite(lr)) {
    return absl::InvalidArgumentError(absl::StrCat("--learning_rate must be > 0; got ", lr));
  }
  if (request.lr_base_workers < 0 || request.lr_warmup_steps < 0) {
    return absl::InvalidArgumentError(absl::StrCat("--lr_base_workers and --lr_warmup_steps must be >= 0; got ",
                                                   request.lr_base_workers, " and ", request.lr_warmup_steps));
  }
  const bool cosine = request.lr_schedule == kCosineSchedule;
  if (!cosine && !request.lr_schedule.empty() && request.lr_schedule != kConstantSchedule) {
    return absl::InvalidArgumentError(absl::StrCat("--lr_schedule must be ", kConstantSchedule, " or ",
                                                   kCosineSchedule, "; got ", QuoteField(request.lr_schedule)));
  }
  if (!(request.lr_final_fraction >= 0 && request.lr_final_fraction <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--lr_final_fraction must be in [0, 1]; got ", request.lr_final_fraction));
  }
  if (request.lr_warmup_steps > 0 && request.lr_base_workers == 0 && !cosine) {
    return absl::InvalidArgumentError(
        "--lr_warmup_steps warms the rate up to its scaled value: it needs --lr_base_workers (or "
        "--lr_schedule=cosine, which warms up from near 0)");
  }
  if (!(momentum >= 0 && momentum < 1)) {
    return absl::InvalidArgumentError(absl::StrCat("--momentum must be in [0, 1); got ", momentum));
  }
  if (optimizer->adam_family() && momentum > 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--momentum is SGD's: --optimizer=", optimizer->name(), " keeps its own first moment (beta1=",
        optimizer->beta1, "); leave --momentum unset or 0"));
  }
  if (request.train_examples < 0 || request.test_examples < 0) {
    return absl::InvalidArgumentError("--train_examples and --test_examples must be >= 0");
  }
  if (!(request.release_cap >= 0) || !std::isfinite(request.release_cap)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--release_cap must be a finite number >= 0; got ", request.release_cap));
  }
  absl::StatusOr<SchemeInfo> scheme = FindScheme(request.scheme);
  if (!scheme.ok()) return absl::InvalidArgumentError(absl::StrCat("--scheme: ", scheme.status().message()));
  v1::RunConfig run;
  run.set_workload(request.workload);
  run.set_scheme(scheme->name);
  run.set_compressor(request.compressor.empty() ? scheme->default_compressor_spec : request.compressor);
  run.set_second_round(SecondRoundFor(scheme->name, request.second_round));
  run.set_fusion(request.fusion);
  if (request.partition_elements.has_value()) run.set_partition_elements(*request.partition_elements);
  run.set_seed(request.seed);
  run.set_batch_size(request.batch_size);
  run.set_learning_rate(lr);
  run.set_lr_base_workers(static_cast<uint32_t>(request.lr_base_workers));
  run.set_lr_warmup_steps(static_cast<uint32_t>(request.lr_warmup_steps));
  run.set_optimizer(optimizer->Canonical());
  if (cosine) {
    run.set_lr_schedule(kCosineSchedule);
    run.set_lr_final_fraction(request.lr_final_fraction);
  }
  run.set_momentum(momentum);
  run.set_momentum_at(request.momentum_at);
  // Adam's step on the aggregated update is not proportional to the rate, so
  // a residual in units of the rate means nothing there: its residual holds
  // raw gradients. With Adam's moments on the worker the residual holds
  // Adam's directions, which the worker applies at the rate, as SGD's.
  run.set_residual_in_rate_units(request.residual_in_rate_units && request.error_feedback &&
                                 (!optimizer->adam_family() || KeepsAdamOnTheWorker(run)));
  run.set_error_feedback(request.error_feedback);
  run.set_release_cap(request.release_cap);
  run.set_epochs(request.epochs);
  run.set_train_examples(request.train_examples);
  run.set_test_examples(request.test_examples);
  if (IsSyntheticWorkload(run.workload())) {
    if (request.synthetic_steps < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("--synthetic_steps must be >= 1; got ", request.synthetic_steps));
    }
    run.set_synthetic_steps(request.synthetic_steps);
    run.set_backward_ns_per_element(request.backward_ns_per_element);
  }
  if (absl::Status s = CheckSchemeCompressor(run.scheme(), run.compressor()); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--scheme/--compressor: ", s.message()));
  }
  if (absl::Status s = CheckMomentumAt(run); !s.ok()) return absl::InvalidArgumentError(absl::StrCat("--", s.message()));
  if (absl::Status s = CheckRunScheme(run); !s.ok()) return s;
  run.set_device(request.device);
  if (run.device() == "auto") {
    v1::RunConfig on_gpu = run;
    on_gpu.set_device("gpu");
    const bool gpu_fits =
        IsSyntheticWorkload(run.workload()) && CheckDevicePlacement(on_gpu).ok() && check_gpu().ok();
    run.set_device(gpu_fits ? "gpu" : "cpu");
  }
  if (absl::Status s = CheckDevicePlacement(run); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--device: ", s.message()));
  }
  if (run.device() == "gpu" && !IsSyntheticWorkload(run.workload())) {
    return absl::InvalidArgumentError(absl::StrCat("--device=gpu is for the synthetic workloads; ", run.workload(),
                                                   " trains with LibTorch on the CPU"));
  }
  if (absl::Status s = DescribeRun(static_cast<uint32_t>(request.world_size), &run, request.corpus_dir); !s.ok()) return s;
  return run;
}

}  // namespace sketchfuse
