// Stands in for every GPU test when the build has no CUDA toolkit
// (bazel/cuda.bzl's gpu_test): one test that skips and says why.
#include "gtest/gtest.h"

TEST(GpuTest, SkippedWithoutToolkit) {
  GTEST_SKIP() << "GPU test skipped: built without the CUDA toolkit (no nvcc found by "
                  "third_party/cuda/cuda_configure.bzl); CPU-only build";
}
