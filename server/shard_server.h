// One aggregation shard of a job, as an object: its aggregation core (with
// the answer journal when it has a state directory), optionally the job's
// coordinator, the gRPC services (v1.Aggregator, v1.Coordinator,
// grpc.health.v1, reflection) on a port, the round reaper, and its
// registration with the coordinator. The daemon's main
// (sketchfuse_server_main.cc) only fills a ShardServerConfig from its flags
// and starts one; tests start shards in-process on port 0.
//
// NOTE: Start and Shutdown from one thread; the accessors are thread-safe.
#ifndef SKETCHFUSE_SERVER_SHARD_SERVER_H_
#define SKETCHFUSE_SERVER_SHARD_SERVER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "proto/job_config.pb.h"
#include "proto/rpc_channel.h"
#include "server/aggregation_core.h"
#include "server/aggregator_service.h"
#include "server/answer_journal.h"
#include "server/call_auth.h"
#include "server/coordinator_core.h"
#include "server/coordinator_service.h"
#include "server/server_metrics.h"
#include "server/shard_registrar.h"

namespace sketchfuse {

// Everything a shard runs with, checked by ShardServer::Start.
struct ShardServerConfig {
  v1::JobConfig job;
  int shard_index = 0;
  int num_shards = 1;
  // Where it listens; port 0 picks a free one (ShardServer::port).
  std::string host = "127.0.0.1";
  int port = 0;
  // host:port the workers reach it at; empty: `host` (this machine's
  // hostname for 0.0.0.0 and ::) and the bound port.
  std::string advertise_address;
  // Null: plaintext.
  std::shared_ptr<grpc::ServerCredentials> credentials;
  // Who may call what (tokens, shard identities).
  CallAuthConfig auth;
  // Largest request and reply, MiB (1 to 2047).
  int max_message_mb = 256;
  // Serve the job's coordinator (exactly one shard of a job does), or
  // register with the one at coordinator_address (dialled with
  // coordinator_client: the shard's token and TLS), or neither (both empty).
  bool serve_coordinator = false;
  // The coordinator admits a Join only with its id's join credential
  // (CoordinatorOptions::require_join_credentials).
  bool require_join_credentials = false;
  absl::Duration liveness_timeout = absl::Seconds(15);
  std::string coordinator_address;
  RpcChannelOptions coordinator_client;
  // Runs once, on the registrar's thread, if registering with the remote
  // coordinator fails for good (the daemon then stops with exit status 1).
  // May be empty.
  std::function<void(const absl::Status&)> on_registration_failed;
  // Where the answers of finished rounds are recorded (<dir>/shard-<index>)
  // and taken up after a restart; empty: in memory only.
  std::string state_dir;
  absl::Duration reaper_period = absl::Milliseconds(100);
  // What pushes may open (server/aggregation_core.h).
  uint64_t step_window = 64;
  uint64_t max_open_rounds = 4096;
  uint64_t max_held_bytes = uint64_t{1} << 30;
  // Not owned; may be null. Counts pushes and rounds.
  ServerMetrics* metrics = nullptr;
};

class ShardServer {
 public:
  // Opens the journal and takes its answers up, builds the core (and the
  // coordinator), starts serving and registers. INVALID_ARGUMENT naming the
  // setting for a bad config (shard index, ranges, a coordinator both served
  // and remote, a journal of another job); UNAVAILABLE when the address
  // cannot be bound; the coordinator's refusal of the registration.
  static absl::StatusOr<std::unique_ptr<ShardServer>> Start(ShardServerConfig config);
  ~ShardServer();

  ShardServer(const ShardServer&) = delete;
  ShardServer& operator=(const ShardServer&) = delete;

  int port() const { return port_; }
  // host:port the shard registered (what workers dial).
  const std::string& advertised_address() const { return advertised_; }
  // The shard's aggregation settings (job, owned groups, limits).
  const AggregationConfig& shard() const { return core_->config(); }
  // Answers taken up from the state directory at start.
  size_t restored_answers() const { return restored_answers_; }
  AggregationCore::Stats stats() const { return core_->stats(); }
  AggregatorService::Traffic traffic() const { return service_->traffic(); }
  // The job's coordinator when this shard serves it; else null.
  CoordinatorCore* coordinator() const { return coordinator_.get(); }

  // Stops serving: reports unhealthy, fails the open rounds with
  // UNAVAILABLE (workers re-push or fall back), drains calls in flight for
  // up to `grace`, stops the reaper and the registrar. Returns the number of
  // open rounds failed. Idempotent (later calls return 0).
  int Shutdown(absl::Duration grace = absl::Seconds(5));

 private:
  ShardServer() = default;

  std::unique_ptr<AnswerJournal> journal_;
  std::unique_ptr<AggregationCore> core_;
  std::unique_ptr<CoordinatorCore> coordinator_;
  std::unique_ptr<CoordinatorService> coordinator_service_;
  std::unique_ptr<AggregatorService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<RoundReaper> reaper_;
  std::unique_ptr<ShardRegistrar> registrar_;
  int port_ = 0;
  std::string advertised_;
  size_t restored_answers_ = 0;
  bool stopped_ = false;
};

}  // namespace sketchfuse

#endif  // SKETCHFUSE_SERVER_SHARD_SERVER_H_
