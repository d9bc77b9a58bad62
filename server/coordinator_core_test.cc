#include "server/coordinator_core.h"

#include <cstdint>
#include <future>
#include <vector>
#include <thread>

#include "gtest/gtest.h"
#include "absl/strings/str_cat.h"
#include "common/sketch_hash.h"
#include "proto/run_config.h"

namespace sketchfuse {
namespace {

v1::JobConfig TestJob(uint32_t world_size) {
  v1::JobConfig job;
  job.set_job("j");
  job.set_world_size(world_size);
  job.set_hash_seed(42);
  v1::RunConfig* run = job.mutable_run();
  run->set_workload("mlp");
  run->set_scheme("sketch_ps");
  run->set_compressor("count_sketch:density=0.01");
  for (uint64_t size : {1000, 10, 500, 5}) run->add_layer_sizes(size);
  v1::GroupConfig* a = job.add_groups();
  a->set_group(0);
  a->set_dim(1010);
  a->set_layer_begin(0);
  a->set_layer_end(2);
  a->set_compressor("count_sketch:density=0.01");
  v1::GroupConfig* b = job.add_groups();
  b->set_group(1);
  b->set_dim(505);
  b->set_layer_begin(2);
  b->set_layer_end(4);
  b->set_compressor("count_sketch:density=0.01");
  return job;
}

v1::JoinRequest JoinOf(const v1::JobConfig& job, const std::string& id) {
  v1::JoinRequest request;
  request.set_job(job.job());
  request.set_worker_id(id);
  *request.mutable_run() = job.run();
  request.set_fingerprint(RunFingerprint(job.run()));
  request.set_sketch_hash_family(kSketchHashFamily);
  return request;
}

// A registration of shard `shard` of `num_shards` that states `job`'s config,
// as the shard server does.
v1::RegisterShardRequest ShardOf(const v1::JobConfig& job, uint32_t shard, uint32_t num_shards) {
  v1::RegisterShardRequest request;
  request.set_job("j");
  request.set_job_fingerprint(JobFingerprint(job));
  request.set_partitioning(DescribeGroups(job));
  request.set_shard(shard);
  request.set_num_shards(num_shards);
  request.set_address("127.0.0.1:" + std::to_string(7000 + shard));
  request.set_sketch_hash_family(kSketchHashFamily);
  return request;
}

std::unique_ptr<CoordinatorCore> MakeCore(uint32_t world_size, int num_shards = 1) {
  CoordinatorOptions options;
  options.num_shards = num_shards;
  absl::StatusOr<std::unique_ptr<CoordinatorCore>> core = CoordinatorCore::Create(TestJob(world_size), options);
  EXPECT_TRUE(core.ok()) << core.status();
  return *std::move(core);
}

absl::Time Soon() { return absl::Now() + absl::Seconds(20); }

TEST(NaturalLessTest, OrdersTrailingNumbersByValue) {
  EXPECT_TRUE(NaturalLess("worker-2", "worker-10"));
  EXPECT_FALSE(NaturalLess("worker-10", "worker-2"));
  EXPECT_TRUE(NaturalLess("a", "b"));
  EXPECT_TRUE(NaturalLess("w-09", "w-10"));
  EXPECT_FALSE(NaturalLess("w-3", "w-3"));
}

TEST(CoordinatorCoreTest, AssignsRanksInNaturalOrderOnceEveryoneArrived) {
  std::unique_ptr<CoordinatorCore> core = MakeCore(3, 2);
  const v1::JobConfig job = TestJob(3);
  std::vector<std::future<absl::StatusOr<v1::JoinReply>>> joins;
  for (const std::string id : {"worker-10", "worker-2", "worker-1"}) {
    joins.push_back(std::async(std::launch::async, [&core, job, id] {
      return core->Join(JoinOf(job, id), Soon(), nullptr);
    }));
  }
  ASSERT_TRUE(core->RegisterShard(ShardOf(core->job(), 1, 2)).ok());
  ASSERT_TRUE(core->RegisterShard(ShardOf(core->job(), 0, 2)).ok());
  std::vector<uint32_t> ranks;
  for (auto& join : joins) {
    absl::StatusOr<v1::JoinReply> reply = join.get();
    ASSERT_TRUE(reply.ok()) << reply.status();
    ranks.push_back(reply->rank());
    EXPECT_EQ(reply->world_size(), 3u);
    EXPECT_EQ(reply->job().hash_seed(), 42u);
    EXPECT_EQ(reply->job().groups_size(), 2);
    ASSERT_EQ(reply->shards_size(), 2);
    EXPECT_EQ(reply->shards(1).address(), "127.0.0.1:7001");
    ASSERT_EQ(reply->shard_of_group_size(), 2);
    // The larger group goes to shard 0, the other to shard 1.
    EXPECT_EQ(reply->shard_of_group(0), 0u);
    EXPECT_EQ(reply->shard_of_group(1), 1u);
    EXPECT_EQ(reply->fingerprint(), RunFingerprint(job.run()));
  }
  EXPECT_EQ(ranks, (std::vector<uint32_t>{2, 1, 0}));
  // A restarted worker gets its rank back at once.
  absl::StatusOr<v1::JoinReply> again = core->Join(JoinOf(job, "worker-2"), Soon(), nullptr);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->rank(), 1u);
}

TEST(CoordinatorCoreTest, RefusesADifferentConfigurationListingTheFields) {
  std::unique_ptr<CoordinatorCore> core = MakeCore(2);
  v1::JobConfig other = TestJob(2);
  other.mutable_run()->set_scheme("topk_ps");
  other.mutable_run()->set_layer_sizes(1, 11);
  absl::StatusOr<v1::JoinReply> reply = core->Join(JoinOf(other, "w-0"), Soon(), nullptr);
  ASSERT_EQ(reply.status().code(), absl::StatusCode::kFailedPrecondition);
  const std::string message(reply.status().message());
  EXPECT_NE(message.find("scheme: job has \"sketch_ps\", worker has \"topk_ps\""), std::string::npos) << message;
  EXPECT_NE(message.find("first difference at [1]: 10 vs 11"), std::string::npos) << message;
  // A worker stepping another optimizer (or another schedule) is another run.
  v1::JobConfig adam = TestJob(2);
  adam.mutable_run()->set_optimizer("adamw:beta1=0.9,beta2=0.99,eps=1e-08,weight_decay=0.1");
  adam.mutable_run()->set_lr_schedule("cosine");
  reply = core->Join(JoinOf(adam, "w-0"), Soon(), nullptr);
  ASSERT_EQ(reply.status().code(), absl::StatusCode::kFailedPrecondition);
  const std::string why(reply.status().message());
  EXPECT_NE(why.find("optimizer: job has \"\", worker has \"adamw:beta1=0.9,beta2=0.99,eps=1e-08,weight_decay=0.1\""),
            std::string::npos)
      << why;
  EXPECT_NE(why.find("lr_schedule: job has \"\", worker has \"cosine\""), std::string::npos) << why;
}

// A job cut into partitions: a worker that leaves the bound to the job
// joins and takes the job's; one that states another is refused naming the
// field; a shard whose job config is another (other partitions) is refused
// naming both partitionings, and one with the coordinator's is taken.
TEST(CoordinatorCoreTest, WorkersAndShardsMustHoldTheJobsPartitions) {
  v1::JobConfig job = TestJob(1);
  job.mutable_run()->set_partition_elements(600);  // 1010 -> 505 + 505; 505 stays whole
  job.mutable_groups(1)->set_group(2);
  v1::GroupConfig* second = job.mutable_groups()->Add();
  *second = job.groups(0);
  job.mutable_groups(0)->set_dim(505);
  second->set_group(1);
  second->set_dim(505);
  second->set_offset(505);
  job.mutable_groups()->SwapElements(1, 2);
  CoordinatorOptions options;
  options.num_shards = 2;
  absl::StatusOr<std::unique_ptr<CoordinatorCore>> made = CoordinatorCore::Create(job, options);
  ASSERT_TRUE(made.ok()) << made.status();
  CoordinatorCore& core = **made;

  v1::RegisterShardRequest other = ShardOf(core.job(), 1, 2);
  v1::JobConfig unpartitioned = TestJob(1);
  unpartitioned.mutable_run()->set_partition_elements(0);
  other.set_job_fingerprint(JobFingerprint(unpartitioned));
  other.set_partitioning(DescribeGroups(unpartitioned));
  absl::Status refused = core.RegisterShard(other);
  ASSERT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition) << refused;
  // A hostile shard's 1 MiB partitioning is quoted by a short prefix only.
  v1::RegisterShardRequest huge = other;
  huge.set_partitioning(std::string(1 << 20, 'p'));
  const absl::Status cut = core.RegisterShard(huge);
  EXPECT_EQ(cut.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_LT(cut.message().size(), 600u) << cut.message().substr(0, 200);
  EXPECT_NE(cut.message().find("(1048576 bytes)"), absl::string_view::npos) << cut.message().substr(0, 400);
  EXPECT_NE(refused.message().find("'2 groups'"), absl::string_view::npos) << refused;
  EXPECT_NE(refused.message().find("3 partitions of 2 fused groups (partition_elements 600)"), absl::string_view::npos)
      << refused;
  for (uint32_t s : {0u, 1u}) {
    v1::RegisterShardRequest shard = ShardOf(core.job(), s, 2);
    shard.set_job_fingerprint(JobFingerprint(job));
    ASSERT_TRUE(core.RegisterShard(shard).ok());
  }

  v1::JobConfig stated = job;
  stated.mutable_run()->set_partition_elements(300);
  absl::Status status = core.Join(JoinOf(stated, "w-0"), Soon(), nullptr).status();
  ASSERT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
  EXPECT_NE(status.message().find("partition_elements: job has 600, worker has 300"), absl::string_view::npos) << status;

  v1::JobConfig unstated = job;
  unstated.mutable_run()->clear_partition_elements();
  absl::StatusOr<v1::JoinReply> reply = core.Join(JoinOf(unstated, "w-0"), Soon(), nullptr);
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ(reply->job().run().partition_elements(), 600u);
  EXPECT_EQ(reply->job().groups_size(), 3);
  EXPECT_EQ(reply->shard_of_group_size(), 3);
}

TEST(CoordinatorCoreTest, RefusesMalformedJoins) {
  std::unique_ptr<CoordinatorCore> core = MakeCore(2);
  const v1::JobConfig job = TestJob(2);
  v1::JoinRequest request = JoinOf(job, "w-0");
  request.set_job("other");
  EXPECT_EQ(core->Join(request, Soon(), nullptr).status().code(), absl::StatusCode::kInvalidArgument);
  request = JoinOf(job, "");
  EXPECT_EQ(core->Join(request, Soon(), nullptr).status().code(), absl::StatusCode::kInvalidArgument);
  request = JoinOf(job, "bad id\n");
  EXPECT_EQ(core->Join(request, Soon(), nullptr).status().code(), absl::StatusCode::kInvalidArgument);
  request = JoinOf(job, std::string(200, 'x'));
  EXPECT_EQ(core->Join(request, Soon(), nullptr).status().code(), absl::StatusCode::kInvalidArgument);
  request = JoinOf(job, "w-0");
  request.set_fingerprint("0000000000000000");
  absl::Status status = core->Join(request, Soon(), nullptr).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("does not match the run"), absl::string_view::npos);
}

