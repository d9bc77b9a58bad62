#include "server/aggregation_core.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/compressor_registry.h"
#include "common/error_feedback.h"
#include "common/error_text.h"
#include "common/round_finish.h"

namespace sketchfuse {
namespace {

// "takes 1 round per step" / "takes 2 rounds per step".
std::string TakesRounds(uint32_t rounds) {
  return absl::StrCat("takes ", rounds, rounds == 1 ? " round" : " rounds", " per step");
}

}  // namespace

absl::StatusOr<std::unique_ptr<AggregationCore>> AggregationCore::Create(
    AggregationConfig config) {
  if (config.job.empty()) return absl::InvalidArgumentError("aggregation config: job is empty");
  if (config.world_size == 0) {
    return absl::InvalidArgumentError("aggregation config: world_size must be at least 1");
  }
  if (config.round_deadline <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("aggregation config: round_deadline must be positive");
  }
  if (config.step_window == 0 || config.max_open_rounds == 0 || config.max_held_bytes == 0 ||
      config.max_pushes_waiting == 0 || config.max_rounds_alone == 0) {
    return absl::InvalidArgumentError(
        "aggregation config: step_window, max_open_rounds, max_held_bytes, max_pushes_waiting and max_rounds_alone "
        "must be at least 1");
  }
  std::unique_ptr<AggregationCore> core(new AggregationCore(config));
  for (const GroupSpec& spec : core->config_.groups) {
    if (core->groups_.count(spec.group)) {
      return absl::InvalidArgumentError(
          absl::StrCat("aggregation config: group ", spec.group, " is listed twice"));
    }
    absl::Status size = CheckGroupSize(spec.dim);
    if (!size.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("aggregation config: group ", spec.group, ": ", size.message()));
    }
    absl::StatusOr<std::unique_ptr<Compressor>> decoder =
        CompressorRegistry::Default().Create(spec.compressor);
    if (!decoder.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("aggregation config: group ", spec.group,
                                                     ": ", decoder.status().message()));
    }
    if (spec.rounds < 1 || spec.rounds > 2) {
      return absl::InvalidArgumentError(absl::StrCat("aggregation config: group ", spec.group, " ",
                                                     TakesRounds(spec.rounds), "; 1 or 2 are served"));
    }
    auto group = std::make_unique<Group>();
    group->spec = spec;
    if ((*decoder)->keeps_aggregation_state()) {
      if (spec.rounds > 1 || spec.reselect_top_k > 0) {
        return absl::InvalidArgumentError(absl::StrCat("aggregation config: group ", spec.group, ": ",
                                                       QuoteField(spec.compressor),
                                                       " keeps state where the sum is and has no second round or "
                                                       "re-selection"));
      }
      absl::StatusOr<std::unique_ptr<AggregationState>> state = (*decoder)->NewAggregationState(spec.dim);
      if (!state.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("aggregation config: group ", spec.group, ": ", state.status().message()));
      }
      group->method_state = *std::move(state);
    }
    group->decoder = *std::move(decoder);
    core->groups_.emplace(spec.group, std::move(group));
  }
  return core;
}

