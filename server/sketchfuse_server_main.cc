// sketchfuse_server: one aggregation shard of a job.
//
//   sketchfuse_server --job_config=job.json --shard_index=0 --num_shards=2 --port=7070
//
// Serves v1.Aggregator (and grpc.health.v1, and server reflection) until
// SIGTERM or SIGINT. On those it fails the rounds still open with UNAVAILABLE
// (workers re-push or fall back), drains in-flight calls, and exits 0.
//
// With --state_dir the shard records each finished round's answer before any
// worker sees it (server/answer_journal.h); restarted with the same
// directory after a crash, it takes those answers up again, so workers that
// re-push a round their dead predecessor finished get the same answer. A
// shard registered with a remote coordinator registers again every 2 s, so a
// restarted coordinator learns every shard's address again
// (server/shard_registrar.h).
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <iostream>
#include <sstream>
#include <atomic>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "proto/rpc_channel.h"
#include "server/aggregation_core.h"
#include "server/aggregator_service.h"
#include "server/answer_journal.h"
#include "server/server_metrics.h"
#include "daemon/memory_tuning.h"
#include "common/sketch_hash.h"
#include "daemon/metrics_endpoint.h"
#include "server/coordinator_service.h"
#include "server/job_config.h"
#include "server/shard_registrar.h"

ABSL_FLAG(std::string, job_config, "",
          "Required. The job's aggregation configuration: a v1.JobConfig file in JSON (.json) "
          "or protobuf text format (job, world size, groups with their compressors).");
ABSL_FLAG(int, shard_index, 0, "This shard's index in [0, num_shards).");
ABSL_FLAG(int, num_shards, 1,
          "Number of aggregation shards of the job; groups are spread over them by size.");
