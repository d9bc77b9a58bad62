// powersgd: PowerSGD (Vogels, Karimireddy and Jaggi, 2019), rank-r
// compression of each matrix of a group by one step of power iteration with
// a warm start, as a method of two rounds whose payloads are sums
// (Compressor::low_rank, LowRankRounds): so the shards and the allreduce
// both carry it.
//
// Spec: "powersgd:rank=R,seed=S,shapes=B.B.B..." where each block B is
// "RxC" (a matrix: a layer of R rows and C columns, R, C > 1) or "N" (a
// vector of N elements), in the group's order; the job plan fills in seed
// and shapes (SpecForJob, from the job's layer shapes). rank: 1 to 64
// (default 4). A matrix is compressed when its factors are smaller than it,
// (R + C) * rank < R * C; otherwise, and for a vector, its values travel
// whole (PowerSGD's rule for biases and small layers). Without shapes the
// whole group is one vector: nothing is compressed.
//
// A worker, per step, with M the vector it encodes (its residual under
// error feedback), viewed per block as a row-major R x C matrix:
//   round 0  P_w = M Q (R x rank) for each compressed matrix, Q the warm
//            start (C x rank, the same on every worker: drawn from the seed
//            at first, then the last step's summed Q); the other blocks'
//            values as they are. Their sum is finished where it is (Decode):
//            each P orthonormalized by modified Gram-Schmidt (P^), the
//            vectors summed.
//   round 1  Q_w = M^T P^ (C x rank) for each compressed matrix; summed
//            (the answer: the summed Q).
//   finish   update = P^ Q^T at each compressed matrix, the summed values
//            elsewhere: the SUM over workers of their M projected on P^
//            (P^ P^T sum_w M_w). The worker keeps M - P^ Q_w^T (what its own
//            projection missed), and the warm start becomes the summed Q.
// Payloads: PayloadKind::kCandidateValues (the factors and vectors as
// values, no indices) of the group's dim; round 0 carries sum over blocks
// of (compressed ? R * rank : R * C) values, round 1 sum of C * rank.
//
// Conservation: the updates applied plus every worker's kept vector equal
// the sum of the vectors the workers encoded (up to float rounding).
//
// NOTE: not thread-safe (a worker's instance keeps the warm start and the
// step's M between its rounds).
#ifndef SKETCHFUSE_COMMON_COMPRESSORS_POWER_SGD_H_
#define SKETCHFUSE_COMMON_COMPRESSORS_POWER_SGD_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace sketchfuse {

inline constexpr uint64_t kPowerSgdMaxRank = 64;
inline constexpr uint64_t kPowerSgdDefaultRank = 4;

// A group's blocks and where each lies in the group, in round 0's payload
// and in round 1's.
struct LowRankLayout {
  struct Block {
    uint64_t offset = 0;    // in the group
    uint64_t rows = 1;      // 1 for a vector
    uint64_t cols = 0;      // a vector's elements
    bool compressed = false;
    uint64_t p_offset = 0;  // in round 0's values: R * rank, or R * C sent whole
    uint64_t q_offset = 0;  // in round 1's values: C * rank (compressed only)
  };
  std::vector<Block> blocks;
  uint64_t rank = kPowerSgdDefaultRank;
  uint64_t dim = 0;       // the group's elements
  uint64_t p_values = 0;  // round 0's values
  uint64_t q_values = 0;  // round 1's values
};

// "RxC.N.RxC..." parsed into {rows, cols} blocks ({1, N} for a vector).
// INVALID_ARGUMENT naming the item for a malformed one, a dimension of 0 or
// above 2^32, or more than 2^20 blocks.
absl::StatusOr<std::vector<std::pair<uint64_t, uint64_t>>> ParseBlockShapes(absl::string_view text);
// The blocks as the spec writes them.
std::string BlockShapesText(const std::vector<std::pair<uint64_t, uint64_t>>& blocks);

// The layout of `blocks` at `rank`. INVALID_ARGUMENT when the blocks do not
// add up to `dim` (or, without blocks, for dim 0).
absl::StatusOr<LowRankLayout> MakeLowRankLayout(const std::vector<std::pair<uint64_t, uint64_t>>& blocks,
                                                uint64_t rank, uint64_t dim);

// The math, on row-major matrices, one block at a time (exposed for the
// tests' references):
// p (rows x rank) = m (rows x cols) q (cols x rank), in double, rounded.
void MultiplyByFactor(absl::Span<const float> m, absl::Span<const float> q, uint64_t rows, uint64_t cols,
                      uint64_t rank, absl::Span<float> p);
// q (cols x rank) = m^T (cols x rows) p (rows x rank), in double, rounded.
void MultiplyTransposedByFactor(absl::Span<const float> m, absl::Span<const float> p, uint64_t rows,
                                uint64_t cols, uint64_t rank, absl::Span<float> q);
// Orthonormalizes p's columns in place (modified Gram-Schmidt, in double);
// a column left with norm under 1e-20 after the projections becomes 0.
void OrthonormalizeColumns(absl::Span<float> p, uint64_t rows, uint64_t rank);
// out (rows x cols) = p (rows x rank) q^T (rank x cols), in double, rounded.
void MultiplyFactors(absl::Span<const float> p, absl::Span<const float> q, uint64_t rows, uint64_t cols,
                     uint64_t rank, absl::Span<float> out);

}  // namespace sketchfuse

#endif  // SKETCHFUSE_COMMON_COMPRESSORS_POWER_SGD_H_
