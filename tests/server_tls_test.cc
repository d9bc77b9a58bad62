// TLS and mutual TLS on a shard started in-process (server/shard_server.h,
// with the credentials server/shard_credentials.h loads from the daemon's
// flag files), with certificates generated for the test by openssl: a CA, a
// server certificate for 127.0.0.1, a client certificate from the CA and one
// from a stranger. Plaintext to a TLS server, no client certificate under
// mTLS, a stranger's certificate, and a wrong token are each refused, and a
// good push completes with the exact update after them. (The daemon's flags
// themselves: server/server_cli_test.sh.)
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "common/sketch_hash.h"
#include "proto/aggregator.grpc.pb.h"
#include "proto/coordinator.grpc.pb.h"
#include "proto/job_config_file.h"
#include "proto/payload_convert.h"
#include "proto/run_config.h"
#include "server/shard_credentials.h"
#include "server/shard_server.h"
#include "tests/process_util.h"

namespace sketchfuse {
namespace {

bool RunShell(const std::string& command) { return std::system(command.c_str()) == 0; }

class ServerTlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(TestTempDir() + "/tls");
    const std::string& d = *dir_;
    const std::string ec = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
    std::ofstream(d + ".server.ext") << "subjectAltName=IP:127.0.0.1\n";
    std::ofstream(d + ".client.ext") << "extendedKeyUsage=clientAuth\n";
    ok_ = RunShell("mkdir -p " + d) &&
          RunShell(absl::StrCat("openssl req -x509 ", ec, " -keyout ", d, "/ca.key -out ", d,
                           "/ca.pem -days 2 -subj /CN=sketchfuse-test-ca 2>/dev/null")) &&
          RunShell(absl::StrCat("openssl req ", ec, " -keyout ", d, "/server.key -out ", d,
                           "/server.csr -subj /CN=sketchfuse-server 2>/dev/null")) &&
          RunShell(absl::StrCat("openssl x509 -req -in ", d, "/server.csr -CA ", d, "/ca.pem -CAkey ", d,
                           "/ca.key -CAcreateserial -out ", d, "/server.pem -days 2 -extfile ", d,
                           ".server.ext 2>/dev/null")) &&
          RunShell(absl::StrCat("openssl req ", ec, " -keyout ", d, "/client.key -out ", d,
                           "/client.csr -subj /CN=worker-0 2>/dev/null")) &&
          RunShell(absl::StrCat("openssl x509 -req -in ", d, "/client.csr -CA ", d, "/ca.pem -CAkey ", d,
                           "/ca.key -CAcreateserial -out ", d, "/client.pem -days 2 -extfile ", d,
                           ".client.ext 2>/dev/null")) &&
          RunShell(absl::StrCat("openssl req ", ec, " -keyout ", d, "/shard.key -out ", d,
                           "/shard.csr -subj /CN=shard-1 2>/dev/null")) &&
          RunShell(absl::StrCat("openssl x509 -req -in ", d, "/shard.csr -CA ", d, "/ca.pem -CAkey ", d,
                           "/ca.key -CAcreateserial -out ", d, "/shard.pem -days 2 -extfile ", d,
                           ".client.ext 2>/dev/null")) &&
          RunShell(absl::StrCat("openssl req -x509 ", ec, " -keyout ", d, "/stranger.key -out ", d,
                           "/stranger.pem -days 2 -subj /CN=stranger 2>/dev/null"));
    std::ofstream(d + "/job.json")
        << R"({"job": "tls", "worldSize": 1, "groups": [{"group": 0, "dim": 8, "compressor": "dense"}]})";
    std::ofstream(d + "/token") << "tls-token\n";
    std::ofstream(d + "/run.json") << R"({"job": "tls", "worldSize": 1, "run": {"workload": "mlp", "layerSizes": ["8"]},
      "groups": [{"group": 0, "dim": 8, "compressor": "dense", "layerEnd": 1}]})";
  }

  void TearDown() override { server_.reset(); }

  v1::JobConfig job_;  // the job of the server StartServer started last

  // The certificate files of the server's flags (--tls_cert, ...), with the
  // token file; `client_ca` asks for mutual TLS.
  static ShardCredentialFiles Files(bool client_ca, std::vector<std::string> shard_identities = {}) {
    ShardCredentialFiles files;
    files.tls_cert = *dir_ + "/server.pem";
    files.tls_key = *dir_ + "/server.key";
    if (client_ca) files.tls_client_ca = *dir_ + "/ca.pem";
    files.token_file = *dir_ + "/token";
    files.shard_identities = std::move(shard_identities);
    return files;
  }

  // Starts a shard of `job_file` in-process on a free port; returns its port.
  int StartServer(const ShardCredentialFiles& files, const std::string& job_file = "job.json",
                  bool coordinator = false) {
    absl::StatusOr<v1::JobConfig> job = ReadJobConfig(*dir_ + "/" + job_file);
    EXPECT_TRUE(job.ok()) << job.status();
    if (!job.ok()) return 0;
    ShardServerConfig config;
    config.job = *job;
    job_ = *job;
    config.serve_coordinator = coordinator;
    const absl::Status loaded = LoadShardCredentials(files, &config);
    EXPECT_TRUE(loaded.ok()) << loaded;
    if (!loaded.ok()) return 0;
    absl::StatusOr<std::unique_ptr<ShardServer>> server = ShardServer::Start(std::move(config));
    EXPECT_TRUE(server.ok()) << server.status();
    if (!server.ok()) return 0;
    server_ = *std::move(server);
    return server_->port();
  }

  static std::shared_ptr<grpc::ChannelCredentials> Tls(const std::string& client) {
    grpc::SslCredentialsOptions options;
    options.pem_root_certs = ReadFileOrEmpty(*dir_ + "/ca.pem");
    if (!client.empty()) {
      options.pem_private_key = ReadFileOrEmpty(*dir_ + "/" + client + ".key");
      options.pem_cert_chain = ReadFileOrEmpty(*dir_ + "/" + client + ".pem");
    }
    return grpc::SslCredentials(options);
  }

  // One push of step `step` (world size 1: answered at once).
  static grpc::Status Push(int port, std::shared_ptr<grpc::ChannelCredentials> credentials,
                           const std::string& token, uint64_t step, v1::PushReply* reply) {
    auto stub = v1::Aggregator::NewStub(
        grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), credentials));
    v1::PushRequest request;
    request.mutable_round()->set_job("tls");
    request.mutable_round()->set_step(step);
    Payload p;
    p.dim = 8;
    p.values.assign(8, 1.5f);
    PayloadToProto(p, request.mutable_payload());
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    context.AddMetadata("authorization", "Bearer " + token);
    return stub->Push(&context, request, reply);
  }

  static std::string* dir_;
  static bool ok_;
  std::unique_ptr<ShardServer> server_;
};

