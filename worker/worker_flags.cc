#include "worker/worker_flags.h"

#include <algorithm>
#include <cstdint>
#include <iostream>
#include <limits>
#include <string>
#include <utility>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/error_text.h"
#include "common/partitioning.h"
#include "absl/time/time.h"
#include "proto/rpc_channel.h"
#include "worker/rpc/transport_faults.h"
#include "worker/training/run_request.h"

ABSL_FLAG(std::string, coordinator, "", "host:port of the job's coordinator (the shard started with --coordinator).");
ABSL_FLAG(std::string, job, "sketchfuse", "Name of the job; every process of a job uses the same.");
ABSL_FLAG(std::string, worker_id, "",
          "This worker's stable name (letters, digits, '-', '_', '.'). Ranks follow the ids in natural order; a "
          "restarted worker joins under the same id and gets its rank back.");
ABSL_FLAG(int, world_size, 0, "Number of workers in the job (>= 1).");
ABSL_FLAG(std::string, workload, "mlp",
          "mlp or cnn: train that model on Fashion-MNIST (LibTorch). resnet50, vgg16, bert_base or gpt2_small: a "
          "throughput run on that model's synthetic profile (real layer sizes, heavy-tailed gradients, a modelled "
          "backward time; no accuracy).");
ABSL_FLAG(int, synthetic_steps, 20, "Synthetic workloads: steps per epoch (>= 1).");
ABSL_FLAG(double, backward_ns_per_element, 2.0,
          "Synthetic workloads: modelled backward time per gradient element, ns (each layer adds 20 us).");
ABSL_FLAG(std::string, device, "auto",
          "Where every worker of the job keeps fused gradients and compresses them: cpu; gpu (device buffers and the "
          "CUDA kernels; synthetic workloads with sketch_ps, sketch_allreduce or auto; needs a GPU); or auto: gpu "
          "where a GPU is present and the run can use it, else cpu (workers must resolve it alike).");
ABSL_FLAG(std::string, scheme, "sketch_ps",
          "Aggregation scheme: one of the registry's, listed above (--list_schemes=json prints them with their "
          "routes, default compressors and traits).");
ABSL_FLAG(std::string, compressor, "",
          "Compressor spec of the scheme's compressor, e.g. count_sketch:method=peel,density=0.00625,rows=4 "
          "(sketch_ps' default: 10x at 4 workers; the table is sized for the job's workers, so its bytes grow with "
          "them; width=, cols= or workers= fix it, and a shape too small for the job is warned about at join with "
          "its expected recovery) or topk:density=0.01. Empty: the scheme's default.");
ABSL_FLAG(bool, second_round, false,
          "sketch_ps and sketch_allreduce: a second round (a push to the servers, or an allreduce) replaces the "
          "decoded estimates by the workers' exact sums at the chosen coordinates (Sketched-SGD).");
ABSL_FLAG(std::string, collective, "gloo",
          "Backend of the decentralized schemes and of auto's fallback: gloo (CPU, TCP) or nccl (GPU builds).");
ABSL_FLAG(std::string, collective_host, "127.0.0.1",
          "Address this worker's collective endpoint listens on and its peers reach it at (gloo).");
ABSL_FLAG(int, collective_device, 0, "CUDA device of this worker (nccl).");
ABSL_FLAG(int, collective_timeout_s, 120,
          "Limit of the collectives' rendezvous and of each operation, seconds; with --virtual_workers also the "
          "in-process shards' round deadline.");
ABSL_FLAG(int, probe_every, 20, "auto: steps on the decentralized route between health probes of the servers.");
ABSL_FLAG(std::string, fusion, "optimal",
          "Fusion planner mode: optimal, omgs, mergecomp (its two-group search on the planning model), per_layer, "
          "single, or a number N of equal groups.");
