// A hostile client holding valid credentials against a real sketchfuse_server
// (shard 0 and the coordinator, one process on loopback, two roles' tokens).
// Every RPC of both services gets the abusive requests of the hardening issue:
// a far-future round completed with both workers' ids, a flood of distinct
// future steps with 1 MiB payloads (and a job returning past the step window
// while it goes on, the race run both ways, one push per worker), 1 MiB strings in every field that is
// echoed, NaN and infinity, truncated and oversized bytes, duplicate and
// out-of-order pushes, another job, the other role's token, and pushes in
// another worker's name (the servers hold a shard token, so each worker's
// calls are bound to its rank: server/worker_proof.h; the abusive pushes
// carry the proof of the worker they push as, as a worker that joined
// would). Each is
// answered with its documented code and a short message; afterwards an
// honest round of two workers still completes with the exact sum, the
// shard's open rounds are back to what the window allows, and its resident
// memory stayed bounded (the flood would have held 1 GiB before).
// Usage (from Bazel): hostile_client_test <sketchfuse_server>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <future>
#include <limits>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/aggregator.grpc.pb.h"
#include "proto/coordinator.grpc.pb.h"
#include "proto/payload_convert.h"
#include "proto/push_codec.h"
#include "proto/rpc_channel.h"
#include "proto/run_config.h"
#include "common/sketch_hash.h"
#include "server/worker_proof.h"
#include "tests/process_util.h"

namespace sketchfuse {
namespace {

std::string server_binary;

constexpr char kWorkerToken[] = "worker-token-7f3a";
constexpr char kShardToken[] = "shard-token-91c2";
constexpr uint64_t kDim = 1 << 18;  // 1 MiB of floats per dense push
constexpr size_t kShortMessage = 400;  // what a quoted field may add to a message, and more

// Resident memory of `pid` in MiB.
double ResidentMiB(pid_t pid) { return static_cast<double>(ResidentKib(pid)) / 1024.0; }

class HostileClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = TestTempDir();
    const std::string config = dir_ + "/job.json";
    std::ofstream(config) << R"({"job": "h", "worldSize": 2, "roundDeadlineMs": 60000,
      "run": {"workload": "mlp", "layerSizes": [")"
                          << kDim << R"("]},
      "groups": [{"group": 0, "dim": )"
                          << kDim << R"(, "compressor": "dense", "layerEnd": 1}]})";
    std::ofstream(dir_ + "/token") << kWorkerToken << "\n";
    std::ofstream(dir_ + "/shard_token") << kShardToken << "\n";
    std::remove((dir_ + "/port").c_str());  // a file of an earlier test's server
    std::remove((dir_ + "/metrics_port").c_str());
    server_ = Spawn({server_binary, "--job_config=" + config, "--coordinator", "--port=0",
                     "--port_file=" + dir_ + "/port", "--token_file=" + dir_ + "/token",
                     "--shard_token_file=" + dir_ + "/shard_token", "--require_join_credentials",
                     "--max_message_mb=8", "--metrics_port=0",
                     "--metrics_port_file=" + dir_ + "/metrics_port"},
                    dir_ + "/server.out", dir_ + "/server.err");
    ASSERT_GT(server_, 0);
    const std::string port = WaitForFile(dir_ + "/port", std::chrono::seconds(30));
    ASSERT_FALSE(port.empty()) << ReadFileOrEmpty(dir_ + "/server.err");
    address_ = absl::StrCat("127.0.0.1:", std::stoi(port));
    grpc::ChannelArguments args;
    args.SetMaxSendMessageSize(64 << 20);
    args.SetMaxReceiveMessageSize(64 << 20);
    channel_ = grpc::CreateCustomChannel(address_, grpc::InsecureChannelCredentials(), args);
    aggregator_ = v1::Aggregator::NewStub(channel_);
    coordinator_ = v1::Coordinator::NewStub(channel_);
  }
  void TearDown() override { KillIfRunning(server_); }

