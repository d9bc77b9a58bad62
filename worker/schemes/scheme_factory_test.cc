// The scheme factory builds every scheme of the registry on its route from a
// joined job, and refuses what a run cannot be, before any communication.
#include "worker/schemes/scheme_factory.h"

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/collective/local_group.h"
#include "worker/schemes/scheme_registry.h"

namespace sketchfuse {
namespace {

using ::testing::HasSubstr;

// A joined job of two workers and two groups running `scheme` with its
// default compressor, served by one shard (never contacted here: channels
// connect lazily).
v1::JoinReply Joined(const std::string& scheme, bool second_round = false) {
  const SchemeInfo info = *FindScheme(scheme);
  v1::JoinReply joined;
  joined.set_rank(0);
  joined.set_world_size(2);
  v1::JobConfig* job = joined.mutable_job();
  job->set_job("factory");
  job->set_world_size(2);
  v1::RunConfig* run = job->mutable_run();
  run->set_scheme(scheme);
  run->set_compressor(info.default_compressor_spec);
  run->set_error_feedback(true);
  run->set_momentum(0.9);
  run->set_second_round(SecondRoundFor(scheme, second_round));
  for (uint32_t g = 0; g < 2; ++g) {
    v1::GroupConfig* group = job->add_groups();
    group->set_group(g);
    group->set_dim(1000 + 7 * g);
    group->set_compressor(info.default_compressor_spec);
    joined.add_shard_of_group(0);
  }
  joined.add_shards()->set_address("127.0.0.1:1");
  return joined;
}

TEST(SchemeFactoryTest, BuildsEverySchemeOfTheRegistryOnItsRoute) {
  for (const SchemeInfo& info : Schemes()) {
    EXPECT_EQ(NeedsCollective(info.name), info.route != Route::kCentralized) << info.name;
    const std::vector<absl::Status> ranks = RunOnLocalGlooGroup(2, [&](Collective& collective) -> absl::Status {
      SchemeEnvironment environment;
      environment.collective = &collective;
      absl::StatusOr<BuiltScheme> built = MakeScheme(Joined(info.name), environment);
      if (!built.ok()) return built.status();
      EXPECT_EQ(built->scheme->name(), info.name);
      EXPECT_EQ(built->scheme->needs_parameters(), info.traits.needs_parameters) << info.name;
      EXPECT_EQ(built->transport != nullptr, info.route == Route::kCentralized) << info.name;
      return absl::OkStatus();
    });
    for (const absl::Status& s : ranks) EXPECT_TRUE(s.ok()) << info.name << ": " << s;
  }
}

TEST(SchemeFactoryTest, RefusesWhatARunCannotBe) {
  EXPECT_THAT(MakeScheme(Joined("topk_allgather"), {}).status().message(),
              HasSubstr("scheme topk_allgather runs on the decentralized route: it needs a collective"));
  EXPECT_THAT(MakeScheme(Joined("auto"), {}).status().message(), HasSubstr("runs on the hybrid route"));
  v1::JoinReply unknown = Joined("topk_ps");
  unknown.mutable_job()->mutable_run()->set_scheme("bogus");
  EXPECT_THAT(MakeScheme(unknown, {}).status().message(), HasSubstr("unknown scheme 'bogus'"));
  EXPECT_THAT(MakeScheme(Joined("topk_ps", /*second_round=*/true), {}).status().message(),
              HasSubstr("--second_round is for --scheme=sketch_ps or sketch_allreduce only; the scheme is topk_ps"));
  // A two-round scheme always has its second round: a job config without it
  // (not built by RunRequest or the hook) is refused by name.
  for (const char* two_rounds : {"fixed_sketch_ps", "fixed_sketch_allreduce", "fixed_sketch_auto"}) {
    EXPECT_TRUE(SecondRoundFor(two_rounds, false)) << two_rounds;
    v1::JoinReply one_round = Joined(two_rounds);
    one_round.mutable_job()->mutable_run()->set_second_round(false);
    EXPECT_THAT(MakeScheme(one_round, {}).status().message(),
                HasSubstr(absl::StrCat("scheme ", two_rounds, " takes two rounds; the run config turns its second "
                                       "round off")));
  }
  EXPECT_FALSE(SecondRoundFor("sketch_ps", false));
  EXPECT_TRUE(SecondRoundFor("sketch_ps", true));
  v1::JoinReply no_map = Joined("sketch_ps");
  no_map.clear_shard_of_group();
  EXPECT_THAT(MakeScheme(no_map, {}).status().message(), HasSubstr("the shard map covers 0 groups"));
  v1::JoinReply on_gpu = Joined("topk_ps");
  on_gpu.mutable_job()->mutable_run()->set_device("gpu");
  EXPECT_THAT(MakeScheme(on_gpu, {}).status().message(), HasSubstr("device=gpu serves the count_sketch schemes"));
}

// The registry's entries agree with themselves: every default spec fits its
// compressor, the routes that run collectives carry an algorithm, and the
// traits that need a sketch are on count_sketch schemes only.
TEST(SchemeRegistryTest, EveryEntryIsConsistent) {
  for (const SchemeInfo& info : Schemes()) {
    EXPECT_TRUE(CheckSchemeCompressor(info.name, info.default_compressor_spec).ok()) << info.name;
    EXPECT_EQ(info.algorithm != nullptr, info.route != Route::kCentralized) << info.name;
    const SchemeTraits& traits = info.traits;
    if (traits.runs_on_gpu || (traits.second_round && !traits.two_rounds)) {
      EXPECT_EQ(info.compressor, "count_sketch") << info.name;
    }
    if (traits.two_rounds) {
      EXPECT_TRUE(info.compressor == "count_sketch" || info.compressor == "powersgd") << info.name;
    }
    // Momentum stays with the optimizer exactly where nothing is compressed,
    // and for PowerSGD, whose momentum is on the update as in its paper.
    EXPECT_EQ(!traits.worker_momentum, info.compressor == "dense" || info.compressor == "powersgd") << info.name;
    if (traits.reselects_top_k) {
      EXPECT_TRUE(traits.worker_momentum) << info.name << ": only compressing schemes select";
    }
    // A hybrid names a scheme of each route with its own algorithm.
    if (info.route == Route::kHybrid) {
      const absl::StatusOr<SchemeInfo> centralized = FindScheme(info.hybrid_of.centralized);
      const absl::StatusOr<SchemeInfo> decentralized = FindScheme(info.hybrid_of.decentralized);
      ASSERT_TRUE(centralized.ok() && decentralized.ok()) << info.name;
      EXPECT_EQ(centralized->route, Route::kCentralized) << info.name;
      EXPECT_EQ(decentralized->route, Route::kDecentralized) << info.name;
      EXPECT_EQ(decentralized->algorithm, info.algorithm) << info.name;
      EXPECT_EQ(centralized->traits.reselects_top_k, info.traits.reselects_top_k) << info.name;
      EXPECT_EQ(decentralized->traits.two_rounds, info.traits.two_rounds) << info.name;
      // While the servers answer, the hybrid is its centralized route.
      EXPECT_EQ(centralized->default_compressor_spec, info.default_compressor_spec) << info.name;
    } else {
      EXPECT_TRUE(info.hybrid_of.centralized.empty() && info.hybrid_of.decentralized.empty()) << info.name;
    }
    if (traits.two_rounds) {
      EXPECT_TRUE(traits.second_round) << info.name;
    }
    if (traits.capped_release) {
      EXPECT_TRUE(traits.worker_momentum) << info.name << ": a cap is a multiple of the worker's velocity";
    }
  }
  EXPECT_EQ(SchemesHelp().find("  sketch_ps: "), 0u);
}

// The two-round fixed-size sketch is one algorithm on three routes: one
// default spec and the same traits, so the routes apply the same updates
// (//tests:fixed_sketch_test) and the hybrid's fallback changes no shape.
TEST(SchemeRegistryTest, TheFixedSketchRoutesShareOneSpecAndOneSetOfTraits) {
  const absl::StatusOr<SchemeInfo> ps = FindScheme("fixed_sketch_ps");
  ASSERT_TRUE(ps.ok()) << ps.status();
  for (const std::string name : {"fixed_sketch_allreduce", "fixed_sketch_auto"}) {
    const absl::StatusOr<SchemeInfo> other = FindScheme(name);
    ASSERT_TRUE(other.ok()) << other.status();
    EXPECT_EQ(other->default_compressor_spec, ps->default_compressor_spec) << name;
    EXPECT_EQ(other->traits.worker_momentum, ps->traits.worker_momentum) << name;
    EXPECT_EQ(other->traits.capped_release, ps->traits.capped_release) << name;
    EXPECT_EQ(other->traits.second_round, ps->traits.second_round) << name;
    EXPECT_EQ(other->traits.two_rounds, ps->traits.two_rounds) << name;
    EXPECT_EQ(other->traits.reselects_top_k, ps->traits.reselects_top_k) << name;
    EXPECT_EQ(other->traits.runs_on_gpu, ps->traits.runs_on_gpu) << name;
    EXPECT_EQ(other->traits.needs_parameters, ps->traits.needs_parameters) << name;
  }
  EXPECT_TRUE(ps->traits.two_rounds);
}

TEST(SchemeRegistryTest, MomentumGoesWhereTheSchemeKeepsIt) {
  v1::RunConfig run;
  run.set_momentum(0.9);
  run.set_compressor("topk:density=0.01");
  run.set_scheme("topk_allgather");
  EXPECT_EQ(MomentumPlaceOf(run), MomentumPlace::kWorker);
  for (const char* dense : {"dense_allreduce", "dense_bf16_allreduce", "dense_ps"}) {
    run.set_scheme(dense);
    EXPECT_EQ(MomentumPlaceOf(run), MomentumPlace::kOptimizer) << dense;
  }
  run.set_scheme("sketch_ps");
  run.set_compressor("count_sketch:method=fetchsgd");
  EXPECT_EQ(MomentumPlaceOf(run), MomentumPlace::kWithTheSum);
  run.set_momentum(0);
  EXPECT_EQ(MomentumPlaceOf(run), MomentumPlace::kNone);
}

TEST(SchemeRegistryTest, MomentumAtUpdateIsGlobalMomentum) {
  v1::JobConfig job;
  job.set_world_size(64);
  v1::RunConfig& run = *job.mutable_run();
  run.set_momentum(0.9);
  run.set_error_feedback(true);
  run.set_release_cap(1);
  run.set_second_round(true);
  run.set_scheme("fixed_sketch_ps");
  run.set_compressor("count_sketch:method=candidates,density=0.0333,rows=1,width=1,candidates=2,table=bf16");
  for (const char* worker : {"", "worker"}) {
    run.set_momentum_at(worker);
    EXPECT_TRUE(CheckRunScheme(run).ok()) << worker;
    EXPECT_EQ(MomentumPlaceOf(run), MomentumPlace::kWorker) << worker;
    EXPECT_EQ(StackOptionsOf(job).worker_momentum, 0.9f) << worker;
    EXPECT_EQ(ReleaseCapFor(run, 64), 2.0 * 16) << worker;
  }
  // Global momentum: the optimizer keeps it, the residual holds raw
  // gradients, and no cap (a cap is a multiple of the worker's velocity).
  run.set_momentum_at("update");
  EXPECT_TRUE(CheckRunScheme(run).ok());
  EXPECT_EQ(MomentumPlaceOf(run), MomentumPlace::kOptimizer);
  EXPECT_FALSE(UsesMomentumCorrection(run));
  EXPECT_EQ(StackOptionsOf(job).worker_momentum, -1.0f);
  EXPECT_TRUE(StackOptionsOf(job).error_feedback);
  EXPECT_EQ(ReleaseCapFor(run, 64), 0.0);
  // A dense scheme keeps it in the optimizer either way.
  run.set_scheme("dense_allreduce");
  run.set_compressor("dense");
  run.set_second_round(false);
  EXPECT_EQ(MomentumPlaceOf(run), MomentumPlace::kOptimizer);
}

TEST(SchemeRegistryTest, MomentumAtRefusesWhatItCannotDo) {
  v1::RunConfig run;
  run.set_momentum(0.9);
  run.set_error_feedback(true);
  run.set_scheme("topk_allgather");
  run.set_compressor("topk:density=0.01");
  for (const char* bad : {"optimizer", "Update", " update", "update\n", "worker,update"}) {
    run.set_momentum_at(bad);
    const absl::Status s = CheckRunScheme(run);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find("momentum_at must be worker or update"), std::string::npos) << s;
  }
  run.set_momentum_at(std::string(1 << 20, 'u'));
  const absl::Status huge = CheckRunScheme(run);
  EXPECT_EQ(huge.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_LT(huge.message().size(), 1000u) << "a 1 MiB value is quoted short";
  // FetchSGD keeps its momentum in sketch space, where the sum is.
  run.set_scheme("sketch_ps");
  run.set_compressor("count_sketch:method=fetchsgd");
  run.set_momentum_at("update");
  const absl::Status fetch = CheckRunScheme(run);
  EXPECT_EQ(fetch.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(fetch.message().find("keeps its momentum where the sum is"), std::string::npos) << fetch;
}

}  // namespace
}  // namespace sketchfuse