absl::Status AggregationCore::ValidatePush(const RoundKey& key, uint32_t worker,
                                           const Payload& payload, Group** group) const {
  if (key.job != config_.job) {
    return absl::InvalidArgumentError(
        absl::StrCat("this shard serves job '", config_.job, "', not ", QuoteField(key.job)));
  }
  auto it = groups_.find(key.group);
  if (it == groups_.end()) {
    std::vector<uint32_t> owned;
    for (const auto& [id, g] : groups_) owned.push_back(id);
    return absl::NotFoundError(absl::StrCat("group ", key.group,
                                            " is not served by this shard (it serves groups ",
                                            absl::StrJoin(owned, ", "), ")"));
  }
  if (worker >= config_.world_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "worker ", worker, " is out of range for a job of ", config_.world_size, " workers"));
  }
  absl::Status valid = ValidatePayload(payload);
  if (!valid.ok()) return absl::InvalidArgumentError(absl::StrCat("payload: ", valid.message()));
  // A NaN or infinity would poison the sum of every honest worker's payload
  // (the worker diverged or its encoding overflowed): refused before the
  // round sees it.
  if (const std::optional<size_t> bad = FirstNonFinite(payload.values); bad.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "payload of group ", key.group, " from worker ", worker, " has a non-finite value: values[", *bad,
        "] = ", payload.values[*bad],
        payload.kind == PayloadKind::kSparse ? absl::StrCat(" (coordinate ", payload.indices[*bad], ")") : ""));
  }
  const GroupSpec& spec = it->second->spec;
  if (payload.dim != spec.dim) {
    return absl::InvalidArgumentError(absl::StrCat("payload dim ", payload.dim, " does not match group ",
                                                   spec.group, " of ", spec.dim, " elements"));
  }
  if (key.round >= spec.rounds) {
    return absl::InvalidArgumentError(
        absl::StrCat("round ", key.round, " of group ", spec.group, ": the group ", TakesRounds(spec.rounds)));
  }
  if (key.round > 0) {
    if (payload.kind != PayloadKind::kCandidateValues) {
      return absl::InvalidArgumentError(absl::StrCat("payload: a second round takes candidate values, not a ",
                                                     PayloadKindName(payload.kind), " payload"));
    }
    // A low-rank method's later round sums factor values of its own count
    // (PlaceAtCandidatesLocked leaves them as they are).
    std::lock_guard<std::mutex> lock(it->second->decode_mu);
    if (it->second->decoder->sums_factor_rounds()) {
      absl::Status fits = it->second->decoder->CheckFactorRound(key.round, payload);
      if (!fits.ok()) return absl::InvalidArgumentError(absl::StrCat("payload: ", fits.message()));
    }
    *group = it->second.get();
    return absl::OkStatus();
  }
  {
    std::lock_guard<std::mutex> lock(it->second->decode_mu);
    absl::Status fits = it->second->decoder->CheckPayloadForStep(payload, key.step);
    if (!fits.ok()) return absl::InvalidArgumentError(absl::StrCat("payload: ", fits.message()));
  }
  *group = it->second.get();
  return absl::OkStatus();
}

absl::Status AggregationCore::PlaceAtCandidatesLocked(const RoundKey& key, Payload* payload) const {
  const std::shared_ptr<const Update>* candidates = nullptr;
  // The candidates are the previous round's answer.
  auto finished = finished_.find(FinishedKey{key.group, key.round - 1});
  if (finished != finished_.end()) {
    for (const auto& [step, result] : finished->second) {
      if (step == key.step) candidates = &result.update;
    }
  }
  if (candidates == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(RoundName(key.job, key.group, key.step),
                                                      " has no answer here (not finished, or no longer kept): "
                                                      "its second round cannot start"));
  }
  // After a dense answer (a low-rank method's factor) the push's factor
  // values are summed as they are: ValidatePush checked their count.
  if ((*candidates)->dense) return absl::OkStatus();
  if (absl::Status s = PlaceAtCandidates(**candidates, payload); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("payload: ", s.message(), " (", RoundName(key.job, key.group, key.step, key.round), ")"));
  }
  return absl::OkStatus();
}