  std::unique_ptr<grpc::ClientContext> Context(const char* token = kWorkerToken,
                                               std::chrono::milliseconds timeout = std::chrono::seconds(20),
                                               const std::string& proof = "") {
    auto context = std::make_unique<grpc::ClientContext>();
    if (token != nullptr) context->AddMetadata("authorization", std::string("Bearer ") + token);
    if (!proof.empty()) context->AddMetadata(kWorkerProofKey, proof);
    context->set_deadline(std::chrono::system_clock::now() + timeout);
    return context;
  }

  static v1::PushRequest Request(uint64_t step, uint32_t worker, float value, const std::string& job = "h") {
    Payload payload;
    payload.dim = kDim;
    payload.values.assign(kDim, value);
    v1::PushRequest request;
    request.mutable_round()->set_job(job);
    request.mutable_round()->set_step(step);
    request.mutable_round()->set_group(0);
    request.set_worker(worker);
    PayloadToProto(payload, request.mutable_payload());
    return request;
  }

  // A push with the proof of the worker it names (what that worker's Join
  // gave it), or with `proof` where given.
  grpc::Status Push(const v1::PushRequest& request, v1::PushReply* reply, const char* token = kWorkerToken,
                    std::chrono::milliseconds timeout = std::chrono::seconds(20),
                    const std::optional<std::string>& proof = std::nullopt) {
    const std::string carried =
        proof.has_value() ? *proof : WorkerProofs(kShardToken).ProofOf(request.round().job(), request.worker());
    return aggregator_->Push(Context(token, timeout, carried).get(), request, reply);
  }

  // Both workers push `step` with values 1 and 2 at once; every element of
  // the answer must be exactly 3.
  void ExpectHonestRound(uint64_t step) {
    std::vector<std::future<grpc::Status>> pushes;
    std::vector<v1::PushReply> replies(2);
    for (uint32_t w = 0; w < 2; ++w) {
      pushes.push_back(std::async(std::launch::async, [&, w] {
        return Push(Request(step, w, static_cast<float>(w + 1)), &replies[w]);
      }));
    }
    for (uint32_t w = 0; w < 2; ++w) {
      grpc::Status status = pushes[w].get();
      ASSERT_TRUE(status.ok()) << "honest step " << step << ", worker " << w << ": " << status.error_message();
      absl::StatusOr<Update> update = UpdateFromProto(replies[w].update());
      ASSERT_TRUE(update.ok()) << update.status();
      ASSERT_EQ(update->values.size(), kDim);
      for (uint64_t i = 0; i < kDim; i += 997) ASSERT_EQ(update->values[i], 3.0f) << "step " << step << " index " << i;
    }
  }

  // The job returns to the centralized route at `step`, outside the shard's
  // step window, while a flood claiming worker 1 runs: `first` pushes, then
  // the other worker 100 ms later, each once (no retry). Both must get the
  // exact sum.
  void ExpectHonestReturn(uint64_t step, uint32_t first) {
    std::vector<std::future<grpc::Status>> pushes;
    std::vector<v1::PushReply> replies(2);
    for (const uint32_t w : {first, 1 - first}) {
      pushes.push_back(std::async(std::launch::async, [&, w] {
        if (w != first) std::this_thread::sleep_for(std::chrono::milliseconds(100));
        return Push(Request(step, w, static_cast<float>(w + 1)), &replies[w]);
      }));
    }
    for (auto& push : pushes) {
      const grpc::Status status = push.get();
      ASSERT_TRUE(status.ok()) << "returning step " << step << ": " << status.error_message().substr(0, 300);
    }
    for (uint32_t w = 0; w < 2; ++w) {
      absl::StatusOr<Update> update = UpdateFromProto(replies[w].update());
      ASSERT_TRUE(update.ok()) << update.status();
      ASSERT_EQ(update->values.size(), kDim);
      for (uint64_t i = 0; i < kDim; i += 997) ASSERT_EQ(update->values[i], 3.0f) << "step " << step << " index " << i;
    }
  }

