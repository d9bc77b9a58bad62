// The GPU placement of the group compressors against the host stack, its
// reference, on random heavy-tailed data of many sizes (1, odd sizes, sizes
// that are not multiples of a block, and a million), over several steps with
// error feedback and momentum correction:
//  - the residual and the velocity stay bit-identical to the host's (the
//    same rounded products and sums, the same settlements);
//  - each sketch cell matches the host's within 1e-5 of the sum of |e| that
//    hashed into it (atomics add in another order; that is their only
//    rounding difference);
//  - decoding the same aggregate gives the host's indices and values bit for
//    bit;
//  - the fixed-size sketch (method=candidates): the same candidates from the
//    same table, the same exact values gathered at them, the same cap of
//    those values (within 1e-6: the velocity's norm is summed on the
//    device), and the same state after the second round's settlement;
//  - misplaced, misfit and out-of-range inputs are refused with the state
//    unchanged; SaveState and RestoreState round-trip.
#include <algorithm>
#include <cmath>
#include <tuple>
#include <random>

#include "common/sketch_hash.h"
#include "cuda/gpu_test_util.h"
#include "gtest/gtest.h"
#include "worker/gpu/device_group_state.h"
#include "worker/gpu/device_memory.h"
#include "common/bf16.h"
#include "worker/compression/group_compressors.h"
#include "worker/compression/settlement.h"
#include "worker/schemes/scheme_registry.h"

