// Backend selection: gloo by name, unknown names refused naming the choices.
#include "worker/collective/collective_factory.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sketchfuse {
namespace {

using ::testing::HasSubstr;

TEST(CollectiveFactoryTest, MakesAOneRankGlooGroup) {
  InMemoryKeyValueStore store;
  absl::StatusOr<std::unique_ptr<Collective>> gloo = MakeCollective(CollectiveConfig{}, store, 0, 1);
  ASSERT_TRUE(gloo.ok()) << gloo.status();
  EXPECT_EQ((*gloo)->backend(), "gloo");
  std::vector<float> x = {1, 2, 3};
  EXPECT_TRUE((*gloo)->AllReduceSum(absl::MakeSpan(x)).ok());
  EXPECT_EQ(x, (std::vector<float>{1, 2, 3}));
}

TEST(CollectiveFactoryTest, RefusesUnknownBackends) {
  InMemoryKeyValueStore store;
  CollectiveConfig config;
  config.backend = "mpi";
  absl::StatusOr<std::unique_ptr<Collective>> made = MakeCollective(config, store, 0, 1);
  EXPECT_EQ(made.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(made.status().message(), HasSubstr("gloo and nccl"));
}

TEST(CollectiveFactoryTest, NcclIsRefusedClearlyWhereItIsNotBuilt) {
  if (NcclBackendBuilt()) GTEST_SKIP() << "this build has NCCL (its one-rank test is nccl_collective_test)";
  InMemoryKeyValueStore store;
  CollectiveConfig config;
  config.backend = "nccl";
  absl::StatusOr<std::unique_ptr<Collective>> made = MakeCollective(config, store, 0, 1);
  EXPECT_EQ(made.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(made.status().message(), HasSubstr("not in this build"));
}

}  // namespace
}  // namespace sketchfuse
