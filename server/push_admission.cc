#include "server/push_admission.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace sketchfuse {
namespace {

// How far `step` is from the progress `anchor`, either way.
uint64_t Distance(uint64_t step, uint64_t anchor) { return step > anchor ? step - anchor : anchor - step; }

Admission Refuse(absl::Status status, RefusalKind kind) {
  Admission a;
  a.admit = Admit::kRefuse;
  a.status = std::move(status);
  a.refusal = kind;
  return a;
}

Admission Take(Admit admit, absl::Status displaced = absl::OkStatus()) {
  Admission a;
  a.admit = admit;
  a.displaced = std::move(displaced);
  return a;
}

std::string NameOf(const PushFacts& f) { return RoundName(f.job, f.group, f.step, f.round); }

// The caps on open rounds and held bytes (rows 6, 7, 11), for a push that
// would open a round once `freed_rounds` rounds and `freed_bytes` bytes are
// gone (a superseded round).
absl::Status CheckCaps(const PushFacts& f, const AdmissionLimits& limits, uint64_t freed_rounds,
                       uint64_t freed_bytes) {
  const uint64_t rounds_open = f.rounds_open - std::min(f.rounds_open, freed_rounds);
  const uint64_t bytes_held = f.bytes_held - std::min(f.bytes_held, freed_bytes);
  if (rounds_open >= limits.max_open_rounds) {
    return absl::ResourceExhaustedError(absl::StrCat("this shard holds its maximum of ", limits.max_open_rounds,
                                                     " open rounds (--max_open_rounds): ", NameOf(f),
                                                     " cannot open now"));
  }
  if (bytes_held + f.payload_bytes > limits.max_held_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "this shard's open rounds hold ", f.bytes_held, " payload bytes; ", f.payload_bytes,
        " more would pass its maximum of ", limits.max_held_bytes, " (--max_held_mb): ", NameOf(f),
        " cannot open now"));
  }
  return absl::OkStatus();
}

// Row 8: the worker's slot is taken; the push parks, waits with its parked
// repeat, or is refused.
Admission Park(const PushFacts& f, const AdmissionLimits& limits, uint64_t progress) {
  if (f.parked_step.has_value() && *f.parked_step == f.step) {
    if (f.parked_waiting >= limits.max_pushes_waiting) {  // 8b
      return Refuse(absl::ResourceExhaustedError(absl::StrCat(
                        "worker ", f.worker, " already has ", f.parked_waiting, " pushes of ",
                        RoundName(f.job, f.group, f.step), " waiting for its round to open (the most one worker may "
                        "have); wait for them")),
                    RefusalKind::kOverCapacity);
    }
    return Take(Admit::kWaitWithParked);  // 8a
  }
  const uint64_t distance = Distance(f.step, progress);
  if (f.parked_step.has_value() && distance >= Distance(*f.parked_step, progress)) {  // 8c
    return Refuse(absl::AbortedError(absl::StrCat(
                      "step ", f.step, " of group ", f.group, " is outside the step window (", limits.step_window,
                      " steps of step ", progress, ", --step_window) and not open; worker ", f.worker, " holds step ",
                      f.slot_step.value_or(0), " there and waits on step ", *f.parked_step,
                      ": push again once another worker opens it")),
                  RefusalKind::kOutOfWindow);
  }
  const uint64_t freed = f.parked_step.has_value() ? std::min(f.bytes_held, f.parked_bytes) : 0;
  if (f.bytes_held - freed + f.payload_bytes > limits.max_held_bytes) {
    return Refuse(absl::ResourceExhaustedError(absl::StrCat(
                      "this shard's open rounds hold ", f.bytes_held, " payload bytes; ", f.payload_bytes,
                      " more would pass its maximum of ", limits.max_held_bytes, " (--max_held_mb): ", NameOf(f),
                      " cannot wait now")),
                  RefusalKind::kOverCapacity);
  }
  if (!f.parked_step.has_value()) return Take(Admit::kPark);  // 8d
  return Take(Admit::kPark,
              absl::UnavailableError(absl::StrCat(
                  "worker ", f.worker, "'s push of step ", *f.parked_step, " of group ", f.group,
                  " (outside the step window, waiting for its round to open) was replaced by its push of step ",
                  f.step, ", nearer the group's progress; push again to wait again")));
}

}  // namespace

std::string RoundName(const std::string& job, uint32_t group, uint64_t step, uint32_t round) {
  return absl::StrCat("round ", round, " (job '", job, "', step ", step, ", group ", group, ")");
}

