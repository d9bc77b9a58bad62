// A shard's Prometheus metrics (served on --metrics_port):
//   sketchfuse_server_pushes_total{code}       pushes answered, by status code (refusals
//                                              by reason: resource_exhausted the caps,
//                                              aborted the step window)
//   sketchfuse_server_bytes_in_total           request bytes received by pushes
//   sketchfuse_server_bytes_out_total          reply bytes sent (updates)
//   sketchfuse_server_rounds_total{result}     rounds completed or failed
//   sketchfuse_server_rounds_open              rounds waiting for workers (updated by
//                                              every push and every round that ends)
//   sketchfuse_server_bytes_held               payload bytes held by open rounds and
//                                              parked pushes
//   sketchfuse_server_pushes_parked            pushes outside the step window waiting,
//                                              parked, for their round to open
//   sketchfuse_server_round_latency_seconds    first push to answer (histogram)
//   sketchfuse_server_decode_seconds           merging and decoding a round (histogram)
// NOTE: thread-safe (prometheus-cpp's metrics are).
#ifndef SKETCHFUSE_SERVER_SERVER_METRICS_H_
#define SKETCHFUSE_SERVER_SERVER_METRICS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"
#include "server/aggregation_core.h"

namespace sketchfuse {

class ServerMetrics {
 public:
  // Registers the metrics; `registry` must outlive this object.
  explicit ServerMetrics(prometheus::Registry& registry);

  // A push was answered with `status`.
  void OnPush(const absl::Status& status, uint64_t bytes_in, uint64_t bytes_out);
  // A round ended; also sets the open rounds and bytes held it reports.
  void OnRound(const RoundReport& report);
  void SetOpenRounds(uint64_t open, uint64_t bytes_held);
  void SetParkedPushes(uint64_t parked);

 private:
  prometheus::Family<prometheus::Counter>& pushes_;
  prometheus::Counter& bytes_in_;
  prometheus::Counter& bytes_out_;
  prometheus::Counter& rounds_completed_;
  prometheus::Counter& rounds_failed_;
  prometheus::Gauge& rounds_open_;
  prometheus::Gauge& bytes_held_;
  prometheus::Gauge& pushes_parked_;
  prometheus::Histogram& round_latency_;
  prometheus::Histogram& decode_time_;
};

}  // namespace sketchfuse

#endif  // SKETCHFUSE_SERVER_SERVER_METRICS_H_
