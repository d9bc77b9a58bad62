#include "worker/schemes/ps_scheme.h"

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "proto/run_config.h"
#include "worker/compression/settlement.h"
#include "worker/rounds/exchange_rounds.h"
#include "worker/schemes/scheme_registry.h"

namespace sketchfuse {
absl::StatusOr<ShardRoute> RouteToShards(const v1::JoinReply& joined) {
  const v1::JobConfig& job = joined.job();
  if (joined.shard_of_group_size() != job.groups_size()) {
    return absl::InvalidArgumentError(absl::StrCat("the shard map covers ", joined.shard_of_group_size(),
                                                   " groups; the job has ", job.groups_size()));
  }
  ShardRoute route;
  route.addresses.resize(joined.shards_size());
  for (const v1::ShardAddress& shard : joined.shards()) {
    if (shard.shard() >= route.addresses.size()) {
      return absl::InvalidArgumentError(absl::StrCat("shard index ", shard.shard(), " out of range"));
    }
    route.addresses[shard.shard()] = shard.address();
  }
  for (int g = 0; g < job.groups_size(); ++g) {
    if (joined.shard_of_group(g) >= route.addresses.size()) {
      return absl::InvalidArgumentError(absl::StrCat("group ", job.groups(g).group(), " maps to shard ",
                                                     joined.shard_of_group(g), " of ", route.addresses.size()));
    }
    route.shard_of_group.push_back(static_cast<int>(joined.shard_of_group(g)));
  }
  return route;
}

absl::StatusOr<std::unique_ptr<PsScheme>> PsScheme::Create(const v1::JoinReply& joined,
                                                          const TransportFactory& make_transport) {
  const v1::JobConfig& job = joined.job();
  if (absl::Status s = CheckRunScheme(job.run()); !s.ok()) return s;
  // The hybrid's centralized side is this scheme too.
  if (SchemeRoute(job.run().scheme()) == Route::kDecentralized) {
    return absl::InvalidArgumentError(absl::StrCat("'", job.run().scheme(), "' is not a centralized scheme"));
  }
  absl::StatusOr<ShardRoute> route = RouteToShards(joined);
  if (!route.ok()) return route.status();
  absl::StatusOr<GroupCompressors> compressors = CompressorsFor(job);
  if (!compressors.ok()) return compressors.status();
  std::vector<uint32_t> group_ids;
  for (const v1::GroupConfig& group : job.groups()) group_ids.push_back(group.group());
  if (!make_transport) return absl::InvalidArgumentError("no transport to the shards");
  std::unique_ptr<PsTransport> transport = make_transport(route->addresses);
  if (transport == nullptr || transport->num_shards() != static_cast<int>(route->addresses.size())) {
    return absl::InvalidArgumentError(absl::StrCat("the transport does not reach the job's ", route->addresses.size(),
                                                   " shards"));
  }
  auto scheme = std::unique_ptr<PsScheme>(new PsScheme(job.run().scheme(), job.job(), joined.rank(),
                                                       std::move(group_ids), std::move(route->shard_of_group),
                                                       *std::move(compressors), std::move(transport)));
  scheme->rounds_ = RoundsPerStep(job.run());
  absl::StatusOr<std::vector<uint64_t>> selection = JobSelectionSizes(job);
  if (!selection.ok()) return selection.status();
  scheme->selection_ = *std::move(selection);
  return scheme;
}

PsScheme::PsScheme(std::string scheme, std::string job, uint32_t rank, std::vector<uint32_t> group_ids,
                   std::vector<int> shard_of_group, GroupCompressors compressors,
                   std::unique_ptr<PsTransport> transport)
    : scheme_(std::move(scheme)),
      job_(std::move(job)),
      rank_(rank),
      group_ids_(std::move(group_ids)),
      shard_of_group_(std::move(shard_of_group)),
      compressors_(std::move(compressors)),
      last_payloads_(compressors_.size()),
      kept_(compressors_.size()),
      last_payload_steps_(compressors_.size(), UINT64_MAX),
      reducer_(std::make_unique<ShardReducer>(transport.get(), job_, rank_, group_ids_, shard_of_group_)),
      transport_(std::move(transport)) {}

absl::StatusOr<std::shared_ptr<const Payload>> PsScheme::Encode(uint64_t step, int group, GradientView grad,
                                                                absl::Span<const float> params) {
  last_payloads_[group].reset();
  last_payload_steps_[group] = UINT64_MAX;
  absl::StatusOr<Payload> payload = compressors_.Encode(group, grad, EncodeContext{step, params});
  if (!payload.ok()) return payload.status();
  last_payloads_[group] = std::make_shared<const Payload>(*std::move(payload));
  last_payload_steps_[group] = step;
  return last_payloads_[group];
}

void PsScheme::Exchange(uint64_t step, int group, GradientView grad, absl::Span<const float> params,
                        ExchangeDone done) {
  const absl::Time start = absl::Now();
  absl::StatusOr<std::shared_ptr<const Payload>> payload = Encode(step, group, grad, params);
  if (!payload.ok()) {
    done(payload.status());
    return;
  }
  const TraceSpan compress{"compress", start, absl::Now()};
  RoundsInput input;
  input.step = step;
  input.group = group;
  input.rounds = rounds_;
  input.payload = *std::move(payload);
  // The values a later round sums: what this worker encoded (its residual,
  // on the host or the GPU), which stays put until the group's update is
  // applied.
  if (rounds_ > 1) {
    input.exact_values = [this, group, grad](absl::Span<const uint32_t> candidates) {
      return compressors_.ExactValuesAt(group, grad, candidates);
    };
  }
  // The shard applies at most k of them: the release cap bounds those.
  input.cap_exact_values = [this, group](absl::Span<float> values) {
    return compressors_.CapExactValues(group, values, selection_[group]);
  };
  input.low_rank = compressors_.low_rank(group);
  kept_[group].reset();
  ExchangeRounds(*reducer_, std::move(input),
                 [this, group, done = std::move(done), compress, dense_bytes = grad.size() * sizeof(float)](
                     absl::StatusOr<RoundsOutcome> outcome) {
                   if (!outcome.ok()) {
                     done(outcome.status());
                     return;
                   }
                   // Read by OnApplied, after the step's exchanges are done.
                   kept_[group] = std::move(outcome->kept);
                   ExchangeResult result;
                   result.update = std::move(outcome->update);
                   result.bytes_sent = outcome->bytes_sent;
                   result.bytes_received = outcome->bytes_received;
                   result.dense_bytes = dense_bytes;
                   result.route = Route::kCentralized;
                   result.spans.push_back(compress);
                   result.spans.insert(result.spans.end(), outcome->spans.begin(), outcome->spans.end());
                   done(std::move(result));
                 });
}

absl::Status PsScheme::RestoreState(const std::vector<GroupState>& state) {
  for (size_t g = 0; g < state.size(); ++g) {
    // A low-rank group's method state is this worker's warm start.
    const bool low_rank = static_cast<int>(g) < compressors_.size() && compressors_.low_rank(static_cast<int>(g));
    if (!state[g].method_state.empty() && !low_rank) {
      return absl::InvalidArgumentError(absl::StrCat(
          "saved state of group ", g, " has method state; on the centralized route the shards keep it"));
    }
  }
  return compressors_.RestoreState(state);
}

absl::Status PsScheme::OnApplied(int group, const Update& update) {
  if (absl::Status s = compressors_.CheckGroup(group); !s.ok()) return s;
  // Without the payload (its encode failed; the hybrid redid the group on
  // the collective) every coordinate of the update is released.
  if (last_payloads_[group] == nullptr) return compressors_.Settle(group, SettleAt(update));
  if (kept_[group].has_value()) {
    absl::Status settled = compressors_.Settle(group, SettleLowRank(*std::move(kept_[group])));
    kept_[group].reset();
    return settled;
  }
  return compressors_.Settle(group, SettleExchange(*last_payloads_[group], update, rounds_));
}

}  // namespace sketchfuse
