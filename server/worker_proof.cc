#include "server/worker_proof.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/error_text.h"

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

std::string WorkerProofs::JoinCredentialOf(absl::string_view job, absl::string_view worker_id) const {
  if (!enabled()) return "";
  const absl::string_view nul("\0", 1);
  return absl::BytesToHexString(HmacSha256(key_, absl::StrCat("join", nul, job, nul, worker_id)));
}

absl::Status WorkerProofs::CheckJoinCredential(absl::string_view job, absl::string_view worker_id,
                                               absl::string_view credential) const {
  if (!enabled()) {
    return absl::FailedPreconditionError("join credentials need the servers' shard token (--shard_token_file)");
  }
  const std::string who = QuoteField(std::string(worker_id));
  if (credential.empty()) {
    return absl::PermissionDeniedError(absl::StrCat(
        "a Join as worker ", who, " carries no join credential: this coordinator admits each id only with the "
        "credential its operator issued for it (sketchfuse_server --print_join_credential)"));
  }
  const std::string want = JoinCredentialOf(job, worker_id);
  if (credential.size() != want.size() || CRYPTO_memcmp(credential.data(), want.data(), want.size()) != 0) {
    return absl::PermissionDeniedError(absl::StrCat("a Join as worker ", who,
                                                    " carries a join credential that is not that id's"));
  }
  return absl::OkStatus();
}

}  // namespace sketchfuse
