// count_sketch: a Count-Sketch of the group (common/count_sketch.h). Payloads
// of different workers add up; the decode returns coordinates of the sum.
//
// Training methods, chosen by the `method` parameter:
//   peel (default): each worker inserts only its k largest entries (k from
//     density or k: the selection of Top-k), hashed with the training step's
//     own seed (StepSeed), and the decode recovers the sum of those sparse
//     vectors exactly by peeling (common/sketch_peeling.h): it returns the
//     coordinates it can separate, with the sums the workers inserted, and
//     never an estimate. A worker then releases only the coordinates it
//     inserted that came back (SettleSent); the rest stay in its residual.
//     The table must be large enough for the union of the workers'
//     selections, up to `workers` * k nonzeros: by default it is sized by
//     common/peel_capacity.h's rule for them (4 cells per nonzero, at least
//     512 cells; ~99% recovered at any world size), and the job plan sets
//     `workers` to the job's world size (SpecForJob). `width` or `cols`
//     fix the shape instead, and FitWarning says how much a fixed shape is
//     expected to recover at the job's size. Hashing each step anew keeps
//     coordinates that collide in one step from colliding in every step.
//   estimate: the whole group is inserted under a fixed seed and the decode
//     takes the k heavy hitters of the aggregate with their estimated values
//     (Sketched-SGD's decode; the GPU worker's).
//   candidates: the first round of a two-round sketch whose size does not
//     depend on the number of workers (fixed_sketch_*; worker/rounds/
//     exchange_rounds.h): every worker inserts its whole group,
//     hashed with the job's seed (hash=job, the default) or the step's
//     (hash=step), into a table of rows x ceil(width * k) cells; the decode
//     returns the `candidates` * k coordinates whose estimates in the summed
//     table rank first (the candidates, with their estimates), and the scheme
//     sums the workers' exact values there and applies the top k of those
//     sums. A fixed hash measured better at 16 workers (docs/BENCHMARKS.md,
//     "Scale out: 8 and 16 worker processes"): a cell whose coordinates are
//     not applied keeps their residual and grows louder until they are.
//   fetchsgd: FetchSGD. Workers insert their raw gradients (no error
//     feedback or momentum of their own) under a fixed seed; whoever holds
//     the sum keeps momentum and error in sketch space and decodes through a
//     FetchSgdState (common/fetchsgd_state.h) with the parameter `momentum`
//     (default 0.9; the job plan writes the run's). Decode alone, without
//     that state, is the estimate decode.
// Parameters: method (peel), density (default 0.001) or k; rows (default 4
// for peel, 5 otherwise; 1..64); for peel `workers` (default 4; the job's
// world size in a job), whose summed selections the table is sized for; or
// width, columns per selected coordinate (default 10 for the other methods,
// FetchSGD's c/k), or cols, an absolute column count (one of the three);
// seed (default 1; the job's seed in a job), shared by every worker of a
// job; momentum (fetchsgd only); candidates (candidates only: candidates per
// applied coordinate, default 2, 1..64); hash (candidates only: job or step);
// table (candidates only: f32, the default, or bf16: each cell of the
// worker's table rounded to bfloat16, common/bf16.h, so the push codec sends
// 2 bytes a cell instead of 4 (proto/payload.proto's bf16_values). The table
// only selects the candidates, whose exact values the second round sums, so
// its rounding moves no mass: it can only change which candidates rank first.)
#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/bf16.h"
#include "common/compressors/builtin.h"
#include "common/compressors/selection.h"
#include "common/count_sketch.h"
#include "common/fetchsgd_state.h"
#include "common/peel_capacity.h"
#include "common/sketch_hash.h"
#include "common/sketch_peeling.h"
#include "common/topk.h"

