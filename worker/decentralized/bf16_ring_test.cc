// The bfloat16 ring allreduce on real Gloo groups of 1 to 5 ranks against the float64 sum, on
// random data of many sizes and magnitudes: within P * 2^-8 of the sum of
// magnitudes per element (the stated bound), a typical error near bfloat16's
// own rounding, the same bits on every rank, and the bytes it reports sent.
#include "worker/decentralized/bf16_ring.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <mutex>
#include <random>

#include "common/test_vectors.h"
#include "gtest/gtest.h"
#include "worker/collective/local_group.h"

namespace sketchfuse {
namespace {

// Values spread over many orders of magnitude, like gradients of layers of
// different scales; some exact zeros.
std::vector<float> GradientLike(size_t n, uint32_t seed) {
  std::vector<float> x = GaussianVector(n, seed);
  std::mt19937 rng(seed + 1);
  std::uniform_real_distribution<float> exponent(-8.0f, 2.0f);
  for (size_t i = 0; i < n; ++i) x[i] = i % 97 == 3 ? 0.0f : x[i] * std::pow(10.0f, exponent(rng));
  return x;
}

uint32_t TestTag(int round) { return 0x00AB0000u | static_cast<uint32_t>(round); }

class Bf16RingTest : public ::testing::TestWithParam<int> {};

TEST_P(Bf16RingTest, IsTheSumWithinTheBoundAndIdenticalOnEveryRank) {
  const int size = GetParam();
  // Empty, fewer elements than ranks, odd sizes, and above Gloo's 1 MiB segment.
  for (size_t n : {size_t{0}, size_t{1}, size_t{2}, size_t{3}, size_t{7}, size_t{1000}, size_t{4099},
                   size_t{300001}}) {
    std::vector<std::vector<float>> inputs, outputs(size);
    std::vector<uint64_t> sent(size);
    for (int r = 0; r < size; ++r) inputs.push_back(GradientLike(n, 1000 * r + static_cast<uint32_t>(n)));
    const std::vector<absl::Status> statuses = RunOnLocalGlooGroup(size, [&](Collective& c) {
      std::vector<float> data = inputs[c.rank()];
      const uint64_t before = c.bytes_sent();
      absl::Status s = RingAllReduceSumBf16(c, absl::MakeSpan(data), &TestTag);
      sent[c.rank()] = c.bytes_sent() - before;
      outputs[c.rank()] = std::move(data);
      return s;
    });
    for (int r = 0; r < size; ++r) ASSERT_TRUE(statuses[r].ok()) << "rank " << r << ": " << statuses[r];
    double error_sum = 0, magnitude_sum = 0;
    for (size_t i = 0; i < n; ++i) {
      double exact = 0, magnitude = 0;
      for (int r = 0; r < size; ++r) {
        exact += inputs[r][i];
        magnitude += std::abs(inputs[r][i]);
      }
      // P roundings to bfloat16 of partial sums bounded by the magnitudes,
      // plus float32 additions.
      const double bound = size == 1 ? 0.0 : (size * kBf16UnitRoundoff + 1e-6) * magnitude;
      ASSERT_LE(std::abs(outputs[0][i] - exact), bound) << "ranks " << size << " n " << n << " i " << i;
      error_sum += std::abs(outputs[0][i] - exact);
      magnitude_sum += std::abs(exact);
    }
    // Typically much better than the bound: within one bfloat16 rounding on
    // average (relative to the sums' magnitudes).
    if (n >= 1000 && size > 1) EXPECT_LT(error_sum, kBf16UnitRoundoff * magnitude_sum) << "n " << n;
    for (int r = 1; r < size; ++r) EXPECT_EQ(outputs[r], outputs[0]) << "rank " << r << " differs, n " << n;
    // 2 (P - 1) messages: an 8-byte length and 2 bytes per value of the chunk sent.
    for (int r = 0; r < size; ++r) {
      uint64_t expected = 0;
      for (int s = 0; s < size - 1; ++s) {
        for (int c : {(r - s + size) % size, (r + 1 - s + size) % size}) {
          expected += 8 + 2 * ((c + 1) * n / size - c * n / size);
        }
      }
      EXPECT_EQ(sent[r], expected) << "rank " << r << " n " << n;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Groups, Bf16RingTest, ::testing::Values(1, 2, 3, 4, 5),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return "ranks" + std::to_string(info.param);
                         });

TEST(Bf16RingInputTest, RanksWithDifferentSizesFailWithDataLoss) {
  const std::vector<absl::Status> statuses = RunOnLocalGlooGroup(2, [](Collective& c) {
    std::vector<float> data(c.rank() == 0 ? 10 : 12, 1.0f);
    return RingAllReduceSumBf16(c, absl::MakeSpan(data), &TestTag);
  });
  for (const absl::Status& s : statuses) EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
}

}  // namespace
}  // namespace sketchfuse
