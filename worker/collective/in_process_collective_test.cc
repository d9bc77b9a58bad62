// The in-process collective against the Gloo backend it stands in for: the
// same operations on the same inputs give the same bits and count the same
// bytes, for groups of 1 to 5 ranks and sizes across Gloo's segmenting
// (0 to several 1 MiB segments per rank). Also: the ring order matters (a
// sum in rank order differs), operations called in different orders are
// refused, and a rank that never arrives fails the others in time.
#include "worker/collective/in_process_collective.h"

#include <thread>

#include "common/test_vectors.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/collective/local_group.h"

namespace sketchfuse {
namespace {

using ::testing::HasSubstr;

struct RankRecord {
  std::vector<float> reduced;
  std::vector<float> gathered;
  std::vector<uint32_t> gathered_words;
  std::vector<size_t> counts;
  std::vector<float> broadcast;
  std::string received;
  uint64_t bytes_sent = 0, bytes_received = 0;
};

// Every operation once, on rank c.rank()'s inputs for element count n.
absl::Status RunEveryOperation(Collective& c, size_t n, RankRecord* record) {
  const int r = c.rank(), size = c.size();
  record->reduced = GaussianVector(n, 100 + r, 1.0f + r);
  if (absl::Status s = c.AllReduceSum(absl::MakeSpan(record->reduced)); !s.ok()) return s;
  const std::vector<float> mine = GaussianVector(r == 1 ? 0 : n / 3 + r, 200 + r);
  if (absl::Status s = c.AllGatherV(absl::MakeConstSpan(mine), &record->gathered, &record->counts); !s.ok()) return s;
  std::vector<uint32_t> words(r + 2, 7u * r);
  std::vector<size_t> word_counts;
  if (absl::Status s = c.AllGatherV(absl::MakeConstSpan(words), &record->gathered_words, &word_counts); !s.ok()) {
    return s;
  }
  record->broadcast = GaussianVector(n / 2 + 1, r == size - 1 ? 300 : 301 + r);
  if (absl::Status s = c.Broadcast(absl::MakeSpan(record->broadcast), size - 1); !s.ok()) return s;
  if (absl::Status s = c.Barrier(); !s.ok()) return s;
  if (size > 1) {
    absl::StatusOr<std::string> got =
        c.SendRecv(std::string(10 * r + 3, 'a' + r), (r + 1) % size, (r + size - 1) % size, 5);
    if (!got.ok()) return got.status();
    record->received = *got;
  }
  record->bytes_sent = c.bytes_sent();
  record->bytes_received = c.bytes_received();
  return absl::OkStatus();
}

std::vector<absl::Status> RunOnInProcessGroup(int size, const std::function<absl::Status(Collective&)>& fn,
                                              absl::Duration timeout = absl::Seconds(30)) {
  InProcessGroup group(size, timeout);
  std::vector<std::unique_ptr<Collective>> ranks;
  for (int r = 0; r < size; ++r) ranks.push_back(group.Rank(r));
  std::vector<absl::Status> statuses(size);
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) threads.emplace_back([&, r] { statuses[r] = fn(*ranks[r]); });
  for (std::thread& t : threads) t.join();
  return statuses;
}

class InProcessGroupTest : public ::testing::TestWithParam<int> {};

TEST_P(InProcessGroupTest, GivesGloosBitsAndBytes) {
  const int size = GetParam();
  // Below and above the group size, one segment per rank, and (at 700001
  // floats, 2.8 MB) several Gloo segments for the small groups.
  for (size_t n : {size_t{0}, size_t{1}, size_t{7}, size_t{1000}, size_t{300001}, size_t{700001}}) {
    std::vector<RankRecord> gloo(size), in_process(size);
    for (const absl::Status& s :
         RunOnLocalGlooGroup(size, [&](Collective& c) { return RunEveryOperation(c, n, &gloo[c.rank()]); })) {
      ASSERT_TRUE(s.ok()) << s;
    }
    for (const absl::Status& s :
         RunOnInProcessGroup(size, [&](Collective& c) { return RunEveryOperation(c, n, &in_process[c.rank()]); })) {
      ASSERT_TRUE(s.ok()) << s;
    }
    for (int r = 0; r < size; ++r) {
      SCOPED_TRACE(testing::Message() << size << " ranks, n " << n << ", rank " << r);
      // Bit for bit: the same float sums in the same order.
      ASSERT_EQ(in_process[r].reduced.size(), gloo[r].reduced.size());
      EXPECT_EQ(0, std::memcmp(in_process[r].reduced.data(), gloo[r].reduced.data(), n * sizeof(float)));
      EXPECT_EQ(in_process[r].gathered, gloo[r].gathered);
      EXPECT_EQ(in_process[r].gathered_words, gloo[r].gathered_words);
      EXPECT_EQ(in_process[r].counts, gloo[r].counts);
      EXPECT_EQ(in_process[r].broadcast, gloo[r].broadcast);
      EXPECT_EQ(in_process[r].received, gloo[r].received);
      EXPECT_EQ(in_process[r].bytes_sent, gloo[r].bytes_sent);
      EXPECT_EQ(in_process[r].bytes_received, gloo[r].bytes_received);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Sizes, InProcessGroupTest, ::testing::Values(1, 2, 3, 4, 5));

TEST(InProcessGroupTest, TheRingOrderIsNotTheRankOrder) {
  // Values whose float sum depends on the order: if AllReduceSum added in
  // rank order, it would not match Gloo above.
  const int size = 4;
  const size_t n = 4096;
  std::vector<std::vector<float>> inputs;
  for (int r = 0; r < size; ++r) inputs.push_back(GaussianVector(n, 7 + r, r % 2 == 0 ? 1e6f : 1e-3f));
  std::vector<float> ring(n);
  RunOnInProcessGroup(size, [&](Collective& c) {
    std::vector<float> data = inputs[c.rank()];
    absl::Status s = c.AllReduceSum(absl::MakeSpan(data));
    if (c.rank() == 0) ring = data;
    return s;
  });
  int differ = 0;
  for (size_t i = 0; i < n; ++i) {
    float rank_order = inputs[0][i];
    for (int r = 1; r < size; ++r) rank_order += inputs[r][i];
    differ += rank_order != ring[i];
  }
  EXPECT_GT(differ, 0);
  // And the chunks follow Gloo's: two segments per rank here, so chunk c is
  // the c-th quarter.
  EXPECT_EQ(RingChunkOf(0, n, size), 0);
  EXPECT_EQ(RingChunkOf(n / 4 - 1, n, size), 0);
  EXPECT_EQ(RingChunkOf(n / 4, n, size), 1);
  EXPECT_EQ(RingChunkOf(n - 1, n, size), 3);
}

TEST(InProcessGroupTest, OperationsInDifferentOrdersAreRefused) {
  std::vector<absl::Status> statuses = RunOnInProcessGroup(
      2,
      [](Collective& c) {
        std::vector<float> data(4, 1.0f);
        if (c.rank() == 0) return c.AllReduceSum(absl::MakeSpan(data));
        return c.Barrier();
      },
      absl::Seconds(2));
  int refused = 0;
  for (const absl::Status& s : statuses) {
    if (absl::IsFailedPrecondition(s)) {
      ++refused;
      EXPECT_THAT(s.message(), HasSubstr("orders differ"));
    }
  }
  EXPECT_EQ(refused, 1);  // the second to arrive; the first then times out
}

TEST(InProcessGroupTest, ARankThatNeverArrivesFailsTheOthersInTime) {
  InProcessGroup group(3, absl::Milliseconds(200));
  std::unique_ptr<Collective> rank0 = group.Rank(0);
  std::vector<float> data(8, 1.0f);
  absl::Status s = rank0->AllReduceSum(absl::MakeSpan(data));
  EXPECT_TRUE(absl::IsDeadlineExceeded(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("2 ranks did not arrive"));
  // The group stays failed: a late rank does not read a dead input.
  std::unique_ptr<Collective> rank1 = group.Rank(1);
  EXPECT_TRUE(absl::IsDeadlineExceeded(rank1->AllReduceSum(absl::MakeSpan(data))));
}

TEST(InProcessGroupTest, AbortReleasesAWaitingRank) {
  InProcessGroup group(2, absl::Seconds(60));
  std::unique_ptr<Collective> rank0 = group.Rank(0);
  absl::Status got;
  std::thread waiter([&] {
    std::vector<float> data(8, 1.0f);
    got = rank0->AllReduceSum(absl::MakeSpan(data));
  });
  group.Abort(absl::CancelledError("virtual worker 1 stopped"));
  waiter.join();
  EXPECT_TRUE(absl::IsCancelled(got)) << got;
  EXPECT_THAT(got.message(), HasSubstr("virtual worker 1 stopped"));
}

TEST(InProcessGroupTest, BadArgumentsAreRefused) {
  InProcessGroup group(2, absl::Seconds(1));
  std::unique_ptr<Collective> rank0 = group.Rank(0);
  std::vector<float> data(2);
  EXPECT_TRUE(absl::IsInvalidArgument(rank0->Broadcast(absl::MakeSpan(data), 2)));
  EXPECT_TRUE(absl::IsInvalidArgument(rank0->Send("x", 0, 1)));
  EXPECT_TRUE(absl::IsInvalidArgument(rank0->Recv(-1, 1).status()));
  EXPECT_EQ(rank0->backend(), "in_process");
}

}  // namespace
}  // namespace sketchfuse
