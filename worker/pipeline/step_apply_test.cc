#include "worker/pipeline/step_apply.h"

#include <vector>

#include "gtest/gtest.h"

namespace sketchfuse {
namespace {

Update Sparse(uint64_t dim, std::vector<uint32_t> indices, std::vector<float> values) {
  Update u;
  u.dim = dim;
  u.indices = std::move(indices);
  u.values = std::move(values);
  return u;
}

TEST(ForEachMeanValueTest, VisitsExactlyTheCarriedCoordinatesScaled) {
  std::vector<std::pair<uint64_t, float>> seen;
  auto record = [&seen](uint64_t i, float v) { seen.emplace_back(i, v); };
  ASSERT_TRUE(ForEachMeanValue(Sparse(10, {2, 7}, {4, -8}), 10, 0.25f, record).ok());
  EXPECT_EQ(seen, (std::vector<std::pair<uint64_t, float>>{{2, 1.0f}, {7, -2.0f}}));
  seen.clear();
  Update dense;
  dense.dense = true;
  dense.dim = 3;
  dense.values = {2, 4, 6};
  ASSERT_TRUE(ForEachMeanValue(dense, 3, 0.5f, record).ok());
  EXPECT_EQ(seen, (std::vector<std::pair<uint64_t, float>>{{0, 1.0f}, {1, 2.0f}, {2, 3.0f}}));
}

TEST(ForEachMeanValueTest, AMisfitIsRefusedBeforeAnyVisit) {
  int visits = 0;
  auto count = [&visits](uint64_t, float) { ++visits; };
  EXPECT_EQ(ForEachMeanValue(Sparse(10, {2, 10}, {1, 1}), 10, 1, count).code(), absl::StatusCode::kInternal);
  EXPECT_EQ(ForEachMeanValue(Sparse(10, {2, 3}, {1}), 10, 1, count).code(), absl::StatusCode::kInternal);
  Update dense;
  dense.dense = true;
  dense.values = {1, 2};
  EXPECT_EQ(ForEachMeanValue(dense, 3, 1, count).code(), absl::StatusCode::kInternal);
  EXPECT_EQ(visits, 0);
}

TEST(MeanScaleTest, IsOneOverTheWorld) {
  EXPECT_EQ(MeanScale(1), 1.0f);
  EXPECT_EQ(MeanScale(4), 0.25f);
}

// A scheme whose Reconcile repairs the groups it is told to, and which
// records what was settled.
class RecordingScheme final : public AggregationScheme {
 public:
  std::string name() const override { return "recording"; }
  void Exchange(uint64_t, int, GradientView, absl::Span<const float>, ExchangeDone) override {}
  absl::Status Reconcile(uint64_t, std::vector<absl::StatusOr<ExchangeResult>>& results) override {
    if (!reconcile_error.ok()) return reconcile_error;
    for (int g : repair) {
      ExchangeResult redone;
      redone.update = Sparse(4, {1}, {100});
      results[g] = redone;
    }
    return absl::OkStatus();
  }
  absl::Status OnApplied(int group, const Update& update) override {
    settled.emplace_back(group, update.indices);
    return group == fail_settle ? absl::InternalError("settle") : absl::OkStatus();
  }
  std::vector<GroupState> SaveState() const override { return {}; }
  absl::Status RestoreState(const std::vector<GroupState>&) override { return absl::OkStatus(); }

  absl::Status reconcile_error;
  std::vector<int> repair;
  int fail_settle = -1;
  std::vector<std::pair<int, std::vector<uint32_t>>> settled;
};

std::vector<absl::StatusOr<ExchangeResult>> Results() {
  std::vector<absl::StatusOr<ExchangeResult>> results;
  for (uint32_t g = 0; g < 3; ++g) {
    ExchangeResult r;
    r.update = Sparse(4, {g}, {1});
    r.bytes_sent = 10 + g;
    results.push_back(r);
  }
  return results;
}

TEST(ReconcileStepTest, ReturnsTheUpdatesAndKeepsTheRest) {
  RecordingScheme scheme;
  std::vector<absl::StatusOr<ExchangeResult>> results = Results();
  results[1] = absl::UnavailableError("shard down");
  scheme.repair = {1};
  absl::StatusOr<std::vector<Update>> updates = ReconcileStep(scheme, 5, results);
  ASSERT_TRUE(updates.ok()) << updates.status();
  ASSERT_EQ(updates->size(), 3u);
  EXPECT_EQ((*updates)[1].values, std::vector<float>{100});
  EXPECT_EQ((*updates)[2].indices, std::vector<uint32_t>{2});
  EXPECT_EQ(results[2]->bytes_sent, 12u) << "the results keep their bytes and spans";
}

TEST(ReconcileStepTest, AGroupStillFailedFailsTheStepWithItsOwnStatus) {
  RecordingScheme scheme;
  std::vector<absl::StatusOr<ExchangeResult>> results = Results();
  results[2] = absl::DataLossError("diverged here");
  absl::StatusOr<std::vector<Update>> updates = ReconcileStep(scheme, 5, results);
  EXPECT_EQ(updates.status(), absl::DataLossError("diverged here"));
  scheme.reconcile_error = absl::DeadlineExceededError("agreeing");
  EXPECT_EQ(ReconcileStep(scheme, 5, results).status().code(), absl::StatusCode::kDeadlineExceeded);
}

TEST(SettleStepTest, SettlesEveryGroupInOrderAndStopsAtAnError) {
  RecordingScheme scheme;
  const std::vector<Update> updates = {Sparse(4, {0}, {1}), Sparse(4, {1}, {1}), Sparse(4, {2}, {1})};
  ASSERT_TRUE(SettleStep(scheme, updates).ok());
  ASSERT_EQ(scheme.settled.size(), 3u);
  for (int g = 0; g < 3; ++g) EXPECT_EQ(scheme.settled[g].first, g);
  scheme.settled.clear();
  scheme.fail_settle = 1;
  EXPECT_EQ(SettleStep(scheme, updates).code(), absl::StatusCode::kInternal);
  EXPECT_EQ(scheme.settled.size(), 2u);
}

}  // namespace
}  // namespace sketchfuse
