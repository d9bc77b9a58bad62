// The built-in compressors and their registration. Each factory reads and
// validates its parameters from a ParamReader (see compressor_registry.h for
// the spec syntax and each compressor's file for its parameters).
#ifndef SKETCHFUSE_COMMON_COMPRESSORS_BUILTIN_H_
#define SKETCHFUSE_COMMON_COMPRESSORS_BUILTIN_H_

#include <memory>

#include "absl/status/statusor.h"
#include "common/compressor.h"
#include "common/compressor_registry.h"

namespace sketchfuse {

absl::StatusOr<std::unique_ptr<Compressor>> MakeDenseCompressor(ParamReader& params);
absl::StatusOr<std::unique_ptr<Compressor>> MakeTopKCompressor(ParamReader& params);
absl::StatusOr<std::unique_ptr<Compressor>> MakeRandomKCompressor(ParamReader& params);
absl::StatusOr<std::unique_ptr<Compressor>> MakeThresholdCompressor(ParamReader& params);
absl::StatusOr<std::unique_ptr<Compressor>> MakeImportanceCompressor(ParamReader& params);
absl::StatusOr<std::unique_ptr<Compressor>> MakeCountSketchCompressor(ParamReader& params);

// Registers all of the above under their names.
void RegisterBuiltinCompressors(CompressorRegistry* registry);

}  // namespace sketchfuse

#endif  // SKETCHFUSE_COMMON_COMPRESSORS_BUILTIN_H_
