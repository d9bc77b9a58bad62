// The NCCL wrapper with one rank on the one GPU (NCCL refuses two ranks on one
// device; multi-rank collectives are tested through Gloo on the CPU): a
// communicator from a unique id, and allreduce, allgather and broadcast on a
// stream with their one-rank results. Bad ids and ranks are refused before
// NCCL is called. Skips without a GPU.
#include "cuda/nccl_communicator.h"

#include <vector>

#include "common/test_vectors.h"
#include "cuda/device_buffer.h"
#include "cuda/gpu_test_util.h"

namespace sketchfuse {
namespace {

TEST(NcclCommunicatorTest, OneRankCollectives) {
  SKIP_WITHOUT_GPU();
  absl::StatusOr<std::string> id = NewNcclUniqueId();
  ASSERT_TRUE(id.ok()) << id.status();
  ASSERT_EQ(id->size(), kNcclUniqueIdBytes);
  absl::StatusOr<std::unique_ptr<NcclCommunicator>> comm = NcclCommunicator::Create(*id, 0, 1, 0);
  ASSERT_TRUE(comm.ok()) << comm.status();
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);

  const std::vector<float> x = GaussianVector(100003, 11);
  auto d_x = *DeviceBuffer<float>::FromHost(x);
  auto d_y = *DeviceBuffer<float>::Allocate(x.size());
  ASSERT_TRUE((*comm)->AllReduceSum(d_x.data(), d_y.data(), x.size(), stream).ok());
  ASSERT_TRUE((*comm)->AllGather(d_x.data(), d_y.data(), x.size(), stream).ok());
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_EQ(*d_y.ToHost(), x);

  const std::vector<uint32_t> indices = {3, 1, 4, 1, 5};
  auto d_i = *DeviceBuffer<uint32_t>::FromHost(indices);
  auto d_j = *DeviceBuffer<uint32_t>::Allocate(indices.size());
  ASSERT_TRUE((*comm)->AllGather(d_i.data(), d_j.data(), indices.size(), stream).ok());
  ASSERT_TRUE((*comm)->Broadcast(d_x.data(), x.size(), 0, stream).ok());
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_EQ(*d_j.ToHost(), indices);
  EXPECT_EQ(*d_x.ToHost(), x);
  EXPECT_TRUE((*comm)->CheckAsyncError().ok());
  EXPECT_EQ((*comm)->Broadcast(d_x.data(), 1, 1, stream).code(),
            absl::StatusCode::kInvalidArgument);
  cudaStreamDestroy(stream);
}

TEST(NcclCommunicatorTest, RefusesBadIdsAndRanks) {
  SKIP_WITHOUT_GPU();
  EXPECT_EQ(NcclCommunicator::Create("short", 0, 1, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  const std::string id(kNcclUniqueIdBytes, '\0');
  EXPECT_EQ(NcclCommunicator::Create(id, 1, 1, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(NcclCommunicator::Create(id, 0, 0, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace sketchfuse
