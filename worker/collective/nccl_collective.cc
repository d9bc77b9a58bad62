#include "worker/collective/nccl_collective.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/rank_keys.h"
#include "cuda/cuda_check.h"

namespace sketchfuse {
namespace {

struct MessageHeader {
  uint64_t length;
  uint32_t tag;
  uint32_t reserved;
};
static_assert(sizeof(MessageHeader) == 16, "header layout");

constexpr uint64_t kMaxMessageBytes = uint64_t{1} << 30;

}  // namespace

absl::StatusOr<std::unique_ptr<NcclCollective>> NcclCollective::Create(KeyValueStore& store, int rank, int size,
                                                                       NcclOptions options) {
  if (size < 1 || rank < 0 || rank >= size) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", rank, " of ", size, " is not a rank of the group"));
  }
  // Rank 0's key: "<...>/rank/0", which only rank 0 may write.
  const std::string key = RankKey(options.prefix + "/unique_id", 0);
  std::string id;
  if (rank == 0) {
    absl::StatusOr<std::string> fresh = NewNcclUniqueId();
    if (!fresh.ok()) return fresh.status();
    id = *fresh;
    if (absl::Status s = store.Set(key, id); !s.ok()) {
      return absl::UnavailableError(absl::StrCat("publishing the NCCL unique id: ", s.message()));
    }
  } else {
    absl::StatusOr<std::string> published = store.Get(key, options.timeout);
    if (!published.ok()) {
      return absl::UnavailableError(absl::StrCat("waiting for rank 0's NCCL unique id: ", published.status().message()));
    }
    id = *published;
  }
  absl::StatusOr<std::unique_ptr<NcclCommunicator>> communicator =
      NcclCommunicator::Create(id, rank, size, options.device);
  if (!communicator.ok()) return communicator.status();
  cudaStream_t stream = nullptr;
  GPU_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "creating the NCCL stream");
  return std::unique_ptr<NcclCollective>(new NcclCollective(*std::move(communicator), stream, options.timeout));
}

NcclCollective::NcclCollective(std::unique_ptr<NcclCommunicator> communicator, cudaStream_t stream,
                               absl::Duration timeout)
    : communicator_(std::move(communicator)), stream_(stream), timeout_(timeout) {}

