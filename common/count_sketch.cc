#include "common/count_sketch.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/simd.h"
#include "common/sketch_kernels.h"
#include "common/sketch_hash.h"
#include "common/topk.h"

namespace sketchfuse {
namespace {

// Estimates are computed in blocks small enough that the per-block scratch
// (one run of signed cells per row) stays in L1/L2. A multiple of every
// chunk length, so blocks hold whole chunks.
constexpr uint32_t kBlock = 2048;
static_assert(kBlock % kMaxChunkLength == 0, "blocks must hold whole chunks");

// Calls run(first_index, first_cell, len) for the runs of consecutive
// coordinates of [base, base + len) whose cells in a row are consecutive:
// each chunk splits in two where its cells wrap around the row's end.
// `base` must be a multiple of the chunk length.
template <typename RunFn>
void ForEachRun(const RowHash& hash, uint32_t cols, uint32_t chunk_shift, uint32_t base,
                uint32_t len, RunFn run) {
  const uint32_t chunk_length = 1u << chunk_shift;
  const uint64_t end = uint64_t{base} + len;
  for (uint64_t first = base; first < end; first += chunk_length) {
    const uint32_t in_chunk = static_cast<uint32_t>(std::min<uint64_t>(chunk_length, end - first));
    const uint32_t offset =
        ChunkOffset(hash, static_cast<uint32_t>(first >> chunk_shift), cols);
    const uint32_t before_wrap = CellsBeforeWrap(offset, in_chunk, cols);
    run(static_cast<uint32_t>(first), offset, before_wrap);
    if (before_wrap < in_chunk) {
      run(static_cast<uint32_t>(first) + before_wrap, 0u, in_chunk - before_wrap);
    }
  }
}

// Median of 5 with min/max only: f = max(min(a,b), min(c,d)) and
// g = min(max(a,b), max(c,d)) discard the two extremes of {a,b,c,d}; the
// median of the five is the median of {e, f, g}.
SF_MULTIVERSION void Median5(const float* v, uint32_t stride, uint32_t len, float* out) {
  const float* a = v;
  const float* b = v + stride;
  const float* c = v + 2 * stride;
  const float* d = v + 3 * stride;
  const float* e = v + 4 * stride;
  for (uint32_t j = 0; j < len; ++j) {
    const float f = std::max(std::min(a[j], b[j]), std::min(c[j], d[j]));
    const float g = std::min(std::max(a[j], b[j]), std::max(c[j], d[j]));
    out[j] = std::max(std::min(e[j], f), std::min(std::max(e[j], f), g));
  }
}

SF_MULTIVERSION void Median3(const float* v, uint32_t stride, uint32_t len, float* out) {
  const float* a = v;
  const float* b = v + stride;
  const float* c = v + 2 * stride;
  for (uint32_t j = 0; j < len; ++j) {
    out[j] = std::max(std::min(a[j], b[j]), std::min(std::max(a[j], b[j]), c[j]));
  }
}

// Median of `rows` values (mean of the two middle ones for an even count).
float MedianOfSmall(float* values, uint32_t rows) {
  std::sort(values, values + rows);
  if (rows % 2 == 1) return values[rows / 2];
  return (values[rows / 2 - 1] + values[rows / 2]) * 0.5f;
}

// Estimates of coordinates [base, base + len) into out; scratch holds
// rows * kBlock floats.
// base must be a multiple of kBlock.
void EstimateBlock(const SketchShape& shape, const float* table, const RowHash* hashes,
                   uint32_t base, uint32_t len, float* scratch, float* out) {
  const uint32_t chunk_shift = ChunkShift(shape.cols);
  for (uint32_t r = 0; r < shape.rows; ++r) {
    const float* row = table + static_cast<size_t>(r) * shape.cols;
    float* signed_cells = scratch + r * kBlock - base;
    ForEachRun(hashes[r], shape.cols, chunk_shift, base, len,
               [&](uint32_t first, uint32_t cell, uint32_t run) {
                 sketch_kernels::CopySigned(hashes[r].sign, first, run, row + cell,
                                            signed_cells + first);
               });
  }
  switch (shape.rows) {
    case 1:
      std::memcpy(out, scratch, len * sizeof(float));
      return;
    case 3:
      Median3(scratch, kBlock, len, out);
      return;
    case 5:
      Median5(scratch, kBlock, len, out);
      return;
    default: {
      float column[kMaxSketchRows];
      for (uint32_t j = 0; j < len; ++j) {
        for (uint32_t r = 0; r < shape.rows; ++r) column[r] = scratch[r * kBlock + j];
        out[j] = MedianOfSmall(column, shape.rows);
      }
    }
  }
}

std::vector<RowHash> RowHashes(const SketchShape& shape) {
  std::vector<RowHash> hashes(shape.rows);
  for (uint32_t r = 0; r < shape.rows; ++r) hashes[r] = MakeRowHash(shape.seed, r);
  return hashes;
}

absl::Status CheckDimension(uint64_t n) {
  if (n > 0xFFFFFFFFull) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a sketched group must have fewer than 2^32 elements; got ", n));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateSketchShape(const SketchShape& shape) {
  if (shape.rows < 1 || shape.rows > kMaxSketchRows) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sketch rows must be in [1, ", kMaxSketchRows, "]; got ", shape.rows));
  }
  if (shape.cols < 1 || shape.cols > kMaxSketchCols) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sketch cols must be in [1, ", kMaxSketchCols, "]; got ", shape.cols));
  }
  return absl::OkStatus();
}

