// Divergence: a worker whose training produces a NaN or an infinity, or a
// loss that has blown up, stops; it never trains through one. The checks run
// where they are cheap:
//   - the loss of each step, before the backward pass (the trainer): not
//     finite, or past BlownUpLoss (a run whose weights have exploded can go
//     on for a whole epoch at a loss of 1e13 without a NaN, and end at
//     chance reported as trained);
//   - each group's fused gradient, before the scheme encodes it (the step
//     pipeline, on the communication thread; host buffers only);
//   - each group's encoded payload, before it is sent (a residual can
//     overflow from finite gradients; worker/compression/group_compressors.h);
//   - each group's aggregated update, before it is applied (the trainer).
// The aggregation servers refuse a non-finite payload on their side
// (server/aggregation_core.h).
//
// A divergence travels as an absl::Status (DATA_LOSS: the model's numbers are
// lost) whose payload carries the structured record, so the runner that
// ends the run can tell it from every other failure (DivergenceOf) and
// write it into the summary. The job-wide notice that stops the other
// workers is worker/rpc/divergence_notice.h.
#ifndef SKETCHFUSE_WORKER_CORE_DIVERGENCE_H_
#define SKETCHFUSE_WORKER_CORE_DIVERGENCE_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace sketchfuse {

struct Divergence {
  int64_t step = 0;    // the (0-based) step in which it was seen
  int group = -1;      // the fused group; -1 for the loss
  std::string worker;  // the worker that saw it; empty until a runner names it
  std::string what;    // "loss", "gradient", "payload" or "update"
  int64_t index = -1;  // the first non-finite element of the group's values; -1 for the loss
  double value = 0;    // that value (NaN, +inf or -inf)

  // One line, e.g. "worker-1 diverged at step 5: group 2's fused gradient
  // holds a non-finite value (element 17 = nan)".
  std::string Describe() const;

  bool operator==(const Divergence& o) const;
};

// The status of a divergence: DATA_LOSS, the message Describe(), and the
// record as its payload (DivergenceOf reads it back).
absl::Status DivergenceError(const Divergence& divergence);

// The divergence a status carries, if any (OK and other errors: nullopt).
std::optional<Divergence> DivergenceOf(const absl::Status& status);

// The record as one line of text and back (the status payload and the
// job-wide notice): nullopt for text that is not a record.
std::string EncodeDivergence(const Divergence& divergence);
std::optional<Divergence> DecodeDivergence(absl::string_view text);

// A classifier's cross-entropy loss past kBlownUpLossFactor times a uniform
// guess's (ln C nats for C classes: every class at probability 1/C) means
// its weights have exploded: the loss of a batch is then dozens of nats per
// example and climbing, and no run behind docs/BENCHMARKS.md came back from
// one (their raw output: bench/data/ in git history, at commit ca70cd0). The
// worst loss of a run that recovered there was 11.7 (a reporting window's
// mean, ten classes), 20 times below the bound (230 nats for ten classes);
// the runs past it ended at chance.
inline constexpr double kBlownUpLossFactor = 100;

// The bound of a `num_classes`-class classifier's loss: kBlownUpLossFactor ·
// ln(num_classes) (num_classes >= 2).
double BlownUpLoss(int64_t num_classes);

// OK if `loss` is finite and at most BlownUpLoss(num_classes); else the
// divergence of step `step` ("loss", its value the loss).
absl::Status CheckLoss(int64_t step, double loss, int64_t num_classes);

// OK if every value is finite; else the divergence of `group` in step `step`
// at the first non-finite value (common/payload.h FirstNonFinite), `what`
// being "gradient" or "update". O(values.size()), vectorized.
absl::Status CheckFiniteValues(absl::string_view what, int64_t step, int group, absl::Span<const float> values);

// Why a step that failed with `error` failed, if it was a divergence: the
// one `error` carries, else the one `posted` returns (a divergence another
// worker announced, whose departure made this worker's step fail; `posted`
// may be empty). Its worker is `worker` when it names none. nullopt: the
// failure is not a divergence.
std::optional<Divergence> DivergenceBehind(const absl::Status& error,
                                           const std::function<std::optional<Divergence>()>& posted,
                                           const std::string& worker);

}  // namespace sketchfuse

#endif  // SKETCHFUSE_WORKER_CORE_DIVERGENCE_H_
