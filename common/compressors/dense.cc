// dense: the identity "compression", the baseline every scheme is measured
// against. Payloads are the gradient itself and add up.
#include "absl/strings/str_cat.h"
#include "common/compressors/builtin.h"

namespace sketchfuse {
namespace {

class DenseCompressor final : public Compressor {
 public:
  std::string spec() const override { return "dense"; }
  PayloadKind payload_kind() const override { return PayloadKind::kDense; }
  bool linear() const override { return true; }

  absl::StatusOr<Payload> Encode(absl::Span<const float> grad, const EncodeContext&) override {
    absl::Status size = CheckGroupSize(grad.size());
    if (!size.ok()) return size;
    Payload p;
    p.kind = PayloadKind::kDense;
    p.dim = grad.size();
    p.values.assign(grad.begin(), grad.end());
    return p;
  }

  absl::StatusOr<Update> Decode(const Payload& aggregate) const override {
    absl::Status fits = CheckPayload(aggregate);
    if (!fits.ok()) return fits;
    Update update;
    update.dense = true;
    update.dim = aggregate.dim;
    update.values = aggregate.values;
    return update;
  }

  absl::StatusOr<Update> DecodeOwned(Payload aggregate) const override {
    absl::Status fits = CheckPayload(aggregate);
    if (!fits.ok()) return fits;
    Update update;
    update.dense = true;
    update.dim = aggregate.dim;
    update.values = std::move(aggregate.values);
    return update;
  }
};

}  // namespace

absl::StatusOr<std::unique_ptr<Compressor>> MakeDenseCompressor(ParamReader&) {
  return std::unique_ptr<Compressor>(new DenseCompressor);
}

}  // namespace sketchfuse
