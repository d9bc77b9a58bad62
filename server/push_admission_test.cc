// Walks the table of server/push_admission.h, row by row: each push a worker
// can make (in or out of the window, parked or not, held alone or not, a
// repeat or not) gets the answer the table gives, and every refusal names
// what was refused and why in under 300 characters.
#include "server/push_admission.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace sketchfuse {
namespace {

constexpr uint64_t kWindow = 64;

AdmissionLimits Limits() {
  AdmissionLimits limits;
  limits.step_window = kWindow;
  limits.max_rounds_alone = 4;
  limits.max_pushes_waiting = 8;
  limits.max_open_rounds = 100;
  limits.max_held_bytes = 10000;
  return limits;
}

// Worker 0's push of step `step` of group 3, the group's progress at 900,
// nothing open, held or parked.
PushFacts Push(uint64_t step) {
  PushFacts f;
  f.job = "job";
  f.group = 3;
  f.step = step;
  f.worker = 0;
  f.payload_bytes = 100;
  f.progress = 900;
  return f;
}

// The answer, checked: a refusal's message holds `needle` and is short.
Admission Expect(const PushFacts& f, Admit admit, const std::string& needle = "",
                 absl::StatusCode code = absl::StatusCode::kOk) {
  const Admission a = AdmitPush(f, Limits());
  EXPECT_EQ(static_cast<int>(a.admit), static_cast<int>(admit)) << a.status;
  if (admit == Admit::kRefuse) {
    EXPECT_EQ(a.status.code(), code) << a.status;
    EXPECT_NE(std::string(a.status.message()).find(needle), std::string::npos) << a.status;
    EXPECT_LT(a.status.message().size(), 300u) << a.status;
  } else {
    EXPECT_TRUE(a.status.ok()) << a.status;
  }
  return a;
}

TEST(PushAdmissionTest, Row1APushIntoAnOpenRoundJoinsIt) {
  PushFacts f = Push(5000000);  // far outside the window: an open round takes it anyway
  f.round_state = PushFacts::RoundState::kOpen;
  Expect(f, Admit::kJoin);
  f.waiting = 7;  // a repeat, under the limit
  f.held_alone = {901, 902, 903, 904};
  f.rounds_open = 100;  // the caps do not stop a push into an open round
  Expect(f, Admit::kJoin);
}

TEST(PushAdmissionTest, Row2TooManyRepeatsOfOnePushAreRefused) {
  PushFacts f = Push(901);
  f.round_state = PushFacts::RoundState::kOpen;
  f.waiting = 8;
  const Admission a = Expect(f, Admit::kRefuse, "worker 0 already has 8 pushes of round 0 (job 'job', step 901, group 3)",
                             absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(a.refusal, RefusalKind::kOverCapacity);
}

TEST(PushAdmissionTest, Row3AFinishedRoundGetsItsKeptAnswer) {
  PushFacts f = Push(899);
  f.round_state = PushFacts::RoundState::kKept;
  Expect(f, Admit::kAnswerKept);
}

TEST(PushAdmissionTest, Row4JustBehindTheKeptAnswersIsFinished) {
  PushFacts f = Push(850);
  f.oldest_kept = 896;
  Expect(f, Admit::kRefuse, "step 850, group 3) finished long ago", absl::StatusCode::kFailedPrecondition);
  // Far behind them it is the window's to judge: outside, the slot free.
  f.step = 10;
  Expect(f, Admit::kOpenInSlot);
}

TEST(PushAdmissionTest, Row5ASecondRoundKnowsNoWindowOnlyTheShareAndTheCaps) {
  PushFacts f = Push(5000000);
  f.round = 1;
  Expect(f, Admit::kOpen);
  f.held_alone = {1, 2, 3, 4};
  Expect(f, Admit::kRefuse, "already holds 4 rounds", absl::StatusCode::kResourceExhausted);
}

TEST(PushAdmissionTest, Row6OutsideTheWindowTheFreeSlotTakesThePushWhateverTheWorkersShare) {
  PushFacts f = Push(900 + kWindow + 1);
  Expect(f, Admit::kOpenInSlot);
  // The case of issue 70: the worker holds its share of rounds alone within
  // the window (a flood in its name) and pushes the job's step, outside it.
  f = Push(900);
  f.progress = 2000000;
  f.held_alone = {2000000, 2000001, 2000002, 2000003};
  Expect(f, Admit::kOpenInSlot);
  // The caps still hold.
  f.rounds_open = 100;
  Expect(f, Admit::kRefuse, "maximum of 100 open rounds (--max_open_rounds)", absl::StatusCode::kResourceExhausted);
  f.rounds_open = 0;
  f.bytes_held = 9950;
  Expect(f, Admit::kRefuse, "(--max_held_mb)", absl::StatusCode::kResourceExhausted);
}

TEST(PushAdmissionTest, Rows10And11AFullShareGivesWayOnlyToANearerPush) {
  // Within the window the worker's share counts: its farthest round held
  // alone gives way to a push nearer the progress (the job's next step).
  PushFacts f = Push(901);
  f.held_alone = {905, 902, 904, 903};
  f.farthest_alone_bytes = 100;
  const Admission a = Expect(f, Admit::kSupersedeAndOpen);
  EXPECT_EQ(a.displaced_step, 905u);
  EXPECT_EQ(a.displaced.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(std::string(a.displaced.message()).find("round 0 (job 'job', step 905, group 3) gave way to worker 0's push "
                                                    "of step 901"),
            std::string::npos)
      << a.displaced;
  // A push as far as its farthest, or farther, is refused, the steps cut.
  f.step = 906;
  Expect(f, Admit::kRefuse,
         "worker 0 already holds 4 rounds of group 3 that no other worker has pushed (steps 905, 902 and 2 more), the "
         "most one worker may: step 906 cannot open in its name now",
         absl::StatusCode::kResourceExhausted);
  f.step = 895;  // as far as 905, on the other side
  Expect(f, Admit::kRefuse, "cannot open in its name now", absl::StatusCode::kResourceExhausted);
  // The caps count the round that gives way as gone.
  f.step = 901;
  f.rounds_open = 100;
  Expect(f, Admit::kSupersedeAndOpen);
  f.bytes_held = 10001;
  Expect(f, Admit::kRefuse, "--max_held_mb", absl::StatusCode::kResourceExhausted);
}

TEST(PushAdmissionTest, Row7ANearerPushSupersedesTheRoundItsWorkerHoldsAloneOutsideTheWindow) {
  PushFacts f = Push(2000);
  f.slot_step = 5000;
  f.slot_held_alone = true;
  f.slot_bytes = 400;
  const Admission a = Expect(f, Admit::kSupersedeAndOpenInSlot);
  EXPECT_EQ(a.displaced.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(std::string(a.displaced.message()).find("step 5000, group 3) (outside the step window) was superseded by "
                                                    "worker 0's push of step 2000"),
            std::string::npos)
      << a.displaced;
  // The caps count the superseded round as gone.
  f.rounds_open = 100;
  f.bytes_held = 10000 + 400 - 100;
  Expect(f, Admit::kSupersedeAndOpenInSlot);
  f.bytes_held += 1;
  Expect(f, Admit::kRefuse, "cannot open now", absl::StatusCode::kResourceExhausted);
}

TEST(PushAdmissionTest, Row8AWorkerWhoseSlotIsTakenParks) {
  // 8d: the slot holds a round another worker joined (or a nearer one): park.
  PushFacts f = Push(2000);
  f.slot_step = 5000;
  f.slot_held_alone = false;
  EXPECT_TRUE(Expect(f, Admit::kPark).displaced.ok());
  f.slot_step = 1500;  // nearer, held alone: kept
  f.slot_held_alone = true;
  Expect(f, Admit::kPark);
  f.progress = 5000;  // as near, on the other side of the progress: kept
  f.step = 6100;
  f.slot_step = 3900;
  Expect(f, Admit::kPark);
}

TEST(PushAdmissionTest, Row8aAnd8bARepeatOfTheParkedPushWaitsWithItUpToTheLimit) {
  PushFacts f = Push(2000);
  f.slot_step = 1500;
  f.parked_step = 2000;
  f.parked_waiting = 7;
  Expect(f, Admit::kWaitWithParked);
  f.parked_waiting = 8;
  Expect(f, Admit::kRefuse, "already has 8 pushes of round 0 (job 'job', step 2000, group 3) waiting for its round",
         absl::StatusCode::kResourceExhausted);
}

TEST(PushAdmissionTest, Row8cAFartherOrAsFarPushThanTheParkedOneIsAborted) {
  PushFacts f = Push(3000);
  f.slot_step = 1500;
  f.parked_step = 2000;
  const Admission a = Expect(f, Admit::kRefuse,
                             "step 3000 of group 3 is outside the step window (64 steps of step 900, --step_window) "
                             "and not open; worker 0 holds step 1500 there and waits on step 2000: push again once "
                             "another worker opens it",
                             absl::StatusCode::kAborted);
  EXPECT_EQ(a.refusal, RefusalKind::kOutOfWindow);
  f.step = 2000 - 1;  // nearer: replaces it
  f.parked_bytes = 100;
  const Admission replaced = Expect(f, Admit::kPark);
  EXPECT_EQ(replaced.displaced.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(std::string(replaced.displaced.message()).find("push of step 2000 of group 3 (outside the step window, "
                                                           "waiting for its round to open) was replaced by its push "
                                                           "of step 1999"),
            std::string::npos)
      << replaced.displaced;
}

TEST(PushAdmissionTest, Row8dParkingCountsTheHeldBytesNetOfTheReplacedPush) {
  PushFacts f = Push(1800);
  f.slot_step = 1500;
  f.parked_step = 2000;
  f.parked_bytes = 100;
  f.bytes_held = 10000;  // full, but the replaced push frees as much as this one takes
  Expect(f, Admit::kPark);
  f.parked_step.reset();
  Expect(f, Admit::kRefuse, "cannot wait now", absl::StatusCode::kResourceExhausted);
}

TEST(PushAdmissionTest, Rows10To12WithinTheWindowTheShareAndTheCapsDecide) {
  PushFacts f = Push(901);
  Expect(f, Admit::kOpen);
  f.progress.reset();  // before any round, no window: the share and caps only
  f.step = 123456789;
  Expect(f, Admit::kOpen);
  f.held_alone = {1, 2, 3};
  Expect(f, Admit::kOpen);
  f.held_alone.push_back(4);
  // No progress yet: nothing is nearer it, and nothing gives way.
  Expect(f, Admit::kRefuse,
         "worker 0 already holds 4 rounds of group 3 that no other worker has pushed (steps 1, 2 and 2 more)",
         absl::StatusCode::kResourceExhausted);
  f.held_alone.clear();
  f.rounds_open = 100;
  Expect(f, Admit::kRefuse, "--max_open_rounds", absl::StatusCode::kResourceExhausted);
  f.rounds_open = 99;
  f.bytes_held = 9901;
  Expect(f, Admit::kRefuse, "--max_held_mb", absl::StatusCode::kResourceExhausted);
  f.bytes_held = 9900;
  Expect(f, Admit::kOpen);
}

TEST(PushAdmissionTest, EveryRefusalStaysUnder300CharactersWhateverTheStepsAFlooderChose) {
  // Every number at its widest: steps, the progress and the counters are the
  // flooder's to choose; the job name is the shard's own (a client's other
  // job is refused before admission), here a long one.
  AdmissionLimits limits;
  limits.step_window = uint64_t{1} << 31;
  limits.max_rounds_alone = 4;
  limits.max_pushes_waiting = 8;
  limits.max_open_rounds = uint64_t{1} << 31;
  limits.max_held_bytes = uint64_t{1} << 50;
  PushFacts f;
  f.job = std::string(40, 'j');
  f.group = UINT32_MAX;
  f.worker = UINT32_MAX - 1;
  f.round = 0;
  f.payload_bytes = UINT64_MAX / 4;
  f.bytes_held = UINT64_MAX / 4;
  std::vector<Admission> refusals;
  // 2: repeats; 4: finished; 8b, 8c, 8d: parking; 11, 12: the share and caps.
  f.round_state = PushFacts::RoundState::kOpen;
  f.waiting = UINT32_MAX;
  f.step = UINT64_MAX;
  refusals.push_back(AdmitPush(f, limits));
  f.round_state = PushFacts::RoundState::kNew;
  f.oldest_kept = UINT64_MAX;
  f.step = UINT64_MAX - 1;
  refusals.push_back(AdmitPush(f, limits));
  f.oldest_kept.reset();
  f.progress = 0;
  f.slot_step = UINT64_MAX - 2;
  f.parked_step = UINT64_MAX;
  f.parked_waiting = UINT32_MAX;
  refusals.push_back(AdmitPush(f, limits));  // 8b
  f.parked_step = UINT64_MAX - 3;
  refusals.push_back(AdmitPush(f, limits));  // 8c
  f.parked_step.reset();
  refusals.push_back(AdmitPush(f, limits));  // 8d: the bytes
  f.progress = UINT64_MAX - 1;
  f.held_alone = {UINT64_MAX - 1, UINT64_MAX - 2, UINT64_MAX - 3, UINT64_MAX - 4};
  refusals.push_back(AdmitPush(f, limits));  // 11
  f.held_alone.clear();
  refusals.push_back(AdmitPush(f, limits));  // 12
  for (const Admission& a : refusals) {
    EXPECT_EQ(a.admit, Admit::kRefuse) << a.status;
    EXPECT_LT(a.status.message().size(), 300u) << a.status;
  }
}

}  // namespace
}  // namespace sketchfuse
