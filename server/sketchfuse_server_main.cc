// sketchfuse_server: one aggregation shard of a job.
//
//   sketchfuse_server --job_config=job.json --shard_index=0 --num_shards=2 --port=7070
//
// Serves v1.Aggregator (and grpc.health.v1, and server reflection) until
// SIGTERM or SIGINT. On those it fails the rounds still open with UNAVAILABLE
// (workers re-push or fall back), drains in-flight calls, and exits 0.
//
// The main parses flags into a ShardServerConfig and starts a ShardServer
// (server/shard_server.h: the journal under --state_dir, the coordinator,
// the registration with a remote one).
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "daemon/memory_tuning.h"
#include "daemon/metrics_endpoint.h"
#include "server/job_config.h"
#include "server/server_metrics.h"
#include "server/shard_credentials.h"
#include "server/shard_server.h"
#include "server/coordinator_core.h"
#include "server/worker_proof.h"

ABSL_FLAG(std::string, job_config, "",
          "Required. The job's aggregation configuration: a v1.JobConfig file in JSON (.json) "
          "or protobuf text format (job, world size, groups with their compressors).");
ABSL_FLAG(int, shard_index, 0, "This shard's index in [0, num_shards).");
ABSL_FLAG(int, num_shards, 1, "The job's aggregation shards; groups (partitions) are spread over them by size.");
ABSL_FLAG(std::string, host, "127.0.0.1", "Address to listen on (0.0.0.0 for all interfaces).");
ABSL_FLAG(int, port, 0, "Port to listen on; 0 picks a free one (see --port_file).");
ABSL_FLAG(std::string, port_file, "", "If set, the chosen port is written to this file once the server listens.");
ABSL_FLAG(std::string, token_file, "",
          "File holding the bearer token every RPC must carry ('authorization: Bearer <token>'). "
          "Empty: no token required.");
ABSL_FLAG(std::string, shard_token_file, "",
          "File holding the shard token: the coordinator takes RegisterShard only with it (and refuses the "
          "worker token there, as it refuses the shard token on the workers' RPCs); a shard sends it when it "
          "registers. Needs --token_file, and another token. Empty: the --token_file token serves both roles.");
ABSL_FLAG(std::vector<std::string>, shard_identities, {},
          "Under mutual TLS (--tls_client_ca): the certificate identities (subject alternative name, else "
          "common name) of the job's shards, comma-separated. Only they may call RegisterShard, and they may not "
          "call the workers' RPCs.");
ABSL_FLAG(std::string, tls_cert, "", "Server certificate chain (PEM). With --tls_key: TLS.");
ABSL_FLAG(std::string, tls_key, "", "Server private key (PEM).");
ABSL_FLAG(std::string, tls_client_ca, "",
          "CA certificates (PEM) for client certificates. Set: mutual TLS, clients must present "
          "a certificate signed by this CA.");
ABSL_FLAG(int, max_message_mb, 256, "Largest request or reply accepted, MiB (1 to 2047).");
ABSL_FLAG(bool, require_join_credentials, false,
          "With --coordinator and --shard_token_file: admit a Join only with its worker id's join credential, so "
          "that nobody joins under another worker's id (issue each worker its own with --print_join_credential).");
ABSL_FLAG(std::string, print_join_credential, "",
          "Print the join credential of this worker id for --job_config's job, derived from --shard_token_file, and "
          "exit: what a launcher hands each worker (sketchfuse_worker --join_credential_file) when the coordinator "
          "has --require_join_credentials.");
ABSL_FLAG(bool, coordinator, false,
          "Also serve the job's v1.Coordinator (joins, ranks, plan, key-value store, heartbeats). "
          "Exactly one shard of a job does; the job config then needs its 'run' section.");
ABSL_FLAG(std::string, coordinator_address, "",
          "host:port of the coordinator this shard registers its address with (shards without "
          "--coordinator). Empty with --coordinator: registers in-process.");
ABSL_FLAG(std::string, coordinator_ca, "",
          "CA certificates (PEM) to verify a TLS coordinator; this shard presents --tls_cert/--tls_key "
          "as its client certificate. Empty: plaintext to the coordinator.");
ABSL_FLAG(std::string, advertise_address, "",
          "host:port workers use to reach this shard. Default: --host (or this machine's hostname "
          "for 0.0.0.0) and the bound port.");
