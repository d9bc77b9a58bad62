// The rendezvous store the collectives need: Gloo's ranks publish their
// addresses through it, NCCL's rank 0 its unique id. In a job it is the
// coordinator's key-value store (worker/rpc/coordinator_client.h implements this
// interface); ranks that run as threads of one process share an
// InMemoryKeyValueStore.
#ifndef SKETCHFUSE_WORKER_COLLECTIVE_KEY_VALUE_STORE_H_
#define SKETCHFUSE_WORKER_COLLECTIVE_KEY_VALUE_STORE_H_

#include <condition_variable>
#include <map>
#include <mutex>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace sketchfuse {

class KeyValueStore {
 public:
  virtual ~KeyValueStore() = default;

  // Sets `key` to `value`: a rank's own key (common/rank_keys.h) again and
  // again, any other once (ALREADY_EXISTS for another value; the same value
  // again is a no-op), as the coordinator's store answers
  // (server/coordinator_core.h).
  virtual absl::Status Set(const std::string& key, const std::string& value) = 0;

  // The value of `key`, waiting up to `wait` for it to be set; NOT_FOUND if
  // it is not set by then.
  virtual absl::StatusOr<std::string> Get(const std::string& key, absl::Duration wait) = 0;
};

// A store inside one process. NOTE: thread-safe.
class InMemoryKeyValueStore final : public KeyValueStore {
 public:
  absl::Status Set(const std::string& key, const std::string& value) override;
  absl::StatusOr<std::string> Get(const std::string& key, absl::Duration wait) override;

 private:
  std::mutex mu_;
  std::condition_variable changed_;
  std::map<std::string, std::string> entries_;  // guarded by mu_
};

}  // namespace sketchfuse

#endif  // SKETCHFUSE_WORKER_COLLECTIVE_KEY_VALUE_STORE_H_
