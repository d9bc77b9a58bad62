// Which BLAS LibTorch's CPU matrix products run on, and a warning when it is
// the slow one.
//
// Debian links LibTorch against libblas.so.3, an alternative that resolves to
// the reference (netlib) BLAS unless an optimized BLAS is installed. The
// reference BLAS makes an MLP's backward pass 9 to 14 times slower and its
// training step 6 to 9 times (the CNNs' convolutions do not go through it:
// 1.1 times; docs/BENCHMARKS.md, "The CPU compression core and the BLAS"), so scripts/setup.sh
// installs OpenBLAS (libopenblas0-openmp), which takes the alternative over.
// A machine whose alternative was pinned to the reference still runs, only
// slower; the worker says so at start-up.
#ifndef SKETCHFUSE_WORKER_TRAINING_BLAS_CHECK_H_
#define SKETCHFUSE_WORKER_TRAINING_BLAS_CHECK_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"

namespace sketchfuse {

struct BlasLibrary {
  // The file that provides sgemm_ in this process, links resolved.
  std::string path;
  // Whether the process has OpenBLAS loaded (it exports openblas_get_config).
  bool openblas = false;
};

// The BLAS that serves sgemm_ in this process (LibTorch's CPU products).
// NOT_FOUND when no loaded library exports sgemm_ (a binary without LibTorch).
absl::StatusOr<BlasLibrary> LoadedBlas();

// Whether `blas` is the reference BLAS: not OpenBLAS, from a directory named
// "blas" (Debian's libblas3 installs to /usr/lib/<triplet>/blas/).
bool IsReferenceBlas(const BlasLibrary& blas);

// A warning naming the library and the fix when `blas` is the reference BLAS;
// nullopt otherwise.
std::optional<std::string> ReferenceBlasWarning(const BlasLibrary& blas);

}  // namespace sketchfuse

#endif  // SKETCHFUSE_WORKER_TRAINING_BLAS_CHECK_H_
