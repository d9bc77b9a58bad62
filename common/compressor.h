// The compressor interface: one gradient group in, one payload out, and the
// decode of an aggregate back into an update.
//
// Compressors are created by name through CompressorRegistry
// (common/compressor_registry.h). A worker owns one compressor per fusion
// group (decorators such as error feedback keep per-group state); a server uses
// one to decode aggregates. Every worker of a job must use the same spec so
// that payload shapes (derived from the group size) agree.
//
// NOTE: not thread-safe; give each thread its own instance.
#ifndef SKETCHFUSE_COMMON_COMPRESSOR_H_
#define SKETCHFUSE_COMMON_COMPRESSOR_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "common/aggregation_state.h"
#include "common/payload.h"

namespace sketchfuse {

// What an encode may need besides the gradient.
struct EncodeContext {
  // Training step: seeds step-dependent choices (random-k indices, samples),
  // identically on every worker.
  uint64_t step = 0;
  // The group's parameter values, same length as the gradient; needed by
  // importance-weighted selection, ignored by the others.
  absl::Span<const float> params;
};

// A method whose two rounds per step sum low-rank factors (PowerSGD,
// common/compressors/power_sgd.h), on a worker: round 0 sums the workers'
// Encode (their P = M Q, one factor per matrix of the group, and the
// group's vectors whole), which the group's Decode finishes where the sum
// is (it orthonormalizes each P: P^); round 1 sums what SecondRound makes
// of that answer (each worker's Q = M^T P^), a later round's factor values
// (CheckFactorRound), answered as their dense sum; Finish turns the two
// answers into the group's update.
class LowRankRounds {
 public:
  virtual ~LowRankRounds() = default;

  // Round 1's payload (PayloadKind::kCandidateValues: the factor values,
  // no indices) for round 0's answer: M^T P^ for the M this worker encoded
  // last. INVALID_ARGUMENT for an answer of another length or before any
  // Encode.
  virtual absl::StatusOr<Payload> SecondRound(const Update& first_answer) = 0;

  struct Outcome {
    // The update: the SUM over the workers (P^ Q^T for each matrix, the
    // summed vectors), dense, of the group's dim.
    Update update;
    // What this worker keeps of the vector it encoded: M - P^ Q_w^T at each
    // matrix (its own factor's reconstruction), 0 at the vectors (sent
    // whole); the group's dim.
    std::vector<float> kept;
  };
  // The outcome for both rounds' answers; advances the warm start (the next
  // step's Q is the summed Q, the same on every worker). INVALID_ARGUMENT,
  // nothing advanced, for answers that do not fit.
  virtual absl::StatusOr<Outcome> Finish(const Update& first_answer, const Update& second_answer) = 0;

  // The warm start, as floats (checkpoints), and its restoration:
  // INVALID_ARGUMENT, nothing restored, for another size or a non-finite
  // value.
  virtual std::vector<float> SaveState() const = 0;
  virtual absl::Status RestoreState(absl::Span<const float> saved) = 0;
};

class Compressor {
 public:
  virtual ~Compressor() = default;

  // The canonical spec this instance was created from, e.g.
  // "count_sketch:density=0.001,rows=5,seed=1,width=10"; decorators wrap it.
  virtual std::string spec() const = 0;

  // Kind of the payloads Encode produces.
  virtual PayloadKind payload_kind() const = 0;

  // True when payloads of different workers are summable: the merge of
  // Encode(x) and Encode(y) equals Encode(x + y) up to float rounding.
  virtual bool linear() const = 0;

  // Encodes a gradient group. The group must have 1 to 2^32 - 1 elements
  // (INVALID_ARGUMENT otherwise) and finite values (the caller checks, see
  // FirstNonFinite).
  virtual absl::StatusOr<Payload> Encode(absl::Span<const float> grad,
                                         const EncodeContext& context) = 0;

  // Decodes an aggregate (one payload or the MergeInto of many) into the
  // update to apply. INVALID_ARGUMENT if the payload is not of this
  // compressor's kind.
  virtual absl::StatusOr<Update> Decode(const Payload& aggregate) const = 0;

  // The same, for an aggregate the caller no longer needs: a compressor
  // whose update is the aggregate itself (dense) takes its buffer instead of
  // copying it. The result equals Decode(aggregate).
  virtual absl::StatusOr<Update> DecodeOwned(Payload aggregate) const { return Decode(aggregate); }

  // OK if `payload` could have come from this compressor's Encode of a group
  // of payload.dim elements: the kind, and for sketches the shape. A server
  // calls it on every push. Assumes ValidatePayload(payload) is OK.
  virtual absl::Status CheckPayload(const Payload& payload) const {
    if (payload.kind != payload_kind()) {
      return absl::InvalidArgumentError(PayloadKindMismatch(payload.kind));
    }
    return absl::OkStatus();
  }

  // CheckPayload for a payload pushed for training step `step`: compressors
  // whose payloads depend on the step (count_sketch with method=peel hashes
  // each step with its own seed) also check that. A server calls it on every
  // push.
  virtual absl::Status CheckPayloadForStep(const Payload& payload, uint64_t step) const {
    return CheckPayload(payload);
  }

