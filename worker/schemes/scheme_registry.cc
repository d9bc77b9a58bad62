#include "worker/schemes/scheme_registry.h"

#include <algorithm>

#include "worker/gpu/device_group_state.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "common/compressor_params.h"
#include "common/compressor_registry.h"
#include "common/error_text.h"
#include "common/json_text.h"
#include "worker/training/optimizer_spec.h"

namespace sketchfuse {

namespace {

// The peel's centralized default, shared by sketch_ps and by the hybrid that
// pushes like it (auto): a table of 4 rows sized by the job plan for the
// workers' selections (SpecForJob fills in workers=W).
constexpr char kPeelPsSpec[] = "count_sketch:method=peel,density=0.00625,rows=4";

// The two-round sketch of fixed size: one spec and one set of traits for its
// three routes (fixed_sketch_allreduce, fixed_sketch_ps, fixed_sketch_auto),
// which apply the same updates bit for bit (//tests:fixed_sketch_test). A 1 x k
// table and 2k candidate values per group (10x fewer floats than dense at
// density 0.0333), the same at any number of workers; the shape measured best
// at 16 workers among those of 10x (docs/BENCHMARKS.md, "Scale out: 8 and 16 worker processes"). It
// applies the top k of the exact sums of what the workers send in the second
// round, which the release cap scales (kTwoRoundReleaseCapFactor; no cap keeps
// the CNN at 16 workers at 10x: docs/BENCHMARKS.md).
constexpr char kFixedSketchSpec[] =
    "count_sketch:method=candidates,density=0.0333,rows=1,width=1,candidates=2,table=bf16";

SchemeTraits FixedSketchTraits() {
  return SchemeTraits().WorkerMomentum().CappedRelease().TwoRounds().ReselectsTopK().RunsOnGpu();
}

}  // namespace

const std::vector<SchemeInfo>& Schemes() {
  using T = SchemeTraits;
  static const std::vector<SchemeInfo>* schemes = new std::vector<SchemeInfo>{
      {"sketch_ps", Route::kCentralized, "count_sketch", kPeelPsSpec,
       "Count-Sketch per fused group, summed on the servers, which decode the global top-k (Sketch-Fusion)",
       T().WorkerMomentum().CappedRelease().SecondRound().RunsOnGpu()},
      // topk_ps applies k coordinates in all (the servers re-select the
      // union of P local top-k), so it needs a higher density than
      // topk_allgather, as gtopk does; and no release cap: most of what a
      // worker sends is dropped by the re-selection, so a cap computed on
      // what it sends throttles what is applied (worker/README.md, "Baselines").
      {"topk_ps", Route::kCentralized, "topk", "topk:density=0.05",
       "local top-k, unioned and re-selected on the servers (BytePS-style baseline)",
       T().WorkerMomentum().ReselectsTopK()},
      {"dense_ps", Route::kCentralized, "dense", "dense", "dense gradients summed on the servers", T()},
      {"dense_allreduce", Route::kDecentralized, "dense", "dense",
       "dense ring allreduce among the workers (the uncompressed baseline)", T(), &RoundsAllreduce},
      {"dense_bf16_allreduce", Route::kDecentralized, "dense", "dense",
       "dense ring allreduce with bfloat16 values on the wire, summed in float32 (the 16-bit baseline, 2x)", T(),
       &DenseAllreduceBf16},
      {"sketch_allreduce", Route::kDecentralized, "count_sketch", "count_sketch:method=peel,density=0.0042,rows=4",
       "allreduce of the sketches; every worker decodes the same top-k (gs-SGD global sketching)",
       T().WorkerMomentum().CappedRelease().SecondRound().RunsOnGpu(), &RoundsAllreduce},
      // The two-round sketch of fixed size (kFixedSketchSpec) on the ring;
      // fixed_sketch_ps and fixed_sketch_auto are its other two routes.
      {"fixed_sketch_allreduce", Route::kDecentralized, "count_sketch", kFixedSketchSpec,
       "allreduce of fixed-size sketches, then of the exact values at the decoded candidates (no indices); the top "
       "k of those sums applied: bytes per worker independent of the number of workers",
       FixedSketchTraits(), &RoundsAllreduce},
      // The same two-round sketch with the servers summing: each worker
      // pushes its table, the shard decodes the candidates; each pushes its
      // values there (no indices), the shard answers the top k of the sums.
      {"fixed_sketch_ps", Route::kCentralized, "count_sketch", kFixedSketchSpec,
       "fixed-size sketches summed on the servers, which decode the candidates; the workers' exact values there "
       "(no indices) summed in a second push and the top k applied: bytes per worker independent of the number "
       "of workers",
       FixedSketchTraits()},
      {"topk_allgather", Route::kDecentralized, "topk", "topk:density=0.01",
       "local top-k, allgather of (index, value), summed", T().WorkerMomentum().CappedRelease(), &RoundsAllreduce},
      // gtopk applies k coordinates in all, where topk_allgather applies the
      // union of P local top-k (3.7k at P = 4 on the Fashion-MNIST models), so
      // it needs twice topk's density to hold accuracy (worker/README.md). Its
      // tree compares the workers' values: no release cap.
      {"gtopk", Route::kDecentralized, "topk", "topk:density=0.02",
       "gTop-k: log2 P rounds of pairwise merge and top-k re-selection, then a broadcast", T().WorkerMomentum(),
       &GTopK},
      // importance_allreduce's density is per rank: every rank names its k
      // most important indices and all allreduce their values at the union
      // (up to P k coordinates; 3.8x at P = 4 on the Fashion-MNIST models:
      // the density that holds accuracy, worker/README.md, "Baselines").
      {"importance_allreduce", Route::kDecentralized, "importance", "importance:density=0.04",
       "every rank names its important indices by |g|/|w| (allgather); all allreduce their values at the union",
       T().WorkerMomentum().NeedsParameters(), &ImportanceAllreduce},
      {"spardl", Route::kDecentralized, "topk", "topk:density=0.01",
       "SparDL: Spar-Reduce-Scatter and Spar-All-Gather with global residual collection", T().WorkerMomentum(),
       &SparDL},
      // PowerSGD (common/compressors/power_sgd.h): two rounds of sums of
      // low-rank factors, so the ring and the servers both carry it; its
      // momentum is the optimizer's, on the update (as in the paper and
      // PyTorch's hook). It needs the layers' shapes (RunConfig.layer_rows).
      {"powersgd_allreduce", Route::kDecentralized, "powersgd", "powersgd:rank=4",
       "PowerSGD: rank-4 factors of each matrix (one power iteration with a warm start) allreduced in two rounds, "
       "vectors and small layers whole; error feedback",
       T().TwoRounds(), &RoundsAllreduce},
      {"powersgd_ps", Route::kCentralized, "powersgd", "powersgd:rank=4",
       "PowerSGD with the servers summing its two rounds of factors", T().TwoRounds()},
      // The hybrid pushes like sketch_ps and falls back to sketch_allreduce's
      // algorithm; the servers decode in one round, so no second round.
      {"auto", Route::kHybrid, "count_sketch", kPeelPsSpec,
       "sketch_ps while the servers answer, sketch_allreduce when they fail; back when they are healthy",
       T().WorkerMomentum().CappedRelease().RunsOnGpu(), &RoundsAllreduce, {"sketch_ps", "sketch_allreduce"}},
      {"fixed_sketch_auto", Route::kHybrid, "count_sketch", kFixedSketchSpec,
       "fixed_sketch_ps while the servers answer, fixed_sketch_allreduce when they fail; back when they are healthy",
       FixedSketchTraits(), &RoundsAllreduce,
       {"fixed_sketch_ps", "fixed_sketch_allreduce"}},
  };
  return *schemes;
}

namespace {

// The names of the schemes whose entry satisfies `trait`, in registry order.
template <typename Trait>
std::vector<std::string> NamesWith(Trait trait) {
  std::vector<std::string> names;
  for (const SchemeInfo& scheme : Schemes()) {
    if (trait(scheme)) names.push_back(scheme.name);
  }
  return names;
}

}  // namespace

absl::StatusOr<SchemeInfo> FindScheme(const std::string& name) {
  for (const SchemeInfo& scheme : Schemes()) {
    if (scheme.name == name) return scheme;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown scheme '", name, "'; the schemes are ",
                                                 absl::StrJoin(NamesWith([](const SchemeInfo&) { return true; }), ", ")));
}

