// sketchfuse_worker: one worker of a SketchFuse job. Joins the coordinator,
// trains its shard of the data, aggregates each fused gradient group as the
// backward pass produces it (through the servers, through the workers'
// collectives, or both with --scheme=auto), applies the aggregated update,
// and reports progress and a JSON summary.
//
//   sketchfuse_worker --coordinator=127.0.0.1:7070 --job=demo --worker_id=worker-0 \
//       --world_size=4 --workload=mlp --scheme=sketch_ps
//
// With --write_job_config=FILE it only writes the job configuration the
// servers need for this run (the fusion plan over the model's layers) and
// exits: the launcher runs it once before starting the servers.
//
// Exit status: 0 when the run is done, 2 on an error, 3 (kExitDiverged) when
// the run diverged, on this worker or on another (worker/core/divergence.h).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "proto/run_config.h"
#include "torch/utils.h"
#include "worker/collective/collective_factory.h"
#include "worker/core/divergence.h"
#include "worker/gpu/device_memory.h"
#include "worker/pipeline/job_plan.h"
#include "worker/rpc/coordinator_client.h"
#include "worker/rpc/divergence_notice.h"
#include "worker/rpc/grpc_ps_transport.h"
#include "worker/rpc/transport_faults.h"
#include "worker/schemes/scheme_factory.h"
#include "worker/schemes/scheme_registry.h"
#include "worker/training/run_request.h"
#include "worker/training/synthetic_runner.h"
#include "worker/training/trainer.h"
#include "worker/training/worker_metrics.h"
#include "worker/training/workloads.h"
#include "proto/job_config_file.h"
#include "daemon/memory_tuning.h"
#include "daemon/metrics_endpoint.h"

ABSL_FLAG(std::string, coordinator, "", "host:port of the job's coordinator (the shard started with --coordinator).");
ABSL_FLAG(std::string, job, "sketchfuse", "Name of the job; every process of a job uses the same.");
ABSL_FLAG(std::string, worker_id, "",
          "This worker's stable name (letters, digits, '-', '_', '.'). Ranks follow the ids in natural "
          "order; a restarted worker joins under the same id and gets its rank back.");
ABSL_FLAG(int, world_size, 0, "Number of workers in the job (>= 1).");
ABSL_FLAG(std::string, workload, "mlp",
          "mlp or cnn: train that model on Fashion-MNIST (LibTorch). resnet50, vgg16, bert_base or gpt2_small: a "
          "throughput run on that model's synthetic profile (real layer sizes, heavy-tailed gradients, a modelled "
          "backward time; no accuracy).");
ABSL_FLAG(int, synthetic_steps, 20, "Synthetic workloads: steps per epoch (>= 1).");
ABSL_FLAG(double, backward_ns_per_element, 2.0,
          "Synthetic workloads: modelled backward time per gradient element, ns (each layer adds 20 us).");
ABSL_FLAG(std::string, device, "auto",
          "Where every worker of the job keeps fused gradients and compresses them: cpu; gpu (device buffers "
          "and the CUDA kernels; synthetic workloads with sketch_ps, sketch_allreduce or auto; needs a GPU); or "
          "auto: gpu where a GPU is present and the run can use it, else cpu (workers must resolve it alike).");
ABSL_FLAG(std::string, scheme, "sketch_ps",
          "Aggregation scheme (see the list above): centralized sketch_ps, topk_ps, dense_ps; decentralized "
          "dense_allreduce, dense_bf16_allreduce, sketch_allreduce, topk_allgather, gtopk, importance_allreduce, "
          "spardl; or auto.");
ABSL_FLAG(std::string, compressor, "",
          "Compressor spec of the scheme's compressor, e.g. count_sketch:method=peel,density=0.00625,rows=4 "
          "(sketch_ps' default: 10x at 4 workers; the table is sized for the job's workers, so its bytes grow "
          "with them; width=, cols= or workers= fix it, and a shape too small for the job is warned about at "
          "join with its expected recovery) or topk:density=0.01. Empty: the scheme's default.");