namespace sketchfuse {
namespace {

const std::vector<uint64_t> kSizes = {1, 255, 1000, 4097, 100003, 1 << 20};

v1::JobConfig Job(const std::string& device, double momentum) {
  v1::JobConfig job;
  job.set_world_size(2);
  job.mutable_run()->set_scheme("sketch_allreduce");
  job.mutable_run()->set_momentum(momentum);
  job.mutable_run()->set_error_feedback(true);
  job.mutable_run()->set_device(device);
  for (size_t g = 0; g < kSizes.size(); ++g) {
    v1::GroupConfig* group = job.add_groups();
    group->set_group(g);
    group->set_dim(kSizes[g]);
    group->set_compressor("count_sketch:method=estimate,density=0.01,rows=5,width=4,seed=7");
  }
  return job;
}

// Student-t-like values: mostly small, a few large (the shape of gradients).
std::vector<float> HeavyTailed(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::student_t_distribution<float> t(3.0f);
  std::vector<float> v(n);
  for (float& x : v) x = 0.01f * t(rng);
  return v;
}

// Per cell, the sum of |x| of the coordinates that hash into it.
std::vector<double> CellMass(const SketchShape& shape, absl::Span<const float> x) {
  std::vector<double> mass(shape.num_cells(), 0.0);
  for (uint32_t r = 0; r < shape.rows; ++r) {
    const RowHash h = MakeRowHash(shape.seed, r);
    for (uint32_t i = 0; i < x.size(); ++i) {
      mass[static_cast<size_t>(r) * shape.cols +
           BucketOfIndex(h, i, shape.cols, ChunkShift(shape.cols))] += std::abs(x[i]);
    }
  }
  return mass;
}

// The GPU's sketch cells against the host's: within 1e-5 of each cell's
// mass (atomics add in another order; that is their only rounding
// difference).
void ExpectCellsNear(const Payload& got, const Payload& want, const std::vector<double>& mass) {
  ASSERT_EQ(got.dim, want.dim);
  ASSERT_EQ(got.values.size(), want.values.size());
  ASSERT_EQ(mass.size(), want.values.size());
  for (size_t c = 0; c < mass.size(); ++c) {
    ASSERT_LE(std::abs(got.values[c] - want.values[c]), 1e-5 * mass[c] + 1e-30) << "cell " << c;
  }
}

// Encodes one worker's gradient for `group` at `step` on both stacks: the
// GPU's from *on_device, a device copy of `grad` made here (later rounds
// read it again), into *got; the host's, the reference, into *want. Both
// must succeed with the same sketch (shape and the step's seed).
void EncodeOnBoth(GroupCompressors& host, GroupCompressors& gpu, int group, const std::vector<float>& grad,
                  int step, DeviceArray* on_device, Payload* want, Payload* got) {
  absl::StatusOr<DeviceArray> uploaded = DeviceArray::Upload(grad);
  ASSERT_TRUE(uploaded.ok()) << uploaded.status();
  *on_device = *std::move(uploaded);
  const EncodeContext context{static_cast<uint64_t>(step)};
  absl::StatusOr<Payload> host_payload = host.Encode(group, grad, context);
  absl::StatusOr<Payload> gpu_payload = gpu.Encode(group, on_device->view(), context);
  ASSERT_TRUE(host_payload.ok()) << host_payload.status();
  ASSERT_TRUE(gpu_payload.ok()) << gpu_payload.status();
  ASSERT_EQ(gpu_payload->sketch, host_payload->sketch);
  *want = *std::move(host_payload);
  *got = *std::move(gpu_payload);
}

// Decodes `aggregate` with both stacks: the same update, bit for bit, into *update.
void ExpectSameDecode(GroupCompressors& host, GroupCompressors& gpu, int group, const Payload& aggregate,
                      Update* update) {
  absl::StatusOr<Update> want = host.Decode(group, aggregate);
  absl::StatusOr<Update> got = gpu.Decode(group, aggregate);
  ASSERT_TRUE(want.ok()) << want.status();
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->indices, want->indices);
  ASSERT_EQ(got->values, want->values);
  *update = *std::move(want);
}

TEST(DeviceGroupStateTest, EncodeDecodeAndSettleMatchTheHostStack) {
  SKIP_WITHOUT_GPU();
  for (double momentum : {0.0, 0.9}) {
    SCOPED_TRACE(testing::Message() << "momentum " << momentum);
    absl::StatusOr<GroupCompressors> host = CompressorsFor(Job("cpu", momentum));
    absl::StatusOr<GroupCompressors> gpu = CompressorsFor(Job("gpu", momentum));
    ASSERT_TRUE(host.ok()) << host.status();
    ASSERT_TRUE(gpu.ok()) << gpu.status();
    ASSERT_TRUE(gpu->on_device());
    for (int step = 0; step < 3; ++step) {
      for (size_t g = 0; g < kSizes.size(); ++g) {
        SCOPED_TRACE(testing::Message() << "step " << step << " dim " << kSizes[g]);
        const std::vector<float> grad = HeavyTailed(kSizes[g], 100 * step + g);
        DeviceArray on_device;
        Payload want, got;
        ASSERT_NO_FATAL_FAILURE(EncodeOnBoth(*host, *gpu, g, grad, step, &on_device, &want, &got));
        ASSERT_NO_FATAL_FAILURE(ExpectCellsNear(got, want, CellMass(want.sketch, host->residual(g))));
        // The same aggregate decodes to the same update, bit for bit.
        Update update;
        ASSERT_NO_FATAL_FAILURE(ExpectSameDecode(*host, *gpu, g, want, &update));
        ASSERT_TRUE(host->Settle(g, SettleAt(update)).ok());
        ASSERT_TRUE(gpu->Settle(g, SettleAt(update)).ok());
      }
      // Residual and velocity: bit-identical after every step.
      ASSERT_EQ(gpu->SaveState(), host->SaveState());
    }
  }
}

v1::JobConfig PeelJob(const std::string& device, double momentum, double release_cap) {
  v1::JobConfig job = Job(device, momentum);
  job.mutable_run()->set_release_cap(release_cap);
  for (v1::GroupConfig& group : *job.mutable_groups()) {
    group.set_compressor("count_sketch:method=peel,density=0.01,rows=4,width=4,seed=7");
  }
  return job;
}

// Whether a and b hold the same vectors within `relative` of each entry's
// magnitude (a capped release scales by a fraction whose velocity norm the
// device sums in another order).
void ExpectStatesNear(const std::vector<GroupState>& a, const std::vector<GroupState>& b, double relative) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t g = 0; g < a.size(); ++g) {
    for (const auto& [part, x, y] : {std::make_tuple("residual", &a[g].residual, &b[g].residual),
                                     std::make_tuple("velocity", &a[g].velocity, &b[g].velocity)}) {
      ASSERT_EQ(x->size(), y->size()) << "group " << g << " " << part;
      for (size_t i = 0; i < x->size(); ++i) {
        ASSERT_LE(std::abs((*x)[i] - (*y)[i]), relative * std::abs((*y)[i]) + 1e-30)
            << "group " << g << " " << part << " [" << i << "]";
      }
    }
  }
}

