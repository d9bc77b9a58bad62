// Compressors selected by name, with validated parameters.
//
// A spec is "name" or "name:key=value,key=value", e.g.
// "count_sketch:rows=5,width=10,density=0.001". Every parameter has a
// documented range; an unknown name, an unknown parameter or a value out of
// range is refused with INVALID_ARGUMENT and a message that names it and lists
// what is accepted. Decorators are applied by the caller (WithErrorFeedback,
// WithMomentum in common/error_feedback.h).
//
// Built-in compressors:
//   dense         no compression (linear)
//   topk          exact top-k by magnitude (sparse)
//   randomk       k coordinates drawn from (seed, step), the same on every
//                 worker, so payloads add up (linear-aligned sparse)
//   threshold     DGC: threshold from a random sample's top-k (sparse)
//   importance    top-k of |g| / (|w| + epsilon) (sparse)
//   count_sketch  Count-Sketch; decode = heavy hitters (linear)
#ifndef SKETCHFUSE_COMMON_COMPRESSOR_REGISTRY_H_
#define SKETCHFUSE_COMMON_COMPRESSOR_REGISTRY_H_

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/compressor.h"
#include "common/compressor_params.h"

namespace sketchfuse {

class CompressorRegistry {
 public:
  using Factory = std::function<absl::StatusOr<std::unique_ptr<Compressor>>(ParamReader&)>;

  // A registry holding the built-in compressors.
  static const CompressorRegistry& Default();

  // Adds a compressor. ALREADY_EXISTS if the name is taken, INVALID_ARGUMENT
  // for an empty name.
  absl::Status Register(std::string name, std::string description, Factory factory);

  // Creates a compressor from a spec. INVALID_ARGUMENT for an unknown name
  // (listing the known ones) or bad parameters.
  absl::StatusOr<std::unique_ptr<Compressor>> Create(const CompressorSpec& spec) const;
  absl::StatusOr<std::unique_ptr<Compressor>> Create(absl::string_view spec_text) const;

  // Registered names, sorted.
  std::vector<std::string> Names() const;
  // One line per compressor: name and description.
  std::string Describe() const;

 private:
  struct Entry {
    std::string description;
    Factory factory;
  };
  std::map<std::string, Entry> entries_;
};

}  // namespace sketchfuse

#endif  // SKETCHFUSE_COMMON_COMPRESSOR_REGISTRY_H_