ABSL_FLAG(int, liveness_timeout_ms, 15000,
          "Coordinator: a worker silent this long is reported dead, ms (100 to 3600000).");
ABSL_FLAG(std::string, state_dir, "",
          "Directory where the shard records the answers of its finished rounds (the newest "
          "finished_rounds_kept per group, in <dir>/shard-<index>) before any worker sees them. A shard "
          "restarted with the same directory answers re-pushes of the rounds it finished before it died. "
          "Empty: answers are kept in memory only. Give each run a directory of its own.");
ABSL_FLAG(int, reaper_period_ms, 100, "How often overdue rounds are failed, ms (1 to 60000).");
ABSL_FLAG(int64_t, step_window, 64,
          "A push may open a round at most this many steps from its group's most recently finished one "
          "(each worker may hold one round per group past it, for a job resuming or returning ahead; "
          "a push whose worker's slot is taken parks until its round opens); 1 to 2^31.");
ABSL_FLAG(int64_t, max_open_rounds, 4096, "Open rounds past which no new round opens (RESOURCE_EXHAUSTED); 1 to 2^31.");
ABSL_FLAG(int64_t, max_held_mb, 1024,
          "Payload MiB held by open rounds past which no new round opens (RESOURCE_EXHAUSTED); 1 to 2^20.");
ABSL_FLAG(int, metrics_port, -1,
          "Serve Prometheus metrics (GET /metrics) on --host at this port; 0 picks a free one "
          "(see --metrics_port_file); -1: no metrics endpoint.");
ABSL_FLAG(std::string, metrics_port_file, "", "Write the metrics port to this file once serving.");

namespace {

// Writes `port` to `path` (nothing for an empty path), atomically.
absl::Status WritePortFile(const std::string& path, int port) {
  if (path.empty()) return absl::OkStatus();
  const std::string tmp = path + ".tmp";
  std::ofstream(tmp) << port << "\n";
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::InternalError(absl::StrCat("cannot write the port file '", path, "'"));
  }
  return absl::OkStatus();
}

// INVALID_ARGUMENT "--<flag> must be in <range>; got <value>" outside [lo, hi].
absl::Status InRange(const char* flag, int64_t value, int64_t lo, int64_t hi, const char* range = nullptr) {
  if (value >= lo && value <= hi) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("--", flag, " must be in ",
                                                 range != nullptr ? range : absl::StrCat("[", lo, ", ", hi, "]"),
                                                 "; got ", value));
}

