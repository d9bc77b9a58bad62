// The settings --virtual_workers builds from the daemon's flags: the limit
// the in-process shards' rounds get.
#include "worker/worker_flags.h"

#include <cstdint>
#include <limits>

#include "absl/flags/flag.h"
#include "absl/flags/reflection.h"
#include "gtest/gtest.h"
#include "proto/job_config.pb.h"

namespace sketchfuse {
namespace {

// The run a virtual job of 4 workers would be handed; these tests look only
// at the job's settings, not at the run.
v1::RunConfig FourWorkers() {
  absl::SetFlag(&FLAGS_virtual_workers, 4);
  absl::StatusOr<v1::RunConfig> run = RunFromFlags();
  EXPECT_TRUE(run.ok()) << run.status();
  return run.ok() ? *run : v1::RunConfig();
}

TEST(VirtualWorkersConfigFromFlags, TheShardsRoundsWaitAsLongAsTheCollectives) {
  absl::FlagSaver saver;
  absl::SetFlag(&FLAGS_collective_timeout_s, 3600);
  absl::StatusOr<VirtualWorkersConfig> config = VirtualWorkersConfigFromFlags(FourWorkers());
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->collective_timeout, absl::Hours(1));
  EXPECT_EQ(config->round_deadline_ms, 3600u * 1000u);
}

TEST(VirtualWorkersConfigFromFlags, TheDefaultLimitIsTheCollectivesDefault) {
  absl::FlagSaver saver;
  absl::StatusOr<VirtualWorkersConfig> config = VirtualWorkersConfigFromFlags(FourWorkers());
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->round_deadline_ms, 120u * 1000u);
}

TEST(VirtualWorkersConfigFromFlags, ALimitBeyondTheDeadlinesRangeIsClamped) {
  absl::FlagSaver saver;
  absl::SetFlag(&FLAGS_collective_timeout_s, std::numeric_limits<int>::max());
  absl::StatusOr<VirtualWorkersConfig> config = VirtualWorkersConfigFromFlags(FourWorkers());
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->round_deadline_ms, std::numeric_limits<uint32_t>::max());
}

TEST(VirtualWorkersConfigFromFlags, AZeroLimitIsRefusedByName) {
  absl::FlagSaver saver;
  absl::SetFlag(&FLAGS_collective_timeout_s, 0);
  absl::StatusOr<VirtualWorkersConfig> config = VirtualWorkersConfigFromFlags(FourWorkers());
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.status().message().find("--collective_timeout_s must be >= 1"), std::string::npos);
}

}  // namespace
}  // namespace sketchfuse
