// FetchSGD's aggregation-side state of one fused group (Rothchild et al.,
// "FetchSGD: Communication-Efficient Federated Learning with Sketching",
// ICML 2020): momentum and accumulated error kept as Count-Sketches, where
// the sum of the workers' gradient sketches is (sketches are linear, so the
// sketch of the momentum of the summed gradient is the momentum of the
// summed sketches).
//
// Workers sketch their raw gradients (no error feedback or momentum of their
// own, count_sketch method=fetchsgd); each step the holder of the sum (a
// shard for sketch_ps; every worker, identically, for sketch_allreduce)
// calls Step:
//   S_u <- rho * S_u + sum          momentum in sketch space
//   S_e <- S_e + S_u                error accumulation in sketch space
//   update = the k heavy hitters of S_e, with their estimates
//   S_u, S_e <- 0 at every row's cell of every coordinate of the update
// The last line is FetchSGD's published rule for taking out what was
// applied (its authors' code notes that subtracting the sketch of the update
// instead made training diverge): it also discards whatever else those cells
// held.
//
// It is the method's AggregationState (common/aggregation_state.h): the
// count_sketch compressor with method=fetchsgd creates it
// (Compressor::NewAggregationState), and the holders of the sum know it only
// through that interface.
//
// NOTE: not thread-safe; one instance per group, stepped in step order.
#ifndef SKETCHFUSE_COMMON_FETCHSGD_STATE_H_
#define SKETCHFUSE_COMMON_FETCHSGD_STATE_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/aggregation_state.h"
#include "common/count_sketch.h"
#include "common/payload.h"

namespace sketchfuse {

class FetchSgdState final : public AggregationState {
 public:
  // A zero state for a group of `dim` elements sketched as `shape`, decoding
  // `k` heavy hitters, with momentum `momentum` in [0, 1). INVALID_ARGUMENT
  // for a bad shape, dim, k or momentum.
  static absl::StatusOr<FetchSgdState> Create(const SketchShape& shape, uint64_t dim, uint64_t k, float momentum);

  // Folds the step's summed gradient sketch in and returns the step's
  // update (sparse, ascending). INVALID_ARGUMENT, with the state unchanged,
  // if `sum` is not a sketch of this group's shape and size, or if folding
  // it in would take a cell of the state past float's range (the state
  // stays finite).
  absl::StatusOr<Update> Step(const Payload& sum) override;

  std::unique_ptr<AggregationState> Clone() const override { return std::make_unique<FetchSgdState>(*this); }

  // The state, S_u then S_e (2 * rows * cols floats), for journals and
  // checkpoints; Restore takes it back (INVALID_ARGUMENT, state unchanged,
  // for another size or a non-finite value).
  std::vector<float> Save() const override;
  absl::Status Restore(absl::Span<const float> saved) override;

  const SketchShape& shape() const { return shape_; }

 private:
  FetchSgdState(const SketchShape& shape, uint64_t dim, uint64_t k, float momentum)
      : shape_(shape), dim_(dim), k_(k), momentum_(momentum), u_(shape.num_cells(), 0.0f),
        e_(shape.num_cells(), 0.0f) {}

  SketchShape shape_;
  uint64_t dim_;
  uint64_t k_;
  float momentum_;
  std::vector<float> u_;  // momentum sketch
  std::vector<float> e_;  // error sketch
};

}  // namespace sketchfuse

#endif  // SKETCHFUSE_COMMON_FETCHSGD_STATE_H_
