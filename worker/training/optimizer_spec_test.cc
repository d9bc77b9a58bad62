// The optimizer spec: its defaults, its canonical form (what workers agree
// on), and every malformed spec refused naming the problem.
#include "worker/training/optimizer_spec.h"

#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sketchfuse {
namespace {

using ::testing::HasSubstr;

TEST(OptimizerSpecTest, SgdIsTheEmptySpec) {
  for (const char* text : {"", "sgd"}) {
    absl::StatusOr<OptimizerSpec> spec = ParseOptimizerSpec(text);
    ASSERT_TRUE(spec.ok()) << spec.status();
    EXPECT_EQ(spec->kind, OptimizerSpec::Kind::kSgd);
    EXPECT_FALSE(spec->adam_family());
    EXPECT_EQ(spec->Canonical(), "") << "a job file without the field is an SGD run";
    EXPECT_EQ(spec->name(), "sgd");
  }
}

TEST(OptimizerSpecTest, TheAdamFamilyHasTorchsDefaultsAndACanonicalFormThatParsesBack) {
  absl::StatusOr<OptimizerSpec> adam = ParseOptimizerSpec("adam");
  ASSERT_TRUE(adam.ok());
  EXPECT_EQ(adam->beta1, 0.9);
  EXPECT_EQ(adam->beta2, 0.999);
  EXPECT_EQ(adam->eps, 1e-8);
  EXPECT_EQ(adam->weight_decay, 0);
  absl::StatusOr<OptimizerSpec> adamw = ParseOptimizerSpec("adamw:beta2=0.95,weight_decay=0.1");
  ASSERT_TRUE(adamw.ok());
  EXPECT_EQ(adamw->kind, OptimizerSpec::Kind::kAdamW);
  EXPECT_EQ(adamw->beta2, 0.95);
  EXPECT_EQ(adamw->weight_decay, 0.1);
  EXPECT_EQ(ParseOptimizerSpec("adamw")->weight_decay, 0.01) << "torch.optim.AdamW's default";
  for (const OptimizerSpec& spec : {*adam, *adamw}) {
    const std::string canonical = spec.Canonical();
    absl::StatusOr<OptimizerSpec> back = ParseOptimizerSpec(canonical);
    ASSERT_TRUE(back.ok()) << canonical;
    EXPECT_EQ(back->Canonical(), canonical);
    EXPECT_EQ(back->beta1, spec.beta1);
    EXPECT_EQ(back->beta2, spec.beta2);
    EXPECT_EQ(back->eps, spec.eps);
    EXPECT_EQ(back->weight_decay, spec.weight_decay);
  }
  // Two spellings of one optimizer agree once canonical.
  EXPECT_EQ(ParseOptimizerSpec("adamw:weight_decay=0.1,beta2=0.95")->Canonical(), adamw->Canonical());
}

TEST(OptimizerSpecTest, TheRunsOptimizerIsRead) {
  v1::RunConfig run;
  EXPECT_FALSE(IsAdamFamily(run));
  run.set_optimizer(ParseOptimizerSpec("adamw")->Canonical());
  EXPECT_TRUE(IsAdamFamily(run));
  EXPECT_EQ(OptimizerOf(run).name(), "adamw");
}

TEST(OptimizerSpecTest, MalformedSpecsAreRefusedByName) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"lion", "optimizer: unknown optimizer 'lion'; known: sgd, adam, adamw"},
      {"sgd:momentum=0.9", "optimizer: sgd takes no parameters: its momentum is --momentum"},
      {"adam:gamma=1", "gamma"},
      {"adam:beta1=1", "beta1 and beta2 must be below 1"},
      {"adam:beta2=1.5", "beta2=1.5 is outside [0, 1]"},
      {"adamw:beta1=-0.1", "beta1=-0.1 is outside"},
      {"adam:eps=0", "eps must be above 0"},
      {"adam:eps=nan", "eps='nan' is not a number"},
      {"adamw:weight_decay=inf", "weight_decay='inf' is not a number"},
      {"adamw:weight_decay=11", "weight_decay=11 is outside [0, 10]"},
      {"adam:beta1", "optimizer: "},
      {"adam:beta1=0.9,beta1=0.8", "optimizer: "},
      {std::string(100000, 'a'), "is longer than 256 bytes"},
      {"adam:eps=" + std::string(100000, '1'), "is longer than 256 bytes"},
  };
  for (const auto& [text, expected] : cases) {
    absl::StatusOr<OptimizerSpec> spec = ParseOptimizerSpec(text);
    ASSERT_FALSE(spec.ok()) << text;
    EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_THAT(std::string(spec.status().message()), HasSubstr(expected)) << text.substr(0, 40);
    EXPECT_LT(spec.status().message().size(), 400u) << "a huge spec is not echoed whole";
  }
}

}  // namespace
}  // namespace sketchfuse
