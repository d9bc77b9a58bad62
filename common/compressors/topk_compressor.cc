// topk: the k coordinates of largest magnitude, exactly (common/topk.h order).
// Parameters: density (default 0.001) or k.
#include "absl/strings/str_cat.h"
#include "common/compressors/builtin.h"
#include "common/compressors/selection.h"
#include "common/topk.h"

namespace sketchfuse {
namespace {

class TopKCompressor final : public SparseCompressor {
 public:
  explicit TopKCompressor(SelectionParams selection) : selection_(selection) {}

  std::string spec() const override { return absl::StrCat("topk:", selection_.ToString()); }
  bool linear() const override { return false; }

  absl::StatusOr<Payload> Encode(absl::Span<const float> grad, const EncodeContext&) override {
    absl::Status size = CheckGroupSize(grad.size());
    if (!size.ok()) return size;
    return GatherSparse(grad, TopKIndices(grad, selection_.For(grad.size())));
  }

 protected:
  uint64_t MostEntries(uint64_t dim) const override { return selection_.For(dim); }

 private:
  SelectionParams selection_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Compressor>> MakeTopKCompressor(ParamReader& params) {
  absl::StatusOr<SelectionParams> selection = ReadSelection(params);
  if (!selection.ok()) return selection.status();
  return std::unique_ptr<Compressor>(new TopKCompressor(*selection));
}

}  // namespace sketchfuse
