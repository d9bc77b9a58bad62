// Every aggregation scheme a worker can run, as data in one table: its route,
// the compressor family it needs and its default spec, its traits (momentum,
// release cap, second round, GPU placement, server re-selection, parameters)
// and, for the decentralized route, its algorithm. Everything that depends on
// which scheme a run names asks this table; a new scheme is one entry here
// plus its algorithm file (worker/decentralized/) or its server-side rule.
// Selected by --scheme.
#ifndef SKETCHFUSE_WORKER_SCHEMES_SCHEME_REGISTRY_H_
#define SKETCHFUSE_WORKER_SCHEMES_SCHEME_REGISTRY_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/job_config.pb.h"
#include "worker/compression/group_compressors.h"
#include "worker/decentralized/algorithms.h"
#include "worker/schemes/route.h"

namespace sketchfuse {

// What a scheme is, beyond its route and compressor: each trait a named
// field, set in the registry's table by name (SchemeTraits().WorkerMomentum()
// .CappedRelease()...), read by the code that decides what the trait
// decides.
struct SchemeTraits {
  // Momentum is kept on the worker, before compression (momentum
  // correction), or by a method that keeps state where the sum is: the
  // compressing schemes (MomentumPlaceOf). Otherwise the optimizer keeps
  // it on the applied update, exact for a dense scheme (MomentumPlaceOf).
  bool worker_momentum = false;
  // The values a worker sends are the ones applied, so its release can be
  // capped (--release_cap; CapsRelease).
  bool capped_release = false;
  // An exact second round exists (--second_round).
  bool second_round = false;
  // The exact second round is part of the algorithm (the two-round
  // fixed-size sketch): every run of the scheme has it, whatever
  // --second_round says (SecondRoundFor).
  bool two_rounds = false;
  // Its groups may live on the GPU (--device=gpu).
  bool runs_on_gpu = false;
  // The final round's answer keeps the k largest entries of its sum,
  // wherever the sum is finished (the shards, or every worker after the
  // collective): topk_ps's union of the workers' top k, the fixed-size
  // sketch's exact sums at its candidates (FinalRoundTopK).
  bool reselects_top_k = false;
  // Its exchange needs the group's parameter values (importance weights).
  bool needs_parameters = false;

