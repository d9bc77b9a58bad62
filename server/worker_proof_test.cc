// HMAC-SHA256 against RFC 4231's test vectors, and the proofs built on it:
// one per (job, rank, shard token), checked in constant time, off without a
// shard token.
#include "server/worker_proof.h"

#include "absl/strings/escaping.h"
#include "gtest/gtest.h"

namespace sketchfuse {
namespace {

TEST(HmacSha256Test, MatchesRfc4231) {
  // Test case 1: a 20-byte key of 0x0b, "Hi There".
  EXPECT_EQ(absl::BytesToHexString(HmacSha256(std::string(20, '\x0b'), "Hi There")),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  // Test case 2: key "Jefe".
  EXPECT_EQ(absl::BytesToHexString(HmacSha256("Jefe", "what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  // Test case 6: a key longer than the block (131 bytes of 0xaa).
  EXPECT_EQ(absl::BytesToHexString(
                HmacSha256(std::string(131, '\xaa'), "Test Using Larger Than Block-Size Key - Hash Key First")),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
}

TEST(WorkerProofsTest, OneProofPerJobRankAndToken) {
  const WorkerProofs proofs("shard-secret");
  ASSERT_TRUE(proofs.enabled());
  const std::string p0 = proofs.ProofOf("job", 0);
  EXPECT_EQ(p0.size(), 64u);
  EXPECT_EQ(p0, WorkerProofs("shard-secret").ProofOf("job", 0));  // any server of the job
  EXPECT_NE(p0, proofs.ProofOf("job", 1));
  EXPECT_NE(p0, proofs.ProofOf("job2", 0));
  EXPECT_NE(proofs.ProofOf("job1", 0), proofs.ProofOf("job", 10));  // "job1\0" + "0" vs "job\0" + "10"
  EXPECT_NE(p0, WorkerProofs("other-secret").ProofOf("job", 0));
  EXPECT_TRUE(proofs.Check("job", 0, p0, "a push as worker 0").ok());
  const absl::Status other = proofs.Check("job", 1, p0, "a push as worker 1");
  EXPECT_EQ(other.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(other.message().find("a push as worker 1 carries another worker's proof"), std::string::npos) << other;
  const absl::Status none = proofs.Check("job", 1, "", "a push as worker 1");
  EXPECT_EQ(none.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(none.message().find("carries no worker proof"), std::string::npos) << none;
  EXPECT_EQ(proofs.Check("job", 0, p0.substr(1), "x").code(), absl::StatusCode::kPermissionDenied);
}

TEST(WorkerProofsTest, OffWithoutAShardToken) {
  const WorkerProofs off;
  EXPECT_FALSE(off.enabled());
  EXPECT_EQ(off.ProofOf("job", 3), "");
  EXPECT_TRUE(off.Check("job", 3, "", "a push as worker 3").ok());
  EXPECT_TRUE(off.Check("job", 3, "anything", "a push as worker 3").ok());
}

}  // namespace
}  // namespace sketchfuse