// A worker or a shard built with another Count-Sketch hash family would push
// sketches that do not add up with the others': both are refused by name,
// and the job goes on assembling from the rest.
TEST(CoordinatorCoreTest, RefusesWorkersAndShardsOfAnotherSketchHashFamily) {
  std::unique_ptr<CoordinatorCore> core = MakeCore(1, 2);
  const v1::JobConfig job = TestJob(1);
  for (uint32_t family : {0u, kSketchHashFamily - 1, kSketchHashFamily + 1}) {
    v1::JoinRequest join = JoinOf(job, "w-old");
    join.set_sketch_hash_family(family);
    absl::Status status = core->Join(join, Soon(), nullptr).status();
    ASSERT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
    EXPECT_NE(status.message().find(absl::StrCat("worker 'w-old' uses Count-Sketch hash family ", family)),
              absl::string_view::npos) << status;
    EXPECT_NE(status.message().find(absl::StrCat("this build uses family ", kSketchHashFamily)),
              absl::string_view::npos) << status;
    v1::RegisterShardRequest shard = ShardOf(core->job(), 1, 2);
    shard.set_address("127.0.0.1:9999");
    shard.set_sketch_hash_family(family);
    status = core->RegisterShard(shard);
    ASSERT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
    EXPECT_NE(status.message().find(absl::StrCat("shard 1 at 127.0.0.1:9999 uses Count-Sketch hash family ", family)),
              absl::string_view::npos) << status;
  }
  // Unnumbered builds are named as such.
  v1::JoinRequest unnumbered = JoinOf(job, "w-old");
  unnumbered.set_sketch_hash_family(0);
  EXPECT_NE(core->Join(unnumbered, Soon(), nullptr).status().message().find("before hash families were numbered"),
            absl::string_view::npos);
  // Nothing was recorded: the job assembles from a worker and shards of this build,
  // and the refused worker is not counted among the joined.
  ASSERT_TRUE(core->RegisterShard(ShardOf(core->job(), 0, 2)).ok());
  ASSERT_TRUE(core->RegisterShard(ShardOf(core->job(), 1, 2)).ok());
  absl::StatusOr<v1::JoinReply> reply = core->Join(JoinOf(job, "w-0"), Soon(), nullptr);
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ(reply->rank(), 0u);
  EXPECT_EQ(reply->sketch_hash_family(), kSketchHashFamily);
  ASSERT_EQ(reply->shards_size(), 2);
  EXPECT_EQ(reply->shards(1).address(), "127.0.0.1:7001");  // not the refused shard's
}