  SchemeTraits& WorkerMomentum() { worker_momentum = true; return *this; }
  SchemeTraits& CappedRelease() { capped_release = true; return *this; }
  SchemeTraits& SecondRound() { second_round = true; return *this; }
  SchemeTraits& TwoRounds() { second_round = two_rounds = true; return *this; }
  SchemeTraits& RunsOnGpu() { runs_on_gpu = true; return *this; }
  SchemeTraits& ReselectsTopK() { reselects_top_k = true; return *this; }
  SchemeTraits& NeedsParameters() { needs_parameters = true; return *this; }
};

struct SchemeInfo {
  std::string name;
  Route route;
  // Name of the compressor the scheme runs (the compressor registry's).
  std::string compressor;
  std::string default_compressor_spec;
  std::string summary;
  SchemeTraits traits;
  // Decentralized route, and the hybrid's fallback: the algorithm every rank
  // runs over the collective (null for the centralized schemes).
  DecentralizedFn algorithm = nullptr;
  // A hybrid: the schemes it runs on each route, for its log lines.
  struct HybridRoutes {
    std::string centralized;
    std::string decentralized;
  };
  HybridRoutes hybrid_of;
};

// The schemes, centralized first.
const std::vector<SchemeInfo>& Schemes();

// The scheme called `name`; INVALID_ARGUMENT listing the schemes otherwise.
absl::StatusOr<SchemeInfo> FindScheme(const std::string& name);

// INVALID_ARGUMENT when `scheme` is unknown or `compressor` is not a valid
// spec of the compressor the scheme needs.
absl::Status CheckSchemeCompressor(const std::string& scheme, const std::string& compressor);

// INVALID_ARGUMENT naming the misfit when the run's scheme, compressor,
// second round and device do not go together (CheckSchemeCompressor, a
// second round the scheme lacks or with a method that keeps state where the
// sum is, a two-round scheme
// without it, CheckDevicePlacement).
absl::Status CheckRunScheme(const v1::RunConfig& run);

// Whether a run of `scheme` has the exact second round: `requested`
// (--second_round), or always for a two-round scheme. Where a run is built
// (RunRequest, the hook), so the job config every worker and shard reads
// says it.
bool SecondRoundFor(const std::string& scheme, bool requested);

// The scheme's route; kCentralized for an unknown name (check first).
Route SchemeRoute(const std::string& scheme);

// Coordinates a selecting compressor spec keeps of a group of `dim`
// elements (its k, or its density times dim; density 0.001 when neither is
// given). INVALID_ARGUMENT for a spec that does not parse.
absl::StatusOr<uint64_t> SpecSelectionSize(const std::string& spec, uint64_t dim);

// The k the final round of a group of `dim` elements keeps of its sum under
// `scheme` (SchemeTraits::reselects_top_k): the spec's selection size, or 0
// (keep all) for a scheme that does not re-select. What the job plan writes
// as GroupConfig::reselect_top_k for the shards, and what the collective
// route finishes its rounds by. INVALID_ARGUMENT for an unknown scheme or a
// spec that does not parse.
absl::StatusOr<uint64_t> FinalRoundTopK(const std::string& scheme, const std::string& compressor_spec, uint64_t dim);

// From this many workers a two-round sketch on the ring (fixed_sketch_allreduce)
// is warned about at join: in the scale study it ended 7.7 to 25.8 points (mlp_large)
// below dense at 16 to 256 workers (docs/BENCHMARKS.md, "Scale out: 4 to 256 virtual workers at equal bytes").
inline constexpr uint32_t kTwoRoundRingWarningWorkers = 16;

// A line naming `scheme` when its route serves `world_size` workers poorly
// (today: a two-round sketch on the ring at kTwoRoundRingWarningWorkers or
// more, with the centralized route that keeps its bytes flat); empty
// otherwise, and for an unknown scheme (refused where the job is checked).
// JobFitWarnings prints it at join beside the groups' fit warnings.
std::string SchemeFitWarning(const std::string& scheme, uint32_t world_size);

// A line naming the run's scheme and optimizer when the measurements say the
// pair loses, empty otherwise (and for a run that does not parse). Today: a
// fixed-size sketch (a count_sketch spec with method=candidates: the
// fixed_sketch_* schemes) with adam or adamw, which left the transformer on
// its unigram plateau, 26 to 45% above dense AdamW's validation loss at 4
// and 16 workers, with Adam's moments on the worker or on the update
// (docs/BENCHMARKS.md, "The transformer with AdamW and SGD"). JobFitWarnings
// prints it at join beside the others.
std::string OptimizerFitWarning(const v1::RunConfig& run);

// FinalRoundTopK of each group of `job` under its run's scheme, in group
// order: the collective route's reading of what the shards read from
// GroupConfig::reselect_top_k.
absl::StatusOr<std::vector<uint64_t>> JobFinalRoundTopK(const v1::JobConfig& job);

// SpecSelectionSize of each group of `job`, in group order: the k every
// worker applies per group (the decentralized algorithms' and the hybrid
// fallback's input).
absl::StatusOr<std::vector<uint64_t>> JobSelectionSizes(const v1::JobConfig& job);

// "name: summary" lines for --help.
std::string SchemesHelp();

// The registry as JSON, for launchers, benchmarks and the Python front end
// (sketchfuse_worker --list_schemes=json, sf_schemes_json): an array with one
// object per scheme, in registry order:
//   {"name": "sketch_ps", "route": "centralized", "compressor": "count_sketch",
//    "default_compressor": "count_sketch:method=peel,...", "compresses": true,
//    "summary": "...", "traits": {"worker_momentum": true, ...},
//    "hybrid_of": null | {"centralized": "...", "decentralized": "..."}}
// "compresses" is false for the dense schemes (the baselines). Every field
// of SchemeTraits is in "traits", under its own name.
std::string SchemesJson();

// True when the spec's method keeps state where the sum is
// (Compressor::keeps_aggregation_state, common/aggregation_state.h): workers
// keep no error feedback or velocity and send their raw gradients. False for
// a spec that does not parse.
bool KeepsStateWithTheSum(const std::string& compressor_spec);

// Where a run keeps momentum (run.momentum, run.momentum_at):
//   kOptimizer  the dense schemes leave it to the optimizer, exact there;
//               so do the compressed schemes with momentum_at "update"
//               (global momentum): error feedback keeps the raw gradients,
//               and every worker applies the same momentum to the same
//               aggregated update, so their velocities stay equal with no
//               bytes sent (at density 1 it is dense momentum SGD). It
//               amplifies the bursts in which error feedback releases its
//               residual: measured 2.1 to 2.5 points below kWorker on
//               mlp_large at 64 workers and 10x, so it is not a default;
//   kWorker     compressed schemes by default (momentum_at "" or "worker")
//               keep it on the worker, before compression, with
//               momentum-factor masking (DGC's momentum correction): the
//               velocity is accumulated per group and zeroed where an
//               update was applied;
//   kWithTheSum a method that keeps state where the sum is keeps it there
//               (KeepsStateWithTheSum), next to the error;
//   kNone       momentum 0.
// (The runs side by side: bench/data/scale/study_large_grid/momentum_at/ in
// git history, at commit ca70cd0.)
enum class MomentumPlace { kNone, kOptimizer, kWorker, kWithTheSum };
inline constexpr char kMomentumAtWorker[] = "worker";
inline constexpr char kMomentumAtUpdate[] = "update";
MomentumPlace MomentumPlaceOf(const v1::RunConfig& run);
bool UsesMomentumCorrection(const v1::RunConfig& run);

// The PyTorch hook's runs (worker/hook/hook_session.h): they hand DDP a
// gradient, which the user's own optimizer steps.
inline constexpr char kHookWorkload[] = "hook";

// Where an Adam-family run (run.optimizer adam or adamw) keeps Adam's
// moments. True, on the worker before compression (common/adam_moments.h:
// each worker encodes Adam's direction of its own gradients under error
// feedback, and the mean of the decoded directions is applied at the step's
// rate with AdamW's decoupled weight decay), by default (momentum_at "" or
// "worker") on a scheme with traits.worker_momentum whose compressor keeps
// no state where the sum is. False otherwise: torch's Adam on the
// aggregated update, which momentum_at "update" asks for, and which the
// hook's runs (kHookWorkload), a run with momentum of its own (the hook's
// two momenta) and adam with L2 weight decay keep.
bool KeepsAdamOnTheWorker(const v1::RunConfig& run);

// OK if run.momentum_at is "", "worker" or "update", and "update" is not
// asked of a method that keeps its momentum where the sum is (KeepsStateWithTheSum),
// nor "worker" of an Adam run on such a method, or of an Adam run whose
// weight decay is L2 in the gradient (adam's; adamw's is decoupled);
// INVALID_ARGUMENT naming the value otherwise. CheckRunScheme calls it.
absl::Status CheckMomentumAt(const v1::RunConfig& run);

// Whether the run caps what a worker releases per step (run.release_cap):
// schemes with momentum correction whose payload values are what a worker
// sends and is applied (SchemeTraits::capped_release: topk_allgather,
// sketch_ps, sketch_allreduce, auto), without an optional second round
// (which sends the residual's exact values); and the two-round schemes
// (fixed_sketch_*), whose second round sends capped values
// (GroupCompressors::CapExactValues). SparDL and importance_allreduce send values
// from the residual itself; gtopk re-selects among the workers' values on
// its tree, which scaled values would bias (measured: 3 points lost on the
// MLP at its default density); topk_ps's servers re-select k of the union,
// so a cap on what a worker sends throttles the smaller part applied
// (measured: the MLP at its default density, 81.36% with the cap, 84.76%
// without, seed 2).
bool CapsRelease(const v1::RunConfig& run);

// The cap a worker of a job of `world_size` workers applies (a multiple of
// its velocity's norm; 0: none): run.release_cap where CapsRelease, scaled
// by max(1, world_size / 4). The cap bounds how far one worker's burst moves
// a weight, and the update averages the workers' releases, so a burst of
// the same size moves it world_size / 4 times less than in the 4-worker
// job the default (1) was measured on; left unscaled it throttled what 8
// and 16 workers apply (docs/BENCHMARKS.md, "Scale out: 8 and 16 worker processes").
// A two-round scheme's cap is kTwoRoundReleaseCapFactor times that: at
// --release_cap=1 its own ×1 cost the CNN 4 points at 4 workers (79.05 /
// 79.54% against 83.58 / 83.06% uncapped, seeds 1 and 2), ×2 nothing
// (83.53%); docs/BENCHMARKS.md, "Scale out: 8 and 16 worker processes".
inline constexpr double kTwoRoundReleaseCapFactor = 2.0;
double ReleaseCapFor(const v1::RunConfig& run, uint32_t world_size);

// OK if the run may keep its groups on the GPU (run.device "gpu"): a scheme
// that runs on the GPU (the count_sketch schemes sketch_ps,
// sketch_allreduce, auto, and the fixed-size sketches fixed_sketch_ps,
// fixed_sketch_allreduce, fixed_sketch_auto, whose second round gathers the
// residual on the device) with error feedback and without the peel
// schemes' optional --second_round.
// INVALID_ARGUMENT naming the misfit otherwise (also for a device other than
// "", "cpu" and "gpu"); OK for a host-placed run. Says nothing about whether
// a GPU is present, nor about the workload (the worker daemon refuses the
// LibTorch models, which train on the CPU).
absl::Status CheckDevicePlacement(const v1::RunConfig& run);

// The decoration of a job's compressor stacks (GroupCompressors), from its
// run's scheme's traits: error feedback, where momentum goes, the release
// cap (ReleaseCapFor the job's world size), and on a GPU run the device
// state of worker/gpu/.
StackOptions StackOptionsOf(const v1::JobConfig& job);

// The job's compressor stacks as its run asks (CheckDevicePlacement, then
// GroupCompressors::Create with StackOptionsOf).
absl::StatusOr<GroupCompressors> CompressorsFor(const v1::JobConfig& job);

}  // namespace sketchfuse

#endif  // SKETCHFUSE_WORKER_SCHEMES_SCHEME_REGISTRY_H_
