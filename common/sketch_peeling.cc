#include "common/sketch_peeling.h"

#include <algorithm>
#include <cmath>
#include <tuple>
#include <vector>

#include "common/peel_rules.h"
#include "common/sketch_hash.h"

namespace sketchfuse {
namespace {

// Coordinates whose row estimates the first pass computes together (a
// multiple of every chunk length, as SketchView::RowEstimates needs).
constexpr uint32_t kBlock = 2048;

// A coordinate's claim in a pass (the rules: common/peel_rules.h).
struct Candidate : peel_rules::Claim {
  uint32_t index = 0;
};

// Calls claim(cell, c) for every cell (an index of the table) that
// candidates[c] claims, candidate by candidate.
template <typename Fn>
void ForEachClaim(const std::vector<Candidate>& candidates, const SketchShape& shape,
                  const std::vector<RowHash>& hashes, uint32_t chunk_shift, Fn claim) {
  for (uint32_t c = 0; c < candidates.size(); ++c) {
    for (uint32_t r = 0; r < shape.rows; ++r) {
      if ((candidates[c].rows >> r & 1) == 0) continue;
      claim(static_cast<size_t>(r) * shape.cols + BucketOfIndex(hashes[r], candidates[c].index, shape.cols, chunk_shift),
            c);
    }
  }
}

// The takeable candidates that lost no cell, in their order.
std::vector<Candidate> Winners(const std::vector<Candidate>& candidates, const std::vector<bool>& lost) {
  std::vector<Candidate> won;
  for (uint32_t c = 0; c < candidates.size(); ++c) {
    if (!lost[c] && candidates[c].takeable) won.push_back(candidates[c]);
  }
  return won;
}

// Keeps the takeable candidates that win every cell they claim: the claim
// with the most agreeing rows wins a cell; a tie at the top leaves it to none.
std::vector<Candidate> Resolve(const std::vector<Candidate>& candidates, const SketchShape& shape,
                               const std::vector<RowHash>& hashes, uint32_t chunk_shift) {
  struct Claim {
    size_t cell;
    uint32_t candidate;
  };
  std::vector<Claim> claims;
  ForEachClaim(candidates, shape, hashes, chunk_shift,
               [&](size_t cell, uint32_t c) { claims.push_back({cell, c}); });
  // Per cell: the most agreeing rows among its claims (rows <= 64), and
  // whether more than one claim has that many.
  std::vector<uint8_t> most(shape.num_cells(), 0);
  std::vector<uint8_t> tied(shape.num_cells(), 0);
  for (const Claim& claim : claims) {
    const uint32_t agree = candidates[claim.candidate].agree;
    if (agree > most[claim.cell]) {
      most[claim.cell] = static_cast<uint8_t>(agree);
      tied[claim.cell] = 0;
    } else if (agree == most[claim.cell]) {
      tied[claim.cell] = 1;
    }
  }
  std::vector<bool> lost(candidates.size(), false);
  for (const Claim& claim : claims) {
    if (candidates[claim.candidate].agree < most[claim.cell] || tied[claim.cell]) lost[claim.candidate] = true;
  }
  return Winners(candidates, lost);
}

// The same rule, written as a sort of the claims by cell and agreement (the
// reference's: the parity test holds the two to the same bits).
std::vector<Candidate> ResolveBySorting(const std::vector<Candidate>& candidates, const SketchShape& shape,
                                        const std::vector<RowHash>& hashes, uint32_t chunk_shift) {
  struct Claim {
    uint64_t cell;
    uint32_t agree;
    uint32_t candidate;
  };
  std::vector<Claim> claims;
  ForEachClaim(candidates, shape, hashes, chunk_shift,
               [&](size_t cell, uint32_t c) { claims.push_back({cell, candidates[c].agree, c}); });
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
  return Winners(candidates, lost);
}

using Resolver = std::vector<Candidate> (*)(const std::vector<Candidate>&, const SketchShape&,
                                            const std::vector<RowHash>&, uint32_t);

// The state of one decode: the table as peeled so far, the coordinates
// taken, and the shared steps of a pass.
class Peeler {
 public:
  // `resolve` settles the claims of a pass; with `quick_reject`, coordinates
  // none of whose rows agree are passed over before Claims counts them.
  Peeler(const SketchShape& shape, std::vector<float> table, uint64_t dim, const PeelOptions& options,
         Resolver resolve, bool quick_reject)
      : shape_(shape), table_(std::move(table)), n_(static_cast<uint32_t>(dim)), options_(options), resolve_(resolve),
        quick_reject_(quick_reject),
        hashes_(shape.rows), chunk_shift_(ChunkShift(shape.cols)), decoded_(dim, false) {
    for (uint32_t r = 0; r < shape.rows; ++r) hashes_[r] = MakeRowHash(shape.seed, r);
    float largest = 0;
    for (float cell : table_) largest = std::max(largest, std::fabs(cell));
    floor_ = options.floor * largest;
  }

