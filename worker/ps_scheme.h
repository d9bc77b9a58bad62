// The centralized schemes: each group is encoded with the job's compressor
// (under error feedback when the run asks for it) and pushed to the shard
// that owns it; the shard's answer is the update.
//   sketch_ps  Count-Sketch payloads, summed on the server, decoded to top-k
//   topk_ps    local top-k, unioned and re-selected on the server (BytePS-style)
//   dense_ps   dense payloads, summed (the uncompressed baseline of this route)
#ifndef SKETCHFUSE_WORKER_PS_SCHEME_H_
#define SKETCHFUSE_WORKER_PS_SCHEME_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/compressor.h"
#include "proto/coordinator.pb.h"
#include "worker/aggregation_scheme.h"
#include "worker/ps_transport.h"

namespace sketchfuse {

// The compressor a scheme requires: INVALID_ARGUMENT when `compressor`'s
// name does not fit `scheme` (or the scheme is not a PS scheme).
absl::Status CheckSchemeCompressor(const std::string& scheme, const std::string& compressor);

// Where momentum lives. Compressed schemes keep it on the worker, before
// compression, with momentum-factor masking (DGC's momentum correction): the
// velocity is accumulated per group and zeroed where an update was applied.
// Applying momentum after aggregation instead amplifies the bursts in which
// error feedback releases its residual, and costs accuracy. The dense scheme
// leaves momentum to the optimizer, which is exact there.
bool UsesMomentumCorrection(const v1::RunConfig& run);

class PsScheme final : public AggregationScheme {
 public:
  // Builds one compressor per group of the joined job, and a transport to
  // its shards. INVALID_ARGUMENT for a job this scheme cannot run.
  static absl::StatusOr<std::unique_ptr<PsScheme>> Create(const v1::JoinReply& joined,
                                                          RpcChannelOptions options, RetryPolicy policy);

  std::string name() const override { return scheme_; }
  void Exchange(uint64_t step, int group, absl::Span<const float> grad, ExchangeDone done) override;
  absl::Status OnApplied(int group, const Update& update) override;
  std::vector<std::vector<float>> SaveState() const override;
  absl::Status RestoreState(const std::vector<std::vector<float>>& state) override;

 private:
  PsScheme(std::string scheme, std::string job, uint32_t rank, std::vector<uint32_t> group_ids,
           std::vector<int> shard_of_group, std::vector<std::unique_ptr<Compressor>> compressors,
           std::unique_ptr<PsTransport> transport);

  const std::string scheme_;
  const std::string job_;
  const uint32_t rank_;
  const std::vector<uint32_t> group_ids_;
  const std::vector<int> shard_of_group_;
  std::vector<std::unique_ptr<Compressor>> compressors_;  // one per group, used on the comm thread
  std::unique_ptr<PsTransport> transport_;
};

}  // namespace sketchfuse

#endif  // SKETCHFUSE_WORKER_PS_SCHEME_H_
