#include "worker/collective/gloo_collective.h"

#include <algorithm>

#include <cstring>
#include <exception>

#include "absl/strings/str_cat.h"
#include "gloo/allgather.h"
#include "gloo/allgatherv.h"
#include "gloo/allreduce.h"
#include "gloo/barrier.h"
#include "gloo/broadcast.h"
#include "gloo/common/error.h"
#include "gloo/math.h"
#include "gloo/rendezvous/context.h"
#include "gloo/rendezvous/store.h"
#include "gloo/transport/tcp/device.h"

namespace sketchfuse {
namespace {

// Gloo's rendezvous over a KeyValueStore. Gloo reports store failures by
// exception; Create turns them into a status. Gloo names each rank's
// address by the rank's number: those keys go under "<prefix>/rank/<r>",
// which the coordinator lets only rank r write (server/coordinator_core.h).
class StoreAdapter final : public gloo::rendezvous::Store {
 public:
  StoreAdapter(KeyValueStore& store, std::string prefix, absl::Duration timeout)
      : store_(store), prefix_(std::move(prefix)), timeout_(timeout) {}

  void set(const std::string& key, const std::vector<char>& data) override {
    absl::Status status = store_.Set(Key(key), std::string(data.begin(), data.end()));
    if (!status.ok()) throw std::runtime_error(absl::StrCat("rendezvous store: ", status.message()));
  }
  std::vector<char> get(const std::string& key) override {
    absl::StatusOr<std::string> value = store_.Get(Key(key), timeout_);
    if (!value.ok()) throw std::runtime_error(absl::StrCat("rendezvous store: ", value.status().message()));
    return std::vector<char>(value->begin(), value->end());
  }
  void wait(const std::vector<std::string>& keys) override { wait(keys, absl::ToChronoMilliseconds(timeout_)); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override {
    for (const std::string& key : keys) {
      absl::StatusOr<std::string> value = store_.Get(Key(key), absl::FromChrono(timeout));
      if (!value.ok()) throw std::runtime_error(absl::StrCat("rendezvous store: ", value.status().message()));
    }
  }

 private:
  std::string Key(const std::string& key) const {
    const bool rank = !key.empty() && std::all_of(key.begin(), key.end(), [](char c) { return c >= '0' && c <= '9'; });
    return rank ? absl::StrCat(prefix_, "/rank/", key) : absl::StrCat(prefix_, "/", key);
  }

  KeyValueStore& store_;
  const std::string prefix_;
  const absl::Duration timeout_;
};

// Gloo reports failures by exception: a timeout or a lost peer is an
// IoException; everything else an enforcement failure.
absl::Status FromGlooException(const char* what, const std::exception& e) {
  if (dynamic_cast<const gloo::IoException*>(&e) != nullptr) {
    return absl::UnavailableError(absl::StrCat("gloo ", what, ": ", e.what()));
  }
  return absl::InternalError(absl::StrCat("gloo ", what, ": ", e.what()));
}

// Point-to-point slots live apart from the collectives' (which Gloo builds
// from 32-bit tags with a prefix in the top byte): two per message, the
// length then the bytes.
constexpr uint64_t kPointToPointSlotBase = 0xF0ull << 56;
uint64_t LengthSlot(uint32_t tag) { return kPointToPointSlotBase | (static_cast<uint64_t>(tag) << 1); }
uint64_t BodySlot(uint32_t tag) { return LengthSlot(tag) | 1; }

// Largest point-to-point message accepted (a sparse set of 2^27 entries).
constexpr uint64_t kMaxMessageBytes = uint64_t{1} << 30;

}  // namespace

absl::StatusOr<std::unique_ptr<GlooCollective>> GlooCollective::Create(KeyValueStore& store, int rank, int size,
                                                                       GlooOptions options) {
  if (size < 1 || rank < 0 || rank >= size) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", rank, " of ", size, " is not a rank of the group"));
  }
  if (options.hostname.empty()) return absl::InvalidArgumentError("the Gloo hostname is empty");
  if (options.timeout <= absl::ZeroDuration()) return absl::InvalidArgumentError("the Gloo timeout must be positive");
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = options.hostname;
    std::shared_ptr<gloo::transport::Device> device = gloo::transport::tcp::CreateDevice(attr);
    auto context = std::make_shared<gloo::rendezvous::Context>(rank, size);
    context->setTimeout(absl::ToChronoMilliseconds(options.timeout));
    StoreAdapter adapter(store, options.prefix, options.timeout);
    context->connectFullMesh(adapter, device);
    return std::unique_ptr<GlooCollective>(new GlooCollective(std::move(context), rank, size, options.timeout));
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat("gloo rendezvous of rank ", rank, " of ", size, " on '",
                                               options.hostname, "' failed: ", e.what()));
  }
}

