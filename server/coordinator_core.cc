#include "server/coordinator_core.h"

#include <algorithm>
#include <cctype>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/count_sketch.h"
#include "common/error_text.h"
#include "common/rank_keys.h"
#include "proto/run_config.h"
#include "server/job_config.h"

namespace sketchfuse {
namespace {

// Splits "worker-12" into ("worker-", "12").
std::pair<std::string, std::string> SplitTrailingNumber(const std::string& id) {
  size_t i = id.size();
  while (i > 0 && std::isdigit(static_cast<unsigned char>(id[i - 1]))) --i;
  return {id.substr(0, i), id.substr(i)};
}

// "a, b, c" or "a, b, c and 7 more".
std::string ListSome(const std::vector<std::string>& names) {
  constexpr size_t kShown = 8;
  std::vector<std::string> shown(names.begin(), names.begin() + std::min(kShown, names.size()));
  std::string out = absl::StrJoin(shown, ", ");
  if (names.size() > kShown) absl::StrAppend(&out, " and ", names.size() - kShown, " more");
  return out;
}

}  // namespace

absl::Status CheckWorkerId(const std::string& id) {
  if (id.empty()) return absl::InvalidArgumentError("worker_id is empty");
  if (id.size() > 128) {
    return absl::InvalidArgumentError(absl::StrCat("worker_id is ", id.size(), " bytes; at most 128"));
  }
  for (char c : id) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') {
      return absl::InvalidArgumentError(absl::StrCat(
          "worker_id ", QuoteField(id), " has a character other than letters, digits, '-', '_', '.'"));
    }
  }
  return absl::OkStatus();
}

bool NaturalLess(const std::string& a, const std::string& b) {
  auto [prefix_a, number_a] = SplitTrailingNumber(a);
  auto [prefix_b, number_b] = SplitTrailingNumber(b);
  if (prefix_a == prefix_b && !number_a.empty() && !number_b.empty()) {
    // Compare numbers without parsing: strip leading zeros, then by length.
    auto strip = [](const std::string& s) {
      size_t i = 0;
      while (i + 1 < s.size() && s[i] == '0') ++i;
      return s.substr(i);
    };
    const std::string x = strip(number_a), y = strip(number_b);
    if (x.size() != y.size()) return x.size() < y.size();
    if (x != y) return x < y;
  }
  return a < b;
}

absl::StatusOr<std::unique_ptr<CoordinatorCore>> CoordinatorCore::Create(v1::JobConfig job,
                                                                         CoordinatorOptions options) {
  if (options.num_shards < 1) {
    return absl::InvalidArgumentError(absl::StrCat("num_shards must be >= 1; got ", options.num_shards));
  }
  if (job.world_size() == 0) return absl::InvalidArgumentError("job config: world_size is 0");
  if (options.require_join_credentials && !options.proofs.enabled()) {
    return absl::InvalidArgumentError(
        "join credentials need the servers' shard token (--shard_token_file): without it none can be checked");
  }
  if (!job.has_run()) {
    return absl::InvalidArgumentError(
        "job config has no 'run' section: the coordinator needs the workers' run configuration");
  }
  if (absl::Status plan = ValidateGroupLayers(job); !plan.ok()) return plan;
  absl::StatusOr<std::vector<int>> shards = ShardOfGroups(job, options.num_shards);
  if (!shards.ok()) return shards.status();
  std::vector<uint32_t> shard_of_group(shards->begin(), shards->end());
  return std::unique_ptr<CoordinatorCore>(
      new CoordinatorCore(std::move(job), options, std::move(shard_of_group)));
}

CoordinatorCore::CoordinatorCore(v1::JobConfig job, CoordinatorOptions options,
                                 std::vector<uint32_t> shard_of_group)
    : job_(std::move(job)),
      options_(options),
      shard_of_group_(std::move(shard_of_group)),
      fingerprint_(RunFingerprint(job_.run())),
      job_fingerprint_(JobFingerprint(job_)),
      shard_addresses_(options.num_shards) {
  if (options_.proofs.enabled()) {
    for (uint32_t rank = 0; rank < job_.world_size(); ++rank) {
      rank_of_proof_.emplace(options_.proofs.ProofOf(job_.job(), rank), rank);
    }
  }
}

absl::Status CoordinatorCore::CheckJob(const std::string& job) const {
  if (job != job_.job()) {
    return absl::InvalidArgumentError(
        absl::StrCat("job ", QuoteField(job), " is not coordinated here; this coordinator runs job '", job_.job(), "'"));
  }
  return absl::OkStatus();
}

bool CoordinatorCore::CompleteLocked() const {
  if (last_seen_.size() < job_.world_size()) return false;
  for (const std::string& address : shard_addresses_) {
    if (address.empty()) return false;
  }
  return true;
}

