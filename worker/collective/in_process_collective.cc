#include "worker/collective/in_process_collective.h"

#include <algorithm>
#include <cstring>
#include <functional>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace sketchfuse {
namespace {

// Gloo's ring allreduce (gloo/allreduce.cc, the Debian build's): segments of
// at most this many bytes, at least two per rank, their count a multiple of
// the ranks; rank r's chunk is its numSegments / size consecutive segments.
constexpr uint64_t kGlooMaxSegmentBytes = 1024 * 1024;

uint64_t RoundUp(uint64_t value, uint64_t multiple) { return (value + multiple - 1) / multiple * multiple; }

// Elements per chunk of a ring allreduce of `elements` floats over `size` ranks.
uint64_t RingChunkElements(uint64_t elements, int size) {
  const uint64_t total_bytes = elements * 4;
  const uint64_t segments = RoundUp(
      std::max<uint64_t>((total_bytes + kGlooMaxSegmentBytes - 1) / kGlooMaxSegmentBytes, 2 * size), size);
  const uint64_t segment_bytes = RoundUp((total_bytes + segments - 1) / segments, 4);
  return segment_bytes / 4 * (segments / size);
}

// The sum of every rank's `inputs` in Gloo's ring order: chunk c's partial
// sum starts at rank c - 1 and travels down the ring (each rank adds its own
// values to what it received) until rank c completes it.
void RingOrderSum(const std::vector<const void*>& inputs, uint64_t elements, std::vector<float>* sum) {
  const int size = static_cast<int>(inputs.size());
  sum->resize(elements);
  const uint64_t chunk = RingChunkElements(elements, size);
  for (int c = 0; c < size; ++c) {
    const uint64_t begin = std::min<uint64_t>(c * chunk, elements);
    const uint64_t end = std::min<uint64_t>(begin + chunk, elements);
    if (begin == end) continue;
    float* out = sum->data() + begin;
    const uint64_t n = end - begin;
    const int first = (c - 1 + size) % size;
    std::memcpy(out, static_cast<const float*>(inputs[first]) + begin, n * sizeof(float));
    for (int k = 2; k <= size; ++k) {
      const float* in = static_cast<const float*>(inputs[((c - k) % size + size) % size]) + begin;
      for (uint64_t i = 0; i < n; ++i) out[i] = in[i] + out[i];
    }
  }
}

}  // namespace

int RingChunkOf(uint64_t element, uint64_t elements, int size) {
  if (size <= 1 || element >= elements) return 0;
  return static_cast<int>(element / RingChunkElements(elements, size));
}

class InProcessCollective final : public Collective {
 public:
  InProcessCollective(InProcessGroup* group, int rank) : group_(group), rank_(rank) {}

  std::string backend() const override { return "in_process"; }
  int rank() const override { return rank_; }
  int size() const override { return group_->size(); }

  absl::Status AllReduceSum(absl::Span<float> data) override {
    const uint64_t seq = next_seq_++;
    if (size() == 1 || data.empty()) return absl::OkStatus();  // Gloo's: no exchange
    absl::StatusOr<InProcessGroup::Meeting*> meeting =
        group_->Meet(seq, "allreduce", rank_, data.data(), data.size(), [](InProcessGroup::Meeting& m) {
          const size_t n = m.counts[0];
          for (size_t c : m.counts) {
            if (c != n) return;  // refused below, by every rank
          }
          RingOrderSum(m.inputs, n, &m.sum);
        });
    if (!meeting.ok()) return meeting.status();
    absl::Status status;
    if ((*meeting)->sum.size() != data.size()) {
      status = absl::InvalidArgumentError(absl::StrCat("allreduce of ", data.size(), " elements on rank ", rank_,
                                                       ": the ranks gave different sizes"));
    } else {
      std::memcpy(data.data(), (*meeting)->sum.data(), data.size() * sizeof(float));
      bytes_sent_ += RingAllReduceBytes(data.size(), size());
      bytes_received_ += RingAllReduceBytes(data.size(), size());
    }
    group_->Leave(seq);
    return status;
  }

  absl::Status AllGatherV(absl::Span<const uint32_t> mine, std::vector<uint32_t>* all,
                          std::vector<size_t>* counts) override {
    return Gather(mine, all, counts);
  }
  absl::Status AllGatherV(absl::Span<const float> mine, std::vector<float>* all,
                          std::vector<size_t>* counts) override {
    return Gather(mine, all, counts);
  }

