#include "worker/collective/local_group.h"

#include <condition_variable>
#include <mutex>
#include <thread>

namespace sketchfuse {

std::vector<absl::Status> RunOnLocalGlooGroup(int size, const std::function<absl::Status(Collective&)>& fn,
                                              GlooOptions options) {
  InMemoryKeyValueStore store;
  std::vector<absl::Status> statuses(size);
  // Contexts are destroyed only once every rank is done with its own, so no
  // rank closes connections a slower peer is still reading.
  std::mutex mu;
  std::condition_variable all_done;
  int done = 0;
  std::vector<std::thread> threads;
  for (int rank = 0; rank < size; ++rank) {
    threads.emplace_back([&, rank] {
      absl::StatusOr<std::unique_ptr<GlooCollective>> collective =
          GlooCollective::Create(store, rank, size, options);
      statuses[rank] = collective.ok() ? fn(**collective) : collective.status();
      std::unique_lock<std::mutex> lock(mu);
      ++done;
      all_done.notify_all();
      all_done.wait(lock, [&] { return done == size; });
    });
  }
  for (std::thread& t : threads) t.join();
  return statuses;
}

}  // namespace sketchfuse
