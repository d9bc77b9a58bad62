#include "worker/decentralized/bf16_ring.h"

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace sketchfuse {
namespace {

// Chunk `chunk` of P over n elements: [chunk * n / P, (chunk + 1) * n / P).
uint64_t ChunkBegin(int chunk, uint64_t n, int size) {
  return static_cast<uint64_t>(chunk) * n / static_cast<uint64_t>(size);
}

}  // namespace

absl::Status RingAllReduceSumBf16(Collective& collective, absl::Span<float> data,
                                  const std::function<uint32_t(int round)>& tag_of_round) {
  const int size = collective.size(), rank = collective.rank();
  if (size == 1) return absl::OkStatus();
  const uint64_t n = data.size();
  const int next = (rank + 1) % size, prev = (rank + size - 1) % size;
  auto chunk = [&](int c) {
    const uint64_t begin = ChunkBegin(c, n, size);
    return data.subspan(begin, ChunkBegin(c + 1, n, size) - begin);
  };
  auto exchange = [&](const std::string& message, int round, absl::Span<float> into) -> absl::StatusOr<std::string> {
    absl::StatusOr<std::string> received = collective.SendRecv(message, next, prev, tag_of_round(round));
    if (!received.ok()) return received.status();
    if (received->size() != 2 * into.size()) {
      return absl::DataLossError(absl::StrCat("bf16 ring round ", round, ": rank ", prev, " sent ", received->size(),
                                              " bytes for a chunk of ", into.size(), " values"));
    }
    return received;
  };

  // Reduce-scatter: in round s, send chunk rank - s (this rank's partial sum
  // of it), receive chunk rank - s - 1 and add this rank's values into it.
  for (int s = 0; s < size - 1; ++s) {
    const absl::Span<float> in = chunk((rank - s - 1 + 2 * size) % size);
    absl::StatusOr<std::string> received = exchange(Bf16Bytes(chunk((rank - s + size) % size)), s, in);
    if (!received.ok()) return received.status();
    for (size_t i = 0; i < in.size(); ++i) in[i] += Bf16ValueAt(*received, i);
  }
  // This rank completed chunk rank + 1: round it once; the owner takes the
  // rounded values too, so every rank ends with the same bits.
  const absl::Span<float> owned = chunk((rank + 1) % size);
  std::string message = Bf16Bytes(owned);
  for (size_t i = 0; i < owned.size(); ++i) owned[i] = Bf16ValueAt(message, i);
  // Allgather: forward each completed chunk as received, without rounding again.
  for (int s = 0; s < size - 1; ++s) {
    const absl::Span<float> in = chunk((rank - s + size) % size);
    absl::StatusOr<std::string> received = exchange(message, size - 1 + s, in);
    if (!received.ok()) return received.status();
    for (size_t i = 0; i < in.size(); ++i) in[i] = Bf16ValueAt(*received, i);
    message = *std::move(received);
  }
  return absl::OkStatus();
}

}  // namespace sketchfuse
