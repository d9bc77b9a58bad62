#include "server/answer_journal.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "proto/kept_answer.pb.h"
#include "proto/payload_convert.h"
#include "proto/run_config.h"

namespace sketchfuse {
namespace {

constexpr char kSuffix[] = ".answer";
constexpr char kTmpSuffix[] = ".answer.tmp";

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Parses "g<group>-r<round>-s<step>.answer".
bool ParseName(const std::string& name, uint32_t* group, uint32_t* round, uint64_t* step) {
  unsigned group_value = 0, round_value = 0;
  uint64_t step_value = 0;
  int consumed = 0;
  if (std::sscanf(name.c_str(), "g%u-r%u-s%" SCNu64 "%n", &group_value, &round_value, &step_value, &consumed) != 3) {
    return false;
  }
  if (name.substr(consumed) != kSuffix) return false;
  *group = group_value;
  *round = round_value;
  *step = step_value;
  // The name must be the canonical one (no leading zeros or signs).
  return name == absl::StrCat("g", group_value, "-r", round_value, "-s", step_value, kSuffix);
}

}  // namespace

std::string ShardIdentity(const v1::JobConfig& job, int shard_index, int num_shards) {
  return absl::StrFormat("job '%s', config %s, shard %d of %d", job.job(), JobFingerprint(job), shard_index,
                         num_shards);
}

absl::StatusOr<std::unique_ptr<AnswerJournal>> AnswerJournal::Open(std::string dir, std::string identity,
                                                                   size_t kept) {
  if (dir.empty()) return absl::InvalidArgumentError("answer journal: the directory is empty");
  if (kept == 0) return absl::InvalidArgumentError("answer journal: kept must be at least 1");
  std::error_code error;
  if (std::filesystem::exists(dir, error) && !std::filesystem::is_directory(dir, error)) {
    return absl::InvalidArgumentError(absl::StrCat("--state_dir '", dir, "' is not a directory"));
  }
  std::filesystem::create_directories(dir, error);
  if (error) {
    return absl::InternalError(absl::StrCat("cannot create --state_dir '", dir, "': ", error.message()));
  }
  return std::unique_ptr<AnswerJournal>(new AnswerJournal(std::move(dir), std::move(identity), kept));
}

std::string AnswerJournal::PathOf(uint32_t group, uint32_t round, uint64_t step) const {
  return absl::StrCat(dir_, "/g", group, "-r", round, "-s", step, kSuffix);
}

absl::StatusOr<std::vector<KeptAnswer>> AnswerJournal::Load() {
  std::vector<std::string> names;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(dir_, error)) {
    const std::string name = entry.path().filename().string();
    if (EndsWith(name, kTmpSuffix)) {
      std::filesystem::remove(entry.path(), error);  // a write the crash cut short
      continue;
    }
    if (EndsWith(name, kSuffix)) names.push_back(name);
  }
  if (error) return absl::InternalError(absl::StrCat("cannot list --state_dir '", dir_, "': ", error.message()));

  std::vector<KeptAnswer> answers;
  std::map<std::pair<uint32_t, uint32_t>, std::set<uint64_t>> files;
  for (const std::string& name : names) {
    const std::string path = dir_ + "/" + name;
    KeptAnswer answer;
    if (!ParseName(name, &answer.group, &answer.round, &answer.step)) {
      return absl::InvalidArgumentError(absl::StrCat("'", path, "' is not named like a kept answer (g<group>-",
                                                     "r<round>-s<step>", kSuffix, ")"));
    }
    std::ifstream in(path, std::ios::binary);
    std::stringstream content;
    content << in.rdbuf();
    v1::KeptAnswer message;
    if (!in || !message.ParseFromString(content.str())) {
      return absl::InvalidArgumentError(absl::StrCat("'", path, "' is not a valid kept answer (truncated or corrupt)"));
    }
    if (message.identity() != identity_) {
      return absl::FailedPreconditionError(absl::StrCat(
          "--state_dir '", dir_, "' holds answers of another run: '", name, "' belongs to ", message.identity(),
          "; this shard is ", identity_, ". Give each run a directory of its own"));
    }
    if (message.round().group() != answer.group || message.round().step() != answer.step ||
        message.round().round() != answer.round) {
      return absl::InvalidArgumentError(absl::StrCat("'", path, "' holds the answer of another round (step ",
                                                     message.round().step(), ", group ", message.round().group(),
                                                     ")"));
    }
    absl::StatusOr<Update> update = AnswerFromProto(message.update());
    if (!update.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("'", path, "' holds a malformed update: ", update.status().message()));
    }
    answer.result.update = std::make_shared<const Update>(*std::move(update));
    answer.result.contributors = message.contributors();
    if (message.group_state_size() > 0) {
      answer.group_state =
          std::make_shared<const std::vector<float>>(message.group_state().begin(), message.group_state().end());
    }
    files[{answer.group, answer.round}].insert(answer.step);
    answers.push_back(std::move(answer));
  }
  std::lock_guard<std::mutex> lock(mu_);
  files_ = std::move(files);
  for (const auto& [key, steps] : files_) TrimLocked(key.first, key.second);
  // Drop what was trimmed; keep the oldest step first per group.
  std::vector<KeptAnswer> kept;
  for (KeptAnswer& a : answers) {
    if (files_[{a.group, a.round}].count(a.step)) kept.push_back(std::move(a));
  }
  std::sort(kept.begin(), kept.end(), [](const KeptAnswer& a, const KeptAnswer& b) {
    return std::tie(a.group, a.round, a.step) < std::tie(b.group, b.round, b.step);
  });
  return kept;
}

absl::Status AnswerJournal::Record(const KeptAnswer& answer) {
  v1::KeptAnswer message;
  message.set_identity(identity_);
  message.mutable_round()->set_step(answer.step);
  message.mutable_round()->set_group(answer.group);
  message.mutable_round()->set_round(answer.round);
  if (answer.result.update != nullptr) UpdateToProto(*answer.result.update, message.mutable_update());
  message.set_contributors(answer.result.contributors);
  if (answer.group_state != nullptr) *message.mutable_group_state() = {answer.group_state->begin(), answer.group_state->end()};
  const std::string path = PathOf(answer.group, answer.round, answer.step);
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out || !message.SerializeToOstream(&out) || !out.flush()) {
      std::remove(tmp.c_str());
      return absl::InternalError(absl::StrCat("cannot write the kept answer '", tmp, "'"));
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return absl::InternalError(absl::StrCat("cannot rename the kept answer '", tmp, "' into place"));
  }
  std::lock_guard<std::mutex> lock(mu_);
  files_[{answer.group, answer.round}].insert(answer.step);
  TrimLocked(answer.group, answer.round);
  return absl::OkStatus();
}

void AnswerJournal::TrimLocked(uint32_t group, uint32_t round) {
  std::set<uint64_t>& steps = files_[{group, round}];
  while (steps.size() > kept_) {
    std::remove(PathOf(group, round, *steps.begin()).c_str());
    steps.erase(steps.begin());
  }
}

}  // namespace sketchfuse
