#include "runtime/cuda/CudaDevice.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "ir/StatusMacros.h"

namespace memra::runtime::cuda {

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    this->~DeviceBuffer();
    ptr_ = o.ptr_;
    bytes_ = o.bytes_;
    o.ptr_ = 0;
    o.bytes_ = 0;
  }
  return *this;
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_ != 0) {
    auto d = CudaDriver::Get();
    if (d.ok()) (*d)->cuMemFree(ptr_);
    ptr_ = 0;
  }
}

absl::StatusOr<std::unique_ptr<CudaDevice>> CudaDevice::Open(int ordinal) {
  MEMRA_ASSIGN_OR_RETURN(const CudaDriver* d, CudaDriver::Get());
  std::unique_ptr<CudaDevice> dev(new CudaDevice());
  dev->d_ = d;
  int count = 0;
  MEMRA_RETURN_IF_ERROR(CuCheck(d->cuDeviceGetCount(&count), "cuDeviceGetCount"));
  if (ordinal < 0 || ordinal >= count)
    return absl::InvalidArgumentError(absl::StrCat("CUDA device ", ordinal, " requested, ", count, " present"));
  dev->ordinal_ = ordinal;
  MEMRA_RETURN_IF_ERROR(CuCheck(d->cuDeviceGet(&dev->dev_, ordinal), "cuDeviceGet"));
  char name[256] = {0};
  d->cuDeviceGetName(name, sizeof(name) - 1, dev->dev_);
  dev->name_ = name;
  d->cuDeviceGetAttribute(&dev->cc_major_, kCuDevAttrComputeCapabilityMajor, dev->dev_);
  d->cuDeviceGetAttribute(&dev->cc_minor_, kCuDevAttrComputeCapabilityMinor, dev->dev_);
  d->cuDeviceGetAttribute(&dev->sm_count_, kCuDevAttrMultiprocessorCount, dev->dev_);
  d->cuDeviceTotalMem(&dev->total_mem_, dev->dev_);
  MEMRA_RETURN_IF_ERROR(CuCheck(d->cuDevicePrimaryCtxRetain(&dev->ctx_, dev->dev_), "cuDevicePrimaryCtxRetain"));
  MEMRA_RETURN_IF_ERROR(dev->MakeCurrent());
  MEMRA_RETURN_IF_ERROR(CuCheck(d->cuStreamCreate(&dev->stream_, kCuStreamNonBlocking), "cuStreamCreate"));
  return dev;
}

CudaDevice::~CudaDevice() {
  if (d_ == nullptr) return;
  if (stream_ != nullptr) {
    d_->cuStreamSynchronize(stream_);
    d_->cuStreamDestroy(stream_);
  }
  // The primary context stays retained: buffers owned elsewhere may still be freed after this.
}

std::string CudaDevice::Describe() const {
  return absl::StrFormat("%s (sm_%d, %d SMs, %.1f GiB, driver %d.%d)", name_, arch(), sm_count_,
                         total_mem_ / 1073741824.0, d_->version / 1000, (d_->version % 1000) / 10);
}

kernels::cuda::Target CudaDevice::target() const {
  auto attr = [&](int a) {
    int v = 0;
    d_->cuDeviceGetAttribute(&v, a, dev_);
    return v;
  };
  kernels::cuda::Target t;
  t.name = name_;
  t.arch = arch();
  t.sm_count = sm_count_;
  t.max_threads_per_block = attr(kCuDevAttrMaxThreadsPerBlock);
  t.warp_size = attr(kCuDevAttrWarpSize);
  t.smem_per_block = attr(kCuDevAttrMaxSharedMemoryPerBlock);
  t.smem_per_block_optin = attr(kCuDevAttrMaxSharedMemoryPerBlockOptin);
  t.smem_per_sm = attr(kCuDevAttrMaxSharedMemoryPerMultiprocessor);
  t.l2_bytes = attr(kCuDevAttrL2CacheSize);
  t.max_cluster_blocks = attr(kCuDevAttrClusterLaunch) != 0 ? 8 : 1;  // 8: the portable cluster size
  t.memory_bytes = static_cast<int64_t>(total_mem_);
  if (!kernels::cuda::MeasuredCeilings(name_, &t.mem_gbps, &t.bf16_tflops)) {
    // The data sheet's: double data rate x bus width; SM clock x SMs x the arch's rate per clock.
    t.mem_gbps = static_cast<int64_t>(2.0 * attr(kCuDevAttrMemoryClockRate) * 1e3 *
                                      (attr(kCuDevAttrGlobalMemoryBusWidth) / 8) / 1e9);
    t.bf16_tflops = static_cast<int64_t>(static_cast<double>(attr(kCuDevAttrClockRate)) * 1e3 * sm_count_ *
                                         kernels::cuda::Bf16FlopsPerClockPerSm(t.arch) / 1e12);
  }
  return t;
}

