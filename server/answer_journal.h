// Durable answers of one shard (sketchfuse_server --state_dir).
//
// When a shard dies mid-training, some workers may already hold the answer of
// a round whose reply never reached the others. Those others re-push the
// round to the restarted shard, but the workers that were answered have moved
// on and will not push it again. The journal lets the restarted shard answer
// them anyway: every finished round's answer is written to a file of its own
// before any worker is answered with it (AggregationConfig::record_answer),
// and a restarted shard loads the files (AggregationCore::Restore).
//
// Layout: <dir>/g<group>-r<round>-s<step>.answer, each a serialized
// v1::KeptAnswer that names the job configuration and shard layout it
// belongs to. A file is written under a temporary name and renamed into
// place, so a crash leaves the whole answer or none. For each (group, round)
// only the newest `kept` files stay; older ones are removed.
//
// Durable against the process dying (SIGKILL, OOM kill): written files live
// on in the page cache. Not fsync'ed, so not against the machine losing
// power; a restarted machine's shard would start from an empty journal and
// the workers fall back as for any lost shard.
//
// Thread-safe.
#ifndef SKETCHFUSE_SERVER_ANSWER_JOURNAL_H_
#define SKETCHFUSE_SERVER_ANSWER_JOURNAL_H_

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/job_config.pb.h"
#include "server/aggregation_core.h"

namespace sketchfuse {

// What a shard's answers belong to: the job's name, a hash of its
// configuration (groups, run, hash seed; not the operational knobs
// round_deadline_ms and finished_rounds_kept) and the shard's place, e.g.
// "job 'demo', config 1f2e..., shard 1 of 2".
std::string ShardIdentity(const v1::JobConfig& job, int shard_index, int num_shards);

class AnswerJournal {
 public:
  // Opens `dir` (created if missing) for the shard named by `identity`,
  // keeping `kept` (>= 1) answers per (group, round kind). INVALID_ARGUMENT
  // if `dir` is empty or not a directory, or kept is 0; INTERNAL if it
  // cannot be created.
  static absl::StatusOr<std::unique_ptr<AnswerJournal>> Open(std::string dir, std::string identity, size_t kept);

  // Every answer in the directory, oldest step first per group. Removes
  // leftover temporary files (a write the crash cut short) and files beyond
  // the newest `kept` of their group. Refuses, naming the file:
  //   INVALID_ARGUMENT: a file that is not a valid answer (truncated,
  //     corrupt, a malformed update, or a name other than its round's);
  //   FAILED_PRECONDITION: an answer of another job, configuration or shard
  //     layout (start a new run with its own directory).
  absl::StatusOr<std::vector<KeptAnswer>> Load();

  // Writes `answer` and removes the oldest file of its (group, round kind)
  // beyond `kept`. INTERNAL naming the file if it cannot be written.
  absl::Status Record(const KeptAnswer& answer);

  const std::string& dir() const { return dir_; }

 private:
  AnswerJournal(std::string dir, std::string identity, size_t kept)
      : dir_(std::move(dir)), identity_(std::move(identity)), kept_(kept) {}

  std::string PathOf(uint32_t group, uint32_t round, uint64_t step) const;
  // Removes files of (group, round kind) beyond the newest kept_.
  void TrimLocked(uint32_t group, uint32_t round);

  const std::string dir_;
  const std::string identity_;
  const size_t kept_;

  std::mutex mu_;
  // Steps with a file, per (group, round).
  std::map<std::pair<uint32_t, uint32_t>, std::set<uint64_t>> files_;
};

}  // namespace sketchfuse

#endif  // SKETCHFUSE_SERVER_ANSWER_JOURNAL_H_
