// The aggregation core of a server shard: plain C++, no gRPC types.
//
// For each round (job, step, group) it collects one payload from each of the
// job's W workers, merges them (a sum for linear payloads, a union for sparse
// ones), decodes the aggregate with the group's compressor once every worker
// has pushed, and answers every waiting push with the same update.
//
// Promises:
//   - Every push's callback runs exactly once, never with the core's lock held:
//     with the round's result, or with an error status.
//   - Requests are validated before they touch state. A bad request (wrong
//     job, a group this shard does not own, worker id out of range, a payload
//     that is malformed, holds a NaN or an infinity, or does not fit the
//     group) is refused with a status that names the problem, and changes
//     nothing: the round goes on for the other workers.
//   - Pushes are idempotent per (round, worker): a repeated push while the
//     round is open waits for the same result and is not added twice. A push
//     for a round that already finished gets the kept answer again; the last
//     `finished_rounds_kept` answers of each group are kept.
//   - Which pushes may open a round, wait parked, or are refused (the step
//     window, each worker's slot and parked push outside it, its share of
//     rounds held alone, its repeats, the caps on open rounds and held
//     bytes) is one policy, server/push_admission.h, whose header tables
//     every push and its answer. In short: a push into an open round always
//     lands; a flood as one worker holds at most max_rounds_alone rounds of
//     a group within the window, one outside it and one parked push, at most
//     max_pushes_waiting of its calls on each; the job's round completes
//     whichever worker pushes first; a forged far-future round cannot make
//     later steps look finished; past the caps no round opens.
//   - A round that does not complete within `round_deadline` of its first push
//     fails with DEADLINE_EXCEEDED naming the missing workers (ExpireRounds).
//     Its memory is freed, and a later push of the same round starts it afresh,
//     so workers may re-push an unfinished round. A parked push waits as long.
//   - Memory of finished rounds is freed; only their answers are kept. Pushes
//     into rounds already open are always taken (a round holds at most W
//     payloads), so honest rounds in flight complete; so is the round that
//     every worker's parked push opens (its payloads are already held), past
//     `max_open_rounds` if need be, until it is decoded.
//   - Durable answers (optional): with `record_answer` set, every answer is
//     recorded before any push is answered with it, and a restarted shard
//     takes the recorded answers up again (Restore). A worker whose reply was
//     lost when the shard died then gets the same answer from its successor,
//     even after the other workers moved on to the next step.
//   - Second round (Sketched-SGD), for groups that ask for it: once the sketch
//     round of (step, group) is answered with its candidates (the decoded
//     heavy hitters, as a candidate list: their indices without the
//     estimates, common/error_feedback.h IsCandidateList), each worker pushes its exact values at those indices,
//     in their order and without the indices (candidate values), to the
//     round's second round, and every worker is answered with their exact
//     sums at the candidates (the k largest of them where the group
//     re-selects). A second-round push with another number of values, or
//     that comes before the first round is answered here, is refused and
//     changes nothing.
//   - Groups whose compressor keeps state where the sum is
//     (Compressor::keeps_aggregation_state, common/aggregation_state.h) hold
//     it opaquely across rounds, in place of the decode: each completed
//     round steps the state once, in step order (a worker
//     cannot push step t+1 before it applied step t), and the state after the
//     round travels with its kept answer (record_answer, Restore).
//   - Deterministic: a round's payloads are kept apart until it is complete and
//     then merged in worker order, so the update does not depend on the order
//     of arrival (float sums are order-sensitive) and training runs are
//     reproducible bit for bit. The cost: an open round holds W payloads.
//
// NOTE: thread-safe. Decoding runs outside the lock, so rounds of different
// groups aggregate and decode concurrently. Locks are std::mutex: Debian's
// Abseil is not built for ThreadSanitizer, which then cannot see absl::Mutex.
#ifndef SKETCHFUSE_SERVER_AGGREGATION_CORE_H_
#define SKETCHFUSE_SERVER_AGGREGATION_CORE_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/compressor.h"
#include "common/aggregation_state.h"
#include "common/payload.h"
#include "server/push_admission.h"

