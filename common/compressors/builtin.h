// The built-in compressors' factories. Each reads and validates its
// parameters from a ParamReader (compressor_params.h; each compressor's file
// documents its parameters); CompressorRegistry::Default() registers them.
#ifndef SKETCHFUSE_COMMON_COMPRESSORS_BUILTIN_H_
#define SKETCHFUSE_COMMON_COMPRESSORS_BUILTIN_H_

#include <memory>

#include "absl/status/statusor.h"
#include "common/compressor.h"
#include "common/compressor_params.h"

namespace sketchfuse {

absl::StatusOr<std::unique_ptr<Compressor>> MakeDenseCompressor(ParamReader& params);
absl::StatusOr<std::unique_ptr<Compressor>> MakeTopKCompressor(ParamReader& params);
absl::StatusOr<std::unique_ptr<Compressor>> MakeRandomKCompressor(ParamReader& params);
absl::StatusOr<std::unique_ptr<Compressor>> MakeThresholdCompressor(ParamReader& params);
absl::StatusOr<std::unique_ptr<Compressor>> MakeImportanceCompressor(ParamReader& params);
absl::StatusOr<std::unique_ptr<Compressor>> MakeCountSketchCompressor(ParamReader& params);
absl::StatusOr<std::unique_ptr<Compressor>> MakePowerSgdCompressor(ParamReader& params);

}  // namespace sketchfuse

#endif  // SKETCHFUSE_COMMON_COMPRESSORS_BUILTIN_H_
