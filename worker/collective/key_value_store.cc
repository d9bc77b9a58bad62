#include "worker/collective/key_value_store.h"

#include "absl/strings/str_cat.h"
#include "common/rank_keys.h"

namespace sketchfuse {

absl::Status InMemoryKeyValueStore::Set(const std::string& key, const std::string& value) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto [it, inserted] = entries_.emplace(key, value);
    if (!inserted && it->second != value) {
      if (!RankOfKey(key).has_value()) {
        return absl::AlreadyExistsError(
            absl::StrCat("key '", key, "' is already set, to another value: keys are written once"));
      }
      it->second = value;  // a rank's own key, written again
    }
  }
  changed_.notify_all();
  return absl::OkStatus();
}

absl::StatusOr<std::string> InMemoryKeyValueStore::Get(const std::string& key, absl::Duration wait) {
  std::unique_lock<std::mutex> lock(mu_);
  const bool found = changed_.wait_for(lock, absl::ToChronoMilliseconds(wait),
                                       [&] { return entries_.count(key) > 0; });
  if (!found) {
    return absl::NotFoundError(absl::StrCat("key '", key, "' was not set within ", absl::FormatDuration(wait)));
  }
  return entries_.at(key);
}

}  // namespace sketchfuse
