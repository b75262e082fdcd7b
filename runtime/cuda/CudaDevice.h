// One CUDA device through the driver API: its primary context, one stream, device memory
// buffers, and loaded cubin modules. Errors are absl::Status naming the call.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "kernels/cuda/Target.h"
#include "runtime/cuda/CudaDriver.h"

namespace memra::runtime::cuda {

// Owns device memory (freed on destruction).
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(CUdeviceptr ptr, size_t bytes) : ptr_(ptr), bytes_(bytes) {}
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) {
    o.ptr_ = 0;
    o.bytes_ = 0;
  }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  ~DeviceBuffer();
  CUdeviceptr ptr() const { return ptr_; }
  size_t bytes() const { return bytes_; }

 private:
  CUdeviceptr ptr_ = 0;
  size_t bytes_ = 0;
};

class CudaDevice {
 public:
  // Error: "no CUDA driver/GPU found ..." without a driver; a bad ordinal names the count.
  static absl::StatusOr<std::unique_ptr<CudaDevice>> Open(int ordinal = 0);
  ~CudaDevice();

  const CudaDriver& driver() const { return *d_; }
  CUstream stream() const { return stream_; }
  int ordinal() const { return ordinal_; }
  int arch() const { return cc_major_ * 10 + cc_minor_; }  // 90 on Hopper
  int sm_count() const { return sm_count_; }
  size_t total_memory() const { return total_mem_; }
  const std::string& name() const { return name_; }
  // "NVIDIA H200 (sm_90, 132 SMs, 139.8 GiB, driver 13.0)"
  std::string Describe() const;
  // The target description read from the device's attributes.
  kernels::cuda::Target target() const;

  absl::Status MakeCurrent() const;
  // `what` names the allocation in errors (with the free memory).
  absl::StatusOr<DeviceBuffer> Alloc(size_t bytes, absl::string_view what) const;
  absl::Status Upload(CUdeviceptr dst, const void* src, size_t bytes) const;      // sync
  absl::Status Download(void* dst, CUdeviceptr src, size_t bytes) const;          // sync
  absl::Status Zero(CUdeviceptr dst, size_t bytes) const;                         // async
  absl::Status CopyDevice(CUdeviceptr dst, CUdeviceptr src, size_t bytes) const;  // async, on the stream
  absl::Status Synchronize(absl::string_view what) const;

  // Fault injection (CudaExecutorOptions::fail_device_alloc): the nth Alloc from now on (1-based)
  // fails as the driver's refusal would, naming what it was for; 0: none.
  void FailAllocAt(int nth) {
    fail_alloc_at_ = nth;
    allocs_ = 0;
  }

 private:
  CudaDevice() = default;
  const CudaDriver* d_ = nullptr;
  int ordinal_ = 0;
  CUdevice dev_ = 0;
  CUcontext ctx_ = nullptr;
  CUstream stream_ = nullptr;
  int cc_major_ = 0, cc_minor_ = 0, sm_count_ = 0;
  size_t total_mem_ = 0;
  std::string name_;
  int fail_alloc_at_ = 0;
  mutable std::atomic<int> allocs_{0};
};

// A loaded cubin (unloaded on destruction).
class LoadedModule {
 public:
  static absl::StatusOr<std::unique_ptr<LoadedModule>> Load(const CudaDevice& dev, const std::vector<uint8_t>& cubin,
                                                            absl::string_view what);
  ~LoadedModule();
  // `dynamic_smem`: the launch's dynamic shared memory, opted in when it exceeds 48 KiB.
  absl::StatusOr<CUfunction> Function(absl::string_view entry, uint32_t dynamic_smem = 0) const;

 private:
  const CudaDriver* d_ = nullptr;
  CUmodule mod_ = nullptr;
  std::string what_;
};

}  // namespace memra::runtime::cuda
