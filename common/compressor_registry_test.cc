// The registry: spec parsing, creation by name, and refusal of bad names and
// parameters with messages that name them.
#include "common/compressor_registry.h"

#include "gtest/gtest.h"

namespace sketchfuse {
namespace {

void ExpectRefused(absl::string_view spec, absl::string_view needle) {
  absl::StatusOr<std::unique_ptr<Compressor>> c = CompressorRegistry::Default().Create(spec);
  ASSERT_FALSE(c.ok()) << spec;
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument) << c.status();
  EXPECT_NE(c.status().message().find(needle), absl::string_view::npos)
      << spec << " -> " << c.status();
}

TEST(CompressorSpecTest, ParsesAndPrints) {
  absl::StatusOr<CompressorSpec> spec = ParseCompressorSpec("count_sketch:rows=3,density=0.01");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->name, "count_sketch");
  EXPECT_EQ(spec->params.at("rows"), "3");
  EXPECT_EQ(spec->ToString(), "count_sketch:density=0.01,rows=3");
  EXPECT_TRUE(ParseCompressorSpec("dense").ok());
}

TEST(CompressorSpecTest, RejectsMalformedSpecs) {
  EXPECT_FALSE(ParseCompressorSpec("").ok());
  EXPECT_FALSE(ParseCompressorSpec(":rows=3").ok());
  EXPECT_FALSE(ParseCompressorSpec("topk:density").ok());
  EXPECT_FALSE(ParseCompressorSpec("topk:=3").ok());
  EXPECT_FALSE(ParseCompressorSpec("topk:k=").ok());
  EXPECT_FALSE(ParseCompressorSpec("topk:k=1,k=2").ok());
  EXPECT_FALSE(ParseCompressorSpec("topk:").ok());
}

TEST(CompressorRegistryTest, CreatesEveryBuiltin) {
  const std::vector<std::string> names = CompressorRegistry::Default().Names();
  EXPECT_EQ(names, (std::vector<std::string>{"count_sketch", "dense", "importance", "powersgd",
                                             "randomk", "threshold", "topk"}));
  for (const std::string& name : names) {
    absl::StatusOr<std::unique_ptr<Compressor>> c = CompressorRegistry::Default().Create(name);
    ASSERT_TRUE(c.ok()) << name << ": " << c.status();
    // The canonical spec recreates an equal compressor.
    absl::StatusOr<std::unique_ptr<Compressor>> again =
        CompressorRegistry::Default().Create((*c)->spec());
    ASSERT_TRUE(again.ok()) << (*c)->spec() << ": " << again.status();
    EXPECT_EQ((*again)->spec(), (*c)->spec());
  }
}

TEST(CompressorRegistryTest, RefusesBadNamesAndParameters) {
  ExpectRefused("countsketch", "unknown compressor 'countsketch' (known: count_sketch, dense");
  ExpectRefused("topk:rows=5", "unknown parameter 'rows' (accepted: density, k)");
  ExpectRefused("dense:k=5", "unknown parameter 'k'");
  ExpectRefused("topk:density=0", "density=0 is outside");
  ExpectRefused("topk:density=1.5", "outside");
  ExpectRefused("topk:density=abc", "'abc' is not a number");
  ExpectRefused("topk:density=nan", "is not a number");
  ExpectRefused("topk:k=-4", "is not a non-negative integer");
  ExpectRefused("topk:k=0", "k=0 is outside");
  ExpectRefused("topk:k=10,density=0.1", "density or k, not both");
  ExpectRefused("count_sketch:method=estimate,rows=0", "rows=0 is outside [1, 64]");
  ExpectRefused("count_sketch:rows=1", "rows=1 is outside [2, 64] (method=peel needs at least 2 rows)");
  ExpectRefused("count_sketch:rows=65", "outside");
  ExpectRefused("count_sketch:width=10,cols=100", "one of workers, width and cols");
  ExpectRefused("count_sketch:workers=8,width=4", "one of workers, width and cols");
  ExpectRefused("count_sketch:method=estimate,workers=8", "workers is a parameter of method=peel");
  ExpectRefused("count_sketch:candidates=2", "candidates is a parameter of method=candidates");
  ExpectRefused("count_sketch:method=candidates,candidates=0", "candidates=0 is outside [1, 64]");
  ExpectRefused("count_sketch:method=candidates,candidates=65", "outside");
  ExpectRefused("count_sketch:method=candidates,workers=4", "workers is a parameter of method=peel");
  ExpectRefused("count_sketch:hash=job", "hash is a parameter of method=candidates");
  ExpectRefused("count_sketch:method=estimate,hash=step", "hash is a parameter of method=candidates");
  ExpectRefused("count_sketch:method=candidates,hash=row", "hash='row' is not one of job, step");
  ExpectRefused("count_sketch:table=bf16", "table is a parameter of method=candidates");
  ExpectRefused("count_sketch:method=candidates,table=f16", "table='f16' is not one of f32, bf16");
  ExpectRefused("count_sketch:workers=0", "workers");
  ExpectRefused("count_sketch:workers=-3", "workers");
  ExpectRefused("count_sketch:cols=999999999999", "outside");
  ExpectRefused("threshold:sample=0", "outside");
  ExpectRefused("importance:epsilon=-1", "outside");
  ExpectRefused("randomk:seed=x", "not a non-negative integer");
}

TEST(CompressorRegistryTest, RegisterRefusesDuplicatesAndEmptyNames) {
  CompressorRegistry registry;
  auto factory = [](ParamReader&) -> absl::StatusOr<std::unique_ptr<Compressor>> {
    return absl::UnimplementedError("not used");
  };
  EXPECT_TRUE(registry.Register("mine", "test", factory).ok());
  EXPECT_EQ(registry.Register("mine", "test", factory).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(registry.Register("", "test", factory).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(CompressorRegistry::Default().Describe().find("count_sketch: Count-Sketch"),
            std::string::npos);
}

}  // namespace
}  // namespace sketchfuse