ABSL_FLAG(bool, second_round, false,
          "sketch_ps and sketch_allreduce: a second round (a push to the servers, or an allreduce) replaces the "
          "decoded estimates by the workers' exact sums at the chosen coordinates (Sketched-SGD).");
ABSL_FLAG(std::string, collective, "gloo",
          "Backend of the decentralized schemes and of auto's fallback: gloo (CPU, TCP) or nccl (GPU builds).");
ABSL_FLAG(std::string, collective_host, "127.0.0.1",
          "Address this worker's collective endpoint listens on and its peers reach it at (gloo).");
ABSL_FLAG(int, collective_device, 0, "CUDA device of this worker (nccl).");
ABSL_FLAG(int, collective_timeout_s, 120,
          "Limit of the collectives' rendezvous and of each collective operation, seconds.");
ABSL_FLAG(int, probe_every, 20,
          "auto: steps on the decentralized route between health probes of the servers.");
ABSL_FLAG(std::string, fusion, "optimal",
          "Fusion planner mode: optimal, omgs, mergecomp (its two-group search on the planning model), per_layer, single, or a number N of equal groups.");
ABSL_FLAG(int, epochs, 2, "Training epochs (>= 1).");
ABSL_FLAG(int, batch_size, 64, "Examples per worker per step (>= 1).");
ABSL_FLAG(double, learning_rate, 0.05, "SGD learning rate (> 0).");
ABSL_FLAG(double, momentum, 0.9,
          "SGD momentum (in [0, 1)): the optimizer's for the dense schemes; kept per group on the worker before "
          "compression (momentum correction) for the compressed ones; in sketch space for count_sketch "
          "method=fetchsgd.");
ABSL_FLAG(bool, error_feedback, true, "Keep what compression drops in a residual added to the next step.");
ABSL_FLAG(double, release_cap, 1.0,
          "With momentum correction (topk_allgather, sketch_ps, sketch_allreduce, auto; no second round): a "
          "worker releases at most this many times its group velocity's L2 norm per step, what dense momentum "
          "SGD would apply, times max(1, W/4) in a job of W workers (the update averages their releases); the "
          "rest stays in its residual. Stops the bursts of long-held residuals that make high compression "
          "diverge. 0: no cap. >= 0.");
ABSL_FLAG(uint64_t, seed, 1, "Seeds the model, the data order and the sketch hashes.");
ABSL_FLAG(int, train_examples, 0, "Training examples used, split over the workers (0: all 60000).");
ABSL_FLAG(int, test_examples, 0, "Test examples evaluated each epoch (0: all 10000).");
ABSL_FLAG(std::string, data_dir, "/usr/share/datasets/fashion-mnist",
          "Directory with the Fashion-MNIST IDX files (Debian package dataset-fashion-mnist).");
ABSL_FLAG(std::string, checkpoint_dir, "",
          "Directory for this worker's checkpoint (<dir>/<worker_id>.ckpt); resumed from if present. "
          "Empty: no checkpoints.");
ABSL_FLAG(int, checkpoint_every, 4,
          "Steps between checkpoints (1 to the job's finished_rounds_kept, so a resumed worker can "
          "replay the steps it lost).");
ABSL_FLAG(int, report_every, 50, "A progress line every this many steps (0: only per epoch).");
ABSL_FLAG(std::string, summary_json, "",
          "Write the JSON summary here too (it is always printed; also when the run diverged).");
ABSL_FLAG(int, eval_every, 0,
          "mlp and cnn: evaluate test accuracy on a fixed subset of the test set (its first --eval_examples "
          "examples) every this many steps and after the last one: the accuracy curve of the summary (step, "
          "elapsed seconds, accuracy, bytes sent so far). Not counted in step times; in the wall time. 0: no curve.");
