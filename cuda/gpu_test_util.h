// SKIP_WITHOUT_GPU(): the first statement of every GPU test body. Skips the
// test, with the reason, when no CUDA device is visible, so that GPU tests run
// on the GPU machine and skip (still counted) everywhere else.
#ifndef SKETCHFUSE_CUDA_GPU_TEST_UTIL_H_
#define SKETCHFUSE_CUDA_GPU_TEST_UTIL_H_

#include "cuda/device.h"
#include "gtest/gtest.h"

#define SKIP_WITHOUT_GPU()                                                  \
  do {                                                                      \
    const ::sketchfuse::GpuAvailability sf_gpus_ = ::sketchfuse::ProbeGpus(); \
    if (sf_gpus_.device_count == 0) {                                       \
      GTEST_SKIP() << "GPU test skipped: " << sf_gpus_.reason;              \
    }                                                                       \
  } while (false)

#endif  // SKETCHFUSE_CUDA_GPU_TEST_UTIL_H_