absl::Status CheckSchemeCompressor(const std::string& scheme, const std::string& compressor) {
  absl::StatusOr<SchemeInfo> info = FindScheme(scheme);
  if (!info.ok()) return info.status();
  absl::StatusOr<CompressorSpec> spec = ParseCompressorSpec(compressor);
  if (!spec.ok()) return spec.status();
  if (spec->name != info->compressor) {
    return absl::InvalidArgumentError(absl::StrCat("scheme ", scheme, " needs the ", info->compressor,
                                                   " compressor; got '", compressor, "'"));
  }
  // The parameters too (ranges, unknown names).
  absl::StatusOr<std::unique_ptr<Compressor>> made = CompressorRegistry::Default().Create(compressor);
  if (!made.ok()) return made.status();
  return absl::OkStatus();
}

bool SecondRoundFor(const std::string& scheme, bool requested) {
  absl::StatusOr<SchemeInfo> info = FindScheme(scheme);
  return requested || (info.ok() && info->traits.two_rounds);
}

Route SchemeRoute(const std::string& scheme) {
  absl::StatusOr<SchemeInfo> info = FindScheme(scheme);
  return info.ok() ? info->route : Route::kCentralized;
}

absl::StatusOr<uint64_t> SpecSelectionSize(const std::string& spec, uint64_t dim) {
  absl::StatusOr<CompressorSpec> parsed = ParseCompressorSpec(spec);
  if (!parsed.ok()) return parsed.status();
  double density = 0.001;
  uint64_t k = 0;
  if (auto it = parsed->params.find("density"); it != parsed->params.end()) {
    if (!absl::SimpleAtod(it->second, &density)) {
      return absl::InvalidArgumentError(absl::StrCat("density '", it->second, "' of '", spec, "' is not a number"));
    }
  }
  if (auto it = parsed->params.find("k"); it != parsed->params.end()) {
    if (!absl::SimpleAtoi(it->second, &k)) {
      return absl::InvalidArgumentError(absl::StrCat("k '", it->second, "' of '", spec, "' is not a count"));
    }
  }
  return SelectionSize(dim, density, k);
}