GlooCollective::GlooCollective(std::shared_ptr<gloo::Context> context, int rank, int size, absl::Duration timeout)
    : context_(std::move(context)), rank_(rank), size_(size), timeout_(timeout) {}

GlooCollective::~GlooCollective() = default;

absl::Status GlooCollective::AllReduceSum(absl::Span<float> data) {
  const uint32_t tag = next_tag_++;
  if (size_ == 1 || data.empty()) return absl::OkStatus();
  try {
    gloo::AllreduceOptions opts(context_);
    opts.setOutput(data.data(), data.size());
    opts.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
    opts.setReduceFunction(
        static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
    opts.setTag(tag);
    opts.setTimeout(absl::ToChronoMilliseconds(timeout_));
    gloo::allreduce(opts);
  } catch (const std::exception& e) {
    return FromGlooException("allreduce", e);
  }
  bytes_sent_ += RingAllReduceBytes(data.size(), size_);
  bytes_received_ += RingAllReduceBytes(data.size(), size_);
  return absl::OkStatus();
}

template <typename T>
absl::Status GlooCollective::AllGatherVImpl(absl::Span<const T> mine, std::vector<T>* all,
                                            std::vector<size_t>* counts) {
  static_assert(sizeof(T) == 4, "4-byte elements");
  const uint32_t count_tag = next_tag_++;
  const uint32_t data_tag = next_tag_++;
  std::vector<uint64_t> sizes(size_);
  try {
    // Every rank's count first, then the blocks.
    uint64_t own = mine.size();
    gloo::AllgatherOptions count_opts(context_);
    count_opts.setInput(&own, 1);
    count_opts.setOutput(sizes.data(), sizes.size());
    count_opts.setTag(count_tag);
    count_opts.setTimeout(absl::ToChronoMilliseconds(timeout_));
    gloo::allgather(count_opts);
    counts->assign(sizes.begin(), sizes.end());
    size_t total = 0;
    for (size_t c : *counts) total += c;
    all->resize(total);
    if (total > 0) {
      gloo::AllgathervOptions opts(context_);
      opts.setInput(const_cast<T*>(mine.data()), mine.size());
      opts.setOutput(all->data(), *counts);
      opts.setTag(data_tag);
      opts.setTimeout(absl::ToChronoMilliseconds(timeout_));
      gloo::allgatherv(opts);
    }
  } catch (const std::exception& e) {
    return FromGlooException("allgatherv", e);
  }
  std::vector<size_t> count_words(size_, 2);
  bytes_sent_ += RingAllGatherBytes(count_words, rank_) + RingAllGatherBytes(*counts, rank_);
  bytes_received_ += RingAllGatherReceivedBytes(count_words, rank_) + RingAllGatherReceivedBytes(*counts, rank_);
  return absl::OkStatus();
}

absl::Status GlooCollective::AllGatherV(absl::Span<const uint32_t> mine, std::vector<uint32_t>* all,
                                        std::vector<size_t>* counts) {
  return AllGatherVImpl(mine, all, counts);
}

absl::Status GlooCollective::AllGatherV(absl::Span<const float> mine, std::vector<float>* all,
                                        std::vector<size_t>* counts) {
  return AllGatherVImpl(mine, all, counts);
}

template <typename T>
absl::Status GlooCollective::BroadcastImpl(absl::Span<T> data, int root) {
  if (root < 0 || root >= size_) {
    return absl::InvalidArgumentError(absl::StrCat("broadcast root ", root, " is not a rank of ", size_));
  }
  const uint32_t tag = next_tag_++;
  if (size_ == 1 || data.empty()) return absl::OkStatus();
  try {
    gloo::BroadcastOptions opts(context_);
    if (rank_ == root) opts.setInput(data.data(), data.size());
    opts.setOutput(data.data(), data.size());
    opts.setRoot(root);
    opts.setTag(tag);
    opts.setTimeout(absl::ToChronoMilliseconds(timeout_));
    gloo::broadcast(opts);
  } catch (const std::exception& e) {
    return FromGlooException("broadcast", e);
  }
  bytes_sent_ += TreeBroadcastBytes(data.size(), rank_, root, size_);
  bytes_received_ += BroadcastReceivedBytes(data.size(), rank_, root, size_);
  return absl::OkStatus();
}

absl::Status GlooCollective::Broadcast(absl::Span<uint32_t> data, int root) { return BroadcastImpl(data, root); }
absl::Status GlooCollective::Broadcast(absl::Span<float> data, int root) { return BroadcastImpl(data, root); }

absl::Status GlooCollective::Barrier() {
  const uint32_t tag = next_tag_++;
  try {
    gloo::BarrierOptions opts(context_);
    opts.setTag(tag);
    opts.setTimeout(absl::ToChronoMilliseconds(timeout_));
    gloo::barrier(opts);
  } catch (const std::exception& e) {
    return FromGlooException("barrier", e);
  }
  return absl::OkStatus();
}

absl::Status GlooCollective::CheckPeer(int peer) const {
  if (peer < 0 || peer >= size_ || peer == rank_) {
    return absl::InvalidArgumentError(
        absl::StrCat("peer ", peer, " is not another rank of the group (this is rank ", rank_, " of ", size_, ")"));
  }
  return absl::OkStatus();
}

absl::Status GlooCollective::Send(absl::string_view message, int peer, uint32_t tag) {
  if (absl::Status s = CheckPeer(peer); !s.ok()) return s;
  uint64_t length = message.size();
  try {
    auto length_buffer = context_->createUnboundBuffer(&length, sizeof(length));
    length_buffer->send(peer, LengthSlot(tag));
    std::unique_ptr<gloo::transport::UnboundBuffer> body;
    if (length > 0) {
      body = context_->createUnboundBuffer(const_cast<char*>(message.data()), message.size());
      body->send(peer, BodySlot(tag));
    }
    const auto timeout = absl::ToChronoMilliseconds(timeout_);
    length_buffer->waitSend(timeout);
    if (body != nullptr) body->waitSend(timeout);
  } catch (const std::exception& e) {
    return FromGlooException("send", e);
  }
  bytes_sent_ += sizeof(length) + message.size();
  return absl::OkStatus();
}

absl::StatusOr<std::string> GlooCollective::Recv(int peer, uint32_t tag) {
  if (absl::Status s = CheckPeer(peer); !s.ok()) return s;
  std::string message;
  try {
    const auto timeout = absl::ToChronoMilliseconds(timeout_);
    uint64_t length = 0;
    auto length_buffer = context_->createUnboundBuffer(&length, sizeof(length));
    length_buffer->recv(peer, LengthSlot(tag));
    length_buffer->waitRecv(timeout);
    if (length > kMaxMessageBytes) {
      return absl::DataLossError(absl::StrCat("rank ", peer, " announced a message of ", length,
                                              " bytes (tag ", tag, "); the limit is ", kMaxMessageBytes));
    }
    message.resize(length);
    if (length > 0) {
      auto body = context_->createUnboundBuffer(message.data(), message.size());
      body->recv(peer, BodySlot(tag));
      body->waitRecv(timeout);
    }
  } catch (const std::exception& e) {
    return FromGlooException("recv", e);
  }
  bytes_received_ += sizeof(uint64_t) + message.size();
  return message;
}

absl::StatusOr<std::string> GlooCollective::SendRecv(absl::string_view message, int send_to, int recv_from,
                                                     uint32_t tag) {
  if (absl::Status s = CheckPeer(send_to); !s.ok()) return s;
  if (absl::Status s = CheckPeer(recv_from); !s.ok()) return s;
  std::string received;
  try {
    const auto timeout = absl::ToChronoMilliseconds(timeout_);
    // Lengths both ways, then bodies both ways; each pair posted before waiting.
    uint64_t out_length = message.size(), in_length = 0;
    auto out_length_buffer = context_->createUnboundBuffer(&out_length, sizeof(out_length));
    auto in_length_buffer = context_->createUnboundBuffer(&in_length, sizeof(in_length));
    in_length_buffer->recv(recv_from, LengthSlot(tag));
    out_length_buffer->send(send_to, LengthSlot(tag));
    in_length_buffer->waitRecv(timeout);
    out_length_buffer->waitSend(timeout);
    if (in_length > kMaxMessageBytes) {
      return absl::DataLossError(absl::StrCat("rank ", recv_from, " announced a message of ", in_length,
                                              " bytes (tag ", tag, "); the limit is ", kMaxMessageBytes));
    }
    received.resize(in_length);
    std::unique_ptr<gloo::transport::UnboundBuffer> in_body, out_body;
    if (in_length > 0) {
      in_body = context_->createUnboundBuffer(received.data(), received.size());
      in_body->recv(recv_from, BodySlot(tag));
    }
    if (!message.empty()) {
      out_body = context_->createUnboundBuffer(const_cast<char*>(message.data()), message.size());
      out_body->send(send_to, BodySlot(tag));
    }
    if (in_body != nullptr) in_body->waitRecv(timeout);
    if (out_body != nullptr) out_body->waitSend(timeout);
  } catch (const std::exception& e) {
    return FromGlooException("sendrecv", e);
  }
  bytes_sent_ += sizeof(uint64_t) + message.size();
  bytes_received_ += sizeof(uint64_t) + received.size();
  return received;
}

}  // namespace sketchfuse
