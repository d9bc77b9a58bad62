// The gRPC front of an aggregation shard: checks the bearer token, decodes
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
#include "server/server_metrics.h"

namespace sketchfuse {

// The metadata key and value prefix of the bearer token.
inline constexpr char kAuthorizationKey[] = "authorization";
inline constexpr char kBearerPrefix[] = "Bearer ";

// OK when `token` is empty (authentication off) or the call carries
// "authorization: Bearer <token>"; UNAUTHENTICATED otherwise. The comparison
// takes the same time wherever the first difference is.
absl::Status CheckBearerToken(const grpc::ServerContextBase& context,
                              const std::string& token);

class AggregatorService final : public v1::Aggregator::WithRawCallbackMethod_Push<v1::Aggregator::Service> {
 public:
  // `core` (and `metrics`, which may be null) must outlive the service. An
  // empty token turns authentication off.
  AggregatorService(AggregationCore* core, std::string bearer_token, ServerMetrics* metrics = nullptr)
      : core_(core), bearer_token_(std::move(bearer_token)), metrics_(metrics) {}

  // Answers when the round completes; refuses unauthenticated or malformed
  // requests before they reach the core.
  // `request` holds a v1.PushRequest, `reply` gets a v1.PushReply.
  grpc::ServerUnaryReactor* Push(grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
                                 grpc::ByteBuffer* reply) override;

 private:
  AggregationCore* core_;
  const std::string bearer_token_;
  ServerMetrics* const metrics_;
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