ABSL_FLAG(std::string, partition_elements, "",
          "Cut each fused group into partitions of at most this many elements (equal parts), each compressed, "
          "pushed, merged and decoded as a unit of its own, so the shards share a model of few groups "
          "(common/partitioning.h). 0: no cut. Empty: the job's, which --write_job_config sets by default for "
          "--num_shards shards (two partitions per shard, more where the groups are too unequal to load every "
          "shard within 10% of the mean; none for one shard, a decentralized scheme or the fixed-size candidates "
          "sketch, whose selection suffers from the cut: docs/ARCHITECTURE.md, \"Partitions\").");
ABSL_FLAG(int, num_shards, 1,
          "With --write_job_config: the aggregation shards the job runs on; the default partitions follow it "
          "(>= 1).");
ABSL_FLAG(int, epochs, 2, "Training epochs (>= 1).");
ABSL_FLAG(int, batch_size, 64, "Examples per worker per step (>= 1).");
ABSL_FLAG(double, learning_rate, 0.05, "The optimizer's learning rate (> 0; the peak of a schedule).");
ABSL_FLAG(int, lr_base_workers, 0,
          "Linear scaling of the learning rate: --learning_rate is the rate at this many workers; with W workers "
          "the rate is --learning_rate * W / this, reached linearly over --lr_warmup_steps steps (Goyal et al.). "
          "0: --learning_rate at any W.");
ABSL_FLAG(int, lr_warmup_steps, 0,
          "With --lr_base_workers: steps over which the rate rises to its scaled value; with --lr_schedule=cosine: "
          "the warm-up's steps.");
ABSL_FLAG(bool, residual_in_rate_units, true,
          "Compressed schemes with error feedback: keep the residual in units of the current learning rate "
          "(rescaled by r / r' when the rate goes from r to r', as EF-SGD), so what waited through the warm-up is "
          "applied at its own steps' rate; false: raw gradients, applied at the releasing step's rate (the earlier "
          "rule). No effect at a constant rate or without error feedback. Measured: bench/results/scale_study.");
ABSL_FLAG(std::string, momentum, "",
          "SGD momentum (in [0, 1)): the optimizer's for the dense schemes; kept per group on the worker before "
          "compression (momentum correction) for the compressed ones; in sketch space for count_sketch "
          "method=fetchsgd. Empty: 0.9 with --optimizer=sgd, 0 with adam or adamw (which keep their own first "
          "moment; a momentum above 0 is refused there).");
ABSL_FLAG(std::string, optimizer, "sgd",
          "sgd, adam or adamw, with parameters as adamw:beta1=0.9,beta2=0.95,eps=1e-8,weight_decay=0.1 (defaults: "
          "betas 0.9 and 0.999, eps 1e-8, weight_decay 0 for adam (L2) and 0.01 for adamw (decoupled), as torch.optim). "
          "Adam-family optimizers step on the aggregated update, the same on every worker; a compressed scheme's "
          "error feedback then keeps raw gradients.");
ABSL_FLAG(std::string, lr_schedule, "constant",
          "constant: --learning_rate (linearly scaled with --lr_base_workers); cosine: warm up from "
          "peak/--lr_warmup_steps to the peak over --lr_warmup_steps steps, then a half cosine down to "
          "--lr_final_fraction of it at the last step.");
ABSL_FLAG(double, lr_final_fraction, 0.1, "--lr_schedule=cosine: the last step's rate as a share of the peak, in [0, 1].");
ABSL_FLAG(std::string, momentum_at, "",
          "Compressed schemes: where the momentum goes. worker (or empty): momentum correction before compression, "
          "the velocity masked where released (DGC); update: global momentum, error feedback on the raw gradients "
          "and the momentum applied to the aggregated update, the same on every worker (no cap then: "
          "--release_cap is a multiple of the worker's velocity). Measured 2.1 to 2.5 points worse than worker on "
          "mlp_large at 64 workers and 10x. With --optimizer=adam|adamw: worker (or empty) keeps Adam's moments on "
          "each worker and compresses Adam's direction (the schemes with momentum correction; adam with an L2 "
          "weight decay keeps Adam on the update, and refuses worker: use adamw); update: Adam on the aggregated "
          "update.");
