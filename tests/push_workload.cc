#include "tests/push_workload.h"

#include "absl/strings/str_format.h"
#include "common/compressor_registry.h"
#include "common/sketch_hash.h"
#include "common/topk.h"

namespace sketchfuse {

absl::StatusOr<Payload> WorkerPayload(const v1::GroupConfig& group, uint32_t worker,
                                      uint64_t step) {
  absl::StatusOr<std::unique_ptr<Compressor>> c =
      CompressorRegistry::Default().Create(group.compressor());
  if (!c.ok()) return c.status();
  std::vector<float> g(group.dim());
  const uint64_t seed = SplitMix64(worker, step * 1000003ull + group.group());
  for (size_t i = 0; i < g.size(); ++i) {
    const uint64_t bits = SplitMix64(seed, i);
    // Mostly small values with a few large ones.
    const float magnitude = (bits % 97 == 0) ? 10.0f : static_cast<float>((bits >> 40) % 1000) * 1e-3f;
    g[i] = (bits & 1) ? -magnitude : magnitude;
  }
  return (*c)->Encode(g, {step, {}});
}

absl::StatusOr<Update> ExpectedUpdate(const v1::GroupConfig& group, uint32_t world_size,
                                      uint64_t step) {
  Payload sum;
  for (uint32_t w = 0; w < world_size; ++w) {
    absl::StatusOr<Payload> p = WorkerPayload(group, w, step);
    if (!p.ok()) return p.status();
    if (w == 0) {
      sum = *std::move(p);
    } else {
      absl::Status merged = MergeInto(*p, &sum);
      if (!merged.ok()) return merged;
    }
  }
  absl::StatusOr<std::unique_ptr<Compressor>> c =
      CompressorRegistry::Default().Create(group.compressor());
  if (!c.ok()) return c.status();
  absl::StatusOr<Update> update = (*c)->Decode(sum);
  if (!update.ok() || group.reselect_top_k() == 0 || update->dense ||
      update->indices.size() <= group.reselect_top_k()) {
    return update;
  }
  const std::vector<uint32_t> keep = TopKIndices(update->values, group.reselect_top_k());
  Update out;
  out.dim = update->dim;
  for (uint32_t j : keep) {
    out.indices.push_back(update->indices[j]);
    out.values.push_back(update->values[j]);
  }
  return out;
}

std::string UpdateChecksum(const Update& update) {
  double index_sum = 0, value_sum = 0;
  for (uint32_t i : update.indices) index_sum += i;
  for (float v : update.values) value_sum += v;
  return absl::StrFormat("n=%d idx=%.0f val=%.9e", update.values.size(), index_sum, value_sum);
}

}  // namespace sketchfuse
