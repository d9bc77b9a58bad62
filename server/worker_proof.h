// Binds a worker's calls to the rank the coordinator gave it.
//
// A worker's bearer token (or certificate) proves "a worker of this job",
// not which one, and pushes name their worker themselves. Where the servers
// hold a shard token that the workers do not (--shard_token_file), each
// rank also gets a proof: HMAC-SHA256, keyed by a key derived from the shard
// token, of the job and the rank, in hex. The coordinator hands it out with
// the rank (JoinReply.worker_proof); a shard accepts a push as worker r only
// with r's proof in the call's metadata (proto/rpc_channel.h's
// kWorkerProofKey, which its AddCallCredentials sends); the coordinator takes a
// heartbeat, or a re-join of an id that already has its rank, only with that
// rank's proof. Every server of the job computes the same proofs from the
// shared token without state, so restarted servers accept the proofs
// already given; a worker that restarts keeps its proof next to its
// checkpoint.
//
// Without a shard token (the worker token serves both roles, so a worker
// could compute proofs anyway) proofs are off: ProofOf is empty and every
// call is accepted.
//
// NOTE: immutable after construction; thread-safe.
#ifndef SKETCHFUSE_SERVER_WORKER_PROOF_H_
#define SKETCHFUSE_SERVER_WORKER_PROOF_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace sketchfuse {

// HMAC-SHA256 of `message` under `key`, as 32 raw bytes.
std::string HmacSha256(absl::string_view key, absl::string_view message);

class WorkerProofs {
 public:
  // Proofs derived from `shard_token`; off when it is empty.
  explicit WorkerProofs(absl::string_view shard_token = "");

  bool enabled() const { return !key_.empty(); }

  // The proof of `rank` in `job` (64 hex digits), or "" when off.
  std::string ProofOf(absl::string_view job, uint32_t rank) const;

  // OK when off, or when `proof` is the proof of `rank` in `job` (compared
  // in constant time); PERMISSION_DENIED otherwise, naming `who` (e.g.
  // "a push as worker 3") and whether the proof was missing or wrong.
  absl::Status Check(absl::string_view job, uint32_t rank, absl::string_view proof, absl::string_view who) const;

  // The join credential of the worker called `worker_id` in `job` (64 hex
  // digits), or "" when off: an identity the operator hands each worker
  // before it joins (sketchfuse_server --print_join_credential), so that a
  // coordinator that requires them (--require_join_credentials) lets only
  // that worker join under that id. Its HMAC input ("join", job, id, NUL
  // separated) can never be a rank proof's (job, rank: one NUL).
  std::string JoinCredentialOf(absl::string_view job, absl::string_view worker_id) const;

  // OK when `credential` is `worker_id`'s join credential in `job`
  // (constant-time); PERMISSION_DENIED otherwise, naming the id and whether
  // the credential was missing or another's. FAILED_PRECONDITION when off
  // (no shard token: no credential can be checked).
  absl::Status CheckJoinCredential(absl::string_view job, absl::string_view worker_id,
                                   absl::string_view credential) const;

 private:
  std::string key_;  // derived from the shard token; empty: off
};

}  // namespace sketchfuse

#endif  // SKETCHFUSE_SERVER_WORKER_PROOF_H_
