// The fault spec of --inject_faults: parsed, refused by name when malformed,
// and drawn with the stated frequencies.
#include "worker/rpc/transport_faults.h"

#include <map>

#include "gtest/gtest.h"

namespace sketchfuse {
namespace {

TEST(TransportFaultsTest, ParsesEveryFault) {
  absl::StatusOr<TransportFaults> faults =
      ParseTransportFaults("fail_before_send=0.1,drop_reply=0.2,delay=0.3:20ms,seed=9");
  ASSERT_TRUE(faults.ok()) << faults.status();
  EXPECT_EQ(faults->fail_before_send, 0.1);
  EXPECT_EQ(faults->drop_reply, 0.2);
  EXPECT_EQ(faults->delay, 0.3);
  EXPECT_EQ(faults->delay_time, absl::Milliseconds(20));
  EXPECT_EQ(faults->seed, 9u);
  EXPECT_TRUE(faults->any());
  absl::StatusOr<TransportFaults> none = ParseTransportFaults("");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->any());
}

TEST(TransportFaultsTest, RefusesMalformedSpecsByName) {
  const std::map<std::string, std::string> refusals = {
      {"drop", "fault spec part 'drop' is not key=value"},
      {"explode=0.1", "unknown fault 'explode'; the faults are fail_before_send, drop_reply, delay and seed"},
      {"drop_reply=1.5", "fault 'drop_reply': '1.5' is not a probability in [0, 1]"},
      {"fail_before_send=x", "fault 'fail_before_send': 'x' is not a probability in [0, 1]"},
      {"delay=0.1", "fault 'delay': '0.1' is not P:DURATION (e.g. 0.1:20ms)"},
      {"delay=0.1:soon", "fault 'delay': 'soon' is not a duration in [0, 1m] (e.g. 20ms)"},
      {"seed=-1", "fault 'seed': '-1' is not an unsigned integer"},
      {"drop_reply=0.6,fail_before_send=0.6", "the fault probabilities add up to more than 1"},
  };
  for (const auto& [spec, message] : refusals) {
    absl::StatusOr<TransportFaults> faults = ParseTransportFaults(spec);
    EXPECT_EQ(faults.status().code(), absl::StatusCode::kInvalidArgument) << spec;
    EXPECT_EQ(faults.status().message(), message) << spec;
  }
}

TEST(TransportFaultsTest, DrawsEachFaultAboutAsOftenAsAsked) {
  FaultDice dice(*ParseTransportFaults("fail_before_send=0.1,drop_reply=0.2,delay=0.3:1ms,seed=4"));
  std::map<FaultDice::Fault, int> counts;
  const int n = 100000;
  for (int i = 0; i < n; ++i) ++counts[dice.Draw()];
  // Binomial standard deviations are below 0.0016 of n; allow 0.01.
  EXPECT_NEAR(counts[FaultDice::Fault::kFailBeforeSend] / double(n), 0.1, 0.01);
  EXPECT_NEAR(counts[FaultDice::Fault::kDropReply] / double(n), 0.2, 0.01);
  EXPECT_NEAR(counts[FaultDice::Fault::kDelay] / double(n), 0.3, 0.01);
  EXPECT_NEAR(counts[FaultDice::Fault::kNone] / double(n), 0.4, 0.01);
  FaultDice none(TransportFaults{});
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(none.Draw(), FaultDice::Fault::kNone);
}

}  // namespace
}  // namespace sketchfuse
