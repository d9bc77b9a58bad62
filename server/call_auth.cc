#include "server/call_auth.h"

#include "absl/strings/str_cat.h"
#include "common/error_text.h"

namespace sketchfuse {

absl::Status CheckBearerToken(const grpc::ServerContextBase& context, const std::string& token) {
  if (token.empty()) return absl::OkStatus();
  const auto& metadata = context.client_metadata();
  auto it = metadata.find(kAuthorizationKey);
  if (it == metadata.end()) {
    return absl::UnauthenticatedError("missing bearer token (metadata 'authorization')");
  }
  const std::string expected = std::string(kBearerPrefix) + token;
  const grpc::string_ref& got = it->second;
  // Constant-time comparison over the expected length.
  unsigned char diff = got.size() == expected.size() ? 0 : 1;
  for (size_t i = 0; i < expected.size(); ++i) {
    diff |= static_cast<unsigned char>(expected[i] ^ (i < got.size() ? got.data()[i] : 0));
  }
  if (diff != 0) return absl::UnauthenticatedError("wrong bearer token");
  return absl::OkStatus();
}

std::string PresentedWorkerProof(const grpc::ServerContextBase& context) {
  const auto& metadata = context.client_metadata();
  auto it = metadata.find(kWorkerProofKey);
  return it == metadata.end() ? std::string() : std::string(it->second.data(), it->second.size());
}

std::string PresentedJoinCredential(const grpc::ServerContextBase& context) {
  const auto& metadata = context.client_metadata();
  auto it = metadata.find(kJoinCredentialKey);
  return it == metadata.end() ? std::string() : std::string(it->second.data(), it->second.size());
}

CallAuth::CallAuth(CallAuthConfig config)
    : config_(std::move(config)),
      shard_identities_(config_.shard_identities.begin(), config_.shard_identities.end()),
      proofs_(config_.shard_token) {}

absl::Status CallAuth::Authorize(const grpc::ServerContextBase& context, CallRole role, absl::string_view rpc) const {
  const bool shard_rpc = role == CallRole::kShard;
  const char* mine_name = shard_rpc ? "shards" : "workers";
  if (config_.shard_token.empty()) {
    if (absl::Status auth = CheckBearerToken(context, config_.worker_token); !auth.ok()) return auth;
  } else {
    const std::string& mine = shard_rpc ? config_.shard_token : config_.worker_token;
    const std::string& other = shard_rpc ? config_.worker_token : config_.shard_token;
    if (absl::Status auth = CheckBearerToken(context, mine); !auth.ok()) {
      if (CheckBearerToken(context, other).ok()) {
        return absl::PermissionDeniedError(absl::StrCat(rpc, " is for ", mine_name, "; this call carries the ",
                                                        shard_rpc ? "worker" : "shard", " token"));
      }
      return auth;
    }
  }
  if (shard_identities_.empty()) return absl::OkStatus();
  // Mutual TLS: the peer's certificate says which role it has.
  std::string identity;
  bool is_shard = false;
  const std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
  if (auth != nullptr) {
    for (const grpc::string_ref& name : auth->GetPeerIdentity()) {
      const std::string id(name.data(), name.size());
      if (identity.empty()) identity = id;
      if (shard_identities_.count(id)) {
        is_shard = true;
        identity = id;
      }
    }
  }
  if (is_shard != shard_rpc) {
    return absl::PermissionDeniedError(absl::StrCat(
        rpc, " is for ", mine_name, "; the peer's certificate ",
        identity.empty() ? "(none)" : QuoteField(identity),
        shard_rpc ? " is not one of --shard_identities" : " is a shard's (--shard_identities)"));
  }
  return absl::OkStatus();
}

}  // namespace sketchfuse
