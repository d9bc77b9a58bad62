#include "worker/compression/settlement.h"

#include <algorithm>
#include <iterator>

namespace sketchfuse {

Settlement SettleAt(const Update& update) {
  Settlement settlement;
  settlement.release = Coordinates::Of(update);
  settlement.velocity_mask = settlement.release;
  settlement.give_back.dim = update.dim;
  return settlement;
}

Settlement SettleExchange(const Payload& sent, const Update& update, uint32_t rounds) {
  return rounds > 1 ? SettleAt(update) : SettleSent(sent, update);
}

Settlement SettleSent(const Payload& sent, const Update& update) {
  const std::vector<uint32_t>* carried = nullptr;
  if (sent.kind == PayloadKind::kSparse) carried = &sent.indices;
  if (sent.kind == PayloadKind::kSketch && sent.inserted.has_value()) carried = &*sent.inserted;
  if (carried == nullptr) return SettleAt(update);
  Settlement settlement;
  settlement.release.dim = update.dim;
  settlement.give_back.dim = update.dim;
  if (update.dense) {
    settlement.release.indices = *carried;  // every coordinate was applied
  } else {
    std::set_intersection(update.indices.begin(), update.indices.end(), carried->begin(), carried->end(),
                          std::back_inserter(settlement.release.indices));
  }
  settlement.velocity_mask = settlement.release;
  return settlement;
}

Settlement SettleLowRank(std::vector<float> kept) {
  Settlement s;
  s.release = Coordinates::All(kept.size());
  s.velocity_mask = Coordinates::All(kept.size());
  s.give_back.dense = true;
  s.give_back.dim = kept.size();
  s.give_back.values = std::move(kept);
  return s;
}

}  // namespace sketchfuse