std::string SchemeFitWarning(const std::string& scheme, uint32_t world_size) {
  absl::StatusOr<SchemeInfo> info = FindScheme(scheme);
  if (!info.ok() || info->route != Route::kDecentralized || !info->traits.two_rounds ||
      world_size < kTwoRoundRingWarningWorkers) {
    return "";
  }
  // Its centralized form: the one the hybrid that falls back to it pushes to.
  std::string centralized;
  for (const SchemeInfo& other : Schemes()) {
    if (other.route == Route::kHybrid && other.hybrid_of.decentralized == scheme) {
      centralized = other.hybrid_of.centralized;
    }
  }
  const double factor = 2.0 * (world_size - 1) / world_size;
  return absl::StrCat(
      scheme, " at ", world_size, " workers: the ring sends and receives ", absl::StrFormat("%.2f", factor),
      " times its table and candidate values, where a shard route pushes them once, so at the same bytes per worker "
      "it selects fewer than half the coordinates; in the scale study it ended 7.7 to 25.8 points below dense on mlp_large at 16 "
      "to 256 workers (docs/BENCHMARKS.md, \"The scale study\")",
      centralized.empty() ? "" : absl::StrCat("; ", centralized, " keeps the same bytes at any number of workers"));
}

absl::StatusOr<uint64_t> FinalRoundTopK(const std::string& scheme, const std::string& compressor_spec, uint64_t dim) {
  absl::StatusOr<SchemeInfo> info = FindScheme(scheme);
  if (!info.ok()) return info.status();
  if (!info->traits.reselects_top_k) return 0;
  return SpecSelectionSize(compressor_spec, dim);
}

absl::StatusOr<std::vector<uint64_t>> JobFinalRoundTopK(const v1::JobConfig& job) {
  std::vector<uint64_t> sizes;
  for (const v1::GroupConfig& group : job.groups()) {
    absl::StatusOr<uint64_t> k = FinalRoundTopK(job.run().scheme(), group.compressor(), group.dim());
    if (!k.ok()) return k.status();
    sizes.push_back(*k);
  }
  return sizes;
}