void AggregationCore::Push(const RoundKey& key, uint32_t worker, Payload payload, absl::Time now,
                           PushCallback done) {
  Group* group = nullptr;
  absl::Status valid = ValidatePush(key, worker, payload, &group);
  if (!valid.ok()) {
    done(valid);
    return;
  }
  const RoundId id{key.group, key.step, key.round};
  const uint64_t payload_bytes = payload.WireBytes();  // as received
  // What the round holds of it: a second round's values placed at their
  // candidates also hold the candidates' indices.
  uint64_t held_bytes = payload_bytes;
  absl::StatusOr<RoundResult> immediate = absl::UnknownError("unset");
  bool answer_now = false;
  bool waits = false;     // the push waits on an open round (or one it opened)
  bool complete = false;  // and that round is now complete
  std::vector<EndedRound> ended;  // superseded rounds and replaced parked pushes
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (key.round > 0) {
      if (absl::Status fits = PlaceAtCandidatesLocked(key, &payload); !fits.ok()) {
        immediate = fits;
        answer_now = true;
      } else {
        held_bytes = payload.WireBytes();
      }
    }
    if (!answer_now) {
      ++stats_.pushes;
      const RoundResult* kept = nullptr;
      const Admission admission = AdmitPush(FactsLocked(key, worker, held_bytes, &kept), Limits());
      auto open = rounds_.find(id);
      switch (admission.admit) {
        case Admit::kRefuse:
          if (admission.refusal == RefusalKind::kOutOfWindow) ++stats_.refused_out_of_window;
          if (admission.refusal == RefusalKind::kOverCapacity) ++stats_.refused_over_capacity;
          immediate = admission.status;
          answer_now = true;
          break;
        case Admit::kAnswerKept:
          immediate = *kept;
          answer_now = true;
          break;
        case Admit::kJoin:
          waits = true;
          break;
        case Admit::kSupersedeAndOpenInSlot:
          SupersedeRoundLocked(RoundId{key.group, progress_[key.group].beyond_window_rounds.at(worker), 0},
                               admission.displaced, &ended);
          [[fallthrough]];
        case Admit::kOpenInSlot:
        case Admit::kOpen:
          open = OpenRoundLocked(id, now, admission.admit == Admit::kOpen ? -1 : static_cast<int64_t>(worker));
          waits = true;
          break;
        case Admit::kSupersedeAndOpen:
          SupersedeRoundLocked(RoundId{key.group, admission.displaced_step, admission.displaced_round},
                               admission.displaced, &ended);
          open = OpenRoundLocked(id, now, -1);
          waits = true;
          break;
        case Admit::kPark:
          ParkLocked(key, worker, std::move(payload), payload_bytes, now, std::move(done), admission.displaced, &ended);
          // Every worker parked at this step (each one's slot taken): the
          // round opens outside any slot, and is complete.
          if (ParkedAtLocked(key.group, key.step) == config_.world_size) {
            open = OpenRoundLocked(id, now, -1);
            open->second.decoding = true;
            complete = true;
          }
          break;
        case Admit::kWaitWithParked:
          progress_[key.group].parked.at(worker).waiting.push_back(std::move(done));
          break;
      }
      if (waits) {
        Round& round = open->second;
        if (!round.arrived[worker]) {
          // Kept apart until the round is complete, then merged in worker
          // order (see Complete).
          round.parts[worker] = std::move(payload);
          round.arrived[worker] = true;
          ++round.count;
          round.bytes += held_bytes;
          stats_.bytes_in += payload_bytes;
          stats_.bytes_held += held_bytes;
        }
        round.waiting.push_back(std::move(done));
        ++round.waiting_by_worker[worker];
        if (round.count == config_.world_size && !round.decoding) {
          round.decoding = true;
          complete = true;
        }
      }
    }
  }
  for (EndedRound& e : ended) {
    for (PushCallback& waiting : e.waiting) waiting(e.status);
    if (e.is_round && config_.on_round_finished) config_.on_round_finished(e.report);
  }
  if (answer_now) {
    done(std::move(immediate));
    return;
  }
  if (complete) Complete(*group, id);
}

std::optional<uint64_t> AggregationCore::WindowAnchorLocked(uint32_t group) const {
  if (auto progress = progress_.find(group); progress != progress_.end() && progress->second.any_finished) {
    return progress->second.last_finished;
  }
  // Nothing finished yet (a new or restarted shard): the lowest open round
  // anchors the window; with none open, the next push does.
  for (auto it = rounds_.lower_bound(RoundId{group, 0, 0}); it != rounds_.end() && it->first.group == group; ++it) {
    if (it->first.round == 0) return it->first.step;
  }
  return std::nullopt;
}