std::string* ServerTlsTest::dir_ = nullptr;
bool ServerTlsTest::ok_ = false;

TEST_F(ServerTlsTest, TlsServerRefusesPlaintextAndWrongTokens) {
  ASSERT_TRUE(ok_) << "openssl could not make the test certificates";
  const int port = StartServer(Files(false));
  ASSERT_GT(port, 0);
  v1::PushReply reply;
  EXPECT_EQ(Push(port, grpc::InsecureChannelCredentials(), "tls-token", 0, &reply).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(Push(port, Tls(""), "wrong", 0, &reply).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  grpc::Status good = Push(port, Tls(""), "tls-token", 0, &reply);
  ASSERT_TRUE(good.ok()) << good.error_message();
  EXPECT_EQ(reply.update().values(7), 1.5f);
  EXPECT_EQ(server_->Shutdown(), 0);
}

TEST_F(ServerTlsTest, MutualTlsServerRequiresACertificateFromItsCa) {
  ASSERT_TRUE(ok_) << "openssl could not make the test certificates";
  const int port = StartServer(Files(true));
  ASSERT_GT(port, 0);
  v1::PushReply reply;
  EXPECT_FALSE(Push(port, Tls(""), "tls-token", 0, &reply).ok());
  EXPECT_FALSE(Push(port, Tls("stranger"), "tls-token", 0, &reply).ok());
  EXPECT_FALSE(Push(port, grpc::InsecureChannelCredentials(), "tls-token", 0, &reply).ok());
  grpc::Status good = Push(port, Tls("client"), "tls-token", 0, &reply);
  ASSERT_TRUE(good.ok()) << good.error_message();
  EXPECT_EQ(reply.update().values(0), 1.5f);
  EXPECT_EQ(reply.contributors(), 1u);
}

// With --shard_identities, the certificate decides the role: a worker's
// certificate cannot register (or move) a shard even with the token, and a
// shard's cannot push.
TEST_F(ServerTlsTest, CertificateIdentitiesDecideRolesUnderMutualTls) {
  ASSERT_TRUE(ok_) << "openssl could not make the test certificates";
  const int port = StartServer(Files(true, {"shard-1", "shard-2"}), "run.json", /*coordinator=*/true);
  ASSERT_GT(port, 0);
  auto registration = [&](const std::string& client) {
    auto stub = v1::Coordinator::NewStub(grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), Tls(client)));
    v1::RegisterShardRequest request;
    request.set_job("tls");
    request.set_shard(0);
    request.set_num_shards(1);
    request.set_address("10.6.6.6:7070");
    request.set_sketch_hash_family(kSketchHashFamily);
    request.set_job_fingerprint(JobFingerprint(job_));
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    context.AddMetadata("authorization", "Bearer tls-token");
    v1::RegisterShardReply reply;
    return stub->RegisterShard(&context, request, &reply);
  };
  grpc::Status by_worker = registration("client");
  EXPECT_EQ(by_worker.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_NE(by_worker.error_message().find("'worker-0' is not one of --shard_identities"), std::string::npos)
      << by_worker.error_message();
  grpc::Status by_shard = registration("shard");
  EXPECT_TRUE(by_shard.ok()) << by_shard.error_message();
  v1::PushReply reply;
  grpc::Status push_by_shard = Push(port, Tls("shard"), "tls-token", 0, &reply);
  EXPECT_EQ(push_by_shard.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_NE(push_by_shard.error_message().find("'shard-1' is a shard's"), std::string::npos)
      << push_by_shard.error_message();
  grpc::Status good = Push(port, Tls("client"), "tls-token", 0, &reply);
  EXPECT_TRUE(good.ok()) << good.error_message();
}

TEST_F(ServerTlsTest, BadTlsFilesAreRefusedByFlagName) {
  ASSERT_TRUE(ok_);
  ShardServerConfig config;
  ShardCredentialFiles files = Files(false);
  files.tls_cert = *dir_ + "/missing.pem";
  const absl::Status missing = LoadShardCredentials(files, &config);
  EXPECT_FALSE(missing.ok());
  EXPECT_NE(missing.message().find("cannot read --tls_cert file"), std::string::npos) << missing;
  files = Files(false, {"shard-1"});
  const absl::Status identities = LoadShardCredentials(files, &config);
  EXPECT_NE(identities.message().find("--shard_identities needs mutual TLS"), std::string::npos) << identities;
}

}  // namespace
}  // namespace sketchfuse
