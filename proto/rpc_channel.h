// How a client reaches the job's gRPC endpoints (a worker its coordinator and
// shards, a shard its coordinator): credentials, the bearer token, and
// message-size limits, shared by every client a process opens. Also the file
// reading the daemons' token and certificate flags share.
#ifndef SKETCHFUSE_PROTO_RPC_CHANNEL_H_
#define SKETCHFUSE_PROTO_RPC_CHANNEL_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "grpcpp/grpcpp.h"

namespace sketchfuse {

// The call metadata key a worker's proof of its rank travels under
// (server/worker_proof.h).
inline constexpr char kWorkerProofKey[] = "sketchfuse-worker-proof";

// The call metadata key a worker's join credential travels under, on Join
// calls only (server/worker_proof.h JoinCredentialOf).
inline constexpr char kJoinCredentialKey[] = "sketchfuse-join-credential";

struct RpcChannelOptions {
  // Bearer token sent on every call; empty: none.
  std::string token;
  // This worker's proof of its rank (JoinReply.worker_proof), sent on every
  // call under kWorkerProofKey; empty: none (before the first Join, or when
  // the servers issue none).
  std::string worker_proof;
  // This worker's join credential (issued by its operator before it joins:
  // sketchfuse_server --print_join_credential), sent on Join calls only
  // under kJoinCredentialKey; empty: none.
  std::string join_credential;
  // PEM contents (not paths). tls_ca set: TLS, verifying servers with it;
  // client_cert and client_key add a client certificate (mutual TLS).
  std::string tls_ca;
  std::string client_cert;
  std::string client_key;
  // Largest message sent or received.
  int max_message_bytes = 256 << 20;
};

// The whole content of a (small) file. NOT_FOUND "cannot read <what> file
// '<path>'" when it cannot be opened.
absl::StatusOr<std::string> ReadFlagFile(const std::string& path, const std::string& what);

// A worker's join credential from the file at `path` (what
// sketchfuse_server --print_join_credential printed): 64 hex digits,
// surrounding whitespace ignored. NOT_FOUND for a file that cannot be read,
// INVALID_ARGUMENT naming the file for anything else.
absl::StatusOr<std::string> ReadJoinCredential(const std::string& path);

// Reads the token and PEM files named by the caller (any may be empty: not
// used). `ca_flag` is the CA file's flag name in messages. NOT_FOUND naming
// the file that cannot be read; INVALID_ARGUMENT for
// an empty token file or a client certificate without its key.
absl::StatusOr<RpcChannelOptions> LoadRpcChannelOptions(const std::string& token_file,
                                                        const std::string& tls_ca_file,
                                                        const std::string& client_cert_file,
                                                        const std::string& client_key_file,
                                                        const std::string& ca_flag = "--tls_ca");

// HTTP/2 settings for payloads of megabytes, used by both ends of every
// SketchFuse channel: frames of up to 16 MiB (HTTP/2's largest) instead of
// 16 KiB, and 64 MiB of stream window so a push is not held up waiting for
// window updates.
void ApplyBulkTransferSettings(grpc::ChannelArguments* arguments);
void ApplyBulkTransferSettings(grpc::ServerBuilder* builder);

// A channel to `address` (host:port) with the options' credentials and
// limits, and the bulk-transfer settings.
std::shared_ptr<grpc::Channel> MakeRpcChannel(const std::string& address,
                                              const RpcChannelOptions& options);

// Adds the bearer token and the worker proof (where set) to a call.
void AddCallCredentials(const RpcChannelOptions& options, grpc::ClientContext& context);

}  // namespace sketchfuse

#endif  // SKETCHFUSE_PROTO_RPC_CHANNEL_H_