AdmissionLimits AggregationCore::Limits() const {
  return AdmissionLimits{config_.step_window, config_.max_rounds_alone, config_.max_pushes_waiting,
                         config_.max_open_rounds, config_.max_held_bytes};
}

PushFacts AggregationCore::FactsLocked(const RoundKey& key, uint32_t worker, uint64_t held_bytes,
                                       const RoundResult** kept) const {
  PushFacts f;
  f.job = config_.job;
  f.group = key.group;
  f.step = key.step;
  f.round = key.round;
  f.worker = worker;
  f.payload_bytes = held_bytes;
  f.rounds_open = stats_.rounds_open;
  f.bytes_held = stats_.bytes_held;
  if (auto open = rounds_.find(RoundId{key.group, key.step, key.round}); open != rounds_.end()) {
    f.round_state = PushFacts::RoundState::kOpen;
    f.waiting = open->second.waiting_by_worker[worker];
    return f;
  }
  if (auto finished = finished_.find(FinishedKey{key.group, key.round}); finished != finished_.end()) {
    for (const auto& [step, result] : finished->second) {
      if (step == key.step) {
        f.round_state = PushFacts::RoundState::kKept;
        *kept = &result;
        return f;
      }
      f.oldest_kept = std::min(f.oldest_kept.value_or(UINT64_MAX), step);  // by step, not by finish order
    }
  }
  f.progress = WindowAnchorLocked(key.group);
  if (auto progress = progress_.find(key.group); progress != progress_.end()) {
    if (auto held = progress->second.beyond_window_rounds.find(worker);
        held != progress->second.beyond_window_rounds.end()) {
      f.slot_step = held->second;
      if (auto round = rounds_.find(RoundId{key.group, held->second, 0}); round != rounds_.end()) {
        f.slot_held_alone = !round->second.decoding && round->second.count == 1 && round->second.arrived[worker];
        f.slot_bytes = round->second.bytes;
      }
    }
    if (auto parked = progress->second.parked.find(worker); parked != progress->second.parked.end()) {
      f.parked_step = parked->second.step;
      f.parked_waiting = static_cast<uint32_t>(parked->second.waiting.size());
      f.parked_bytes = parked->second.bytes;
    }
  }
  // Its share: the rounds it holds alone within the window (all of them
  // before any progress), and the farthest of them.
  uint64_t farthest = 0;
  for (auto it = rounds_.lower_bound(RoundId{key.group, 0, 0}); it != rounds_.end() && it->first.group == key.group;
       ++it) {
    const Round& round = it->second;
    if (round.count != 1 || !round.arrived[worker] || round.decoding) continue;
    const uint64_t step = it->first.step;
    const uint64_t distance =
        f.progress.has_value() ? (step > *f.progress ? step - *f.progress : *f.progress - step) : 0;
    if (f.progress.has_value() && distance > config_.step_window) continue;
    if (f.held_alone.empty() || distance > farthest) {
      farthest = distance;
      f.farthest_alone_round = it->first.round;
      f.farthest_alone_bytes = round.bytes;
    }
    f.held_alone.push_back(step);
  }
  return f;
}

std::map<AggregationCore::RoundId, AggregationCore::Round>::iterator AggregationCore::OpenRoundLocked(
    const RoundId& id, absl::Time now, int64_t slot_holder) {
  Round round;
  round.opened = absl::Now();
  round.deadline = now + config_.round_deadline;
  round.arrived.assign(config_.world_size, false);
  round.parts.resize(config_.world_size);
  round.waiting_by_worker.assign(config_.world_size, 0);
  round.beyond_window_holder = slot_holder;
  if (slot_holder >= 0) progress_[id.group].beyond_window_rounds[static_cast<uint32_t>(slot_holder)] = id.step;
  auto open = rounds_.emplace(id, std::move(round)).first;
  ++stats_.rounds_open;
  if (id.round == 0) AdoptParkedLocked(id, open->second);
  return open;
}

