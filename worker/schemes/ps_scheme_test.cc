// The centralized scheme against a shard that answers a candidate list
// (indices without values) where it owes the update: the worker refuses it
// with DATA_LOSS instead of applying it. A list is what the first round of
// a two-round group answers, and there it starts the second round.
#include "worker/schemes/ps_scheme.h"

#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "worker/schemes/scheme_registry.h"

namespace sketchfuse {
namespace {

constexpr uint64_t kDim = 600;

// A shard whose every answer lists the indices 0, 10, 20, ... with no
// values, or, for a second round, sums them as the values it was sent. It
// stands for a shard that is wrong (or hostile), which no real shard is.
class ListingShard final : public PsTransport {
 public:
  int num_shards() const override { return 1; }
  absl::Status ProbeShards(absl::Duration) const override { return absl::OkStatus(); }
  void Reconnect() override {}
  uint64_t injected_faults() const override { return 0; }
  uint64_t retries() const override { return 0; }
  int* second_rounds = nullptr;  // counts the second-round pushes

 protected:
  void Send(PushTarget target, std::shared_ptr<const Payload> payload, PushDone done) override {
    PushOutcome outcome;
    outcome.update.dim = kDim;
    for (uint32_t i = 0; i < kDim; i += 10) outcome.update.indices.push_back(i);
    if (target.round == 1) {
      ++*second_rounds;
      if (payload->values.size() != outcome.update.indices.size()) {
        done(absl::InvalidArgumentError("wrong count"));
        return;
      }
      if (!lists_second_round_) outcome.update.values = payload->values;
    }
    done(std::move(outcome));
  }

 public:
  bool lists_second_round_ = false;
};

v1::JoinReply Joined(const std::string& scheme) {
  v1::JoinReply joined;
  joined.set_rank(0);
  joined.set_world_size(2);
  v1::JobConfig* job = joined.mutable_job();
  job->set_job("listing");
  job->set_world_size(2);
  v1::RunConfig* run = job->mutable_run();
  run->set_scheme(scheme);
  run->set_compressor(FindScheme(scheme)->default_compressor_spec);
  run->set_error_feedback(true);
  run->set_second_round(SecondRoundFor(scheme, false));
  v1::GroupConfig* group = job->add_groups();
  group->set_group(0);
  group->set_dim(kDim);
  group->set_compressor(run->compressor());
  joined.add_shard_of_group(0);
  joined.add_shards()->set_address("listing:0");
  return joined;
}

absl::StatusOr<ExchangeResult> ExchangeOnce(const std::string& scheme, int* second_rounds, bool list_second) {
  absl::StatusOr<std::unique_ptr<PsScheme>> ps =
      PsScheme::Create(Joined(scheme), [second_rounds, list_second](const std::vector<std::string>&) {
        auto transport = std::make_unique<ListingShard>();
        transport->lists_second_round_ = list_second;
        transport->second_rounds = second_rounds;
        return transport;
      });
  if (!ps.ok()) return ps.status();
  std::vector<float> grad(kDim);
  for (uint64_t i = 0; i < kDim; ++i) grad[i] = static_cast<float>(i % 7) - 3.0f;
  absl::StatusOr<ExchangeResult> result = absl::UnknownError("not answered");
  (*ps)->Exchange(0, 0, GradientView(grad), {}, [&](absl::StatusOr<ExchangeResult> r) { result = std::move(r); });
  return result;
}

TEST(PsSchemeTest, ACandidateListWhereTheUpdateIsDueIsRefused) {
  int second_rounds = 0;
  // One round: the list is the final answer.
  absl::StatusOr<ExchangeResult> one = ExchangeOnce("sketch_ps", &second_rounds, false);
  EXPECT_EQ(one.status().code(), absl::StatusCode::kDataLoss) << one.status();
  EXPECT_NE(one.status().message().find("60 candidates without values where the update was due"), std::string::npos)
      << one.status();
  // Two rounds: the first answer's list starts the second round, whose
  // answer carries the sums.
  absl::StatusOr<ExchangeResult> two = ExchangeOnce("fixed_sketch_ps", &second_rounds, false);
  ASSERT_TRUE(two.ok()) << two.status();
  EXPECT_EQ(second_rounds, 1);
  EXPECT_EQ(two->update.indices.size(), 60u);
  EXPECT_EQ(two->update.values.size(), 60u);
  // A list as the second round's answer is refused too.
  absl::StatusOr<ExchangeResult> listed = ExchangeOnce("fixed_sketch_ps", &second_rounds, true);
  EXPECT_EQ(listed.status().code(), absl::StatusCode::kDataLoss) << listed.status();
}

}  // namespace
}  // namespace sketchfuse
