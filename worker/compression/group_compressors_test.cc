// Per-group compressor stacks: built from a job as the run asks (error
// feedback, momentum correction), settlements that release, give back and
// mask, state saved and restored, and misfits refused with nothing changed.
#include "worker/compression/group_compressors.h"
#include "worker/schemes/scheme_registry.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "cuda/device.h"

#include "common/test_vectors.h"
#include "worker/core/divergence.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sketchfuse {
namespace {

v1::JobConfig Job(const std::string& scheme, double momentum, bool error_feedback) {
  v1::JobConfig job;
  job.set_world_size(2);
  job.mutable_run()->set_scheme(scheme);
  job.mutable_run()->set_momentum(momentum);
  job.mutable_run()->set_error_feedback(error_feedback);
  for (int g = 0; g < 2; ++g) {
    v1::GroupConfig* group = job.add_groups();
    group->set_group(g);
    group->set_dim(4);
    group->set_compressor("topk:k=1");
  }
  return job;
}

std::vector<float> Vec(absl::Span<const float> s) { return std::vector<float>(s.begin(), s.end()); }

Update Sparse(std::vector<uint32_t> indices, std::vector<float> values) {
  Update u;
  u.dim = 4;
  u.indices = std::move(indices);
  u.values = std::move(values);
  return u;
}

TEST(GroupCompressorsTest, MomentumCorrectionOnlyForCompressedSchemes) {
  v1::RunConfig run;
  run.set_momentum(0.9);
  run.set_scheme("topk_allgather");
  EXPECT_TRUE(UsesMomentumCorrection(run));
  run.set_scheme("dense_allreduce");
  EXPECT_FALSE(UsesMomentumCorrection(run));
  run.set_scheme("dense_bf16_allreduce");
  EXPECT_FALSE(UsesMomentumCorrection(run));
  run.set_scheme("dense_ps");
  EXPECT_FALSE(UsesMomentumCorrection(run));
  run.set_scheme("sketch_ps");
  run.set_momentum(0);
  EXPECT_FALSE(UsesMomentumCorrection(run));
}

TEST(GroupCompressorsTest, SettleReleasesGivesBackAndMasks) {
  absl::StatusOr<GroupCompressors> groups = CompressorsFor(Job("gtopk", 0.5, true));
  ASSERT_TRUE(groups.ok()) << groups.status();
  ASSERT_EQ(groups->size(), 2);
  const std::vector<float> g = {1, -4, 2, 3};
  absl::StatusOr<Payload> payload = groups->Encode(1, g, {});
  ASSERT_TRUE(payload.ok());
  EXPECT_EQ(payload->indices, std::vector<uint32_t>{1});
  EXPECT_EQ(Vec(groups->residual(1)), g);
  EXPECT_EQ(Vec(groups->EncodedInput(1, g)), g);

  Settlement s;
  s.release = Coordinates::Of(Sparse({1}, {0}));
  s.give_back = Sparse({0, 1}, {0.5f, 7});
  s.velocity_mask = Coordinates::Of(Sparse({3}, {0}));
  ASSERT_TRUE(groups->Settle(1, s).ok());
  EXPECT_EQ(Vec(groups->residual(1)), (std::vector<float>{1.5f, 7, 2, 3}));
  const std::vector<GroupState> state = groups->SaveState();
  ASSERT_EQ(state.size(), 2u);
  EXPECT_EQ(state[1].velocity, (std::vector<float>{1, -4, 2, 0}));  // masked at 3
  EXPECT_TRUE(state[1].method_state.empty());

  // A misfit in any part changes nothing.
  Settlement bad = s;
  bad.give_back = Sparse({9}, {1});
  EXPECT_EQ(groups->Settle(1, bad).code(), absl::StatusCode::kInvalidArgument);
  bad = s;
  bad.velocity_mask.dim = 5;
  EXPECT_EQ(groups->Settle(1, bad).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(groups->SaveState(), state);
  EXPECT_EQ(groups->Settle(2, s).code(), absl::StatusCode::kInvalidArgument);

  absl::StatusOr<GroupCompressors> restored = CompressorsFor(Job("gtopk", 0.5, true));
  ASSERT_TRUE(restored.ok());
  ASSERT_TRUE(restored->RestoreState(state).ok());
  EXPECT_EQ(restored->SaveState(), state);
  EXPECT_EQ(restored->RestoreState({GroupState{{1}, {}, {}}}).code(), absl::StatusCode::kInvalidArgument);
  // A part of another group's size (a checkpoint of another model) is refused, and nothing changes.
  std::vector<GroupState> misfit = state;
  misfit[1].residual.push_back(0);
  absl::Status refused = restored->RestoreState(misfit);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(refused.message()),
              ::testing::HasSubstr("group 1 has a residual of 5 and a velocity of 4 values"));
  EXPECT_EQ(restored->SaveState(), state);
}

// Adam's moments on the worker (momentum_at=worker with adamw): each group
// encodes Adam's direction under error feedback; the moments are saved,
// restored and refused like the other parts.
TEST(GroupCompressorsTest, AdamAtTheWorkerEncodesAdamsDirection) {
  v1::JobConfig job = Job("topk_allgather", 0, true);
  job.mutable_run()->set_optimizer("adamw:beta1=0.5,beta2=0.75,eps=1e-08,weight_decay=0.1");
  job.mutable_run()->set_momentum_at(kMomentumAtWorker);
  ASSERT_TRUE(KeepsAdamOnTheWorker(job.run()));
  absl::StatusOr<GroupCompressors> groups = CompressorsFor(job);
  ASSERT_TRUE(groups.ok()) << groups.status();
  const std::vector<float> g = {1, -4, 2, 0.5f};
  ASSERT_TRUE(groups->Encode(0, g, {}).ok());
  // Step 1: m = g / 2 and v = g^2 / 4, corrected to g and g^2: d = sign(g)
  // (up to eps), which the residual holds.
  const std::vector<float> e = Vec(groups->residual(0));
  const std::vector<float> signs = {1, -1, 1, 1};
  for (size_t i = 0; i < 4; ++i) EXPECT_NEAR(e[i], signs[i], 1e-6) << i;
  EXPECT_EQ(Vec(groups->EncodedInput(0, g)), e);
  const std::vector<GroupState> state = groups->SaveState();
  EXPECT_EQ(state[0].moment_steps, 1u);
  EXPECT_EQ(state[0].first_moment, (std::vector<float>{0.5f, -2, 1, 0.25f}));
  EXPECT_EQ(state[0].second_moment, (std::vector<float>{0.25f, 4, 1, 0.0625f}));
  EXPECT_TRUE(state[0].velocity.empty());
  EXPECT_EQ(state[1].moment_steps, 0u);  // never encoded

  absl::StatusOr<GroupCompressors> restored = CompressorsFor(job);
  ASSERT_TRUE(restored.ok());
  ASSERT_TRUE(restored->RestoreState(state).ok());
  EXPECT_EQ(restored->SaveState(), state);
  // Moments that do not fit, or that are not Adam's, change nothing.
  std::vector<GroupState> misfit = state;
  misfit[1].first_moment = {1, 2, 3, 4};
  misfit[1].second_moment = {1, 2, 3};
  misfit[1].moment_steps = 2;
  EXPECT_EQ(restored->RestoreState(misfit).code(), absl::StatusCode::kInvalidArgument);
  misfit[1].second_moment = {1, -2, 3, 4};
  const absl::Status negative = restored->RestoreState(misfit);
  EXPECT_EQ(negative.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(negative.message()), ::testing::HasSubstr("saved state of group 1: adam moments at 1"));
  EXPECT_EQ(restored->SaveState(), state);
  // The default (momentum_at "") keeps Adam on the worker too; a run that
  // keeps Adam on the update has no moments to restore.
  job.mutable_run()->set_momentum_at("");
  EXPECT_TRUE(KeepsAdamOnTheWorker(job.run()));
  job.mutable_run()->set_momentum_at(kMomentumAtUpdate);
  EXPECT_FALSE(KeepsAdamOnTheWorker(job.run()));
  absl::StatusOr<GroupCompressors> on_update = CompressorsFor(job);
  ASSERT_TRUE(on_update.ok());
  const absl::Status none = on_update->RestoreState(state);
  EXPECT_EQ(none.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(none.message()), ::testing::HasSubstr("has Adam moments; this run keeps none"));
  ASSERT_TRUE(on_update->Encode(0, g, {}).ok());
  EXPECT_EQ(Vec(on_update->residual(0)), g);  // the raw gradient

  // Only the compressing schemes that keep momentum on the worker, and only
  // for Adam-family optimizers.
  v1::RunConfig run = job.run();
  run.set_momentum_at(kMomentumAtWorker);
  run.set_scheme("dense_allreduce");
  EXPECT_FALSE(KeepsAdamOnTheWorker(run));
  run.set_scheme("powersgd_allreduce");
  run.set_compressor("powersgd:rank=4");
  EXPECT_FALSE(KeepsAdamOnTheWorker(run));
  run.set_scheme("sketch_allreduce");
  run.set_compressor("");
  EXPECT_TRUE(KeepsAdamOnTheWorker(run));
  run.set_compressor("count_sketch:method=fetchsgd");
  EXPECT_FALSE(KeepsAdamOnTheWorker(run));
  run.set_compressor("");
  // The hook's runs hand DDP a gradient for the user's optimizer; a run with
  // momentum of its own, and adam's L2 decay, keep Adam on the update.
  run.set_workload(kHookWorkload);
  EXPECT_FALSE(KeepsAdamOnTheWorker(run));
  run.set_workload("char_lm");
  run.set_momentum(0.9);
  EXPECT_FALSE(KeepsAdamOnTheWorker(run));
  run.set_momentum(0);
  run.set_momentum_at("");
  run.set_optimizer("adam:beta1=0.9,beta2=0.999,eps=1e-08,weight_decay=0.01");
  EXPECT_FALSE(KeepsAdamOnTheWorker(run));
  run.set_optimizer("adam:beta1=0.9,beta2=0.999,eps=1e-08,weight_decay=0");
  EXPECT_TRUE(KeepsAdamOnTheWorker(run));
  run.set_optimizer("");
  EXPECT_FALSE(KeepsAdamOnTheWorker(run));
}

TEST(GroupCompressorsTest, AdamAtTheWorkerIsRefusedWithMomentumCorrectionOrOnTheGpu) {
  v1::JobConfig job = Job("topk_allgather", 0, true);
  StackOptions options;
  options.worker_adam = AdamHyperparameters{};
  options.worker_momentum = 0.9f;
  EXPECT_EQ(GroupCompressors::Create(job, options).status().code(), absl::StatusCode::kInvalidArgument);
  options.worker_momentum = -1;
  options.worker_adam->beta2 = 1.0;
  EXPECT_THAT(std::string(GroupCompressors::Create(job, options).status().message()), ::testing::HasSubstr("beta2"));
  options.worker_adam->beta2 = 0.999;
  options.device = [](const Compressor::SketchLayout&, uint64_t, float) -> absl::StatusOr<std::unique_ptr<DeviceStack>> {
    return absl::InternalError("not reached");
  };
  EXPECT_THAT(std::string(GroupCompressors::Create(job, options).status().message()),
              ::testing::HasSubstr("device=gpu keeps no Adam moments"));
}

TEST(GroupCompressorsTest, WithoutErrorFeedbackNothingIsKept) {
  absl::StatusOr<GroupCompressors> groups = CompressorsFor(Job("dense_allreduce", 0.9, false));
  ASSERT_TRUE(groups.ok());
  const std::vector<float> g = {1, 2, 3, 4};
  ASSERT_TRUE(groups->Encode(0, g, {}).ok());
  EXPECT_TRUE(groups->residual(0).empty());
  EXPECT_EQ(Vec(groups->EncodedInput(0, g)), g);
  EXPECT_TRUE(groups->Settle(0, SettleAt(Sparse({0}, {1}))).ok());
  for (const GroupState& entry : groups->SaveState()) EXPECT_EQ(entry, GroupState());
  const absl::Status refused = groups->RestoreState({GroupState{{1, 2, 3, 4}, {}, {}}, GroupState()});
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(refused.message()), ::testing::HasSubstr("has a residual; this run keeps no error feedback"));
}