  absl::Status Broadcast(absl::Span<uint32_t> data, int root) override { return Cast(data, root); }
  absl::Status Broadcast(absl::Span<float> data, int root) override { return Cast(data, root); }

  absl::Status Barrier() override {
    const uint64_t seq = next_seq_++;
    absl::StatusOr<InProcessGroup::Meeting*> meeting = group_->Meet(seq, "barrier", rank_, nullptr, 0, nullptr);
    if (!meeting.ok()) return meeting.status();
    group_->Leave(seq);
    return absl::OkStatus();
  }

  absl::Status Send(absl::string_view message, int peer, uint32_t tag) override {
    if (absl::Status s = CheckPeer(peer); !s.ok()) return s;
    group_->Post(rank_, peer, tag, std::string(message));
    bytes_sent_ += sizeof(uint64_t) + message.size();
    return absl::OkStatus();
  }
  absl::StatusOr<std::string> Recv(int peer, uint32_t tag) override {
    if (absl::Status s = CheckPeer(peer); !s.ok()) return s;
    absl::StatusOr<std::string> message = group_->Take(peer, rank_, tag);
    if (message.ok()) bytes_received_ += sizeof(uint64_t) + message->size();
    return message;
  }
  absl::StatusOr<std::string> SendRecv(absl::string_view message, int send_to, int recv_from,
                                       uint32_t tag) override {
    if (absl::Status s = CheckPeer(recv_from); !s.ok()) return s;
    if (absl::Status s = Send(message, send_to, tag); !s.ok()) return s;
    return Recv(recv_from, tag);
  }

  uint64_t bytes_sent() const override { return bytes_sent_; }
  uint64_t bytes_received() const override { return bytes_received_; }

 private:
  absl::Status CheckPeer(int peer) const {
    if (peer < 0 || peer >= size() || peer == rank_) {
      return absl::InvalidArgumentError(
          absl::StrCat("peer ", peer, " is not another rank of the group (this is rank ", rank_, " of ", size(), ")"));
    }
    return absl::OkStatus();
  }

  template <typename T>
  absl::Status Gather(absl::Span<const T> mine, std::vector<T>* all, std::vector<size_t>* counts) {
    static_assert(sizeof(T) == 4, "4-byte elements");
    // Gloo's allgatherv takes two tags (counts, then blocks): keep the
    // numbering alike, though nothing here depends on it.
    const uint64_t seq = next_seq_++;
    ++next_seq_;
    absl::StatusOr<InProcessGroup::Meeting*> meeting =
        group_->Meet(seq, "allgatherv", rank_, mine.data(), mine.size(), [](InProcessGroup::Meeting& m) {
          size_t total = 0;
          for (size_t c : m.counts) total += c;
          m.words.resize(total);
          size_t at = 0;
          for (size_t r = 0; r < m.counts.size(); ++r) {
            if (m.counts[r] > 0) std::memcpy(m.words.data() + at, m.inputs[r], m.counts[r] * 4);
            at += m.counts[r];
          }
        });
    if (!meeting.ok()) return meeting.status();
    const InProcessGroup::Meeting& m = **meeting;
    counts->assign(m.counts.begin(), m.counts.end());
    all->resize(m.words.size());
    if (!m.words.empty()) std::memcpy(all->data(), m.words.data(), m.words.size() * 4);
    group_->Leave(seq);
    std::vector<size_t> count_words(size(), 2);
    bytes_sent_ += RingAllGatherBytes(count_words, rank_) + RingAllGatherBytes(*counts, rank_);
    bytes_received_ += RingAllGatherReceivedBytes(count_words, rank_) + RingAllGatherReceivedBytes(*counts, rank_);
    return absl::OkStatus();
  }

