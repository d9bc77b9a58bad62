// The NCCL backend with one rank on the one GPU (NCCL refuses two ranks on
// one device; the multi-rank logic of every scheme is tested through Gloo):
// the rendezvous through a key-value store, and each collective's one-rank
// result on host data staged through the device. Skips without a GPU.
#include "worker/collective/nccl_collective.h"

#include "common/test_vectors.h"
#include "cuda/gpu_test_util.h"

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

}  // namespace
}  // namespace sketchfuse
