#include "server/server_metrics.h"

#include <string>

#include "absl/strings/ascii.h"

namespace sketchfuse {
namespace {

// 100 us to about 100 s, by factors of about 3.
prometheus::Histogram::BucketBoundaries SecondsBuckets() {
  return {1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 0.1, 0.3, 1, 3, 10, 30, 100};
}

}  // namespace

ServerMetrics::ServerMetrics(prometheus::Registry& registry)
    : pushes_(prometheus::BuildCounter()
                  .Name("sketchfuse_server_pushes_total")
                  .Help("Pushes answered, by gRPC status code.")
                  .Register(registry)),
      bytes_in_(prometheus::BuildCounter()
                    .Name("sketchfuse_server_bytes_in_total")
                    .Help("Bytes of push requests received.")
                    .Register(registry)
                    .Add({})),
      bytes_out_(prometheus::BuildCounter()
                     .Name("sketchfuse_server_bytes_out_total")
                     .Help("Bytes of push replies (updates) sent.")
                     .Register(registry)
                     .Add({})),
      rounds_completed_(prometheus::BuildCounter()
                            .Name("sketchfuse_server_rounds_total")
                            .Help("Aggregation rounds ended, by result.")
                            .Register(registry)
                            .Add({{"result", "completed"}})),
      rounds_failed_(prometheus::BuildCounter()
                         .Name("sketchfuse_server_rounds_total")
                         .Help("Aggregation rounds ended, by result.")
                         .Register(registry)
                         .Add({{"result", "failed"}})),
      rounds_open_(prometheus::BuildGauge()
                       .Name("sketchfuse_server_rounds_open")
                       .Help("Rounds waiting for workers' pushes.")
                       .Register(registry)
                       .Add({})),
      bytes_held_(prometheus::BuildGauge()
                      .Name("sketchfuse_server_bytes_held")
                      .Help("Payload bytes held by open rounds and parked pushes.")
                      .Register(registry)
                      .Add({})),
      pushes_parked_(prometheus::BuildGauge()
                         .Name("sketchfuse_server_pushes_parked")
                         .Help("Pushes outside the step window waiting, parked, for their round to open.")
                         .Register(registry)
                         .Add({})),
      round_latency_(prometheus::BuildHistogram()
                         .Name("sketchfuse_server_round_latency_seconds")
                         .Help("Time from a round's first push to its answer or failure.")
                         .Register(registry)
                         .Add({}, SecondsBuckets())),
      decode_time_(prometheus::BuildHistogram()
                       .Name("sketchfuse_server_decode_seconds")
                       .Help("Time to merge a round's payloads and decode the aggregate.")
                       .Register(registry)
                       .Add({}, SecondsBuckets())) {}

void ServerMetrics::OnPush(const absl::Status& status, uint64_t bytes_in, uint64_t bytes_out) {
  pushes_.Add({{"code", absl::AsciiStrToLower(absl::StatusCodeToString(status.code()))}}).Increment();
  bytes_in_.Increment(static_cast<double>(bytes_in));
  bytes_out_.Increment(static_cast<double>(bytes_out));
}

void ServerMetrics::OnRound(const RoundReport& report) {
  (report.completed ? rounds_completed_ : rounds_failed_).Increment();
  round_latency_.Observe(absl::ToDoubleSeconds(report.latency));
  if (report.completed) decode_time_.Observe(absl::ToDoubleSeconds(report.decode_time));
  SetOpenRounds(report.rounds_open, report.bytes_held);
}

void ServerMetrics::SetOpenRounds(uint64_t open, uint64_t bytes_held) {
  rounds_open_.Set(static_cast<double>(open));
  bytes_held_.Set(static_cast<double>(bytes_held));
}

void ServerMetrics::SetParkedPushes(uint64_t parked) { pushes_parked_.Set(static_cast<double>(parked)); }

}  // namespace sketchfuse
