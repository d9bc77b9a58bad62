#include "proto/rpc_channel.h"

#include <algorithm>

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace sketchfuse {
absl::StatusOr<std::string> ReadFlagFile(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", what, " file '", path, "'"));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

absl::StatusOr<std::string> ReadJoinCredential(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFlagFile(path, "join credential");
  if (!text.ok()) return text.status();
  const std::string credential(absl::StripAsciiWhitespace(*text));
  const bool hex = credential.size() == 64 && std::all_of(credential.begin(), credential.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
  });
  if (!hex) {
    return absl::InvalidArgumentError(absl::StrCat("join credential file '", path, "' holds ", credential.size(),
                                                   " characters, not the 64 hex digits of a credential "
                                                   "(sketchfuse_server --print_join_credential)"));
  }
  return credential;
}

absl::StatusOr<RpcChannelOptions> LoadRpcChannelOptions(const std::string& token_file,
                                                        const std::string& tls_ca_file,
                                                        const std::string& client_cert_file,
                                                        const std::string& client_key_file,
                                                        const std::string& ca_flag) {
  RpcChannelOptions options;
  if (!token_file.empty()) {
    absl::StatusOr<std::string> token = ReadFlagFile(token_file, "--token_file");
    if (!token.ok()) return token.status();
    options.token = std::string(absl::StripAsciiWhitespace(*token));
    if (options.token.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("--token_file '", token_file, "' is empty"));
    }
  }
  if (client_cert_file.empty() != client_key_file.empty()) {
    return absl::InvalidArgumentError("--tls_cert and --tls_key must be given together");
  }
  if (!client_cert_file.empty() && tls_ca_file.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--tls_cert needs ", ca_flag, " (a client certificate is only sent over TLS)"));
  }
  if (!tls_ca_file.empty()) {
    absl::StatusOr<std::string> ca = ReadFlagFile(tls_ca_file, ca_flag);
    if (!ca.ok()) return ca.status();
    options.tls_ca = *ca;
  }
  if (!client_cert_file.empty()) {
    absl::StatusOr<std::string> cert = ReadFlagFile(client_cert_file, "--tls_cert");
    if (!cert.ok()) return cert.status();
    absl::StatusOr<std::string> key = ReadFlagFile(client_key_file, "--tls_key");
    if (!key.ok()) return key.status();
    options.client_cert = *cert;
    options.client_key = *key;
  }
  return options;
}

namespace {
constexpr int kMaxFrameBytes = (16 << 20) - 1;  // HTTP/2's largest frame
constexpr int kStreamWindowBytes = 64 << 20;
}  // namespace

void ApplyBulkTransferSettings(grpc::ChannelArguments* arguments) {
  arguments->SetInt(GRPC_ARG_HTTP2_MAX_FRAME_SIZE, kMaxFrameBytes);
  arguments->SetInt(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, kStreamWindowBytes);
  arguments->SetInt(GRPC_ARG_HTTP2_WRITE_BUFFER_SIZE, kMaxFrameBytes);
}

void ApplyBulkTransferSettings(grpc::ServerBuilder* builder) {
  builder->AddChannelArgument(GRPC_ARG_HTTP2_MAX_FRAME_SIZE, kMaxFrameBytes);
  builder->AddChannelArgument(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, kStreamWindowBytes);
  builder->AddChannelArgument(GRPC_ARG_HTTP2_WRITE_BUFFER_SIZE, kMaxFrameBytes);
}

std::shared_ptr<grpc::Channel> MakeRpcChannel(const std::string& address,
                                              const RpcChannelOptions& options) {
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  if (!options.tls_ca.empty()) {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = options.tls_ca;
    ssl.pem_cert_chain = options.client_cert;
    ssl.pem_private_key = options.client_key;
    credentials = grpc::SslCredentials(ssl);
  }
  grpc::ChannelArguments arguments;
  arguments.SetMaxReceiveMessageSize(options.max_message_bytes);
  arguments.SetMaxSendMessageSize(options.max_message_bytes);
  // Reconnect quickly to a peer that restarted: gRPC's defaults (1 s,
  // growing to 120 s) outlast the workers' retry budget, so a shard back
  // after a second would find its workers already given up.
  arguments.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  arguments.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  arguments.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  ApplyBulkTransferSettings(&arguments);
  return grpc::CreateCustomChannel(address, credentials, arguments);
}

void AddCallCredentials(const RpcChannelOptions& options, grpc::ClientContext& context) {
  if (!options.token.empty()) context.AddMetadata("authorization", absl::StrCat("Bearer ", options.token));
  if (!options.worker_proof.empty()) context.AddMetadata(kWorkerProofKey, options.worker_proof);
}

}  // namespace sketchfuse
