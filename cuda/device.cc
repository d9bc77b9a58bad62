#include "cuda/device.h"

#include "absl/strings/str_cat.h"

#if SKETCHFUSE_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace sketchfuse {

GpuAvailability ProbeGpus() {
  GpuAvailability result;
#if SKETCHFUSE_WITH_CUDA
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) {
    (void)cudaGetLastError();
    result.reason = absl::StrCat("no usable NVIDIA driver or device (cudaGetDeviceCount: ",
                                 cudaGetErrorName(error), ")");
    return result;
  }
  result.device_count = count;
  if (count == 0) {
    result.reason = "the CUDA runtime sees no device";
    return result;
  }
  cudaDeviceProp prop;
  if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess) {
    result.first_device = absl::StrCat(prop.name, " (sm_", prop.major, prop.minor, ")");
  }
#else
  result.reason = "built without the CUDA toolkit";
#endif
  return result;
}

}  // namespace sketchfuse
