// The job-wide notice of a divergence (worker/core/divergence.h). The worker that
// diverged posts it in the job's key-value store (the coordinator's) before
// it exits; every worker watches for it. Workers waiting on the one that
// stopped (in a server round its push will never complete, or in a
// collective) then stop within one poll period, with a message naming the
// step, the group and the worker that diverged, instead of at their round or
// collective deadlines. A worker whose step fails because a peer left (a
// collective whose connection closed) asks Check() whether that peer
// diverged.
//
// NOTE: thread-safe.
#ifndef SKETCHFUSE_WORKER_RPC_DIVERGENCE_NOTICE_H_
#define SKETCHFUSE_WORKER_RPC_DIVERGENCE_NOTICE_H_

#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "worker/collective/key_value_store.h"
#include "worker/core/divergence.h"

namespace sketchfuse {

class DivergenceNotice {
 public:
  // `store` outlives this object. `key` names the run (one notice per run,
  // e.g. "diverged/<run fingerprint>", so that a notice never stops another
  // run's workers).
  DivergenceNotice(KeyValueStore* store, std::string key);
  ~DivergenceNotice();  // ends the watch (waits for a Get in progress)

  // Posts `divergence`, unless a notice is up already (the coordinator's
  // keys are written once: the first notice stands, and stops the run as
  // this one would). The store's error if it cannot be reached.
  absl::Status Post(const Divergence& divergence);

  // The divergence posted for this run, if any: one Get without waiting.
  // nullopt when none is posted, when the store cannot be reached, or when
  // it holds something that is not a record.
  std::optional<Divergence> Check();

  // Polls the store every `period` on a thread of its own. `on_notice` runs
  // once, on that thread, with the first divergence found; the watch then
  // ends. A second call does nothing.
  void Watch(absl::Duration period, std::function<void(const Divergence&)> on_notice);

 private:
  KeyValueStore* const store_;
  const std::string key_;
  std::mutex mu_;
  std::condition_variable stop_cv_;
  bool stop_ = false;  // guarded by mu_
  std::thread watch_;
};

}  // namespace sketchfuse

#endif  // SKETCHFUSE_WORKER_RPC_DIVERGENCE_NOTICE_H_