  bool usable() const {
    return shape_.rows >= 2 && n_ > 0 && options_.max_passes > 0 && options_.max_entries > 0;
  }
  bool more_passes(uint32_t pass) const { return pass < options_.max_passes && entries_.size() < options_.max_entries; }
  const std::vector<float>& table() const { return table_; }
  // Row estimates at or below this magnitude read an empty cell.
  float floor() const { return floor_; }
  uint32_t size() const { return n_; }

  // Looks at coordinate `index` with its row estimates: false if it is below
  // the floor (it never will be above it again); else records its claim, if
  // it makes one, for this pass.
  bool Consider(uint32_t index, const float* est, size_t stride) {
    if (decoded_[index] || !peel_rules::AboveFloor(est, stride, shape_.rows, floor_)) return false;
    if (quick_reject_ && !peel_rules::SomePairAgrees(est, stride, shape_.rows, options_.tolerance)) return true;
    Candidate c;
    if (peel_rules::Claims(est, stride, shape_.rows, options_.tolerance, &c)) {
      c.index = index;
      candidates_.push_back(c);
    }
    return true;
  }

  // Resolves this pass's claims, takes the winners (up to the cap) out of
  // the table; false when nothing was taken.
  bool EndPass() {
    std::vector<Candidate> taken = resolve_(candidates_, shape_, hashes_, chunk_shift_);
    candidates_.clear();
    if (taken.empty()) return false;
    const uint64_t room = options_.max_entries - entries_.size();
    if (taken.size() > room) {
      std::sort(taken.begin(), taken.end(), [](const Candidate& a, const Candidate& b) {
        const float fa = std::fabs(a.value), fb = std::fabs(b.value);
        return fa != fb ? fa > fb : a.index < b.index;
      });
      taken.resize(room);
    }
    for (const Candidate& c : taken) {
      decoded_[c.index] = true;
      entries_.emplace_back(c.index, c.value);
      for (uint32_t r = 0; r < shape_.rows; ++r) {
        table_[CellOf(r, c.index)] -= SignOfIndex(hashes_[r], c.index) * c.value;
      }
    }
    return true;
  }

  // The cell coordinate `index` reads in row r (an index of table()).
  size_t CellOf(uint32_t r, uint32_t index) const {
    return static_cast<size_t>(r) * shape_.cols + BucketOfIndex(hashes_[r], index, shape_.cols, chunk_shift_);
  }

  // Coordinate `index`'s row estimates into out[r], row by row, stopping at
  // the first one at or below the floor (false): such a coordinate is out
  // for good, as Consider would find.
  bool EstimatesAboveFloor(uint32_t index, float* out) const {
    for (uint32_t r = 0; r < shape_.rows; ++r) {
      out[r] = SignOfIndex(hashes_[r], index) * table_[CellOf(r, index)];
      if (!(std::fabs(out[r]) > floor_)) return false;
    }
    return true;
  }