TEST(CoordinatorCoreTest, JoinTimesOutNamingWhoIsMissingAndTheWorkerStaysJoined) {
  std::unique_ptr<CoordinatorCore> core = MakeCore(3, 2);
  const v1::JobConfig job = TestJob(3);
  ASSERT_TRUE(core->RegisterShard(ShardOf(core->job(), 0, 2)).ok());
  absl::Status status = core->Join(JoinOf(job, "w-0"), absl::Now() + absl::Milliseconds(100), nullptr).status();
  ASSERT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(status.message().find("2 of 3 workers have not joined (joined: w-0)"), absl::string_view::npos) << status;
  EXPECT_NE(status.message().find("shards not registered: 1"), absl::string_view::npos) << status;
  // Cancellation ends the wait too.
  status = core->Join(JoinOf(job, "w-1"), Soon(), [] { return true; }).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kCancelled);
  // Both stay joined: the heartbeat knows them.
  v1::HeartbeatRequest beat;
  beat.set_job("j");
  beat.set_worker_id("w-1");
  absl::StatusOr<v1::HeartbeatReply> reply = core->Heartbeat(beat, absl::Now());
  ASSERT_TRUE(reply.ok());
  EXPECT_EQ(reply->alive_workers(), 2u);
}

TEST(CoordinatorCoreTest, RefusesAWorkerBeyondTheWorldSize) {
  std::unique_ptr<CoordinatorCore> core = MakeCore(1);
  const v1::JobConfig job = TestJob(1);
  ASSERT_TRUE(core->RegisterShard(ShardOf(core->job(), 0, 1)).ok());
  ASSERT_TRUE(core->Join(JoinOf(job, "w-0"), Soon(), nullptr).ok());
  absl::Status status = core->Join(JoinOf(job, "w-1"), Soon(), nullptr).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(status.message().find("already has its 1 workers (w-0)"), absl::string_view::npos) << status;
}