absl::StatusOr<std::vector<uint64_t>> JobSelectionSizes(const v1::JobConfig& job) {
  std::vector<uint64_t> sizes;
  for (const v1::GroupConfig& group : job.groups()) {
    absl::StatusOr<uint64_t> k = SpecSelectionSize(group.compressor(), group.dim());
    if (!k.ok()) return k.status();
    sizes.push_back(*k);
  }
  return sizes;
}

std::string SchemesHelp() {
  std::string help;
  for (const SchemeInfo& scheme : Schemes()) absl::StrAppend(&help, "  ", scheme.name, ": ", scheme.summary, "\n");
  return help;
}

std::string SchemesJson() {
  std::vector<std::string> entries;
  for (const SchemeInfo& scheme : Schemes()) {
    const SchemeTraits& t = scheme.traits;
    const std::pair<const char*, bool> traits[] = {
        {"worker_momentum", t.worker_momentum}, {"capped_release", t.capped_release},
        {"second_round", t.second_round},       {"two_rounds", t.two_rounds},
        {"runs_on_gpu", t.runs_on_gpu},         {"reselects_top_k", t.reselects_top_k},
        {"needs_parameters", t.needs_parameters}};
    std::vector<std::string> trait_fields;
    for (const auto& [name, value] : traits) trait_fields.push_back(absl::StrCat("\"", name, "\": ", value ? "true" : "false"));
    const std::string hybrid_of =
        scheme.route == Route::kHybrid
            ? absl::StrCat("{\"centralized\": ", JsonString(scheme.hybrid_of.centralized),
                           ", \"decentralized\": ", JsonString(scheme.hybrid_of.decentralized), "}")
            : "null";
    entries.push_back(absl::StrCat(
        "{\"name\": ", JsonString(scheme.name), ", \"route\": ", JsonString(RouteName(scheme.route)),
        ", \"compressor\": ", JsonString(scheme.compressor),
        ", \"default_compressor\": ", JsonString(scheme.default_compressor_spec),
        ", \"compresses\": ", scheme.compressor == "dense" ? "false" : "true",
        ", \"summary\": ", JsonString(scheme.summary), ", \"traits\": {", absl::StrJoin(trait_fields, ", "),
        "}, \"hybrid_of\": ", hybrid_of, "}"));
  }
  return absl::StrCat("[\n  ", absl::StrJoin(entries, ",\n  "), "\n]\n");
}

bool KeepsStateWithTheSum(const std::string& compressor_spec) {
  absl::StatusOr<std::unique_ptr<Compressor>> compressor = CompressorRegistry::Default().Create(compressor_spec);
  return compressor.ok() && (*compressor)->keeps_aggregation_state();
}

absl::Status CheckRunScheme(const v1::RunConfig& run) {
  if (absl::Status s = CheckSchemeCompressor(run.scheme(), run.compressor()); !s.ok()) return s;
  if (absl::Status s = CheckMomentumAt(run); !s.ok()) return s;
  // A copy: a reference into the temporary StatusOr would dangle (ASan's
  // stack-use-after-scope, found by //worker/hook:hook_session_test).
  const SchemeInfo info = *FindScheme(run.scheme());
  if (run.second_round() && !info.traits.second_round) {
    const std::vector<std::string> with =
        NamesWith([](const SchemeInfo& scheme) { return scheme.traits.second_round && !scheme.traits.two_rounds; });
    return absl::InvalidArgumentError(absl::StrCat("--second_round is for --scheme=", absl::StrJoin(with, " or "),
                                                   " only; the scheme is ", run.scheme()));
  }
  if (info.traits.two_rounds && !run.second_round()) {
    return absl::InvalidArgumentError(absl::StrCat("scheme ", run.scheme(),
                                                   " takes two rounds; the run config turns its second round off"));
  }
  if (run.second_round() && KeepsStateWithTheSum(run.compressor())) {
    return absl::InvalidArgumentError(absl::StrCat(QuoteField(run.compressor()),
                                                   " keeps state where the sum is and has no second round"));
  }
  return CheckDevicePlacement(run);
}

