// Exact recovery of a sparse vector from its Count-Sketch by peeling.
//
// When the sketched vector has few nonzeros compared with the cells of a row
// (the workers of a job each sketch only their k largest residual entries,
// see common/compressors/count_sketch_compressor.cc), most of its
// coordinates sit alone in their cell in most rows. Such a coordinate's row
// estimates (sign * cell) are then exactly its value, and equal: the
// decoder takes a coordinate whose estimates agree in at least two rows,
// subtracts it from every row, and repeats, so that each coordinate taken
// frees the cells it shared with others (as an invertible Bloom lookup table
// decodes). The values it returns are the sums that were inserted, not
// estimates: nothing is applied that was not sent.
//
// Guards against false coordinates, which would apply values nobody sent:
//   - every row estimate must exceed a floor (1e-6 of the largest cell): a
//     coordinate that was never inserted reads an empty cell (0) in some row
//     with high probability, and float residues of subtraction stay below it;
//   - a coordinate is taken only when one group of agreeing rows is larger
//     than any other (a coordinate that shares two rows with the same other
//     coordinate reads an agreeing but wrong value there);
//   - each cell explains at most one coordinate per pass: a coordinate that
//     merely collides, in two rows, with the same lone coordinate reads the
//     same value there; when several coordinates claim a cell, the one with
//     more agreeing rows takes it and the others wait for a later pass (a tie
//     takes it from both).
// What cannot be recovered (too many nonzeros for the sketch, rows that
// collide) is simply not returned; callers keep it (the workers' residuals).
//
// Capacity, measured (bench/peel_capacity; bench/results/peel_capacity):
// with 4 rows, sums with up to a quarter as many nonzeros as the sketch has
// cells are recovered almost entirely (99% from 128 nonzeros up); at a third,
// small sketches stall (36% of 128 nonzeros in 384 cells, 59% of 192 in 576)
// and only large ones recover most (97% of 4,000 in 12,000 cells).
//
// NOTE: pure functions; thread-safe.
#ifndef SKETCHFUSE_COMMON_SKETCH_PEELING_H_
#define SKETCHFUSE_COMMON_SKETCH_PEELING_H_

#include <cstdint>

#include "common/count_sketch.h"

namespace sketchfuse {

struct PeelOptions {
  // Two row estimates agree when |a - b| <= tolerance * max(|a|, |b|): equal
  // sums of the same values, added in another order (a ring allreduce),
  // differ in their last bits.
  float tolerance = 1e-6f;
  // Row estimates at or below floor * (largest |cell| of the sketch) count as
  // empty.
  float floor = 1e-6f;
  // Passes over the coordinates; each pass takes every coordinate that is
  // decodable at its start.
  uint32_t max_passes = 32;
  // At most this many coordinates are returned (the largest magnitudes of
  // the pass that reaches the cap).
  uint64_t max_entries = UINT64_MAX;
};

// The coordinates of [0, dim) recovered from `sketch` with their values, in
// ascending index order. Needs at least two rows (one row cannot tell a lone
// coordinate from a crowded cell): returns nothing for one row. dim < 2^32.
SparseEntries PeelDecode(const SketchView& sketch, uint64_t dim, const PeelOptions& options = {});

// The same algorithm written one coordinate at a time, for tests.
namespace sketch_peeling_reference {
SparseEntries PeelDecode(const SketchShape& shape, std::vector<float> table, uint64_t dim,
                         const PeelOptions& options = {});
}  // namespace sketch_peeling_reference

}  // namespace sketchfuse

#endif  // SKETCHFUSE_COMMON_SKETCH_PEELING_H_