  template <typename T>
  absl::Status Cast(absl::Span<T> data, int root) {
    if (root < 0 || root >= size()) {
      return absl::InvalidArgumentError(absl::StrCat("broadcast root ", root, " is not a rank of ", size()));
    }
    const uint64_t seq = next_seq_++;
    if (size() == 1 || data.empty()) return absl::OkStatus();
    absl::StatusOr<InProcessGroup::Meeting*> meeting =
        group_->Meet(seq, "broadcast", rank_, data.data(), data.size(), [root](InProcessGroup::Meeting& m) {
          m.words.resize(m.counts[root]);
          if (!m.words.empty()) std::memcpy(m.words.data(), m.inputs[root], m.words.size() * 4);
        });
    if (!meeting.ok()) return meeting.status();
    const InProcessGroup::Meeting& m = **meeting;
    absl::Status status;
    if (m.words.size() != data.size()) {
      status = absl::InvalidArgumentError(absl::StrCat("broadcast of ", data.size(), " elements on rank ", rank_,
                                                       ": the root gave ", m.words.size()));
    } else if (rank_ != root) {
      std::memcpy(data.data(), m.words.data(), data.size() * sizeof(T));
    }
    group_->Leave(seq);
    if (status.ok()) {
      bytes_sent_ += TreeBroadcastBytes(data.size(), rank_, root, size());
      bytes_received_ += BroadcastReceivedBytes(data.size(), rank_, root, size());
    }
    return status;
  }

  InProcessGroup* const group_;
  const int rank_;
  uint64_t next_seq_ = 0;
  uint64_t bytes_sent_ = 0, bytes_received_ = 0;
};

InProcessGroup::InProcessGroup(int size, absl::Duration timeout) : size_(size), timeout_(timeout) {}
InProcessGroup::~InProcessGroup() = default;

std::unique_ptr<Collective> InProcessGroup::Rank(int rank) {
  return std::make_unique<InProcessCollective>(this, rank);
}

void InProcessGroup::Abort(const absl::Status& why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (aborted_.ok()) aborted_ = why.ok() ? absl::AbortedError("the in-process group was aborted") : why;
  changed_.notify_all();
}

absl::StatusOr<InProcessGroup::Meeting*> InProcessGroup::Meet(uint64_t seq, const std::string& op, int rank,
                                                              const void* input, size_t count,
                                                              const std::function<void(Meeting&)>& complete) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!aborted_.ok()) return aborted_;
  Meeting& m = meetings_[seq];
  if (m.inputs.empty()) {
    m.op = op;
    m.inputs.assign(size_, nullptr);
    m.counts.assign(size_, 0);
  } else if (m.op != op) {
    return absl::FailedPreconditionError(absl::StrCat("collective operation ", seq, ": rank ", rank, " calls ", op,
                                                      ", another rank ", m.op, " (the ranks' orders differ)"));
  }
  m.inputs[rank] = input;
  m.counts[rank] = count;
  if (++m.arrived == size_) {
    if (complete) complete(m);
    m.inputs.assign(size_, nullptr);  // the inputs may die from now on
    m.done = true;
    changed_.notify_all();
  } else if (!changed_.wait_for(lock, absl::ToChronoMilliseconds(timeout_),
                                [&] { return m.done || !aborted_.ok(); })) {
    // This rank's input dies with its call: no later arrival may read it.
    aborted_ = absl::DeadlineExceededError(absl::StrCat("in-process ", op, " (operation ", seq, ") on rank ", rank,
                                                        ": ", size_ - m.arrived, " ranks did not arrive within ",
                                                        absl::FormatDuration(timeout_)));
    changed_.notify_all();
    return aborted_;
  }
  if (!m.done) return aborted_;
  return &m;
}

void InProcessGroup::Leave(uint64_t seq) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = meetings_.find(seq);
  if (it != meetings_.end() && ++it->second.left == size_) meetings_.erase(it);
}

void InProcessGroup::Post(int from, int to, uint32_t tag, std::string message) {
  std::lock_guard<std::mutex> lock(mu_);
  mailboxes_[{from, to, tag}].push_back(std::move(message));
  changed_.notify_all();
}

absl::StatusOr<std::string> InProcessGroup::Take(int from, int to, uint32_t tag) {
  std::unique_lock<std::mutex> lock(mu_);
  const auto key = std::make_tuple(from, to, tag);
  auto ready = [&] {
    auto it = mailboxes_.find(key);
    return !aborted_.ok() || (it != mailboxes_.end() && !it->second.empty());
  };
  if (!changed_.wait_for(lock, absl::ToChronoMilliseconds(timeout_), ready)) {
    return absl::DeadlineExceededError(absl::StrCat("in-process recv on rank ", to, " from rank ", from, " (tag ",
                                                    tag, "): nothing within ", absl::FormatDuration(timeout_)));
  }
  if (!aborted_.ok()) return aborted_;
  auto it = mailboxes_.find(key);
  std::string message = std::move(it->second.front());
  it->second.pop_front();
  if (it->second.empty()) mailboxes_.erase(it);
  return message;
}

}  // namespace sketchfuse