ABSL_FLAG(int, eval_examples, 2000, "Test examples of the accuracy curve (>= 1; the first ones of the test set).");
ABSL_FLAG(std::string, trace_file, "",
          "Write a per-step timeline here (Chrome trace JSON: open in ui.perfetto.dev or chrome://tracing): "
          "the backward pass, and each group's compress, push or communicate, wait and decode.");
ABSL_FLAG(int, trace_steps, 50, "Steps the timeline covers, from the first one this process runs (>= 1).");
ABSL_FLAG(int, metrics_port, -1,
          "Serve Prometheus metrics (GET /metrics) on --metrics_host at this port; 0 picks a free one "
          "(printed at start); -1: none.");
ABSL_FLAG(std::string, metrics_host, "127.0.0.1", "Address the metrics endpoint listens on (0.0.0.0: all).");
ABSL_FLAG(std::string, token_file, "", "File with the job's bearer token.");
ABSL_FLAG(std::string, tls_ca, "", "CA certificates (PEM) to verify the servers; set: TLS.");
ABSL_FLAG(std::string, tls_cert, "", "Client certificate (PEM) for mutual TLS.");
ABSL_FLAG(std::string, tls_key, "", "Client private key (PEM) for mutual TLS.");
ABSL_FLAG(int, join_timeout_s, 120, "How long to wait for the job to assemble, seconds.");
ABSL_FLAG(int, push_timeout_s, 60, "Deadline of one push (a whole aggregation round), seconds.");
ABSL_FLAG(int, push_attempts, 5,
          "Attempts per push, the first included: a push is re-pushed after UNAVAILABLE (a shard down or "
          "restarting) and after the shard failed its round at the round deadline (a straggler).");
ABSL_FLAG(std::string, inject_faults, "",
          "Tests only: faults the centralized route injects into its own pushes, each retried like a real one, "
          "e.g. fail_before_send=0.05,drop_reply=0.05,delay=0.05:20ms,seed=1 (worker/rpc/transport_faults.h).");
ABSL_FLAG(int64_t, inject_nan_gradient_at_step, -1,
          "Tests only: mlp and cnn: in this step this worker's first gradient of the backward pass gets a NaN, as "
          "if its backward pass had overflowed (the run then diverges; see the exit status). -1: never.");
ABSL_FLAG(int, threads, 1, "LibTorch intra-op threads.");
ABSL_FLAG(std::string, write_job_config, "",
          "Write the job configuration for this run to this file (JSON) and exit.");
ABSL_FLAG(int, round_deadline_ms, 60000, "With --write_job_config: the servers' round deadline.");
ABSL_FLAG(bool, print_route, false,
          "Print the route of --scheme (centralized, decentralized or hybrid) and exit (for launchers).");