namespace sketchfuse {

// A fused group this shard aggregates.
struct GroupSpec {
  uint32_t group = 0;
  uint64_t dim = 0;
  // Compressor spec shared by the job's workers (compressor_registry.h).
  std::string compressor;
  // When > 0, the answer of the group's final round keeps only its
  // this-many largest-magnitude entries: the first round's decoded union
  // (BytePS-style Top-k PS re-selection), or, with a second round, its exact
  // sums at the candidates (the two-round fixed-size sketch).
  uint64_t reselect_top_k = 0;
  // Rounds per step: 1, or 2 where round 1 takes the workers' exact values
  // at round 0's candidates.
  uint32_t rounds = 1;
};

// How a round ended, for metrics.
struct RoundReport {
  uint32_t group = 0;
  uint64_t step = 0;
  uint32_t round = 0;
  bool completed = false;  // false: failed (deadline, shutdown, unmergeable payloads)
  // From the round's first push until its answer (or failure).
  absl::Duration latency;
  // Merging the payloads and decoding the aggregate (completed rounds).
  absl::Duration decode_time;
  // The shard's open rounds and the payload bytes they hold, once this one
  // ended.
  uint64_t rounds_open = 0;
  uint64_t bytes_held = 0;
};

struct RoundResult {
  std::shared_ptr<const Update> update;
  uint32_t contributors = 0;
};

// A finished round's answer, as a shard keeps it for repeated and late pushes.
struct KeptAnswer {
  uint32_t group = 0;
  uint64_t step = 0;
  uint32_t round = 0;
  RoundResult result;
  // Groups whose method keeps state where the sum is: that state after this
  // round (AggregationState::Save), so a restarted shard resumes it from its
  // newest kept answer. Null otherwise.
  std::shared_ptr<const std::vector<float>> group_state;
};

struct AggregationConfig {
  std::string job;
  uint32_t world_size = 0;
  std::vector<GroupSpec> groups;
  absl::Duration round_deadline = absl::Seconds(30);
  // Finished answers kept per group for late or repeated pushes.
  size_t finished_rounds_kept = 4;
  // How far from its group's progress a push's step may be
  // (server/push_admission.h).
  uint64_t step_window = 64;
  // Open rounds, and payload bytes held by open rounds, past which no new
  // round opens (RESOURCE_EXHAUSTED).
  uint64_t max_open_rounds = 4096;
  uint64_t max_held_bytes = uint64_t{1} << 30;
  // Rounds of one group that one worker may hold alone (opened, no other
  // worker's push in them yet). An honest worker holds at most one: it
  // pushes a group's next step only after applying the answer of its last,
  // which needs every worker. So one worker pushing steps ahead within the
  // window cannot take the shard-wide caps from the others (4: room for a
  // round failed at its deadline and pushed again, and more).
  uint32_t max_rounds_alone = 4;
  // One worker's pushes waiting on one round or parked push at once (its
  // first push and repeats; an honest worker repeats a push only when its
  // transport lost the call, at most RetryPolicy::max_attempts times).
  uint32_t max_pushes_waiting = 8;
  // Called once per round that completes or fails, outside the core's lock,
  // on the thread that ended it. May be empty.
  std::function<void(const RoundReport&)> on_round_finished;
  // Records each answer before any push is answered with it, outside the
  // core's lock, on the thread that completed the round (for example
  // AnswerJournal::Record). A failure fails the round with UNAVAILABLE
  // naming the cause, so the workers re-push it. May be empty.
  std::function<absl::Status(const KeptAnswer&)> record_answer;
};

struct RoundKey {
  std::string job;
  uint64_t step = 0;
  uint32_t group = 0;
  // Numbered from 0 (GroupSpec::rounds); round 1 takes the exact values at
  // round 0's candidates (PayloadKind::kCandidateValues).
  uint32_t round = 0;
};

using PushCallback = std::function<void(absl::StatusOr<RoundResult>)>;

class AggregationCore {
 public:
  // A shard may own no groups (a job with fewer groups than shards); it then
  // refuses every push as not its own.
  // INVALID_ARGUMENT for an empty job, no workers, a repeated group,
  // a group of 0 or 2^32+ elements or of rounds other than 1 or 2, an
  // unknown compressor, a non-positive deadline, or a zero step window,
  // round cap or byte cap.
  static absl::StatusOr<std::unique_ptr<AggregationCore>> Create(AggregationConfig config);

  // Adds `worker`'s payload to the round; `done` runs as described in the
  // file comment. `now` starts the round's deadline on its first push. For a
  // second round the payload is candidate values (one per candidate).
  void Push(const RoundKey& key, uint32_t worker, Payload payload, absl::Time now,
            PushCallback done);

