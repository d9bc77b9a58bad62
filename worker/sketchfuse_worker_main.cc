// sketchfuse_worker: one worker of a SketchFuse job (worker/worker_run.h: it
// joins the coordinator, trains its shard, aggregates each fused group
// through the servers, the workers' collectives, or both with --scheme=auto,
// and reports progress and a JSON summary), or with --virtual_workers=W a
// whole job of W workers in this process (worker/virtual/virtual_workers.h).
// This main only parses flags (worker/worker_flags.h) and starts the run.
//
//   sketchfuse_worker --coordinator=127.0.0.1:7070 --job=demo --worker_id=worker-0 \
//       --world_size=4 --workload=mlp --scheme=sketch_ps
//   sketchfuse_worker --virtual_workers=64 --workload=mlp --scheme=fixed_sketch_allreduce
//
// --write_job_config=FILE writes the job's configuration for the servers and
// exits. Exit status: 0 done, 2 error, 3 the run diverged (here or elsewhere).
#include <iostream>
#include <optional>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "daemon/memory_tuning.h"
#include "torch/utils.h"
#include "worker/gpu/device_memory.h"
#include "worker/pipeline/job_plan.h"
#include "worker/schemes/scheme_registry.h"
#include "worker/training/blas_check.h"
#include "worker/virtual/virtual_workers.h"
#include "worker/worker_flags.h"
#include "worker/worker_run.h"

namespace {

int Fail(const absl::Status& status) {
  std::cerr << "sketchfuse_worker: error: " << status.message() << std::endl;
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  sketchfuse::KeepFreedMemoryMapped();
  absl::SetProgramUsageMessage(sketchfuse::WorkerUsage());
  // --help explains the flags of worker_flags.cc.
  absl::FlagsUsageConfig usage;
  usage.contains_help_flags = [](absl::string_view file) {
    return absl::StrContains(file, "worker/worker_flags.cc") || absl::StrContains(file, "sketchfuse_worker_main");
  };
  absl::SetFlagsUsageConfig(usage);
  std::vector<char*> positional = absl::ParseCommandLine(argc, argv);
  if (positional.size() > 1) {
    return Fail(absl::InvalidArgumentError(absl::StrCat("unexpected argument '", positional[1], "' (see --help)")));
  }
  const int threads = absl::GetFlag(FLAGS_threads);
  if (threads < 1 || threads > 256) return Fail(absl::InvalidArgumentError("--threads must be in [1, 256]"));
  torch::set_num_threads(threads);
  if (const std::string list = absl::GetFlag(FLAGS_list_schemes); !list.empty()) {
    if (list == "json") {
      std::cout << sketchfuse::SchemesJson();
    } else if (list == "text") {
      std::cout << sketchfuse::SchemesHelp();
    } else {
      return Fail(absl::InvalidArgumentError(absl::StrCat("--list_schemes must be json or text; got '", list, "'")));
    }
    return 0;
  }
  if (absl::GetFlag(FLAGS_print_route)) {
    absl::StatusOr<sketchfuse::SchemeInfo> scheme = sketchfuse::FindScheme(absl::GetFlag(FLAGS_scheme));
    if (!scheme.ok()) return Fail(scheme.status());
    std::cout << sketchfuse::RouteName(scheme->route) << std::endl;
    return 0;
  }
  absl::StatusOr<sketchfuse::v1::RunConfig> run = sketchfuse::RunFromFlags();
  if (!run.ok()) return Fail(run.status());

  if (const std::string path = absl::GetFlag(FLAGS_write_job_config); !path.empty()) {
    const int num_shards = absl::GetFlag(FLAGS_num_shards);
    if (num_shards < 1) return Fail(absl::InvalidArgumentError(absl::StrCat("--num_shards must be >= 1; got ", num_shards)));
    absl::Status written = sketchfuse::WriteJobConfigFile(absl::GetFlag(FLAGS_job), absl::GetFlag(FLAGS_world_size),
                                                          *run, absl::GetFlag(FLAGS_round_deadline_ms),
                                                          static_cast<uint32_t>(num_shards), path);
    return written.ok() ? 0 : Fail(written);
  }
  // A CPU worker's forward and backward passes run on LibTorch's BLAS: say
  // so when that is the reference BLAS (worker/training/blas_check.h).
  if (run->device() != "gpu") {
    if (absl::StatusOr<sketchfuse::BlasLibrary> blas = sketchfuse::LoadedBlas(); blas.ok()) {
      if (std::optional<std::string> warning = sketchfuse::ReferenceBlasWarning(*blas)) {
        std::cerr << "sketchfuse_worker: warning: " << *warning << std::endl;
      }
    }
  }
  if (absl::GetFlag(FLAGS_virtual_workers) != 0) {
    absl::StatusOr<sketchfuse::VirtualWorkersConfig> config = sketchfuse::VirtualWorkersConfigFromFlags(*run);
    if (!config.ok()) return Fail(config.status());
    return sketchfuse::RunVirtualWorkers(*std::move(config), absl::GetFlag(FLAGS_summary_json));
  }
  if (run->device() == "gpu") {
    if (absl::Status s = sketchfuse::CheckGpuWorker(); !s.ok()) return Fail(s);
  }
  absl::StatusOr<sketchfuse::WorkerRunConfig> config = sketchfuse::WorkerRunConfigFromFlags(*run);
  if (!config.ok()) return Fail(config.status());
  return sketchfuse::RunWorker(*std::move(config), absl::GetFlag(FLAGS_summary_json));
}
