#include "worker/ps_scheme.h"

#include "absl/strings/str_cat.h"
#include "common/compressor_registry.h"
#include "common/error_feedback.h"

namespace sketchfuse {

absl::Status CheckSchemeCompressor(const std::string& scheme, const std::string& compressor) {
  absl::StatusOr<CompressorSpec> spec = ParseCompressorSpec(compressor);
  if (!spec.ok()) return spec.status();
  const std::map<std::string, std::string> required = {
      {"sketch_ps", "count_sketch"}, {"topk_ps", "topk"}, {"dense_ps", "dense"}};
  auto it = required.find(scheme);
  if (it == required.end()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "unknown scheme '", scheme, "'; the centralized schemes are sketch_ps, topk_ps, dense_ps"));
  }
  if (spec->name != it->second) {
    return absl::InvalidArgumentError(absl::StrCat("scheme ", scheme, " needs the ", it->second,
                                                   " compressor; got '", compressor, "'"));
  }
  return absl::OkStatus();
}

bool UsesMomentumCorrection(const v1::RunConfig& run) {
  return run.momentum() > 0 && run.scheme() != "dense_ps";
}

absl::StatusOr<std::unique_ptr<PsScheme>> PsScheme::Create(const v1::JoinReply& joined,
                                                          RpcChannelOptions options, RetryPolicy policy) {
  const v1::JobConfig& job = joined.job();
  if (absl::Status s = CheckSchemeCompressor(job.run().scheme(), job.run().compressor()); !s.ok()) return s;
  if (joined.shard_of_group_size() != job.groups_size()) {
    return absl::InvalidArgumentError(absl::StrCat("the shard map covers ", joined.shard_of_group_size(),
                                                   " groups; the job has ", job.groups_size()));
  }
  std::vector<std::string> addresses(joined.shards_size());
  for (const v1::ShardAddress& shard : joined.shards()) {
    if (shard.shard() >= addresses.size()) {
      return absl::InvalidArgumentError(absl::StrCat("shard index ", shard.shard(), " out of range"));
    }
    addresses[shard.shard()] = shard.address();
  }
  std::vector<uint32_t> group_ids;
  std::vector<int> shard_of_group;
  std::vector<std::unique_ptr<Compressor>> compressors;
  for (int g = 0; g < job.groups_size(); ++g) {
    const v1::GroupConfig& group = job.groups(g);
    absl::StatusOr<std::unique_ptr<Compressor>> compressor =
        CompressorRegistry::Default().Create(group.compressor());
    if (!compressor.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("group ", group.group(), ": ", compressor.status().message()));
    }
    std::unique_ptr<Compressor> stack = *std::move(compressor);
    if (job.run().error_feedback()) stack = WithErrorFeedback(std::move(stack));
    if (UsesMomentumCorrection(job.run())) {
      absl::StatusOr<std::unique_ptr<Compressor>> with_momentum = WithMomentum(std::move(stack), job.run().momentum());
      if (!with_momentum.ok()) return with_momentum.status();
      stack = *std::move(with_momentum);
    }
    compressors.push_back(std::move(stack));
    group_ids.push_back(group.group());
    if (joined.shard_of_group(g) >= addresses.size()) {
      return absl::InvalidArgumentError(absl::StrCat("group ", group.group(), " maps to shard ",
                                                     joined.shard_of_group(g), " of ", addresses.size()));
    }
    shard_of_group.push_back(static_cast<int>(joined.shard_of_group(g)));
  }
  auto transport = std::make_unique<PsTransport>(addresses, std::move(options), policy);
  return std::unique_ptr<PsScheme>(new PsScheme(job.run().scheme(), job.job(), joined.rank(),
                                                std::move(group_ids), std::move(shard_of_group),
                                                std::move(compressors), std::move(transport)));
}