// The peel route (the sketch schemes' default) on the GPU against the host
// stack: the same selection (the step's seed, the same inserted
// coordinates), cells within the atomics' rounding, the same decode bit for
// bit, and the same state after SettleSent; with the release cap, the same
// state within 1e-6 (the cap's fraction depends on a norm the device sums in
// another order).
TEST(DeviceGroupStateTest, PeelEncodeDecodeAndSettleMatchTheHostStack) {
  SKIP_WITHOUT_GPU();
  const struct {
    double momentum, release_cap;
  } runs[] = {{0.0, 0.0}, {0.9, 0.0}, {0.9, 1.0}, {0.9, 0.05}};
  for (const auto& run : runs) {
    SCOPED_TRACE(testing::Message() << "momentum " << run.momentum << " release_cap " << run.release_cap);
    absl::StatusOr<GroupCompressors> host = CompressorsFor(PeelJob("cpu", run.momentum, run.release_cap));
    absl::StatusOr<GroupCompressors> gpu = CompressorsFor(PeelJob("gpu", run.momentum, run.release_cap));
    ASSERT_TRUE(host.ok()) << host.status();
    ASSERT_TRUE(gpu.ok()) << gpu.status();
    ASSERT_TRUE(gpu->on_device());
    const bool capped = run.momentum > 0 && run.release_cap > 0;
    for (int step = 0; step < 4; ++step) {
      for (size_t g = 0; g < kSizes.size(); ++g) {
        SCOPED_TRACE(testing::Message() << "step " << step << " dim " << kSizes[g]);
        const std::vector<float> grad = HeavyTailed(kSizes[g], 100 * step + g);
        DeviceArray on_device;
        Payload want, got;
        ASSERT_NO_FATAL_FAILURE(EncodeOnBoth(*host, *gpu, g, grad, step, &on_device, &want, &got));
        ASSERT_TRUE(got.inserted.has_value());
        ASSERT_EQ(*got.inserted, *want.inserted);
        std::vector<float> selected(kSizes[g], 0.0f);
        const absl::Span<const float> e = host->residual(g);
        for (uint32_t i : *want.inserted) selected[i] = e[i];
        ASSERT_NO_FATAL_FAILURE(ExpectCellsNear(got, want, CellMass(want.sketch, selected)));
        Update update;
        ASSERT_NO_FATAL_FAILURE(ExpectSameDecode(*host, *gpu, g, want, &update));
        ASSERT_TRUE(host->Settle(g, SettleSent(want, update)).ok());
        ASSERT_TRUE(gpu->Settle(g, SettleSent(got, update)).ok());
      }
      if (capped) {
        ExpectStatesNear(gpu->SaveState(), host->SaveState(), 1e-6);
      } else {
        ASSERT_EQ(gpu->SaveState(), host->SaveState());
      }
    }
  }
}

v1::JobConfig CandidatesJob(const std::string& device, const std::string& scheme, double release_cap,
                            const std::string& spec) {
  v1::JobConfig job = Job(device, 0.9);
  job.mutable_run()->set_scheme(scheme);
  job.mutable_run()->set_second_round(true);
  job.mutable_run()->set_release_cap(release_cap);
  for (v1::GroupConfig& group : *job.mutable_groups()) group.set_compressor(spec);
  return job;
}

