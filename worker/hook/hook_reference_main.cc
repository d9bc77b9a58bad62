// hook_reference: the worker's CollectiveScheme on given gradients, over a
// real Gloo group of threads; the reference the Python hook's tests compare
// the hook's aggregates with.
//
//   hook_reference SETTINGS_FILE GRADIENTS_FILE OUTPUT_FILE
//
// SETTINGS_FILE: the hook's "key=value" lines (scheme, compressor, seed, ...;
// rank is ignored, world_size is the gradients'). GRADIENTS_FILE: int32
// world, steps, dim (little-endian), then float32 gradients indexed
// [step][rank][i]. OUTPUT_FILE: float32 mean updates [step][rank][i], as the
// worker applies them (the sum over ranks divided by the world size).
// Exit status 0, or 2 with a message naming the problem.
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "worker/hook/worker_reference.h"

namespace sketchfuse {
namespace {

absl::Status Run(const std::string& settings_path, const std::string& gradients_path, const std::string& out_path) {
  std::ifstream settings_file(settings_path);
  if (!settings_file) return absl::NotFoundError(absl::StrCat(settings_path, ": cannot open"));
  std::stringstream text;
  text << settings_file.rdbuf();
  std::ifstream in(gradients_path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(gradients_path, ": cannot open"));
  int32_t header[3];
  if (!in.read(reinterpret_cast<char*>(header), sizeof(header)) || header[0] < 1 || header[0] > 64 ||
      header[1] < 1 || header[1] > 10000 || header[2] < 1 || header[2] > (1 << 26)) {
    return absl::InvalidArgumentError(absl::StrCat(gradients_path, ": bad header (world 1-64, steps 1-10000, dim "
                                                   "1-2^26)"));
  }
  const int world = header[0], steps = header[1];
  const size_t dim = static_cast<size_t>(header[2]);
  if (static_cast<uint64_t>(world) * steps * dim > (uint64_t{1} << 28)) {
    return absl::InvalidArgumentError(absl::StrCat(gradients_path, ": ", world, " x ", steps, " x ", dim,
                                                   " gradients are more than 2^28 floats"));
  }
  std::vector<float> grads(static_cast<size_t>(world) * steps * dim);
  if (!in.read(reinterpret_cast<char*>(grads.data()), grads.size() * sizeof(float))) {
    return absl::InvalidArgumentError(absl::StrCat(gradients_path, ": fewer gradients than the header says"));
  }
  absl::StatusOr<std::vector<float>> means = WorkerSchemeMeans(text.str(), world, steps, dim, grads, {});
  if (!means.ok()) return means.status();
  std::ofstream out(out_path, std::ios::binary);
  if (!out.write(reinterpret_cast<const char*>(means->data()), means->size() * sizeof(float))) {
    return absl::UnavailableError(absl::StrCat(out_path, ": cannot write"));
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace sketchfuse

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: hook_reference SETTINGS_FILE GRADIENTS_FILE OUTPUT_FILE\n");
    return 2;
  }
  absl::Status s = sketchfuse::Run(argv[1], argv[2], argv[3]);
  if (!s.ok()) {
    std::fprintf(stderr, "hook_reference: %s\n", s.ToString().c_str());
    return 2;
  }
  return 0;
}