PsScheme::PsScheme(std::string scheme, std::string job, uint32_t rank, std::vector<uint32_t> group_ids,
                   std::vector<int> shard_of_group, std::vector<std::unique_ptr<Compressor>> compressors,
                   std::unique_ptr<PsTransport> transport)
    : scheme_(std::move(scheme)),
      job_(std::move(job)),
      rank_(rank),
      group_ids_(std::move(group_ids)),
      shard_of_group_(std::move(shard_of_group)),
      compressors_(std::move(compressors)),
      transport_(std::move(transport)) {}

void PsScheme::Exchange(uint64_t step, int group, absl::Span<const float> grad, ExchangeDone done) {
  if (group < 0 || group >= static_cast<int>(compressors_.size())) {
    done(absl::InvalidArgumentError(absl::StrCat("group index ", group, " out of range")));
    return;
  }
  EncodeContext context;
  context.step = step;
  absl::StatusOr<Payload> payload = compressors_[group]->Encode(grad, context);
  if (!payload.ok()) {
    done(payload.status());
    return;
  }
  const size_t dense_bytes = grad.size() * sizeof(float);
  transport_->Push(shard_of_group_[group], job_, step, group_ids_[group], rank_, *payload,
                   [done = std::move(done), dense_bytes](absl::StatusOr<PushOutcome> outcome) {
                     if (!outcome.ok()) {
                       done(outcome.status());
                       return;
                     }
                     ExchangeResult result;
                     result.update = std::move(outcome->update);
                     result.bytes_sent = outcome->bytes_sent;
                     result.dense_bytes = dense_bytes;
                     done(std::move(result));
                   });
}

absl::Status PsScheme::OnApplied(int group, const Update& update) {
  if (group < 0 || group >= static_cast<int>(compressors_.size())) {
    return absl::InvalidArgumentError(absl::StrCat("group index ", group, " out of range"));
  }
  return compressors_[group]->OnApplied(update);
}

namespace {

// The decorators of a group's compressor stack (either may be absent).
std::pair<ErrorFeedback*, Momentum*> Decorators(Compressor* stack) {
  ErrorFeedback* ef = nullptr;
  Momentum* momentum = nullptr;
  while (auto* decorator = dynamic_cast<CompressorDecorator*>(stack)) {
    if (auto* e = dynamic_cast<ErrorFeedback*>(decorator)) ef = e;
    if (auto* m = dynamic_cast<Momentum*>(decorator)) momentum = m;
    stack = decorator->inner();
  }
  return {ef, momentum};
}

}  // namespace

// Two entries per group: the error-feedback residual, then the velocity.
std::vector<std::vector<float>> PsScheme::SaveState() const {
  std::vector<std::vector<float>> state;
  for (const auto& compressor : compressors_) {
    auto [ef, momentum] = Decorators(compressor.get());
    state.emplace_back();
    if (ef != nullptr) state.back().assign(ef->residual().begin(), ef->residual().end());
    state.emplace_back();
    if (momentum != nullptr) state.back().assign(momentum->velocity().begin(), momentum->velocity().end());
  }
  return state;
}

absl::Status PsScheme::RestoreState(const std::vector<std::vector<float>>& state) {
  if (state.size() != 2 * compressors_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("saved state has ", state.size(), " entries; the job's ",
                                                   compressors_.size(), " groups need ", 2 * compressors_.size()));
  }
  for (size_t g = 0; g < compressors_.size(); ++g) {
    auto [ef, momentum] = Decorators(compressors_[g].get());
    const std::vector<float>& residual = state[2 * g];
    const std::vector<float>& velocity = state[2 * g + 1];
    if ((!residual.empty() && ef == nullptr) || (!velocity.empty() && momentum == nullptr)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "saved state of group ", g, " has error-feedback or momentum state this run does not keep"));
    }
    if (ef != nullptr) ef->RestoreResidual(residual);
    if (momentum != nullptr) momentum->RestoreVelocity(velocity);
  }
  return absl::OkStatus();
}

}  // namespace sketchfuse
