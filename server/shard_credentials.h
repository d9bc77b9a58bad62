// A shard's credentials from the files its flags name: the server's TLS
// (or mutual TLS, or plaintext), who may call what (the workers' token, the
// shards' token, the shards' certificate identities), and how the shard
// calls a remote coordinator. Every error names the flag (--tls_cert, ...).
#ifndef SKETCHFUSE_SERVER_SHARD_CREDENTIALS_H_
#define SKETCHFUSE_SERVER_SHARD_CREDENTIALS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "server/shard_server.h"

namespace sketchfuse {

// The files (and identities) of the daemon's flags of the same names; empty:
// not given.
struct ShardCredentialFiles {
  std::string tls_cert, tls_key, tls_client_ca;
  std::string token_file, shard_token_file;
  std::string coordinator_ca;
  std::vector<std::string> shard_identities;
};

// Fills config->credentials (null: plaintext), config->auth and
// config->coordinator_client. INVALID_ARGUMENT naming the flag for files
// given without their partners (a certificate without its key, a client CA
// without a certificate, a shard token without the workers', identities
// without mutual TLS) or two roles with one token; a file that cannot be
// read fails as proto/rpc_channel.h ReadFlagFile says, naming the flag. On
// an error config is partly filled and must not be used.
absl::Status LoadShardCredentials(const ShardCredentialFiles& files, ShardServerConfig* config);

}  // namespace sketchfuse

#endif  // SKETCHFUSE_SERVER_SHARD_CREDENTIALS_H_
