#include "worker/virtual/loopback_shards.h"

#include <condition_variable>
#include <shared_mutex>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "proto/push_codec.h"
#include "proto/run_config.h"
#include "server/job_config.h"

namespace sketchfuse {

class LoopbackShards::Transport final : public PsTransport {
 public:
  explicit Transport(LoopbackShards* shards) : shards_(shards) {}
  ~Transport() override {
    std::unique_lock<std::mutex> lock(mu_);
    idle_.wait(lock, [this] { return in_flight_ == 0; });
  }

  int num_shards() const override { return shards_->num_shards_; }

  absl::Status ProbeShards(absl::Duration) const override {
    std::lock_guard<std::mutex> lock(shards_->mu_);
    return shards_->down_ ? absl::UnavailableError("loopback shard 0 is down") : absl::OkStatus();
  }
  void Reconnect() override {}
  uint64_t injected_faults() const override { return 0; }
  uint64_t retries() const override { return 0; }

 protected:
  void Send(PushTarget target, std::shared_ptr<const Payload> payload, PushDone done) override {
    if (target.shard < 0 || target.shard >= num_shards()) {
      done(absl::InvalidArgumentError(absl::StrCat("group ", target.group, " maps to shard ", target.shard)));
      return;
    }
    std::shared_ptr<AggregationCore> core;
    {
      std::lock_guard<std::mutex> lock(shards_->mu_);
      if (shards_->down_) {
        done(absl::UnavailableError(absl::StrCat("push of group ", target.group, ": loopback shard ", target.shard,
                                                 " is down")));
        return;
      }
      core = shards_->cores_[target.shard];
    }
    v1::RoundKey round;
    round.set_job(target.job);
    round.set_step(target.step);
    round.set_group(target.group);
    round.set_round(target.round);
    const size_t bytes = EncodePushRequest(round, target.worker, payload).Length();
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++in_flight_;
    }
    // The core answers every push of a round on the thread of the push that
    // completes it: push from a thread of our own, as a server's handler would.
    std::thread([this, core, target, payload, bytes, done = std::move(done)]() mutable {
      std::shared_lock<std::shared_mutex> gate(shards_->push_gate_);
      bool down = false;
      {
        std::lock_guard<std::mutex> lock(shards_->mu_);
        // Down since Send, or down and up again (fresh cores): this push
        // never reaches its crashed core.
        down = shards_->down_ || shards_->cores_[target.shard] != core;
      }
      if (down) {
        done(absl::UnavailableError(absl::StrCat("push of group ", target.group, ": loopback shard ", target.shard,
                                                 " is down")));
        std::lock_guard<std::mutex> lock(mu_);
        if (--in_flight_ == 0) idle_.notify_all();
        return;
      }
      core->Push(RoundKey{target.job, target.step, target.group, target.round}, target.worker, *payload,
                 absl::Now(), [this, target, bytes, done = std::move(done)](absl::StatusOr<RoundResult> result) {
                   absl::StatusOr<PushOutcome> outcome;
                   bool lost = false;
                   {
                     std::lock_guard<std::mutex> lock(shards_->mu_);
                     lost = shards_->replies_lost_.count(target.worker) > 0;
                   }
                   if (!result.ok()) {
                     outcome = result.status();
                   } else if (lost) {
                     outcome = absl::UnavailableError(
                         absl::StrCat("push of group ", target.group, ": the loopback lost the reply"));
                   } else {
                     PushOutcome ok;
                     ok.update = *result->update;
                     ok.contributors = result->contributors;
                     ok.attempts = 1;
                     ok.bytes_sent = bytes;
                     ok.bytes_received = EncodePushReply(result->update, result->contributors).Length();
                     outcome = std::move(ok);
                   }
                   done(std::move(outcome));
                   std::lock_guard<std::mutex> lock(mu_);
                   if (--in_flight_ == 0) idle_.notify_all();
                 });
    }).detach();
  }

 private:
  LoopbackShards* const shards_;
  std::mutex mu_;
  std::condition_variable idle_;
  int in_flight_ = 0;
};

absl::StatusOr<std::unique_ptr<LoopbackShards>> LoopbackShards::Create(const v1::JobConfig& job, int num_shards) {
  std::unique_ptr<LoopbackShards> shards(new LoopbackShards(job, num_shards));
  std::lock_guard<std::mutex> lock(shards->mu_);
  if (absl::Status s = shards->StartCoresLocked(); !s.ok()) return s;
  return shards;
}

absl::Status LoopbackShards::StartCoresLocked() {
  reapers_.clear();
  cores_.clear();
  for (int s = 0; s < num_shards_; ++s) {
    absl::StatusOr<AggregationConfig> config = ShardConfig(job_, s, num_shards_);
    if (!config.ok()) return config.status();
    absl::StatusOr<std::unique_ptr<AggregationCore>> core = AggregationCore::Create(*config);
    if (!core.ok()) return core.status();
    cores_.push_back(*std::move(core));
    reapers_.push_back(std::make_unique<RoundReaper>(cores_.back().get(), absl::Milliseconds(50)));
  }
  return absl::OkStatus();
}

TransportFactory LoopbackShards::Transports() {
  return [this](const std::vector<std::string>&) -> std::unique_ptr<PsTransport> {
    return std::make_unique<Transport>(this);
  };
}

void LoopbackShards::SetDown(bool down) {
  if (down) {
    GoDown(absl::UnavailableError("the loopback shard crashed"));
    return;
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (!down_) return;
  down_ = false;
  absl::Status started = StartCoresLocked();
  if (!started.ok()) std::abort();  // the same job started before
}

void LoopbackShards::GoDown(const absl::Status& why) {
  std::vector<std::shared_ptr<AggregationCore>> crashed;
  {
    // No push is between its check of down_ and its core: each one either
    // reached a core before (its round is failed below) or finds the shards
    // down.
    std::unique_lock<std::shared_mutex> gate(push_gate_);
    std::lock_guard<std::mutex> lock(mu_);
    if (down_) return;
    down_ = true;
    crashed = cores_;
  }
  // Outside the lock: failing the rounds runs their pushes' callbacks.
  for (const std::shared_ptr<AggregationCore>& core : crashed) core->FailAllRounds(why);
}

void LoopbackShards::LoseRepliesTo(uint32_t worker, bool lose) {
  std::lock_guard<std::mutex> lock(mu_);
  if (lose) {
    replies_lost_.insert(worker);
  } else {
    replies_lost_.erase(worker);
  }
}

absl::StatusOr<v1::JoinReply> LoopbackJoinReply(const v1::JobConfig& job, uint32_t rank, int num_shards) {
  v1::JoinReply joined;
  joined.set_rank(rank);
  joined.set_world_size(job.world_size());
  *joined.mutable_job() = job;
  for (int shard = 0; shard < num_shards; ++shard) {
    v1::ShardAddress* address = joined.add_shards();
    address->set_shard(shard);
    address->set_address(absl::StrCat("in-process:", shard));
  }
  if (num_shards > 0) {
    absl::StatusOr<std::vector<int>> shard_of_group = ShardOfGroups(job, num_shards);
    if (!shard_of_group.ok()) return shard_of_group.status();
    for (int shard : *shard_of_group) joined.add_shard_of_group(shard);
  }
  joined.set_fingerprint(RunFingerprint(job.run()));
  return joined;
}

}  // namespace sketchfuse
