// The two routes agree: for the same workers' gradients, the decentralized
// schemes (CollectiveScheme over a real Gloo group of threads) give the
// update the aggregation server's core computes from the same payloads
// (the centralized route's decode, without the socket):
//   sketch_allreduce == sketch_ps   method=estimate: same indices, values
//                                   within 1e-5 relative; method=peel: both
//                                   return only coordinates the workers sent,
//                                   with their sums, and the same ones but for
//                                   a few whose sum nearly cancels (peeling
//                                   decides on float sums the two routes add
//                                   in another order)
//   dense_allreduce  == dense_ps    the exact mean's sum, within float rounding
//   topk_allgather   == topk_ps without re-selection: the same union-sum
#include <cmath>
#include <map>
#include <mutex>

#include "common/test_vectors.h"
#include "gtest/gtest.h"
#include "server/aggregation_core.h"
#include "worker/collective/local_group.h"
#include "worker/schemes/collective_scheme.h"
#include "worker/compression/group_compressors.h"
#include "worker/schemes/scheme_registry.h"

namespace sketchfuse {
namespace {

constexpr int kWorld = 4;
constexpr uint64_t kDim = 20011;

v1::JobConfig Job(const std::string& scheme, const std::string& compressor) {
  v1::JobConfig job;
  job.set_job("equivalence");
  job.set_world_size(kWorld);
  job.mutable_run()->set_scheme(scheme);
  job.mutable_run()->set_compressor(compressor);
  job.mutable_run()->set_error_feedback(true);
  v1::GroupConfig* group = job.add_groups();
  group->set_dim(kDim);
  group->set_compressor(compressor);
  return job;
}

// The server core's update for the workers' gradients of one step; with
// `sent`, the sums of what the workers inserted into their sketches, by index.
Update ServerUpdate(const v1::JobConfig& job, const std::vector<std::vector<float>>& grads,
                    std::map<uint32_t, double>* sent = nullptr) {
  AggregationConfig config;
  config.job = job.job();
  config.world_size = kWorld;
  config.groups.push_back({0, kDim, job.groups(0).compressor(), 0});
  std::unique_ptr<AggregationCore> core = *AggregationCore::Create(config);
  Update update;
  for (int w = 0; w < kWorld; ++w) {
    GroupCompressors stack = *CompressorsFor(job);
    Payload payload = *stack.Encode(0, grads[w], {});
    if (sent != nullptr && payload.inserted.has_value()) {
      for (uint32_t index : *payload.inserted) (*sent)[index] += grads[w][index];
    }
    core->Push({job.job(), 0, 0}, w, std::move(payload), absl::Now(), [&](absl::StatusOr<RoundResult> result) {
      ASSERT_TRUE(result.ok()) << result.status();
      update = *result->update;
    });
  }
  return update;
}

Update CollectiveUpdate(const v1::JobConfig& job, const std::vector<std::vector<float>>& grads) {
  std::vector<Update> updates(kWorld);
  const std::vector<absl::Status> statuses = RunOnLocalGlooGroup(kWorld, [&](Collective& collective) {
    absl::StatusOr<std::unique_ptr<CollectiveScheme>> scheme = CollectiveScheme::Create(job, &collective);
    if (!scheme.ok()) return scheme.status();
    absl::Status status;
    (*scheme)->Exchange(0, 0, grads[collective.rank()], {}, [&](absl::StatusOr<ExchangeResult> result) {
      status = result.status();
      if (result.ok()) updates[collective.rank()] = std::move(result->update);
    });
    return status;
  });
  for (const absl::Status& s : statuses) EXPECT_TRUE(s.ok()) << s;
  for (int w = 1; w < kWorld; ++w) EXPECT_EQ(updates[w].values, updates[0].values);
  return updates[0];
}

std::vector<std::vector<float>> Gradients() {
  std::vector<std::vector<float>> grads;
  for (int w = 0; w < kWorld; ++w) grads.push_back(GaussianVector(kDim, 40 + w));
  return grads;
}

void ExpectClose(const Update& collective, const Update& server, double relative) {
  ASSERT_EQ(collective.dense, server.dense);
  ASSERT_EQ(collective.indices, server.indices);
  ASSERT_EQ(collective.values.size(), server.values.size());
  for (size_t j = 0; j < server.values.size(); ++j) {
    EXPECT_NEAR(collective.values[j], server.values[j], relative * std::abs(server.values[j]) + 1e-6) << j;
  }
}

TEST(RouteEquivalenceTest, SketchAllreduceGivesTheSketchPsUpdate) {
  const std::vector<std::vector<float>> grads = Gradients();
  for (const std::string spec : {"count_sketch:method=estimate,density=0.01,rows=1,width=5",
                                 "count_sketch:method=estimate,density=0.01,rows=5,width=3"}) {
    const Update server = ServerUpdate(Job("sketch_ps", spec), grads);
    const Update collective = CollectiveUpdate(Job("sketch_allreduce", spec), grads);
    EXPECT_GT(server.indices.size(), 0u);
    ExpectClose(collective, server, 1e-5);
  }
}

// Peeling takes a coordinate when two rows' float sums agree to 1e-6 of the
// value; where the workers' values nearly cancel (2.87 - 2.69), the rounding
// of the two routes' summation orders decides. Both routes still apply only
// what was sent, so what one of them leaves stays in the residuals.
TEST(RouteEquivalenceTest, SketchAllreducePeelsWhatSketchPsPeels) {
  const std::vector<std::vector<float>> grads = Gradients();
  const std::string spec = "count_sketch:method=peel,density=0.01,rows=4,width=4";
  std::map<uint32_t, double> sent;
  const Update server = ServerUpdate(Job("sketch_ps", spec), grads, &sent);
  const Update collective = CollectiveUpdate(Job("sketch_allreduce", spec), grads);
  ASSERT_FALSE(server.dense);
  ASSERT_FALSE(collective.dense);
  std::map<uint32_t, float> by_server, by_collective;
  for (const auto& [update, out] : {std::pair{&server, &by_server}, std::pair{&collective, &by_collective}}) {
    ASSERT_EQ(update->indices.size(), update->values.size());
    for (size_t j = 0; j < update->indices.size(); ++j) {
      const uint32_t index = update->indices[j];
      (*out)[index] = update->values[j];
      ASSERT_TRUE(sent.count(index)) << "index " << index << " was never sent";
      EXPECT_NEAR(update->values[j], sent[index], 1e-5 * std::abs(sent[index]) + 1e-6) << index;
    }
  }
  EXPECT_GT(server.indices.size(), sent.size() * 9 / 10) << "peeling recovers most of what was sent";
  size_t differ = 0;
  for (const auto& [index, value] : by_server) differ += by_collective.count(index) == 0;
  for (const auto& [index, value] : by_collective) differ += by_server.count(index) == 0;
  EXPECT_LE(differ, server.indices.size() / 100) << "the routes peel the same coordinates but for a few";
}

TEST(RouteEquivalenceTest, DenseAllreduceGivesTheDensePsSum) {
  const std::vector<std::vector<float>> grads = Gradients();
  ExpectClose(CollectiveUpdate(Job("dense_allreduce", "dense"), grads), ServerUpdate(Job("dense_ps", "dense"), grads),
              1e-5);
}

TEST(RouteEquivalenceTest, TopKAllgatherGivesTheUnionSumOfTopKPs) {
  const std::vector<std::vector<float>> grads = Gradients();
  // Exactly equal: both add each index's values in worker order.
  const Update server = ServerUpdate(Job("topk_ps", "topk:density=0.01"), grads);
  const Update collective = CollectiveUpdate(Job("topk_allgather", "topk:density=0.01"), grads);
  EXPECT_EQ(collective.indices, server.indices);
  EXPECT_EQ(collective.values, server.values);
}

}  // namespace
}  // namespace sketchfuse
