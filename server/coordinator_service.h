// The gRPC front of the coordinator: checks the caller's role and hands each
// v1.Coordinator call to CoordinatorCore. Join and Get block (synchronous
// handlers) until the core answers, the call's deadline passes or the client
// cancels.
//
// Roles (server/call_auth.h): workers call Join, Heartbeat, Set and Get;
// shards call RegisterShard. The other role's token or certificate gets
// PERMISSION_DENIED naming the RPC (a worker's credentials cannot register
// or move a shard).
#ifndef SKETCHFUSE_SERVER_COORDINATOR_SERVICE_H_
#define SKETCHFUSE_SERVER_COORDINATOR_SERVICE_H_

#include <string>

#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "proto/coordinator.grpc.pb.h"
#include "server/call_auth.h"
#include "server/coordinator_core.h"

namespace sketchfuse {

class CoordinatorService final : public v1::Coordinator::Service {
 public:
  // `core` must outlive the service. An empty worker token turns
  // authentication off (then the shard token must be empty too). Blocking
  // calls wait at most `max_wait` even when the client set no deadline.
  CoordinatorService(CoordinatorCore* core, CallAuthConfig auth, absl::Duration max_wait = absl::Minutes(10))
      : core_(core), auth_(std::move(auth)), max_wait_(max_wait) {}
  CoordinatorService(CoordinatorCore* core, std::string worker_token, std::string shard_token = "",
                     absl::Duration max_wait = absl::Minutes(10))
      : CoordinatorService(core, CallAuthConfig{std::move(worker_token), std::move(shard_token), {}}, max_wait) {}

  grpc::Status Join(grpc::ServerContext* context, const v1::JoinRequest* request,
                    v1::JoinReply* reply) override;
  grpc::Status RegisterShard(grpc::ServerContext* context, const v1::RegisterShardRequest* request,
                             v1::RegisterShardReply* reply) override;
  grpc::Status Heartbeat(grpc::ServerContext* context, const v1::HeartbeatRequest* request,
                         v1::HeartbeatReply* reply) override;
  grpc::Status Set(grpc::ServerContext* context, const v1::KeyValue* request,
                   v1::SetReply* reply) override;
  grpc::Status Get(grpc::ServerContext* context, const v1::GetRequest* request,
                   v1::KeyValue* reply) override;

 private:
  // The earlier of the call's deadline less 500 ms and now + max_wait_.
  absl::Time Deadline(const grpc::ServerContext& context) const;
  CoordinatorCore* core_;
  const CallAuth auth_;
  const absl::Duration max_wait_;
};

}  // namespace sketchfuse

#endif  // SKETCHFUSE_SERVER_COORDINATOR_SERVICE_H_
