#include "server/aggregator_service.h"

#include <chrono>

#include "proto/payload_convert.h"

namespace sketchfuse {

absl::Status CheckBearerToken(const grpc::ServerContextBase& context,
                              const std::string& token) {
  if (token.empty()) return absl::OkStatus();
  const auto& metadata = context.client_metadata();
  auto it = metadata.find(kAuthorizationKey);
  if (it == metadata.end()) {
    return absl::UnauthenticatedError("missing bearer token (metadata 'authorization')");
  }
  const std::string expected = std::string(kBearerPrefix) + token;
  const grpc::string_ref& got = it->second;
  // Constant-time comparison over the expected length.
  unsigned char diff = got.size() == expected.size() ? 0 : 1;
  for (size_t i = 0; i < expected.size(); ++i) {
    diff |= static_cast<unsigned char>(expected[i] ^ (i < got.size() ? got.data()[i] : 0));
  }
  if (diff != 0) return absl::UnauthenticatedError("wrong bearer token");
  return absl::OkStatus();
}

grpc::ServerUnaryReactor* AggregatorService::Push(grpc::CallbackServerContext* context,
                                                  const v1::PushRequest* request,
                                                  v1::PushReply* reply) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  ServerMetrics* metrics = metrics_;
  const uint64_t bytes_in = request->ByteSizeLong();
  // Every answer goes through here, so each push is counted once.
  auto finish = [reactor, reply, metrics, bytes_in](const absl::Status& status) {
    if (metrics != nullptr) metrics->OnPush(status, bytes_in, status.ok() ? reply->ByteSizeLong() : 0);
    reactor->Finish(ToGrpcStatus(status));
  };
  absl::Status auth = CheckBearerToken(*context, bearer_token_);
  if (!auth.ok()) {
    finish(auth);
    return reactor;
  }
  absl::StatusOr<Payload> payload = PayloadFromProto(request->payload());
  if (!payload.ok()) {
    finish(absl::InvalidArgumentError(absl::StrCat("payload: ", payload.status().message())));
    return reactor;
  }
  const RoundKey key{request->round().job(), request->round().step(), request->round().group(),
                     request->round().second_round()};
  core_->Push(key, request->worker(), *std::move(payload), absl::Now(),
              [reply, finish](absl::StatusOr<RoundResult> result) {
                if (!result.ok()) {
                  finish(result.status());
                  return;
                }
                UpdateToProto(*result->update, reply->mutable_update());
                reply->set_contributors(result->contributors);
                finish(absl::OkStatus());
              });
  if (metrics != nullptr) metrics->SetOpenRounds(core_->stats().rounds_open);
  return reactor;
}

RoundReaper::RoundReaper(AggregationCore* core, absl::Duration period)
    : core_(core), period_(period) {
  thread_ = std::thread([this] {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_) {
      wake_.wait_for(lock, absl::ToChronoMilliseconds(period_));
      if (stop_) break;
      lock.unlock();
      core_->ExpireRounds(absl::Now());
      lock.lock();
    }
  });
}

RoundReaper::~RoundReaper() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

}  // namespace sketchfuse