  // A Join as `id` with the job's own run, so that only its credentials
  // decide.
  static v1::JoinRequest JoinOfTheJob(const std::string& id) {
    v1::JoinRequest join;
    join.set_job("h");
    join.set_worker_id(id);
    join.mutable_run()->set_workload("mlp");
    join.mutable_run()->add_layer_sizes(kDim);
    join.set_fingerprint(RunFingerprint(join.run()));
    join.set_sketch_hash_family(kSketchHashFamily);
    return join;
  }

  // A refusal with `code` whose message is short and contains `needle`.
  static void ExpectRefused(const grpc::Status& status, grpc::StatusCode code, const std::string& needle,
                            const std::string& what) {
    EXPECT_EQ(status.error_code(), code) << what << ": " << status.error_message().substr(0, 300);
    EXPECT_LT(status.error_message().size(), kShortMessage) << what;
    EXPECT_NE(status.error_message().find(needle), std::string::npos)
        << what << ": " << status.error_message().substr(0, 300);
  }

  std::string dir_, address_;
  pid_t server_ = -1;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Aggregator::Stub> aggregator_;
  std::unique_ptr<v1::Coordinator::Stub> coordinator_;
};

TEST_F(HostileClientTest, AbusiveRequestsToEveryRpcLeaveTheHonestRoundExactAndMemoryBounded) {
  ExpectHonestRound(0);
  const double rss_before = ResidentMiB(server_);
  ASSERT_GT(rss_before, 0);
  v1::PushReply reply;

  // Aggregator/Push.
  // 1. A far-future round completed with both workers' credentials.
  constexpr uint64_t kFar = std::numeric_limits<int64_t>::max();
  {
    std::vector<std::future<grpc::Status>> far;
    for (uint32_t w = 0; w < 2; ++w) {
      far.push_back(std::async(std::launch::async, [&, w] {
        v1::PushReply r;
        return Push(Request(kFar, w, 1e6f), &r);
      }));
    }
    for (auto& f : far) EXPECT_TRUE(f.get().ok());
  }
  ExpectHonestRound(1);  // not "finished long ago"

  // 2. A flood of 1 MiB pushes of distinct future steps (1 GiB in all),
  // claiming worker 1 from four threads: outside the window it holds worker
  // 1's one round and one parked push, which wait until their client
  // deadline; every other push is refused at once (ABORTED), or replaces or
  // supersedes one farther out (UNAVAILABLE). Nothing else may answer it.
  std::atomic<int> unavailable{0}, waited{0}, other{0};
  auto flood = [&](uint64_t first_step, int pushes, std::atomic<bool>* stop) {
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        v1::PushRequest request = Request(0, 1, 5);
        for (int i = t; i < pushes && !(stop != nullptr && stop->load()); i += 4) {
          request.mutable_round()->set_step(first_step + i);
          v1::PushReply r;
          grpc::Status status = Push(request, &r, kWorkerToken, std::chrono::seconds(1));
          if (status.error_code() == grpc::StatusCode::UNAVAILABLE ||
              status.error_code() == grpc::StatusCode::ABORTED) {
            ++unavailable;
          } else if (status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
            ++waited;
          } else {
            ++other;
            std::printf("flood push of step %llu: code %d, %s\n", static_cast<unsigned long long>(first_step + i),
                        static_cast<int>(status.error_code()), status.error_message().substr(0, 200).c_str());
          }
        }
      });
    }
    for (std::thread& t : threads) t.join();
  };
  flood(1000000, 1024, nullptr);
  std::printf("flood: %d pushes refused, replaced or superseded, %d waited until their deadline\n",
              unavailable.load(), waited.load());
  EXPECT_EQ(unavailable.load() + waited.load(), 1024);
  EXPECT_GE(unavailable.load(), 1000);
  EXPECT_EQ(other.load(), 0);
  // The job comes back from the decentralized route at a step outside the
  // window, earlier than the flood's, racing a flood that goes on: the
  // worker the flood does not claim pushes first, then the one it claims
  // pushes first. Either way the job's round completes, one push each.
  {
    std::atomic<bool> stop{false};
    std::thread flooder([&] { flood(3000000, 1 << 20, &stop); });
    ExpectHonestReturn(500, /*first=*/0);
    ExpectHonestReturn(1000, /*first=*/1);
    stop = true;
    flooder.join();
    EXPECT_EQ(other.load(), 0);
  }

  // 3. Strings of 1 MiB that errors would echo.
  ExpectRefused(Push(Request(2, 0, 1, std::string(1 << 20, 'j')), &reply), grpc::StatusCode::INVALID_ARGUMENT,
                "(1048576 bytes)", "a 1 MiB job name");
  // 4. NaN and infinity, at a named index.
  {
    v1::PushRequest nan = Request(2, 0, 1);
    nan.mutable_payload()->set_values(7, std::nanf(""));
    ExpectRefused(Push(nan, &reply), grpc::StatusCode::INVALID_ARGUMENT, "values[7]", "a NaN");
    v1::PushRequest inf = Request(2, 1, 1);
    inf.mutable_payload()->set_values(9, std::numeric_limits<float>::infinity());
    ExpectRefused(Push(inf, &reply), grpc::StatusCode::INVALID_ARGUMENT, "values[9]", "an infinity");
  }
  // 5. Another job, a worker out of range, a group the shard does not own.
  ExpectRefused(Push(Request(2, 0, 1, "other-job"), &reply), grpc::StatusCode::INVALID_ARGUMENT, "serves job 'h'",
                "another job");
  {
    v1::PushRequest request = Request(2, 7, 1);
    ExpectRefused(Push(request, &reply), grpc::StatusCode::INVALID_ARGUMENT, "worker 7 is out of range",
                  "worker 7");
    request = Request(2, 0, 1);
    request.mutable_round()->set_group(3);
    ExpectRefused(Push(request, &reply), grpc::StatusCode::NOT_FOUND, "group 3", "group 3");
    // A round the group does not take (it takes one per step): refused by
    // number before it can open anything, the largest number included.
    for (const uint32_t round : {1u, 7u, std::numeric_limits<uint32_t>::max()}) {
      request = Request(2, 0, 1);
      request.mutable_round()->set_round(round);
      ExpectRefused(Push(request, &reply), grpc::StatusCode::INVALID_ARGUMENT,
                    absl::StrCat("round ", round, " of group 0: the group takes 1 round per step"),
                    absl::StrCat("round ", round));
    }
  }
  // 6. Truncated bytes and an oversized message.
  {
    const std::string bytes = Request(2, 0, 1).SerializeAsString();
    grpc::Slice slice(bytes.data(), bytes.size() / 2);
    grpc::ByteBuffer truncated(&slice, 1);
    grpc::GenericStub generic(channel_);
    grpc::ByteBuffer response;
    std::promise<grpc::Status> done;
    auto context = Context();
    generic.UnaryCall(context.get(), kPushMethod, grpc::StubOptions(), &truncated, &response,
                      [&](grpc::Status s) { done.set_value(s); });
    const grpc::Status status = done.get_future().get();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
    EXPECT_LT(status.error_message().size(), kShortMessage);
  }
  {
    v1::PushRequest huge = Request(2, 0, 1);  // 16 MiB of values: past --max_message_mb=8
    for (uint64_t i = kDim; i < 16 * kDim; ++i) huge.mutable_payload()->add_values(1.0f);
    EXPECT_EQ(Push(huge, &reply).error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << "a 16 MiB message";
  }
  // 7. Wrong roles: the shard token, no token, a wrong token.
  ExpectRefused(Push(Request(2, 0, 1), &reply, kShardToken), grpc::StatusCode::PERMISSION_DENIED,
                "Push is for workers", "Push with the shard token");
  ExpectRefused(Push(Request(2, 0, 1), &reply, "forged"), grpc::StatusCode::UNAUTHENTICATED, "wrong bearer token",
                "Push with a forged token");
  ExpectRefused(Push(Request(2, 0, 1), &reply, nullptr), grpc::StatusCode::UNAUTHENTICATED, "missing bearer token",
                "Push without a token");
  // 7b. In another worker's name: worker 0, holding the worker token and its
  // own proof, pushes as worker 1 (whose push would then be a mere repeat),
  // or with no proof at all.
  ExpectRefused(Push(Request(2, 1, 1), &reply, kWorkerToken, std::chrono::seconds(20),
                     WorkerProofs(kShardToken).ProofOf("h", 0)),
                grpc::StatusCode::PERMISSION_DENIED, "a push as worker 1 carries another worker's proof",
                "Push in another worker's name");
  ExpectRefused(Push(Request(2, 1, 1), &reply, kWorkerToken, std::chrono::seconds(20), std::string()),
                grpc::StatusCode::PERMISSION_DENIED, "a push as worker 1 carries no worker proof",
                "Push without a worker proof");
  // 8. Out of order: a step whose answer is no longer kept.
  for (uint64_t step = 2; step < 8; ++step) ExpectHonestRound(step);
  ExpectRefused(Push(Request(0, 0, 1), &reply), grpc::StatusCode::FAILED_PRECONDITION, "finished long ago",
                "step 0 again");
  // 9. Duplicate pushes of one worker: counted once.
  {
    std::vector<std::future<grpc::Status>> pushes;
    std::vector<v1::PushReply> replies(4);
    for (int i = 0; i < 4; ++i) {
      const uint32_t worker = i < 3 ? 0 : 1;  // worker 0 three times
      pushes.push_back(std::async(std::launch::async, [&, i, worker] {
        if (worker == 1) std::this_thread::sleep_for(std::chrono::milliseconds(200));
        return Push(Request(8, worker, static_cast<float>(worker + 1)), &replies[i]);
      }));
    }
    for (int i = 0; i < 4; ++i) {
      ASSERT_TRUE(pushes[i].get().ok());
      EXPECT_EQ(UpdateFromProto(replies[i].update())->values[5], 3.0f);
    }
  }

  // Coordinator: every RPC.
  {
    v1::RegisterShardRequest move;
    move.set_job("h");
    move.set_shard(0);
    move.set_num_shards(1);
    move.set_address("10.6.6.6:7070");
    move.set_sketch_hash_family(kSketchHashFamily);
    v1::RegisterShardReply registered;
    ExpectRefused(coordinator_->RegisterShard(Context().get(), move, &registered),
                  grpc::StatusCode::PERMISSION_DENIED, "RegisterShard is for shards", "a worker moving shard 0");
    move.set_address(std::string(1 << 20, 'a'));
    ExpectRefused(coordinator_->RegisterShard(Context(kShardToken).get(), move, &registered),
                  grpc::StatusCode::INVALID_ARGUMENT, "(1048576 bytes)", "a 1 MiB shard address");

    v1::JoinRequest join;
    join.set_job(std::string(1 << 20, 'j'));
    join.set_worker_id("w0");
    v1::JoinReply joined;
    ExpectRefused(coordinator_->Join(Context().get(), join, &joined), grpc::StatusCode::INVALID_ARGUMENT,
                  "(1048576 bytes)", "Join with a 1 MiB job");
    join.set_job("h");
    join.set_worker_id(std::string(1 << 20, 'w'));
    ExpectRefused(coordinator_->Join(Context().get(), join, &joined), grpc::StatusCode::INVALID_ARGUMENT,
                  "worker_id is 1048576 bytes", "Join with a 1 MiB worker id");
    join.set_worker_id("w0");
    ExpectRefused(coordinator_->Join(Context(kShardToken).get(), join, &joined), grpc::StatusCode::PERMISSION_DENIED,
                  "Join is for workers", "Join with the shard token");
    // A well-formed Join of another run whose string field holds a megabyte:
    // refused as a different configuration, quoting a short prefix of it (a
    // quoted megabyte would reach the client as RESOURCE_EXHAUSTED).
    v1::RunConfig huge_run;
    huge_run.set_scheme("sketch_ps");
    huge_run.set_compressor(std::string(1 << 20, 'c'));
    *join.mutable_run() = huge_run;
    join.set_fingerprint(RunFingerprint(huge_run));
    join.set_sketch_hash_family(kSketchHashFamily);
    ExpectRefused(coordinator_->Join(Context().get(), join, &joined), grpc::StatusCode::FAILED_PRECONDITION,
                  "(1048578 bytes)", "Join of a run with a 1 MiB compressor");
    join.clear_run();
    join.clear_fingerprint();

    v1::HeartbeatRequest beat;
    beat.set_job("h");
    beat.set_worker_id("nobody");
    v1::HeartbeatReply beaten;
    ExpectRefused(coordinator_->Heartbeat(Context().get(), beat, &beaten), grpc::StatusCode::NOT_FOUND,
                  "has not joined", "a heartbeat of nobody");

    v1::KeyValue entry;
    entry.set_job("h");
    entry.set_key(std::string(1 << 20, 'k'));
    v1::SetReply set;
    ExpectRefused(coordinator_->Set(Context().get(), entry, &set), grpc::StatusCode::INVALID_ARGUMENT,
                  "key is 1048576 bytes", "Set with a 1 MiB key");
    entry.set_key("k");
    entry.set_value(std::string((1 << 20) + 1, 'v'));
    ExpectRefused(coordinator_->Set(Context().get(), entry, &set), grpc::StatusCode::INVALID_ARGUMENT,
                  "value of key 'k'", "Set with an oversized value");
    // 10. The store's keys: only a ranked worker writes, each key once, and
    // a rank's rendezvous key only that rank.
    const WorkerProofs proofs(kShardToken);
    entry.set_key("collective/x/gloo/rank/1");
    entry.set_value("10.0.0.1:5000");
    ExpectRefused(coordinator_->Set(Context().get(), entry, &set), grpc::StatusCode::PERMISSION_DENIED,
                  "carries no worker proof of job 'h'", "Set without a rank's proof");
    ExpectRefused(coordinator_->Set(Context(kWorkerToken, std::chrono::seconds(20), proofs.ProofOf("h", 0)).get(),
                                    entry, &set),
                  grpc::StatusCode::PERMISSION_DENIED, "belongs to rank 1; rank 0 may not write it",
                  "worker 0 rewiring worker 1's rendezvous");
    const auto as_rank1 = [&] { return Context(kWorkerToken, std::chrono::seconds(20), proofs.ProofOf("h", 1)); };
    EXPECT_TRUE(coordinator_->Set(as_rank1().get(), entry, &set).ok());
    entry.set_key("diverged/x");
    entry.set_value("worker 1 diverged");
    EXPECT_TRUE(coordinator_->Set(as_rank1().get(), entry, &set).ok());
    entry.set_value("forged");
    ExpectRefused(coordinator_->Set(Context(kWorkerToken, std::chrono::seconds(20), proofs.ProofOf("h", 0)).get(),
                                    entry, &set),
                  grpc::StatusCode::ALREADY_EXISTS, "keys are written once", "replacing another's notice");
    // 11. Joining under another worker's id: only with that id's join
    // credential (the coordinator has --require_join_credentials).
    v1::JoinReply not_joined;
    for (const std::string& credential : {std::string(), proofs.JoinCredentialOf("h", "worker-0")}) {
      auto context = Context();
      if (!credential.empty()) context->AddMetadata(kJoinCredentialKey, credential);
      // A run and fingerprint the job's, so that only the credential is wrong.
      ExpectRefused(coordinator_->Join(context.get(), JoinOfTheJob("worker-1"), &not_joined),
                    grpc::StatusCode::PERMISSION_DENIED, "a Join as worker 'worker-1' carries",
                    credential.empty() ? "a Join without a join credential" : "a Join with worker-0's credential");
    }

    v1::GetRequest get;
    get.set_job("h");
    get.set_key("never");
    get.set_wait_ms(std::numeric_limits<uint32_t>::max());
    v1::KeyValue got;
    const grpc::Status waited =
        coordinator_->Get(Context(kWorkerToken, std::chrono::milliseconds(1500)).get(), get, &got);
    ExpectRefused(waited, grpc::StatusCode::NOT_FOUND, "of the 4294967295 asked", "a Get asking 49 days");
    EXPECT_EQ(waited.error_message().find("waited 4294967295"), std::string::npos) << waited.error_message();
    ExpectRefused(coordinator_->Get(Context(kShardToken).get(), get, &got), grpc::StatusCode::PERMISSION_DENIED,
                  "Get is for workers", "Get with the shard token");
  }

  // The honest workers carry on with exact sums; the shard holds at most
  // the one round outside its window (the flood's) and one parked push, and
  // its memory is bounded.
  for (uint64_t step = 1001; step < 1004; ++step) ExpectHonestRound(step);
  const double rss_after = ResidentMiB(server_);
  std::printf("server resident memory: %.1f MiB before the abuse, %.1f MiB after\n", rss_before, rss_after);
  EXPECT_LT(rss_after, rss_before + 96) << "the flood of 1 GiB of payloads must not be held";
  const std::string scrape = HttpGet(std::stoi(ReadFileOrEmpty(dir_ + "/metrics_port")), "/metrics");
  EXPECT_LE(MetricValue(scrape, "sketchfuse_server_rounds_open"), 1);
  EXPECT_LE(MetricValue(scrape, "sketchfuse_server_pushes_parked"), 1);
  EXPECT_GE(MetricValue(scrape, "sketchfuse_server_pushes_total{code=\"unavailable\"}") +
                MetricValue(scrape, "sketchfuse_server_pushes_total{code=\"aborted\"}"),
            1023);
  kill(server_, SIGTERM);
  EXPECT_EQ(WaitFor(server_, std::chrono::seconds(30)), 0);
}

