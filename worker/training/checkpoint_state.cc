#include "worker/training/checkpoint_state.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

namespace sketchfuse {
namespace {

std::string PartKey(size_t group, const char* part) { return absl::StrCat("group_", group, "_", part); }

torch::Tensor TensorOf(const std::vector<float>& values) {
  return torch::from_blob(const_cast<float*>(values.data()), {static_cast<int64_t>(values.size())}, torch::kFloat32)
      .clone();
}

std::vector<float> Read(torch::serialize::InputArchive& archive, const std::string& key) {
  torch::Tensor t;
  archive.read(key, t);
  t = t.to(torch::kFloat32).contiguous();
  return std::vector<float>(t.data_ptr<float>(), t.data_ptr<float>() + t.numel());
}

}  // namespace

void WriteGroupStates(const std::vector<GroupState>& state, torch::serialize::OutputArchive& archive) {
  archive.write("state_format", torch::tensor({kCheckpointStateFormat}, torch::kInt64));
  archive.write("groups", torch::tensor({static_cast<int64_t>(state.size())}, torch::kInt64));
  for (size_t g = 0; g < state.size(); ++g) {
    archive.write(PartKey(g, "residual"), TensorOf(state[g].residual));
    archive.write(PartKey(g, "velocity"), TensorOf(state[g].velocity));
    archive.write(PartKey(g, "method_state"), TensorOf(state[g].method_state));
    archive.write(PartKey(g, "first_moment"), TensorOf(state[g].first_moment));
    archive.write(PartKey(g, "second_moment"), TensorOf(state[g].second_moment));
    archive.write(PartKey(g, "moment_steps"),
                  torch::tensor({static_cast<int64_t>(state[g].moment_steps)}, torch::kInt64));
  }
}

absl::StatusOr<std::vector<GroupState>> ReadGroupStates(torch::serialize::InputArchive& archive,
                                                        const std::vector<GroupState>& current) {
  torch::Tensor format_tensor, groups;
  const int64_t format = archive.try_read("state_format", format_tensor) ? format_tensor.item<int64_t>() : 1;
  if (format != 1 && format != kCheckpointStateFormat) {
    return absl::InvalidArgumentError(absl::StrCat("its groups' state is in format ", format,
                                                   "; this worker reads formats 1 and ", kCheckpointStateFormat));
  }
  archive.read("groups", groups);
  const int64_t entries = groups.item<int64_t>();
  const int64_t per_group = format == 1 ? 2 : 1;
  if (entries != static_cast<int64_t>(current.size()) * per_group) {
    return absl::InvalidArgumentError(absl::StrCat("it holds the state of ", entries / per_group,
                                                   entries % per_group ? " and a half" : "", " groups; this run has ",
                                                   current.size()));
  }
  std::vector<GroupState> state(current.size());
  for (size_t g = 0; g < state.size(); ++g) {
    if (format == kCheckpointStateFormat) {
      state[g].residual = Read(archive, PartKey(g, "residual"));
      state[g].velocity = Read(archive, PartKey(g, "velocity"));
      state[g].method_state = Read(archive, PartKey(g, "method_state"));
      // Adam's moments on the worker: absent from the checkpoints written
      // before them (none kept).
      torch::Tensor steps;
      if (archive.try_read(PartKey(g, "moment_steps"), steps)) {
        if (steps.numel() != 1 || steps.item<int64_t>() < 0) {
          return absl::InvalidArgumentError(absl::StrCat("group ", g, "'s moment_steps is not one count"));
        }
        state[g].moment_steps = static_cast<uint64_t>(steps.item<int64_t>());
        state[g].first_moment = Read(archive, PartKey(g, "first_moment"));
        state[g].second_moment = Read(archive, PartKey(g, "second_moment"));
      }
      continue;
    }
    std::vector<float> first = Read(archive, absl::StrCat("residual_", 2 * g));
    std::vector<float> second = Read(archive, absl::StrCat("residual_", 2 * g + 1));
    if (current[g].method_state.empty()) {
      state[g].residual = std::move(first);
      state[g].velocity = std::move(second);
    } else if (!first.empty() || !second.empty()) {
      // FetchSGD's error, then its momentum; the method's state is the
      // momentum, then the error (FetchSgdState::Save).
      state[g].method_state = std::move(second);
      state[g].method_state.insert(state[g].method_state.end(), first.begin(), first.end());
    }
  }
  return state;
}

}  // namespace sketchfuse
