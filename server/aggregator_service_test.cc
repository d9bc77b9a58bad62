// The gRPC service in process, on a real loopback socket (port 0): several
// clients complete rounds, and unauthenticated, malformed and late requests
// get the right status codes without disturbing the next good round.
#include "server/aggregator_service.h"

#include <future>
#include <limits>
#include <memory>
#include <thread>
#include <vector>

#include "common/compressor_registry.h"
#include "gtest/gtest.h"
#include "grpcpp/generic/generic_stub.h"
#include "proto/payload_convert.h"
#include "proto/push_codec.h"
#include "proto/rpc_channel.h"
#include "server/worker_proof.h"
#include "tests/in_process_server.h"

namespace sketchfuse {
namespace {

constexpr char kToken[] = "s3cret-token";

class AggregatorServiceTest : public ::testing::Test {
 protected:
  void Start(uint32_t workers, absl::Duration deadline, int max_receive_bytes = 64 << 20,
             const std::string& shard_token = "") {
    AggregationConfig config;
    config.job = "job";
    config.world_size = workers;
    config.groups = {{0, 1000, "dense"}, {1, 20000, "count_sketch:k=50"}};
    config.round_deadline = deadline;
    core_ = *AggregationCore::Create(config);
    service_ = std::make_unique<AggregatorService>(core_.get(), CallAuthConfig{kToken, shard_token});
    reaper_ = std::make_unique<RoundReaper>(core_.get(), absl::Milliseconds(20));
    InProcessServerOptions options;
    options.max_receive_bytes = max_receive_bytes;
    absl::StatusOr<std::unique_ptr<InProcessServer>> server = InProcessServer::Start({service_.get()}, options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    port_ = server_->port();
  }

  void TearDown() override {
    if (server_) server_->Shutdown();
    reaper_.reset();
  }

  std::unique_ptr<v1::Aggregator::Stub> Stub() {
    grpc::ChannelArguments args;
    args.SetMaxSendMessageSize(64 << 20);
    return v1::Aggregator::NewStub(grpc::CreateCustomChannel(
        "127.0.0.1:" + std::to_string(port_), grpc::InsecureChannelCredentials(), args));
  }

  grpc::Status Push(v1::Aggregator::Stub& stub, const v1::PushRequest& request,
                    v1::PushReply* reply, const char* token = kToken, const std::string& proof = "") {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    if (token != nullptr) context.AddMetadata("authorization", std::string("Bearer ") + token);
    if (!proof.empty()) context.AddMetadata(kWorkerProofKey, proof);
    return stub.Push(&context, request, reply);
  }

  static v1::PushRequest Request(uint64_t step, uint32_t group, uint32_t worker,
                                 const Payload& payload) {
    v1::PushRequest r;
    r.mutable_round()->set_job("job");
    r.mutable_round()->set_step(step);
    r.mutable_round()->set_group(group);
    r.set_worker(worker);
    PayloadToProto(payload, r.mutable_payload());
    return r;
  }

  static Payload Dense(float value, size_t n = 1000) {
    Payload p;
    p.dim = n;
    p.values.assign(n, value);
    return p;
  }

  std::unique_ptr<AggregationCore> core_;
  std::unique_ptr<AggregatorService> service_;
  std::unique_ptr<RoundReaper> reaper_;
  std::unique_ptr<InProcessServer> server_;
  int port_ = 0;
};

TEST_F(AggregatorServiceTest, ClientsOnSeparateChannelsCompleteDenseAndSketchRounds) {
  Start(3, absl::Seconds(10));
  std::vector<float> g(20000);
  for (size_t i = 0; i < g.size(); ++i) g[i] = (i % 997 == 0) ? 5.0f : 0.001f * (i % 7);
  auto sketcher = *CompressorRegistry::Default().Create("count_sketch:k=50");
  const Payload sketch = *sketcher->Encode(g, EncodeContext{5, {}});
  Payload summed = sketch;
  for (int w = 1; w < 3; ++w) ASSERT_TRUE(MergeInto(sketch, &summed).ok());
  const Update expected = *sketcher->Decode(summed);

  std::vector<v1::PushReply> dense_replies(3), sketch_replies(3);
  std::vector<grpc::Status> statuses(6);
  std::vector<std::thread> workers;
  for (uint32_t w = 0; w < 3; ++w) {
    workers.emplace_back([&, w] {
      auto stub = Stub();
      statuses[w] = Push(*stub, Request(5, 0, w, Dense(w + 1.0f)), &dense_replies[w]);
      statuses[3 + w] = Push(*stub, Request(5, 1, w, sketch), &sketch_replies[w]);
    });
  }
  for (std::thread& t : workers) t.join();
  for (const grpc::Status& s : statuses) ASSERT_TRUE(s.ok()) << s.error_message();
  for (uint32_t w = 0; w < 3; ++w) {
    EXPECT_EQ(dense_replies[w].contributors(), 3u);
    ASSERT_EQ(dense_replies[w].update().values_size(), 1000);
    EXPECT_EQ(dense_replies[w].update().values(0), 6.0f);
    const Update got = *UpdateFromProto(sketch_replies[w].update());
    EXPECT_EQ(got.indices, expected.indices);
    EXPECT_EQ(got.values, expected.values);
  }
}

// With a shard token the shard binds each push to its worker's rank: a push
// as worker 1 needs worker 1's proof (Join's), so a worker holding the
// token cannot push in another's name; nothing is counted for the refused.
TEST_F(AggregatorServiceTest, APushAsAnotherWorkerIsRefusedWithoutItsProof) {
  Start(2, absl::Seconds(10), 64 << 20, "shard-secret");
  const WorkerProofs proofs("shard-secret");
  auto stub = Stub();
  v1::PushReply reply;
  grpc::Status none = Push(*stub, Request(0, 0, 1, Dense(1)), &reply);
  EXPECT_EQ(none.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_NE(none.error_message().find("a push as worker 1 carries no worker proof"), std::string::npos)
      << none.error_message();
  grpc::Status stolen = Push(*stub, Request(0, 0, 1, Dense(1)), &reply, kToken, proofs.ProofOf("job", 0));
  EXPECT_EQ(stolen.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_NE(stolen.error_message().find("carries another worker's proof"), std::string::npos) << stolen.error_message();
  EXPECT_EQ(core_->stats().pushes, 0u);
  // Each worker with its own proof: the round completes.
  std::vector<v1::PushReply> replies(2);
  std::vector<grpc::Status> statuses(2);
  std::vector<std::thread> workers;
  for (uint32_t w = 0; w < 2; ++w) {
    workers.emplace_back([&, w] {
      auto own = Stub();
      statuses[w] = Push(*own, Request(0, 0, w, Dense(w + 1.0f)), &replies[w], kToken, proofs.ProofOf("job", w));
    });
  }
  for (std::thread& t : workers) t.join();
  for (uint32_t w = 0; w < 2; ++w) {
    ASSERT_TRUE(statuses[w].ok()) << statuses[w].error_message();
    EXPECT_EQ(replies[w].update().values(0), 3.0f);
  }
}

TEST_F(AggregatorServiceTest, RefusesBadRequestsWithTheRightCodeAndStaysUsable) {
  Start(2, absl::Seconds(10));
  auto stub = Stub();
  v1::PushReply reply;
  EXPECT_EQ(Push(*stub, Request(0, 0, 0, Dense(1)), &reply, nullptr).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(Push(*stub, Request(0, 0, 0, Dense(1)), &reply, "wrong").error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  v1::PushRequest malformed = Request(0, 0, 0, Dense(1));
  malformed.mutable_payload()->set_kind(v1::Payload::KIND_UNSPECIFIED);
  grpc::Status s = Push(*stub, malformed, &reply);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("kind 0"), std::string::npos) << s.error_message();
  EXPECT_EQ(Push(*stub, Request(0, 9, 0, Dense(1)), &reply).error_code(),
            grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(Push(*stub, Request(0, 0, 7, Dense(1)), &reply).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(Push(*stub, Request(0, 0, 0, Dense(1, 999)), &reply).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  // A diverged worker's payload: refused by name through the wire too.
  s = Push(*stub, Request(0, 0, 1, Dense(std::numeric_limits<float>::quiet_NaN())), &reply);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("payload of group 0 from worker 1 has a non-finite value: values[0] = nan"),
            std::string::npos)
      << s.error_message();
  // Bytes that are no PushRequest at all: a payload field cut short.
  {
    grpc::GenericStub raw(grpc::CreateChannel("127.0.0.1:" + std::to_string(port_),
                                              grpc::InsecureChannelCredentials()));
    const std::string garbage("\x1a\x40\x08\x01", 4);
    grpc::Slice slice(garbage);
    const grpc::ByteBuffer request(&slice, 1);
    grpc::ByteBuffer response;
    grpc::ClientContext context;
    context.AddMetadata("authorization", std::string("Bearer ") + kToken);
    std::promise<grpc::Status> done;
    raw.UnaryCall(&context, kPushMethod, grpc::StubOptions(), &request, &response,
                  [&done](grpc::Status status) { done.set_value(std::move(status)); });
    const grpc::Status status = done.get_future().get();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(status.error_message().find("malformed PushRequest: payload claims 64 bytes"), std::string::npos)
        << status.error_message();
  }
  EXPECT_EQ(core_->stats().pushes, 0u);

  // A good round after all of that.
  v1::PushReply r0, r1;
  std::thread other([&] {
    auto s2 = Stub();
    EXPECT_TRUE(Push(*s2, Request(0, 0, 1, Dense(2)), &r1).ok());
  });
  EXPECT_TRUE(Push(*stub, Request(0, 0, 0, Dense(1)), &r0).ok());
  other.join();
  EXPECT_EQ(r0.update().values(999), 3.0f);
}

// A worker of an older build pushes sketches hashed by another family: the
// server refuses them by name before they reach the round, and the round
// completes from the workers whose sketches add up.
TEST_F(AggregatorServiceTest, SketchesOfAnotherHashFamilyAreRefusedAndTheRoundGoesOn) {
  Start(2, absl::Seconds(10));
  std::vector<float> g(20000, 0.0f);
  for (size_t i = 0; i < g.size(); i += 401) g[i] = 3.0f;
  auto sketcher = *CompressorRegistry::Default().Create("count_sketch:k=50");
  const Payload sketch = *sketcher->Encode(g, EncodeContext{2, {}});
  auto stub = Stub();
  v1::PushReply reply;
  v1::PushRequest foreign = Request(2, 1, 1, sketch);
  foreign.mutable_payload()->mutable_sketch()->clear_hash_family();
  grpc::Status s = Push(*stub, foreign, &reply);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(s.error_message().find("hash family 0 (a SketchFuse build from before hash families were numbered)"),
            std::string::npos) << s.error_message();
  EXPECT_EQ(core_->stats().pushes, 0u);

  Payload summed = sketch;
  ASSERT_TRUE(MergeInto(sketch, &summed).ok());
  const Update expected = *sketcher->Decode(summed);
  v1::PushReply r0, r1;
  std::thread other([&] {
    auto s1 = Stub();
    EXPECT_TRUE(Push(*s1, Request(2, 1, 1, sketch), &r1).ok());
  });
  ASSERT_TRUE(Push(*stub, Request(2, 1, 0, sketch), &r0).ok());
  other.join();
  const Update got = *UpdateFromProto(r0.update());
  EXPECT_EQ(got.indices, expected.indices);
  EXPECT_EQ(got.values, expected.values);
}

TEST_F(AggregatorServiceTest, OversizedMessagesAreRefusedBeforeTheCore) {
  Start(1, absl::Seconds(10), /*max_receive_bytes=*/64 << 10);
  auto stub = Stub();
  v1::PushReply reply;
  // 20,000 floats (80 KB) exceed the 64 KiB limit. (1.1 is not a bfloat16
  // value, so the sketch goes as float32, not as bf16_values at 40 KB.)
  Payload big;
  big.kind = PayloadKind::kSketch;
  big.dim = 20000;
  big.sketch = {5, 4000, 1};
  big.values.assign(20000, 1.1f);
  grpc::Status s = Push(*stub, Request(0, 1, 0, big), &reply);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
  EXPECT_EQ(core_->stats().pushes, 0u);
  // A small push still works.
  EXPECT_TRUE(Push(*stub, Request(0, 0, 0, Dense(1)), &reply).ok());
  EXPECT_EQ(reply.update().values(0), 1.0f);
}

TEST_F(AggregatorServiceTest, MissingWorkerFailsTheRoundWithDeadlineExceeded) {
  Start(2, absl::Milliseconds(200));
  auto stub = Stub();
  v1::PushReply reply;
  grpc::Status s = Push(*stub, Request(3, 0, 0, Dense(1)), &reply);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_NE(s.error_message().find("missing workers 1 of 2"), std::string::npos)
      << s.error_message();
  EXPECT_EQ(core_->stats().rounds_open, 0u);
}

}  // namespace
}  // namespace sketchfuse