std::string OptimizerFitWarning(const v1::RunConfig& run) {
  if (!IsAdamFamily(run)) return "";
  absl::StatusOr<SchemeInfo> info = FindScheme(run.scheme());
  if (!info.ok()) return "";
  absl::StatusOr<CompressorSpec> spec =
      ParseCompressorSpec(run.compressor().empty() ? info->default_compressor_spec : run.compressor());
  if (!spec.ok() || spec->name != "count_sketch") return "";
  const auto method = spec->params.find("method");
  if (method == spec->params.end() || method->second != "candidates") return "";
  return absl::StrCat(
      run.scheme(), " with ", OptimizerOf(run).name(),
      ": the fixed-size sketch's candidates miss Adam's updates, which are all of about one size; it left the "
      "transformer on its unigram plateau, 26 to 45% above dense AdamW's validation loss at 4 and 16 workers "
      "with Adam's moments on the worker or on the update (also at density 0.01, 4 candidates a coordinate, a 4x "
      "table or a hash per step); with Adam use topk_allgather, or topk_ps or gtopk for bytes that stay flat with "
      "the workers (4 to 10% above at 16 workers; docs/BENCHMARKS.md, \"The transformer with AdamW and SGD\")");
}

MomentumPlace MomentumPlaceOf(const v1::RunConfig& run) {
  if (!(run.momentum() > 0)) return MomentumPlace::kNone;
  absl::StatusOr<SchemeInfo> info = FindScheme(run.scheme());
  if (info.ok() && !info->traits.worker_momentum) return MomentumPlace::kOptimizer;
  if (KeepsStateWithTheSum(run.compressor())) return MomentumPlace::kWithTheSum;
  if (run.momentum_at() == kMomentumAtUpdate) return MomentumPlace::kOptimizer;
  return MomentumPlace::kWorker;
}

