// The Gloo backend on real groups of 1 to 5 ranks (threads of this process
// with real TCP connections on loopback): every collective against a direct
// computation, identical results on every rank, point-to-point messages
// matched by tag, bytes counted as the algorithms send them, and refusals
// of bad arguments and of a rendezvous that cannot complete.
#include "worker/collective/gloo_collective.h"

#include <cmath>
#include <mutex>

#include "common/test_vectors.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/collective/local_group.h"

namespace sketchfuse {
namespace {

using ::testing::HasSubstr;

void ExpectAllOk(const std::vector<absl::Status>& statuses) {
  for (size_t r = 0; r < statuses.size(); ++r) EXPECT_TRUE(statuses[r].ok()) << "rank " << r << ": " << statuses[r];
}

class GlooGroupTest : public ::testing::TestWithParam<int> {};

TEST_P(GlooGroupTest, AllReduceSumIsTheSumAndIdenticalOnEveryRank) {
  const int size = GetParam();
  // Sizes below, at and above the group size and Gloo's 1 MiB segment.
  for (size_t n : {size_t{0}, size_t{1}, size_t{7}, size_t{1000}, size_t{300001}}) {
    std::vector<std::vector<float>> inputs, outputs(size);
    for (int r = 0; r < size; ++r) inputs.push_back(GaussianVector(n, 100 + r));
    ExpectAllOk(RunOnLocalGlooGroup(size, [&](Collective& c) {
      std::vector<float> data = inputs[c.rank()];
      absl::Status s = c.AllReduceSum(absl::MakeSpan(data));
      outputs[c.rank()] = data;
      return s;
    }));
    for (size_t i = 0; i < n; ++i) {
      double expected = 0, magnitude = 0;
      for (int r = 0; r < size; ++r) {
        expected += inputs[r][i];
        magnitude += std::abs(inputs[r][i]);
      }
      // Float sums in another order: within a few ulps of the magnitudes.
      ASSERT_NEAR(outputs[0][i], expected, 1e-6 * magnitude + 1e-7) << "n " << n << " i " << i;
    }
    for (int r = 1; r < size; ++r) EXPECT_EQ(outputs[r], outputs[0]) << "rank " << r << " differs, n " << n;
  }
}

TEST_P(GlooGroupTest, AllGatherVConcatenatesInRankOrder) {
  const int size = GetParam();
  std::vector<std::vector<uint32_t>> words(size);
  std::vector<std::vector<float>> floats(size);
  std::vector<uint32_t> expected_words;
  std::vector<float> expected_floats;
  std::vector<size_t> expected_counts;
  for (int r = 0; r < size; ++r) {
    const size_t count = r == 1 ? 0 : 3 * r + 1;  // rank 1 sends nothing
    for (size_t i = 0; i < count; ++i) {
      words[r].push_back(1000 * r + i);
      floats[r].push_back(0.5f * r - i);
    }
    expected_words.insert(expected_words.end(), words[r].begin(), words[r].end());
    expected_floats.insert(expected_floats.end(), floats[r].begin(), floats[r].end());
    expected_counts.push_back(count);
  }
  std::mutex mu;
  ExpectAllOk(RunOnLocalGlooGroup(size, [&](Collective& c) {
    std::vector<uint32_t> all_words;
    std::vector<float> all_floats;
    std::vector<size_t> counts, float_counts;
    if (absl::Status s = c.AllGatherV(words[c.rank()], &all_words, &counts); !s.ok()) return s;
    if (absl::Status s = c.AllGatherV(floats[c.rank()], &all_floats, &float_counts); !s.ok()) return s;
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_EQ(all_words, expected_words) << "rank " << c.rank();
    EXPECT_EQ(all_floats, expected_floats) << "rank " << c.rank();
    EXPECT_EQ(counts, expected_counts);
    EXPECT_EQ(float_counts, expected_counts);
    return absl::OkStatus();
  }));
}

TEST_P(GlooGroupTest, BroadcastCopiesTheRootsDataFromEveryRoot) {
  const int size = GetParam();
  std::mutex mu;
  ExpectAllOk(RunOnLocalGlooGroup(size, [&](Collective& c) {
    for (int root = 0; root < size; ++root) {
      std::vector<float> data = GaussianVector(4097, c.rank() == root ? 7 : 1000 + c.rank());
      std::vector<uint32_t> words(5, c.rank() == root ? 42u + root : 0u);
      if (absl::Status s = c.Broadcast(absl::MakeSpan(data), root); !s.ok()) return s;
      if (absl::Status s = c.Broadcast(absl::MakeSpan(words), root); !s.ok()) return s;
      std::lock_guard<std::mutex> lock(mu);
      EXPECT_EQ(data, GaussianVector(4097, 7)) << "rank " << c.rank() << " root " << root;
      EXPECT_EQ(words, std::vector<uint32_t>(5, 42u + root));
    }
    return c.Barrier();
  }));
}

TEST_P(GlooGroupTest, PointToPointMessagesArriveWithTheirTags) {
  const int size = GetParam();
  if (size < 2) GTEST_SKIP() << "point to point needs two ranks";
  std::mutex mu;
  ExpectAllOk(RunOnLocalGlooGroup(size, [&](Collective& c) {
    // Pairs (0, 1), (2, 3), ...: the even rank sends two tagged messages (one
    // empty) and gets a reply; a lone last rank sits out.
    const int partner = c.rank() ^ 1;
    if (partner >= size) return absl::OkStatus();
    if (c.rank() % 2 == 0) {
      if (absl::Status s = c.Send("from rank " + std::to_string(c.rank()), partner, 7); !s.ok()) return s;
      if (absl::Status s = c.Send("", partner, 8); !s.ok()) return s;
      absl::StatusOr<std::string> reply = c.Recv(partner, 9);
      if (!reply.ok()) return reply.status();
      std::lock_guard<std::mutex> lock(mu);
      EXPECT_EQ(*reply, std::string(70000, 'r'));
      return absl::OkStatus();
    }
    absl::StatusOr<std::string> text = c.Recv(partner, 7);
    if (!text.ok()) return text.status();
    absl::StatusOr<std::string> empty = c.Recv(partner, 8);
    if (!empty.ok()) return empty.status();
    {
      std::lock_guard<std::mutex> lock(mu);
      EXPECT_EQ(*text, "from rank " + std::to_string(partner));
      EXPECT_EQ(*empty, "");
    }
    return c.Send(std::string(70000, 'r'), partner, 9);
  }));
}

TEST_P(GlooGroupTest, SendRecvExchangesWithoutDeadlock) {
  const int size = GetParam();
  if (size < 2) GTEST_SKIP() << "an exchange needs two ranks";
  std::mutex mu;
  ExpectAllOk(RunOnLocalGlooGroup(size, [&](Collective& c) {
    // A ring shift in both directions, each rank sending first: a rank's
    // message (of a rank-dependent size, empty on rank 0) reaches its right.
    const int right = (c.rank() + 1) % size, left = (c.rank() + size - 1) % size;
    const std::string mine(c.rank() * 100000, static_cast<char>('a' + c.rank()));
    absl::StatusOr<std::string> from_left = c.SendRecv(mine, right, left, 3);
    if (!from_left.ok()) return from_left.status();
    absl::StatusOr<std::string> from_right = c.SendRecv(mine, left, right, 4);
    if (!from_right.ok()) return from_right.status();
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_EQ(*from_left, std::string(left * 100000, static_cast<char>('a' + left)));
    EXPECT_EQ(*from_right, std::string(right * 100000, static_cast<char>('a' + right)));
    return absl::OkStatus();
  }));
}

TEST_P(GlooGroupTest, BytesSentFollowTheAlgorithms) {
  const int size = GetParam();
  std::vector<uint64_t> bytes(size);
  ExpectAllOk(RunOnLocalGlooGroup(size, [&](Collective& c) {
    std::vector<float> data(1000, 1.0f);
    if (absl::Status s = c.AllReduceSum(absl::MakeSpan(data)); !s.ok()) return s;
    bytes[c.rank()] = c.bytes_sent();
    return absl::OkStatus();
  }));
  for (int r = 0; r < size; ++r) EXPECT_EQ(bytes[r], 2 * (size - 1) * 4000 / size);
}

// What each rank receives, op by op; and over the group, every byte sent is
// received (the ring allreduce and allgather, the tree broadcast, a ring
// shift of messages).
TEST_P(GlooGroupTest, BytesReceivedFollowTheAlgorithms) {
  const int size = GetParam();
  struct Counted {
    uint64_t sent = 0, received = 0;
  };
  std::vector<std::vector<Counted>> ops(size, std::vector<Counted>(4));
  ExpectAllOk(RunOnLocalGlooGroup(size, [&](Collective& c) {
    const int r = c.rank();
    auto mark = [&](int op, uint64_t sent_before, uint64_t received_before) {
      ops[r][op] = {c.bytes_sent() - sent_before, c.bytes_received() - received_before};
    };
    uint64_t s0 = c.bytes_sent(), r0 = c.bytes_received();
    std::vector<float> data(1000, 1.0f);
    if (absl::Status s = c.AllReduceSum(absl::MakeSpan(data)); !s.ok()) return s;
    mark(0, s0, r0);
    s0 = c.bytes_sent(), r0 = c.bytes_received();
    std::vector<float> mine(10 * (r + 1), 2.0f), all;
    std::vector<size_t> counts;
    if (absl::Status s = c.AllGatherV(mine, &all, &counts); !s.ok()) return s;
    mark(1, s0, r0);
    s0 = c.bytes_sent(), r0 = c.bytes_received();
    std::vector<uint32_t> words(300, r == 1 % size ? 7u : 0u);
    if (absl::Status s = c.Broadcast(absl::MakeSpan(words), 1 % size); !s.ok()) return s;
    mark(2, s0, r0);
    s0 = c.bytes_sent(), r0 = c.bytes_received();
    if (size > 1) {
      const std::string message(50 * (r + 1), 'x');
      absl::StatusOr<std::string> got = c.SendRecv(message, (r + 1) % size, (r + size - 1) % size, 9);
      if (!got.ok()) return got.status();
    }
    mark(3, s0, r0);
    return absl::OkStatus();
  }));
  uint64_t all_elements = 0;
  for (int r = 0; r < size; ++r) all_elements += 10 * (r + 1);
  for (int r = 0; r < size; ++r) {
    EXPECT_EQ(ops[r][0].received, size > 1 ? 2 * (size - 1) * 4000 / size : 0) << "allreduce, rank " << r;
    EXPECT_EQ(ops[r][1].received, size > 1 ? 4 * (all_elements - 10 * (r + 1)) + 8 * (size - 1) : 0)
        << "allgather, rank " << r;
    EXPECT_EQ(ops[r][2].received, size > 1 && r != 1 % size ? 4 * 300 : 0) << "broadcast, rank " << r;
    const int left = (r + size - 1) % size;
    EXPECT_EQ(ops[r][3].received, size > 1 ? 8 + 50 * (left + 1) : 0) << "send/recv, rank " << r;
  }
  for (int op = 0; op < 4; ++op) {
    uint64_t sent = 0, received = 0;
    for (int r = 0; r < size; ++r) {
      sent += ops[r][op].sent;
      received += ops[r][op].received;
    }
    // The ring allreduce's integer division can round a rank's share.
    EXPECT_NEAR(static_cast<double>(received), static_cast<double>(sent), size) << "op " << op;
  }
}

INSTANTIATE_TEST_SUITE_P(Sizes, GlooGroupTest, ::testing::Values(1, 2, 3, 4, 5),
                         [](const ::testing::TestParamInfo<int>& info) { return "ranks" + std::to_string(info.param); });

TEST(GlooCollectiveTest, RefusesBadArguments) {
  InMemoryKeyValueStore store;
  EXPECT_EQ(GlooCollective::Create(store, 2, 2).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(GlooCollective::Create(store, -1, 2).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(GlooCollective::Create(store, 0, 0).status().code(), absl::StatusCode::kInvalidArgument);
  GlooOptions no_host;
  no_host.hostname = "";
  EXPECT_EQ(GlooCollective::Create(store, 0, 1, no_host).status().code(), absl::StatusCode::kInvalidArgument);

  ExpectAllOk(RunOnLocalGlooGroup(2, [](Collective& c) {
    std::vector<float> data(3);
    EXPECT_EQ(c.Broadcast(absl::MakeSpan(data), 2).code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(c.Send("x", c.rank(), 1).code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(c.Send("x", 5, 1).code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(c.Recv(-1, 1).status().code(), absl::StatusCode::kInvalidArgument);
    // The group still works after the refusals.
    return c.AllReduceSum(absl::MakeSpan(data));
  }));
}

TEST(GlooCollectiveTest, ARendezvousMissingARankFailsNamingTheCause) {
  InMemoryKeyValueStore store;
  GlooOptions options;
  options.timeout = absl::Milliseconds(300);
  absl::StatusOr<std::unique_ptr<GlooCollective>> lone = GlooCollective::Create(store, 0, 2, options);
  EXPECT_EQ(lone.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(lone.status().message(), HasSubstr("rendezvous"));
}

TEST(GlooCollectiveTest, APeerThatLeavesFailsTheCollectiveInsteadOfHanging) {
  GlooOptions options;
  options.timeout = absl::Seconds(2);
  std::vector<absl::Status> statuses = RunOnLocalGlooGroup(2, [](Collective& c) {
    if (c.rank() == 1) return absl::OkStatus();  // never joins the allreduce
    std::vector<float> data(10, 1.0f);
    return c.AllReduceSum(absl::MakeSpan(data));
  }, options);
  EXPECT_FALSE(statuses[0].ok());
  EXPECT_EQ(statuses[0].code(), absl::StatusCode::kUnavailable) << statuses[0];
}

}  // namespace
}  // namespace sketchfuse
