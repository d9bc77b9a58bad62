#include "server/coordinator_service.h"

#include "absl/strings/str_cat.h"
#include "server/aggregator_service.h"

namespace sketchfuse {

absl::Time CoordinatorService::Deadline(const grpc::ServerContext& context) const {
  // Answer half a second before the client gives up, so it hears why
  // (who is missing) instead of a bare deadline.
  return std::min(absl::FromChrono(context.deadline()) - absl::Milliseconds(500), absl::Now() + max_wait_);
}

absl::Status CoordinatorService::Authorize(const grpc::ServerContext& context, bool shard_rpc, const char* rpc) const {
  if (shard_token_.empty()) return CheckBearerToken(context, worker_token_);
  const std::string& mine = shard_rpc ? shard_token_ : worker_token_;
  const std::string& other = shard_rpc ? worker_token_ : shard_token_;
  absl::Status auth = CheckBearerToken(context, mine);
  if (auth.ok()) return auth;
  if (CheckBearerToken(context, other).ok()) {
    return absl::PermissionDeniedError(absl::StrCat(rpc, " is for ", shard_rpc ? "shards" : "workers",
                                                    "; this call carries the ", shard_rpc ? "worker" : "shard",
                                                    " token"));
  }
  return auth;
}

grpc::Status CoordinatorService::Join(grpc::ServerContext* context, const v1::JoinRequest* request,
                                      v1::JoinReply* reply) {
  if (absl::Status auth = Authorize(*context, false, "Join"); !auth.ok()) return ToGrpcStatus(auth);
  absl::StatusOr<v1::JoinReply> joined =
      core_->Join(*request, Deadline(*context), [context] { return context->IsCancelled(); });
  if (!joined.ok()) return ToGrpcStatus(joined.status());
  *reply = *std::move(joined);
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::RegisterShard(grpc::ServerContext* context,
                                               const v1::RegisterShardRequest* request,
                                               v1::RegisterShardReply*) {
  if (absl::Status auth = Authorize(*context, true, "RegisterShard"); !auth.ok()) return ToGrpcStatus(auth);
  return ToGrpcStatus(core_->RegisterShard(*request));
}

grpc::Status CoordinatorService::Heartbeat(grpc::ServerContext* context,
                                           const v1::HeartbeatRequest* request,
                                           v1::HeartbeatReply* reply) {
  if (absl::Status auth = Authorize(*context, false, "Heartbeat"); !auth.ok()) return ToGrpcStatus(auth);
  absl::StatusOr<v1::HeartbeatReply> beat = core_->Heartbeat(*request, absl::Now());
  if (!beat.ok()) return ToGrpcStatus(beat.status());
  *reply = *std::move(beat);
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::Set(grpc::ServerContext* context, const v1::KeyValue* request,
                                     v1::SetReply*) {
  if (absl::Status auth = Authorize(*context, false, "Set"); !auth.ok()) return ToGrpcStatus(auth);
  return ToGrpcStatus(core_->Set(*request));
}

grpc::Status CoordinatorService::Get(grpc::ServerContext* context, const v1::GetRequest* request,
                                     v1::KeyValue* reply) {
  if (absl::Status auth = Authorize(*context, false, "Get"); !auth.ok()) return ToGrpcStatus(auth);
  absl::StatusOr<v1::KeyValue> entry =
      core_->Get(*request, Deadline(*context), [context] { return context->IsCancelled(); });
  if (!entry.ok()) return ToGrpcStatus(entry.status());
  *reply = *std::move(entry);
  return grpc::Status::OK;
}

}  // namespace sketchfuse