void AggregationCore::SupersedeRoundLocked(const RoundId& id, const absl::Status& why,
                                           std::vector<EndedRound>* ended) {
  auto round = rounds_.find(id);
  ended->push_back(EndedRound{std::move(round->second.waiting), why,
                              RoundReport{id.group, id.step, id.round, false, absl::Now() - round->second.opened,
                                          absl::ZeroDuration()}});
  ++(round->second.beyond_window_holder >= 0 ? stats_.superseded_beyond_window : stats_.superseded_held_alone);
  ForgetRoundLocked(round->first, round->second);
  rounds_.erase(round);
  ++stats_.rounds_failed;
  ended->back().report.rounds_open = stats_.rounds_open;
  ended->back().report.bytes_held = stats_.bytes_held;
}

uint32_t AggregationCore::ParkedAtLocked(uint32_t group, uint64_t step) const {
  uint32_t parked = 0;
  if (auto progress = progress_.find(group); progress != progress_.end()) {
    for (const auto& [w, push] : progress->second.parked) parked += push.step == step;
  }
  return parked;
}

void AggregationCore::ParkLocked(const RoundKey& key, uint32_t worker, Payload payload, uint64_t payload_bytes,
                                 absl::Time now, PushCallback done, const absl::Status& replaced,
                                 std::vector<EndedRound>* ended) {
  Progress& progress = progress_[key.group];
  if (auto parked = progress.parked.find(worker); parked != progress.parked.end()) {
    ended->push_back(EndedRound{std::move(parked->second.waiting), replaced, RoundReport{}, /*is_round=*/false});
    stats_.bytes_held -= parked->second.bytes;
    ++stats_.parked_failed;
    --stats_.parked_now;
    progress.parked.erase(parked);
  }
  ParkedPush& push = progress.parked[worker];
  push.step = key.step;
  push.payload = std::move(payload);
  push.bytes = payload_bytes;
  push.deadline = now + config_.round_deadline;
  push.waiting.push_back(std::move(done));
  stats_.bytes_in += payload_bytes;
  stats_.bytes_held += payload_bytes;
  ++stats_.parked_beyond_window;
  ++stats_.parked_now;
}

void AggregationCore::AdoptParkedLocked(const RoundId& id, Round& round) {
  Progress& progress = progress_[id.group];
  for (auto it = progress.parked.begin(); it != progress.parked.end();) {
    if (it->second.step != id.step) {
      ++it;
      continue;
    }
    const uint32_t w = it->first;
    round.parts[w] = std::move(it->second.payload);
    round.arrived[w] = true;
    ++round.count;
    round.bytes += it->second.bytes;  // already in bytes_held
    round.waiting_by_worker[w] += static_cast<uint32_t>(it->second.waiting.size());
    for (PushCallback& waiting : it->second.waiting) round.waiting.push_back(std::move(waiting));
    ++stats_.parked_joined;
    --stats_.parked_now;
    it = progress.parked.erase(it);
  }
}

void AggregationCore::FailParkedLocked(
    const std::function<absl::Status(uint32_t group, uint32_t worker, const ParkedPush&)>& fail,
    std::vector<EndedRound>* ended) {
  for (auto& [group, progress] : progress_) {
    for (auto it = progress.parked.begin(); it != progress.parked.end();) {
      absl::Status status = fail(group, it->first, it->second);
      if (status.ok()) {
        ++it;
        continue;
      }
      ended->push_back(EndedRound{std::move(it->second.waiting), std::move(status), RoundReport{}, false});
      stats_.bytes_held -= it->second.bytes;
      ++stats_.parked_failed;
      --stats_.parked_now;
      it = progress.parked.erase(it);
    }
  }
}

void AggregationCore::ForgetRoundLocked(const RoundId& id, const Round& round) {
  stats_.bytes_held -= round.bytes;
  --stats_.rounds_open;
  if (round.beyond_window_holder >= 0) {
    progress_[id.group].beyond_window_rounds.erase(static_cast<uint32_t>(round.beyond_window_holder));
  }
}

