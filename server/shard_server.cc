#include "server/shard_server.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/sketch_hash.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/health_check_service_interface.h"
#include "proto/run_config.h"
#include "server/worker_proof.h"
#include "server/job_config.h"

namespace sketchfuse {
namespace {

absl::Status CheckConfig(const ShardServerConfig& config) {
  if (config.max_message_mb < 1 || config.max_message_mb > 2047) {
    return absl::InvalidArgumentError(
        absl::StrCat("the largest message must be 1 to 2047 MiB; got ", config.max_message_mb));
  }
  if (config.port < 0 || config.port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("the port must be in [0, 65535]; got ", config.port));
  }
  if (config.reaper_period <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("the reaper's period must be positive");
  }
  if (config.liveness_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("the coordinator's liveness timeout must be positive");
  }
  if (config.serve_coordinator && !config.coordinator_address.empty()) {
    return absl::InvalidArgumentError(
        "a shard either serves the coordinator or registers with one at an address, not both");
  }
  return absl::OkStatus();
}

// The address workers reach the shard at.
std::string AdvertisedAddress(const ShardServerConfig& config, int bound_port) {
  if (!config.advertise_address.empty()) return config.advertise_address;
  std::string host = config.host;
  if (host == "0.0.0.0" || host == "::" || host == "[::]") {
    char name[256] = {0};
    host = gethostname(name, sizeof(name) - 1) == 0 ? name : "localhost";
  }
  return absl::StrCat(host, ":", bound_port);
}

}  // namespace

absl::StatusOr<std::unique_ptr<ShardServer>> ShardServer::Start(ShardServerConfig config) {
  if (absl::Status s = CheckConfig(config); !s.ok()) return s;
  absl::StatusOr<AggregationConfig> shard = ShardConfig(config.job, config.shard_index, config.num_shards);
  if (!shard.ok()) return shard.status();
  shard->step_window = config.step_window;
  shard->max_open_rounds = config.max_open_rounds;
  shard->max_held_bytes = config.max_held_bytes;
  if (ServerMetrics* metrics = config.metrics; metrics != nullptr) {
    shard->on_round_finished = [metrics](const RoundReport& report) { metrics->OnRound(report); };
  }
  std::unique_ptr<ShardServer> server(new ShardServer());

  // Durable answers: the journal records each answer before any worker sees
  // it; what a predecessor recorded is taken up before serving.
  std::vector<KeptAnswer> kept_answers;
  if (!config.state_dir.empty()) {
    absl::StatusOr<std::unique_ptr<AnswerJournal>> opened = AnswerJournal::Open(
        absl::StrCat(config.state_dir, "/shard-", config.shard_index),
        ShardIdentity(config.job, config.shard_index, config.num_shards),
        std::max<size_t>(1, shard->finished_rounds_kept));
    if (!opened.ok()) return opened.status();
    server->journal_ = *std::move(opened);
    absl::StatusOr<std::vector<KeptAnswer>> loaded = server->journal_->Load();
    if (!loaded.ok()) return loaded.status();
    kept_answers = *std::move(loaded);
    AnswerJournal* recorder = server->journal_.get();
    shard->record_answer = [recorder](const KeptAnswer& answer) { return recorder->Record(answer); };
  }
  absl::StatusOr<std::unique_ptr<AggregationCore>> core = AggregationCore::Create(*shard);
  if (!core.ok()) return core.status();
  server->core_ = *std::move(core);
  if (server->journal_ != nullptr) {
    server->restored_answers_ = kept_answers.size();
    if (absl::Status restored = server->core_->Restore(std::move(kept_answers)); !restored.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("state directory '", server->journal_->dir(), "': ", restored.message()));
    }
  }

  if (config.serve_coordinator) {
    CoordinatorOptions options;
    options.num_shards = config.num_shards;
    options.liveness_timeout = config.liveness_timeout;
    options.proofs = WorkerProofs(config.auth.shard_token);
    options.require_join_credentials = config.require_join_credentials;
    absl::StatusOr<std::unique_ptr<CoordinatorCore>> created = CoordinatorCore::Create(config.job, options);
    if (!created.ok()) return created.status();
    server->coordinator_ = *std::move(created);
    server->coordinator_service_ = std::make_unique<CoordinatorService>(server->coordinator_.get(), config.auth);
  }

  server->service_ = std::make_unique<AggregatorService>(server->core_.get(), config.auth, config.metrics);
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  const std::string address = absl::StrCat(config.host, ":", config.port);
  builder.AddListeningPort(address, config.credentials ? config.credentials : grpc::InsecureServerCredentials(),
                           &server->port_);
  builder.SetMaxReceiveMessageSize(config.max_message_mb << 20);
  builder.SetMaxSendMessageSize(config.max_message_mb << 20);
  ApplyBulkTransferSettings(&builder);
  builder.RegisterService(server->service_.get());
  if (server->coordinator_service_ != nullptr) builder.RegisterService(server->coordinator_service_.get());
  server->server_ = builder.BuildAndStart();
  if (server->server_ == nullptr || server->port_ == 0) {
    server->server_.reset();
    return absl::UnavailableError(absl::StrCat("cannot listen on ", address));
  }
  server->server_->GetHealthCheckService()->SetServingStatus(true);
  server->reaper_ = std::make_unique<RoundReaper>(server->core_.get(), config.reaper_period);
  server->advertised_ = AdvertisedAddress(config, server->port_);

  // Register this shard's address with the coordinator (in-process or remote).
  v1::RegisterShardRequest registration;
  registration.set_job(server->shard().job);
  registration.set_shard(config.shard_index);
  registration.set_num_shards(config.num_shards);
  registration.set_address(server->advertised_);
  registration.set_sketch_hash_family(kSketchHashFamily);
  registration.set_job_fingerprint(JobFingerprint(config.job));
  registration.set_partitioning(DescribeGroups(config.job));
  if (server->coordinator_ != nullptr) {
    if (absl::Status registered = server->coordinator_->RegisterShard(registration); !registered.ok()) {
      server->Shutdown(absl::ZeroDuration());
      return registered;
    }
  } else if (!config.coordinator_address.empty()) {
    server->registrar_ = std::make_unique<ShardRegistrar>(
        ShardRegistrar::OverGrpc(config.coordinator_address, config.coordinator_client), registration,
        config.coordinator_address, RegistrarOptions{}, config.on_registration_failed);
  }
  return server;
}

int ShardServer::Shutdown(absl::Duration grace) {
  if (stopped_) return 0;
  stopped_ = true;
  int failed = 0;
  if (server_ != nullptr) server_->GetHealthCheckService()->SetServingStatus(false);
  if (core_ != nullptr) failed = core_->FailAllRounds(absl::UnavailableError("the aggregation server is shutting down"));
  if (server_ != nullptr) server_->Shutdown(std::chrono::system_clock::now() + absl::ToChronoMilliseconds(grace));
  reaper_.reset();
  registrar_.reset();
  return failed;
}

ShardServer::~ShardServer() { Shutdown(absl::ZeroDuration()); }

}  // namespace sketchfuse