  // Coordinate `index`'s row estimates, one at a time (out[r]).
  void EstimatesOf(uint32_t index, float* out) const {
    for (uint32_t r = 0; r < shape_.rows; ++r) {
      out[r] = SignOfIndex(hashes_[r], index) * table_[CellOf(r, index)];
    }
  }

  SparseEntries Result() {
    std::sort(entries_.begin(), entries_.end());
    SparseEntries result;
    result.indices.reserve(entries_.size());
    result.values.reserve(entries_.size());
    for (const auto& [index, value] : entries_) {
      result.indices.push_back(index);
      result.values.push_back(value);
    }
    return result;
  }

 private:
  const SketchShape shape_;
  std::vector<float> table_;
  const uint32_t n_;
  const PeelOptions options_;
  const Resolver resolve_;
  const bool quick_reject_;
  std::vector<RowHash> hashes_;
  const uint32_t chunk_shift_;
  float floor_ = 0;
  std::vector<bool> decoded_;
  std::vector<std::pair<uint32_t, float>> entries_;
  std::vector<Candidate> candidates_;
};

}  // namespace

SparseEntries PeelDecode(const SketchView& sketch, uint64_t dim, const PeelOptions& options) {
  const SketchShape& shape = sketch.shape();
  Peeler peeler(shape, std::vector<float>(sketch.table(), sketch.table() + shape.num_cells()), dim, options,
                Resolve, /*quick_reject=*/true);
  if (!peeler.usable()) return {};
  // The first pass reads every coordinate, a block of rows at a time; most
  // read an empty cell in some row, so a branch-free sweep over the block's
  // rows marks those above the floor in every row, and only they are
  // considered. Later passes read only those still above the floor (a
  // coordinate that reads an empty cell never becomes decodable), one at a
  // time, stopping at the first empty cell: after the first pass they are a
  // small share of the group.
  std::vector<uint32_t> alive;
  std::vector<float> est(static_cast<size_t>(shape.rows) * kBlock);
  std::vector<uint8_t> above(kBlock);
  const float floor = peeler.floor();
  const uint32_t n = peeler.size();
  for (uint32_t base = 0; base < n; base += std::min(kBlock, n - base)) {
    const uint32_t len = std::min(kBlock, n - base);
    SketchView(shape, peeler.table().data()).RowEstimates(base, len, est.data(), kBlock);
    std::fill(above.begin(), above.begin() + len, uint8_t{1});
    for (uint32_t r = 0; r < shape.rows; ++r) {
      const float* row = &est[static_cast<size_t>(r) * kBlock];
      for (uint32_t j = 0; j < len; ++j) above[j] &= static_cast<uint8_t>(std::fabs(row[j]) > floor);
    }
    for (uint32_t j = 0; j < len; ++j) {
      if (above[j] && peeler.Consider(base + j, &est[j], kBlock)) alive.push_back(base + j);
    }
  }
  std::vector<float> one(shape.rows);
  for (uint32_t pass = 1; peeler.EndPass() && peeler.more_passes(pass); ++pass) {
    size_t kept = 0;
    for (uint32_t index : alive) {
      if (peeler.EstimatesAboveFloor(index, one.data()) && peeler.Consider(index, one.data(), 1)) {
        alive[kept++] = index;
      }
    }
    alive.resize(kept);
  }
  return peeler.Result();
}

namespace sketch_peeling_reference {

SparseEntries PeelDecode(const SketchShape& shape, std::vector<float> table, uint64_t dim,
                         const PeelOptions& options) {
  Peeler peeler(shape, std::move(table), dim, options, ResolveBySorting, /*quick_reject=*/false);
  if (!peeler.usable()) return {};
  std::vector<float> est(shape.rows);
  for (uint32_t pass = 0; peeler.more_passes(pass); ++pass) {
    for (uint32_t index = 0; index < peeler.size(); ++index) {
      peeler.EstimatesOf(index, est.data());
      peeler.Consider(index, est.data(), 1);
    }
    if (!peeler.EndPass()) break;
  }
  return peeler.Result();
}

}  // namespace sketch_peeling_reference
}  // namespace sketchfuse
