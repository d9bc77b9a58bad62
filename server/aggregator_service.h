// The gRPC front of an aggregation shard: checks the caller (call_auth.h), decodes
// v1.Aggregator requests to plain types and hands pushes to AggregationCore.
// It holds no aggregation logic of its own. Push is served as raw bytes
// through proto/push_codec.h, which copies a payload's values once on the way
// in and sends the answer's values from where the core keeps them.
#ifndef SKETCHFUSE_SERVER_AGGREGATOR_SERVICE_H_
#define SKETCHFUSE_SERVER_AGGREGATOR_SERVICE_H_

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "proto/aggregator.grpc.pb.h"
#include "proto/grpc_status.h"
#include "server/aggregation_core.h"
#include "server/call_auth.h"
#include "server/server_metrics.h"

namespace sketchfuse {

class AggregatorService final : public v1::Aggregator::WithRawCallbackMethod_Push<v1::Aggregator::Service> {
 public:
  // `core` (and `metrics`, which may be null) must outlive the service.
  // Push is a workers' RPC (server/call_auth.h).
  AggregatorService(AggregationCore* core, CallAuthConfig auth, ServerMetrics* metrics = nullptr)
      : core_(core), auth_(std::move(auth)), metrics_(metrics) {}
  // One token for every role; an empty token turns authentication off.
  AggregatorService(AggregationCore* core, std::string bearer_token, ServerMetrics* metrics = nullptr)
      : AggregatorService(core, CallAuthConfig{std::move(bearer_token)}, metrics) {}

  // Answers when the round completes; refuses unauthenticated or malformed
  // requests before they reach the core.
  // `request` holds a v1.PushRequest, `reply` gets a v1.PushReply.
  grpc::ServerUnaryReactor* Push(grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
                                 grpc::ByteBuffer* reply) override;

  // The bytes of the pushes answered so far: requests received, replies
  // sent (0 for a refused push), as the metrics count them.
  struct Traffic {
    uint64_t pushes = 0;
    uint64_t bytes_in = 0;
    uint64_t bytes_out = 0;
  };
  Traffic traffic() const {
    return {pushes_.load(std::memory_order_relaxed), bytes_in_.load(std::memory_order_relaxed),
            bytes_out_.load(std::memory_order_relaxed)};
  }

 private:
  AggregationCore* core_;
  const CallAuth auth_;
  ServerMetrics* const metrics_;
  std::atomic<uint64_t> pushes_{0}, bytes_in_{0}, bytes_out_{0};
};

// Calls core->ExpireRounds(absl::Now()) every `period` on its own thread, so
// overdue rounds fail with DEADLINE_EXCEEDED. Stops when destroyed.
class RoundReaper {
 public:
  RoundReaper(AggregationCore* core, absl::Duration period);
  ~RoundReaper();
  RoundReaper(const RoundReaper&) = delete;
  RoundReaper& operator=(const RoundReaper&) = delete;

 private:
  AggregationCore* core_;
  const absl::Duration period_;
  std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace sketchfuse

#endif  // SKETCHFUSE_SERVER_AGGREGATOR_SERVICE_H_