  // Sketch compressors: the shape of the sketch of a group of `dim` elements
  // and how many heavy hitters its decode selects, so that a GPU worker can
  // encode and decode the same payloads with the device kernels. nullopt for
  // the others.
  struct SketchLayout {
    SketchShape shape;
    uint64_t heavy_hitters = 0;
    // How the device encodes and decodes (count_sketch's `method`):
    //   kPeel: each worker inserts its `heavy_hitters` largest entries,
    //     hashed with the step's seed (StepSeed(seed, step); `shape` holds
    //     step 0's), and the decode peels;
    //   kEstimate: the whole group under a fixed seed, heavy hitters of the
    //     estimates.
    //   kCandidates: the whole group, hashed with the step's seed when
    //     `hash_per_step` (else the fixed seed); the table rounded to
    //     bfloat16 when `table_bf16`; the decode lists the `heavy_hitters`
    //     coordinates whose estimates rank first (the candidates of a second
    //     round, candidates per applied coordinate times k), with their
    //     estimates.
    enum class Method { kPeel, kEstimate, kCandidates };
    Method method = Method::kEstimate;
    // The compressor's seed (kPeel, and kCandidates with hash_per_step: the
    // seed each step's seed derives from).
    uint64_t seed = 0;
    bool hash_per_step = false;  // kCandidates only
    bool table_bf16 = false;     // kCandidates only
  };
  virtual std::optional<SketchLayout> SketchLayoutFor(uint64_t dim) const { return std::nullopt; }

  // Methods that keep state where the sum is (common/aggregation_state.h:
  // FetchSGD's sketches) say so here, and make a zero state for a group of
  // `dim` elements; the holder of the sum steps it with each sum instead of
  // calling Decode. Such a method runs one round per step and its workers
  // keep no error feedback or momentum of their own. By default: none
  // (keeps_aggregation_state() false, NewAggregationState null).
  virtual bool keeps_aggregation_state() const { return false; }
  virtual absl::StatusOr<std::unique_ptr<AggregationState>> NewAggregationState(uint64_t dim) const {
    return std::unique_ptr<AggregationState>();
  }

  // What a job tells the compressors of its groups.
  struct JobContext {
    uint32_t world_size = 1;  // workers whose payloads are summed
    uint64_t seed = 0;        // the job's hash seed
    double momentum = 0;      // the run's momentum (where the sum keeps it)
    // The group's blocks in order, as its layers lie in it: {rows, cols} of
    // a whole matrix-shaped layer (rows > 1 and cols > 1: its first
    // dimension, and the product of the rest), {1, n} for a vector (a 1-D
    // layer, or the piece of a layer that a partition cut). Empty when the
    // run gives no shapes (v1::RunConfig layer_rows).
    std::vector<std::pair<uint64_t, uint64_t>> blocks;
  };
  // The spec to run in a job (world size, seed, momentum): parameters the
  // spec leaves to the job are filled in from `job`, so that every worker
  // and server builds the same compressor from the job's config without
  // negotiating. By default the spec itself. The job plan
  // (worker/pipeline/job_plan.h) writes the result into every group.
  virtual std::string SpecForJob(const JobContext& job) const { return spec(); }

  // Whether the job plan may cut this compressor's groups into partitions by
  // default, so that the shards share a model of few groups
  // (worker/pipeline/job_plan.h). A cut gives each partition a table and a k
  // of its own, in proportion to its elements; a method whose candidates
  // suffer when one partition holds most of the gradient's mass answers
  // false (the fixed-size candidates sketch: docs/BENCHMARKS.md, "The
  // aggregation servers"). A run's explicit partition_elements is kept
  // either way. By default true.
  virtual bool cut_for_shards_by_default() const { return true; }

  // Why this compressor will serve a group of `dim` elements summed over
  // `world_size` workers poorly (a sketch too small for their payloads, or
  // larger than the dense gradient), in one sentence naming its parameters
  // and the expected recovery; empty when it fits.
  virtual std::string FitWarning(uint64_t dim, uint32_t world_size) const { return ""; }

  // Tells the compressor which coordinates of its last encoded input were
  // applied, so stateful decorators can clear them. Stateless compressors
  // accept and ignore it.
  virtual absl::Status OnApplied(const Update& update) { return absl::OkStatus(); }

  // A method whose rounds sum low-rank factors (LowRankRounds) answers its
  // worker-side rounds here; null for every other method. Decorators
  // forward it.
  virtual LowRankRounds* low_rank() { return nullptr; }
  // True for such a method (on a worker or a shard).
  virtual bool sums_factor_rounds() const { return false; }

  // OK if `payload` can be round `round`'s (>= 1) push of a method whose
  // earlier round answered densely (a low-rank method's factor values: their
  // kind and count); INVALID_ARGUMENT otherwise, and for every method that
  // takes no such rounds (by default).
  virtual absl::Status CheckFactorRound(uint32_t round, const Payload& payload) const {
    return absl::InvalidArgumentError(absl::StrCat(spec(), " takes no rounds of factor values"));
  }

 protected:
  // "<spec> takes <kind> payloads, not <got>".
  std::string PayloadKindMismatch(PayloadKind got) const;
};

// Number of coordinates to select from a group of `dim` elements: k when it is
// set (> 0), else max(1, round(density * dim)); never above dim.
uint64_t SelectionSize(uint64_t dim, double density, uint64_t k);

// INVALID_ARGUMENT unless 1 <= n < 2^32.
absl::Status CheckGroupSize(uint64_t n);

}  // namespace sketchfuse

#endif  // SKETCHFUSE_COMMON_COMPRESSOR_H_