int Fail(const absl::Status& status) {
  std::cerr << "sketchfuse_server: error: " << status.message() << "\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  sketchfuse::KeepFreedMemoryMapped();
  absl::SetProgramUsageMessage(
      "One aggregation shard of a SketchFuse job: sums the workers' payloads per (step, group)\n"
      "and answers each push with the decoded global update.\n"
      "Usage: sketchfuse_server --job_config=job.json [--shard_index=0 --num_shards=1 --port=0]");
  std::vector<char*> positional = absl::ParseCommandLine(argc, argv);
  if (positional.size() > 1) {
    return Fail(absl::InvalidArgumentError(
        absl::StrCat("unexpected argument '", positional[1], "' (see --help)")));
  }
  if (absl::GetFlag(FLAGS_job_config).empty()) {
    return Fail(absl::InvalidArgumentError("--job_config is required (see --help)"));
  }
  const int max_mb = absl::GetFlag(FLAGS_max_message_mb), reaper_ms = absl::GetFlag(FLAGS_reaper_period_ms);
  const int port = absl::GetFlag(FLAGS_port), liveness_ms = absl::GetFlag(FLAGS_liveness_timeout_ms);
  const int64_t step_window = absl::GetFlag(FLAGS_step_window), max_open_rounds = absl::GetFlag(FLAGS_max_open_rounds),
                max_held_mb = absl::GetFlag(FLAGS_max_held_mb);
  for (const absl::Status& s :
       {InRange("max_message_mb", max_mb, 1, 2047), InRange("reaper_period_ms", reaper_ms, 1, 60000),
        InRange("step_window", step_window, 1, int64_t{1} << 31, "[1, 2^31]"),
        InRange("max_open_rounds", max_open_rounds, 1, int64_t{1} << 31, "[1, 2^31]"),
        InRange("max_held_mb", max_held_mb, 1, int64_t{1} << 20, "[1, 2^20]"),
        InRange("liveness_timeout_ms", liveness_ms, 100, 3600000), InRange("port", port, 0, 65535)}) {
    if (!s.ok()) return Fail(s);
  }
  if (absl::GetFlag(FLAGS_coordinator) && !absl::GetFlag(FLAGS_coordinator_address).empty()) {
    return Fail(absl::InvalidArgumentError(
        "--coordinator and --coordinator_address exclude each other: a shard either serves the "
        "coordinator or registers with one"));
  }
  if (!absl::GetFlag(FLAGS_coordinator_ca).empty() && absl::GetFlag(FLAGS_coordinator_address).empty()) {
    return Fail(absl::InvalidArgumentError("--coordinator_ca needs --coordinator_address"));
  }

  absl::StatusOr<sketchfuse::v1::JobConfig> job = sketchfuse::ReadJobConfig(absl::GetFlag(FLAGS_job_config));
  if (!job.ok()) return Fail(job.status());
  sketchfuse::ShardServerConfig config;
  config.job = *std::move(job);
  config.shard_index = absl::GetFlag(FLAGS_shard_index);
  config.num_shards = absl::GetFlag(FLAGS_num_shards);
  config.host = absl::GetFlag(FLAGS_host);
  config.port = port;
  config.advertise_address = absl::GetFlag(FLAGS_advertise_address);
  config.max_message_mb = max_mb;
  config.serve_coordinator = absl::GetFlag(FLAGS_coordinator);
  config.require_join_credentials = absl::GetFlag(FLAGS_require_join_credentials);
  config.liveness_timeout = absl::Milliseconds(liveness_ms);
  config.coordinator_address = absl::GetFlag(FLAGS_coordinator_address);
  config.state_dir = absl::GetFlag(FLAGS_state_dir);
  config.reaper_period = absl::Milliseconds(reaper_ms);
  config.step_window = static_cast<uint64_t>(step_window);
  config.max_open_rounds = static_cast<uint64_t>(max_open_rounds);
  config.max_held_bytes = static_cast<uint64_t>(max_held_mb) << 20;
  sketchfuse::ShardCredentialFiles files;
  files.tls_cert = absl::GetFlag(FLAGS_tls_cert);
  files.tls_key = absl::GetFlag(FLAGS_tls_key);
  files.tls_client_ca = absl::GetFlag(FLAGS_tls_client_ca);
  files.token_file = absl::GetFlag(FLAGS_token_file);
  files.shard_token_file = absl::GetFlag(FLAGS_shard_token_file);
  files.coordinator_ca = absl::GetFlag(FLAGS_coordinator_ca);
  files.shard_identities = absl::GetFlag(FLAGS_shard_identities);
  // An operator's command: a worker's join credential, from the job and the
  // shard token alone.
  if (const std::string id = absl::GetFlag(FLAGS_print_join_credential); !id.empty()) {
    if (files.shard_token_file.empty()) {
      return Fail(absl::InvalidArgumentError("--print_join_credential needs --shard_token_file (the key it derives "
                                             "from)"));
    }
    absl::StatusOr<sketchfuse::RpcChannelOptions> shard = sketchfuse::LoadRpcChannelOptions(files.shard_token_file,
                                                                                             "", "", "");
    if (!shard.ok()) return Fail(shard.status());
    if (absl::Status valid = sketchfuse::CheckWorkerId(id); !valid.ok()) return Fail(valid);
    std::cout << sketchfuse::WorkerProofs(shard->token).JoinCredentialOf(config.job.job(), id) << std::endl;
    return 0;
  }
  if (absl::Status s = sketchfuse::LoadShardCredentials(files, &config); !s.ok()) return Fail(s);
  if (config.require_join_credentials && !config.serve_coordinator) {
    return Fail(absl::InvalidArgumentError("--require_join_credentials is for the shard that serves the coordinator "
                                           "(--coordinator)"));
  }
  if (config.require_join_credentials && config.auth.shard_token.empty()) {
    return Fail(absl::InvalidArgumentError("--require_join_credentials needs --shard_token_file: join credentials "
                                           "derive from the shard token"));
  }
  const int metrics_port = absl::GetFlag(FLAGS_metrics_port);
  if (metrics_port < -1 || metrics_port > 65535) {
    return Fail(absl::InvalidArgumentError(
        absl::StrCat("--metrics_port must be -1 (off) or in [0, 65535]; got ", metrics_port)));
  }
  std::unique_ptr<sketchfuse::MetricsEndpoint> metrics_endpoint;
  std::unique_ptr<sketchfuse::ServerMetrics> metrics;
  if (metrics_port >= 0) {
    absl::StatusOr<std::unique_ptr<sketchfuse::MetricsEndpoint>> endpoint =
        sketchfuse::MetricsEndpoint::Start(absl::GetFlag(FLAGS_host), metrics_port);
    if (!endpoint.ok()) return Fail(endpoint.status());
    metrics_endpoint = *std::move(endpoint);
    metrics = std::make_unique<sketchfuse::ServerMetrics>(metrics_endpoint->registry());
    config.metrics = metrics.get();
    if (absl::Status s = WritePortFile(absl::GetFlag(FLAGS_metrics_port_file), metrics_endpoint->port()); !s.ok()) {
      return Fail(s);
    }
  }

  // Signals are taken by sigwait below, in the main thread only (blocked
  // before any thread starts, so every thread inherits the mask).
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  // A shard that cannot register with its remote coordinator stops with
  // exit status 1.
  std::atomic<int> exit_code{0};
  config.on_registration_failed = [&exit_code](const absl::Status& failed) {
    std::cerr << "sketchfuse_server: error: " << failed.message() << std::endl;
    exit_code = 1;
    kill(getpid(), SIGTERM);
  };
  const bool tls = config.credentials != nullptr, mutual = !absl::GetFlag(FLAGS_tls_client_ca).empty();
  const bool token = !config.auth.worker_token.empty();
  absl::StatusOr<std::unique_ptr<sketchfuse::ShardServer>> server = sketchfuse::ShardServer::Start(std::move(config));
  if (!server.ok()) return Fail(server.status());
  const sketchfuse::AggregationConfig& shard = (*server)->shard();
  if (!absl::GetFlag(FLAGS_state_dir).empty()) {
    std::cout << "sketchfuse_server: " << (*server)->restored_answers() << " kept answers taken up from "
              << absl::GetFlag(FLAGS_state_dir) << "/shard-" << absl::GetFlag(FLAGS_shard_index) << std::endl;
  }
  std::vector<uint32_t> owned;
  for (const sketchfuse::GroupSpec& g : shard.groups) owned.push_back(g.group);
  std::cout << "sketchfuse_server: job '" << shard.job << "', shard " << absl::GetFlag(FLAGS_shard_index) << " of "
            << absl::GetFlag(FLAGS_num_shards) << ", " << shard.world_size << " workers, groups "
            << absl::StrJoin(owned, ",") << "; listening on " << absl::GetFlag(FLAGS_host) << ":"
            << (*server)->port() << " (" << (!tls ? "plaintext" : (mutual ? "mutual TLS" : "TLS")) << ", "
            << (token ? "bearer token required" : "no token") << ")" << std::endl;
  if (absl::Status s = WritePortFile(absl::GetFlag(FLAGS_port_file), (*server)->port()); !s.ok()) {
    (*server)->Shutdown(absl::ZeroDuration());
    return Fail(s);
  }
  if ((*server)->coordinator() != nullptr) {
    std::cout << "sketchfuse_server: serving the coordinator of job '" << shard.job << "' (run "
              << (*server)->coordinator()->fingerprint() << ")" << std::endl;
  }

  int signal_number = 0;
  sigwait(&signals, &signal_number);
  std::cout << "sketchfuse_server: signal " << signal_number << ", shutting down" << std::endl;
  const int failed = (*server)->Shutdown(absl::Seconds(5));
  const sketchfuse::AggregationCore::Stats stats = (*server)->stats();
  const sketchfuse::AggregatorService::Traffic traffic = (*server)->traffic();
  std::cout << "sketchfuse_server: stopped after " << stats.rounds_completed << " rounds (" << failed
            << " open rounds failed at shutdown); " << traffic.pushes << " pushes, bytes in " << traffic.bytes_in
            << ", bytes out " << traffic.bytes_out << ", decode " << stats.decode_seconds << " s" << std::endl;
  return exit_code;
}
