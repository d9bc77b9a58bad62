// Which pushes a shard takes, and how: the admission policy of
// AggregationCore in one place. The core gathers what it knows of a push
// under its lock (PushFacts) and does what AdmitPush answers; every rule
// that decides the answer (the step window, a worker's slot and parked push
// outside it, its share of rounds held alone, its repeats, the shard's caps)
// is here and nowhere else.
//
// Terms: a group's *progress* (its window's anchor) is the step of its most
// recently finished round, or before any, its lowest open round's. A step
// more than `step_window` from it, either way, is *outside the window*.
// Outside the window each worker has one *slot* per group (one round it may
// open there) and may *park* one push (a push that opens nothing and waits
// for a round of its step to open). A round a worker *holds alone* is one it
// opened that no other worker has pushed into yet. *Nearer* means nearer the
// progress.
//
// Every push a worker can make, and its answer (first match, top to
// bottom; "the caps" are max_open_rounds and max_held_bytes, refused with
// RESOURCE_EXHAUSTED naming the flag):
//
//  # | the push                                              | the answer
// ---+-------------------------------------------------------+-------------------------------------------------
//  1 | into an open round, fewer than max_pushes_waiting of   | kJoin: its payload lands (once: a repeat adds
//    | the worker's pushes waiting on it                      | nothing) and it waits for the round's answer
//  2 | into an open round, max_pushes_waiting waiting         | RESOURCE_EXHAUSTED ("already has N pushes")
//  3 | of a finished round whose answer is kept               | kAnswerKept: that answer again
//  4 | not open, not kept, at most step_window below the      | FAILED_PRECONDITION ("finished long ago")
//    | oldest kept answer                                     |
//  5 | a second round's (round 1), new                        | as 10-12 (no step window: its first round's
//    |                                                        | kept answer bounds it)
//  6 | outside the window, the worker's slot free             | kOpenInSlot, if the caps allow. The worker's
//    |                                                        | share (10) does not apply: the slot is one round
//  7 | outside, the slot held alone by a round farther than   | kSupersedeAndOpenInSlot, if the caps allow once
//    | this push                                              | that round is gone: it fails UNAVAILABLE (its
//    |                                                        | worker's transport pushes it again)
//  8 | outside, the slot held otherwise (another worker       | park, by 8a-8d:
//    | pushed into its round, or it is as near or nearer)     |
//    |   8a: its parked push is of this step, fewer than      |   kWaitWithParked: waits with it
//    |       max_pushes_waiting waiting                       |
//    |   8b: the same, max_pushes_waiting waiting             |   RESOURCE_EXHAUSTED ("already has N pushes")
//    |   8c: it parked a push as near or nearer               |   ABORTED naming the held and parked steps (the
//    |                                                        |   round may open meanwhile: push again)
//    |   8d: none parked, or a farther one                    |   kPark, if max_held_bytes allows; a farther
//    |                                                        |   parked push fails UNAVAILABLE (replaced)
//  9 | (every worker parked a push of one step: the core      |
//    | opens that round complete, in no worker's slot)        |
// 10 | within the window (or no progress yet), the worker     | kSupersedeAndOpen, if the caps allow once that
//    | holds max_rounds_alone rounds of the group alone       | round is gone: the farthest of them, when this
//    | within it, one of them farther than this push          | push is nearer, fails UNAVAILABLE
// 11 | the same, none of them farther                         | RESOURCE_EXHAUSTED naming the steps it holds
// 12 | within the window, open rounds at max_open_rounds, or  | RESOURCE_EXHAUSTED naming the cap
//    | held bytes past max_held_bytes with this payload       |
// 13 | within the window otherwise                            | kOpen: a new round
//
// What follows: the job's round needs only one worker's slot or share (a
// push into an open round always lands, row 1), and a worker's own rounds
// far from the job's step (a flood of one worker's credentials) cannot keep
// that worker's push of the job's step out: outside the window it takes its
// slot (6) or supersedes its farther round there (7); within it only the
// rounds held alone within the window count against its share, and the
// farthest of them gives way to a push nearer the progress (10), as the
// job's next step always is. So the job's round completes whichever worker
// pushes first, in every order of the race, however its own rounds were
// flooded.
#ifndef SKETCHFUSE_SERVER_PUSH_ADMISSION_H_
#define SKETCHFUSE_SERVER_PUSH_ADMISSION_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace sketchfuse {