std::string CoordinatorCore::MissingLocked() const {
  std::vector<std::string> parts;
  if (last_seen_.size() < job_.world_size()) {
    std::vector<std::string> joined;
    for (const auto& [id, seen] : last_seen_) joined.push_back(id);
    parts.push_back(absl::StrCat(job_.world_size() - last_seen_.size(), " of ", job_.world_size(),
                                 " workers have not joined (joined: ",
                                 joined.empty() ? "none" : ListSome(joined), ")"));
  }
  std::vector<std::string> shards;
  for (size_t s = 0; s < shard_addresses_.size(); ++s) {
    if (shard_addresses_[s].empty()) shards.push_back(absl::StrCat(s));
  }
  if (!shards.empty()) parts.push_back(absl::StrCat("shards not registered: ", ListSome(shards)));
  return absl::StrJoin(parts, "; ");
}

absl::StatusOr<bool> CoordinatorCore::WaitLocked(std::unique_lock<std::mutex>& lock, absl::Time deadline,
                                                 size_t max_waiting, const Cancelled& cancelled,
                                                 const std::function<bool()>& done) {
  constexpr absl::Duration kPoll = absl::Milliseconds(50);
  if (done()) return true;
  if (absl::Now() >= deadline) return false;
  if (waiting_ >= max_waiting) {
    return absl::ResourceExhaustedError(absl::StrCat("this coordinator already has its maximum of ", max_waiting,
                                                     " calls waiting; try again later"));
  }
  ++waiting_;
  bool finished = true;
  while (!done()) {
    const absl::Time now = absl::Now();
    if (now >= deadline || (cancelled && cancelled())) {
      finished = false;
      break;
    }
    changed_.wait_for(lock, absl::ToChronoMilliseconds(std::min(deadline - now, kPoll)) +
                                std::chrono::milliseconds(1));
  }
  --waiting_;
  return finished;
}

void CoordinatorCore::AssignRanksIfCompleteLocked() {
  if (!ranks_.empty() || !CompleteLocked()) return;
  std::vector<std::string> ids;
  for (const auto& [name, seen] : last_seen_) ids.push_back(name);
  std::sort(ids.begin(), ids.end(), NaturalLess);
  for (size_t r = 0; r < ids.size(); ++r) ranks_[ids[r]] = static_cast<uint32_t>(r);
}

void CoordinatorCore::ForgetSilentJoinersLocked(absl::Time now) {
  if (!ranks_.empty()) return;
  for (auto it = last_seen_.begin(); it != last_seen_.end();) {
    const bool waiting = joining_.count(it->first) > 0;
    if (!waiting && now - it->second > options_.liveness_timeout) {
      it = last_seen_.erase(it);
    } else {
      ++it;
    }
  }
}

