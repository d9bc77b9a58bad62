// Which GPUs this process can use. Works in every build: a CPU-only build
// (no CUDA toolkit) reports no devices and says why.
#ifndef SKETCHFUSE_CUDA_DEVICE_H_
#define SKETCHFUSE_CUDA_DEVICE_H_

#include <string>

namespace sketchfuse {

struct GpuAvailability {
  int device_count = 0;
  // Why there is no GPU (empty when device_count > 0), e.g. "built without the
  // CUDA toolkit" or "cudaGetDeviceCount failed: cudaErrorNoDevice".
  std::string reason;
  // "NVIDIA H100 80GB HBM3 (sm_90)" for device 0, when there is one.
  std::string first_device;
};

// Probes the CUDA runtime once per call.
GpuAvailability ProbeGpus();

}  // namespace sketchfuse

#endif  // SKETCHFUSE_CUDA_DEVICE_H_
