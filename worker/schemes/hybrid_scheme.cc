#include "worker/schemes/hybrid_scheme.h"

#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/error_text.h"
#include "proto/run_config.h"
#include "worker/schemes/collective_scheme.h"
#include "worker/schemes/ps_scheme.h"
#include "worker/schemes/scheme_registry.h"

namespace sketchfuse {

absl::StatusOr<std::unique_ptr<HybridScheme>> HybridScheme::Create(const v1::JoinReply& joined,
                                                                  const TransportFactory& make_transport,
                                                                  Collective* collective, HybridOptions options) {
  const v1::JobConfig& job = joined.job();
  if (SchemeRoute(job.run().scheme()) != Route::kHybrid) {
    return absl::InvalidArgumentError(absl::StrCat("'", job.run().scheme(), "' is not a hybrid scheme"));
  }
  const SchemeInfo scheme = *FindScheme(job.run().scheme());
  if (collective == nullptr) return absl::InvalidArgumentError("the hybrid needs a collective for its fallback");
  if (job.world_size() != static_cast<uint32_t>(collective->size())) {
    return absl::InvalidArgumentError(absl::StrCat("the job has ", job.world_size(), " workers; the collective ",
                                                   collective->size(), " ranks"));
  }
  if (options.probe_every < 1) return absl::InvalidArgumentError("probe_every must be >= 1");
  if (KeepsStateWithTheSum(job.run().compressor())) {
    return absl::InvalidArgumentError(absl::StrCat(
        scheme.name, " cannot run ", QuoteField(job.run().compressor()),
        ": it keeps state where the sum is (on the aggregation servers), which a fallback would lose; use "
        "method=peel, or a centralized or decentralized scheme"));
  }
  // The centralized route pushes the same job's sketches to its servers
  // (and refuses what the scheme's traits do not allow, a second round).
  absl::StatusOr<std::unique_ptr<PsScheme>> centralized = PsScheme::Create(joined, make_transport);
  if (!centralized.ok()) return centralized.status();
  // A two-round fallback sends the residuals' exact values.
  if (job.run().second_round() && !job.run().error_feedback()) {
    return absl::InvalidArgumentError(absl::StrCat(scheme.name, " keeps error feedback; the run turns it off"));
  }
  absl::StatusOr<std::vector<uint64_t>> selection = JobSelectionSizes(job);
  if (!selection.ok()) return selection.status();
  absl::StatusOr<std::vector<uint64_t>> reselect = JobFinalRoundTopK(job);
  if (!reselect.ok()) return reselect.status();
  return std::unique_ptr<HybridScheme>(new HybridScheme(scheme, *std::move(centralized), collective,
                                                        std::move(options), *std::move(selection),
                                                        *std::move(reselect), RoundsPerStep(job.run())));
}


void HybridScheme::Log(const std::string& line) const {
  if (options_.log) {
    options_.log(line);
  } else {
    std::cerr << line << std::endl;
  }
}

void HybridScheme::Exchange(uint64_t step, int group, GradientView grad, absl::Span<const float> params,
                            ExchangeDone done) {
  if (mode_ == Mode::kCentralized) {
    centralized_->Exchange(step, group, grad, params, std::move(done));
    return;
  }
  const absl::Time start = absl::Now();
  absl::StatusOr<std::shared_ptr<const Payload>> payload = centralized_->Encode(step, group, grad, params);
  if (!payload.ok()) {
    done(payload.status());
    return;
  }
  const TraceSpan compress{"compress", start, absl::Now()};
  absl::StatusOr<ExchangeResult> result = ExchangeByCollective(step, group, **payload, grad.size() * sizeof(float));
  if (result.ok()) result->spans.insert(result->spans.begin(), compress);
  done(std::move(result));
}

absl::StatusOr<ExchangeResult> HybridScheme::ExchangeByCollective(uint64_t step, int group, const Payload& payload,
                                                                  size_t dense_bytes) {
  GroupInput input;
  input.step = step;
  input.group = group;
  input.payload = &payload;
  input.k = selection_[group];
  input.rounds = rounds_;
  input.reselect_top_k = reselect_[group];
  // The residual, untouched until the step's update is applied (error
  // feedback on, checked at Create for a second round).
  if (rounds_ > 1) {
    input.exact_values = [this, group](absl::Span<const uint32_t> candidates) {
      return centralized_->compressors().ExactValuesAt(group, GradientView(), candidates);
    };
  }
  input.decode = [this, group](Payload sum) { return centralized_->compressors().Decode(group, std::move(sum)); };
  input.cap_exact_values = [this, group, k = input.k](absl::Span<float> values) {
    return centralized_->compressors().CapExactValues(group, values, k);
  };
  const uint64_t bytes_before = collective_->bytes_sent();
  const uint64_t received_before = collective_->bytes_received();
  const absl::Time start = absl::Now();
  absl::StatusOr<GroupOutcome> outcome = scheme_.algorithm(*collective_, input);
  if (!outcome.ok()) {
    return absl::Status(outcome.status().code(), absl::StrCat("the fallback of group ", group, " at step ", step,
                                                              ": ", outcome.status().message()));
  }
  ExchangeResult result;
  result.update = std::move(outcome->update);
  result.bytes_sent = collective_->bytes_sent() - bytes_before;
  result.bytes_received = collective_->bytes_received() - received_before;
  result.dense_bytes = dense_bytes;
  result.route = Route::kDecentralized;
  result.spans = CollectiveSpans(start, absl::Now(), outcome->decode_time);
  return result;
}

absl::Status HybridScheme::Reconcile(uint64_t step, std::vector<absl::StatusOr<ExchangeResult>>& results) {
  if (mode_ == Mode::kCentralized) {
    // One flag per group: did it fail on any worker?
    std::vector<float> failed(results.size(), 0.0f);
    std::string first_error;
    for (size_t g = 0; g < results.size(); ++g) {
      if (!results[g].ok()) {
        failed[g] = 1.0f;
        if (first_error.empty()) first_error = results[g].status().ToString();
      }
    }
    if (absl::Status s = collective_->AllReduceSum(absl::MakeSpan(failed)); !s.ok()) {
      return absl::Status(s.code(), absl::StrCat("agreeing on the failed groups of step ", step, ": ", s.message()));
    }
    std::vector<int> redo;
    for (size_t g = 0; g < failed.size(); ++g) {
      if (failed[g] > 0) redo.push_back(static_cast<int>(g));
    }
    if (redo.empty()) return absl::OkStatus();
    Log(absl::StrCat(scheme_.name, ": step ", step, ": the aggregation servers failed group(s) ",
                     absl::StrJoin(redo, ","),
                     first_error.empty() ? " on another worker" : absl::StrCat(" (here: ", first_error, ")"),
                     "; redoing them with ", scheme_.hybrid_of.decentralized, " and staying decentralized"));
    for (int g : redo) {
      const Payload* payload = centralized_->payload_of(g, step);
      if (payload == nullptr) {
        // This worker never encoded the group (its encode failed): nothing
        // to redo with; the step fails here with that error.
        return results[g].ok() ? absl::InternalError(absl::StrCat("group ", g, " has no payload for step ", step))
                               : results[g].status();
      }
      results[g] = ExchangeByCollective(step, g, *payload, 4 * payload->dim);
    }
    mode_ = Mode::kDecentralized;
    steps_decentralized_ = 0;
    ++switches_;
    return absl::OkStatus();
  }
  if (++steps_decentralized_ % options_.probe_every != 0) return absl::OkStatus();
  const absl::Status probe = centralized_->transport().ProbeShards(options_.probe_timeout);
  float healthy = probe.ok() ? 1.0f : 0.0f;
  if (absl::Status s = collective_->AllReduceSum(absl::MakeSpan(&healthy, 1)); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("agreeing on the servers' health at step ", step, ": ", s.message()));
  }
  if (healthy < static_cast<float>(collective_->size())) return absl::OkStatus();
  centralized_->transport().Reconnect();
  mode_ = Mode::kCentralized;
  ++switches_;
  Log(absl::StrCat(scheme_.name, ": step ", step, ": every worker sees every aggregation server healthy; returning to ",
                   scheme_.hybrid_of.centralized));
  return absl::OkStatus();
}

}  // namespace sketchfuse
