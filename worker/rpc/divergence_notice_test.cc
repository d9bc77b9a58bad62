// The job-wide divergence notice over an in-process key-value store: Check
// sees what Post wrote (and nothing of another run's key), and Watch calls
// back once with the posted divergence.
#include "worker/rpc/divergence_notice.h"

#include <future>
#include <limits>

#include "gtest/gtest.h"

namespace sketchfuse {
namespace {

Divergence Example() {
  Divergence d;
  d.step = 8;
  d.group = 2;
  d.worker = "worker-1";
  d.what = "gradient";
  d.index = 41;
  d.value = std::numeric_limits<double>::infinity();
  return d;
}

TEST(DivergenceNoticeTest, CheckSeesWhatAWorkerOfTheSameRunPosted) {
  InMemoryKeyValueStore store;
  DivergenceNotice mine(&store, "diverged/run-a"), other_run(&store, "diverged/run-b");
  EXPECT_FALSE(mine.Check().has_value());
  ASSERT_TRUE(other_run.Post(Example()).ok());
  EXPECT_FALSE(mine.Check().has_value());
  DivergenceNotice peer(&store, "diverged/run-a");
  ASSERT_TRUE(peer.Post(Example()).ok());
  const std::optional<Divergence> seen = mine.Check();
  ASSERT_TRUE(seen.has_value());
  EXPECT_EQ(*seen, Example());
}

TEST(DivergenceNoticeTest, SomethingThatIsNotARecordIsNoNotice) {
  InMemoryKeyValueStore store;
  ASSERT_TRUE(store.Set("diverged/run-a", "garbage").ok());
  EXPECT_FALSE(DivergenceNotice(&store, "diverged/run-a").Check().has_value());
}

TEST(DivergenceNoticeTest, WatchCallsBackOnceWithThePostedDivergence) {
  InMemoryKeyValueStore store;
  std::promise<Divergence> seen;
  int calls = 0;
  {
    DivergenceNotice watcher(&store, "diverged/run-a");
    watcher.Watch(absl::Milliseconds(5), [&](const Divergence& d) {
      ++calls;
      seen.set_value(d);
    });
    ASSERT_TRUE(DivergenceNotice(&store, "diverged/run-a").Post(Example()).ok());
    EXPECT_EQ(seen.get_future().get(), Example());
  }  // the watch ended after its callback: destruction returns
  EXPECT_EQ(calls, 1);
}

TEST(DivergenceNoticeTest, DestroyingAnIdleWatchEndsIt) {
  InMemoryKeyValueStore store;
  bool called = false;
  {
    DivergenceNotice watcher(&store, "diverged/run-a");
    watcher.Watch(absl::Hours(1), [&](const Divergence&) { called = true; });
  }
  EXPECT_FALSE(called);
}

}  // namespace
}  // namespace sketchfuse