namespace {

// The exit status of a worker whose run diverged (its own divergence, or one
// another worker announced); launchers tell it from a crash (2).
constexpr int kExitDiverged = 3;
// How often a worker looks for another worker's divergence notice.
constexpr absl::Duration kDivergencePoll = absl::Seconds(1);

int Fail(const absl::Status& status) {
  std::cerr << "sketchfuse_worker: error: " << status.message() << std::endl;
  return 2;
}


// The run the flags ask for (worker/training/run_request.h checks it).
absl::StatusOr<sketchfuse::v1::RunConfig> RunFromFlags() {
  sketchfuse::RunRequest request;
  request.world_size = absl::GetFlag(FLAGS_world_size);
  request.workload = absl::GetFlag(FLAGS_workload);
  request.scheme = absl::GetFlag(FLAGS_scheme);
  request.compressor = absl::GetFlag(FLAGS_compressor);
  request.second_round = absl::GetFlag(FLAGS_second_round);
  request.fusion = absl::GetFlag(FLAGS_fusion);
  request.seed = absl::GetFlag(FLAGS_seed);
  request.batch_size = absl::GetFlag(FLAGS_batch_size);
  request.learning_rate = absl::GetFlag(FLAGS_learning_rate);
  request.momentum = absl::GetFlag(FLAGS_momentum);
  request.error_feedback = absl::GetFlag(FLAGS_error_feedback);
  request.release_cap = absl::GetFlag(FLAGS_release_cap);
  request.epochs = absl::GetFlag(FLAGS_epochs);
  request.train_examples = absl::GetFlag(FLAGS_train_examples);
  request.test_examples = absl::GetFlag(FLAGS_test_examples);
  request.synthetic_steps = absl::GetFlag(FLAGS_synthetic_steps);
  request.backward_ns_per_element = absl::GetFlag(FLAGS_backward_ns_per_element);
  request.device = absl::GetFlag(FLAGS_device);
  return sketchfuse::BuildRunConfig(request);
}

sketchfuse::SummaryHeader HeaderOf(const std::string& worker_id, uint32_t rank,
                                   const sketchfuse::v1::RunConfig& run) {
  sketchfuse::SummaryHeader header;
  header.worker = worker_id;
  header.rank = rank;
  header.workload = run.workload();
  header.scheme = run.scheme();
  header.compressor = run.compressor();
  header.fusion = run.fusion();
  header.run = sketchfuse::RunFingerprint(run);
  return header;
}

// Prints the summary and writes it to --summary_json; false if it cannot be
// written.
bool WriteSummary(const std::string& json) {
  std::cout << "summary " << json << std::endl;
  if (absl::GetFlag(FLAGS_summary_json).empty()) return true;
  std::ofstream out(absl::GetFlag(FLAGS_summary_json));
  out << json << "\n";
  out.close();
  return static_cast<bool>(out);
}

}  // namespace