ABSL_FLAG(bool, error_feedback, true, "Keep what compression drops in a residual added to the next step.");
ABSL_FLAG(double, release_cap, 1.0,
          "With momentum correction (topk_allgather, sketch_ps, sketch_allreduce, auto without --second_round; the "
          "fixed_sketch schemes' second round): a worker releases at most this many times its group velocity's L2 "
          "norm per step, times max(1, W/4) with W workers (and times 2 for the fixed_sketch schemes); the rest stays "
          "in its residual. Stops the bursts that make high compression diverge. 0: no cap. >= 0.");
ABSL_FLAG(uint64_t, seed, 1, "Seeds the model, the data order and the sketch hashes.");
ABSL_FLAG(int, train_examples, 0, "Training examples used, split over the workers (0: all 60000).");
ABSL_FLAG(int, test_examples, 0, "Test examples evaluated each epoch (0: all 10000).");
ABSL_FLAG(std::string, data_dir, "/usr/share/datasets/fashion-mnist", "Fashion-MNIST's IDX files (Debian's).");
ABSL_FLAG(std::string, corpus_dir, "/usr/share/games/fortunes",
          "The char_lm workload's text corpus: Debian's fortunes files (package fortunes), read in a fixed order.");
ABSL_FLAG(std::string, checkpoint_dir, "",
          "Directory for this worker's checkpoint (<dir>/<worker_id>.ckpt), resumed from if present. Empty: none.");
ABSL_FLAG(int, checkpoint_every, 4,
          "Steps between checkpoints (1 to the job's finished_rounds_kept: a resumed worker replays the steps lost).");
ABSL_FLAG(int, report_every, 50, "A progress line every this many steps (0: only per epoch).");
ABSL_FLAG(std::string, summary_json, "", "Write the JSON summary here too (always printed; also when diverged).");
ABSL_FLAG(int, eval_every, 0,
          "mlp and cnn: evaluate test accuracy on a fixed subset of the test set (its first --eval_examples "
          "examples) every this many steps and after the last one: the accuracy curve of the summary (step, elapsed "
          "seconds, accuracy, bytes sent so far). Not counted in step times; in the wall time. 0: no curve.");
ABSL_FLAG(int, eval_examples, 2000, "Test examples of the accuracy curve (>= 1; the first ones of the test set).");
ABSL_FLAG(std::string, trace_file, "",
          "Write a per-step timeline here (Chrome trace JSON: open in ui.perfetto.dev or chrome://tracing): the "
          "backward pass, and each group's compress, push or communicate, wait and decode.");
ABSL_FLAG(int, trace_steps, 50, "Steps the timeline covers, from the first one this process runs (>= 1).");
ABSL_FLAG(int, metrics_port, -1,
          "Serve Prometheus metrics (GET /metrics) on --metrics_host at this port; 0: a free one (printed); -1: none.");
ABSL_FLAG(std::string, metrics_host, "127.0.0.1", "Address the metrics endpoint listens on (0.0.0.0: all).");
ABSL_FLAG(std::string, token_file, "", "File with the job's bearer token.");
ABSL_FLAG(std::string, join_credential_file, "",
          "File with this worker's join credential (sketchfuse_server --print_join_credential=<its --worker_id>), "
          "which a coordinator started with --require_join_credentials asks of every Join. Empty: none.");
ABSL_FLAG(std::string, tls_ca, "", "CA certificates (PEM) to verify the servers; set: TLS.");
ABSL_FLAG(std::string, tls_cert, "", "Client certificate (PEM) for mutual TLS.");
ABSL_FLAG(std::string, tls_key, "", "Client private key (PEM) for mutual TLS.");
ABSL_FLAG(int, join_timeout_s, 120, "How long to wait for the job to assemble, seconds.");
ABSL_FLAG(int, push_timeout_s, 60, "Deadline of one push (a whole aggregation round), seconds.");
ABSL_FLAG(int, push_attempts, 5,
          "Attempts per push, the first included: a push is re-pushed after UNAVAILABLE (a shard down or restarting), "
          "backing off from 0.1 s doubling to 2 s. Re-pushes that wait for other workers are not counted: they go on "
          "until --push_timeout_s, after ABORTED (a round outside the shard's step window that another worker's push "
          "opens) and after the shard failed the round at its round deadline (a straggler; re-pushed 0.1 s later "
          "each time).");
