// How large a peeled sketch must be, and how much of a sum a given shape
// gives back.
//
// count_sketch method=peel sums W workers' sketches of their k selected
// coordinates and peels the sum (common/sketch_peeling.h). The workers'
// selections are nearly disjoint (96-97% at batch 32, measured), so the sum
// has up to W * k nonzeros (never more than the group's dim), and the peel
// recovers them only while the table has enough cells per nonzero: with 4
// rows, about 99% of the mass at 4 cells per nonzero (a load of 1/4), a
// fraction at 3, next to nothing at 2 (bench/peel_capacity;
// docs/BENCHMARKS.md, "Scale out: 8 and 16 worker processes"). PeelColsFor is that rule;
// SimulatePeel and ExpectedPeelRecovery measure any shape by decoding
// random selections, so a spec that does not follow the rule can be told
// how much it will lose.
//
// NOTE: pure functions; thread-safe.
#ifndef SKETCHFUSE_COMMON_PEEL_CAPACITY_H_
#define SKETCHFUSE_COMMON_PEEL_CAPACITY_H_

#include <cstdint>

#include "common/count_sketch.h"

namespace sketchfuse {

// Cells per nonzero of the summed selections that the default peel shape
// allots (a load of 1/4).
inline constexpr double kPeelCellsPerNonzero = 4.0;

// The nonzeros of the sum of `workers` disjoint selections of k coordinates
// of a group of `dim`: min(workers * k, dim).
uint64_t PeelNonzeros(uint64_t workers, uint64_t k, uint64_t dim);

// The fewest cells a default peel table has: small sums need more cells per
// nonzero (measured: 64 nonzeros need about 6, 16 about 12), since the
// coordinates nobody inserted crowd a small table's cells with claims.
inline constexpr double kPeelMinCells = 512;

// Columns per row so that `rows` rows hold kPeelCellsPerNonzero cells per
// nonzero, and at least kPeelMinCells in all:
// ceil(max(4 * nonzeros, 512) / rows).
uint64_t PeelColsFor(uint32_t rows, uint64_t nonzeros);

// One simulated decode: `workers` workers each select k coordinates of
// [0, dim) (a share `overlap` of each worker's k common to all, the rest
// disjoint), with heavy-tailed values (sign * exp(N(0, 1))); their sketches
// under `shape` are summed and peeled.
struct PeelTrial {
  uint64_t nonzeros = 0;           // of the sum
  uint64_t recovered = 0;          // returned with the value inserted
  uint64_t wrong_values = 0;       // returned with another value
  uint64_t false_coordinates = 0;  // returned though nobody inserted them
  double mass = 0;                 // sum of |value| over the sum's nonzeros
  double recovered_mass = 0;       // of those recovered
  double false_mass = 0;           // sum of |value| returned at false coordinates
};
// Requires workers * k <= dim (disjoint parts), dim < 2^32, a valid shape,
// and overlap in [0, 1]; `seed` draws the selections and values.
PeelTrial SimulatePeel(const SketchShape& shape, uint64_t dim, uint64_t workers, uint64_t k, double overlap,
                       uint64_t seed);

// The share of the summed selections' mass that a peel of `rows` x `cols`
// recovers when `workers` workers select k of `dim` coordinates each
// (disjoint, as measured): SimulatePeel averaged over a few seeds, on a
// scaled-down copy (the same rows and load, at most about 16,000 nonzeros)
// when the sum is larger, so it costs milliseconds. Deterministic.
double ExpectedPeelRecovery(uint32_t rows, uint64_t cols, uint64_t dim, uint64_t workers, uint64_t k);

}  // namespace sketchfuse

#endif  // SKETCHFUSE_COMMON_PEEL_CAPACITY_H_
