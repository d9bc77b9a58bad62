#include "common/sketch_peeling.h"

#include <algorithm>
#include <cmath>
#include <tuple>
#include <vector>

#include "common/sketch_hash.h"

namespace sketchfuse {
namespace {

// Coordinates whose row estimates are computed together (a multiple of every
// chunk length, as SketchView::RowEstimates needs).
constexpr uint32_t kBlock = 2048;

struct Candidate {
  uint32_t index = 0;
  float value = 0;
  uint64_t rows = 0;   // the rows whose cells it claims
  uint32_t agree = 0;  // rows in its largest group of agreeing rows
  bool takeable = false;
};

bool Agree(float a, float b, float tolerance) {
  return std::fabs(a - b) <= tolerance * std::max(std::fabs(a), std::fabs(b));
}

// What a coordinate with row estimates est[0], est[stride], ... claims, if
// anything. A coordinate with an estimate at or below the floor was never
// inserted (its cell there is empty): nothing. Otherwise its largest groups
// of agreeing rows, if they have two rows or more: it claims their cells, and
// it is takeable, with the group's value, when that group is the only
// largest one. (Two rows that hold the coordinate and the same other
// coordinate agree on a wrong value; while another pair agrees on the right
// one, the coordinate waits for the pass after that other coordinate was
// taken out, and meanwhile keeps the cells it may own from being explained
// by a coordinate that only collides with it.)
bool Claims(const float* est, size_t stride, uint32_t rows, float floor, float tolerance, Candidate* out) {
  for (uint32_t r = 0; r < rows; ++r) {
    if (!(std::fabs(est[r * stride]) > floor)) return false;
  }
  uint32_t best = 0;
  uint64_t groups = 0;  // union of the largest groups
  bool ambiguous = false;
  for (uint32_t a = 0; a < rows; ++a) {
    const float value = est[a * stride];
    uint64_t mask = 0;
    uint32_t count = 0;
    for (uint32_t b = 0; b < rows; ++b) {
      if (Agree(value, est[b * stride], tolerance)) {
        mask |= uint64_t{1} << b;
        ++count;
      }
    }
    if (count > best) {
      best = count;
      ambiguous = false;
      groups = mask;
      out->value = value;
    } else if (count == best && (mask & ~groups) != 0) {
      ambiguous = true;  // another group of rows, as large, agrees on another value
      groups |= mask;
    }
  }
  out->rows = groups;
  out->agree = best;
  out->takeable = !ambiguous;
  return best >= 2;
}

// Keeps the takeable candidates that win every cell they claim: the claim
// with the most agreeing rows wins a cell; a tie at the top leaves it to none.
std::vector<Candidate> Resolve(const std::vector<Candidate>& candidates, const SketchShape& shape,
                               const std::vector<RowHash>& hashes, uint32_t chunk_shift) {
  struct Claim {
    uint64_t cell;
    uint32_t agree;
    uint32_t candidate;
  };
  std::vector<Claim> claims;
  for (uint32_t c = 0; c < candidates.size(); ++c) {
    for (uint32_t r = 0; r < shape.rows; ++r) {
      if ((candidates[c].rows >> r & 1) == 0) continue;
      const uint64_t cell = uint64_t{r} * shape.cols +
                            BucketOfIndex(hashes[r], candidates[c].index, shape.cols, chunk_shift);
      claims.push_back({cell, candidates[c].agree, c});
    }
  }
  std::sort(claims.begin(), claims.end(), [](const Claim& a, const Claim& b) {
    return std::make_tuple(a.cell, b.agree, a.candidate) < std::make_tuple(b.cell, a.agree, b.candidate);
  });
  std::vector<bool> lost(candidates.size(), false);
  for (size_t i = 0; i < claims.size();) {
    size_t end = i + 1;
    while (end < claims.size() && claims[end].cell == claims[i].cell) ++end;
    // claims[i] has the most agreeing rows of this cell's claims.
    const bool tie = end > i + 1 && claims[i + 1].agree == claims[i].agree;
    for (size_t j = tie ? i : i + 1; j < end; ++j) lost[claims[j].candidate] = true;
    i = end;
  }
  std::vector<Candidate> won;
  for (uint32_t c = 0; c < candidates.size(); ++c) {
    if (!lost[c] && candidates[c].takeable) won.push_back(candidates[c]);
  }
  return won;
}

// The decoder, with the row estimates of coordinates [base, base + len)
// written by fill(table, base, len, out, stride) (out[r * stride + j]).
template <typename FillRowEstimates>
SparseEntries Peel(const SketchShape& shape, std::vector<float> table, uint64_t dim,
                   const PeelOptions& options, uint32_t block, FillRowEstimates fill) {
  SparseEntries result;
  if (shape.rows < 2 || dim == 0 || options.max_entries == 0) return result;
  const uint32_t n = static_cast<uint32_t>(dim);
  std::vector<RowHash> hashes(shape.rows);
  for (uint32_t r = 0; r < shape.rows; ++r) hashes[r] = MakeRowHash(shape.seed, r);
  const uint32_t chunk_shift = ChunkShift(shape.cols);
  float largest = 0;
  for (float cell : table) largest = std::max(largest, std::fabs(cell));
  const float floor = options.floor * largest;

  std::vector<bool> decoded(n, false);
  std::vector<std::pair<uint32_t, float>> entries;
  std::vector<float> est(static_cast<size_t>(shape.rows) * block);
  std::vector<Candidate> candidates;
  for (uint32_t pass = 0; pass < options.max_passes && entries.size() < options.max_entries; ++pass) {
    candidates.clear();
    for (uint32_t base = 0; base < n; base += std::min(block, n - base)) {
      const uint32_t len = std::min(block, n - base);
      fill(table, base, len, est.data(), block);
      for (uint32_t j = 0; j < len; ++j) {
        Candidate c;
        if (!decoded[base + j] && Claims(&est[j], block, shape.rows, floor, options.tolerance, &c)) {
          c.index = base + j;
          candidates.push_back(c);
        }
      }
    }
    std::vector<Candidate> taken = Resolve(candidates, shape, hashes, chunk_shift);
    if (taken.empty()) break;
    const uint64_t room = options.max_entries - entries.size();
    if (taken.size() > room) {
      std::sort(taken.begin(), taken.end(), [](const Candidate& a, const Candidate& b) {
        const float fa = std::fabs(a.value), fb = std::fabs(b.value);
        return fa != fb ? fa > fb : a.index < b.index;
      });
      taken.resize(room);
    }
    for (const Candidate& c : taken) {
      decoded[c.index] = true;
      entries.emplace_back(c.index, c.value);
      for (uint32_t r = 0; r < shape.rows; ++r) {
        table[static_cast<size_t>(r) * shape.cols + BucketOfIndex(hashes[r], c.index, shape.cols, chunk_shift)] -=
            SignOfIndex(hashes[r], c.index) * c.value;
      }
    }
  }
  std::sort(entries.begin(), entries.end());
  result.indices.reserve(entries.size());
  result.values.reserve(entries.size());
  for (const auto& [index, value] : entries) {
    result.indices.push_back(index);
    result.values.push_back(value);
  }
  return result;
}

}  // namespace

SparseEntries PeelDecode(const SketchView& sketch, uint64_t dim, const PeelOptions& options) {
  const SketchShape& shape = sketch.shape();
  std::vector<float> table(sketch.table(), sketch.table() + shape.num_cells());
  return Peel(shape, std::move(table), dim, options, kBlock,
              [&shape](const std::vector<float>& t, uint32_t base, uint32_t len, float* out, size_t stride) {
                SketchView(shape, t.data()).RowEstimates(base, len, out, stride);
              });
}

namespace sketch_peeling_reference {

SparseEntries PeelDecode(const SketchShape& shape, std::vector<float> table, uint64_t dim,
                         const PeelOptions& options) {
  const uint32_t chunk_shift = ChunkShift(shape.cols);
  return Peel(shape, std::move(table), dim, options, 1,
              [&](const std::vector<float>& t, uint32_t index, uint32_t, float* out, size_t stride) {
                for (uint32_t r = 0; r < shape.rows; ++r) {
                  const RowHash hash = MakeRowHash(shape.seed, r);
                  out[r * stride] = SignOfIndex(hash, index) *
                                    t[static_cast<size_t>(r) * shape.cols + BucketOfIndex(hash, index, shape.cols,
                                                                                           chunk_shift)];
                }
              });
}

}  // namespace sketch_peeling_reference
}  // namespace sketchfuse
