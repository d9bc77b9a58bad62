// HookSession against the worker's CollectiveScheme on the same gradients,
// over a real 4-rank Gloo group: the session reaches its collective through
// the C ABI's callbacks (as the Python hook does), the reference directly.
#include "worker/hook/hook_session.h"

#include <cmath>
#include <limits>
#include <mutex>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "common/test_vectors.h"
#include "worker/collective/local_group.h"
#include "worker/gpu/device_memory.h"
#include "worker/hook/callback_collective.h"
#include "worker/hook/sketchfuse_c.h"
#include "worker/hook/worker_reference.h"

namespace sketchfuse {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr int kWorld = 4;

// sf_collective_ops over a Collective (user = the Collective).
Collective& Of(void* user) { return *static_cast<Collective*>(user); }
sf_collective_ops OpsOver(Collective* collective) {
  sf_collective_ops ops{};
  ops.user = collective;
  ops.all_reduce_sum_f32 = [](void* user, float* data, uint64_t n) {
    return Of(user).AllReduceSum(absl::MakeSpan(data, n)).ok() ? 0 : 1;
  };
  ops.all_gather_bytes = [](void* user, const void* mine, uint64_t size, sf_bytes* all, uint64_t* sizes) {
    std::vector<uint32_t> gathered;
    std::vector<size_t> counts;
    if (!Of(user).AllGatherV(absl::MakeConstSpan(static_cast<const uint32_t*>(mine), size / 4), &gathered, &counts)
             .ok()) {
      return 1;
    }
    for (size_t r = 0; r < counts.size(); ++r) sizes[r] = 4 * counts[r];
    sf_bytes_assign(all, gathered.data(), 4 * gathered.size());
    return 0;
  };
  ops.broadcast_bytes = [](void* user, void* data, uint64_t size, int root) {
    return Of(user).Broadcast(absl::MakeSpan(static_cast<uint32_t*>(data), size / 4), root).ok() ? 0 : 1;
  };
  ops.barrier = [](void* user) { return Of(user).Barrier().ok() ? 0 : 1; };
  ops.send_bytes = [](void* user, const void* data, uint64_t size, int peer, uint32_t tag) {
    return Of(user).Send(absl::string_view(static_cast<const char*>(data), size), peer, tag).ok() ? 0 : 1;
  };
  ops.recv_bytes = [](void* user, sf_bytes* out, int peer, uint32_t tag) {
    absl::StatusOr<std::string> got = Of(user).Recv(peer, tag);
    if (!got.ok()) return 1;
    sf_bytes_assign(out, got->data(), got->size());
    return 0;
  };
  ops.send_recv_bytes = [](void* user, const void* data, uint64_t size, int to, int from, uint32_t tag,
                           sf_bytes* out) {
    absl::StatusOr<std::string> got =
        Of(user).SendRecv(absl::string_view(static_cast<const char*>(data), size), to, from, tag);
    if (!got.ok()) return 1;
    sf_bytes_assign(out, got->data(), got->size());
    return 0;
  };
  return ops;
}

std::vector<float> Gradient(int step, int rank, size_t dim) {
  std::vector<float> g = GaussianVector(dim, 1000 * step + rank + 1, 0.1f);
  // A few heavy coordinates shared by the ranks, as real gradients have.
  for (size_t i = 0; i < dim; i += 97) g[i] += 1.0f + 0.01f * step;
  return g;
}

std::vector<float> Parameters(size_t dim) { return GaussianVector(dim, 77, 0.5f); }

std::string Settings(const std::string& scheme, const std::string& compressor, int rank) {
  return absl::StrCat("scheme=", scheme, "\ncompressor=", compressor, "\nrank=", rank, "\nworld_size=", kWorld,
                      "\nseed=3\nmomentum=0.9\n");
}

// The mean updates the worker's CollectiveScheme gives for `steps` steps, per rank.
std::vector<std::vector<std::vector<float>>> Reference(const std::string& scheme, const std::string& compressor,
                                                       size_t dim, int steps) {
  std::vector<float> grads;
  for (int step = 0; step < steps; ++step) {
    for (int rank = 0; rank < kWorld; ++rank) {
      const std::vector<float> g = Gradient(step, rank, dim);
      grads.insert(grads.end(), g.begin(), g.end());
    }
  }
  absl::StatusOr<std::vector<float>> means =
      WorkerSchemeMeans(absl::StrCat("scheme=", scheme, "\ncompressor=", compressor, "\nseed=3\nmomentum=0.9\n"),
                        kWorld, steps, dim, grads, Parameters(dim));
  EXPECT_TRUE(means.ok()) << means.status();
  std::vector<std::vector<std::vector<float>>> out(kWorld);
  if (!means.ok()) return out;
  for (int step = 0; step < steps; ++step) {
    for (int rank = 0; rank < kWorld; ++rank) {
      const auto begin = means->begin() + (static_cast<size_t>(step) * kWorld + rank) * dim;
      out[rank].emplace_back(begin, begin + dim);
    }
  }
  return out;
}

// The same through the C ABI: a session per rank, one group of `dim`;
// on_gpu: a device=cuda session given the gradients in device memory.
std::vector<std::vector<std::vector<float>>> ThroughHook(const std::string& scheme, const std::string& compressor,
                                                         size_t dim, int steps, bool on_gpu = false) {
  std::vector<std::vector<std::vector<float>>> out(kWorld);
  std::vector<absl::Status> statuses = RunOnLocalGlooGroup(kWorld, [&](Collective& collective) -> absl::Status {
    char err[512];
    const sf_collective_ops ops = OpsOver(&collective);
    const std::string settings = Settings(scheme, compressor, collective.rank()) + (on_gpu ? "device=cuda\n" : "");
    sf_session* session = sf_session_create(settings.c_str(), &ops, err, sizeof(err));
    if (session == nullptr) return absl::InternalError(err);
    const int64_t group = sf_session_add_group(session, dim, err, sizeof(err));
    if (group < 0) return absl::InternalError(err);
    const std::vector<float> params = Parameters(dim);
    for (int step = 0; step < steps; ++step) {
      std::vector<float> mean(dim, std::numeric_limits<float>::quiet_NaN());
      const std::vector<float> grad = Gradient(step, collective.rank(), dim);
      int rc = 0;
      if (on_gpu) {
        absl::StatusOr<DeviceArray> d_grad = DeviceArray::Upload(grad);
        absl::StatusOr<DeviceArray> d_mean = DeviceArray::Upload(mean);
        if (!d_grad.ok() || !d_mean.ok()) return absl::InternalError("uploading to the GPU");
        rc = sf_session_exchange_device(session, group, step, d_grad->data(), d_mean->data(), dim, err, sizeof(err));
        absl::StatusOr<std::vector<float>> back = CopyToHost(d_mean->view());
        if (!back.ok()) return back.status();
        mean = *std::move(back);
      } else {
        rc = sf_session_exchange(session, group, step, grad.data(), params.data(), dim, mean.data(), err,
                                 sizeof(err));
      }
      if (rc != 0) {
        sf_session_destroy(session);
        return absl::InternalError(err);
      }
      out[collective.rank()].push_back(mean);
    }
    sf_session_destroy(session);
    return absl::OkStatus();
  });
  for (const absl::Status& s : statuses) EXPECT_TRUE(s.ok()) << s;
  return out;
}

struct Case {
  std::string scheme;
  std::string compressor;  // empty: the scheme's default
};

class HookMatchesWorker : public ::testing::TestWithParam<Case> {};

TEST_P(HookMatchesWorker, SameUpdatesAsTheWorkersScheme) {
  for (size_t dim : {1000, 4099, 30000}) {
    const auto reference = Reference(GetParam().scheme, GetParam().compressor, dim, 4);
    const auto hooked = ThroughHook(GetParam().scheme, GetParam().compressor, dim, 4);
    ASSERT_EQ(hooked.size(), reference.size());
    for (int r = 0; r < kWorld; ++r) {
      ASSERT_EQ(hooked[r].size(), 4u) << "rank " << r;
      ASSERT_EQ(reference[r].size(), 4u) << "rank " << r;
      for (int step = 0; step < 4; ++step) {
        // Both sides run the same Gloo algorithms: the same bits.
        EXPECT_EQ(hooked[r][step], reference[r][step]) << "dim " << dim << " rank " << r << " step " << step;
        EXPECT_EQ(hooked[r][step], hooked[0][step]) << "ranks differ, dim " << dim << " step " << step;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Schemes, HookMatchesWorker,
                         ::testing::Values(Case{"sketch_allreduce", ""}, Case{"topk_allgather", "topk:density=0.02"},
                                           Case{"dense_allreduce", ""}, Case{"dense_bf16_allreduce", ""},
                                           Case{"gtopk", ""}, Case{"spardl", ""}, Case{"importance_allreduce", ""}),
                         [](const ::testing::TestParamInfo<Case>& info) { return info.param.scheme; });

TEST(HookSettingsTest, RefusesBadSettingsByName) {
  struct Bad {
    std::string text;
    std::string names;
  };
  const std::vector<Bad> bad = {
      {"world_size=4\n", "'scheme' is missing"},
      {"scheme=sketch_allreduce\n", "'world_size' is missing"},
      {"scheme=nope\nworld_size=4\n", "'scheme'"},
      {"scheme=sketch_ps\nworld_size=4\n", "aggregates on the servers"},
      {"scheme=sketch_allreduce\nworld_size=4\ncompressor=topk:density=0.1\n", "'compressor'"},
      {"scheme=sketch_allreduce\nworld_size=4\ncompressor=count_sketch:rows=x\n", "'compressor'"},
      {"scheme=sketch_allreduce\nworld_size=0\n", "'world_size'"},
      {"scheme=sketch_allreduce\nworld_size=4\nrank=4\n", "'rank'"},
      {"scheme=sketch_allreduce\nworld_size=4\nrank=-1\n", "'rank'"},
      {"scheme=sketch_allreduce\nworld_size=4\nmomentum=1\n", "'momentum'"},
      {"scheme=sketch_allreduce\nworld_size=4\nmomentum=nan\n", "'momentum'"},
      {"scheme=sketch_allreduce\nworld_size=4\nrelease_cap=inf\n", "'release_cap'"},
      {"scheme=sketch_allreduce\nworld_size=4\noptimizer=lion\n", "setting optimizer: unknown optimizer 'lion'"},
      {"scheme=sketch_allreduce\nworld_size=4\noptimizer=adamw:beta2=2\n", "setting optimizer: adamw: parameter beta2"},
      {"scheme=sketch_allreduce\nworld_size=4\nsecond_round=maybe\n", "'second_round'"},
      {"scheme=sketch_allreduce\nworld_size=4\nseed=-3\n", "'seed'"},
      {"scheme=sketch_allreduce\nworld_size=4\nlearning_rate=0.1\n", "unknown setting 'learning_rate'"},
      {"scheme=sketch_allreduce\nworld_size=4\nno equals sign\n", "has no '='"},
      {"scheme=topk_allgather\nworld_size=4\nsecond_round=1\n", "settings:"},
      {"scheme=topk_allgather\nworld_size=4\ncoordinator=127.0.0.1:7070\n", "joins no coordinator"},
      {"scheme=auto\nworld_size=4\n", "give the job's coordinator"},
      {"scheme=sketch_ps\nworld_size=4\ncoordinator=h:1\npush_attempts=0\n", "'push_attempts'"},
      {"scheme=sketch_ps\nworld_size=4\ncoordinator=h:1\njob=\n", "'job'"},
      {"scheme=sketch_ps\nworld_size=4\ncoordinator=h:1\njoin_timeout_s=x\n", "'join_timeout_s'"},
      {absl::StrCat("scheme=sketch_ps\nworld_size=4\ncoordinator=", std::string(5000, 'h'), "\n"), "'coordinator'"},
      {"scheme=sketch_allreduce\nworld_size=4\ndevice=tpu\n", "'device'"},
      {"scheme=sketch_allreduce\nworld_size=4\ndevice=cuda\ngpu=-1\n", "'gpu'"},
      {"scheme=sketch_allreduce\nworld_size=4\ndevice=cuda\ngpu=x\n", "'gpu'"},
      {"scheme=topk_allgather\nworld_size=4\ndevice=cuda\n", "device=gpu serves the count_sketch schemes"},
      {"scheme=sketch_allreduce\nworld_size=4\ndevice=cuda\nsecond_round=1\n", "second round"},
      {"scheme=sketch_allreduce\nworld_size=4\ndevice=cuda\nerror_feedback=0\n", "error feedback"},
      {"scheme=sketch_allreduce\nworld_size=4\ndevice=cuda\ncompressor=count_sketch:method=fetchsgd\n",
       "device=gpu"},
      {"scheme=sketch_ps\nworld_size=4\ncoordinator=h:1\ndevice=cuda\n", "aggregates on the servers"},
      {"scheme=powersgd_allreduce\nworld_size=4\n", "needs the layers' shapes, which the hook does not have"},
      {"scheme=powersgd_ps\nworld_size=4\ncoordinator=h:1\n", "needs the layers' shapes"},
  };
  for (const Bad& b : bad) {
    absl::StatusOr<HookSettings> parsed = ParseHookSettings(b.text);
    ASSERT_FALSE(parsed.ok()) << b.text;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument) << b.text;
    EXPECT_THAT(parsed.status().message(), HasSubstr(b.names)) << b.text;
    char err[256];
    EXPECT_NE(sf_check_settings(b.text.c_str(), err, sizeof(err)), 0);
    EXPECT_THAT(std::string(err), HasSubstr("INVALID_ARGUMENT")) << b.text;
  }
}

TEST(HookSettingsTest, ResolvesTheDefaultCompressor) {
  char out[1024], err[256];
  ASSERT_EQ(sf_resolved_settings("scheme=sketch_allreduce\nworld_size=2\n", out, sizeof(out), err, sizeof(err)), 0)
      << err;
  EXPECT_THAT(std::string(out), HasSubstr("compressor=count_sketch:"));
  EXPECT_THAT(std::string(out), HasSubstr("momentum=0.9"));
  EXPECT_THAT(std::string(out), Not(HasSubstr("optimizer="))) << "sgd is the default, unstated";
  // An optimizer is resolved to its canonical spec, which the ranks compare.
  ASSERT_EQ(sf_resolved_settings("scheme=sketch_allreduce\nworld_size=2\nmomentum=0\noptimizer=adamw:beta2=0.95\n",
                                 out, sizeof(out), err, sizeof(err)),
            0)
      << err;
  EXPECT_THAT(std::string(out), HasSubstr("optimizer=adamw:beta1=0.9,beta2=0.95,eps=1e-08,weight_decay=0.01\n"));
  // A buffer too small is refused, not overrun.
  EXPECT_NE(sf_resolved_settings("scheme=sketch_allreduce\nworld_size=2\n", out, 8, err, sizeof(err)), 0);
  EXPECT_THAT(std::string(err), HasSubstr("needed"));
}

TEST(HookSessionTest, EveryRankStopsAtANonFiniteGradientOfOne) {
  const size_t dim = 2000;
  std::vector<std::string> errors(kWorld);
  std::vector<absl::Status> statuses = RunOnLocalGlooGroup(kWorld, [&](Collective& collective) -> absl::Status {
    absl::StatusOr<HookSettings> settings = ParseHookSettings(Settings("sketch_allreduce", "", collective.rank()));
    if (!settings.ok()) return settings.status();
    sf_collective_ops ops = OpsOver(&collective);
    absl::StatusOr<std::unique_ptr<CallbackCollective>> wrapped =
        CallbackCollective::Create(ops, collective.rank(), kWorld);
    if (!wrapped.ok()) return wrapped.status();
    absl::StatusOr<std::unique_ptr<HookSession>> session = HookSession::Create(*settings, *std::move(wrapped));
    if (!session.ok()) return session.status();
    absl::StatusOr<int> group = (*session)->AddGroup(dim);
    if (!group.ok()) return group.status();
    std::vector<float> out(dim);
    for (int step = 0; step < 3; ++step) {
      std::vector<float> grad = Gradient(step, collective.rank(), dim);
      if (step == 2 && collective.rank() == 2) grad[17] = std::numeric_limits<float>::infinity();
      absl::Status s = (*session)->Exchange(*group, step, grad, {}, absl::MakeSpan(out));
      if (!s.ok()) return s;
      // The non-finite gradient went out as zeros: nothing non-finite reached the update.
      for (float v : out) {
        if (!std::isfinite(v)) return absl::InternalError("a non-finite value reached the update");
      }
      s = (*session)->FinishStep(step);
      if (!s.ok()) {
        errors[collective.rank()] = std::string(s.message());
        EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
        return absl::OkStatus();
      }
    }
    return absl::InternalError("the non-finite gradient went through");
  });
  for (const absl::Status& s : statuses) EXPECT_TRUE(s.ok()) << s;
  for (int r = 0; r < kWorld; ++r) {
    EXPECT_THAT(errors[r], HasSubstr("non-finite gradient at step 2 on rank 2")) << "rank " << r;
  }
  EXPECT_THAT(errors[2], HasSubstr("this rank's first: group 0, index 17"));
}

TEST(HookSessionTest, RestoredStateContinuesAsIfUninterrupted) {
  const size_t dim = 5000;
  std::vector<std::vector<float>> uninterrupted(kWorld), resumed(kWorld);
  std::vector<absl::Status> statuses = RunOnLocalGlooGroup(kWorld, [&](Collective& collective) -> absl::Status {
    const int rank = collective.rank();
    auto make = [&]() -> absl::StatusOr<std::unique_ptr<HookSession>> {
      absl::StatusOr<HookSettings> settings = ParseHookSettings(Settings("sketch_allreduce", "", rank));
      if (!settings.ok()) return settings.status();
      absl::StatusOr<std::unique_ptr<CallbackCollective>> wrapped =
          CallbackCollective::Create(OpsOver(&collective), rank, kWorld);
      if (!wrapped.ok()) return wrapped.status();
      return HookSession::Create(*settings, *std::move(wrapped));
    };
    absl::StatusOr<std::unique_ptr<HookSession>> first = make();
    if (!first.ok()) return first.status();
    if (!(*first)->AddGroup(dim).ok()) return absl::InternalError("add group");
    std::vector<float> out(dim);
    GroupState saved;
    for (int step = 0; step < 6; ++step) {
      if (step == 3) saved = *(*first)->SaveState(0);
      if (absl::Status s = (*first)->Exchange(0, step, Gradient(step, rank, dim), {}, absl::MakeSpan(out)); !s.ok()) {
        return s;
      }
    }
    uninterrupted[rank] = out;
    absl::StatusOr<std::unique_ptr<HookSession>> second = make();
    if (!second.ok()) return second.status();
    if (!(*second)->AddGroup(dim).ok()) return absl::InternalError("add group");
    if (absl::Status s = (*second)->RestoreState(0, saved); !s.ok()) return s;
    for (int step = 3; step < 6; ++step) {
      if (absl::Status s = (*second)->Exchange(0, step, Gradient(step, rank, dim), {}, absl::MakeSpan(out)); !s.ok()) {
        return s;
      }
    }
    resumed[rank] = out;
    // A state of the wrong size is refused.
    const GroupState wrong{std::vector<float>(dim + 1), std::vector<float>(dim), {}};
    if ((*second)->RestoreState(0, wrong).ok()) return absl::InternalError("a wrong-sized state was accepted");
    return absl::OkStatus();
  });
  for (const absl::Status& s : statuses) EXPECT_TRUE(s.ok()) << s;
  for (int r = 0; r < kWorld; ++r) EXPECT_EQ(resumed[r], uninterrupted[r]) << "rank " << r;
}

double Norm(const std::vector<float>& v) {
  double sum = 0;
  for (float x : v) sum += static_cast<double>(x) * x;
  return std::sqrt(sum);
}

// sketch_allreduce with its default sketch (peel) on the GPU against the
// same on the host: the ranks agree, and each step's mean update is the
// host's within 1e-3 of its norm (the sketches differ in the rounding of
// atomics, so a coordinate at the edge of what the peel separates may be
// taken in one and not in the other). Skips without a GPU.
TEST(HookSessionTest, DeviceSessionMatchesTheHostSession) {
  if (absl::Status gpu = CheckGpuWorker(); !gpu.ok()) GTEST_SKIP() << "GPU test skipped: " << gpu.message();
  for (size_t dim : {1000, 100003}) {
    const auto host = ThroughHook("sketch_allreduce", "", dim, 4);
    const auto device = ThroughHook("sketch_allreduce", "", dim, 4, /*on_gpu=*/true);
    for (int r = 0; r < kWorld; ++r) {
      ASSERT_EQ(device[r].size(), 4u) << "rank " << r;
      for (int step = 0; step < 4; ++step) {
        EXPECT_EQ(device[r][step], device[0][step]) << "ranks differ, dim " << dim << " step " << step;
        std::vector<float> diff(dim);
        for (size_t i = 0; i < dim; ++i) diff[i] = device[r][step][i] - host[r][step][i];
        EXPECT_GT(Norm(host[r][step]), 0) << "dim " << dim << " step " << step;
        EXPECT_LE(Norm(diff), 1e-3 * Norm(host[r][step])) << "dim " << dim << " rank " << r << " step " << step;
      }
    }
  }
}

// A session's placement is explicit: a host session refuses device buffers,
// and a device=cuda session refuses host buffers and, without a GPU, its
// groups (naming the missing GPU).
TEST(HookSessionTest, PlacementIsChecked) {
  char err[256];
  std::vector<absl::Status> statuses = RunOnLocalGlooGroup(1, [&](Collective& collective) -> absl::Status {
    const sf_collective_ops ops = OpsOver(&collective);
    sf_session* host = sf_session_create("scheme=sketch_allreduce\nworld_size=1\n", &ops, err, sizeof(err));
    if (host == nullptr) return absl::InternalError(err);
    EXPECT_EQ(sf_session_add_group(host, 100, err, sizeof(err)), 0) << err;
    std::vector<float> grad(100, 1.0f), out(100);
    EXPECT_NE(sf_session_exchange_device(host, 0, 0, grad.data(), out.data(), 100, err, sizeof(err)), 0);
    EXPECT_THAT(std::string(err), HasSubstr("device=cpu exchanges host memory"));
    sf_session_destroy(host);

    sf_session* gpu = sf_session_create("scheme=sketch_allreduce\nworld_size=1\ndevice=cuda\n", &ops, err,
                                        sizeof(err));
    if (gpu == nullptr) return absl::InternalError(err);
    char resolved[1024];
    EXPECT_EQ(sf_resolved_settings("scheme=sketch_allreduce\nworld_size=1\ndevice=cuda\ngpu=3\n", resolved,
                                   sizeof(resolved), err, sizeof(err)),
              0);
    EXPECT_THAT(std::string(resolved), HasSubstr("device=cuda\ngpu=3\n"));
    const int64_t group = sf_session_add_group(gpu, 100, err, sizeof(err));
    if (CheckGpuWorker().ok()) {
      EXPECT_EQ(group, 0) << err;
      EXPECT_NE(sf_session_exchange(gpu, 0, 0, grad.data(), nullptr, 100, out.data(), err, sizeof(err)), 0);
      EXPECT_THAT(std::string(err), HasSubstr("device=cuda exchanges device memory"));
    } else {
      EXPECT_LT(group, 0);
      EXPECT_THAT(std::string(err), HasSubstr("needs a GPU"));
    }
    sf_session_destroy(gpu);
    return absl::OkStatus();
  });
  for (const absl::Status& s : statuses) EXPECT_TRUE(s.ok()) << s;
}

// The run's warnings (here: a fixed-size sketch with AdamW) come once in the
// stats, however many bucket groups the session has, without a group's name.
TEST(HookSessionTest, TheRunsWarningComesOnceForEveryGroup) {
  char err[256];
  std::vector<absl::Status> statuses = RunOnLocalGlooGroup(1, [&](Collective& collective) -> absl::Status {
    const sf_collective_ops ops = OpsOver(&collective);
    sf_session* session = sf_session_create(
        "scheme=fixed_sketch_allreduce\nworld_size=1\nmomentum=0\noptimizer=adamw\n", &ops, err, sizeof(err));
    if (session == nullptr) return absl::InternalError(err);
    for (uint64_t dim : {3000, 5000, 7000}) EXPECT_GE(sf_session_add_group(session, dim, err, sizeof(err)), 0) << err;
    char stats[4096];
    EXPECT_EQ(sf_session_stats_json(session, stats, sizeof(stats)), 0);
    const std::string text(stats);
    const size_t first = text.find("fixed_sketch_allreduce with adamw:");
    EXPECT_NE(first, std::string::npos) << text;
    EXPECT_EQ(text.find("fixed_sketch_allreduce with adamw:", first + 1), std::string::npos) << text;
    EXPECT_THAT(text, Not(HasSubstr("bucket group 0: fixed_sketch_allreduce"))) << text;
    sf_session_destroy(session);
    return absl::OkStatus();
  });
  for (const absl::Status& s : statuses) EXPECT_TRUE(s.ok()) << s;
}

TEST(HookSessionTest, RefusesBadGroupsAndSizes) {
  sf_collective_ops none{};
  char err[256];
  EXPECT_EQ(sf_session_create("scheme=sketch_allreduce\nworld_size=1\n", &none, err, sizeof(err)), nullptr);
  EXPECT_THAT(std::string(err), HasSubstr("callback"));
  std::vector<absl::Status> statuses = RunOnLocalGlooGroup(1, [&](Collective& collective) -> absl::Status {
    const sf_collective_ops ops = OpsOver(&collective);
    sf_session* session = sf_session_create("scheme=topk_allgather\nworld_size=1\n", &ops, err, sizeof(err));
    if (session == nullptr) return absl::InternalError(err);
    EXPECT_LT(sf_session_add_group(session, 0, err, sizeof(err)), 0);
    EXPECT_THAT(std::string(err), HasSubstr("1 to 2^32 - 1"));
    const int64_t g = sf_session_add_group(session, 100, err, sizeof(err));
    EXPECT_EQ(g, 0);
    std::vector<float> grad(100, 1.0f), out(100);
    EXPECT_NE(sf_session_exchange(session, 5, 0, grad.data(), nullptr, 100, out.data(), err, sizeof(err)), 0);
    EXPECT_THAT(std::string(err), HasSubstr("group 5 does not exist"));
    EXPECT_NE(sf_session_exchange(session, 0, 0, grad.data(), nullptr, 99, out.data(), err, sizeof(err)), 0);
    EXPECT_THAT(std::string(err), HasSubstr("has 100 elements"));
    EXPECT_EQ(sf_session_exchange(session, 0, 0, grad.data(), nullptr, 100, out.data(), err, sizeof(err)), 0) << err;
    char stats[512];
    EXPECT_EQ(sf_session_stats_json(session, stats, sizeof(stats)), 0);
    EXPECT_THAT(std::string(stats), HasSubstr("\"steps\": 1"));
    sf_session_destroy(session);
    return absl::OkStatus();
  });
  for (const absl::Status& s : statuses) EXPECT_TRUE(s.ok()) << s;
}

}  // namespace
}  // namespace sketchfuse
