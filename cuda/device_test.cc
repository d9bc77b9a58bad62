// ProbeGpus works in every build: a device count, or a reason there is none.
#include "cuda/device.h"

#include <iostream>

#include "gtest/gtest.h"

namespace sketchfuse {
namespace {

TEST(DeviceTest, ReportsDevicesOrAReason) {
  const GpuAvailability gpus = ProbeGpus();
  EXPECT_GE(gpus.device_count, 0);
  if (gpus.device_count == 0) {
    EXPECT_FALSE(gpus.reason.empty());
    std::cout << "no GPU: " << gpus.reason << "\n";
  } else {
    EXPECT_TRUE(gpus.reason.empty());
    EXPECT_FALSE(gpus.first_device.empty());
    std::cout << gpus.device_count << " GPU(s), first: " << gpus.first_device << "\n";
  }
}

}  // namespace
}  // namespace sketchfuse