struct AdmissionLimits {
  uint64_t step_window = 64;
  uint32_t max_rounds_alone = 4;
  uint32_t max_pushes_waiting = 8;
  uint64_t max_open_rounds = 4096;
  uint64_t max_held_bytes = uint64_t{1} << 30;
};

// What the core knows of a push when it decides, under its lock.
struct PushFacts {
  // The push: its round (job, group, step, round number) and worker.
  std::string job;
  uint32_t group = 0;
  uint64_t step = 0;
  uint32_t round = 0;
  uint32_t worker = 0;
  // Payload bytes the push would hold in a round or parked.
  uint64_t payload_bytes = 0;

  enum class RoundState {
    kOpen,  // its round is open
    kKept,  // its round finished and its answer is kept
    kNew,   // neither
  };
  RoundState round_state = RoundState::kNew;
  // kOpen: how many of the worker's pushes wait on the round already.
  uint32_t waiting = 0;
  // kNew: the step of the oldest answer kept of (group, round), if any.
  std::optional<uint64_t> oldest_kept;

  // The group's progress (the window's anchor); none before any round.
  std::optional<uint64_t> progress;
  // The worker's slot outside the window: the step of the round it holds
  // there, whether it holds it alone, and the bytes that round holds.
  std::optional<uint64_t> slot_step;
  bool slot_held_alone = false;
  uint64_t slot_bytes = 0;
  // The worker's parked push of the group: its step, how many of its pushes
  // wait with it, and its bytes.
  std::optional<uint64_t> parked_step;
  uint32_t parked_waiting = 0;
  uint64_t parked_bytes = 0;
  // The group's rounds the worker holds alone within the window (all of
  // them before any progress): their steps, and of the farthest from the
  // progress its round number and bytes.
  std::vector<uint64_t> held_alone;
  uint32_t farthest_alone_round = 0;
  uint64_t farthest_alone_bytes = 0;

  // The shard: its open rounds, and the payload bytes they and the parked
  // pushes hold.
  uint64_t rounds_open = 0;
  uint64_t bytes_held = 0;
};

// What the core does with a push (the table's answers).
enum class Admit {
  kRefuse,                  // answer Admission::status at once
  kAnswerKept,              // the kept answer of its round
  kJoin,                    // into its open round
  kOpen,                    // a new round within the window
  kSupersedeAndOpen,        // the same, after failing the worker's farthest round held alone (Admission::displaced)
  kOpenInSlot,              // a new round outside it, in the worker's slot
  kSupersedeAndOpenInSlot,  // the same, after failing the slot's round with Admission::displaced
  kPark,                    // parked; a parked push it replaces fails with Admission::displaced
  kWaitWithParked,          // a repeat of the parked push: waits with it
};

// Which of the core's counters a refusal counts in.
enum class RefusalKind { kNone, kOutOfWindow, kOverCapacity };

struct Admission {
  Admit admit = Admit::kRefuse;
  // kRefuse: the refusal, naming what was refused and why.
  absl::Status status;
  RefusalKind refusal = RefusalKind::kNone;
  // kSupersedeAndOpen(InSlot), and kPark over a farther parked push: what
  // the displaced round's or parked push's waiting pushes get.
  absl::Status displaced;
  // kSupersedeAndOpen: the round that gives way.
  uint64_t displaced_step = 0;
  uint32_t displaced_round = 0;
};

// The answer of the table above for `facts` under `limits`.
Admission AdmitPush(const PushFacts& facts, const AdmissionLimits& limits);

// "round R (job 'J', step S, group G)", as every message of the core names
// a round.
std::string RoundName(const std::string& job, uint32_t group, uint64_t step, uint32_t round = 0);

}  // namespace sketchfuse

#endif  // SKETCHFUSE_SERVER_PUSH_ADMISSION_H_