ABSL_FLAG(std::string, host, "127.0.0.1", "Address to listen on (0.0.0.0 for all interfaces).");
ABSL_FLAG(int, port, 0, "Port to listen on; 0 picks a free one (see --port_file).");
ABSL_FLAG(std::string, port_file, "",
          "If set, the chosen port is written to this file once the server listens.");
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
          "A push may open a round at most this many steps past its group's most recently finished one "
          "(one round per group may open past it: a job resuming or returning ahead); 1 to 2^31.");
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

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> Credentials() {
  const std::string cert = absl::GetFlag(FLAGS_tls_cert), key = absl::GetFlag(FLAGS_tls_key);
  const std::string ca = absl::GetFlag(FLAGS_tls_client_ca);
  if (cert.empty() != key.empty()) {
    return absl::InvalidArgumentError("--tls_cert and --tls_key must be given together");
  }
  if (cert.empty()) {
    if (!ca.empty()) return absl::InvalidArgumentError("--tls_client_ca needs --tls_cert and --tls_key");
    return grpc::InsecureServerCredentials();
  }
  grpc::SslServerCredentialsOptions options(
      ca.empty() ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
                 : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  absl::StatusOr<std::string> cert_pem = sketchfuse::ReadFlagFile(cert, "--tls_cert");
  if (!cert_pem.ok()) return cert_pem.status();
  absl::StatusOr<std::string> key_pem = sketchfuse::ReadFlagFile(key, "--tls_key");
  if (!key_pem.ok()) return key_pem.status();
  options.pem_key_cert_pairs.push_back({*key_pem, *cert_pem});
  if (!ca.empty()) {
    absl::StatusOr<std::string> ca_pem = sketchfuse::ReadFlagFile(ca, "--tls_client_ca");
    if (!ca_pem.ok()) return ca_pem.status();
    options.pem_root_certs = *ca_pem;
  }
  return grpc::SslServerCredentials(options);
}

std::string AdvertisedAddress(int bound_port) {
  if (!absl::GetFlag(FLAGS_advertise_address).empty()) return absl::GetFlag(FLAGS_advertise_address);
  std::string host = absl::GetFlag(FLAGS_host);
  if (host == "0.0.0.0" || host == "::" || host == "[::]") {
    char name[256] = {0};
    host = gethostname(name, sizeof(name) - 1) == 0 ? name : "localhost";
  }
  return absl::StrCat(host, ":", bound_port);
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
  const int max_mb = absl::GetFlag(FLAGS_max_message_mb);
  const int reaper_ms = absl::GetFlag(FLAGS_reaper_period_ms);
  const int port = absl::GetFlag(FLAGS_port);
  if (max_mb < 1 || max_mb > 2047) {
    return Fail(absl::InvalidArgumentError(absl::StrCat("--max_message_mb must be in [1, 2047]; got ", max_mb)));
  }
  if (reaper_ms < 1 || reaper_ms > 60000) {
    return Fail(absl::InvalidArgumentError(absl::StrCat("--reaper_period_ms must be in [1, 60000]; got ", reaper_ms)));
  }
  const int64_t step_window = absl::GetFlag(FLAGS_step_window), max_open_rounds = absl::GetFlag(FLAGS_max_open_rounds),
                max_held_mb = absl::GetFlag(FLAGS_max_held_mb);
  if (step_window < 1 || step_window > (int64_t{1} << 31)) {
    return Fail(absl::InvalidArgumentError(absl::StrCat("--step_window must be in [1, 2^31]; got ", step_window)));
  }
  if (max_open_rounds < 1 || max_open_rounds > (int64_t{1} << 31)) {
    return Fail(
        absl::InvalidArgumentError(absl::StrCat("--max_open_rounds must be in [1, 2^31]; got ", max_open_rounds)));
  }
  if (max_held_mb < 1 || max_held_mb > (int64_t{1} << 20)) {
    return Fail(absl::InvalidArgumentError(absl::StrCat("--max_held_mb must be in [1, 2^20]; got ", max_held_mb)));
  }
  const int liveness_ms = absl::GetFlag(FLAGS_liveness_timeout_ms);
  if (liveness_ms < 100 || liveness_ms > 3600000) {
    return Fail(absl::InvalidArgumentError(
        absl::StrCat("--liveness_timeout_ms must be in [100, 3600000]; got ", liveness_ms)));
  }
  if (absl::GetFlag(FLAGS_coordinator) && !absl::GetFlag(FLAGS_coordinator_address).empty()) {
    return Fail(absl::InvalidArgumentError(
        "--coordinator and --coordinator_address exclude each other: a shard either serves the "
        "coordinator or registers with one"));
  }
  if (!absl::GetFlag(FLAGS_coordinator_ca).empty() && absl::GetFlag(FLAGS_coordinator_address).empty()) {
    return Fail(absl::InvalidArgumentError("--coordinator_ca needs --coordinator_address"));
  }
  if (port < 0 || port > 65535) {
    return Fail(absl::InvalidArgumentError(absl::StrCat("--port must be in [0, 65535]; got ", port)));
  }

  absl::StatusOr<sketchfuse::v1::JobConfig> job = sketchfuse::ReadJobConfig(absl::GetFlag(FLAGS_job_config));
  if (!job.ok()) return Fail(job.status());
  absl::StatusOr<sketchfuse::AggregationConfig> shard = sketchfuse::ShardConfig(
      *job, absl::GetFlag(FLAGS_shard_index), absl::GetFlag(FLAGS_num_shards));
  if (!shard.ok()) return Fail(shard.status());
  shard->step_window = static_cast<uint64_t>(step_window);
  shard->max_open_rounds = static_cast<uint64_t>(max_open_rounds);
  shard->max_held_bytes = static_cast<uint64_t>(max_held_mb) << 20;
  // The token, and the client side of this shard's calls to a remote
  // coordinator (its CA; this shard's certificate as client certificate).
  const bool tls_to_coordinator = !absl::GetFlag(FLAGS_coordinator_ca).empty();
  // With a shard token, this shard registers with it; workers' calls carry
  // the worker token (--token_file).
  const std::string shard_token_file = absl::GetFlag(FLAGS_shard_token_file);
  if (!shard_token_file.empty() && absl::GetFlag(FLAGS_token_file).empty()) {
    return Fail(absl::InvalidArgumentError("--shard_token_file needs --token_file (the workers' token)"));
  }
  absl::StatusOr<sketchfuse::RpcChannelOptions> client = sketchfuse::LoadRpcChannelOptions(
      shard_token_file.empty() ? absl::GetFlag(FLAGS_token_file) : shard_token_file, absl::GetFlag(FLAGS_coordinator_ca),
      tls_to_coordinator ? absl::GetFlag(FLAGS_tls_cert) : "", tls_to_coordinator ? absl::GetFlag(FLAGS_tls_key) : "", "--coordinator_ca");
  if (!client.ok()) return Fail(client.status());
  std::string token = client->token, shard_token;
  if (!shard_token_file.empty()) {
    absl::StatusOr<sketchfuse::RpcChannelOptions> workers =
        sketchfuse::LoadRpcChannelOptions(absl::GetFlag(FLAGS_token_file), "", "", "");
    if (!workers.ok()) return Fail(workers.status());
    shard_token = client->token;
    token = workers->token;
    if (token == shard_token) {
      return Fail(absl::InvalidArgumentError("--shard_token_file and --token_file hold the same token; roles need two"));
    }
  }
  const std::vector<std::string> shard_identities = absl::GetFlag(FLAGS_shard_identities);
  if (!shard_identities.empty() && absl::GetFlag(FLAGS_tls_client_ca).empty()) {
    return Fail(absl::InvalidArgumentError("--shard_identities needs mutual TLS (--tls_client_ca)"));
  }
  const sketchfuse::CallAuthConfig auth{token, shard_token, shard_identities};
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials = Credentials();
  if (!credentials.ok()) return Fail(credentials.status());

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
    sketchfuse::ServerMetrics* observer = metrics.get();
    shard->on_round_finished = [observer](const sketchfuse::RoundReport& report) { observer->OnRound(report); };
    if (absl::Status s = WritePortFile(absl::GetFlag(FLAGS_metrics_port_file), metrics_endpoint->port()); !s.ok()) {
      return Fail(s);
    }
  }

  // Durable answers: the journal records each answer before any worker sees
  // it; what a predecessor recorded is taken up before serving.
  std::unique_ptr<sketchfuse::AnswerJournal> journal;
  std::vector<sketchfuse::KeptAnswer> kept_answers;
  if (!absl::GetFlag(FLAGS_state_dir).empty()) {
    const int index = absl::GetFlag(FLAGS_shard_index), shards = absl::GetFlag(FLAGS_num_shards);
    absl::StatusOr<std::unique_ptr<sketchfuse::AnswerJournal>> opened = sketchfuse::AnswerJournal::Open(
        absl::StrCat(absl::GetFlag(FLAGS_state_dir), "/shard-", index), sketchfuse::ShardIdentity(*job, index, shards),
        std::max<size_t>(1, shard->finished_rounds_kept));
    if (!opened.ok()) return Fail(opened.status());
    journal = *std::move(opened);
    absl::StatusOr<std::vector<sketchfuse::KeptAnswer>> loaded = journal->Load();
    if (!loaded.ok()) return Fail(loaded.status());
    kept_answers = *std::move(loaded);
    sketchfuse::AnswerJournal* recorder = journal.get();
    shard->record_answer = [recorder](const sketchfuse::KeptAnswer& answer) { return recorder->Record(answer); };
  }

  absl::StatusOr<std::unique_ptr<sketchfuse::AggregationCore>> core =
      sketchfuse::AggregationCore::Create(*shard);
  if (!core.ok()) return Fail(core.status());
  if (journal != nullptr) {
    if (absl::Status restored = (*core)->Restore(kept_answers); !restored.ok()) {
      return Fail(absl::InvalidArgumentError(
          absl::StrCat("--state_dir '", journal->dir(), "': ", restored.message())));
    }
    std::cout << "sketchfuse_server: " << kept_answers.size() << " kept answers taken up from " << journal->dir()
              << std::endl;
  }

  // Signals are taken by sigwait below, in the main thread only.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  std::unique_ptr<sketchfuse::CoordinatorCore> coordinator;
  std::unique_ptr<sketchfuse::CoordinatorService> coordinator_service;
  if (absl::GetFlag(FLAGS_coordinator)) {
    sketchfuse::CoordinatorOptions options;
    options.num_shards = absl::GetFlag(FLAGS_num_shards);
    options.liveness_timeout = absl::Milliseconds(liveness_ms);
    absl::StatusOr<std::unique_ptr<sketchfuse::CoordinatorCore>> created =
        sketchfuse::CoordinatorCore::Create(*job, options);
    if (!created.ok()) return Fail(created.status());
    coordinator = *std::move(created);
    coordinator_service = std::make_unique<sketchfuse::CoordinatorService>(coordinator.get(), auth);
  }

  sketchfuse::AggregatorService service(core->get(), auth, metrics.get());
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  int bound_port = 0;
  const std::string address = absl::StrCat(absl::GetFlag(FLAGS_host), ":", port);
  builder.AddListeningPort(address, *credentials, &bound_port);
  builder.SetMaxReceiveMessageSize(max_mb << 20);
  builder.SetMaxSendMessageSize(max_mb << 20);
  sketchfuse::ApplyBulkTransferSettings(&builder);
  builder.RegisterService(&service);
  if (coordinator_service != nullptr) builder.RegisterService(coordinator_service.get());
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || bound_port == 0) {
    return Fail(absl::UnavailableError(absl::StrCat("cannot listen on ", address)));
  }
  server->GetHealthCheckService()->SetServingStatus(true);
  auto reaper = std::make_unique<sketchfuse::RoundReaper>(core->get(), absl::Milliseconds(reaper_ms));

  std::vector<uint32_t> owned;
  for (const sketchfuse::GroupSpec& g : shard->groups) owned.push_back(g.group);
  std::cout << "sketchfuse_server: job '" << shard->job << "', shard " << absl::GetFlag(FLAGS_shard_index)
            << " of " << absl::GetFlag(FLAGS_num_shards) << ", " << shard->world_size << " workers, groups "
            << absl::StrJoin(owned, ",") << "; listening on " << absl::GetFlag(FLAGS_host) << ":" << bound_port
            << " (" << (absl::GetFlag(FLAGS_tls_cert).empty() ? "plaintext" : (absl::GetFlag(FLAGS_tls_client_ca).empty() ? "TLS" : "mutual TLS"))
            << ", " << (token.empty() ? "no token" : "bearer token required") << ")" << std::endl;
  if (absl::Status s = WritePortFile(absl::GetFlag(FLAGS_port_file), bound_port); !s.ok()) {
    server->Shutdown();
    return Fail(s);
  }

  // Register this shard's address with the coordinator (in-process or remote);
  // a shard that cannot register stops with exit status 1.
  sketchfuse::v1::RegisterShardRequest registration;
  registration.set_job(shard->job);
  registration.set_shard(absl::GetFlag(FLAGS_shard_index));
  registration.set_num_shards(absl::GetFlag(FLAGS_num_shards));
  registration.set_address(AdvertisedAddress(bound_port));
  registration.set_sketch_hash_family(sketchfuse::kSketchHashFamily);
  std::atomic<int> exit_code{0};
  std::unique_ptr<sketchfuse::ShardRegistrar> registrar;
  if (coordinator != nullptr) {
    absl::Status registered = coordinator->RegisterShard(registration);
    if (!registered.ok()) {
      server->Shutdown();
      return Fail(registered);
    }
    std::cout << "sketchfuse_server: serving the coordinator of job '" << shard->job << "' (run "
              << coordinator->fingerprint() << ")" << std::endl;
  } else if (!absl::GetFlag(FLAGS_coordinator_address).empty()) {
    const std::string coordinator_address = absl::GetFlag(FLAGS_coordinator_address);
    registrar = std::make_unique<sketchfuse::ShardRegistrar>(
        sketchfuse::ShardRegistrar::OverGrpc(coordinator_address, *client), registration, coordinator_address,
        sketchfuse::RegistrarOptions{}, [&exit_code](const absl::Status& failed) {
          std::cerr << "sketchfuse_server: error: " << failed.message() << std::endl;
          exit_code = 1;
          kill(getpid(), SIGTERM);
        });
  }

  int signal_number = 0;
  sigwait(&signals, &signal_number);
  std::cout << "sketchfuse_server: signal " << signal_number << ", shutting down" << std::endl;
  server->GetHealthCheckService()->SetServingStatus(false);
  const int failed = (*core)->FailAllRounds(absl::UnavailableError("the aggregation server is shutting down"));
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  reaper.reset();
  registrar.reset();
  const sketchfuse::AggregationCore::Stats stats = (*core)->stats();
  std::cout << "sketchfuse_server: stopped after " << stats.rounds_completed << " rounds ("
            << failed << " open rounds failed at shutdown)" << std::endl;
  return exit_code;
}