// The residual in units of the learning rate: ScaleResiduals multiplies
// every group's residual, leaves the velocity alone, and the next Encode adds
// to the scaled residual. A factor that is not finite and > 0 changes nothing.
TEST(GroupCompressorsTest, ScaleResidualsScalesEveryResidualAndNotTheVelocity) {
  absl::StatusOr<GroupCompressors> groups = CompressorsFor(Job("gtopk", 0.5, true));
  ASSERT_TRUE(groups.ok()) << groups.status();
  const std::vector<float> g = {1, -4, 2, 3};
  for (int group = 0; group < 2; ++group) ASSERT_TRUE(groups->Encode(group, g, {}).ok());
  const std::vector<GroupState> before = groups->SaveState();
  for (float bad : {0.0f, -0.5f, std::nanf(""), std::numeric_limits<float>::infinity()}) {
    const absl::Status refused = groups->ScaleResiduals(bad);
    EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(std::string(refused.message()), ::testing::HasSubstr("must be finite and > 0")) << bad;
    EXPECT_EQ(groups->SaveState(), before) << bad;
  }
  ASSERT_TRUE(groups->ScaleResiduals(0.25f).ok());
  for (int group = 0; group < 2; ++group) {
    EXPECT_EQ(Vec(groups->residual(group)), (std::vector<float>{0.25f, -1, 0.5f, 0.75f})) << group;
    EXPECT_EQ(groups->SaveState()[group].velocity, g) << group;
  }
  // u = 0.5 * g + g; e = 0.25 * g + u.
  ASSERT_TRUE(groups->Encode(0, g, {}).ok());
  EXPECT_EQ(Vec(groups->residual(0)), (std::vector<float>{1.75f, -7, 3.5f, 5.25f}));

  absl::StatusOr<GroupCompressors> plain = CompressorsFor(Job("dense_allreduce", 0.9, false));
  ASSERT_TRUE(plain.ok());
  EXPECT_TRUE(plain->ScaleResiduals(0.5f).ok()) << "nothing to scale without error feedback";
  EXPECT_TRUE(plain->residual(0).empty());
}