  // Takes up the answers an earlier incarnation of this shard recorded
  // (AggregationConfig::record_answer), before the first push: a push of one
  // of those rounds gets its answer, as if this core had finished it. Only
  // the newest `finished_rounds_kept` per group are taken up.
  // INVALID_ARGUMENT, with nothing taken up, for an answer of a group this
  // shard does not own, one whose update does not fit its group, or two
  // answers of the same round.
  absl::Status Restore(std::vector<KeptAnswer> answers);

  // Fails every open round whose deadline passed by `now`, and every parked
  // push whose wait did; returns how many rounds.
  int ExpireRounds(absl::Time now);

  // Fails every open round and parked push with `status` (shutdown);
  // returns how many rounds.
  int FailAllRounds(const absl::Status& status);

  struct Stats {
    uint64_t pushes = 0;
    uint64_t rounds_completed = 0;
    uint64_t rounds_failed = 0;
    uint64_t rounds_open = 0;
    uint64_t bytes_in = 0;
    // Payload bytes held by open rounds and parked pushes.
    uint64_t bytes_held = 0;
    // Pushes refused by the step window (ABORTED: slot and parking taken,
    // server/push_admission.h, row 8c) and by the caps on
    // open rounds and held bytes (RESOURCE_EXHAUSTED).
    uint64_t refused_out_of_window = 0;
    uint64_t refused_over_capacity = 0;
    // Rounds outside the window that their worker's next push beyond it
    // superseded (also counted in rounds_failed).
    uint64_t superseded_beyond_window = 0;
    // Rounds within the window one worker held alone that its nearer push
    // superseded, its share being full (server/push_admission.h, row 10;
    // also counted in rounds_failed).
    uint64_t superseded_held_alone = 0;
    // Pushes outside the window that were parked, that then joined a round
    // of their step, and that a nearer push replaced or that expired; and the
    // pushes parked now (server/push_admission.h).
    uint64_t parked_beyond_window = 0;
    uint64_t parked_joined = 0;
    uint64_t parked_failed = 0;
    uint64_t parked_now = 0;
    // Merging and decoding the completed rounds (RoundReport::decode_time).
    double decode_seconds = 0;
  };
  Stats stats() const;

  const AggregationConfig& config() const { return config_; }

 private:
  struct Group {
    GroupSpec spec;
    std::mutex decode_mu;
    std::unique_ptr<Compressor> decoder ABSL_PT_GUARDED_BY(decode_mu);
    // The method's state where the sum is, if it keeps one: stepped by each
    // completed round in place of the decoder (under decode_mu).
    std::unique_ptr<AggregationState> method_state ABSL_PT_GUARDED_BY(decode_mu);
  };
  struct Round {
    absl::Time opened;  // first push, by the clock (for latency)
    absl::Time deadline;
    std::vector<bool> arrived;
    uint32_t count = 0;
    std::vector<Payload> parts;  // by worker; merged in worker order at completion
    std::vector<PushCallback> waiting;
    std::vector<uint32_t> waiting_by_worker;  // how many of `waiting` each worker's pushes are
    bool decoding = false;
    uint64_t bytes = 0;           // payload bytes held
    // A round outside the group's step window, and the worker whose push
    // opened it and holds it (one per worker and group: see the file
    // comment); -1 for a round within the window.
    int64_t beyond_window_holder = -1;
  };
  // A push outside the window whose worker's slot was taken: it waits for a
  // round of its step to open (server/push_admission.h). Its payload counts in
  // bytes_held.
  struct ParkedPush {
    uint64_t step = 0;
    Payload payload;
    uint64_t bytes = 0;
    absl::Time deadline;
    std::vector<PushCallback> waiting;
  };
  // Where a group's steps stand (first rounds; a second round needs its
  // first round's kept answer, which bounds it).
  struct Progress {
    bool any_finished = false;
    uint64_t last_finished = 0;  // the most recently finished round's step
    // Each worker's held round outside the window: worker -> its step.
    std::map<uint32_t, uint64_t> beyond_window_rounds;
    // Each worker's parked push outside the window: worker -> the push.
    std::map<uint32_t, ParkedPush> parked;
  };
  struct RoundId {
    uint32_t group = 0;
    uint64_t step = 0;
    uint32_t round = 0;
    bool operator<(const RoundId& o) const {
      return std::tie(group, step, round) < std::tie(o.group, o.step, o.round);
    }
  };
  using FinishedKey = std::pair<uint32_t, uint32_t>;  // (group, round)
  // A round failed under the lock, to be answered and reported outside it.
  struct EndedRound {
    std::vector<PushCallback> waiting;
    absl::Status status;
    RoundReport report;
    bool is_round = true;  // false: a parked push, which opened no round and is not reported
  };