void AggregationCore::Complete(Group& group, const RoundId& id) {
  std::vector<Payload> parts;
  absl::Time opened;
  {
    std::lock_guard<std::mutex> lock(mu_);
    Round& round = rounds_.at(id);
    parts = std::move(round.parts);
    opened = round.opened;
  }
  const absl::Time decode_start = absl::Now();
  // Summing in worker order, whatever the order of arrival, makes the
  // aggregate (float addition is not associative) and so a whole training run
  // reproducible bit for bit.
  absl::StatusOr<Update> update;
  // The method's state where the sum is (AggregationState), after and before.
  std::shared_ptr<const std::vector<float>> group_state, state_before;
  Payload aggregate = std::move(parts[0]);
  absl::Status merged = absl::OkStatus();
  for (size_t w = 1; w < parts.size() && merged.ok(); ++w) merged = MergeInto(parts[w], &aggregate);
  parts.clear();
  if (!merged.ok()) {
    update = absl::InvalidArgumentError(absl::StrCat("payloads of the round do not merge: ", merged.message()));
  } else {
    // The round ends as it would on the workers' collective
    // (common/round_finish.h); round 0's sum goes to the group's decoder.
    const RoundDecoder decode = [&group, &group_state, &state_before](Payload sum) -> absl::StatusOr<Update> {
      std::lock_guard<std::mutex> lock(group.decode_mu);
      if (group.method_state == nullptr) return group.decoder->DecodeOwned(std::move(sum));
      // The state steps only if the answer is recorded (or none is kept):
      // a round that fails here is pushed again and must find the state as
      // it was.
      const std::vector<float> before = group.method_state->Save();
      absl::StatusOr<Update> stepped = group.method_state->Step(sum);
      if (stepped.ok()) {
        group_state = std::make_shared<const std::vector<float>>(group.method_state->Save());
        state_before = std::make_shared<const std::vector<float>>(before);
      }
      return stepped;
    };
    update = FinishRound(RoundRule{group.spec.rounds, group.spec.reselect_top_k}, id.round, std::move(aggregate),
                         decode);
    // Finite payloads can still sum past float's range (workers sending
    // values near FLT_MAX): such an answer would poison every worker's
    // model, so the round fails instead, the method's state as it was.
    if (update.ok()) {
      if (const std::optional<size_t> bad = FirstNonFinite(update->values); bad.has_value()) {
        update = absl::InvalidArgumentError(absl::StrCat(
            RoundName(config_.job, id.group, id.step, id.round), ": the workers' payloads sum past float's range (",
            update->indices.empty() ? absl::StrCat("element ", *bad) : absl::StrCat("coordinate ", update->indices[*bad]),
            " = ", update->values[*bad], "); the round is refused"));
        if (state_before != nullptr) {
          std::lock_guard<std::mutex> lock(group.decode_mu);
          group.method_state->Restore(*state_before).IgnoreError();  // same size: cannot fail
          group_state = nullptr;
        }
      }
    }
  }
  const absl::Time decoded = absl::Now();

  absl::StatusOr<RoundResult> result =
      update.ok() ? absl::StatusOr<RoundResult>(RoundResult{
                        std::make_shared<const Update>(*std::move(update)), config_.world_size})
                  : absl::StatusOr<RoundResult>(update.status());
  if (result.ok() && config_.record_answer) {
    // Recorded before anyone sees it: a successor of this shard can then give
    // every worker the answer some worker may already have.
    absl::Status recorded =
        config_.record_answer(KeptAnswer{id.group, id.step, id.round, *result, group_state});
    if (!recorded.ok()) {
      result = absl::UnavailableError(absl::StrCat(RoundName(config_.job, id.group, id.step, id.round),
                                                   ": its answer could not be recorded (push again): ",
                                                   recorded.message()));
      if (state_before != nullptr) {
        std::lock_guard<std::mutex> lock(group.decode_mu);
        group.method_state->Restore(*state_before).IgnoreError();  // same size: cannot fail
      }
    }
  }
  std::vector<PushCallback> waiting;
  uint64_t rounds_open = 0, bytes_held = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto node = rounds_.extract(id);
    waiting = std::move(node.mapped().waiting);
    ForgetRoundLocked(id, node.mapped());
    rounds_open = stats_.rounds_open;
    bytes_held = stats_.bytes_held;
    if (result.ok()) {
      if (id.round == 0) {
        Progress& progress = progress_[id.group];
        progress.any_finished = true;
        progress.last_finished = id.step;
      }
      ++stats_.rounds_completed;
      stats_.decode_seconds += absl::ToDoubleSeconds(decoded - decode_start);
      auto& finished = finished_[FinishedKey{id.group, id.round}];
      finished.emplace_back(id.step, *result);
      while (finished.size() > std::max<size_t>(1, config_.finished_rounds_kept)) {
        finished.pop_front();
      }
    } else {
      ++stats_.rounds_failed;
    }
  }
  for (PushCallback& done : waiting) done(result);
  if (config_.on_round_finished) {
    config_.on_round_finished(RoundReport{id.group, id.step, id.round, result.ok(), decoded - opened,
                                          decoded - decode_start, rounds_open, bytes_held});
  }
}