TEST(GroupCompressorsTest, ABadSpecIsRefusedNamingTheGroup) {
  v1::JobConfig job = Job("gtopk", 0, true);
  job.mutable_groups(1)->set_compressor("topk:k=1,bogus=2");
  absl::StatusOr<GroupCompressors> groups = CompressorsFor(job);
  EXPECT_EQ(groups.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(groups.status().message().find("group 1"), std::string::npos) << groups.status();
}

TEST(GroupCompressorsTest, DevicePlacementIsForTheSketchSchemesWithErrorFeedback) {
  v1::RunConfig run;
  run.set_scheme("sketch_allreduce");
  run.set_error_feedback(true);
  EXPECT_TRUE(CheckDevicePlacement(run).ok());
  run.set_device("cpu");
  EXPECT_TRUE(CheckDevicePlacement(run).ok());
  run.set_device("gpu");
  EXPECT_TRUE(CheckDevicePlacement(run).ok());
  for (const char* scheme : {"sketch_ps", "auto"}) {
    run.set_scheme(scheme);
    EXPECT_TRUE(CheckDevicePlacement(run).ok()) << scheme;
  }
  // The fixed-size sketches, whose second round is part of the scheme
  // (SecondRoundFor sets it), gather their exact values on the device.
  for (const char* scheme : {"fixed_sketch_ps", "fixed_sketch_allreduce", "fixed_sketch_auto"}) {
    v1::RunConfig fixed = run;
    fixed.set_scheme(scheme);
    fixed.set_second_round(true);
    EXPECT_TRUE(CheckDevicePlacement(fixed).ok()) << scheme << ": " << CheckDevicePlacement(fixed);
  }
  auto refusal = [](const v1::RunConfig& r) { return std::string(CheckDevicePlacement(r).message()); };
  v1::RunConfig bad = run;
  bad.set_device("tpu");
  EXPECT_EQ(refusal(bad), "device must be cpu or gpu; got 'tpu'");
  bad = run;
  bad.set_scheme("topk_allgather");
  EXPECT_NE(refusal(bad).find("serves the count_sketch schemes"), std::string::npos);
  bad = run;
  bad.set_error_feedback(false);
  EXPECT_NE(refusal(bad).find("keeps error feedback"), std::string::npos);
  bad = run;
  bad.set_scheme("sketch_allreduce");
  bad.set_second_round(true);
  EXPECT_EQ(refusal(bad),
            "device=gpu runs the second round of the fixed-size sketches only; sketch_allreduce's optional "
            "--second_round runs with --device=cpu");
}

TEST(GroupCompressorsTest, DevicePlacementNeedsAGpuAndASketch) {
  v1::JobConfig job = Job("sketch_allreduce", 0.9, true);
  job.mutable_run()->set_device("gpu");
  // A compressor that is not a sketch cannot be placed on the GPU.
  absl::StatusOr<GroupCompressors> topk = CompressorsFor(job);
  EXPECT_EQ(topk.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(topk.status().message().find("group 0: device=gpu needs a count_sketch compressor"), std::string::npos)
      << topk.status();
  // A method's state where the sum is (FetchSGD's sketches) is host code:
  // refused on the GPU, by what the compressor says, not by its name.
  for (v1::GroupConfig& group : *job.mutable_groups()) group.set_compressor("count_sketch:method=fetchsgd,k=1,cols=4");
  absl::StatusOr<GroupCompressors> fetchsgd = CompressorsFor(job);
  EXPECT_EQ(fetchsgd.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(fetchsgd.status().message().find("keeps state where the sum is, which runs on the host"),
            std::string::npos)
      << fetchsgd.status();
  // Peel (the default), estimate and candidates (the fixed-size sketch) run
  // there.
  for (const char* spec : {"count_sketch:k=1,cols=4", "count_sketch:method=estimate,k=1,cols=4",
                           "count_sketch:method=candidates,k=1,cols=2,table=bf16"}) {
    SCOPED_TRACE(spec);
    for (v1::GroupConfig& group : *job.mutable_groups()) group.set_compressor(spec);
    absl::StatusOr<GroupCompressors> sketch = CompressorsFor(job);
    if (ProbeGpus().device_count == 0) {
      // Here (CI): the refusal names the missing GPU. The GPU path itself is
      // tested against this stack in worker/gpu/device_group_state_test.
      EXPECT_EQ(sketch.status().code(), absl::StatusCode::kFailedPrecondition);
      EXPECT_NE(sketch.status().message().find("group 0 on the GPU: device=gpu needs a GPU"), std::string::npos)
          << sketch.status();
    } else {
      ASSERT_TRUE(sketch.ok()) << sketch.status();
      EXPECT_TRUE(sketch->on_device());
      // Host gradients are refused by groups kept on the GPU.
      EXPECT_EQ(sketch->Encode(0, std::vector<float>(4, 1.0f), EncodeContext{}).status().code(),
                absl::StatusCode::kFailedPrecondition);
    }
  }
}

// Runs `steps` steps of W workers whose payloads are summed (as a server sums
// them) and decoded, each worker settling with SettleSent; returns the
// largest violation of conservation: |applied + sum of residuals - sum of
// gradients|, over coordinates.
double ConservationGap(const std::string& scheme, const std::string& spec, int workers, int steps) {
  const uint64_t dim = 3000;
  v1::JobConfig job;
  job.set_world_size(workers);
  job.mutable_run()->set_scheme(scheme);
  job.mutable_run()->set_momentum(0);  // the velocity is not part of the balance
  job.mutable_run()->set_error_feedback(true);
  v1::GroupConfig* group = job.add_groups();
  group->set_dim(dim);
  group->set_compressor(spec);
  std::vector<GroupCompressors> stacks;
  for (int w = 0; w < workers; ++w) stacks.push_back(*CompressorsFor(job));
  std::vector<double> applied(dim, 0.0), gradients(dim, 0.0);
  for (int step = 0; step < steps; ++step) {
    std::vector<Payload> sent;
    Payload sum;
    for (int w = 0; w < workers; ++w) {
      const std::vector<float> g = GaussianVector(dim, 1000 * step + w);
      for (uint64_t i = 0; i < dim; ++i) gradients[i] += g[i];
      sent.push_back(*stacks[w].Encode(0, g, EncodeContext{static_cast<uint64_t>(step), {}}));
      if (w == 0) {
        sum = sent.back();
      } else {
        EXPECT_TRUE(MergeInto(sent.back(), &sum).ok());
      }
    }
    const Update update = *stacks[0].compressor(0).Decode(sum);
    for (size_t j = 0; j < update.indices.size(); ++j) applied[update.indices[j]] += update.values[j];
    for (int w = 0; w < workers; ++w) EXPECT_TRUE(stacks[w].Settle(0, SettleSent(sent[w], update)).ok());
  }
  double gap = 0;
  for (uint64_t i = 0; i < dim; ++i) {
    double held = applied[i];
    for (int w = 0; w < workers; ++w) held += stacks[w].residual(0)[i];
    gap = std::max(gap, std::abs(held - gradients[i]));
  }
  return gap;
}

// With momentum correction and the release cap: what was applied plus the
// residuals equals the sum of the velocities each step encoded (the
// residual accumulates the velocity), and no worker's payload released more
// than the cap times its velocity's norm.
// How far what was applied plus what the workers still hold (group 0) is
// from every velocity they added, relative to the largest: 0 when nothing
// was lost or made up.
double ConservationGap(const std::vector<GroupCompressors>& stacks, const std::vector<double>& applied,
                       const std::vector<double>& velocities) {
  double gap = 0, scale = 0;
  for (size_t i = 0; i < applied.size(); ++i) {
    double held = applied[i];
    for (const GroupCompressors& worker : stacks) held += worker.residual(0)[i];
    gap = std::max(gap, std::abs(held - velocities[i]));
    scale = std::max(scale, std::abs(velocities[i]));
  }
  return scale > 0 ? gap / scale : gap;
}

TEST(GroupCompressorsTest, ReleaseCapKeepsTheUnsentPartInTheResidual) {
  const uint64_t dim = 2000;
  for (const std::string spec : {"topk:k=40", "count_sketch:method=peel,k=40,rows=4,width=4"}) {
    v1::JobConfig job;
    job.set_world_size(2);
    job.mutable_run()->set_scheme(spec[0] == 't' ? "topk_allgather" : "sketch_ps");
    job.mutable_run()->set_momentum(0.9);
    job.mutable_run()->set_error_feedback(true);
    job.mutable_run()->set_release_cap(1.0);
    ASSERT_TRUE(CapsRelease(job.run()));
    // Not where payload values are not what is sent, nor without momentum.
    v1::RunConfig other = job.run();
    for (const char* scheme : {"spardl", "importance_allreduce", "gtopk", "topk_ps", "dense_allreduce"}) {
      other.set_scheme(scheme);
      EXPECT_FALSE(CapsRelease(other)) << scheme;
    }
    other = job.run();
    other.set_second_round(true);
    EXPECT_FALSE(CapsRelease(other));
    other = job.run();
    other.set_momentum(0);
    EXPECT_FALSE(CapsRelease(other));
    other = job.run();
    other.set_release_cap(0);
    EXPECT_FALSE(CapsRelease(other));
    v1::GroupConfig* group = job.add_groups();
    group->set_dim(dim);
    group->set_compressor(spec);
    std::vector<GroupCompressors> stacks;
    for (int w = 0; w < 2; ++w) stacks.push_back(*CompressorsFor(job));
    std::vector<double> applied(dim, 0.0), velocities(dim, 0.0);
    int capped = 0;
    for (int step = 0; step < 8; ++step) {
      std::vector<Payload> sent;
      Payload sum;
      for (int w = 0; w < 2; ++w) {
        // Heavy, persistent gradients: residuals grow and the cap binds.
        std::vector<float> g = GaussianVector(dim, 100 * step + w);
        for (uint64_t i = 0; i < dim; i += 7) g[i] += 3.0f;
        sent.push_back(*stacks[w].Encode(0, g, EncodeContext{static_cast<uint64_t>(step), {}}));
        const std::vector<GroupState> state = stacks[w].SaveState();
        const std::vector<float>& velocity = state[0].velocity;
        double velocity_norm = 0, released = 0;
        for (uint64_t i = 0; i < dim; ++i) {
          velocities[i] += velocity[i];
          velocity_norm += static_cast<double>(velocity[i]) * velocity[i];
        }
        if (sent.back().kind == PayloadKind::kSparse) {
          for (float v : sent.back().values) released += static_cast<double>(v) * v;
          EXPECT_LE(std::sqrt(released), std::sqrt(velocity_norm) * (1 + 1e-5)) << spec << " step " << step;
          double full = 0;
          for (uint32_t i : sent.back().indices) {
            full += static_cast<double>(state[0].residual[i]) * state[0].residual[i];
          }
          capped += full > released * (1 + 1e-6);
        }
        if (w == 0) {
          sum = sent.back();
        } else {
          ASSERT_TRUE(MergeInto(sent.back(), &sum).ok());
        }
      }
      const Update update = *stacks[0].compressor(0).Decode(sum);
      for (size_t j = 0; j < update.indices.size(); ++j) applied[update.indices[j]] += update.values[j];
      for (int w = 0; w < 2; ++w) ASSERT_TRUE(stacks[w].Settle(0, SettleSent(sent[w], update)).ok());
    }
    if (spec[0] == 't') {
      EXPECT_GT(capped, 0) << "the cap never bound";
    }
    EXPECT_LT(ConservationGap(stacks, applied, velocities), 1e-4) << spec;
  }
}

// Nothing is lost or made up: what was applied plus what the workers still
// hold is every gradient, for the union of Top-k payloads (topk_ps: a
// worker that did not send a coordinate keeps its residual there, where it
// was zeroed before), and for peeled sketches (each worker releases only
// what it inserted and got back).
TEST(GroupCompressorsTest, SettleSentConservesEveryGradient) {
  EXPECT_LT(ConservationGap("topk_ps", "topk:k=30", 4, 6), 1e-3);
  EXPECT_LT(ConservationGap("sketch_ps", "count_sketch:method=peel,k=30,rows=4,width=4", 4, 6), 1e-3);
  // The cause of the old default's losses: a one-round decode=estimate
  // sketch applies estimates, while each worker releases its own exact
  // residual there, so what is applied is not what was released: mass is
  // made up and lost every step (here by whole units on unit gradients).
  EXPECT_GT(ConservationGap("sketch_ps", "count_sketch:method=estimate,k=30,rows=1,width=5", 4, 6), 1.0);
  // Releasing every coordinate of the union (the old rule) loses the
  // residuals of the workers that did not send them.
  Payload sent;
  sent.kind = PayloadKind::kSparse;
  sent.dim = 4;
  sent.indices = {1};
  sent.values = {5};
  const Settlement s = SettleSent(sent, Sparse({1, 2}, {5, 7}));
  EXPECT_EQ(s.release.indices, std::vector<uint32_t>{1});
  EXPECT_EQ(s.velocity_mask.indices, std::vector<uint32_t>{1});
  EXPECT_EQ(SettleAt(Sparse({1, 2}, {5, 7})).release.indices, (std::vector<uint32_t>{1, 2}));
}

// A sketch of the whole group (method=estimate) carried every coordinate:
// its worker releases all of the update, as before.
TEST(GroupCompressorsTest, SettleSentReleasesAllForWholeSketches) {
  Payload sent;
  sent.kind = PayloadKind::kSketch;
  sent.dim = 4;
  EXPECT_EQ(SettleSent(sent, Sparse({0, 3}, {1, 1})).release.indices, (std::vector<uint32_t>{0, 3}));
  sent.inserted = std::vector<uint32_t>{3};
  EXPECT_EQ(SettleSent(sent, Sparse({0, 3}, {1, 1})).release.indices, std::vector<uint32_t>{3});
}

// Finite gradients can overflow the residual they accumulate into: the
// payload that would carry the infinity is refused as a divergence naming
// the step and the group, and nothing is sent.
TEST(GroupCompressorsTest, APayloadThatOverflowedIsADivergence) {
  absl::StatusOr<GroupCompressors> groups = CompressorsFor(Job("topk_allgather", 0, true));
  ASSERT_TRUE(groups.ok()) << groups.status();
  const std::vector<float> huge = {3e38f, 3e38f, 3e38f, 3e38f};
  ASSERT_TRUE(groups->Encode(1, huge, EncodeContext{7, {}}).ok());
  // Nothing was applied: the residual holds 3e38 and doubles past the range.
  const absl::StatusOr<Payload> overflowed = groups->Encode(1, huge, EncodeContext{8, {}});
  EXPECT_EQ(overflowed.status().code(), absl::StatusCode::kDataLoss);
  const std::optional<Divergence> d = DivergenceOf(overflowed.status());
  ASSERT_TRUE(d.has_value()) << overflowed.status();
  EXPECT_EQ(d->what, "payload");
  EXPECT_EQ(d->step, 8);
  EXPECT_EQ(d->group, 1);
}

// The cap scales with the world size past four workers (the update averages
// the workers' releases); nothing changes up to four.
// A two-round scheme caps the exact values its second round sends: no k of
// them carry more than the cap, the shard or allreduce sums what was sent,
// and each worker keeps the unsent part of what was applied, so the gradient
// is conserved exactly as without the cap.
TEST(GroupCompressorsTest, CapExactValuesBoundsTheSecondRoundAndKeepsTheRest) {
  const uint64_t dim = 2000, k = 40;
  v1::JobConfig job;
  job.set_world_size(2);
  job.mutable_run()->set_scheme("fixed_sketch_allreduce");
  job.mutable_run()->set_second_round(true);
  job.mutable_run()->set_momentum(0.9);
  job.mutable_run()->set_error_feedback(true);
  job.mutable_run()->set_release_cap(0.5);
  ASSERT_TRUE(CapsRelease(job.run()));
  const double cap = ReleaseCapFor(job.run(), 2);
  EXPECT_EQ(cap, 0.5 * kTwoRoundReleaseCapFactor);
  for (const char* scheme : {"fixed_sketch_ps", "fixed_sketch_auto"}) {
    v1::RunConfig run = job.run();
    run.set_scheme(scheme);
    EXPECT_TRUE(CapsRelease(run)) << scheme;
  }
  v1::GroupConfig* group = job.add_groups();
  group->set_dim(dim);
  group->set_compressor("count_sketch:method=candidates,k=40,rows=1,width=1,candidates=2");
  std::vector<GroupCompressors> stacks;
  for (int w = 0; w < 2; ++w) stacks.push_back(*CompressorsFor(job));
  v1::JobConfig uncapped_job = job;
  uncapped_job.mutable_run()->set_release_cap(0);
  GroupCompressors uncapped = *CompressorsFor(uncapped_job);
  std::vector<double> applied(dim, 0.0), velocities(dim, 0.0);
  int capped = 0;
  for (int step = 0; step < 8; ++step) {
    // Candidates of the step: 2k coordinates, ascending, heavy ones among them.
    std::vector<uint32_t> candidates;
    for (uint32_t i = step % 3; candidates.size() < 2 * k; i += 7) candidates.push_back(i);
    std::vector<std::vector<float>> sent(2);
    std::vector<float> sums(candidates.size(), 0.0f);
    for (int w = 0; w < 2; ++w) {
      std::vector<float> g = GaussianVector(dim, 100 * step + w);
      for (uint64_t i = 0; i < dim; i += 7) g[i] += 3.0f;
      ASSERT_TRUE(stacks[w].Encode(0, g, EncodeContext{static_cast<uint64_t>(step), {}}).ok());
      const std::vector<GroupState> state = stacks[w].SaveState();
      double velocity_norm = 0;
      for (uint64_t i = 0; i < dim; ++i) {
        velocities[i] += state[0].velocity[i];
        velocity_norm += static_cast<double>(state[0].velocity[i]) * state[0].velocity[i];
      }
      const absl::Span<const float> e = stacks[w].EncodedInput(0, GradientView());
      std::vector<float> whole;
      for (uint32_t i : candidates) whole.push_back(e[i]);
      sent[w] = whole;
      ASSERT_TRUE(stacks[w].CapExactValues(0, absl::MakeSpan(sent[w]), k).ok());
      // The k largest sent values carry at most the cap (x ||velocity||).
      std::vector<float> magnitudes;
      for (float v : sent[w]) magnitudes.push_back(std::fabs(v));
      std::sort(magnitudes.rbegin(), magnitudes.rend());
      double top = 0;
      for (uint64_t j = 0; j < k; ++j) top += static_cast<double>(magnitudes[j]) * magnitudes[j];
      EXPECT_LE(std::sqrt(top), cap * std::sqrt(velocity_norm) * (1 + 1e-5)) << "step " << step;
      // One factor for all the values: the ranking of the sums is unbiased
      // within a worker.
      const float factor = sent[w][0] / whole[0];
      for (size_t j = 0; j < whole.size(); ++j) EXPECT_NEAR(sent[w][j], factor * whole[j], 1e-5f * std::fabs(whole[j]));
      capped += factor < 1 - 1e-6f;
      for (size_t j = 0; j < sums.size(); ++j) sums[j] += sent[w][j];
    }
    // The top k of the sums applied; each worker releases them.
    std::vector<size_t> order(sums.size());
    for (size_t j = 0; j < order.size(); ++j) order[j] = j;
    std::partial_sort(order.begin(), order.begin() + k, order.end(),
                      [&](size_t a, size_t b) { return std::fabs(sums[a]) > std::fabs(sums[b]); });
    order.resize(k);
    std::sort(order.begin(), order.end());
    Update update;
    update.dim = dim;
    for (size_t j : order) {
      update.indices.push_back(candidates[j]);
      update.values.push_back(sums[j]);
      applied[candidates[j]] += sums[j];
    }
    for (int w = 0; w < 2; ++w) ASSERT_TRUE(stacks[w].Settle(0, SettleAt(update)).ok());
  }
  EXPECT_GT(capped, 0) << "the cap never bound";
  EXPECT_LT(ConservationGap(stacks, applied, velocities), 1e-4);
  // Without the cap the values go whole.
  std::vector<float> g = GaussianVector(dim, 7);
  for (uint64_t i = 0; i < dim; i += 7) g[i] += 30.0f;
  ASSERT_TRUE(uncapped.Encode(0, g, EncodeContext{0, {}}).ok());
  std::vector<float> values(uncapped.EncodedInput(0, GradientView()).begin(),
                            uncapped.EncodedInput(0, GradientView()).begin() + 2 * k);
  const std::vector<float> before = values;
  ASSERT_TRUE(uncapped.CapExactValues(0, absl::MakeSpan(values), k).ok());
  EXPECT_EQ(values, before);
  EXPECT_EQ(uncapped.CapExactValues(1, absl::MakeSpan(values), k).code(), absl::StatusCode::kInvalidArgument);
}

// A second round's values: what the stack encoded, at the candidates, in
// their order (the residual under error feedback, the velocity under
// momentum alone, else the gradient); refusals name the group.
TEST(GroupCompressorsTest, ExactValuesAtReadsWhatWasEncoded) {
  const std::vector<float> grad = {0.5f, -2.0f, 1.0f, 3.0f};
  for (const auto& [momentum, error_feedback] : {std::pair{0.9, true}, std::pair{0.9, false}, std::pair{0.0, false}}) {
    SCOPED_TRACE(testing::Message() << "momentum " << momentum << " error_feedback " << error_feedback);
    absl::StatusOr<GroupCompressors> groups = CompressorsFor(Job("topk_allgather", momentum, error_feedback));
    ASSERT_TRUE(groups.ok()) << groups.status();
    for (int step = 0; step < 2; ++step) {
      ASSERT_TRUE(groups->Encode(1, grad, EncodeContext{static_cast<uint64_t>(step)}).ok());
    }
    const std::vector<float> encoded = Vec(groups->EncodedInput(1, grad));
    absl::StatusOr<std::vector<float>> values = groups->ExactValuesAt(1, grad, std::vector<uint32_t>{3, 0, 1});
    ASSERT_TRUE(values.ok()) << values.status();
    EXPECT_EQ(*values, (std::vector<float>{encoded[3], encoded[0], encoded[1]}));
    if (error_feedback) {
      // The residual after two steps of momentum: 1.9 g + g = 2.9 g.
      EXPECT_FLOAT_EQ((*values)[0], 2.9f * 3.0f);
    }
  }
  absl::StatusOr<GroupCompressors> groups = CompressorsFor(Job("topk_allgather", 0.9, true));
  ASSERT_TRUE(groups.ok());
  ASSERT_TRUE(groups->Encode(1, grad, EncodeContext{}).ok());
  absl::StatusOr<std::vector<float>> outside = groups->ExactValuesAt(1, grad, std::vector<uint32_t>{2, 4});
  EXPECT_EQ(outside.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(outside.status().message(), "group 1: candidate 4 is outside the encoded vector of 4");
  EXPECT_EQ(groups->ExactValuesAt(2, grad, std::vector<uint32_t>{0}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(GroupCompressorsTest, ReleaseCapScalesWithTheWorkersPastFour) {
  v1::RunConfig run;
  run.set_scheme("sketch_allreduce");
  run.set_momentum(0.9);
  run.set_error_feedback(true);
  run.set_release_cap(1.5);
  EXPECT_EQ(ReleaseCapFor(run, 1), 1.5);
  EXPECT_EQ(ReleaseCapFor(run, 4), 1.5);
  EXPECT_EQ(ReleaseCapFor(run, 8), 3.0);
  EXPECT_EQ(ReleaseCapFor(run, 16), 6.0);
  EXPECT_EQ(ReleaseCapFor(run, 256), 96.0);
  run.set_scheme("gtopk");  // no cap for this scheme
  EXPECT_EQ(ReleaseCapFor(run, 16), 0.0);
  run.set_scheme("fixed_sketch_allreduce");  // two rounds: twice the cap
  run.set_second_round(true);
  EXPECT_EQ(ReleaseCapFor(run, 4), 3.0);
  EXPECT_EQ(ReleaseCapFor(run, 16), 12.0);
}

// What W workers' peeled sketches get back: near all of it when the table
// is sized for them, a fraction when it was sized for fewer; nothing is
// counted for sparse payloads.
TEST(GroupCompressorsTest, PeelRecoveryCountsWhatTheDecodesGaveBack) {
  const uint64_t dim = 20000;
  const int workers = 8;
  auto recovered = [&](const std::string& spec) {
    v1::JobConfig job;
    job.set_world_size(workers);
    job.mutable_run()->set_scheme(spec[0] == 't' ? "topk_allgather" : "sketch_allreduce");
    job.mutable_run()->set_momentum(0.9);
    job.mutable_run()->set_error_feedback(true);
    v1::GroupConfig* group = job.add_groups();
    group->set_dim(dim);
    group->set_compressor(spec);
    std::vector<GroupCompressors> stacks;
    for (int w = 0; w < workers; ++w) stacks.push_back(*CompressorsFor(job));
    for (int step = 0; step < 4; ++step) {
      std::vector<Payload> sent;
      Payload sum;
      for (int w = 0; w < workers; ++w) {
        sent.push_back(*stacks[w].Encode(0, GaussianVector(dim, 100 * step + w), EncodeContext{static_cast<uint64_t>(step), {}}));
        if (w == 0) sum = sent.back();
        else EXPECT_TRUE(MergeInto(sent.back(), &sum).ok());
      }
      const Update update = *stacks[0].compressor(0).Decode(sum);
      for (int w = 0; w < workers; ++w) EXPECT_TRUE(stacks[w].Settle(0, SettleSent(sent[w], update)).ok());
    }
    for (int w = 1; w < workers; ++w) {
      EXPECT_EQ(stacks[w].peel_recovery().settlements, spec[0] == 't' ? 0 : 4);
    }
    return stacks[0].peel_recovery();
  };
  const GroupCompressors::PeelRecovery sized = recovered("count_sketch:method=peel,k=100,rows=4,workers=8");
  EXPECT_EQ(sized.settlements, 4);
  EXPECT_GT(sized.inserted, 0);
  EXPECT_GE(sized.share(), 0.98);
  const GroupCompressors::PeelRecovery small = recovered("count_sketch:method=peel,k=100,rows=4,workers=2");
  EXPECT_LT(small.share(), 0.5);
  const GroupCompressors::PeelRecovery sparse = recovered("topk:k=100");
  EXPECT_EQ(sparse.settlements, 0);
  EXPECT_EQ(sparse.share(), 1.0);
}

}  // namespace
}  // namespace sketchfuse