ABSL_FLAG(std::string, inject_faults, "",
          "Tests only: faults the centralized route injects into its own pushes, each retried like a real one, e.g. "
          "fail_before_send=0.05,drop_reply=0.05,delay=0.05:20ms,seed=1 (worker/rpc/transport_faults.h).");
ABSL_FLAG(int64_t, inject_nan_gradient_at_step, -1,
          "Tests only: mlp and cnn: in this step this worker's first gradient of the backward pass gets a NaN, as if "
          "its backward pass had overflowed (the run then diverges; see the exit status). -1: never.");
ABSL_FLAG(int, threads, 1, "LibTorch intra-op threads.");
ABSL_FLAG(std::string, write_job_config, "", "Write the job configuration for this run to this file (JSON) and exit.");
ABSL_FLAG(int, round_deadline_ms, 60000, "With --write_job_config: the servers' round deadline.");
ABSL_FLAG(int, virtual_workers, 0,
          "Run the whole job in this process as this many workers (mlp or cnn on the CPU; no coordinator): each "
          "its own data and compressor state over one model, the collectives and shards in process, bytes counted "
          "as on the wire (worker/virtual/virtual_workers.h). Sets --world_size. 0: this process is one worker.");
ABSL_FLAG(int, inject_nan_gradient_worker, 0,
          "Tests only: with --virtual_workers and --inject_nan_gradient_at_step, the virtual worker whose gradient "
          "gets the NaN.");
ABSL_FLAG(int, virtual_shards, 1, "With --virtual_workers: the in-process shards of the centralized route.");
ABSL_FLAG(std::string, list_schemes, "",
          "json: print every scheme of the registry (name, route, compressor, default compressor spec, whether it "
          "compresses, traits) as a JSON array and exit; text: one 'name: summary' line each. For launchers and "
          "benchmarks, which take the schemes from here rather than from lists of their own.");
ABSL_FLAG(bool, print_route, false,
          "Print the route of --scheme (centralized, decentralized or hybrid) and exit (for launchers).");

