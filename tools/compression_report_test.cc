// The report on a small model profile (ResNet-50 at a tiny density is still
// 25M elements, so the test uses the real profile with two fast compressors
// and checks the invariants that must hold for any gradient).
#include "tools/compression_report.h"

#include "gtest/gtest.h"

namespace sketchfuse {
namespace {

TEST(CompressionReportTest, RowsSatisfyTheirInvariants) {
  ReportOptions options;
  options.compressors = {"dense", "topk", "count_sketch:width=20"};
  options.density = 0.01;
  options.fusion = "8";
  absl::StatusOr<std::vector<ReportRow>> rows = RunCompressionReport(options, nullptr);
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 3u);
  const ReportRow& dense = (*rows)[0];
  EXPECT_EQ(dense.groups, 8);
  EXPECT_DOUBLE_EQ(dense.ratio, 1.0);
  EXPECT_NEAR(dense.mass_share, 1.0, 1e-9);
  const ReportRow& topk = (*rows)[1];
  // Per-group top-k keeps at most what the global top-k of as many keeps.
  EXPECT_LE(topk.vs_topk, 1.0 + 1e-12);
  EXPECT_GT(topk.vs_topk, 0.5);
  EXPECT_NEAR(topk.ratio, 1.0 / (2 * 0.01), 1.0);  // 8 bytes per kept element
  const ReportRow& sketch = (*rows)[2];
  EXPECT_GT(sketch.vs_topk, 0.3);
  EXPECT_LE(sketch.vs_topk, 1.0 + 1e-12);
  for (const ReportRow& r : *rows) {
    EXPECT_GE(r.per_layer_step_ms, 0);
    EXPECT_GT(r.step_ms, 0);
  }
  const std::string json = ReportJson(options, *rows);
  EXPECT_NE(json.find("\"compressor\": \"topk:density=0.01\""), std::string::npos) << json;
  EXPECT_EQ(ReportCsv(*rows).find("compressor,groups"), 0u);
  EXPECT_NE(FormatReportTable(*rows).find("count_sketch"), std::string::npos);
}

TEST(CompressionReportTest, OptimalFusionIsNoSlowerThanPerLayerInTheModel) {
  ReportOptions options;
  options.compressors = {"topk"};
  absl::StatusOr<std::vector<ReportRow>> rows = RunCompressionReport(options, nullptr);
  ASSERT_TRUE(rows.ok()) << rows.status();
  EXPECT_LE((*rows)[0].step_ms, (*rows)[0].per_layer_step_ms * (1 + 1e-9));
}

TEST(CompressionReportTest, RefusesBadOptionsBeforeWorking) {
  ReportOptions options;
  options.model = "resnet51";
  EXPECT_EQ(RunCompressionReport(options, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
  options = ReportOptions();
  options.compressors = {"topk", "sketchy"};
  absl::Status s = RunCompressionReport(options, nullptr).status();
  EXPECT_NE(s.message().find("unknown compressor 'sketchy'"), std::string::npos) << s;
  options = ReportOptions();
  options.fusion = "bogus";
  EXPECT_EQ(RunCompressionReport(options, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
  for (double bad : {0.0, -1.0, 2.0}) {
    options = ReportOptions();
    options.density = bad;
    EXPECT_EQ(ValidateReportOptions(options).code(), absl::StatusCode::kInvalidArgument);
  }
  options = ReportOptions();
  options.link_gbps = 0;
  EXPECT_EQ(ValidateReportOptions(options).code(), absl::StatusCode::kInvalidArgument);
  options = ReportOptions();
  options.compressors = {};
  EXPECT_EQ(ValidateReportOptions(options).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace sketchfuse
