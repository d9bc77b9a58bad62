// Count-Sketch of a fused gradient group (Charikar, Chen, Farach-Colton).
//
// A sketch is a rows x cols table of floats. Inserting a vector x adds
// sign_r(i) * x_i to cell (r, bucket_r(i)) of every row r; the estimate of
// coordinate i is the median over rows of sign_r(i) * table[r][bucket_r(i)]
// (for an even number of rows, the mean of the two middle values). Buckets and
// signs come from the hash family of common/sketch_hash.h, fixed by the seed,
// so sketches built with the same (rows, cols, seed) by different workers add
// up: Sketch(x) + Sketch(y) == Sketch(x + y) up to float rounding.
//
// Heavy hitters are the k coordinates whose estimates rank first by the
// magnitude order of common/topk.h (|estimate| descending, then index
// ascending).
//
// NOTE: not thread-safe for mutation; concurrent const use is safe.
#ifndef SKETCHFUSE_COMMON_COUNT_SKETCH_H_
#define SKETCHFUSE_COMMON_COUNT_SKETCH_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "common/sketch_hash.h"

namespace sketchfuse {

// The shape and hash seed of a sketch; two sketches add only if equal.
struct SketchShape {
  uint32_t rows = 0;
  uint32_t cols = 0;
  uint64_t seed = 0;

  size_t num_cells() const { return static_cast<size_t>(rows) * cols; }
  bool operator==(const SketchShape& o) const {
    return rows == o.rows && cols == o.cols && seed == o.seed;
  }
  bool operator!=(const SketchShape& o) const { return !(*this == o); }
};

// INVALID_ARGUMENT unless 1 <= rows <= kMaxSketchRows and 1 <= cols <= kMaxSketchCols.
absl::Status ValidateSketchShape(const SketchShape& shape);

// OK if `family`, the hash family a peer or a message declares, is this
// build's kSketchHashFamily (common/sketch_hash.h). Otherwise
// FAILED_PRECONDITION naming both numbers and `sender` (e.g. "the sketch
// payload", "worker 'w-1'"): its sketches would not add up with ours.
absl::Status CheckSketchHashFamily(uint32_t family, absl::string_view sender);

// (index, value) pairs with strictly ascending indices.
struct SparseEntries {
  std::vector<uint32_t> indices;
  std::vector<float> values;
};

// Read-only view of a sketch table owned elsewhere (a CountSketch or a payload).
class SketchView {
 public:
  // `table` must hold shape.num_cells() floats, row-major, and outlive the view.
  SketchView(const SketchShape& shape, const float* table) : shape_(shape), table_(table) {}

  const SketchShape& shape() const { return shape_; }
  const float* table() const { return table_; }

  // Estimate of coordinate `index` (median over rows).
  float Estimate(uint32_t index) const;

  // Estimates of coordinates 0 .. out.size()-1. out.size() must be < 2^32.
  void EstimateAll(absl::Span<float> out) const;

  // Every row's estimate of coordinates [base, base + len):
  // out[r * stride + j] = sign_r(base + j) * table[r][bucket_r(base + j)].
  // base must be a multiple of kMaxChunkLength, stride >= len, and
  // base + len <= 2^32.
  void RowEstimates(uint32_t base, uint32_t len, float* out, size_t stride) const;

  // The min(k, dim) coordinates of [0, dim) whose estimates rank first, in
  // ascending index order, with their estimates. Computes estimates block by
  // block and keeps only candidates above a sampled threshold, so it never
  // materializes all dim estimates. dim must be < 2^32.
  SparseEntries HeavyHitters(uint64_t dim, uint64_t k) const;

 private:
  SketchShape shape_;
  const float* table_;
};

// An owning Count-Sketch.
class CountSketch {
 public:
  // A zeroed sketch; INVALID_ARGUMENT for an invalid shape.
  static absl::StatusOr<CountSketch> Create(const SketchShape& shape);
  // A sketch adopting `table`; INVALID_ARGUMENT if its size is not rows * cols.
  static absl::StatusOr<CountSketch> FromTable(const SketchShape& shape,
                                               std::vector<float> table);

  const SketchShape& shape() const { return shape_; }
  // The table, row-major: cell (r, c) is table()[r * cols + c].
  const std::vector<float>& table() const { return table_; }
  // Moves the table out (for serialization); the sketch is empty afterwards.
  std::vector<float> ReleaseTable() && { return std::move(table_); }
  SketchView view() const { return SketchView(shape_, table_.data()); }

  // Sets every cell to zero.
  void Clear();

  // Adds x, whose element j is coordinate j; INVALID_ARGUMENT if x has 2^32 or
  // more elements.
  absl::Status Insert(absl::Span<const float> x);

  // Adds the sparse vector with values[j] at coordinate indices[j] (the
  // same cells and signs as Insert of the dense vector). INVALID_ARGUMENT if
  // the spans differ in length.
  absl::Status InsertEntries(absl::Span<const uint32_t> indices, absl::Span<const float> values);

  // this += other. FAILED_PRECONDITION if the shapes or seeds differ.
  absl::Status Merge(const CountSketch& other);

 private:
  CountSketch(const SketchShape& shape, std::vector<float> table)
      : shape_(shape), table_(std::move(table)) {}

  SketchShape shape_;
  std::vector<float> table_;
};

// table += other, elementwise (the merge of two sketch tables, also used for
// dense payloads). Sizes must match.
void AddInPlace(absl::Span<float> table, absl::Span<const float> other);

// Reference implementations, written for clarity: one coordinate at a time.
namespace count_sketch_reference {
void Insert(const SketchShape& shape, absl::Span<const float> x, std::vector<float>* table);
float Estimate(const SketchShape& shape, const std::vector<float>& table, uint32_t index);
}  // namespace count_sketch_reference

}  // namespace sketchfuse

#endif  // SKETCHFUSE_COMMON_COUNT_SKETCH_H_
