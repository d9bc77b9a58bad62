#include "worker/hook/callback_collective.h"

#include <cstring>

#include "absl/strings/str_cat.h"

namespace sketchfuse {
namespace {

absl::Status Failed(int rc, absl::string_view operation) {
  if (rc == 0) return absl::OkStatus();
  return absl::UnavailableError(absl::StrCat("the process group's ", operation, " failed (callback returned ", rc, ")"));
}

}  // namespace

absl::StatusOr<std::unique_ptr<CallbackCollective>> CallbackCollective::Create(const sf_collective_ops& ops, int rank,
                                                                               int size, std::string backend) {
  if (ops.all_reduce_sum_f32 == nullptr || ops.all_gather_bytes == nullptr || ops.broadcast_bytes == nullptr ||
      ops.barrier == nullptr || ops.send_bytes == nullptr || ops.recv_bytes == nullptr ||
      ops.send_recv_bytes == nullptr) {
    return absl::InvalidArgumentError("every collective callback must be set");
  }
  if (size < 1 || rank < 0 || rank >= size) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", rank, " is not in a group of ", size));
  }
  return std::unique_ptr<CallbackCollective>(new CallbackCollective(ops, rank, size, std::move(backend)));
}

absl::Status CallbackCollective::AllReduceSum(absl::Span<float> data) {
  if (absl::Status s = Failed(ops_.all_reduce_sum_f32(ops_.user, data.data(), data.size()), "allreduce"); !s.ok()) {
    return s;
  }
  bytes_sent_ += RingAllReduceBytes(data.size(), size_);
  bytes_received_ += RingAllReduceBytes(data.size(), size_);
  return absl::OkStatus();
}

absl::Status CallbackCollective::AllGatherWords(const void* mine, size_t count, std::string* all,
                                                std::vector<size_t>* counts) {
  sf_bytes gathered;
  std::vector<uint64_t> sizes(size_, 0);
  if (absl::Status s = Failed(ops_.all_gather_bytes(ops_.user, mine, 4 * count, &gathered, sizes.data()), "allgather");
      !s.ok()) {
    return s;
  }
  uint64_t total = 0;
  counts->assign(size_, 0);
  for (int r = 0; r < size_; ++r) {
    if (sizes[r] % 4 != 0) {
      return absl::InternalError(absl::StrCat("the allgather returned ", sizes[r], " bytes for rank ", r,
                                              ", not whole 4-byte elements"));
    }
    (*counts)[r] = sizes[r] / 4;
    total += sizes[r];
  }
  if (total != gathered.data.size() || (*counts)[rank_] != count) {
    return absl::InternalError(absl::StrCat("the allgather returned ", gathered.data.size(), " bytes for sizes adding to ",
                                            total, " (this rank's: ", (*counts)[rank_], " elements of ", count, ")"));
  }
  *all = std::move(gathered.data);
  bytes_sent_ += RingAllGatherBytes(*counts, rank_);
  bytes_received_ += RingAllGatherReceivedBytes(*counts, rank_);
  return absl::OkStatus();
}

namespace {

template <typename T>
absl::Status Unpack(const std::string& bytes, std::vector<T>* all) {
  all->resize(bytes.size() / sizeof(T));
  if (!bytes.empty()) std::memcpy(all->data(), bytes.data(), bytes.size());
  return absl::OkStatus();
}

}  // namespace

absl::Status CallbackCollective::AllGatherV(absl::Span<const uint32_t> mine, std::vector<uint32_t>* all,
                                            std::vector<size_t>* counts) {
  std::string bytes;
  if (absl::Status s = AllGatherWords(mine.data(), mine.size(), &bytes, counts); !s.ok()) return s;
  return Unpack(bytes, all);
}

absl::Status CallbackCollective::AllGatherV(absl::Span<const float> mine, std::vector<float>* all,
                                            std::vector<size_t>* counts) {
  std::string bytes;
  if (absl::Status s = AllGatherWords(mine.data(), mine.size(), &bytes, counts); !s.ok()) return s;
  return Unpack(bytes, all);
}

absl::Status CallbackCollective::BroadcastWords(void* data, size_t count, int root) {
  if (root < 0 || root >= size_) {
    return absl::InvalidArgumentError(absl::StrCat("broadcast root ", root, " is not in a group of ", size_));
  }
  if (absl::Status s = Failed(ops_.broadcast_bytes(ops_.user, data, 4 * count, root), "broadcast"); !s.ok()) return s;
  bytes_sent_ += TreeBroadcastBytes(count, rank_, root, size_);
  bytes_received_ += BroadcastReceivedBytes(count, rank_, root, size_);
  return absl::OkStatus();
}

absl::Status CallbackCollective::Broadcast(absl::Span<uint32_t> data, int root) {
  return BroadcastWords(data.data(), data.size(), root);
}

absl::Status CallbackCollective::Broadcast(absl::Span<float> data, int root) {
  return BroadcastWords(data.data(), data.size(), root);
}

absl::Status CallbackCollective::Barrier() { return Failed(ops_.barrier(ops_.user), "barrier"); }

absl::Status CallbackCollective::CheckPeer(int peer) const {
  if (peer < 0 || peer >= size_ || peer == rank_) {
    return absl::InvalidArgumentError(absl::StrCat("peer ", peer, " is not another rank of a group of ", size_));
  }
  return absl::OkStatus();
}

absl::Status CallbackCollective::Send(absl::string_view message, int peer, uint32_t tag) {
  if (absl::Status s = CheckPeer(peer); !s.ok()) return s;
  if (absl::Status s = Failed(ops_.send_bytes(ops_.user, message.data(), message.size(), peer, tag), "send");
      !s.ok()) {
    return s;
  }
  bytes_sent_ += message.size();
  return absl::OkStatus();
}

absl::StatusOr<std::string> CallbackCollective::Recv(int peer, uint32_t tag) {
  if (absl::Status s = CheckPeer(peer); !s.ok()) return s;
  sf_bytes received;
  if (absl::Status s = Failed(ops_.recv_bytes(ops_.user, &received, peer, tag), "recv"); !s.ok()) return s;
  bytes_received_ += received.data.size();
  return std::move(received.data);
}

absl::StatusOr<std::string> CallbackCollective::SendRecv(absl::string_view message, int send_to, int recv_from,
                                                         uint32_t tag) {
  if (absl::Status s = CheckPeer(send_to); !s.ok()) return s;
  if (absl::Status s = CheckPeer(recv_from); !s.ok()) return s;
  sf_bytes received;
  if (absl::Status s = Failed(ops_.send_recv_bytes(ops_.user, message.data(), message.size(), send_to, recv_from, tag,
                                                   &received),
                              "send/recv");
      !s.ok()) {
    return s;
  }
  bytes_sent_ += message.size();
  bytes_received_ += received.data.size();
  return std::move(received.data);
}

}  // namespace sketchfuse
