// The CUDA driver API, loaded at run time: dlopen("libcuda.so.1") and a table of cu* entry
// points. Nothing links against libcuda, so every binary starts (and runs its CPU paths) on a
// machine without an NVIDIA driver; asking for the GPU there gives the clear error
// "no CUDA driver/GPU found".
//
// The handful of driver types used are declared here (opaque handles, ints), so this compiles
// without the toolkit's headers; tests/cuda/CudaApi_test.cc checks the values against cuda.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace memra::runtime::cuda {

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = struct CUctx_st*;
using CUmodule = struct CUmod_st*;
using CUfunction = struct CUfunc_st*;
using CUstream = struct CUstream_st*;
using CUevent = struct CUevent_st*;
using CUgraph = struct CUgraph_st*;
using CUgraphExec = struct CUgraphExec_st*;

inline constexpr int kCuDevAttrMultiprocessorCount = 16;
inline constexpr int kCuDevAttrL2CacheSize = 38;
inline constexpr int kCuDevAttrComputeCapabilityMajor = 75;
inline constexpr int kCuDevAttrComputeCapabilityMinor = 76;
inline constexpr int kCuDevAttrMaxSharedMemoryPerBlockOptin = 97;
inline constexpr int kCuDevAttrMaxThreadsPerBlock = 1;
inline constexpr int kCuDevAttrMaxSharedMemoryPerBlock = 8;
inline constexpr int kCuDevAttrWarpSize = 10;
inline constexpr int kCuDevAttrMaxSharedMemoryPerMultiprocessor = 81;
inline constexpr int kCuDevAttrClusterLaunch = 120;
inline constexpr int kCuDevAttrClockRate = 13;             // kHz
inline constexpr int kCuDevAttrMemoryClockRate = 36;       // kHz
inline constexpr int kCuDevAttrGlobalMemoryBusWidth = 37;  // bits
inline constexpr int kCuFuncAttrMaxDynamicSharedSizeBytes = 8;
inline constexpr unsigned kCuStreamNonBlocking = 1;
inline constexpr unsigned kCuEventDefault = 0;
// CUstreamCaptureMode: only this thread's unsafe calls are refused while it captures.
inline constexpr int kCuStreamCaptureModeThreadLocal = 1;

// cuLaunchKernelEx's configuration, laid out as cuda.h's CUlaunchAttribute / CUlaunchConfig
// (CudaApi_test checks sizes and offsets against the header).
struct CuLaunchAttribute {
  int id = 0;  // CUlaunchAttributeID
  char pad[4] = {};
  union {
    char bytes[64];
    int programmatic_stream_serialization_allowed;
    struct {
      unsigned x, y, z;
    } cluster_dim;
  } value = {};
};
struct CuLaunchConfig {
  unsigned grid_x = 1, grid_y = 1, grid_z = 1;
  unsigned block_x = 1, block_y = 1, block_z = 1;
  unsigned smem_bytes = 0;
  CUstream stream = nullptr;
  CuLaunchAttribute* attrs = nullptr;
  unsigned num_attrs = 0;
};
// The kernel may start before the previous kernel in the stream completes; it orders itself with
// griddepcontrol.wait (kernels/cuda/Common.cuh memra_grid_dependency).
inline constexpr int kCuLaunchAttributeProgrammaticStreamSerialization = 6;
// Thread-block clusters of value.cluster_dim blocks.
inline constexpr int kCuLaunchAttributeClusterDimension = 4;