int main(int argc, char** argv) {
  sketchfuse::KeepFreedMemoryMapped();
  absl::SetProgramUsageMessage(absl::StrCat(
      "One worker of a SketchFuse job: trains a model on its shard of Fashion-MNIST and aggregates\n"
      "fused, compressed gradients through the job's servers or among the workers.\n"
      "Usage: sketchfuse_worker --coordinator=HOST:PORT --worker_id=ID --world_size=W [--scheme=sketch_ps]\n"
      "       sketchfuse_worker --write_job_config=job.json --world_size=W [run flags]\n"
      "Exit status: 0 done; 2 error; 3 the run diverged. A NaN or infinity in a step's loss, a group's fused\n"
      "gradient or its aggregated update stops the worker at that step; it announces the divergence through the\n"
      "coordinator, and every other worker of the job stops within about a second (at most its collective\n"
      "timeout or push deadline if the coordinator cannot be reached). Each writes its summary, whose\n"
      "\"diverged\" names the step, the group and the worker, and exits with 3.\n"
      "Schemes:\n",
      sketchfuse::SchemesHelp()));
  std::vector<char*> positional = absl::ParseCommandLine(argc, argv);
  if (positional.size() > 1) {
    return Fail(absl::InvalidArgumentError(absl::StrCat("unexpected argument '", positional[1], "' (see --help)")));
  }
  const int threads = absl::GetFlag(FLAGS_threads);
  if (threads < 1 || threads > 256) return Fail(absl::InvalidArgumentError("--threads must be in [1, 256]"));
  torch::set_num_threads(threads);

  if (absl::GetFlag(FLAGS_print_route)) {
    absl::StatusOr<sketchfuse::SchemeInfo> scheme = sketchfuse::FindScheme(absl::GetFlag(FLAGS_scheme));
    if (!scheme.ok()) return Fail(scheme.status());
    std::cout << sketchfuse::RouteName(scheme->route) << std::endl;
    return 0;
  }
  absl::StatusOr<sketchfuse::v1::RunConfig> run = RunFromFlags();
  if (!run.ok()) return Fail(run.status());

  if (!absl::GetFlag(FLAGS_write_job_config).empty()) {
    absl::StatusOr<sketchfuse::v1::JobConfig> job = sketchfuse::MakeJobConfig(
        absl::GetFlag(FLAGS_job), absl::GetFlag(FLAGS_world_size), *run, absl::GetFlag(FLAGS_round_deadline_ms));
    if (!job.ok()) return Fail(job.status());
    job->set_finished_rounds_kept(16);
    if (absl::Status s = sketchfuse::WriteJobConfig(*job, absl::GetFlag(FLAGS_write_job_config)); !s.ok()) {
      return Fail(s);
    }
    std::cout << "sketchfuse_worker: wrote job '" << job->job() << "' (" << job->groups_size() << " groups over "
              << run->layer_sizes_size() << " layers, run " << sketchfuse::RunFingerprint(*run) << ") to "
              << absl::GetFlag(FLAGS_write_job_config) << std::endl;
    for (const std::string& warning : sketchfuse::JobFitWarnings(*job)) {
      std::cerr << "sketchfuse_worker: warning: " << warning << std::endl;
    }
    return 0;
  }

  if (run->device() == "gpu") {
    if (absl::Status s = sketchfuse::CheckGpuWorker(); !s.ok()) return Fail(s);
  }
  const std::string worker_id = absl::GetFlag(FLAGS_worker_id);
  if (absl::GetFlag(FLAGS_coordinator).empty()) return Fail(absl::InvalidArgumentError("--coordinator is required"));
  if (worker_id.empty()) return Fail(absl::InvalidArgumentError("--worker_id is required"));
  const int join_s = absl::GetFlag(FLAGS_join_timeout_s), push_s = absl::GetFlag(FLAGS_push_timeout_s);
  const int attempts = absl::GetFlag(FLAGS_push_attempts), every = absl::GetFlag(FLAGS_checkpoint_every);
  const int collective_s = absl::GetFlag(FLAGS_collective_timeout_s), probe_every = absl::GetFlag(FLAGS_probe_every);
  const int metrics_port = absl::GetFlag(FLAGS_metrics_port);
  absl::StatusOr<sketchfuse::TransportFaults> faults =
      sketchfuse::ParseTransportFaults(absl::GetFlag(FLAGS_inject_faults));
  if (!faults.ok()) {
    return Fail(absl::InvalidArgumentError(absl::StrCat("--inject_faults: ", faults.status().message())));
  }
  if (metrics_port < -1 || metrics_port > 65535) {
    return Fail(absl::InvalidArgumentError(
        absl::StrCat("--metrics_port must be -1 (off) or in [0, 65535]; got ", metrics_port)));
  }
  if (absl::GetFlag(FLAGS_eval_every) < 0 || absl::GetFlag(FLAGS_eval_examples) < 1) {
    return Fail(absl::InvalidArgumentError(absl::StrCat("--eval_every must be >= 0 and --eval_examples >= 1; got ",
                                                        absl::GetFlag(FLAGS_eval_every), " and ",
                                                        absl::GetFlag(FLAGS_eval_examples))));
  }
  if (absl::GetFlag(FLAGS_trace_steps) < 1) {
    return Fail(absl::InvalidArgumentError(
        absl::StrCat("--trace_steps must be >= 1; got ", absl::GetFlag(FLAGS_trace_steps))));
  }
  if (join_s < 1 || push_s < 1 || attempts < 1 || collective_s < 1 || probe_every < 1) {
    return Fail(absl::InvalidArgumentError(
        "--join_timeout_s, --push_timeout_s, --push_attempts, --collective_timeout_s and --probe_every must be >= 1"));
  }
  sketchfuse::CollectiveConfig collective_config;
  collective_config.backend = absl::GetFlag(FLAGS_collective);
  collective_config.hostname = absl::GetFlag(FLAGS_collective_host);
  collective_config.device = absl::GetFlag(FLAGS_collective_device);
  collective_config.timeout = absl::Seconds(collective_s);
  if (collective_config.backend != "gloo" && collective_config.backend != "nccl") {
    return Fail(absl::InvalidArgumentError(absl::StrCat("--collective must be gloo or nccl; got '",
                                                        collective_config.backend, "'")));
  }
  if (collective_config.backend == "nccl" && !sketchfuse::NcclBackendBuilt()) {
    return Fail(absl::InvalidArgumentError("--collective=nccl: this build has no NCCL (CPU-only build); use gloo"));
  }
  if (collective_config.hostname.empty()) return Fail(absl::InvalidArgumentError("--collective_host is empty"));
  absl::StatusOr<sketchfuse::RpcChannelOptions> channel = sketchfuse::LoadRpcChannelOptions(
      absl::GetFlag(FLAGS_token_file), absl::GetFlag(FLAGS_tls_ca), absl::GetFlag(FLAGS_tls_cert),
      absl::GetFlag(FLAGS_tls_key));
  if (!channel.ok()) return Fail(channel.status());

  std::unique_ptr<sketchfuse::MetricsEndpoint> metrics_endpoint;
  std::unique_ptr<sketchfuse::WorkerMetrics> metrics;
  if (metrics_port >= 0) {
    absl::StatusOr<std::unique_ptr<sketchfuse::MetricsEndpoint>> endpoint =
        sketchfuse::MetricsEndpoint::Start(absl::GetFlag(FLAGS_metrics_host), metrics_port);
    if (!endpoint.ok()) return Fail(endpoint.status());
    metrics_endpoint = *std::move(endpoint);
    metrics = std::make_unique<sketchfuse::WorkerMetrics>(metrics_endpoint->registry());
    std::cout << "sketchfuse_worker: " << worker_id << " serves metrics on " << absl::GetFlag(FLAGS_metrics_host)
              << ":" << metrics_endpoint->port() << std::endl;
  }

  sketchfuse::CoordinatorClient coordinator(absl::GetFlag(FLAGS_coordinator), absl::GetFlag(FLAGS_job), worker_id,
                                            *channel);
  absl::StatusOr<sketchfuse::v1::JoinReply> joined = coordinator.Join(*run, absl::Seconds(join_s));
  if (!joined.ok()) return Fail(joined.status());
  coordinator.StartHeartbeats(absl::Seconds(2));
  const uint32_t kept = joined->job().finished_rounds_kept() > 0 ? joined->job().finished_rounds_kept() : 4;
  if (!absl::GetFlag(FLAGS_checkpoint_dir).empty() && (every < 1 || static_cast<uint32_t>(every) > kept)) {
    return Fail(absl::InvalidArgumentError(absl::StrCat(
        "--checkpoint_every must be in [1, ", kept, "] (the servers keep ", kept,
        " finished rounds for a resumed worker to replay); got ", every)));
  }
  std::cout << "sketchfuse_worker: " << worker_id << " joined job '" << joined->job().job() << "' as rank "
            << joined->rank() << " of " << joined->world_size() << " (" << joined->job().groups_size()
            << " groups, " << joined->shards_size() << " shards, run " << joined->fingerprint() << ")" << std::endl;

  const std::vector<std::string> fit_warnings = sketchfuse::JobFitWarnings(joined->job());
  for (const std::string& warning : fit_warnings) {
    std::cerr << "sketchfuse_worker: " << worker_id << " warning: " << warning << std::endl;
  }

  sketchfuse::RetryPolicy policy;
  policy.push_deadline = absl::Seconds(push_s);
  policy.max_attempts = attempts;
  policy.inject = *faults;
  // The decentralized route: every worker joins the collective group at
  // start-up (auto's fallback is then always ready).
  std::unique_ptr<sketchfuse::Collective> collective;
  if (sketchfuse::NeedsCollective(run->scheme())) {
    collective_config.prefix = absl::StrCat("collective/", joined->fingerprint());
    absl::StatusOr<std::unique_ptr<sketchfuse::Collective>> made = sketchfuse::MakeCollective(
        collective_config, coordinator, static_cast<int>(joined->rank()), static_cast<int>(joined->world_size()));
    if (!made.ok()) return Fail(made.status());
    collective = *std::move(made);
    std::cout << "sketchfuse_worker: " << worker_id << " joined the " << collective->backend()
              << " collective group as rank " << collective->rank() << " of " << collective->size() << std::endl;
  }
  sketchfuse::SchemeEnvironment environment;
  environment.rpc = *channel;
  environment.retry = policy;
  environment.collective = collective.get();
  environment.hybrid.probe_every = probe_every;
  environment.hybrid.log = [worker_id](const std::string& line) { std::cout << worker_id << " " << line << std::endl; };
  absl::StatusOr<sketchfuse::BuiltScheme> built = sketchfuse::MakeScheme(*joined, std::move(environment));
  if (!built.ok()) return Fail(built.status());
  std::unique_ptr<sketchfuse::AggregationScheme> scheme = std::move(built->scheme);
  const sketchfuse::PsTransport* transport = built->transport;  // the centralized route's, for the fault report

  // A divergence anywhere stops the whole job: the worker that sees it posts
  // this run's notice; every worker watches for it (below) and, when a step
  // fails because a peer left, asks whether that peer diverged.
  sketchfuse::DivergenceNotice notice(&coordinator, absl::StrCat("diverged/", joined->fingerprint()));
  sketchfuse::TrainerConfig config;
  config.joined = *joined;
  config.worker_id = worker_id;
  config.eval_every = absl::GetFlag(FLAGS_eval_every);
  config.eval_examples = absl::GetFlag(FLAGS_eval_examples);
  config.posted_divergence = [&notice] { return notice.Check(); };
  config.inject_nan_gradient_at_step = absl::GetFlag(FLAGS_inject_nan_gradient_at_step);
  config.data_dir = absl::GetFlag(FLAGS_data_dir);
  if (!absl::GetFlag(FLAGS_checkpoint_dir).empty()) {
    config.checkpoint_path = absl::StrCat(absl::GetFlag(FLAGS_checkpoint_dir), "/", worker_id, ".ckpt");
    config.checkpoint_every = every;
  }
  config.report_every = absl::GetFlag(FLAGS_report_every);
  config.trace_path = absl::GetFlag(FLAGS_trace_file);
  config.trace_steps = absl::GetFlag(FLAGS_trace_steps);
  if (metrics != nullptr) {
    sketchfuse::WorkerMetrics* observer = metrics.get();
    config.on_step = [observer](const sketchfuse::StepReport& step) { observer->OnStep(step); };
  }
  // The workload: real training, or a synthetic profile's throughput run.
  std::function<absl::StatusOr<sketchfuse::TrainingSummary>(const std::function<void(const sketchfuse::Progress&)>&)>
      run_workload;
  std::unique_ptr<sketchfuse::Trainer> trainer;
  std::unique_ptr<sketchfuse::SyntheticRunner> synthetic;
  if (sketchfuse::IsSyntheticWorkload(run->workload())) {
    sketchfuse::SyntheticConfig synthetic_config;
    synthetic_config.joined = *joined;
    synthetic_config.report_every = config.report_every;
    synthetic_config.trace_path = config.trace_path;
    synthetic_config.trace_steps = config.trace_steps;
    synthetic_config.on_step = config.on_step;
    absl::StatusOr<std::unique_ptr<sketchfuse::SyntheticRunner>> created =
        sketchfuse::SyntheticRunner::Create(synthetic_config, scheme.get());
    if (!created.ok()) return Fail(created.status());
    synthetic = *std::move(created);
    run_workload = [&](const auto& progress) { return synthetic->Run(progress); };
  } else {
    absl::StatusOr<std::unique_ptr<sketchfuse::Trainer>> created = sketchfuse::Trainer::Create(config, scheme.get());
    if (!created.ok()) return Fail(created.status());
    trainer = *std::move(created);
    run_workload = [&](const auto& progress) { return trainer->Run(progress); };
  }

  // Another worker's divergence stops this one's training at its current
  // step, without waiting for exchanges that wait on the worker that left.
  // Declared after the trainer, so it ends before the trainer is destroyed.
  std::unique_ptr<sketchfuse::DivergenceNotice> watch;
  if (trainer != nullptr) {
    watch = std::make_unique<sketchfuse::DivergenceNotice>(&coordinator,
                                                           absl::StrCat("diverged/", joined->fingerprint()));
    sketchfuse::Trainer* stoppable = trainer.get();
    watch->Watch(kDivergencePoll, [stoppable, worker_id](const sketchfuse::Divergence& d) {
      if (d.worker == worker_id) return;  // its own, posted as it stops
      std::cerr << "sketchfuse_worker: " << worker_id << " stops: " << d.Describe() << std::endl;
      stoppable->Abort(sketchfuse::DivergenceError(d));
    });
  }
  const int64_t total = static_cast<int64_t>(run->steps_per_epoch()) * run->epochs();
  absl::StatusOr<sketchfuse::TrainingSummary> summary = run_workload([&](const sketchfuse::Progress& p) {
    std::string line = absl::StrFormat(
        "%s epoch %d step %d/%d loss %.4f step %.1f ms sent %.1f KiB/step ratio %.1fx", worker_id, p.epoch, p.step,
        total, p.train_loss, 1e3 * p.step_seconds, p.bytes_sent_per_step / 1024.0, p.compression_ratio);
    if (p.end_of_epoch && p.test_accuracy >= 0) {
      absl::StrAppend(&line, absl::StrFormat(" test accuracy %.2f%%", 100 * p.test_accuracy));
    }
    std::cout << line << std::endl;
    if (metrics != nullptr) metrics->OnProgress(p);
  });
  watch.reset();
  if (!summary.ok()) return Fail(summary.status());
  summary->warnings.insert(summary->warnings.begin(), fit_warnings.begin(), fit_warnings.end());
  for (size_t i = fit_warnings.size(); i < summary->warnings.size(); ++i) {
    std::cerr << "sketchfuse_worker: " << worker_id << " warning: " << summary->warnings[i] << std::endl;
  }
  if (summary->diverged.has_value()) {
    // Announce it first (the others stop sooner), then the summary; then exit
    // at once: exchanges of the last step may still wait on a worker that
    // left, and destroying the pipeline and the transport would wait for
    // them up to their deadlines.
    const sketchfuse::Divergence& d = *summary->diverged;
    if (d.worker == worker_id) {
      if (absl::Status posted = notice.Post(d); !posted.ok()) {
        std::cerr << "sketchfuse_worker: " << worker_id << " could not announce its divergence to the job: "
                  << posted.message() << std::endl;
      }
    }
    std::cerr << "sketchfuse_worker: " << worker_id << " stopped: " << d.Describe() << std::endl;
    if (!WriteSummary(SummaryJson(HeaderOf(worker_id, joined->rank(), *run), *summary))) {
      std::cerr << "sketchfuse_worker: error: cannot write --summary_json" << std::endl;
    }
    std::cout.flush();
    std::cerr.flush();
    std::fflush(nullptr);
    std::_Exit(kExitDiverged);
  }
  if (transport != nullptr && (policy.inject.any() || transport->retries() > 0)) {
    std::cout << "sketchfuse_worker: " << worker_id << " injected " << transport->injected_faults()
              << " transport faults; " << transport->retries() << " push attempts retried" << std::endl;
  }
  if (const absl::Status refusal = coordinator.rejoin_refusal(); !refusal.ok()) {
    std::cout << "sketchfuse_worker: " << worker_id << " could not join the restarted coordinator again: "
              << refusal.message() << std::endl;
  } else if (coordinator.rejoins() > 0) {
    std::cout << "sketchfuse_worker: " << worker_id << " joined the restarted coordinator again ("
              << coordinator.rejoins() << " times)" << std::endl;
  }
  if (!WriteSummary(SummaryJson(HeaderOf(worker_id, joined->rank(), *run), *summary))) {
    return Fail(absl::PermissionDeniedError("cannot write --summary_json"));
  }
  return 0;
}
