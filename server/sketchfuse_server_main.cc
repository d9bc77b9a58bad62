// sketchfuse_server: one aggregation shard of a job.
//
//   sketchfuse_server --job_config=job.json --shard_index=0 --num_shards=2 --port=7070
//
// Serves v1.Aggregator (and grpc.health.v1, and server reflection) until
// SIGTERM or SIGINT. On those it fails the rounds still open with UNAVAILABLE
// (workers re-push or fall back), drains in-flight calls, and exits 0.
#include <signal.h>

#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "server/aggregation_core.h"
#include "server/aggregator_service.h"
#include "server/job_config.h"

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
ABSL_FLAG(std::string, tls_cert, "", "Server certificate chain (PEM). With --tls_key: TLS.");
ABSL_FLAG(std::string, tls_key, "", "Server private key (PEM).");
ABSL_FLAG(std::string, tls_client_ca, "",
          "CA certificates (PEM) for client certificates. Set: mutual TLS, clients must present "
          "a certificate signed by this CA.");
ABSL_FLAG(int, max_message_mb, 256, "Largest request or reply accepted, MiB (1 to 2047).");
ABSL_FLAG(int, reaper_period_ms, 100, "How often overdue rounds are failed, ms (1 to 60000).");

namespace {

absl::StatusOr<std::string> ReadFile(const std::string& path, const std::string& what) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", what, " file '", path, "'"));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
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
  absl::StatusOr<std::string> cert_pem = ReadFile(cert, "--tls_cert");
  if (!cert_pem.ok()) return cert_pem.status();
  absl::StatusOr<std::string> key_pem = ReadFile(key, "--tls_key");
  if (!key_pem.ok()) return key_pem.status();
  options.pem_key_cert_pairs.push_back({*key_pem, *cert_pem});
  if (!ca.empty()) {
    absl::StatusOr<std::string> ca_pem = ReadFile(ca, "--tls_client_ca");
    if (!ca_pem.ok()) return ca_pem.status();
    options.pem_root_certs = *ca_pem;
  }
  return grpc::SslServerCredentials(options);
}

int Fail(const absl::Status& status) {
  std::cerr << "sketchfuse_server: error: " << status.message() << "\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
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
  if (port < 0 || port > 65535) {
    return Fail(absl::InvalidArgumentError(absl::StrCat("--port must be in [0, 65535]; got ", port)));
  }

  absl::StatusOr<sketchfuse::v1::JobConfig> job = sketchfuse::ReadJobConfig(absl::GetFlag(FLAGS_job_config));
  if (!job.ok()) return Fail(job.status());
  absl::StatusOr<sketchfuse::AggregationConfig> shard = sketchfuse::ShardConfig(
      *job, absl::GetFlag(FLAGS_shard_index), absl::GetFlag(FLAGS_num_shards));
  if (!shard.ok()) return Fail(shard.status());
  std::string token;
  if (!absl::GetFlag(FLAGS_token_file).empty()) {
    absl::StatusOr<std::string> text = ReadFile(absl::GetFlag(FLAGS_token_file), "--token_file");
    if (!text.ok()) return Fail(text.status());
    token = std::string(absl::StripAsciiWhitespace(*text));
    if (token.empty()) return Fail(absl::InvalidArgumentError("--token_file is empty"));
  }
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials = Credentials();
  if (!credentials.ok()) return Fail(credentials.status());

  absl::StatusOr<std::unique_ptr<sketchfuse::AggregationCore>> core =
      sketchfuse::AggregationCore::Create(*shard);
  if (!core.ok()) return Fail(core.status());

  // Signals are taken by sigwait below, in the main thread only.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  sketchfuse::AggregatorService service(core->get(), token);
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  int bound_port = 0;
  const std::string address = absl::StrCat(absl::GetFlag(FLAGS_host), ":", port);
  builder.AddListeningPort(address, *credentials, &bound_port);
  builder.SetMaxReceiveMessageSize(max_mb << 20);
  builder.SetMaxSendMessageSize(max_mb << 20);
  builder.RegisterService(&service);
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
  if (!absl::GetFlag(FLAGS_port_file).empty()) {
    const std::string path = absl::GetFlag(FLAGS_port_file);
    const std::string tmp = path + ".tmp";
    std::ofstream(tmp) << bound_port << "\n";
    if (std::rename(tmp.c_str(), path.c_str()) != 0) {
      server->Shutdown();
      return Fail(absl::InternalError(absl::StrCat("cannot write --port_file '", path, "'")));
    }
  }

  int signal_number = 0;
  sigwait(&signals, &signal_number);
  std::cout << "sketchfuse_server: signal " << signal_number << ", shutting down" << std::endl;
  server->GetHealthCheckService()->SetServingStatus(false);
  const int failed = (*core)->FailAllRounds(absl::UnavailableError("the aggregation server is shutting down"));
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  reaper.reset();
  const sketchfuse::AggregationCore::Stats stats = (*core)->stats();
  std::cout << "sketchfuse_server: stopped after " << stats.rounds_completed << " rounds ("
            << failed << " open rounds failed at shutdown)" << std::endl;
  return 0;
}
