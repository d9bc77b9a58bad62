#include "server/coordinator_service.h"

#include "proto/grpc_status.h"

namespace sketchfuse {

absl::Time CoordinatorService::Deadline(const grpc::ServerContext& context) const {
  // Answer half a second before the client gives up, so it hears why
  // (who is missing) instead of a bare deadline.
  return std::min(absl::FromChrono(context.deadline()) - absl::Milliseconds(500), absl::Now() + max_wait_);
}

grpc::Status CoordinatorService::Join(grpc::ServerContext* context, const v1::JoinRequest* request,
                                      v1::JoinReply* reply) {
  if (absl::Status auth = auth_.Authorize(*context, CallRole::kWorker, "Join"); !auth.ok()) return ToGrpcStatus(auth);
  absl::StatusOr<v1::JoinReply> joined =
      core_->Join(*request, Deadline(*context), [context] { return context->IsCancelled(); },
                  PresentedWorkerProof(*context), PresentedJoinCredential(*context));
  if (!joined.ok()) return ToGrpcStatus(joined.status());
  *reply = *std::move(joined);
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::RegisterShard(grpc::ServerContext* context,
                                               const v1::RegisterShardRequest* request,
                                               v1::RegisterShardReply*) {
  if (absl::Status auth = auth_.Authorize(*context, CallRole::kShard, "RegisterShard"); !auth.ok()) return ToGrpcStatus(auth);
  return ToGrpcStatus(core_->RegisterShard(*request));
}

grpc::Status CoordinatorService::Heartbeat(grpc::ServerContext* context,
                                           const v1::HeartbeatRequest* request,
                                           v1::HeartbeatReply* reply) {
  if (absl::Status auth = auth_.Authorize(*context, CallRole::kWorker, "Heartbeat"); !auth.ok()) return ToGrpcStatus(auth);
  absl::StatusOr<v1::HeartbeatReply> beat = core_->Heartbeat(*request, absl::Now(), PresentedWorkerProof(*context));
  if (!beat.ok()) return ToGrpcStatus(beat.status());
  *reply = *std::move(beat);
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::Set(grpc::ServerContext* context, const v1::KeyValue* request,
                                     v1::SetReply*) {
  if (absl::Status auth = auth_.Authorize(*context, CallRole::kWorker, "Set"); !auth.ok()) return ToGrpcStatus(auth);
  return ToGrpcStatus(core_->Set(*request, PresentedWorkerProof(*context)));
}

grpc::Status CoordinatorService::Get(grpc::ServerContext* context, const v1::GetRequest* request,
                                     v1::KeyValue* reply) {
  if (absl::Status auth = auth_.Authorize(*context, CallRole::kWorker, "Get"); !auth.ok()) return ToGrpcStatus(auth);
  absl::StatusOr<v1::KeyValue> entry =
      core_->Get(*request, Deadline(*context), [context] { return context->IsCancelled(); });
  if (!entry.ok()) return ToGrpcStatus(entry.status());
  *reply = *std::move(entry);
  return grpc::Status::OK;
}

}  // namespace sketchfuse