// The fixed-size sketch on the GPU against the host stack, over steps of one
// worker's two rounds: its table (cells within the atomics' rounding; a
// bfloat16 cell within one bfloat16 step of the host's, since the two
// float32 sums it rounds may differ in their last bits), the same
// candidates from the same aggregate, the same exact values gathered there,
// the same capped values (1e-6), and the same state after the second
// round's settlement (SettleExchange: every applied coordinate released;
// within 1e-5 under the cap).
TEST(DeviceGroupStateTest, CandidatesEncodeGatherCapAndSettleMatchTheHostStack) {
  SKIP_WITHOUT_GPU();
  const struct {
    std::string spec;
    double release_cap;
  } runs[] = {
      {"count_sketch:method=candidates,density=0.0333,rows=1,width=1,candidates=2,table=bf16,seed=7", 2.0},
      {"count_sketch:method=candidates,density=0.0333,rows=1,width=1,candidates=2,table=bf16,seed=7", 0.0},
      {"count_sketch:method=candidates,density=0.01,rows=3,width=2,candidates=4,hash=job,seed=7", 0.0},
      {"count_sketch:method=candidates,density=0.01,rows=3,width=2,candidates=4,hash=job,seed=7", 0.05},
  };
  for (const auto& run : runs) {
    SCOPED_TRACE(testing::Message() << run.spec << " release_cap " << run.release_cap);
    absl::StatusOr<GroupCompressors> host =
        CompressorsFor(CandidatesJob("cpu", "fixed_sketch_allreduce", run.release_cap, run.spec));
    absl::StatusOr<GroupCompressors> gpu =
        CompressorsFor(CandidatesJob("gpu", "fixed_sketch_allreduce", run.release_cap, run.spec));
    ASSERT_TRUE(host.ok()) << host.status();
    ASSERT_TRUE(gpu.ok()) << gpu.status();
    ASSERT_TRUE(gpu->on_device());
    const bool bf16 = run.spec.find("table=bf16") != std::string::npos;
    const bool capped = run.release_cap > 0;
    for (int step = 0; step < 4; ++step) {
      for (size_t g = 0; g < kSizes.size(); ++g) {
        SCOPED_TRACE(testing::Message() << "step " << step << " dim " << kSizes[g]);
        const std::vector<float> grad = HeavyTailed(kSizes[g], 100 * step + g);
        DeviceArray on_device;
        Payload want, got;
        ASSERT_NO_FATAL_FAILURE(EncodeOnBoth(*host, *gpu, g, grad, step, &on_device, &want, &got));
        EXPECT_FALSE(got.inserted.has_value());
        std::vector<double> mass = CellMass(want.sketch, host->residual(g));
        if (bf16) {
          EXPECT_TRUE(HoldsExactlyAsBf16(got.values) || got.values.empty());
          // One bfloat16 step (8 significant bits) on top of the atomics.
          for (size_t c = 0; c < mass.size(); ++c) mass[c] = 1e-5 * mass[c] + std::ldexp(std::abs(want.values[c]), -7);
          for (size_t c = 0; c < mass.size(); ++c) {
            ASSERT_LE(std::abs(got.values[c] - want.values[c]), mass[c] + 1e-30) << "cell " << c;
          }
        } else {
          ASSERT_NO_FATAL_FAILURE(ExpectCellsNear(got, want, mass));
        }
        // Round 0: the same candidates from the same aggregate, bit for bit.
        Update candidates;
        ASSERT_NO_FATAL_FAILURE(ExpectSameDecode(*host, *gpu, g, want, &candidates));
        const uint64_t k = std::max<uint64_t>(1, candidates.indices.size() / (bf16 ? 2 : 4));
        // Round 1: the exact values there, gathered on the device.
        absl::StatusOr<std::vector<float>> host_values = host->ExactValuesAt(g, grad, candidates.indices);
        absl::StatusOr<std::vector<float>> gpu_values =
            gpu->ExactValuesAt(g, on_device.view(), candidates.indices);
        ASSERT_TRUE(host_values.ok()) << host_values.status();
        ASSERT_TRUE(gpu_values.ok()) << gpu_values.status();
        ASSERT_EQ(*gpu_values, *host_values);
        ASSERT_TRUE(host->CapExactValues(g, absl::MakeSpan(*host_values), k).ok());
        ASSERT_TRUE(gpu->CapExactValues(g, absl::MakeSpan(*gpu_values), k).ok());
        for (size_t j = 0; j < host_values->size(); ++j) {
          ASSERT_LE(std::abs((*gpu_values)[j] - (*host_values)[j]), 1e-6 * std::abs((*host_values)[j]) + 1e-30)
              << "value " << j;
        }
        // The update: the top k of the (one worker's) exact sums.
        Update update;
        update.dim = kSizes[g];
        std::vector<size_t> order(candidates.indices.size());
        for (size_t j = 0; j < order.size(); ++j) order[j] = j;
        std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
          return std::abs((*host_values)[a]) > std::abs((*host_values)[b]);
        });
        order.resize(std::min<size_t>(k, order.size()));
        std::sort(order.begin(), order.end());
        for (size_t j : order) {
          update.indices.push_back(candidates.indices[j]);
          update.values.push_back((*host_values)[j]);
        }
        ASSERT_TRUE(host->Settle(g, SettleExchange(want, update, 2)).ok());
        ASSERT_TRUE(gpu->Settle(g, SettleExchange(got, update, 2)).ok());
      }
      if (capped) {
        // The kept fraction 1 - f of a capped coordinate carries f's 1e-6.
        ExpectStatesNear(gpu->SaveState(), host->SaveState(), 1e-5);
      } else {
        ASSERT_EQ(gpu->SaveState(), host->SaveState());
      }
    }
    // A candidate outside the group is refused; nothing is read.
    EXPECT_EQ(gpu->ExactValuesAt(0, GradientView(), std::vector<uint32_t>{1}).status().code(),
              absl::StatusCode::kInvalidArgument);
  }
}

