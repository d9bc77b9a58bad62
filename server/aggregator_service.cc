#include "server/aggregator_service.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "proto/push_codec.h"

namespace sketchfuse {

grpc::ServerUnaryReactor* AggregatorService::Push(grpc::CallbackServerContext* context,
                                                  const grpc::ByteBuffer* request, grpc::ByteBuffer* reply) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  ServerMetrics* metrics = metrics_;
  const uint64_t bytes_in = request->Length();
  // Every answer goes through here, so each push is counted once.
  auto finish = [this, reactor, reply, metrics, bytes_in](const absl::Status& status) {
    const uint64_t bytes_out = status.ok() ? reply->Length() : 0;
    pushes_.fetch_add(1, std::memory_order_relaxed);
    bytes_in_.fetch_add(bytes_in, std::memory_order_relaxed);
    bytes_out_.fetch_add(bytes_out, std::memory_order_relaxed);
    if (metrics != nullptr) metrics->OnPush(status, bytes_in, bytes_out);
    reactor->Finish(ToGrpcStatus(status));
  };
  absl::Status auth = auth_.Authorize(*context, CallRole::kWorker, "Push");
  if (!auth.ok()) {
    finish(auth);
    return reactor;
  }
  absl::StatusOr<PushRequestParts> parts = DecodePushRequest(*request);
  if (!parts.ok()) {
    finish(parts.status());
    return reactor;
  }
  // The push names its worker; with proofs on, the call must prove it is
  // that worker (server/worker_proof.h).
  if (absl::Status proven = auth_.proofs().Check(parts->round.job(), parts->worker, PresentedWorkerProof(*context),
                                                  absl::StrCat("a push as worker ", parts->worker));
      !proven.ok()) {
    finish(proven);
    return reactor;
  }
  const RoundKey key{parts->round.job(), parts->round.step(), parts->round.group(), parts->round.round()};
  core_->Push(key, parts->worker, std::move(parts->payload), absl::Now(),
              [reply, finish](absl::StatusOr<RoundResult> result) {
                if (!result.ok()) {
                  finish(result.status());
                  return;
                }
                // The answer's values are sent from the core's Update, which
                // the reply keeps alive until it is written.
                grpc::ByteBuffer encoded = EncodePushReply(result->update, result->contributors);
                reply->Swap(&encoded);
                finish(absl::OkStatus());
              });
  if (metrics != nullptr) {
    const AggregationCore::Stats stats = core_->stats();
    metrics->SetOpenRounds(stats.rounds_open, stats.bytes_held);
    metrics->SetParkedPushes(stats.parked_now);
  }
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
