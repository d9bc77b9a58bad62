// importance: importance-weighted pruning (Cheng & Xu): the k coordinates with
// the largest |g_i| / (|w_i| + epsilon), where w are the group's parameters
// (EncodeContext::params). The payload carries the gradient values there.
// Parameters: density (default 0.001) or k; epsilon (default 1e-8).
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/compressors/builtin.h"
#include "common/compressors/selection.h"
#include "common/topk.h"

namespace sketchfuse {
namespace {

class ImportanceCompressor final : public SparseCompressor {
 public:
  ImportanceCompressor(SelectionParams selection, double epsilon)
      : selection_(selection), epsilon_(static_cast<float>(epsilon)) {}

  std::string spec() const override {
    return absl::StrCat("importance:", selection_.ToString(), ",epsilon=", epsilon_);
  }
  bool linear() const override { return false; }

  absl::StatusOr<Payload> Encode(absl::Span<const float> grad,
                                 const EncodeContext& context) override {
    absl::Status size = CheckGroupSize(grad.size());
    if (!size.ok()) return size;
    if (context.params.size() != grad.size()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "importance needs the group's parameter values (EncodeContext.params) with one "
          "value per gradient element: got ",
          context.params.size(), " for ", grad.size()));
    }
    std::vector<uint32_t> keys(grad.size());
    for (size_t i = 0; i < grad.size(); ++i) {
      keys[i] = MagnitudeKey(std::abs(grad[i]) / (std::abs(context.params[i]) + epsilon_));
    }
    return GatherSparse(grad, TopKIndicesByKey(keys, selection_.For(grad.size())));
  }

 protected:
  uint64_t MostEntries(uint64_t dim) const override { return selection_.For(dim); }

 private:
  SelectionParams selection_;
  float epsilon_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Compressor>> MakeImportanceCompressor(ParamReader& params) {
  absl::StatusOr<SelectionParams> selection = ReadSelection(params);
  if (!selection.ok()) return selection.status();
  absl::StatusOr<double> epsilon = params.Double("epsilon", 1e-8, 0.0, 1.0);
  if (!epsilon.ok()) return epsilon.status();
  return std::unique_ptr<Compressor>(new ImportanceCompressor(*selection, *epsilon));
}

}  // namespace sketchfuse
