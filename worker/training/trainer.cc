#include "worker/training/trainer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <numeric>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "proto/run_config.h"
#include "torch/nn/functional.h"
#include "torch/optim/sgd.h"
#include "torch/serialize.h"
#include "worker/pipeline/job_plan.h"
#include "worker/pipeline/step_apply.h"
#include "worker/training/make_workload.h"
#include "worker/training/step_loop.h"
#include "worker/training/workloads.h"
#include "worker/compression/group_compressors.h"
#include "worker/training/checkpoint_state.h"
#include "worker/schemes/scheme_registry.h"

namespace sketchfuse {

struct Trainer::State {
  TrainerConfig config;
  v1::RunConfig run;
  uint32_t rank = 0, world = 1;
  AggregationScheme* scheme = nullptr;
  std::unique_ptr<TorchWorkload> workload;
  int64_t first_step = 0;  // from the checkpoint
  std::unique_ptr<TraceWriter> trace;  // when config.trace_path is set
};

Trainer::Trainer(std::unique_ptr<State> state) : state_(std::move(state)) {}

// The hooks on the parameters point at the pipeline; both die with the
// trainer, and no backward pass runs during destruction.
Trainer::~Trainer() = default;

absl::StatusOr<std::unique_ptr<Trainer>> Trainer::Create(TrainerConfig config, AggregationScheme* scheme) {
  auto state = std::make_unique<State>();
  state->run = config.joined.job().run();
  state->rank = config.joined.rank();
  state->world = config.joined.world_size();
  state->scheme = scheme;
  state->config = std::move(config);
  const v1::RunConfig& run = state->run;
  if (state->world == 0 || state->rank >= state->world) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", state->rank, " of ", state->world, " workers"));
  }
  // The run the job describes must be the one this build derives.
  v1::RunConfig derived = run;
  if (absl::Status s = DescribeRun(state->world, &derived, state->config.corpus_dir); !s.ok()) return s;
  if (RunFingerprint(derived) != RunFingerprint(run)) {
    return absl::InvalidArgumentError(absl::StrCat("the job's run does not match the model this worker builds: ",
                                                   DiffRunConfigs(run, derived)));
  }
  if (state->config.eval_every < 0) {
    return absl::InvalidArgumentError(absl::StrCat("the curve needs eval_every >= 0; got ", state->config.eval_every));
  }
  std::vector<int64_t> layer_sizes(run.layer_sizes().begin(), run.layer_sizes().end());
  std::unique_ptr<Trainer> trainer(new Trainer(std::move(state)));
  State& s = *trainer->state_;
  absl::StatusOr<std::unique_ptr<StepPipeline>> pipeline =
      StepPipeline::Create(layer_sizes, GroupLayouts(s.config.joined.job()), scheme);
  if (!pipeline.ok()) return pipeline.status();
  trainer->pipeline_ = *std::move(pipeline);
  TorchWorkloadConfig workload;
  workload.run = s.run;
  workload.world = s.world;
  workload.ranks = {s.rank};
  workload.pipelines = {trainer->pipeline_.get()};
  workload.data_dir = s.config.data_dir;
  workload.corpus_dir = s.config.corpus_dir;
  workload.eval_examples = s.config.eval_examples;
  workload.inject_nan_gradient_at_step = s.config.inject_nan_gradient_at_step;
  absl::StatusOr<std::unique_ptr<TorchWorkload>> made = MakeTorchWorkload(std::move(workload));
  if (!made.ok()) return made.status();
  s.workload = *std::move(made);
  if (!s.config.trace_path.empty()) {
    if (s.config.trace_steps < 1) return absl::InvalidArgumentError("the timeline must cover at least one step");
    s.trace = PipelineTraceWriter(static_cast<int>(s.rank), trainer->pipeline_->num_groups());
    // Fail now, not after training, if the file cannot be written.
    if (absl::Status st = s.trace->WriteFile(s.config.trace_path); !st.ok()) return st;
  }
  if (!s.config.checkpoint_path.empty()) {
    absl::StatusOr<int64_t> resumed = trainer->LoadCheckpoint();
    if (!resumed.ok()) return resumed.status();
    s.first_step = *resumed;
  }
  return trainer;
}

absl::StatusOr<TrainingSummary> Trainer::Run(const std::function<void(const Progress&)>& progress) {
  State& s = *state_;
  StepLoopConfig loop;
  loop.run = s.run;
  loop.world = s.world;
  loop.first_step = s.first_step;
  loop.eval_every = s.config.eval_every;
  loop.report_every = s.config.report_every;
  loop.divergence_of = [&s](const absl::Status& failure) {
    return DivergenceBehind(failure, s.config.posted_divergence, s.config.worker_id);
  };
  loop.on_step = [this, &s](int64_t step, const StepReport& report, absl::Time apply_begin, absl::Time apply_end) {
    if (s.trace != nullptr && step < s.first_step + s.config.trace_steps) {
      AddStepToTrace(step, pipeline_->timeline(), apply_begin, apply_end, s.trace.get());
    }
    if (s.config.on_step) s.config.on_step(report);
  };
  loop.after_step = [this, &s](int64_t step) {
    const bool due = !s.config.checkpoint_path.empty() && s.config.checkpoint_every > 0 &&
                     (step + 1) % s.config.checkpoint_every == 0;
    return due ? SaveCheckpoint(step + 1) : absl::OkStatus();
  };
  loop.at_end = [this, &s](int64_t total_steps) {
    if (!s.config.checkpoint_path.empty()) {
      if (absl::Status st = SaveCheckpoint(total_steps); !st.ok()) return st;
    }
    return s.trace != nullptr ? s.trace->WriteFile(s.config.trace_path) : absl::OkStatus();
  };
  loop.at_divergence = [&s] {
    if (s.trace != nullptr) s.trace->WriteFile(s.config.trace_path).IgnoreError();  // best effort
  };
  Participants participants{{pipeline_.get()}, {s.scheme}, {s.rank}};
  return RunStepLoop(*s.workload, participants, loop, progress);
}