// Index amplification, on a fresh shard: 7 MiB of 1-byte index gaps
// without values (a varint byte each, four bytes decoded), then a push of
// the same size with a value each. The first is refused before any index is
// decoded (a payload holds at most one index per float value it carries);
// the second decodes into about 1.6 times its bytes. Neither raises the
// shard's resident memory past three times the message.
TEST_F(HostileClientTest, OnePushOfIndexGapsRaisesTheShardsMemoryByAFewTimesItsSize) {
  ExpectHonestRound(0);
  v1::PushReply reply;
  {
    constexpr int kGaps = 7 << 20;
    v1::PushRequest gaps;
    gaps.mutable_round()->set_job("h");
    gaps.mutable_round()->set_step(9);
    gaps.set_worker(0);
    gaps.mutable_payload()->set_kind(v1::Payload::SPARSE);
    gaps.mutable_payload()->set_dim(uint64_t{1} << 31);
    for (int i = 0; i < kGaps; ++i) gaps.mutable_payload()->add_index_gaps(1);
    const double before = ResidentMiB(server_);
    ExpectRefused(Push(gaps, &reply), grpc::StatusCode::INVALID_ARGUMENT,
                  "index_gaps holds more than 0 values, the most this message allows (one per value it carries)",
                  "7 MiB of index gaps without values");
    const double without_values = ResidentMiB(server_);
    v1::PushRequest with_values = gaps;
    with_values.mutable_payload()->clear_index_gaps();
    for (int i = 0; i < kGaps / 5; ++i) {
      with_values.mutable_payload()->add_index_gaps(1);
      with_values.mutable_payload()->add_values(1);
    }
    const grpc::Status refused = Push(with_values, &reply);
    EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << refused.error_message().substr(0, 300);
    const double after = ResidentMiB(server_);
    std::printf("a 7 MiB push of index gaps: server memory %.1f MiB before, %.1f after the gaps alone, %.1f after "
                "gaps with values\n", before, without_values, after);
    EXPECT_LT(without_values - before, 2 * 7.0) << "gaps without values must not be decoded";
    EXPECT_LT(after - before, 3 * 7.0) << "a push's indices must decode within a small multiple of its size";
  }

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
