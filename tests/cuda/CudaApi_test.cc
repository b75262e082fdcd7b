// The CUDA API values declared by hand in runtime/cuda (so nothing needs the toolkit's headers
// or links the driver) agree with the toolkit's headers when they are present; without a driver,
// asking for the GPU is a clear error and never a crash.
#include <cstddef>
#include <string>

#include "gtest/gtest.h"
#include "runtime/cuda/CudaDevice.h"
#include "runtime/cuda/CudaDriver.h"

#ifdef MEMRA_CUDA_H_PATH  // the toolkit's cuda.h, found at configure time
#include MEMRA_CUDA_H_PATH
#define MEMRA_TEST_HAVE_CUDA_H 1
#endif

namespace memra::runtime::cuda {
namespace {

TEST(CudaApiTest, DeclaredValuesMatchTheHeaders) {
#ifdef MEMRA_TEST_HAVE_CUDA_H
  static_assert(kCuDevAttrMultiprocessorCount == CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
  static_assert(kCuDevAttrL2CacheSize == CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE);
  static_assert(kCuDevAttrComputeCapabilityMajor == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
  static_assert(kCuDevAttrComputeCapabilityMinor == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
  static_assert(kCuDevAttrMaxSharedMemoryPerBlockOptin == CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
  static_assert(kCuDevAttrMaxThreadsPerBlock == CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
  static_assert(kCuDevAttrMaxSharedMemoryPerBlock == CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK);
  static_assert(kCuDevAttrWarpSize == CU_DEVICE_ATTRIBUTE_WARP_SIZE);
  static_assert(kCuDevAttrMaxSharedMemoryPerMultiprocessor == CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR);
  static_assert(kCuDevAttrClusterLaunch == CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH);
  static_assert(kCuFuncAttrMaxDynamicSharedSizeBytes == CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES);
  static_assert(kCuStreamNonBlocking == CU_STREAM_NON_BLOCKING);
  static_assert(sizeof(CUdeviceptr) == sizeof(::CUdeviceptr));
  static_assert(kCuStreamCaptureModeThreadLocal == CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
  static_assert(sizeof(CUstreamCaptureMode) == sizeof(int));  // passed as int by CudaDriver
  static_assert(sizeof(unsigned long long) == sizeof(cuuint64_t));
  static_assert(kCuLaunchAttributeProgrammaticStreamSerialization ==
                CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION);
  static_assert(kCuLaunchAttributeClusterDimension == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION);
  static_assert(sizeof(CuLaunchAttribute) == sizeof(CUlaunchAttribute));
  static_assert(offsetof(CuLaunchAttribute, value.cluster_dim.z) == offsetof(CUlaunchAttribute, value.clusterDim.z));
  static_assert(offsetof(CuLaunchAttribute, value) == offsetof(CUlaunchAttribute, value));
  static_assert(sizeof(CuLaunchConfig) == sizeof(CUlaunchConfig));
  static_assert(offsetof(CuLaunchConfig, smem_bytes) == offsetof(CUlaunchConfig, sharedMemBytes));
  static_assert(offsetof(CuLaunchConfig, stream) == offsetof(CUlaunchConfig, hStream));
  static_assert(offsetof(CuLaunchConfig, attrs) == offsetof(CUlaunchConfig, attrs));
  static_assert(offsetof(CuLaunchConfig, num_attrs) == offsetof(CUlaunchConfig, numAttrs));
#else
  GTEST_SKIP() << "no CUDA toolkit found at configure time";
#endif
}

TEST(CudaApiTest, NoDriverIsAClearError) {
  auto d = CudaDriver::Get();
  if (d.ok()) GTEST_SKIP() << "a CUDA driver is present (" << (*d)->library << ")";
  EXPECT_EQ(d.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(std::string(d.status().message()).find("no CUDA driver/GPU found"), std::string::npos) << d.status();
  auto dev = CudaDevice::Open(0);
  ASSERT_FALSE(dev.ok());
  EXPECT_NE(std::string(dev.status().message()).find("no CUDA driver/GPU found"), std::string::npos);
}

}  // namespace
}  // namespace memra::runtime::cuda