absl::Status CheckSketchHashFamily(uint32_t family, absl::string_view sender) {
  if (family == kSketchHashFamily) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      sender, " uses Count-Sketch hash family ", family,
      family == 0 ? " (a SketchFuse build from before hash families were numbered)" : "",
      "; this build uses family ", kSketchHashFamily,
      ": sketches hashed by different families do not add up, so every worker and server of a job "
      "must run a build with the same family"));
}

float SketchView::Estimate(uint32_t index) const {
  float values[kMaxSketchRows];
  const uint32_t chunk_shift = ChunkShift(shape_.cols);
  for (uint32_t r = 0; r < shape_.rows; ++r) {
    const RowHash hash = MakeRowHash(shape_.seed, r);
    values[r] = SignOfIndex(hash, index) *
                table_[static_cast<size_t>(r) * shape_.cols +
                       BucketOfIndex(hash, index, shape_.cols, chunk_shift)];
  }
  return MedianOfSmall(values, shape_.rows);
}

void SketchView::EstimateAll(absl::Span<float> out) const {
  const std::vector<RowHash> hashes = RowHashes(shape_);
  std::vector<float> scratch(static_cast<size_t>(shape_.rows) * kBlock);
  const uint32_t n = static_cast<uint32_t>(out.size());
  for (uint32_t base = 0; base < n; base += std::min(kBlock, n - base)) {
    const uint32_t len = std::min(kBlock, n - base);
    EstimateBlock(shape_, table_, hashes.data(), base, len, scratch.data(), out.data() + base);
  }
}

void SketchView::RowEstimates(uint32_t base, uint32_t len, float* out, size_t stride) const {
  const uint32_t chunk_shift = ChunkShift(shape_.cols);
  for (uint32_t r = 0; r < shape_.rows; ++r) {
    const RowHash hash = MakeRowHash(shape_.seed, r);
    const float* row = table_ + static_cast<size_t>(r) * shape_.cols;
    float* signed_cells = out + r * stride - base;
    ForEachRun(hash, shape_.cols, chunk_shift, base, len, [&](uint32_t first, uint32_t cell, uint32_t run) {
      sketch_kernels::CopySigned(hash.sign, first, run, row + cell, signed_cells + first);
    });
  }
}

SparseEntries SketchView::HeavyHitters(uint64_t dim, uint64_t k) const {
  SparseEntries result;
  k = std::min(k, dim);
  if (k == 0) return result;
  const uint32_t n = static_cast<uint32_t>(dim);

  // A threshold from the estimates of a sample of coordinates.
  const uint64_t s = topk_internal::SampleSize(n);
  std::vector<uint32_t> sample(s);
  for (uint64_t j = 0; j < s; ++j) {
    sample[j] = MagnitudeKey(Estimate(topk_internal::SamplePosition(j, n)));
  }

  // One blocked pass computes every estimate and keeps those at or above the
  // threshold; if fewer than k pass (rare), the threshold is lowered.
  const std::vector<RowHash> hashes = RowHashes(shape_);
  std::vector<float> scratch(static_cast<size_t>(shape_.rows) * kBlock);
  std::vector<float> block(kBlock);
  std::vector<KeyedIndex> candidates;
  for (int attempt = 0;; ++attempt) {
    const uint32_t threshold = topk_internal::ThresholdFromSample(sample, n, k, attempt);
    candidates.clear();
    for (uint32_t base = 0; base < n; base += std::min(kBlock, n - base)) {
      const uint32_t len = std::min(kBlock, n - base);
      EstimateBlock(shape_, table_, hashes.data(), base, len, scratch.data(), block.data());
      uint32_t block_max = 0;
      for (uint32_t j = 0; j < len; ++j) block_max = std::max(block_max, MagnitudeKey(block[j]));
      if (block_max < threshold) continue;
      for (uint32_t j = 0; j < len; ++j) {
        const uint32_t key = MagnitudeKey(block[j]);
        if (key >= threshold) candidates.push_back({key, base + j});
      }
    }
    if (candidates.size() >= k) break;
  }
  result.indices = topk_internal::SelectBest(std::move(candidates), k);
  result.values.resize(result.indices.size());
  for (size_t i = 0; i < result.indices.size(); ++i) {
    result.values[i] = Estimate(result.indices[i]);
  }
  return result;
}