namespace sketchfuse {

absl::StatusOr<v1::RunConfig> RunFromFlags() {
  RunRequest request;
  request.world_size = absl::GetFlag(FLAGS_world_size);
  if (const int virtual_workers = absl::GetFlag(FLAGS_virtual_workers); virtual_workers < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--virtual_workers must be >= 0 (0: this process is one worker); got ", virtual_workers));
  } else if (virtual_workers != 0) {
    if (request.world_size != 0 && request.world_size != virtual_workers) {
      return absl::InvalidArgumentError(absl::StrCat("--world_size=", request.world_size,
                                                     " differs from --virtual_workers=", virtual_workers));
    }
    request.world_size = virtual_workers;
  }
  request.workload = absl::GetFlag(FLAGS_workload);
  request.scheme = absl::GetFlag(FLAGS_scheme);
  request.compressor = absl::GetFlag(FLAGS_compressor);
  request.second_round = absl::GetFlag(FLAGS_second_round);
  request.fusion = absl::GetFlag(FLAGS_fusion);
  if (const std::string bound = absl::GetFlag(FLAGS_partition_elements); !bound.empty()) {
    uint64_t elements = 0;
    if (!ParsePartitionElements(bound, &elements)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--partition_elements must be empty (the job's), 0 (no cut) or a number of elements; got ",
                       QuoteField(bound)));
    }
    request.partition_elements = elements;
  }
  request.seed = absl::GetFlag(FLAGS_seed);
  request.batch_size = absl::GetFlag(FLAGS_batch_size);
  request.learning_rate = absl::GetFlag(FLAGS_learning_rate);
  request.lr_base_workers = absl::GetFlag(FLAGS_lr_base_workers);
  request.lr_warmup_steps = absl::GetFlag(FLAGS_lr_warmup_steps);
  request.residual_in_rate_units = absl::GetFlag(FLAGS_residual_in_rate_units);
  if (const std::string momentum = absl::GetFlag(FLAGS_momentum); !momentum.empty()) {
    double value = 0;
    if (!absl::SimpleAtod(momentum, &value)) {
      return absl::InvalidArgumentError(absl::StrCat("--momentum must be a number in [0, 1) or empty; got ",
                                                     QuoteField(momentum)));
    }
    request.momentum = value;
  }
  request.optimizer = absl::GetFlag(FLAGS_optimizer);
  request.lr_schedule = absl::GetFlag(FLAGS_lr_schedule);
  request.lr_final_fraction = absl::GetFlag(FLAGS_lr_final_fraction);
  request.corpus_dir = absl::GetFlag(FLAGS_corpus_dir);
  request.momentum_at = absl::GetFlag(FLAGS_momentum_at);
  request.error_feedback = absl::GetFlag(FLAGS_error_feedback);
  request.release_cap = absl::GetFlag(FLAGS_release_cap);
  request.epochs = absl::GetFlag(FLAGS_epochs);
  request.train_examples = absl::GetFlag(FLAGS_train_examples);
  request.test_examples = absl::GetFlag(FLAGS_test_examples);
  request.synthetic_steps = absl::GetFlag(FLAGS_synthetic_steps);
  request.backward_ns_per_element = absl::GetFlag(FLAGS_backward_ns_per_element);
  request.device = absl::GetFlag(FLAGS_device);
  return BuildRunConfig(request);
}

absl::StatusOr<WorkerRunConfig> WorkerRunConfigFromFlags(const v1::RunConfig& run) {
  WorkerRunConfig config;
  config.run = run;
  config.coordinator = absl::GetFlag(FLAGS_coordinator);
  config.job = absl::GetFlag(FLAGS_job);
  config.worker_id = absl::GetFlag(FLAGS_worker_id);
  config.probe_every = absl::GetFlag(FLAGS_probe_every);
  absl::StatusOr<TransportFaults> faults =
      ParseTransportFaults(absl::GetFlag(FLAGS_inject_faults));
  if (!faults.ok()) return absl::InvalidArgumentError(absl::StrCat("--inject_faults: ", faults.status().message()));
  config.metrics_port = absl::GetFlag(FLAGS_metrics_port);
  config.metrics_host = absl::GetFlag(FLAGS_metrics_host);
  config.eval_every = absl::GetFlag(FLAGS_eval_every);
  config.eval_examples = absl::GetFlag(FLAGS_eval_examples);
  config.trace_steps = absl::GetFlag(FLAGS_trace_steps);
  config.collective.backend = absl::GetFlag(FLAGS_collective);
  config.collective.hostname = absl::GetFlag(FLAGS_collective_host);
  config.collective.device = absl::GetFlag(FLAGS_collective_device);
  config.collective.timeout = absl::Seconds(absl::GetFlag(FLAGS_collective_timeout_s));
  absl::StatusOr<RpcChannelOptions> channel = LoadRpcChannelOptions(
      absl::GetFlag(FLAGS_token_file), absl::GetFlag(FLAGS_tls_ca), absl::GetFlag(FLAGS_tls_cert),
      absl::GetFlag(FLAGS_tls_key));
  if (!channel.ok()) return channel.status();
  config.channel = *channel;
  if (const std::string path = absl::GetFlag(FLAGS_join_credential_file); !path.empty()) {
    absl::StatusOr<std::string> credential = ReadJoinCredential(path);
    if (!credential.ok()) return credential.status();
    config.channel.join_credential = *credential;
  }
  config.join_timeout = absl::Seconds(absl::GetFlag(FLAGS_join_timeout_s));
  config.retry.push_deadline = absl::Seconds(absl::GetFlag(FLAGS_push_timeout_s));
  config.retry.max_attempts = absl::GetFlag(FLAGS_push_attempts);
  config.retry.inject = *faults;
  config.inject_nan_gradient_at_step = absl::GetFlag(FLAGS_inject_nan_gradient_at_step);
  config.data_dir = absl::GetFlag(FLAGS_data_dir);
  config.corpus_dir = absl::GetFlag(FLAGS_corpus_dir);
  config.checkpoint_dir = absl::GetFlag(FLAGS_checkpoint_dir);
  config.checkpoint_every = absl::GetFlag(FLAGS_checkpoint_every);
  config.report_every = absl::GetFlag(FLAGS_report_every);
  config.trace_path = absl::GetFlag(FLAGS_trace_file);
  config.log = [](const std::string& line) { std::cout << "sketchfuse_worker: " << line << std::endl; };
  config.warn = [](const std::string& line) { std::cerr << "sketchfuse_worker: " << line << std::endl; };
  if (absl::Status s = CheckWorkerRunConfig(config); !s.ok()) return s;
  return config;
}

