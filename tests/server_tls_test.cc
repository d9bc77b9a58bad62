// TLS and mutual TLS on the real sketchfuse_server daemon, with certificates
// generated for the test by openssl: a CA, a server certificate for
// 127.0.0.1, a client certificate from the CA and one from a stranger.
// Plaintext to a TLS server, no client certificate under mTLS, a stranger's
// certificate, and a wrong token are each refused, and a good push completes
// with the exact update after them.
// Usage (from Bazel): server_tls_test <sketchfuse_server>
#include <signal.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "common/sketch_hash.h"
#include "proto/aggregator.grpc.pb.h"
#include "proto/coordinator.grpc.pb.h"
#include "proto/payload_convert.h"
#include "tests/process_util.h"

namespace sketchfuse {
namespace {

std::string server_binary;

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

  void TearDown() override { KillIfRunning(server_); }

  // Starts the daemon with `extra` flags; returns its port.
  int StartServer(const std::vector<std::string>& extra) {
    const std::string port_file = *dir_ + "/port";
    std::remove(port_file.c_str());
    std::vector<std::string> argv = {server_binary, "--job_config=" + *dir_ + "/job.json",
                                     "--port=0", "--port_file=" + port_file,
                                     "--token_file=" + *dir_ + "/token"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    server_ = Spawn(argv, *dir_ + "/server.out", *dir_ + "/server.err");
    const std::string port = WaitForFile(port_file, std::chrono::seconds(30));
    EXPECT_FALSE(port.empty()) << ReadFileOrEmpty(*dir_ + "/server.err");
    return port.empty() ? 0 : std::stoi(port);
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
  pid_t server_ = -1;
};

std::string* ServerTlsTest::dir_ = nullptr;
bool ServerTlsTest::ok_ = false;

TEST_F(ServerTlsTest, TlsServerRefusesPlaintextAndWrongTokens) {
  ASSERT_TRUE(ok_) << "openssl could not make the test certificates";
  const int port = StartServer({"--tls_cert=" + *dir_ + "/server.pem",
                                "--tls_key=" + *dir_ + "/server.key"});
  ASSERT_GT(port, 0);
  v1::PushReply reply;
  EXPECT_EQ(Push(port, grpc::InsecureChannelCredentials(), "tls-token", 0, &reply).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(Push(port, Tls(""), "wrong", 0, &reply).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  grpc::Status good = Push(port, Tls(""), "tls-token", 0, &reply);
  ASSERT_TRUE(good.ok()) << good.error_message();
  EXPECT_EQ(reply.update().values(7), 1.5f);
  EXPECT_NE(ReadFileOrEmpty(*dir_ + "/server.out").find("(TLS, bearer token required)"),
            std::string::npos);
  kill(server_, SIGTERM);
  EXPECT_EQ(WaitFor(server_, std::chrono::seconds(20)), 0);
}

TEST_F(ServerTlsTest, MutualTlsServerRequiresACertificateFromItsCa) {
  ASSERT_TRUE(ok_) << "openssl could not make the test certificates";
  const int port = StartServer({"--tls_cert=" + *dir_ + "/server.pem",
                                "--tls_key=" + *dir_ + "/server.key",
                                "--tls_client_ca=" + *dir_ + "/ca.pem"});
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
  const int port = StartServer({"--job_config=" + *dir_ + "/run.json", "--coordinator",
                                "--tls_cert=" + *dir_ + "/server.pem", "--tls_key=" + *dir_ + "/server.key",
                                "--tls_client_ca=" + *dir_ + "/ca.pem", "--shard_identities=shard-1,shard-2"});
  ASSERT_GT(port, 0);
  auto registration = [&](const std::string& client) {
    auto stub = v1::Coordinator::NewStub(grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), Tls(client)));
    v1::RegisterShardRequest request;
    request.set_job("tls");
    request.set_shard(0);
    request.set_num_shards(1);
    request.set_address("10.6.6.6:7070");
    request.set_sketch_hash_family(kSketchHashFamily);
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

TEST_F(ServerTlsTest, BadTlsFlagsAreRefusedAtStartUp) {
  ASSERT_TRUE(ok_);
  const pid_t pid = Spawn({server_binary, "--job_config=" + *dir_ + "/job.json",
                           "--tls_cert=" + *dir_ + "/missing.pem", "--tls_key=" + *dir_ + "/server.key"},
                          *dir_ + "/bad.out", *dir_ + "/bad.err");
  EXPECT_EQ(WaitFor(pid, std::chrono::seconds(20)), 2);
  EXPECT_NE(ReadFileOrEmpty(*dir_ + "/bad.err").find("cannot read --tls_cert file"),
            std::string::npos)
      << ReadFileOrEmpty(*dir_ + "/bad.err");
}

}  // namespace
}  // namespace sketchfuse

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <sketchfuse_server>\n", argv[0]);
    return 2;
  }
  sketchfuse::server_binary = argv[1];
  return RUN_ALL_TESTS();
}