absl::Status AggregationCore::Restore(std::vector<KeptAnswer> answers) {
  std::sort(answers.begin(), answers.end(), [](const KeptAnswer& a, const KeptAnswer& b) {
    return std::tie(a.group, a.round, a.step) < std::tie(b.group, b.round, b.step);
  });
  for (size_t i = 0; i < answers.size(); ++i) {
    const KeptAnswer& a = answers[i];
    const std::string name = RoundName(config_.job, a.group, a.step, a.round);
    auto group = groups_.find(a.group);
    if (group == groups_.end()) {
      return absl::InvalidArgumentError(absl::StrCat("kept answer of ", name, ": this shard does not own group ",
                                                     a.group));
    }
    if (a.result.update == nullptr) return absl::InvalidArgumentError(absl::StrCat("kept answer of ", name, " is empty"));
    if (a.result.update->dim != group->second->spec.dim) {
      return absl::InvalidArgumentError(absl::StrCat("kept answer of ", name, " has ", a.result.update->dim,
                                                     " elements; the group has ", group->second->spec.dim));
    }
    if (absl::Status valid = ValidateAnswer(*a.result.update, group->second->spec.dim); !valid.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("kept answer of ", name, ": ", valid.message()));
    }
    if (a.round >= group->second->spec.rounds) {
      return absl::InvalidArgumentError(
          absl::StrCat("kept answer of ", name, ": the group ", TakesRounds(group->second->spec.rounds)));
    }
    if (IsCandidateList(*a.result.update) && a.round + 1 == group->second->spec.rounds) {
      return absl::InvalidArgumentError(absl::StrCat("kept answer of ", name,
                                                     " lists candidates without values, but is a final answer"));
    }
    if (i > 0 && answers[i - 1].group == a.group && answers[i - 1].round == a.round &&
        answers[i - 1].step == a.step) {
      return absl::InvalidArgumentError(absl::StrCat("two kept answers of ", name));
    }
  }
  // Groups whose method keeps state where the sum is resume it from their
  // newest answer (answers are sorted by step within a group).
  std::map<uint32_t, const KeptAnswer*> newest;
  for (const KeptAnswer& a : answers) {
    if (a.round == 0) newest[a.group] = &a;
  }
  std::vector<std::pair<Group*, std::unique_ptr<AggregationState>>> resumed;  // applied once all are valid
  for (const auto& [id, group] : groups_) {
    if (group->method_state == nullptr) continue;
    auto it = newest.find(id);
    if (it == newest.end()) continue;
    const KeptAnswer& a = *it->second;
    if (a.group_state == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("kept answer of ", RoundName(config_.job, a.group, a.step),
                                                     " carries no method state, which group ", id, " keeps"));
    }
    std::lock_guard<std::mutex> lock(group->decode_mu);
    std::unique_ptr<AggregationState> state = group->method_state->Clone();
    if (absl::Status s = state->Restore(*a.group_state); !s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("kept answer of ", RoundName(config_.job, a.group, a.step), ": ", s.message()));
    }
    resumed.emplace_back(group.get(), std::move(state));
  }
  for (auto& [group, state] : resumed) {
    std::lock_guard<std::mutex> lock(group->decode_mu);
    group->method_state = std::move(state);
  }
  std::lock_guard<std::mutex> lock(mu_);
  for (KeptAnswer& a : answers) {
    if (a.round == 0) {  // sorted by step: the newest answer is the progress
      progress_[a.group].any_finished = true;
      progress_[a.group].last_finished = a.step;
    }
    auto& finished = finished_[FinishedKey{a.group, a.round}];
    finished.emplace_back(a.step, std::move(a.result));
    while (finished.size() > std::max<size_t>(1, config_.finished_rounds_kept)) finished.pop_front();
  }
  return absl::OkStatus();
}