absl::StatusOr<VirtualWorkersConfig> VirtualWorkersConfigFromFlags(const v1::RunConfig& run) {
  const std::pair<const char*, bool> process_flags[] = {
      {"--coordinator", !absl::GetFlag(FLAGS_coordinator).empty()},
      {"--checkpoint_dir", !absl::GetFlag(FLAGS_checkpoint_dir).empty()},
      {"--trace_file", !absl::GetFlag(FLAGS_trace_file).empty()},
      {"--metrics_port", absl::GetFlag(FLAGS_metrics_port) != -1},
      {"--inject_faults", !absl::GetFlag(FLAGS_inject_faults).empty()}};
  for (const auto& [flag, set] : process_flags) {
    if (set) {
      return absl::InvalidArgumentError(
          absl::StrCat("--virtual_workers runs the whole job in this process; ", flag, " does not apply to it"));
    }
  }
  VirtualWorkersConfig config;
  config.run = run;
  config.workers = static_cast<uint32_t>(absl::GetFlag(FLAGS_virtual_workers));
  config.shards = absl::GetFlag(FLAGS_virtual_shards);
  config.job = absl::GetFlag(FLAGS_job);
  config.collective_timeout = absl::Seconds(absl::GetFlag(FLAGS_collective_timeout_s));
  if (config.collective_timeout < absl::Seconds(1)) {
    return absl::InvalidArgumentError("--collective_timeout_s must be >= 1");
  }
  // The in-process shards stand for the servers and their rounds for the
  // collectives: a round waits for W pushes made one after another in this
  // process, so it gets the collectives' limit. The servers' default (a
  // minute) is shorter than one step of 256 workers of mlp_large on a loaded
  // 2-core machine, where it failed a scale-study run at step 0.
  config.round_deadline_ms = static_cast<uint32_t>(
      std::min<int64_t>(absl::ToInt64Milliseconds(config.collective_timeout), std::numeric_limits<uint32_t>::max()));
  config.data_dir = absl::GetFlag(FLAGS_data_dir);
  config.corpus_dir = absl::GetFlag(FLAGS_corpus_dir);
  config.eval_every = absl::GetFlag(FLAGS_eval_every);
  config.eval_examples = absl::GetFlag(FLAGS_eval_examples);
  config.report_every = absl::GetFlag(FLAGS_report_every);
  config.inject_nan_gradient_at_step = absl::GetFlag(FLAGS_inject_nan_gradient_at_step);
  const int nan_worker = absl::GetFlag(FLAGS_inject_nan_gradient_worker);
  if (nan_worker < 0 || static_cast<uint32_t>(nan_worker) >= config.workers) {
    return absl::InvalidArgumentError(absl::StrCat("--inject_nan_gradient_worker must be a virtual worker in [0, ",
                                                   config.workers, "); got ", nan_worker));
  }
  config.inject_nan_gradient_worker = static_cast<uint32_t>(nan_worker);
  return config;
}

}  // namespace sketchfuse