Admission AdmitPush(const PushFacts& f, const AdmissionLimits& limits) {
  switch (f.round_state) {
    case PushFacts::RoundState::kOpen:
      if (f.waiting >= limits.max_pushes_waiting) {  // 2
        return Refuse(absl::ResourceExhaustedError(absl::StrCat(
                          "worker ", f.worker, " already has ", f.waiting, " pushes of ", NameOf(f),
                          " waiting for its answer (the most one worker may have); wait for them")),
                      RefusalKind::kOverCapacity);
      }
      return Take(Admit::kJoin);  // 1
    case PushFacts::RoundState::kKept:
      return Take(Admit::kAnswerKept);  // 3
    case PushFacts::RoundState::kNew:
      break;
  }
  // 4: just behind the kept answers. Far behind them (kept answers far ahead,
  // as a forged far-future round leaves them) is the step window's to judge.
  if (f.oldest_kept.has_value() && f.step < *f.oldest_kept && *f.oldest_kept - f.step <= limits.step_window) {
    return Refuse(absl::FailedPreconditionError(
                      absl::StrCat(NameOf(f), " finished long ago; its answer is no longer kept")),
                  RefusalKind::kNone);
  }
  if (f.round == 0 && f.progress.has_value() && Distance(f.step, *f.progress) > limits.step_window) {
    const uint64_t distance = Distance(f.step, *f.progress);
    if (!f.slot_step.has_value()) {  // 6
      if (absl::Status caps = CheckCaps(f, limits, 0, 0); !caps.ok()) {
        return Refuse(std::move(caps), RefusalKind::kOverCapacity);
      }
      return Take(Admit::kOpenInSlot);
    }
    if (!f.slot_held_alone || distance >= Distance(*f.slot_step, *f.progress)) {
      return Park(f, limits, *f.progress);  // 8
    }
    // 7: the worker moved nearer the progress than the round it alone holds
    // there, which gives way.
    if (absl::Status caps = CheckCaps(f, limits, 1, f.slot_bytes); !caps.ok()) {
      return Refuse(std::move(caps), RefusalKind::kOverCapacity);
    }
    return Take(Admit::kSupersedeAndOpenInSlot,
                absl::UnavailableError(absl::StrCat(RoundName(f.job, f.group, *f.slot_step),
                                                    " (outside the step window) was superseded by worker ", f.worker,
                                                    "'s push of step ", f.step,
                                                    ", nearer the group's progress; push again to reopen it")));
  }
  // 5, 10-13: within the window (or a second round, or no progress yet).
  if (f.held_alone.size() >= limits.max_rounds_alone) {
    const uint64_t anchor = f.progress.value_or(f.step);
    const uint64_t farthest = *std::max_element(f.held_alone.begin(), f.held_alone.end(), [&](uint64_t a, uint64_t b) {
      return Distance(a, anchor) < Distance(b, anchor);
    });
    if (f.progress.has_value() && Distance(f.step, anchor) < Distance(farthest, anchor)) {  // 10
      if (absl::Status caps = CheckCaps(f, limits, 1, f.farthest_alone_bytes); !caps.ok()) {
        return Refuse(std::move(caps), RefusalKind::kOverCapacity);
      }
      Admission a = Take(Admit::kSupersedeAndOpen,
                         absl::UnavailableError(absl::StrCat(
                             RoundName(f.job, f.group, farthest, f.farthest_alone_round), " gave way to worker ",
                             f.worker, "'s push of step ", f.step,
                             ", nearer the group's progress (one worker holds at most ", limits.max_rounds_alone,
                             " rounds alone); push again to reopen it")));
      a.displaced_step = farthest;
      a.displaced_round = f.farthest_alone_round;
      return a;
    }
    // 11: a list of steps the flooder chose: the first two, then a count.
    std::vector<uint64_t> shown(f.held_alone.begin(), f.held_alone.begin() + std::min<size_t>(2, f.held_alone.size()));
    const std::string more =
        f.held_alone.size() > shown.size() ? absl::StrCat(" and ", f.held_alone.size() - shown.size(), " more") : "";
    return Refuse(absl::ResourceExhaustedError(absl::StrCat(
                      "worker ", f.worker, " already holds ", f.held_alone.size(), " rounds of group ", f.group,
                      " that no other worker has pushed (steps ", absl::StrJoin(shown, ", "), more,
                      "), the most one worker may: step ", f.step, " cannot open in its name now")),
                  RefusalKind::kOverCapacity);
  }
  if (absl::Status caps = CheckCaps(f, limits, 0, 0); !caps.ok()) {  // 12
    return Refuse(std::move(caps), RefusalKind::kOverCapacity);
  }
  return Take(Admit::kOpen);  // 13
}

}  // namespace sketchfuse