absl::Status CudaDevice::MakeCurrent() const { return CuCheck(d_->cuCtxSetCurrent(ctx_), "cuCtxSetCurrent"); }

absl::StatusOr<DeviceBuffer> CudaDevice::Alloc(size_t bytes, absl::string_view what) const {
  CUdeviceptr p = 0;
  const size_t n = bytes == 0 ? 256 : bytes;
  if (fail_alloc_at_ > 0 && ++allocs_ == fail_alloc_at_)
    return absl::ResourceExhaustedError(
        absl::StrFormat("cuMemAlloc of %.1f MiB for %s: an injected fault (device allocation %d)", n / 1048576.0, what,
                        fail_alloc_at_));
  const CUresult r = d_->cuMemAlloc(&p, n);
  if (r != 0) {
    size_t free_b = 0, total_b = 0;
    d_->cuMemGetInfo(&free_b, &total_b);
    return absl::ResourceExhaustedError(absl::StrFormat("cuMemAlloc of %.1f MiB for %s: %s (%.1f MiB free)",
                                                        n / 1048576.0, what, d_->ErrorText(r), free_b / 1048576.0));
  }
  return DeviceBuffer(p, n);
}

absl::Status CudaDevice::Upload(CUdeviceptr dst, const void* src, size_t bytes) const {
  if (bytes == 0) return absl::OkStatus();
  MEMRA_RETURN_IF_ERROR(CuCheck(d_->cuMemcpyHtoDAsync(dst, src, bytes, stream_), "cuMemcpyHtoD"));
  return Synchronize("upload");
}

absl::Status CudaDevice::Download(void* dst, CUdeviceptr src, size_t bytes) const {
  if (bytes == 0) return absl::OkStatus();
  MEMRA_RETURN_IF_ERROR(CuCheck(d_->cuMemcpyDtoHAsync(dst, src, bytes, stream_), "cuMemcpyDtoH"));
  return Synchronize("download");
}

absl::Status CudaDevice::Zero(CUdeviceptr dst, size_t bytes) const {
  if (bytes == 0) return absl::OkStatus();
  return CuCheck(d_->cuMemsetD8Async(dst, 0, bytes, stream_), "cuMemsetD8");
}

absl::Status CudaDevice::CopyDevice(CUdeviceptr dst, CUdeviceptr src, size_t bytes) const {
  if (bytes == 0) return absl::OkStatus();
  return CuCheck(d_->cuMemcpyDtoDAsync(dst, src, bytes, stream_), "cuMemcpyDtoD");
}

absl::Status CudaDevice::Synchronize(absl::string_view what) const {
  return CuCheck(d_->cuStreamSynchronize(stream_), absl::StrCat("cuStreamSynchronize after ", what));
}

absl::StatusOr<std::unique_ptr<LoadedModule>> LoadedModule::Load(const CudaDevice& dev,
                                                                 const std::vector<uint8_t>& cubin,
                                                                 absl::string_view what) {
  std::unique_ptr<LoadedModule> m(new LoadedModule());
  m->d_ = &dev.driver();
  m->what_ = std::string(what);
  MEMRA_RETURN_IF_ERROR(
      CuCheck(m->d_->cuModuleLoadData(&m->mod_, cubin.data()), absl::StrCat("cuModuleLoadData(", what, ")")));
  return m;
}

LoadedModule::~LoadedModule() {
  if (mod_ != nullptr) d_->cuModuleUnload(mod_);
}

absl::StatusOr<CUfunction> LoadedModule::Function(absl::string_view entry, uint32_t dynamic_smem) const {
  CUfunction f = nullptr;
  MEMRA_RETURN_IF_ERROR(CuCheck(d_->cuModuleGetFunction(&f, mod_, std::string(entry).c_str()),
                                absl::StrCat("cuModuleGetFunction(", what_, "::", entry, ")")));
  // Past the default 48 KiB a kernel must opt in to its dynamic shared memory.
  if (dynamic_smem > (48u << 10))
    MEMRA_RETURN_IF_ERROR(CuCheck(
        d_->cuFuncSetAttribute(f, kCuFuncAttrMaxDynamicSharedSizeBytes, static_cast<int>(dynamic_smem)),
        absl::StrCat("cuFuncSetAttribute(", what_, "::", entry, ", ", dynamic_smem, " bytes of shared memory)")));
  return f;
}

}  // namespace memra::runtime::cuda