// Until the job is complete, a joined worker that waits in no Join and is
// not heard from for liveness_timeout is forgotten at the next Join (a
// mistyped id, a worker that exited): the job assembles from the workers
// still there. One still waiting keeps its place.
TEST(CoordinatorCoreTest, ASilentJoinerGivesItsPlaceUntilTheJobIsComplete) {
  CoordinatorOptions options;
  options.liveness_timeout = absl::Milliseconds(200);
  std::unique_ptr<CoordinatorCore> core = *CoordinatorCore::Create(TestJob(3), options);
  const v1::JobConfig job = TestJob(3);
  ASSERT_TRUE(core->RegisterShard(ShardOf(core->job(), 0, 1)).ok());
  EXPECT_EQ(core->Join(JoinOf(job, "typo-0"), absl::Now() + absl::Milliseconds(50), nullptr).status().code(),
            absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(core->Join(JoinOf(job, "typo-1"), absl::Now() + absl::Milliseconds(50), nullptr).status().code(),
            absl::StatusCode::kDeadlineExceeded);
  // Silent for 400 ms, the typos are forgotten when w-0 joins; w-0 then
  // waits longer than the liveness timeout and keeps its place.
  absl::SleepFor(absl::Milliseconds(400));
  auto first = std::async(std::launch::async, [&] { return core->Join(JoinOf(job, "w-0"), Soon(), nullptr); });
  absl::SleepFor(absl::Milliseconds(400));
  auto second = std::async(std::launch::async, [&] { return core->Join(JoinOf(job, "w-1"), Soon(), nullptr); });
  absl::StatusOr<v1::JoinReply> third = core->Join(JoinOf(job, "w-2"), Soon(), nullptr);
  ASSERT_TRUE(third.ok()) << third.status();
  absl::StatusOr<v1::JoinReply> a = first.get(), b = second.get();
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(a->rank(), 0u);
  EXPECT_EQ(b->rank(), 1u);
  EXPECT_EQ(third->rank(), 2u);
  // Once the job is complete, places are kept: a newcomer is refused even
  // after every worker went silent.
  absl::SleepFor(absl::Milliseconds(400));
  absl::Status late = core->Join(JoinOf(job, "typo-0"), Soon(), nullptr).status();
  EXPECT_EQ(late.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(late.message().find("already has its 3 workers (w-0, w-1, w-2)"), absl::string_view::npos) << late;
}

// With proofs on (the servers' shard token), Join hands each worker its
// rank's proof, and an id that has its rank joins again or heartbeats only
// with that proof: a holder of the worker token cannot take another
// worker's rank, proof or liveness. Without them, replies carry none.
TEST(CoordinatorCoreTest, AWorkersRankIsBoundToItsProof) {
  CoordinatorOptions options;
  options.proofs = WorkerProofs("shard-secret");
  std::unique_ptr<CoordinatorCore> core = *CoordinatorCore::Create(TestJob(2), options);
  const v1::JobConfig job = TestJob(2);
  ASSERT_TRUE(core->RegisterShard(ShardOf(core->job(), 0, 1)).ok());
  auto other = std::async(std::launch::async, [&] { return core->Join(JoinOf(job, "w-1"), Soon(), nullptr); });
  absl::StatusOr<v1::JoinReply> first = core->Join(JoinOf(job, "w-0"), Soon(), nullptr);
  absl::StatusOr<v1::JoinReply> second = other.get();
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ(first->worker_proof(), options.proofs.ProofOf("j", 0));
  EXPECT_EQ(second->worker_proof(), options.proofs.ProofOf("j", 1));
  // w-0 again: refused without a proof and with w-1's; taken with its own.
  absl::Status none = core->Join(JoinOf(job, "w-0"), Soon(), nullptr).status();
  EXPECT_EQ(none.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(none.message().find("a re-join as worker 'w-0' (rank 0) carries no worker proof"), absl::string_view::npos)
      << none;
  EXPECT_EQ(core->Join(JoinOf(job, "w-0"), Soon(), nullptr, second->worker_proof()).status().code(),
            absl::StatusCode::kPermissionDenied);
  absl::StatusOr<v1::JoinReply> again = core->Join(JoinOf(job, "w-0"), Soon(), nullptr, first->worker_proof());
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->rank(), 0u);
  v1::HeartbeatRequest beat;
  beat.set_job("j");
  beat.set_worker_id("w-1");
  EXPECT_EQ(core->Heartbeat(beat, absl::Now()).status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(core->Heartbeat(beat, absl::Now(), first->worker_proof()).status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(core->Heartbeat(beat, absl::Now(), second->worker_proof()).ok());

  std::unique_ptr<CoordinatorCore> open = MakeCore(1);
  ASSERT_TRUE(open->RegisterShard(ShardOf(open->job(), 0, 1)).ok());
  absl::StatusOr<v1::JoinReply> plain = open->Join(JoinOf(TestJob(1), "w-0"), Soon(), nullptr);
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->worker_proof(), "");
  EXPECT_TRUE(open->Join(JoinOf(TestJob(1), "w-0"), Soon(), nullptr).ok());
}

// With require_join_credentials an id joins only with the credential its
// operator issued for it: not without one, not with another id's, not with
// a rank proof; before the job is complete and after. A re-join of a ranked
// id needs both its credential and its rank's proof.
TEST(CoordinatorCoreTest, OnlyTheHolderOfAnIdsJoinCredentialJoinsAsIt) {
  CoordinatorOptions options;
  options.proofs = WorkerProofs("shard-secret");
  options.require_join_credentials = true;
  std::unique_ptr<CoordinatorCore> core = *CoordinatorCore::Create(TestJob(2), options);
  const v1::JobConfig job = TestJob(2);
  ASSERT_TRUE(core->RegisterShard(ShardOf(core->job(), 0, 1)).ok());
  const std::string w0 = options.proofs.JoinCredentialOf("j", "w-0"), w1 = options.proofs.JoinCredentialOf("j", "w-1");
  EXPECT_NE(w0, w1);
  EXPECT_EQ(w0.size(), 64u);
  EXPECT_NE(w0, options.proofs.ProofOf("j", 0));
  // Before the job is complete: a Join as w-1 without its credential, or with
  // w-0's, takes no place.
  for (const std::string& wrong : {std::string(), w0, options.proofs.ProofOf("j", 1)}) {
    const absl::Status refused = core->Join(JoinOf(job, "w-1"), Soon(), nullptr, "", wrong).status();
    EXPECT_EQ(refused.code(), absl::StatusCode::kPermissionDenied) << refused;
    EXPECT_NE(refused.message().find("a Join as worker 'w-1' carries"), absl::string_view::npos) << refused;
    EXPECT_LT(refused.message().size(), 300u);
    EXPECT_EQ(refused.message().find(w0), absl::string_view::npos) << "a refusal echoes no credential";
  }
  auto other = std::async(std::launch::async, [&] { return core->Join(JoinOf(job, "w-1"), Soon(), nullptr, "", w1); });
  absl::StatusOr<v1::JoinReply> first = core->Join(JoinOf(job, "w-0"), Soon(), nullptr, "", w0);
  absl::StatusOr<v1::JoinReply> second = other.get();
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(first->rank(), 0u);
  // After: w-0 again needs its credential and its rank's proof.
  EXPECT_EQ(core->Join(JoinOf(job, "w-0"), Soon(), nullptr, first->worker_proof(), w1).status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(core->Join(JoinOf(job, "w-0"), Soon(), nullptr, second->worker_proof(), w0).status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(core->Join(JoinOf(job, "w-0"), Soon(), nullptr, first->worker_proof(), w0).ok());
  // Credentials need proofs: a coordinator without the shard token refuses
  // to start with them required.
  CoordinatorOptions no_token;
  no_token.require_join_credentials = true;
  absl::StatusOr<std::unique_ptr<CoordinatorCore>> refused = CoordinatorCore::Create(TestJob(2), no_token);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("need the servers' shard token"), absl::string_view::npos);
}

// With proofs on only a ranked worker writes, a key "<...>/rank/<r>" only
// rank r (again, after a restart), and every other key once: a worker's
// credentials cannot rewire another's rendezvous, replace a key, or write
// before it has a rank.
TEST(CoordinatorCoreTest, TheStoresKeysAreWrittenOnceAndRankKeysOnlyByTheirRank) {
  CoordinatorOptions options;
  options.proofs = WorkerProofs("shard-secret");
  std::unique_ptr<CoordinatorCore> core = *CoordinatorCore::Create(TestJob(3), options);
  const std::string rank0 = options.proofs.ProofOf("j", 0), rank2 = options.proofs.ProofOf("j", 2);
  v1::KeyValue entry;
  entry.set_job("j");
  entry.set_key("collective/run/gloo/rank/2");
  entry.set_value("10.0.0.2:1234");
  // No proof, another job's proof, another rank's.
  for (const std::string& proof : {std::string(), WorkerProofs("other").ProofOf("j", 2), rank0}) {
    const absl::Status refused = core->Set(entry, proof);
    EXPECT_EQ(refused.code(), absl::StatusCode::kPermissionDenied) << refused;
    EXPECT_LT(refused.message().size(), 300u);
  }
  EXPECT_NE(core->Set(entry, rank0).message().find("key 'collective/run/gloo/rank/2' belongs to rank 2; rank 0 may "
                                                   "not write it"),
            absl::string_view::npos);
  ASSERT_TRUE(core->Set(entry, rank2).ok());
  ASSERT_TRUE(core->Set(entry, rank2).ok());  // the same Set again
  entry.set_value("10.0.0.9:1234");           // rank 2 restarted elsewhere: its own key, again
  ASSERT_TRUE(core->Set(entry, rank2).ok());
  entry.set_value("10.6.6.6:1");
  EXPECT_EQ(core->Set(entry, rank0).code(), absl::StatusCode::kPermissionDenied);
  v1::GetRequest get;
  get.set_job("j");
  get.set_key("collective/run/gloo/rank/2");
  EXPECT_EQ(core->Get(get, Soon(), nullptr)->value(), "10.0.0.9:1234");
  // Other keys: any ranked worker, once (a divergence notice stays the first).
  entry.set_key("diverged/run");
  entry.set_value("rank 0 diverged");
  ASSERT_TRUE(core->Set(entry, rank0).ok());
  ASSERT_TRUE(core->Set(entry, rank0).ok());  // the same Set again
  entry.set_value("forged");
  const absl::Status replaced = core->Set(entry, rank2);
  EXPECT_EQ(replaced.code(), absl::StatusCode::kAlreadyExists) << replaced;
  EXPECT_NE(replaced.message().find("is already set, to another value: keys are written once"), absl::string_view::npos);
  get.set_key("diverged/run");
  EXPECT_EQ(core->Get(get, Soon(), nullptr)->value(), "rank 0 diverged");
  // What counts as a rank's key: the last two components "rank", "<r>".
  entry.set_value("v");
  for (const char* key : {"a/rank/0/x", "a/ranks/2", "a/rank/two", "rank/0x0", "a/rank/", "a/rank/+0", "a/rank/ 0"}) {
    entry.set_key(key);
    EXPECT_TRUE(core->Set(entry, rank2).ok()) << key;
  }
  entry.set_key("rank/0");
  EXPECT_EQ(core->Set(entry, rank2).code(), absl::StatusCode::kPermissionDenied);
}

TEST(CoordinatorCoreTest, RefusesBadShardRegistrations) {
  std::unique_ptr<CoordinatorCore> core = MakeCore(1, 2);
  v1::RegisterShardRequest request = ShardOf(core->job(), 2, 2);
  EXPECT_EQ(core->RegisterShard(request).code(), absl::StatusCode::kInvalidArgument);
  // Another shard count is another job config: refused by name, not recorded.
  request = ShardOf(core->job(), 0, 3);
  absl::Status status = core->RegisterShard(request);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
  EXPECT_NE(status.message().find("shard 0 was started with --num_shards=3; this job has 2 shards"),
            absl::string_view::npos) << status;
  // A registration that states no job config is refused, not let through unchecked.
  request = ShardOf(core->job(), 0, 2);
  request.clear_job_fingerprint();
  status = core->RegisterShard(request);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
  EXPECT_NE(status.message().find("states no job config (job_fingerprint is empty)"), absl::string_view::npos)
      << status;
  request = ShardOf(core->job(), 0, 2);
  request.set_address("nocolon");
  EXPECT_EQ(core->RegisterShard(request).code(), absl::StatusCode::kInvalidArgument);
  request = ShardOf(core->job(), 0, 2);
  request.set_job("x");
  EXPECT_EQ(core->RegisterShard(request).code(), absl::StatusCode::kInvalidArgument);
}

TEST(CoordinatorCoreTest, HeartbeatsReportDeadWorkers) {
  std::unique_ptr<CoordinatorCore> core = MakeCore(2);
  const v1::JobConfig job = TestJob(2);
  ASSERT_TRUE(core->RegisterShard(ShardOf(core->job(), 0, 1)).ok());
  auto other = std::async(std::launch::async, [&] { return core->Join(JoinOf(job, "w-1"), Soon(), nullptr); });
  ASSERT_TRUE(core->Join(JoinOf(job, "w-0"), Soon(), nullptr).ok());
  ASSERT_TRUE(other.get().ok());
  v1::HeartbeatRequest beat;
  beat.set_job("j");
  beat.set_worker_id("w-0");
  // w-1 is silent for longer than the 15 s liveness timeout.
  absl::StatusOr<v1::HeartbeatReply> reply = core->Heartbeat(beat, absl::Now() + absl::Seconds(30));
  ASSERT_TRUE(reply.ok());
  ASSERT_EQ(reply->dead_workers_size(), 1);
  EXPECT_EQ(reply->dead_workers(0), "w-1");
  EXPECT_EQ(reply->alive_workers(), 1u);
  beat.set_worker_id("stranger");
  EXPECT_EQ(core->Heartbeat(beat, absl::Now()).status().code(), absl::StatusCode::kNotFound);
}

TEST(CoordinatorCoreTest, KeyValueStoreWaitsForKeysAndEnforcesBounds) {
  std::unique_ptr<CoordinatorCore> core = MakeCore(1);
  v1::GetRequest get;
  get.set_job("j");
  get.set_key("gloo/rank0");
  EXPECT_EQ(core->Get(get, Soon(), nullptr).status().code(), absl::StatusCode::kNotFound);
  get.set_wait_ms(10000);
  auto waiting = std::async(std::launch::async, [&] { return core->Get(get, Soon(), nullptr); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  v1::KeyValue entry;
  entry.set_job("j");
  entry.set_key("gloo/rank0");
  entry.set_value(std::string("\0address", 8));
  ASSERT_TRUE(core->Set(entry).ok());
  absl::StatusOr<v1::KeyValue> got = waiting.get();
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->value(), std::string("\0address", 8));

  get.set_key("never");
  get.set_wait_ms(50);
  absl::Status status = core->Get(get, Soon(), nullptr).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_NE(status.message().find("key 'never' is not set"), absl::string_view::npos);

  entry.set_key("");
  EXPECT_EQ(core->Set(entry).code(), absl::StatusCode::kInvalidArgument);
  entry.set_key(std::string(300, 'k'));
  EXPECT_EQ(core->Set(entry).code(), absl::StatusCode::kInvalidArgument);
  entry.set_key("big");
  entry.set_value(std::string((1 << 20) + 1, 'v'));
  EXPECT_EQ(core->Set(entry).code(), absl::StatusCode::kInvalidArgument);
  // The refused writes changed nothing.
  get.set_key("gloo/rank0");
  got = core->Get(get, Soon(), nullptr);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->value().size(), 8u);
}

TEST(CoordinatorCoreTest, KeyValueStoreIsBoundedInKeys) {
  CoordinatorOptions options;
  options.max_keys = 2;
  absl::StatusOr<std::unique_ptr<CoordinatorCore>> core = CoordinatorCore::Create(TestJob(1), options);
  ASSERT_TRUE(core.ok());
  v1::KeyValue entry;
  entry.set_job("j");
  for (const char* key : {"a", "b"}) {
    entry.set_key(key);
    ASSERT_TRUE((*core)->Set(entry).ok());
  }
  entry.set_key("a");  // the same value again is fine
  EXPECT_TRUE((*core)->Set(entry).ok());
  entry.set_key("c");
  EXPECT_EQ((*core)->Set(entry).code(), absl::StatusCode::kResourceExhausted);
}

TEST(CoordinatorCoreTest, WaitingCallsAreCappedAndAGetSaysTrulyHowLongItWaited) {
  CoordinatorOptions options;
  options.max_waiting_calls = 2;
  options.max_get_wait = absl::Milliseconds(300);
  absl::StatusOr<std::unique_ptr<CoordinatorCore>> created = CoordinatorCore::Create(TestJob(1), options);
  ASSERT_TRUE(created.ok());
  CoordinatorCore& core = **created;
  v1::GetRequest get;
  get.set_job("j");
  get.set_key("never");
  get.set_wait_ms(UINT32_MAX);  // 49 days asked; the coordinator's bound applies
  std::vector<std::future<absl::StatusOr<v1::KeyValue>>> waiting;
  for (int i = 0; i < 2; ++i) {
    waiting.push_back(std::async(std::launch::async, [&] { return core.Get(get, Soon(), nullptr); }));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  // A third call that would wait is refused at once, holding no thread.
  absl::Status third = core.Get(get, Soon(), nullptr).status();
  EXPECT_EQ(third.code(), absl::StatusCode::kResourceExhausted) << third;
  // A call that need not wait is answered.
  v1::KeyValue entry;
  entry.set_job("j");
  entry.set_key("set");
  ASSERT_TRUE(core.Set(entry).ok());
  v1::GetRequest ready = get;
  ready.set_key("set");
  EXPECT_TRUE(core.Get(ready, Soon(), nullptr).ok());
  for (auto& w : waiting) {
    absl::Status status = w.get().status();
    EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
    // It waited the coordinator's 300 ms, and says so, not the 4294967295 asked.
    EXPECT_NE(status.message().find(" ms of the 4294967295 asked"), std::string::npos) << status;
    EXPECT_EQ(status.message().find("waited 4294967295"), std::string::npos) << status;
  }
  // The waiters are gone: calls may wait again.
  get.set_wait_ms(10);
  EXPECT_EQ(core.Get(get, Soon(), nullptr).status().code(), absl::StatusCode::kNotFound);
  // A call deadline before wait_ms: the answer names the time actually waited.
  get.set_wait_ms(100000);
  absl::Status cut = core.Get(get, absl::Now() + absl::Milliseconds(50), nullptr).status();
  EXPECT_EQ(cut.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(cut.message().find("waited 100000"), std::string::npos) << cut;
}

TEST(CoordinatorCoreTest, ErrorsQuoteAClientsFieldsCut) {
  std::unique_ptr<CoordinatorCore> core = MakeCore(1);
  v1::GetRequest get;
  get.set_job(std::string(1 << 20, 'j'));
  get.set_key("k");
  absl::Status status = core->Get(get, Soon(), nullptr).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_LT(status.message().size(), 200u);
  v1::JoinRequest join = JoinOf(TestJob(1), "w0");
  join.set_fingerprint(std::string(1 << 20, 'f'));
  status = core->Join(join, Soon(), nullptr).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_LT(status.message().size(), 300u);
}

TEST(CoordinatorCoreTest, CreateRefusesJobsItCannotPlan) {
  v1::JobConfig job = TestJob(2);
  job.clear_run();
  EXPECT_EQ(CoordinatorCore::Create(job, {}).status().code(), absl::StatusCode::kInvalidArgument);
  job = TestJob(2);
  job.mutable_groups(1)->set_layer_begin(3);
  absl::Status status = CoordinatorCore::Create(job, {}).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("group 1 covers layers [3, 4)"), absl::string_view::npos) << status;
  job = TestJob(2);
  job.mutable_groups(0)->set_dim(999);
  EXPECT_EQ(CoordinatorCore::Create(job, {}).status().code(), absl::StatusCode::kInvalidArgument);
  job = TestJob(0);
  EXPECT_EQ(CoordinatorCore::Create(job, {}).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace sketchfuse