absl::StatusOr<v1::JoinReply> CoordinatorCore::Join(const v1::JoinRequest& request,
                                                    absl::Time deadline, const Cancelled& cancelled,
                                                    absl::string_view proof, absl::string_view join_credential) {
  if (absl::Status s = CheckJob(request.job()); !s.ok()) return s;
  if (absl::Status s = CheckWorkerId(request.worker_id()); !s.ok()) return s;
  // The family first: a build of another family may well fingerprint runs
  // differently too, and this says why plainly.
  if (absl::Status family =
          CheckSketchHashFamily(request.sketch_hash_family(), absl::StrCat("worker '", request.worker_id(), "'"));
      !family.ok()) {
    return family;
  }
  if (request.fingerprint() != RunFingerprint(request.run())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "fingerprint ", QuoteField(request.fingerprint()), " does not match the run sent with it (",
        RunFingerprint(request.run()), "): a corrupted request or a different SketchFuse build"));
  }
  // A worker that leaves the partition bound to the job takes the job's.
  v1::RunConfig run = request.run();
  if (!run.has_partition_elements() && job_.run().has_partition_elements()) {
    run.set_partition_elements(job_.run().partition_elements());
  }
  if (RunFingerprint(run) != fingerprint_) {
    return absl::FailedPreconditionError(absl::StrCat(
        "worker '", request.worker_id(), "' runs a different configuration than job '", job_.job(),
        "': ", DiffRunConfigs(job_.run(), run)));
  }
  const std::string& id = request.worker_id();
  // Only the worker its operator issued the id's credential to joins as it.
  if (options_.require_join_credentials) {
    if (absl::Status s = options_.proofs.CheckJoinCredential(job_.job(), id, join_credential); !s.ok()) return s;
  }
  std::unique_lock<std::mutex> lock(mu_);
  // An id with its rank is that rank's worker: only it (holding the proof
  // its first Join gave) joins as it again.
  if (auto rank = ranks_.find(id); rank != ranks_.end()) {
    if (absl::Status s = options_.proofs.Check(job_.job(), rank->second, proof,
                                               absl::StrCat("a re-join as worker ", QuoteField(id), " (rank ",
                                                            rank->second, ")"));
        !s.ok()) {
      return s;
    }
  }
  // The job assembles from the workers still there, not from every id that
  // ever joined.
  ForgetSilentJoinersLocked(absl::Now());
  if (last_seen_.count(id) == 0) {
    if (last_seen_.size() >= job_.world_size()) {
      std::vector<std::string> joined;
      for (const auto& [name, seen] : last_seen_) joined.push_back(name);
      return absl::FailedPreconditionError(absl::StrCat(
          "job '", job_.job(), "' already has its ", job_.world_size(), " workers (", ListSome(joined),
          "); worker '", id, "' is not one of them"));
    }
  }
  last_seen_[id] = absl::Now();
  AssignRanksIfCompleteLocked();
  changed_.notify_all();
  ++joining_[id];
  absl::StatusOr<bool> assembled = WaitLocked(lock, deadline, job_.world_size() + options_.max_waiting_calls, cancelled, [&] { return !ranks_.empty(); });
  if (--joining_[id] == 0) joining_.erase(id);
  // Heard from until now (a silent joiner's place counts from its last call).
  if (auto seen = last_seen_.find(id); seen != last_seen_.end()) seen->second = std::max(seen->second, absl::Now());
  if (!assembled.ok()) return assembled.status();
  if (!*assembled) {
    const std::string missing = MissingLocked();
    if (cancelled && cancelled()) return absl::CancelledError("join cancelled by the worker");
    return absl::DeadlineExceededError(
        absl::StrCat("job '", job_.job(), "' did not assemble in time: ", missing));
  }
  v1::JoinReply reply;
  reply.set_rank(ranks_.at(id));
  reply.set_worker_proof(options_.proofs.ProofOf(job_.job(), reply.rank()));
  reply.set_world_size(job_.world_size());
  *reply.mutable_job() = job_;
  for (size_t s = 0; s < shard_addresses_.size(); ++s) {
    v1::ShardAddress* shard = reply.add_shards();
    shard->set_shard(static_cast<uint32_t>(s));
    shard->set_address(shard_addresses_[s]);
  }
  for (uint32_t shard : shard_of_group_) reply.add_shard_of_group(shard);
  reply.set_fingerprint(fingerprint_);
  reply.set_sketch_hash_family(kSketchHashFamily);
  return reply;
}

absl::Status CoordinatorCore::RegisterShard(const v1::RegisterShardRequest& request) {
  if (absl::Status s = CheckJob(request.job()); !s.ok()) return s;
  if (request.num_shards() != static_cast<uint32_t>(options_.num_shards)) {
    // Another shard count is another partitioning (the plan spreads the
    // partitions over the shards), so it is the job config that differs.
    return absl::FailedPreconditionError(absl::StrCat(
        "shard ", request.shard(), " was started with --num_shards=", request.num_shards(), "; this job has ",
        options_.num_shards, " shards (", DescribeGroups(job_), "): give every shard the coordinator's shard count"));
  }
  if (request.shard() >= request.num_shards()) {
    return absl::InvalidArgumentError(absl::StrCat("shard ", request.shard(), " is out of range for ",
                                                   request.num_shards(), " shards"));
  }
  const std::string& address = request.address();
  if (address.empty() || address.size() > 256 || address.find(':') == std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("shard address ", QuoteField(address), " is not host:port"));
  }
  if (absl::Status family = CheckSketchHashFamily(request.sketch_hash_family(),
                                                  absl::StrCat("shard ", request.shard(), " at ", address));
      !family.ok()) {
    return family;
  }
  if (request.job_fingerprint().empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "shard ", request.shard(), " at ", QuoteField(address),
        " states no job config (job_fingerprint is empty); the coordinator's is config ", job_fingerprint_, ", ",
        DescribeGroups(job_)));
  }
  if (request.job_fingerprint() != job_fingerprint_) {
    return absl::FailedPreconditionError(absl::StrCat(
        "shard ", request.shard(), " at ", QuoteField(address), " serves another job config (config ",
        QuoteField(request.job_fingerprint()), ", ", QuoteField(request.partitioning()),
        ") than the coordinator's (config ", job_fingerprint_, ", ", DescribeGroups(job_),
        "): give every shard the coordinator's job file and shard count"));
  }
  std::lock_guard<std::mutex> lock(mu_);
  shard_addresses_[request.shard()] = address;
  AssignRanksIfCompleteLocked();
  changed_.notify_all();
  return absl::OkStatus();
}

