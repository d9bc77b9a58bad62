#include "worker/rounds/shard_reducer.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace sketchfuse {

ShardReducer::ShardReducer(PsTransport* transport, std::string job, uint32_t worker, std::vector<uint32_t> group_ids,
                           std::vector<int> shard_of_group)
    : transport_(transport),
      job_(std::move(job)),
      worker_(worker),
      group_ids_(std::move(group_ids)),
      shard_of_group_(std::move(shard_of_group)) {}

void ShardReducer::Reduce(const GroupRound& round, std::shared_ptr<const Payload> payload, RoundDone done) {
  if (round.group < 0 || static_cast<size_t>(round.group) >= group_ids_.size() ||
      static_cast<size_t>(round.group) >= shard_of_group_.size()) {
    done(absl::InvalidArgumentError(absl::StrCat("group ", round.group, " is not one of the job's ",
                                                 group_ids_.size())));
    return;
  }
  const absl::Time pushed = absl::Now();
  // The timeline's names: round 0 is the push the shard sums and decodes.
  std::string phase = round.round == 0 ? "push, server sum and decode"
                                       : absl::StrCat("round ", round.round, ": exact values");
  transport_->Push(PushTarget{shard_of_group_[round.group], job_, round.step, group_ids_[round.group], round.round,
                              worker_},
                   std::move(payload),
                   [done = std::move(done), phase = std::move(phase), pushed](absl::StatusOr<PushOutcome> outcome) {
                     if (!outcome.ok()) {
                       done(outcome.status());
                       return;
                     }
                     RoundAnswer answer;
                     answer.update = std::move(outcome->update);
                     answer.bytes_sent = outcome->bytes_sent;
                     answer.bytes_received = outcome->bytes_received;
                     answer.spans.push_back({phase, pushed, absl::Now()});
                     done(std::move(answer));
                   });
}

}  // namespace sketchfuse