absl::StatusOr<CountSketch> CountSketch::Create(const SketchShape& shape) {
  absl::Status valid = ValidateSketchShape(shape);
  if (!valid.ok()) return valid;
  return CountSketch(shape, std::vector<float>(shape.num_cells(), 0.0f));
}

absl::StatusOr<CountSketch> CountSketch::FromTable(const SketchShape& shape,
                                                   std::vector<float> table) {
  absl::Status valid = ValidateSketchShape(shape);
  if (!valid.ok()) return valid;
  if (table.size() != shape.num_cells()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sketch table has ", table.size(), " cells; shape ", shape.rows, "x",
        shape.cols, " needs ", shape.num_cells()));
  }
  return CountSketch(shape, std::move(table));
}

void CountSketch::Clear() { std::fill(table_.begin(), table_.end(), 0.0f); }

absl::Status CountSketch::Insert(absl::Span<const float> x) {
  absl::Status dim_ok = CheckDimension(x.size());
  if (!dim_ok.ok()) return dim_ok;
  const std::vector<RowHash> hashes = RowHashes(shape_);
  const uint32_t chunk_shift = ChunkShift(shape_.cols);
  // Row by row, chunk by chunk: each run of x is added into consecutive
  // cells, in index order (the reference's order of additions per cell, so
  // the result is bit-identical to it).
  for (uint32_t r = 0; r < shape_.rows; ++r) {
    float* row = table_.data() + static_cast<size_t>(r) * shape_.cols;
    ForEachRun(hashes[r], shape_.cols, chunk_shift, 0, static_cast<uint32_t>(x.size()),
               [&](uint32_t first, uint32_t cell, uint32_t run) {
                 sketch_kernels::AddSigned(hashes[r].sign, first, run, x.data() + first,
                                           row + cell);
               });
  }
  return absl::OkStatus();
}

absl::Status CountSketch::InsertEntries(absl::Span<const uint32_t> indices, absl::Span<const float> values) {
  if (indices.size() != values.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("sparse insert of ", indices.size(), " indices with ", values.size(), " values"));
  }
  const uint32_t chunk_shift = ChunkShift(shape_.cols);
  for (uint32_t r = 0; r < shape_.rows; ++r) {
    const RowHash hash = MakeRowHash(shape_.seed, r);
    float* row = table_.data() + static_cast<size_t>(r) * shape_.cols;
    for (size_t j = 0; j < indices.size(); ++j) {
      row[BucketOfIndex(hash, indices[j], shape_.cols, chunk_shift)] += SignOfIndex(hash, indices[j]) * values[j];
    }
  }
  return absl::OkStatus();
}

absl::Status CountSketch::Merge(const CountSketch& other) {
  if (other.shape_ != shape_) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot merge sketches of different shapes: ", shape_.rows, "x", shape_.cols,
        " seed ", shape_.seed, " vs ", other.shape_.rows, "x", other.shape_.cols,
        " seed ", other.shape_.seed));
  }
  AddInPlace(absl::MakeSpan(table_), other.table_);
  return absl::OkStatus();
}

SF_MULTIVERSION void AddInPlace(absl::Span<float> table, absl::Span<const float> other) {
  float* __restrict a = table.data();
  const float* __restrict b = other.data();
  const size_t n = table.size();
  for (size_t i = 0; i < n; ++i) a[i] += b[i];
}

namespace count_sketch_reference {

void Insert(const SketchShape& shape, absl::Span<const float> x, std::vector<float>* table) {
  const uint32_t chunk_shift = ChunkShift(shape.cols);
  for (uint32_t r = 0; r < shape.rows; ++r) {
    const RowHash hash = MakeRowHash(shape.seed, r);
    for (size_t i = 0; i < x.size(); ++i) {
      const uint32_t index = static_cast<uint32_t>(i);
      (*table)[static_cast<size_t>(r) * shape.cols +
               BucketOfIndex(hash, index, shape.cols, chunk_shift)] +=
          SignOfIndex(hash, index) * x[i];
    }
  }
}

float Estimate(const SketchShape& shape, const std::vector<float>& table, uint32_t index) {
  std::vector<float> values;
  const uint32_t chunk_shift = ChunkShift(shape.cols);
  for (uint32_t r = 0; r < shape.rows; ++r) {
    const RowHash hash = MakeRowHash(shape.seed, r);
    values.push_back(SignOfIndex(hash, index) *
                     table[static_cast<size_t>(r) * shape.cols +
                           BucketOfIndex(hash, index, shape.cols, chunk_shift)]);
  }
  std::sort(values.begin(), values.end());
  const size_t m = values.size();
  return m % 2 == 1 ? values[m / 2] : (values[m / 2 - 1] + values[m / 2]) * 0.5f;
}

}  // namespace count_sketch_reference
}  // namespace sketchfuse