namespace {

// The Adam run's own refusals of momentum_at=worker (CheckMomentumAt).
absl::Status CheckAdamAtWorker(const v1::RunConfig& run) {
  if (!IsAdamFamily(run) || run.momentum_at() != kMomentumAtWorker) return absl::OkStatus();
  const OptimizerSpec spec = OptimizerOf(run);
  if (KeepsStateWithTheSum(run.compressor())) {
    return absl::InvalidArgumentError(absl::StrCat("momentum_at=", kMomentumAtWorker, " with ", spec.name(), ": ",
                                                   QuoteField(run.compressor()),
                                                   " keeps its state where the sum is, not Adam's moments"));
  }
  if (spec.decays_in_the_gradient()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "momentum_at=", kMomentumAtWorker, " with adam: its weight_decay (", spec.weight_decay,
        ") is an L2 term in the gradient, which the worker's moments do not see; use adamw (decoupled decay)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckMomentumAt(const v1::RunConfig& run) {
  if (run.momentum_at() == kMomentumAtWorker) return CheckAdamAtWorker(run);
  if (run.momentum_at().empty()) return absl::OkStatus();
  if (run.momentum_at() != kMomentumAtUpdate) {
    return absl::InvalidArgumentError(absl::StrCat("momentum_at must be ", kMomentumAtWorker, " or ", kMomentumAtUpdate,
                                                   "; got ", QuoteField(run.momentum_at())));
  }
  if (KeepsStateWithTheSum(run.compressor())) {
    return absl::InvalidArgumentError(absl::StrCat("momentum_at=", kMomentumAtUpdate, ": ", QuoteField(run.compressor()),
                                                   " keeps its momentum where the sum is"));
  }
  return absl::OkStatus();
}

bool KeepsAdamOnTheWorker(const v1::RunConfig& run) {
  if (!IsAdamFamily(run) || run.momentum() > 0 || run.workload() == kHookWorkload) return false;
  if (run.momentum_at() == kMomentumAtUpdate) return false;
  const OptimizerSpec spec = OptimizerOf(run);
  // adam's L2 decay is in the gradient, which the moments would have to see
  // (refused when asked for by name: CheckMomentumAt).
  if (spec.decays_in_the_gradient()) return false;
  absl::StatusOr<SchemeInfo> info = FindScheme(run.scheme());
  return info.ok() && info->traits.worker_momentum && !KeepsStateWithTheSum(run.compressor());
}



bool UsesMomentumCorrection(const v1::RunConfig& run) { return MomentumPlaceOf(run) == MomentumPlace::kWorker; }

bool CapsRelease(const v1::RunConfig& run) {
  if (!(run.release_cap() > 0) || !run.error_feedback()) return false;
  if (!UsesMomentumCorrection(run)) return false;
  absl::StatusOr<SchemeInfo> info = FindScheme(run.scheme());
  if (!info.ok() || !info->traits.capped_release) return false;
  // An optional second round (sketch_ps, sketch_allreduce) sends the exact
  // residual; a two-round scheme caps what it sends there.
  return !run.second_round() || info->traits.two_rounds;
}

double ReleaseCapFor(const v1::RunConfig& run, uint32_t world_size) {
  if (!CapsRelease(run)) return 0;
  absl::StatusOr<SchemeInfo> info = FindScheme(run.scheme());
  const double factor = info.ok() && info->traits.two_rounds ? kTwoRoundReleaseCapFactor : 1.0;
  return factor * run.release_cap() * std::max(1.0, static_cast<double>(world_size) / 4);
}

absl::Status CheckDevicePlacement(const v1::RunConfig& run) {
  if (run.device().empty() || run.device() == "cpu") return absl::OkStatus();
  if (run.device() != "gpu") {
    return absl::InvalidArgumentError(absl::StrCat("device must be cpu or gpu; got ", QuoteField(run.device())));
  }
  absl::StatusOr<SchemeInfo> info = FindScheme(run.scheme());
  if (!info.ok() || !info->traits.runs_on_gpu) {
    const std::vector<std::string> on_gpu = NamesWith([](const SchemeInfo& scheme) { return scheme.traits.runs_on_gpu; });
    return absl::InvalidArgumentError(absl::StrCat("device=gpu serves the count_sketch schemes (",
                                                   absl::StrJoin(on_gpu, ", "), "); got scheme ", run.scheme()));
  }
  if (!run.error_feedback()) return absl::InvalidArgumentError("device=gpu keeps error feedback; the run turns it off");
  // The fixed-size sketches' second round gathers the residual on the
  // device; the optional one of the peel schemes is host-only.
  if (run.second_round() && !info->traits.two_rounds) {
    return absl::InvalidArgumentError(absl::StrCat("device=gpu runs the second round of the fixed-size sketches "
                                                   "only; ", run.scheme(), "'s optional --second_round runs with "
                                                   "--device=cpu"));
  }
  if (KeepsStateWithTheSum(run.compressor())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "device=gpu runs count_sketch with method=peel, estimate or candidates; ", QuoteField(run.compressor()),
        " keeps state where the sum is, which runs on the host"));
  }
  return absl::OkStatus();
}

StackOptions StackOptionsOf(const v1::JobConfig& job) {
  const v1::RunConfig& run = job.run();
  StackOptions options;
  options.error_feedback = run.error_feedback();
  options.worker_momentum = UsesMomentumCorrection(run) ? static_cast<float>(run.momentum()) : -1.0f;
  if (KeepsAdamOnTheWorker(run)) {
    const OptimizerSpec spec = OptimizerOf(run);
    options.worker_adam = AdamHyperparameters{spec.beta1, spec.beta2, spec.eps};
  }
  options.release_cap = static_cast<float>(ReleaseCapFor(run, job.world_size()));
  if (run.device() == "gpu") {
    options.device = [](const Compressor::SketchLayout& layout, uint64_t dim,
                        float momentum) -> absl::StatusOr<std::unique_ptr<DeviceStack>> {
      absl::StatusOr<std::unique_ptr<DeviceGroupState>> state = DeviceGroupState::Create(layout, dim, momentum);
      if (!state.ok()) return state.status();
      return std::unique_ptr<DeviceStack>(*std::move(state));
    };
  }
  return options;
}

absl::StatusOr<GroupCompressors> CompressorsFor(const v1::JobConfig& job) {
  if (absl::Status s = CheckDevicePlacement(job.run()); !s.ok()) return s;
  return GroupCompressors::Create(job, StackOptionsOf(job));
}

}  // namespace sketchfuse