namespace sketchfuse {
namespace {

// The most group elements per column a candidates table holds before
// FitWarning names it. Measured (mlp and mlp_large, 4 to 64 workers, the
// registry's shape): 21 to 30 elements a column train within 1.4 to 4 points
// of dense at 10x; 220 to 300 collapse at 100x (36 to 58%, or diverge).
// 100 lies between, unmeasured: a warning, not a refusal.
constexpr double kCandidatesMostElementsPerCell = 100;

using Method = Compressor::SketchLayout::Method;

// count_sketch's training methods (the file comment). The shared
// SketchLayout::Method names only how a GPU worker encodes and decodes.
enum class Decoding { kPeel, kEstimate, kFetchSgd, kCandidates };

const char* DecodingName(Decoding decoding) {
  switch (decoding) {
    case Decoding::kPeel:
      return "peel";
    case Decoding::kEstimate:
      return "estimate";
    case Decoding::kFetchSgd:
      return "fetchsgd";
    case Decoding::kCandidates:
      return "candidates";
  }
  return "?";
}

class CountSketchCompressor final : public Compressor {
 public:
  // `workers` > 0 sizes a peel table for that many workers' selections
  // (width and cols unused); else `cols` > 0 is the column count, else
  // ceil(width * k).
  // `hash_per_step`, `table_bf16`: candidates only (peel always hashes per
  // step, and its exact decode needs float32 tables).
  CountSketchCompressor(Decoding decoding, SelectionParams selection, uint32_t rows, uint32_t workers, double width,
                        uint32_t cols, uint64_t seed, float momentum, uint32_t candidates, bool hash_per_step,
                        bool table_bf16)
      : decoding_(decoding),
        peel_(decoding == Decoding::kPeel),
        step_seeded_(decoding == Decoding::kPeel || (decoding == Decoding::kCandidates && hash_per_step)),
        selection_(selection),
        rows_(rows),
        workers_(workers),
        width_(width),
        cols_(cols),
        seed_(seed),
        momentum_(momentum),
        candidates_(candidates),
        table_bf16_(table_bf16) {}

  std::string spec() const override {
    std::string shape = workers_ > 0 ? absl::StrCat(",workers=", workers_)
                        : cols_ > 0  ? absl::StrCat(",cols=", cols_)
                                     : absl::StrCat(",width=", width_);
    return absl::StrCat("count_sketch:method=", DecodingName(decoding_), ",", selection_.ToString(), ",rows=", rows_,
                        shape, ",seed=", seed_,
                        decoding_ == Decoding::kFetchSgd ? absl::StrCat(",momentum=", momentum_) : std::string(),
                        decoding_ == Decoding::kCandidates
                            ? absl::StrCat(",candidates=", candidates_, ",hash=", step_seeded_ ? "step" : "job",
                                           table_bf16_ ? ",table=bf16" : "")
                            : std::string());
  }

  // The job's seed always; the job's world size where the table is sized
  // for the workers (peel without width or cols); FetchSGD's momentum.
  std::string SpecForJob(const JobContext& job) const override {
    CountSketchCompressor resolved = *this;
    resolved.seed_ = job.seed;
    if (workers_ > 0) resolved.workers_ = std::max<uint32_t>(1, job.world_size);
    if (decoding_ == Decoding::kFetchSgd) resolved.momentum_ = static_cast<float>(job.momentum);
    return resolved.spec();
  }

  // Not the candidates method: its table is sized by the group's elements,
  // not by where the mass is, so a partition holding the MLP's last layers
  // gets a quarter of the cells for most of the heavy coordinates (16
  // workers, 4 partitions: 77.29% against 80.19% uncut, 3 seeds).
  bool cut_for_shards_by_default() const override { return decoding_ != Decoding::kCandidates; }

