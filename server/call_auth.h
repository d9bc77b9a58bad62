// Who may call what on a server's two services: one unit for both.
//
// Two roles: workers (Aggregator/Push; Coordinator/Join, Heartbeat, Set,
// Get) and shards (Coordinator/RegisterShard). A call proves its role with
// the role's bearer token ("authorization: Bearer <token>") and, under
// mutual TLS with shard identities configured, with its certificate: a
// shard's certificate identity (subject alternative name, else common name)
// is one of `shard_identities`, a worker's is not.
//
// Answers: UNAUTHENTICATED for a missing or unknown token (compared in
// constant time); PERMISSION_DENIED, naming the RPC, for a valid credential
// of the other role (a worker's token or certificate cannot register or move
// a shard; a shard's cannot push or join). Without a shard token the worker
// token serves both roles; an empty worker token turns tokens off.
//
// With a shard token, a worker's calls are also bound to its rank
// (server/worker_proof.h): proofs() checks the proof a call carries
// (PresentedWorkerProof).
//
// NOTE: immutable after construction; thread-safe.
#ifndef SKETCHFUSE_SERVER_CALL_AUTH_H_
#define SKETCHFUSE_SERVER_CALL_AUTH_H_

#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "grpcpp/grpcpp.h"
#include "proto/rpc_channel.h"
#include "server/worker_proof.h"

namespace sketchfuse {

// The metadata key and value prefix of the bearer token.
inline constexpr char kAuthorizationKey[] = "authorization";
inline constexpr char kBearerPrefix[] = "Bearer ";

// OK when `token` is empty (authentication off) or the call carries
// "authorization: Bearer <token>"; UNAUTHENTICATED otherwise. The comparison
// takes the same time wherever the first difference is.
absl::Status CheckBearerToken(const grpc::ServerContextBase& context, const std::string& token);

enum class CallRole { kWorker, kShard };

struct CallAuthConfig {
  std::string worker_token;
  std::string shard_token;  // empty: the worker token serves both roles
  // Certificate identities of the shards (mutual TLS); empty: roles by token only.
  std::vector<std::string> shard_identities;
};

// The worker proof a call carries (metadata kWorkerProofKey), or "".
std::string PresentedWorkerProof(const grpc::ServerContextBase& context);

// The join credential a Join carries (metadata kJoinCredentialKey), or "".
std::string PresentedJoinCredential(const grpc::ServerContextBase& context);

class CallAuth {
 public:
  explicit CallAuth(CallAuthConfig config);

  // OK if the call may call `rpc`, an RPC of `role` (file comment).
  absl::Status Authorize(const grpc::ServerContextBase& context, CallRole role, absl::string_view rpc) const;

  // The workers' proofs: derived from the shard token; off without one.
  const WorkerProofs& proofs() const { return proofs_; }

 private:
  const CallAuthConfig config_;
  const std::set<std::string> shard_identities_;
  const WorkerProofs proofs_;
};

}  // namespace sketchfuse

#endif  // SKETCHFUSE_SERVER_CALL_AUTH_H_
