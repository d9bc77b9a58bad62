// The NCCL backend with one rank on the one GPU (NCCL refuses two ranks on
// one device; the multi-rank logic of every scheme is tested through Gloo):
// the rendezvous through a key-value store, each collective's one-rank
// result on host data staged through the device, and every decentralized
// scheme run over NCCL giving the update it gives over Gloo. Skips without a
// GPU.
#include "worker/collective/nccl_collective.h"

#include "common/test_vectors.h"
#include "cuda/gpu_test_util.h"
#include "worker/collective/local_group.h"
#include "worker/schemes/collective_scheme.h"

namespace sketchfuse {
namespace {

TEST(NcclCollectiveTest, OneRankCollectivesOnHostData) {
  SKIP_WITHOUT_GPU();
  InMemoryKeyValueStore store;
  absl::StatusOr<std::unique_ptr<NcclCollective>> nccl = NcclCollective::Create(store, 0, 1);
  ASSERT_TRUE(nccl.ok()) << nccl.status();
  Collective& c = **nccl;
  EXPECT_EQ(c.backend(), "nccl");
  EXPECT_EQ(c.size(), 1);
  ASSERT_TRUE(store.Get("nccl/unique_id", absl::ZeroDuration()).ok()) << "rank 0 published no unique id";

  for (size_t n : {size_t{0}, size_t{1}, size_t{1000}, size_t{3000017}}) {
    const std::vector<float> x = GaussianVector(n, 3);
    std::vector<float> sum = x;
    ASSERT_TRUE(c.AllReduceSum(absl::MakeSpan(sum)).ok());
    EXPECT_EQ(sum, x) << n;
    std::vector<float> gathered;
    std::vector<size_t> counts;
    ASSERT_TRUE(c.AllGatherV(absl::MakeConstSpan(x), &gathered, &counts).ok());
    EXPECT_EQ(gathered, x);
    EXPECT_EQ(counts, std::vector<size_t>{n});
    std::vector<float> broadcast = x;
    ASSERT_TRUE(c.Broadcast(absl::MakeSpan(broadcast), 0).ok());
    EXPECT_EQ(broadcast, x);
  }
  std::vector<uint32_t> words = {5, 4, 3}, all;
  std::vector<size_t> counts;
  ASSERT_TRUE(c.AllGatherV(absl::MakeConstSpan(words), &all, &counts).ok());
  EXPECT_EQ(all, words);
  EXPECT_TRUE(c.Barrier().ok());
  EXPECT_EQ(c.Broadcast(absl::MakeSpan(words), 1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(c.Send("x", 0, 1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(c.bytes_sent(), 0u) << "one rank sends nothing";
}

TEST(NcclCollectiveTest, RefusesRanksOutsideTheGroup) {
  SKIP_WITHOUT_GPU();
  InMemoryKeyValueStore store;
  EXPECT_EQ(NcclCollective::Create(store, 1, 1).status().code(), absl::StatusCode::kInvalidArgument);
  NcclOptions quick;
  quick.timeout = absl::Milliseconds(200);
  // Rank 1 waits for an id rank 0 never publishes.
  EXPECT_EQ(NcclCollective::Create(store, 1, 2, quick).status().code(), absl::StatusCode::kUnavailable);
}

v1::JobConfig OneWorkerJob(const std::string& scheme, const std::string& compressor) {
  v1::JobConfig job;
  job.set_job("nccl");
  job.set_world_size(1);
  job.mutable_run()->set_scheme(scheme);
  job.mutable_run()->set_compressor(compressor);
  job.mutable_run()->set_error_feedback(true);
  v1::GroupConfig* group = job.add_groups();
  group->set_dim(100003);
  group->set_compressor(compressor);
  return job;
}

Update UpdateOf(const v1::JobConfig& job, Collective& collective) {
  std::unique_ptr<CollectiveScheme> scheme = *CollectiveScheme::Create(job, &collective);
  const std::vector<float> grad = GaussianVector(100003, 21), params = GaussianVector(100003, 22);
  Update update;
  scheme->Exchange(0, 0, grad, params, [&](absl::StatusOr<ExchangeResult> result) {
    EXPECT_TRUE(result.ok()) << result.status();
    if (result.ok()) update = std::move(result->update);
  });
  return update;
}

TEST(NcclCollectiveTest, EveryDecentralizedSchemeRunsOverNcclAsOverGloo) {
  SKIP_WITHOUT_GPU();
  InMemoryKeyValueStore store;
  absl::StatusOr<std::unique_ptr<NcclCollective>> nccl = NcclCollective::Create(store, 0, 1);
  ASSERT_TRUE(nccl.ok()) << nccl.status();
  const std::vector<std::pair<std::string, std::string>> schemes = {
      {"dense_allreduce", "dense"},
      {"dense_bf16_allreduce", "dense"},
      {"sketch_allreduce", "count_sketch:method=estimate,density=0.01,rows=3,width=4"},
      {"topk_allgather", "topk:density=0.01"},
      {"gtopk", "topk:density=0.01"},
      {"importance_allreduce", "importance:density=0.01"},
      {"spardl", "topk:density=0.01"}};
  for (const auto& [scheme, compressor] : schemes) {
    const v1::JobConfig job = OneWorkerJob(scheme, compressor);
    const Update over_nccl = UpdateOf(job, **nccl);
    Update over_gloo;
    RunOnLocalGlooGroup(1, [&](Collective& gloo) {
      over_gloo = UpdateOf(job, gloo);
      return absl::OkStatus();
    });
    EXPECT_FALSE(over_nccl.values.empty()) << scheme;
    EXPECT_EQ(over_nccl.indices, over_gloo.indices) << scheme;
    EXPECT_EQ(over_nccl.values, over_gloo.values) << scheme;
  }
}

}  // namespace
}  // namespace sketchfuse