#define MEMRA_CUDA_DRIVER_FUNCTIONS(X)                                                                            \
  X(cuInit, "cuInit", CUresult, (unsigned))                                                                       \
  X(cuDriverGetVersion, "cuDriverGetVersion", CUresult, (int*))                                                   \
  X(cuGetErrorName, "cuGetErrorName", CUresult, (CUresult, const char**))                                         \
  X(cuGetErrorString, "cuGetErrorString", CUresult, (CUresult, const char**))                                     \
  X(cuDeviceGetCount, "cuDeviceGetCount", CUresult, (int*))                                                       \
  X(cuDeviceGet, "cuDeviceGet", CUresult, (CUdevice*, int))                                                       \
  X(cuDeviceGetName, "cuDeviceGetName", CUresult, (char*, int, CUdevice))                                         \
  X(cuDeviceGetAttribute, "cuDeviceGetAttribute", CUresult, (int*, int, CUdevice))                                \
  X(cuDeviceTotalMem, "cuDeviceTotalMem_v2", CUresult, (size_t*, CUdevice))                                       \
  X(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", CUresult, (CUcontext*, CUdevice))                       \
  X(cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", CUresult, (CUdevice))                              \
  X(cuCtxSetCurrent, "cuCtxSetCurrent", CUresult, (CUcontext))                                                    \
  X(cuCtxSynchronize, "cuCtxSynchronize", CUresult, ())                                                           \
  X(cuMemGetInfo, "cuMemGetInfo_v2", CUresult, (size_t*, size_t*))                                                \
  X(cuMemAlloc, "cuMemAlloc_v2", CUresult, (CUdeviceptr*, size_t))                                                \
  X(cuMemFree, "cuMemFree_v2", CUresult, (CUdeviceptr))                                                           \
  X(cuMemAllocHost, "cuMemAllocHost_v2", CUresult, (void**, size_t))                                              \
  X(cuMemFreeHost, "cuMemFreeHost", CUresult, (void*))                                                            \
  X(cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2", CUresult, (CUdeviceptr, const void*, size_t, CUstream))            \
  X(cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2", CUresult, (void*, CUdeviceptr, size_t, CUstream))                  \
  X(cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2", CUresult, (CUdeviceptr, CUdeviceptr, size_t, CUstream))            \
  X(cuMemsetD8Async, "cuMemsetD8Async", CUresult, (CUdeviceptr, unsigned char, size_t, CUstream))                 \
  X(cuMemsetD32Async, "cuMemsetD32Async", CUresult, (CUdeviceptr, unsigned, size_t, CUstream))                    \
  X(cuStreamCreate, "cuStreamCreate", CUresult, (CUstream*, unsigned))                                            \
  X(cuStreamDestroy, "cuStreamDestroy_v2", CUresult, (CUstream))                                                  \
  X(cuStreamSynchronize, "cuStreamSynchronize", CUresult, (CUstream))                                             \
  X(cuEventCreate, "cuEventCreate", CUresult, (CUevent*, unsigned))                                               \
  X(cuEventDestroy, "cuEventDestroy_v2", CUresult, (CUevent))                                                     \
  X(cuEventRecord, "cuEventRecord", CUresult, (CUevent, CUstream))                                                \
  X(cuEventSynchronize, "cuEventSynchronize", CUresult, (CUevent))                                                \
  X(cuEventElapsedTime, "cuEventElapsedTime", CUresult, (float*, CUevent, CUevent))                               \
  X(cuModuleLoadData, "cuModuleLoadData", CUresult, (CUmodule*, const void*))                                     \
  X(cuModuleUnload, "cuModuleUnload", CUresult, (CUmodule))                                                       \
  X(cuModuleGetFunction, "cuModuleGetFunction", CUresult, (CUfunction*, CUmodule, const char*))                   \
  X(cuFuncSetAttribute, "cuFuncSetAttribute", CUresult, (CUfunction, int, int))                                   \
  X(cuLaunchKernel, "cuLaunchKernel", CUresult,                                                                   \
    (CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream, void**, void**)) \
  X(cuLaunchKernelEx, "cuLaunchKernelEx", CUresult, (const CuLaunchConfig*, CUfunction, void**, void**))          \
  X(cuStreamBeginCapture, "cuStreamBeginCapture_v2", CUresult, (CUstream, int))                                   \
  X(cuStreamEndCapture, "cuStreamEndCapture", CUresult, (CUstream, CUgraph*))                                     \
  X(cuGraphInstantiate, "cuGraphInstantiateWithFlags", CUresult, (CUgraphExec*, CUgraph, unsigned long long))     \
  X(cuGraphLaunch, "cuGraphLaunch", CUresult, (CUgraphExec, CUstream))                                            \
  X(cuGraphExecDestroy, "cuGraphExecDestroy", CUresult, (CUgraphExec))                                            \
  X(cuGraphDestroy, "cuGraphDestroy", CUresult, (CUgraph))

struct CudaDriver {
#define MEMRA_DECLARE_CU(field, sym, ret, args) ret(*field) args = nullptr;
  MEMRA_CUDA_DRIVER_FUNCTIONS(MEMRA_DECLARE_CU)
#undef MEMRA_DECLARE_CU
  std::string library;
  int version = 0;  // cuDriverGetVersion, e.g. 13000

  // Loads libcuda.so.1 and runs cuInit once per process. Error (FailedPrecondition):
  // "no CUDA driver/GPU found: ..." when the library is missing or cuInit fails / finds no device.
  static absl::StatusOr<const CudaDriver*> Get();

  // "CUDA_ERROR_OUT_OF_MEMORY (out of memory)"
  std::string ErrorText(CUresult r) const;
};

// Launches `fn` over a 1-D grid. `programmatic`: with the programmatic stream serialization
// attribute (sm_90+; the kernel must order itself with memra_grid_dependency, as every memra
// kernel does), so it can become resident while the previous kernel of the stream still runs.
// `cluster` > 1: in thread-block clusters of that many blocks (the grid a multiple of it).
CUresult LaunchKernel(const CudaDriver& d, CUfunction fn, unsigned grid, unsigned block, unsigned smem_bytes,
                      CUstream stream, void** args, bool programmatic, unsigned cluster = 1);

// A Status for a failed driver call: "<what>: CUDA_ERROR_... (description)"; Ok for success.
absl::Status CuCheck(CUresult r, absl::string_view what);

}  // namespace memra::runtime::cuda
