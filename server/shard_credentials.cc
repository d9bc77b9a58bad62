#include "server/shard_credentials.h"

#include "absl/strings/str_cat.h"

namespace sketchfuse {

absl::Status LoadShardCredentials(const ShardCredentialFiles& files, ShardServerConfig* config) {
  const std::string cert = files.tls_cert, key = files.tls_key;
  const std::string ca = files.tls_client_ca;
  if (cert.empty() != key.empty()) {
    return absl::InvalidArgumentError("--tls_cert and --tls_key must be given together");
  }
  if (cert.empty() && !ca.empty()) return absl::InvalidArgumentError("--tls_client_ca needs --tls_cert and --tls_key");
  if (!cert.empty()) {
    grpc::SslServerCredentialsOptions options(ca.empty() ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
                                                         : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
    absl::StatusOr<std::string> cert_pem = ReadFlagFile(cert, "--tls_cert");
    if (!cert_pem.ok()) return cert_pem.status();
    absl::StatusOr<std::string> key_pem = ReadFlagFile(key, "--tls_key");
    if (!key_pem.ok()) return key_pem.status();
    options.pem_key_cert_pairs.push_back({*key_pem, *cert_pem});
    if (!ca.empty()) {
      absl::StatusOr<std::string> ca_pem = ReadFlagFile(ca, "--tls_client_ca");
      if (!ca_pem.ok()) return ca_pem.status();
      options.pem_root_certs = *ca_pem;
    }
    config->credentials = grpc::SslServerCredentials(options);
  }
  // The client side of this shard's calls to a remote coordinator (its CA;
  // this shard's certificate as client certificate), with the shard token
  // when there is one; workers' calls carry the worker token (--token_file).
  const bool tls_to_coordinator = !files.coordinator_ca.empty();
  const std::string shard_token_file = files.shard_token_file;
  if (!shard_token_file.empty() && files.token_file.empty()) {
    return absl::InvalidArgumentError("--shard_token_file needs --token_file (the workers' token)");
  }
  absl::StatusOr<RpcChannelOptions> client = LoadRpcChannelOptions(
      shard_token_file.empty() ? files.token_file : shard_token_file, files.coordinator_ca,
      tls_to_coordinator ? cert : "", tls_to_coordinator ? key : "", "--coordinator_ca");
  if (!client.ok()) return client.status();
  config->coordinator_client = *client;
  config->auth.worker_token = client->token;
  if (!shard_token_file.empty()) {
    absl::StatusOr<RpcChannelOptions> workers =
        LoadRpcChannelOptions(files.token_file, "", "", "");
    if (!workers.ok()) return workers.status();
    config->auth.shard_token = client->token;
    config->auth.worker_token = workers->token;
    if (config->auth.worker_token == config->auth.shard_token) {
      return absl::InvalidArgumentError("--shard_token_file and --token_file hold the same token; roles need two");
    }
  }
  config->auth.shard_identities = files.shard_identities;
  if (!config->auth.shard_identities.empty() && ca.empty()) {
    return absl::InvalidArgumentError("--shard_identities needs mutual TLS (--tls_client_ca)");
  }
  return absl::OkStatus();
}

}  // namespace sketchfuse
