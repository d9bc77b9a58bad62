// The CPU backend of Collective: Gloo (Debian's libgloo) over its TCP
// transport. Ranks find each other through a KeyValueStore (the
// coordinator's, in a job): each publishes its listening address under
// "<prefix>/<rank>" and connects to every other rank (a full mesh).
//
// Algorithms, and so bytes_sent() and bytes_received(): Gloo's ring
// allreduce and ring allgatherv, a broadcast counted as a binomial tree, and
// point-to-point messages of an 8-byte length plus the bytes.
#ifndef SKETCHFUSE_WORKER_COLLECTIVE_GLOO_COLLECTIVE_H_
#define SKETCHFUSE_WORKER_COLLECTIVE_GLOO_COLLECTIVE_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "worker/collective/collective.h"
#include "worker/collective/key_value_store.h"

namespace gloo {
class Context;
}  // namespace gloo

namespace sketchfuse {

struct GlooOptions {
  // The address this rank listens on, and that its peers connect to
  // (loopback for a local cluster, the pod's address on Kubernetes).
  std::string hostname = "127.0.0.1";
  // Limit of the rendezvous and of every operation.
  absl::Duration timeout = absl::Seconds(60);
  // Key prefix in the store, so several groups can share one.
  std::string prefix = "gloo";
};

class GlooCollective final : public Collective {
 public:
  // Joins the group as `rank` of `size`, blocking until every rank has
  // connected. INVALID_ARGUMENT for a rank outside [0, size) or an empty
  // hostname; UNAVAILABLE (naming the cause) when the rendezvous fails.
  static absl::StatusOr<std::unique_ptr<GlooCollective>> Create(KeyValueStore& store, int rank, int size,
                                                                GlooOptions options = {});
  ~GlooCollective() override;

  std::string backend() const override { return "gloo"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  absl::Status AllReduceSum(absl::Span<float> data) override;
  absl::Status AllGatherV(absl::Span<const uint32_t> mine, std::vector<uint32_t>* all,
                          std::vector<size_t>* counts) override;
  absl::Status AllGatherV(absl::Span<const float> mine, std::vector<float>* all,
                          std::vector<size_t>* counts) override;
  absl::Status Broadcast(absl::Span<uint32_t> data, int root) override;
  absl::Status Broadcast(absl::Span<float> data, int root) override;
  absl::Status Barrier() override;
  absl::Status Send(absl::string_view message, int peer, uint32_t tag) override;
  absl::StatusOr<std::string> Recv(int peer, uint32_t tag) override;
  absl::StatusOr<std::string> SendRecv(absl::string_view message, int send_to, int recv_from,
                                       uint32_t tag) override;
  uint64_t bytes_sent() const override { return bytes_sent_; }
  uint64_t bytes_received() const override { return bytes_received_; }

 private:
  GlooCollective(std::shared_ptr<gloo::Context> context, int rank, int size, absl::Duration timeout);
  template <typename T>
  absl::Status AllGatherVImpl(absl::Span<const T> mine, std::vector<T>* all, std::vector<size_t>* counts);
  template <typename T>
  absl::Status BroadcastImpl(absl::Span<T> data, int root);
  absl::Status CheckPeer(int peer) const;

  std::shared_ptr<gloo::Context> context_;
  const int rank_;
  const int size_;
  const absl::Duration timeout_;
  // Tag of the next collective; every rank runs the same sequence.
  uint32_t next_tag_ = 1;
  uint64_t bytes_sent_ = 0;
  uint64_t bytes_received_ = 0;
};

}  // namespace sketchfuse

#endif  // SKETCHFUSE_WORKER_COLLECTIVE_GLOO_COLLECTIVE_H_