int AggregationCore::FailRounds(
    const std::function<absl::Status(const RoundId&, const Round&)>& why,
    const std::function<absl::Status(uint32_t group, uint32_t worker, const ParkedPush&)>& why_parked) {
  std::vector<std::pair<std::vector<PushCallback>, absl::Status>> failed;
  std::vector<RoundReport> reports;
  std::vector<EndedRound> parked;
  const absl::Time now = absl::Now();
  {
    std::lock_guard<std::mutex> lock(mu_);
    FailParkedLocked(why_parked, &parked);
    for (auto it = rounds_.begin(); it != rounds_.end();) {
      absl::Status status = it->second.decoding ? absl::OkStatus() : why(it->first, it->second);
      if (status.ok()) {
        ++it;
        continue;
      }
      failed.emplace_back(std::move(it->second.waiting), std::move(status));
      reports.push_back(RoundReport{it->first.group, it->first.step, it->first.round, false,
                                    now - it->second.opened, absl::ZeroDuration()});
      ForgetRoundLocked(it->first, it->second);
      it = rounds_.erase(it);
      ++stats_.rounds_failed;
    }
    for (RoundReport& report : reports) {
      report.rounds_open = stats_.rounds_open;
      report.bytes_held = stats_.bytes_held;
    }
  }
  for (auto& [waiting, status] : failed) {
    for (PushCallback& done : waiting) done(status);
  }
  for (EndedRound& push : parked) {
    for (PushCallback& done : push.waiting) done(push.status);
  }
  if (config_.on_round_finished) {
    for (const RoundReport& report : reports) config_.on_round_finished(report);
  }
  return static_cast<int>(failed.size());
}

int AggregationCore::ExpireRounds(absl::Time now) {
  return FailRounds([&](const RoundId& id, const Round& round) {
    if (now < round.deadline) return absl::OkStatus();
    std::vector<uint32_t> missing;
    for (uint32_t w = 0; w < round.arrived.size(); ++w) {
      if (!round.arrived[w]) missing.push_back(w);
    }
    return absl::DeadlineExceededError(absl::StrCat(
        RoundName(config_.job, id.group, id.step, id.round), " did not complete within ",
        absl::FormatDuration(config_.round_deadline), ": missing workers ",
        absl::StrJoin(missing, ", "), " of ", config_.world_size));
  }, [&](uint32_t group, uint32_t worker, const ParkedPush& push) {
    if (now < push.deadline) return absl::OkStatus();
    return absl::DeadlineExceededError(absl::StrCat(
        "worker ", worker, "'s push of step ", push.step, " of group ", group, " (job '", config_.job,
        "'), outside the step window, waited ", absl::FormatDuration(config_.round_deadline),
        " for another worker to open its round (its own slot outside the window was taken)"));
  });
}

int AggregationCore::FailAllRounds(const absl::Status& status) {
  return FailRounds([&](const RoundId&, const Round&) { return status; },
                    [&](uint32_t, uint32_t, const ParkedPush&) { return status; });
}

AggregationCore::Stats AggregationCore::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace sketchfuse