  std::string FitWarning(uint64_t dim, uint32_t world_size) const override {
    if (decoding_ == Decoding::kCandidates && dim > 0) {
      const SketchShape shape = ShapeFor(dim);
      const uint64_t cells = shape.num_cells();
      const uint64_t candidates = std::min<uint64_t>(dim, candidates_ * selection_.For(dim));
      if (cells + candidates >= dim) {
        return absl::StrFormat(
            "%s: its table (%u cells) and %u candidates carry as many values as the group's %u elements: "
            "dense_allreduce sends no more; use fewer coordinates (density) or a smaller width",
            spec(), cells, candidates, dim);
      }
      const double per_cell = static_cast<double>(dim) / shape.cols;
      if (per_cell <= kCandidatesMostElementsPerCell) return "";
      return absl::StrFormat(
          "%s: each of the table's %u columns mixes %.0f of the group's %u elements (more than %.0f), so its "
          "candidates are whole cells' worth of coordinates rather than the largest: at 100x (about 220 to 300 a "
          "cell) this scheme collapsed in every measured run, at 10x (21 to 30) it trains (docs/BENCHMARKS.md, "
          "\"Scale out: 4 to 256 virtual workers at equal bytes\"); use a larger density or width, or topk_ps at "
          "this compression",
          spec(), shape.cols, per_cell, dim, kCandidatesMostElementsPerCell);
    }
    if (!peel_ || dim == 0) return "";
    const SketchShape shape = ShapeFor(dim);
    const uint64_t k = selection_.For(dim);
    const uint64_t nonzeros = PeelNonzeros(world_size, k, dim);
    if (shape.num_cells() >= dim) {
      return absl::StrFormat(
          "%s: the %u x %u table (%u cells) is as large as the group (%u elements): %u workers' selections of %u "
          "cover it, so the peel sends more than dense_allreduce would; use fewer coordinates (density) or a "
          "scheme whose traffic does not grow with the workers",
          spec(), shape.rows, shape.cols, shape.num_cells(), dim, world_size, k);
    }
    if (workers_ == world_size) return "";  // sized by the rule for this job
    const double recovered = ExpectedPeelRecovery(shape.rows, shape.cols, dim, world_size, k);
    if (recovered >= 0.95) return "";
    return absl::StrFormat(
        "%s: the %u x %u table holds %.2f cells per nonzero of %u workers' selections of %u (up to %u nonzeros); "
        "the peel is expected to recover %.0f%% of their mass (simulated), the rest waits in the residuals; "
        "leave width, cols and workers unset to size it for the job (%u x %u)",
        spec(), shape.rows, shape.cols, static_cast<double>(shape.num_cells()) / std::max<uint64_t>(1, nonzeros),
        world_size, k, nonzeros, 100 * recovered, rows_, PeelColsFor(rows_, nonzeros));
  }
  PayloadKind payload_kind() const override { return PayloadKind::kSketch; }
  bool linear() const override { return true; }

  // The sketch shape for a group of `dim` elements at `step`: the same on
  // every worker (the seed depends on the step for peel).
  SketchShape ShapeFor(uint64_t dim, uint64_t step = 0) const {
    const double cols = workers_ > 0 ? static_cast<double>(PeelColsFor(rows_, PeelNonzeros(workers_, selection_.For(dim), dim)))
                        : cols_ > 0  ? cols_
                                     : std::ceil(width_ * selection_.For(dim));
    return SketchShape{rows_, static_cast<uint32_t>(std::clamp<double>(cols, 1, kMaxSketchCols)),
                       step_seeded_ ? StepSeed(seed_, step) : seed_};
  }

  // FetchSGD encodes as estimate does (the whole group under a fixed seed);
  // its aggregation state keeps it off the device (GroupCompressors refuses
  // it there). Candidates decode `candidates` times k coordinates.
  std::optional<SketchLayout> SketchLayoutFor(uint64_t dim) const override {
    SketchLayout layout{ShapeFor(dim), selection_.For(dim), peel_ ? Method::kPeel : Method::kEstimate, seed_};
    if (decoding_ == Decoding::kCandidates) {
      layout.method = Method::kCandidates;
      layout.heavy_hitters = std::min<uint64_t>(dim, candidates_ * selection_.For(dim));
      layout.hash_per_step = step_seeded_;
      layout.table_bf16 = table_bf16_;
    }
    return layout;
  }

  // FetchSGD keeps momentum and error as sketches where the sum is.
  bool keeps_aggregation_state() const override { return decoding_ == Decoding::kFetchSgd; }
  absl::StatusOr<std::unique_ptr<AggregationState>> NewAggregationState(uint64_t dim) const override {
    if (decoding_ != Decoding::kFetchSgd) return std::unique_ptr<AggregationState>();
    absl::StatusOr<FetchSgdState> state = FetchSgdState::Create(ShapeFor(dim), dim, selection_.For(dim), momentum_);
    if (!state.ok()) return state.status();
    return std::unique_ptr<AggregationState>(std::make_unique<FetchSgdState>(*std::move(state)));
  }