NcclCollective::~NcclCollective() {
  communicator_.reset();
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

absl::StatusOr<char*> NcclCollective::Staging(size_t bytes, int which) {
  DeviceBuffer<char>& buffer = staging_[which];
  if (buffer.size() < bytes) {
    absl::StatusOr<DeviceBuffer<char>> grown = DeviceBuffer<char>::Allocate(std::max(bytes, 2 * buffer.size()));
    if (!grown.ok()) return grown.status();
    buffer = *std::move(grown);
  }
  return buffer.data();
}

absl::Status NcclCollective::Wait() { return communicator_->Synchronize(stream_, timeout_); }

absl::Status NcclCollective::AllReduceSum(absl::Span<float> data) {
  if (data.empty()) return absl::OkStatus();
  const size_t bytes = data.size() * sizeof(float);
  absl::StatusOr<char*> device = Staging(bytes, 0);
  if (!device.ok()) return device.status();
  float* d = reinterpret_cast<float*>(*device);
  GPU_RETURN_IF_ERROR(cudaMemcpyAsync(d, data.data(), bytes, cudaMemcpyHostToDevice, stream_), "staging the input");
  if (absl::Status s = communicator_->AllReduceSum(d, d, data.size(), stream_); !s.ok()) return s;
  GPU_RETURN_IF_ERROR(cudaMemcpyAsync(data.data(), d, bytes, cudaMemcpyDeviceToHost, stream_), "copying the sum back");
  if (absl::Status s = Wait(); !s.ok()) return s;
  bytes_sent_ += RingAllReduceBytes(data.size(), size());
  bytes_received_ += RingAllReduceBytes(data.size(), size());
  return absl::OkStatus();
}

template <typename T>
absl::Status NcclCollective::AllGatherVImpl(absl::Span<const T> mine, std::vector<T>* all,
                                            std::vector<size_t>* counts) {
  static_assert(sizeof(T) == 4, "4-byte elements");
  const int size = this->size();
  // The counts, as one uint32 per rank.
  std::vector<uint32_t> host_counts(size);
  {
    if (mine.size() > UINT32_MAX) return absl::InvalidArgumentError("allgatherv block above 2^32 elements");
    absl::StatusOr<char*> d = Staging(sizeof(uint32_t) * (size + 1), 0);
    if (!d.ok()) return d.status();
    uint32_t* d_counts = reinterpret_cast<uint32_t*>(*d);
    const uint32_t own = static_cast<uint32_t>(mine.size());
    GPU_RETURN_IF_ERROR(cudaMemcpyAsync(d_counts + size, &own, sizeof(own), cudaMemcpyHostToDevice, stream_),
                        "staging the count");
    if (absl::Status s = communicator_->AllGather(d_counts + size, d_counts, 1, stream_); !s.ok()) return s;
    GPU_RETURN_IF_ERROR(cudaMemcpyAsync(host_counts.data(), d_counts, sizeof(uint32_t) * size,
                                        cudaMemcpyDeviceToHost, stream_),
                        "copying the counts back");
    if (absl::Status s = Wait(); !s.ok()) return s;
  }
  counts->assign(host_counts.begin(), host_counts.end());
  const size_t block = *std::max_element(counts->begin(), counts->end());
  size_t total = 0;
  for (size_t c : *counts) total += c;
  all->resize(total);
  bytes_sent_ += 4 * (size - 1);
  bytes_received_ += 4 * (size - 1);
  if (block == 0) return absl::OkStatus();
  absl::StatusOr<char*> d_in = Staging(block * sizeof(T), 1);
  if (!d_in.ok()) return d_in.status();
  absl::StatusOr<char*> d_out = Staging(block * size * sizeof(T), 0);
  if (!d_out.ok()) return d_out.status();
  if (!mine.empty()) {
    GPU_RETURN_IF_ERROR(cudaMemcpyAsync(*d_in, mine.data(), mine.size() * sizeof(T), cudaMemcpyHostToDevice, stream_),
                        "staging the block");
  }
  // Same-size blocks: the bits move unchanged, so floats travel as uint32.
  if (absl::Status s = communicator_->AllGather(reinterpret_cast<const uint32_t*>(*d_in),
                                                reinterpret_cast<uint32_t*>(*d_out), block, stream_);
      !s.ok()) {
    return s;
  }
  size_t offset = 0;
  for (int r = 0; r < size; ++r) {
    if ((*counts)[r] > 0) {
      GPU_RETURN_IF_ERROR(cudaMemcpyAsync(all->data() + offset, *d_out + r * block * sizeof(T),
                                          (*counts)[r] * sizeof(T), cudaMemcpyDeviceToHost, stream_),
                          "copying the blocks back");
    }
    offset += (*counts)[r];
  }
  if (absl::Status s = Wait(); !s.ok()) return s;
  bytes_sent_ += 4 * block * (size - 1);
  bytes_received_ += 4 * block * (size - 1);
  return absl::OkStatus();
}

absl::Status NcclCollective::AllGatherV(absl::Span<const uint32_t> mine, std::vector<uint32_t>* all,
                                        std::vector<size_t>* counts) {
  return AllGatherVImpl(mine, all, counts);
}

absl::Status NcclCollective::AllGatherV(absl::Span<const float> mine, std::vector<float>* all,
                                        std::vector<size_t>* counts) {
  return AllGatherVImpl(mine, all, counts);
}

absl::Status NcclCollective::Broadcast(absl::Span<uint32_t> data, int root) {
  if (root < 0 || root >= size()) {
    return absl::InvalidArgumentError(absl::StrCat("broadcast root ", root, " is not a rank of ", size()));
  }
  if (data.empty()) return absl::OkStatus();
  const size_t bytes = data.size() * sizeof(uint32_t);
  absl::StatusOr<char*> device = Staging(bytes, 0);
  if (!device.ok()) return device.status();
  uint32_t* d = reinterpret_cast<uint32_t*>(*device);
  GPU_RETURN_IF_ERROR(cudaMemcpyAsync(d, data.data(), bytes, cudaMemcpyHostToDevice, stream_), "staging the data");
  if (absl::Status s = communicator_->Broadcast(d, data.size(), root, stream_); !s.ok()) return s;
  GPU_RETURN_IF_ERROR(cudaMemcpyAsync(data.data(), d, bytes, cudaMemcpyDeviceToHost, stream_), "copying it back");
  if (absl::Status s = Wait(); !s.ok()) return s;
  // A ring broadcast: every rank forwards once, but the one before the root.
  if (size() > 1 && rank() != (root + size() - 1) % size()) bytes_sent_ += bytes;
  if (size() > 1 && rank() != root) bytes_received_ += bytes;
  return absl::OkStatus();
}

absl::Status NcclCollective::Broadcast(absl::Span<float> data, int root) {
  // A copy of bits: floats travel as uint32.
  return Broadcast(absl::MakeSpan(reinterpret_cast<uint32_t*>(data.data()), data.size()), root);
}

absl::Status NcclCollective::Barrier() {
  float token = 0;
  return AllReduceSum(absl::MakeSpan(&token, 1));
}

absl::Status NcclCollective::Send(absl::string_view message, int peer, uint32_t tag) {
  MessageHeader header{message.size(), tag, 0};
  absl::StatusOr<char*> device = Staging(sizeof(header) + message.size(), 1);
  if (!device.ok()) return device.status();
  GPU_RETURN_IF_ERROR(cudaMemcpyAsync(*device, &header, sizeof(header), cudaMemcpyHostToDevice, stream_),
                      "staging the header");
  if (!message.empty()) {
    GPU_RETURN_IF_ERROR(cudaMemcpyAsync(*device + sizeof(header), message.data(), message.size(),
                                        cudaMemcpyHostToDevice, stream_),
                        "staging the message");
  }
  if (absl::Status s = communicator_->Send(*device, sizeof(header), peer, stream_); !s.ok()) return s;
  if (!message.empty()) {
    if (absl::Status s = communicator_->Send(*device + sizeof(header), message.size(), peer, stream_); !s.ok()) {
      return s;
    }
  }
  if (absl::Status s = Wait(); !s.ok()) return s;
  bytes_sent_ += sizeof(header) + message.size();
  return absl::OkStatus();
}

absl::StatusOr<std::string> NcclCollective::Recv(int peer, uint32_t tag) {
  MessageHeader header{};
  absl::StatusOr<char*> device = Staging(sizeof(header), 1);
  if (!device.ok()) return device.status();
  if (absl::Status s = communicator_->Recv(*device, sizeof(header), peer, stream_); !s.ok()) return s;
  GPU_RETURN_IF_ERROR(cudaMemcpyAsync(&header, *device, sizeof(header), cudaMemcpyDeviceToHost, stream_),
                      "copying the header back");
  if (absl::Status s = Wait(); !s.ok()) return s;
  if (header.tag != tag) {
    return absl::FailedPreconditionError(absl::StrCat("rank ", peer, "'s next message has tag ", header.tag,
                                                      ", not ", tag, " (messages out of order)"));
  }
  if (header.length > kMaxMessageBytes) {
    return absl::DataLossError(absl::StrCat("rank ", peer, " announced a message of ", header.length, " bytes"));
  }
  std::string message(header.length, '\0');
  if (header.length > 0) {
    absl::StatusOr<char*> body = Staging(header.length, 1);
    if (!body.ok()) return body.status();
    if (absl::Status s = communicator_->Recv(*body, header.length, peer, stream_); !s.ok()) return s;
    GPU_RETURN_IF_ERROR(cudaMemcpyAsync(message.data(), *body, header.length, cudaMemcpyDeviceToHost, stream_),
                        "copying the message back");
    if (absl::Status s = Wait(); !s.ok()) return s;
  }
  bytes_received_ += sizeof(header) + message.size();
  return message;
}

absl::StatusOr<std::string> NcclCollective::SendRecv(absl::string_view message, int send_to, int recv_from,
                                                     uint32_t tag) {
  MessageHeader out{message.size(), tag, 0}, in{};
  const size_t out_bytes = sizeof(out) + message.size();
  absl::StatusOr<char*> out_device = Staging(out_bytes, 1);
  if (!out_device.ok()) return out_device.status();
  absl::StatusOr<char*> in_device = Staging(sizeof(in), 0);
  if (!in_device.ok()) return in_device.status();
  GPU_RETURN_IF_ERROR(cudaMemcpyAsync(*out_device, &out, sizeof(out), cudaMemcpyHostToDevice, stream_),
                      "staging the header");
  if (!message.empty()) {
    GPU_RETURN_IF_ERROR(cudaMemcpyAsync(*out_device + sizeof(out), message.data(), message.size(),
                                        cudaMemcpyHostToDevice, stream_),
                        "staging the message");
  }
  if (absl::Status s = communicator_->SendRecv(*out_device, sizeof(out), send_to, *in_device, sizeof(in), recv_from,
                                               stream_);
      !s.ok()) {
    return s;
  }
  GPU_RETURN_IF_ERROR(cudaMemcpyAsync(&in, *in_device, sizeof(in), cudaMemcpyDeviceToHost, stream_),
                      "copying the header back");
  if (absl::Status s = Wait(); !s.ok()) return s;
  if (in.tag != tag) {
    return absl::FailedPreconditionError(absl::StrCat("rank ", recv_from, "'s next message has tag ", in.tag,
                                                      ", not ", tag, " (messages out of order)"));
  }
  if (in.length > kMaxMessageBytes) {
    return absl::DataLossError(absl::StrCat("rank ", recv_from, " announced a message of ", in.length, " bytes"));
  }
  std::string received(in.length, '\0');
  absl::StatusOr<char*> body = Staging(std::max<size_t>(in.length, 1), 0);
  if (!body.ok()) return body.status();
  if (absl::Status s = communicator_->SendRecv(*out_device + sizeof(out), message.size(), send_to, *body, in.length,
                                               recv_from, stream_);
      !s.ok()) {
    return s;
  }
  if (in.length > 0) {
    GPU_RETURN_IF_ERROR(cudaMemcpyAsync(received.data(), *body, in.length, cudaMemcpyDeviceToHost, stream_),
                        "copying the message back");
  }
  if (absl::Status s = Wait(); !s.ok()) return s;
  bytes_sent_ += out_bytes;
  bytes_received_ += sizeof(in) + received.size();
  return received;
}

}  // namespace sketchfuse