std::vector<float> Trainer::FlatParameters() const { return state_->workload->FlatParameters(); }

absl::Status Trainer::SaveCheckpoint(int64_t next_step) const {
  const State& s = *state_;
  const std::string tmp = s.config.checkpoint_path + ".tmp";
  try {
    torch::serialize::OutputArchive archive;
    archive.write("next_step", torch::tensor({next_step}, torch::kInt64));
    const std::string fingerprint = RunFingerprint(s.run);
    archive.write("fingerprint",
                  torch::from_blob(const_cast<char*>(fingerprint.data()), {static_cast<int64_t>(fingerprint.size())},
                                   torch::kUInt8).clone());
    archive.write("rank", torch::tensor({static_cast<int64_t>(s.rank)}, torch::kInt64));
    const std::vector<torch::Tensor>& params = s.workload->params();
    for (size_t i = 0; i < params.size(); ++i) archive.write(absl::StrCat("param_", i), params[i].detach());
    torch::serialize::OutputArchive optimizer;
    s.workload->optimizer().save(optimizer);
    archive.write("optimizer", optimizer);
    WriteGroupStates(s.scheme->SaveState(), archive);
    archive.save_to(tmp);
  } catch (const c10::Error& e) {
    return absl::DataLossError(absl::StrCat("cannot write checkpoint '", tmp, "': ", e.what_without_backtrace()));
  }
  if (std::rename(tmp.c_str(), s.config.checkpoint_path.c_str()) != 0) {
    return absl::DataLossError(absl::StrCat("cannot rename '", tmp, "' to '", s.config.checkpoint_path, "'"));
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> Trainer::LoadCheckpoint() {
  State& s = *state_;
  const std::string& path = s.config.checkpoint_path;
  if (!std::ifstream(path).good()) return 0;  // nothing to resume
  try {
    torch::serialize::InputArchive archive;
    archive.load_from(path);
    torch::Tensor fingerprint, rank, next_step;
    archive.read("fingerprint", fingerprint);
    const std::string saved(reinterpret_cast<const char*>(fingerprint.data_ptr<uint8_t>()), fingerprint.numel());
    if (saved != RunFingerprint(s.run)) {
      return absl::InvalidArgumentError(absl::StrCat("checkpoint '", path, "' belongs to run ", saved,
                                                     ", not to this run ", RunFingerprint(s.run)));
    }
    archive.read("rank", rank);
    if (rank.item<int64_t>() != s.rank) {
      return absl::InvalidArgumentError(absl::StrCat("checkpoint '", path, "' is rank ", rank.item<int64_t>(),
                                                     "'s; this worker is rank ", s.rank));
    }
    archive.read("next_step", next_step);
    torch::NoGradGuard no_grad;
    std::vector<torch::Tensor>& params = s.workload->params();
    for (size_t i = 0; i < params.size(); ++i) {
      torch::Tensor saved_param;
      archive.read(absl::StrCat("param_", i), saved_param);
      if (!saved_param.sizes().equals(params[i].sizes())) {
        return absl::InvalidArgumentError(absl::StrCat("checkpoint '", path, "': parameter ", i, " has another shape"));
      }
      params[i].copy_(saved_param);
    }
    torch::serialize::InputArchive optimizer;
    archive.read("optimizer", optimizer);
    s.workload->optimizer().load(optimizer);
    const int64_t total_steps = static_cast<int64_t>(s.run.steps_per_epoch()) * s.run.epochs();
    if (next_step.item<int64_t>() < 0 || next_step.item<int64_t>() > total_steps) {
      return absl::InvalidArgumentError(absl::StrCat("checkpoint '", path, "' resumes at step ",
                                                     next_step.item<int64_t>(), ", outside this run's 0..",
                                                     total_steps));
    }
    absl::StatusOr<std::vector<GroupState>> state = ReadGroupStates(archive, s.scheme->SaveState());
    if (!state.ok()) return absl::InvalidArgumentError(absl::StrCat("checkpoint '", path, "': ", state.status().message()));
    if (absl::Status st = s.scheme->RestoreState(*state); !st.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("checkpoint '", path, "': ", st.message()));
    }
    return next_step.item<int64_t>();
  } catch (const c10::Error& e) {
    return absl::DataLossError(absl::StrCat("cannot read checkpoint '", path, "': ", e.what_without_backtrace()));
  }
}

}  // namespace sketchfuse