  explicit AggregationCore(AggregationConfig config) : config_(std::move(config)) {}

  // Checks a request against the configuration; no state is read (a second
  // round's candidates are checked in Push, under the lock).
  absl::Status ValidatePush(const RoundKey& key, uint32_t worker, const Payload& payload,
                            Group** group) const;
  // A second-round push carries one value per candidate of its first
  // round's answer, which this shard must still keep, and no indices: on OK
  // the payload becomes the sparse payload of those values at the
  // candidates. After a dense first answer (a low-rank method's factor,
  // common/round_finish.h) the push's factor values stay as they are
  // (ValidatePush checked their count with the method). FAILED_PRECONDITION
  // when the answer is not kept, INVALID_ARGUMENT when the count differs.
  absl::Status PlaceAtCandidatesLocked(const RoundKey& key, Payload* payload) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Decodes a complete round and answers its waiting pushes.
  void Complete(Group& group, const RoundId& id);
  // Fails the open rounds `why` gives a status for, and the parked pushes
  // `why_parked` gives one for; returns how many rounds.
  int FailRounds(const std::function<absl::Status(const RoundId&, const Round&)>& why,
                 const std::function<absl::Status(uint32_t group, uint32_t worker, const ParkedPush&)>& why_parked);
  // The step a group's window is centred on (server/push_admission.h: its progress): its most
  // recently finished round's, else its lowest open round's; none before
  // either.
  std::optional<uint64_t> WindowAnchorLocked(uint32_t group) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The admission policy's limits (server/push_admission.h), from the config.
  AdmissionLimits Limits() const;
  // What this core knows of `worker`'s push of `key`, holding `held_bytes`
  // (AdmitPush's input). A kept answer of its round is set in *kept.
  PushFacts FactsLocked(const RoundKey& key, uint32_t worker, uint64_t held_bytes, const RoundResult** kept) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Opens round `id` (its deadline from `now`), in `slot_holder`'s slot
  // outside the window (-1: in none), and moves the pushes parked for its
  // step into it.
  std::map<RoundId, Round>::iterator OpenRoundLocked(const RoundId& id, absl::Time now, int64_t slot_holder)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Fails round `id` (open, not decoding) with `why`: removed, its waiters
  // and report appended to *ended, to be answered outside the lock.
  void SupersedeRoundLocked(const RoundId& id, const absl::Status& why, std::vector<EndedRound>* ended)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // How many workers parked a push of (group, step).
  uint32_t ParkedAtLocked(uint32_t group, uint64_t step) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Parks `worker`'s push of `key`; a push it had parked fails with
  // `replaced` (appended to *ended, answered outside the lock).
  void ParkLocked(const RoundKey& key, uint32_t worker, Payload payload, uint64_t payload_bytes, absl::Time now,
                  PushCallback done, const absl::Status& replaced, std::vector<EndedRound>* ended)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Moves the pushes parked for (group, step) into `round`, just opened.
  void AdoptParkedLocked(const RoundId& id, Round& round) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Takes every parked push that `fail` gives a status for out of its
  // group's parking, appending it to *ended.
  void FailParkedLocked(const std::function<absl::Status(uint32_t group, uint32_t worker, const ParkedPush&)>& fail,
                        std::vector<EndedRound>* ended) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Frees an ended round's accounting (bytes held, its group's beyond-window
  // slot).
  void ForgetRoundLocked(const RoundId& id, const Round& round) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const AggregationConfig config_;
  std::map<uint32_t, std::unique_ptr<Group>> groups_;  // immutable after Create

  mutable std::mutex mu_;
  std::map<RoundId, Round> rounds_ ABSL_GUARDED_BY(mu_);
  // Answers of each group's finished steps, oldest first.
  std::map<FinishedKey, std::deque<std::pair<uint64_t, RoundResult>>> finished_ ABSL_GUARDED_BY(mu_);
  std::map<uint32_t, Progress> progress_ ABSL_GUARDED_BY(mu_);
  Stats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace sketchfuse

#endif  // SKETCHFUSE_SERVER_AGGREGATION_CORE_H_