TEST(DeviceGroupStateTest, RefusesMisfitsAndKeepsItsState) {
  SKIP_WITHOUT_GPU();
  absl::StatusOr<GroupCompressors> gpu = CompressorsFor(Job("gpu", 0.9));
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  const std::vector<float> grad = HeavyTailed(1000, 1);
  // A host gradient for groups on the GPU.
  absl::StatusOr<Payload> misplaced = gpu->Encode(2, grad, EncodeContext{});
  EXPECT_EQ(misplaced.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(misplaced.status().message().find("host memory for groups kept on the GPU"), std::string::npos);
  absl::StatusOr<DeviceArray> on_device = DeviceArray::Upload(grad);
  ASSERT_TRUE(on_device.ok());
  // Another group's size.
  EXPECT_EQ(gpu->Encode(1, on_device->view(), EncodeContext{}).status().code(), absl::StatusCode::kInvalidArgument);
  absl::StatusOr<Payload> payload = gpu->Encode(2, on_device->view(), EncodeContext{});
  ASSERT_TRUE(payload.ok()) << payload.status();
  const std::vector<GroupState> before = gpu->SaveState();
  // An aggregate of another shape.
  Payload wrong = *payload;
  wrong.values.pop_back();
  EXPECT_EQ(gpu->Decode(2, wrong).status().code(), absl::StatusCode::kInvalidArgument);
  // Coordinates out of range, or not ascending; something given back.
  Settlement out_of_range;
  out_of_range.release.dim = 1000;
  out_of_range.release.indices = {3, 1000};
  out_of_range.velocity_mask = out_of_range.release;
  EXPECT_EQ(gpu->Settle(2, out_of_range).code(), absl::StatusCode::kInvalidArgument);
  Settlement unsorted = out_of_range;
  unsorted.release.indices = {7, 3};
  unsorted.velocity_mask = unsorted.release;
  EXPECT_EQ(gpu->Settle(2, unsorted).code(), absl::StatusCode::kInvalidArgument);
  Settlement give_back;
  give_back.release = Coordinates{1000, false, {3}};
  give_back.velocity_mask = give_back.release;
  give_back.give_back = Update{};
  give_back.give_back.dim = 1000;
  give_back.give_back.indices = {5};
  give_back.give_back.values = {1.0f};
  EXPECT_EQ(gpu->Settle(2, give_back).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(gpu->SaveState(), before);
  // A restored state reads back as saved; a misfit is refused.
  absl::StatusOr<GroupCompressors> other = CompressorsFor(Job("gpu", 0.9));
  ASSERT_TRUE(other.ok());
  ASSERT_TRUE(other->RestoreState(before).ok());
  EXPECT_EQ(other->SaveState(), before);
  std::vector<GroupState> misfit = before;
  misfit[2].residual.push_back(1.0f);
  EXPECT_EQ(other->RestoreState(misfit).code(), absl::StatusCode::kInvalidArgument);
}

// The residual's rescale on the device (the rate changed): every group's
// residual is the host stack's, bit for bit (one rounded product each), and
// the velocity is untouched; a bad factor changes nothing.
TEST(DeviceGroupStateTest, ScaleResidualsMatchesTheHostStack) {
  SKIP_WITHOUT_GPU();
  absl::StatusOr<GroupCompressors> host = CompressorsFor(Job("cpu", 0.9));
  absl::StatusOr<GroupCompressors> gpu = CompressorsFor(Job("gpu", 0.9));
  ASSERT_TRUE(host.ok()) << host.status();
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  std::vector<GroupState> state(kSizes.size());
  for (size_t g = 0; g < kSizes.size(); ++g) {
    state[g].residual = HeavyTailed(kSizes[g], 40 + g);
    state[g].velocity = HeavyTailed(kSizes[g], 80 + g);
  }
  ASSERT_TRUE(host->RestoreState(state).ok());
  ASSERT_TRUE(gpu->RestoreState(state).ok());
  EXPECT_EQ(gpu->ScaleResiduals(std::nanf("")).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(gpu->SaveState(), state);
  const float factor = static_cast<float>(0.1625 / 0.2);
  ASSERT_TRUE(host->ScaleResiduals(factor).ok());
  ASSERT_TRUE(gpu->ScaleResiduals(factor).ok());
  const std::vector<GroupState> want = host->SaveState(), got = gpu->SaveState();
  for (size_t g = 0; g < kSizes.size(); ++g) {
    EXPECT_EQ(got[g].residual, want[g].residual) << "group " << g;
    EXPECT_EQ(got[g].velocity, state[g].velocity) << "group " << g;
  }
}

TEST(DeviceGroupStateTest, FusionBuffersOnTheDeviceHoldWhatWasWritten) {
  SKIP_WITHOUT_GPU();
  absl::StatusOr<std::unique_ptr<FusionBuffers>> buffers = MakeDeviceFusionBuffers({5, 1 << 20});
  ASSERT_TRUE(buffers.ok()) << buffers.status();
  const std::vector<float> a = HeavyTailed(3, 1), b = HeavyTailed(2, 2), c = HeavyTailed(1 << 20, 3);
  absl::StatusOr<DeviceArray> c_on_device = DeviceArray::Upload(c);
  ASSERT_TRUE(c_on_device.ok());
  // Host values and device values, at their offsets.
  ASSERT_TRUE((*buffers)->Write(0, 0, a).ok());
  ASSERT_TRUE((*buffers)->Write(0, 3, b).ok());
  ASSERT_TRUE((*buffers)->Write(1, 0, c_on_device->view()).ok());
  ASSERT_TRUE((*buffers)->Seal(0).ok());
  ASSERT_TRUE((*buffers)->Seal(1).ok());
  absl::StatusOr<std::vector<float>> group0 = CopyToHost((*buffers)->Get(0));
  absl::StatusOr<std::vector<float>> group1 = CopyToHost((*buffers)->Get(1));
  ASSERT_TRUE(group0.ok() && group1.ok());
  EXPECT_EQ(*group0, (std::vector<float>{a[0], a[1], a[2], b[0], b[1]}));
  EXPECT_EQ(*group1, c);
  EXPECT_TRUE((*buffers)->Get(1).on_device());
}

}  // namespace
}  // namespace sketchfuse
