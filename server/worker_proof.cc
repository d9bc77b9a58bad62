#include "server/worker_proof.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace sketchfuse {
namespace {

// Separates the derived key from any other use of the shard token.
constexpr char kKeyLabel[] = "sketchfuse worker proof key v1";

}  // namespace

std::string HmacSha256(absl::string_view key, absl::string_view message) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(message.data()),
       message.size(), digest, &length);
  return std::string(reinterpret_cast<const char*>(digest), length);
}

WorkerProofs::WorkerProofs(absl::string_view shard_token)
    : key_(shard_token.empty() ? std::string() : HmacSha256(shard_token, kKeyLabel)) {}

std::string WorkerProofs::ProofOf(absl::string_view job, uint32_t rank) const {
  if (!enabled()) return "";
  // The job's name cannot hold a NUL (a proto string of the job config), so
  // "job\0rank" names one (job, rank) only.
  return absl::BytesToHexString(HmacSha256(key_, absl::StrCat(job, absl::string_view("\0", 1), rank)));
}

absl::Status WorkerProofs::Check(absl::string_view job, uint32_t rank, absl::string_view proof,
                                 absl::string_view who) const {
  if (!enabled()) return absl::OkStatus();
  if (proof.empty()) {
    return absl::PermissionDeniedError(absl::StrCat(
        who, " carries no worker proof: this job binds each worker's calls to its rank (the servers have a shard "
             "token), and the proof comes with the rank from Join"));
  }
  const std::string want = ProofOf(job, rank);
  if (proof.size() != want.size() || CRYPTO_memcmp(proof.data(), want.data(), want.size()) != 0) {
    return absl::PermissionDeniedError(
        absl::StrCat(who, " carries another worker's proof, or none of this job's: a worker may call only as the "
                          "rank Join gave it"));
  }
  return absl::OkStatus();
}

}  // namespace sketchfuse