  absl::StatusOr<Payload> Encode(absl::Span<const float> grad, const EncodeContext& context) override {
    absl::Status size = CheckGroupSize(grad.size());
    if (!size.ok()) return size;
    absl::StatusOr<CountSketch> sketch = CountSketch::Create(ShapeFor(grad.size(), context.step));
    if (!sketch.ok()) return sketch.status();
    Payload p;
    if (peel_) {
      std::vector<uint32_t> selected = TopKIndices(grad, selection_.For(grad.size()));
      std::vector<float> values(selected.size());
      for (size_t j = 0; j < selected.size(); ++j) values[j] = grad[selected[j]];
      if (absl::Status s = sketch->InsertEntries(selected, values); !s.ok()) return s;
      p.inserted = std::move(selected);
    } else if (absl::Status s = sketch->Insert(grad); !s.ok()) {
      return s;
    }
    p.kind = PayloadKind::kSketch;
    p.dim = grad.size();
    p.sketch = sketch->shape();
    p.values = std::move(*sketch).ReleaseTable();
    if (table_bf16_) RoundToBf16(absl::MakeSpan(p.values));
    return p;
  }

  // The kind and the shape; for peel and candidates, whose seed changes with
  // the step, the seed is checked by CheckPayloadForStep.
  absl::Status CheckPayload(const Payload& payload) const override {
    if (payload.kind != PayloadKind::kSketch) {
      return absl::InvalidArgumentError(PayloadKindMismatch(payload.kind));
    }
    const SketchShape want = ShapeFor(payload.dim);
    if (payload.sketch.rows != want.rows || payload.sketch.cols != want.cols ||
        (!step_seeded_ && payload.sketch.seed != want.seed) || payload.values.size() != payload.sketch.num_cells()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "sketch payload of shape ", payload.sketch.rows, "x", payload.sketch.cols, " seed ",
          payload.sketch.seed, " does not match ", spec(), " for dim ", payload.dim));
    }
    return absl::OkStatus();
  }