absl::StatusOr<v1::HeartbeatReply> CoordinatorCore::Heartbeat(const v1::HeartbeatRequest& request,
                                                              absl::Time now, absl::string_view proof) {
  if (absl::Status s = CheckJob(request.job()); !s.ok()) return s;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = last_seen_.find(request.worker_id());
  if (it == last_seen_.end()) {
    return absl::NotFoundError(absl::StrCat("worker ", QuoteField(request.worker_id()),
                                            " has not joined job '", job_.job(), "'"));
  }
  if (auto rank = ranks_.find(request.worker_id()); rank != ranks_.end()) {
    if (absl::Status s = options_.proofs.Check(job_.job(), rank->second, proof,
                                               absl::StrCat("a heartbeat as worker ", QuoteField(request.worker_id())));
        !s.ok()) {
      return s;
    }
  }
  it->second = std::max(it->second, now);
  v1::HeartbeatReply reply;
  uint32_t alive = 0;
  for (const auto& [id, seen] : last_seen_) {
    if (now - seen > options_.liveness_timeout) {
      reply.add_dead_workers(id);
    } else {
      ++alive;
    }
  }
  reply.set_alive_workers(alive);
  return reply;
}

namespace {

}  // namespace

absl::Status CoordinatorCore::Set(const v1::KeyValue& entry, absl::string_view proof) {
  if (absl::Status s = CheckJob(entry.job()); !s.ok()) return s;
  if (entry.key().empty()) return absl::InvalidArgumentError("key is empty");
  if (entry.key().size() > options_.max_key_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("key is ", entry.key().size(), " bytes; at most ", options_.max_key_bytes));
  }
  if (entry.value().size() > options_.max_value_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("value of key ", QuoteField(entry.key()), " is ",
                                                   entry.value().size(), " bytes; at most ",
                                                   options_.max_value_bytes));
  }
  if (options_.proofs.enabled()) {
    auto writer = rank_of_proof_.find(std::string(proof));
    if (writer == rank_of_proof_.end()) {
      return absl::PermissionDeniedError(absl::StrCat(
          "a Set of key ", QuoteField(entry.key()), " carries ", proof.empty() ? "no worker proof" : "no rank's proof",
          " of job '", job_.job(), "': only the job's ranked workers write its store"));
    }
    if (const std::optional<uint32_t> owner = RankOfKey(entry.key()); owner.has_value() && *owner != writer->second) {
      return absl::PermissionDeniedError(absl::StrCat("key ", QuoteField(entry.key()), " belongs to rank ", *owner,
                                                      "; rank ", writer->second, " may not write it"));
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = store_.find(entry.key()); it != store_.end()) {
    // A rank's own key its rank (proved above) may write again: a restarted
    // rank's new address. Any other key is written once.
    if (it->second == entry.value() || RankOfKey(entry.key()).has_value()) {
      it->second = entry.value();
      changed_.notify_all();
      return absl::OkStatus();
    }
    return absl::AlreadyExistsError(absl::StrCat("key ", QuoteField(entry.key()),
                                                 " is already set, to another value: keys are written once"));
  }
  if (store_.size() >= options_.max_keys) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the key-value store holds its maximum of ", options_.max_keys, " keys"));
  }
  store_[entry.key()] = entry.value();
  changed_.notify_all();
  return absl::OkStatus();
}

absl::StatusOr<v1::KeyValue> CoordinatorCore::Get(const v1::GetRequest& request, absl::Time deadline,
                                                  const Cancelled& cancelled) {
  if (absl::Status s = CheckJob(request.job()); !s.ok()) return s;
  if (request.key().empty() || request.key().size() > options_.max_key_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("key must be 1 to ", options_.max_key_bytes, " bytes"));
  }
  const absl::Time start = absl::Now();
  deadline = std::min({deadline, start + absl::Milliseconds(request.wait_ms()), start + options_.max_get_wait});
  std::unique_lock<std::mutex> lock(mu_);
  absl::StatusOr<bool> found = WaitLocked(lock, deadline, options_.max_waiting_calls, cancelled,
                                         [&] { return store_.count(request.key()) > 0; });
  if (!found.ok()) return found.status();
  if (!*found) {
    // The time actually waited: the call's own deadline (or its
    // cancellation) may have come before wait_ms.
    return absl::NotFoundError(absl::StrCat("key ", QuoteField(request.key()), " is not set (waited ",
                                            absl::ToInt64Milliseconds(absl::Now() - start), " ms of the ",
                                            request.wait_ms(), " asked)"));
  }
  v1::KeyValue entry;
  entry.set_job(job_.job());
  entry.set_key(request.key());
  entry.set_value(store_.at(request.key()));
  return entry;
}

}  // namespace sketchfuse
