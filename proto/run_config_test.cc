#include "proto/run_config.h"

#include "gtest/gtest.h"

namespace sketchfuse {
namespace {

v1::RunConfig Example() {
  v1::RunConfig run;
  run.set_workload("mlp");
  run.set_scheme("sketch_ps");
  run.set_compressor("count_sketch:density=0.01");
  for (uint64_t size : {200704, 256, 32768, 128, 1280, 10}) run.add_layer_sizes(size);
  run.set_seed(7);
  run.set_learning_rate(0.1);
  return run;
}

TEST(RunFingerprintTest, EqualConfigsShareItAndAnyChangeMovesIt) {
  const v1::RunConfig a = Example();
  EXPECT_EQ(RunFingerprint(a), RunFingerprint(Example()));
  EXPECT_EQ(RunFingerprint(a).size(), 16u);
  v1::RunConfig b = a;
  b.set_seed(8);
  EXPECT_NE(RunFingerprint(a), RunFingerprint(b));
  v1::RunConfig c = a;
  c.set_layer_sizes(5, 11);
  EXPECT_NE(RunFingerprint(a), RunFingerprint(c));
}

TEST(DiffRunConfigsTest, EmptyForEqualConfigs) { EXPECT_EQ(DiffRunConfigs(Example(), Example()), ""); }

TEST(DiffRunConfigsTest, NamesEachDifferingFieldWithBothValues) {
  v1::RunConfig worker = Example();
  worker.set_scheme("topk_ps");
  worker.set_learning_rate(0.05);
  const std::string diff = DiffRunConfigs(Example(), worker);
  EXPECT_EQ(diff,
            "scheme: job has \"sketch_ps\", worker has \"topk_ps\"; "
            "learning_rate: job has 0.1, worker has 0.05");
}

TEST(DiffRunConfigsTest, RepeatedFieldsShowLengthAndFirstDifference) {
  v1::RunConfig worker = Example();
  worker.set_layer_sizes(2, 99);
  std::string diff = DiffRunConfigs(Example(), worker);
  EXPECT_NE(diff.find("layer_sizes: job has 6 values"), std::string::npos) << diff;
  EXPECT_NE(diff.find("first difference at [2]: 32768 vs 99"), std::string::npos) << diff;

  worker = Example();
  worker.add_layer_sizes(1);
  diff = DiffRunConfigs(Example(), worker);
  EXPECT_NE(diff.find("worker has 7 values"), std::string::npos) << diff;
}

// A worker with valid credentials may send a run whose string field holds
// a megabyte: the diff quotes a short prefix of it and its length, never the
// whole (issue 34's hostile Join).
TEST(DiffRunConfigsTest, QuotesOnlyAShortPrefixOfAHugeField) {
  v1::RunConfig worker = Example();
  worker.set_compressor(std::string(1 << 20, 'x'));
  const std::string diff = DiffRunConfigs(Example(), worker);
  EXPECT_LT(diff.size(), 400u) << diff.size();
  EXPECT_NE(diff.find("compressor: job has \"count_sketch:density=0.01\", worker has \"xxxx"), std::string::npos)
      << diff;
  EXPECT_NE(diff.find("(1048578 bytes)"), std::string::npos) << diff;  // with text format's quotes
}

}  // namespace
}  // namespace sketchfuse