  absl::Status CheckPayloadForStep(const Payload& payload, uint64_t step) const override {
    if (absl::Status s = CheckPayload(payload); !s.ok()) return s;
    if (step_seeded_ && payload.sketch.seed != StepSeed(seed_, step)) {
      return absl::InvalidArgumentError(absl::StrCat("sketch payload seed ", payload.sketch.seed,
                                                     " is not the seed of step ", step, " (", StepSeed(seed_, step),
                                                     ") for ", spec()));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<Update> Decode(const Payload& aggregate) const override {
    absl::Status fits = CheckPayload(aggregate);
    if (!fits.ok()) return fits;
    const SketchView view(aggregate.sketch, aggregate.values.data());
    SparseEntries decoded;
    if (peel_) {
      PeelOptions options;
      options.max_entries = aggregate.sketch.num_cells();
      decoded = PeelDecode(view, aggregate.dim, options);
    } else if (decoding_ == Decoding::kCandidates) {
      decoded = view.HeavyHitters(aggregate.dim, candidates_ * selection_.For(aggregate.dim));
    } else {
      decoded = view.HeavyHitters(aggregate.dim, selection_.For(aggregate.dim));
    }
    Update update;
    update.dim = aggregate.dim;
    update.indices = std::move(decoded.indices);
    update.values = std::move(decoded.values);
    return update;
  }

 private:
  Decoding decoding_;
  bool peel_;
  bool step_seeded_;  // hashed with the step's seed
  SelectionParams selection_;
  uint32_t rows_;
  uint32_t workers_;  // > 0: the peel table is sized for this many workers
  double width_;
  uint32_t cols_;  // 0: derived from width
  uint64_t seed_;
  float momentum_;  // fetchsgd
  uint32_t candidates_;  // candidates: candidates decoded per applied coordinate
  bool table_bf16_;      // candidates: the encoded table rounded to bfloat16
};

}  // namespace

absl::StatusOr<std::unique_ptr<Compressor>> MakeCountSketchCompressor(ParamReader& params) {
  absl::StatusOr<std::string> name =
      params.Choice("method", "peel", {"peel", "estimate", "fetchsgd", "candidates"});
  if (!name.ok()) return name.status();
  const Decoding decoding = *name == "peel"       ? Decoding::kPeel
                            : *name == "estimate" ? Decoding::kEstimate
                            : *name == "fetchsgd" ? Decoding::kFetchSgd
                                                  : Decoding::kCandidates;
  const bool peel = decoding == Decoding::kPeel;
  absl::StatusOr<SelectionParams> selection = ReadSelection(params);
  if (!selection.ok()) return selection.status();
  absl::StatusOr<uint64_t> rows = params.Uint("rows", peel ? 4 : 5, peel ? 2 : 1, kMaxSketchRows);
  if (!rows.ok()) {
    return peel && params.Has("rows") ? absl::InvalidArgumentError(absl::StrCat(
                                            rows.status().message(), " (method=peel needs at least 2 rows)"))
                                      : rows.status();
  }
  const int shapes = params.Has("width") + params.Has("cols") + params.Has("workers");
  if (shapes > 1) return absl::InvalidArgumentError("count_sketch: set one of workers, width and cols");
  if (params.Has("workers") && !peel) {
    return absl::InvalidArgumentError("count_sketch: workers is a parameter of method=peel (set width or cols)");
  }
  absl::StatusOr<double> width = params.Double("width", 10.0, 0.01, 1e6);
  if (!width.ok()) return width.status();
  absl::StatusOr<uint64_t> cols = params.Uint("cols", 0, 1, kMaxSketchCols);
  if (!cols.ok()) return cols.status();
  // A peel table without an explicit shape is sized for `workers` workers.
  const uint64_t default_workers = peel && shapes == 0 ? 4 : 0;
  absl::StatusOr<uint64_t> workers = params.Uint("workers", default_workers, 1, 1u << 20);
  if (!workers.ok()) return workers.status();
  absl::StatusOr<uint64_t> seed = params.Uint("seed", 1, 0, UINT64_MAX);
  if (!seed.ok()) return seed.status();
  if (params.Has("momentum") && decoding != Decoding::kFetchSgd) {
    return absl::InvalidArgumentError("count_sketch: momentum is a parameter of method=fetchsgd");
  }
  absl::StatusOr<double> momentum = params.Double("momentum", 0.9, 0.0, 0.999999);
  if (!momentum.ok()) return momentum.status();
  if (params.Has("candidates") && decoding != Decoding::kCandidates) {
    return absl::InvalidArgumentError("count_sketch: candidates is a parameter of method=candidates");
  }
  absl::StatusOr<uint64_t> candidates = params.Uint("candidates", 2, 1, 64);
  if (!candidates.ok()) return candidates.status();
  if (params.Has("hash") && decoding != Decoding::kCandidates) {
    return absl::InvalidArgumentError(
        "count_sketch: hash is a parameter of method=candidates (peel hashes per step, the others per job)");
  }
  absl::StatusOr<std::string> hash = params.Choice("hash", "job", {"job", "step"});
  if (!hash.ok()) return hash.status();
  if (params.Has("table") && decoding != Decoding::kCandidates) {
    return absl::InvalidArgumentError(
        "count_sketch: table is a parameter of method=candidates (the other methods decode from float32 tables)");
  }
  absl::StatusOr<std::string> table = params.Choice("table", "f32", {"f32", "bf16"});
  if (!table.ok()) return table.status();
  return std::unique_ptr<Compressor>(new CountSketchCompressor(
      decoding, *selection, static_cast<uint32_t>(*rows), static_cast<uint32_t>(*workers), *width,
      static_cast<uint32_t>(*cols), *seed, static_cast<float>(*momentum), static_cast<uint32_t>(*candidates),
      *hash == "step", *table == "bf16"));
}

}  // namespace sketchfuse
