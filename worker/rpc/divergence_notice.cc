#include "worker/rpc/divergence_notice.h"

#include <utility>

namespace sketchfuse {

DivergenceNotice::DivergenceNotice(KeyValueStore* store, std::string key) : store_(store), key_(std::move(key)) {}

DivergenceNotice::~DivergenceNotice() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  stop_cv_.notify_all();
  if (watch_.joinable()) watch_.join();
}

absl::Status DivergenceNotice::Post(const Divergence& divergence) {
  absl::Status posted = store_->Set(key_, EncodeDivergence(divergence));
  // Keys are written once: another worker's notice is up already, and it
  // stops the run as this one would.
  if (absl::IsAlreadyExists(posted)) return absl::OkStatus();
  return posted;
}

std::optional<Divergence> DivergenceNotice::Check() {
  absl::StatusOr<std::string> posted = store_->Get(key_, absl::ZeroDuration());
  if (!posted.ok()) return std::nullopt;
  return DecodeDivergence(*posted);
}

void DivergenceNotice::Watch(absl::Duration period, std::function<void(const Divergence&)> on_notice) {
  if (watch_.joinable()) return;
  watch_ = std::thread([this, period, on_notice = std::move(on_notice)] {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_) {
      lock.unlock();
      const std::optional<Divergence> posted = Check();
      if (posted.has_value()) {
        on_notice(*posted);
        return;
      }
      lock.lock();
      stop_cv_.wait_for(lock, absl::ToChronoMilliseconds(period), [this] { return stop_; });
    }
  });
}

}  // namespace sketchfuse
