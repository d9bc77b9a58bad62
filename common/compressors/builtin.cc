#include "common/compressors/builtin.h"

namespace sketchfuse {

void RegisterBuiltinCompressors(CompressorRegistry* registry) {
  // Names are distinct, so registration cannot fail.
  (void)registry->Register("dense", "no compression (linear)", MakeDenseCompressor);
  (void)registry->Register("topk", "exact top-k by magnitude; density|k", MakeTopKCompressor);
  (void)registry->Register("randomk",
                           "k coordinates drawn from (seed, step), equal on every worker "
                           "(linear); density|k, seed",
                           MakeRandomKCompressor);
  (void)registry->Register("threshold",
                           "DGC sampled threshold; density|k, sample (fraction), seed",
                           MakeThresholdCompressor);
  (void)registry->Register("importance",
                           "top-k of |g|/(|w|+epsilon), importance-weighted pruning; "
                           "density|k, epsilon",
                           MakeImportanceCompressor);
  (void)registry->Register("count_sketch",
                           "Count-Sketch, decode = heavy hitters (linear); density|k, rows, "
                           "width|cols, seed",
                           MakeCountSketchCompressor);
}

}  // namespace sketchfuse
