// count_sketch: a Count-Sketch of the group (common/count_sketch.h). Payloads
// of different workers add up; the decode takes the k heavy hitters of the
// aggregate with their estimated values.
// Parameters: density (default 0.001) or k, the heavy hitters to decode;
// rows (default 5, 1..64); width, columns per decoded coordinate (default 10,
// FetchSGD's c/k) or cols, an absolute column count; seed (default 1), shared
// by every worker of a job.
#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/compressors/builtin.h"
#include "common/compressors/selection.h"
#include "common/count_sketch.h"
#include "common/sketch_hash.h"

namespace sketchfuse {
namespace {

class CountSketchCompressor final : public Compressor {
 public:
  CountSketchCompressor(SelectionParams selection, uint32_t rows, double width, uint32_t cols,
                        uint64_t seed)
      : selection_(selection), rows_(rows), width_(width), cols_(cols), seed_(seed) {}

  std::string spec() const override {
    return absl::StrCat("count_sketch:", selection_.ToString(), ",rows=", rows_,
                        cols_ > 0 ? absl::StrCat(",cols=", cols_) : absl::StrCat(",width=", width_),
                        ",seed=", seed_);
  }
  PayloadKind payload_kind() const override { return PayloadKind::kSketch; }
  bool linear() const override { return true; }

  // The sketch shape for a group of `dim` elements: the same on every worker.
  SketchShape ShapeFor(uint64_t dim) const {
    const double cols = cols_ > 0 ? cols_ : std::ceil(width_ * selection_.For(dim));
    return SketchShape{rows_, static_cast<uint32_t>(std::clamp<double>(cols, 1, kMaxSketchCols)),
                       seed_};
  }

  std::optional<SketchLayout> SketchLayoutFor(uint64_t dim) const override {
    return SketchLayout{ShapeFor(dim), selection_.For(dim)};
  }

  absl::StatusOr<Payload> Encode(absl::Span<const float> grad, const EncodeContext&) override {
    absl::Status size = CheckGroupSize(grad.size());
    if (!size.ok()) return size;
    absl::StatusOr<CountSketch> sketch = CountSketch::Create(ShapeFor(grad.size()));
    if (!sketch.ok()) return sketch.status();
    absl::Status inserted = sketch->Insert(grad);
    if (!inserted.ok()) return inserted;
    Payload p;
    p.kind = PayloadKind::kSketch;
    p.dim = grad.size();
    p.sketch = sketch->shape();
    p.values = std::move(*sketch).ReleaseTable();
    return p;
  }

  absl::Status CheckPayload(const Payload& payload) const override {
    if (payload.kind != PayloadKind::kSketch) {
      return absl::InvalidArgumentError(PayloadKindMismatch(payload.kind));
    }
    if (payload.sketch != ShapeFor(payload.dim) ||
        payload.values.size() != payload.sketch.num_cells()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "sketch payload of shape ", payload.sketch.rows, "x", payload.sketch.cols, " seed ",
          payload.sketch.seed, " does not match ", spec(), " for dim ", payload.dim));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<Update> Decode(const Payload& aggregate) const override {
    absl::Status fits = CheckPayload(aggregate);
    if (!fits.ok()) return fits;
    SparseEntries hh = SketchView(aggregate.sketch, aggregate.values.data())
                           .HeavyHitters(aggregate.dim, selection_.For(aggregate.dim));
    Update update;
    update.dim = aggregate.dim;
    update.indices = std::move(hh.indices);
    update.values = std::move(hh.values);
    return update;
  }

 private:
  SelectionParams selection_;
  uint32_t rows_;
  double width_;
  uint32_t cols_;  // 0: derived from width
  uint64_t seed_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Compressor>> MakeCountSketchCompressor(ParamReader& params) {
  absl::StatusOr<SelectionParams> selection = ReadSelection(params);
  if (!selection.ok()) return selection.status();
  absl::StatusOr<uint64_t> rows = params.Uint("rows", 5, 1, kMaxSketchRows);
  if (!rows.ok()) return rows.status();
  if (params.Has("width") && params.Has("cols")) {
    return absl::InvalidArgumentError("count_sketch: set width or cols, not both");
  }
  absl::StatusOr<double> width = params.Double("width", 10.0, 0.01, 1e6);
  if (!width.ok()) return width.status();
  absl::StatusOr<uint64_t> cols = params.Uint("cols", 0, 1, kMaxSketchCols);
  if (!cols.ok()) return cols.status();
  absl::StatusOr<uint64_t> seed = params.Uint("seed", 1, 0, UINT64_MAX);
  if (!seed.ok()) return seed.status();
  return std::unique_ptr<Compressor>(new CountSketchCompressor(
      *selection, static_cast<uint32_t>(*rows), *width, static_cast<uint32_t>(*cols), *seed));
}

}  // namespace sketchfuse
