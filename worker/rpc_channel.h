// How a worker reaches the job's gRPC endpoints (coordinator and shards):
// credentials, the bearer token, and message-size limits, shared by every
// client the worker opens.
#ifndef SKETCHFUSE_WORKER_RPC_CHANNEL_H_
#define SKETCHFUSE_WORKER_RPC_CHANNEL_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "grpcpp/grpcpp.h"

namespace sketchfuse {

struct RpcChannelOptions {
  // Bearer token sent on every call; empty: none.
  std::string token;
  // PEM contents (not paths). tls_ca set: TLS, verifying servers with it;
  // client_cert and client_key add a client certificate (mutual TLS).
  std::string tls_ca;
  std::string client_cert;
  std::string client_key;
  // Largest message sent or received.
  int max_message_bytes = 256 << 20;
};

// Reads the token and PEM files named by the caller (any may be empty: not
// used). NOT_FOUND naming the file that cannot be read; INVALID_ARGUMENT for
// an empty token file or a client certificate without its key.
absl::StatusOr<RpcChannelOptions> LoadRpcChannelOptions(const std::string& token_file,
                                                        const std::string& tls_ca_file,
                                                        const std::string& client_cert_file,
                                                        const std::string& client_key_file);

// A channel to `address` (host:port) with the options' credentials and limits.
std::shared_ptr<grpc::Channel> MakeRpcChannel(const std::string& address,
                                              const RpcChannelOptions& options);

// Adds the bearer token (if any) to a call.
void AddCallCredentials(const RpcChannelOptions& options, grpc::ClientContext& context);

}  // namespace sketchfuse

#endif  // SKETCHFUSE_WORKER_RPC_CHANNEL_H_
