#include "runtime/cuda/CudaDriver.h"

#include <dlfcn.h>

#include <mutex>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace memra::runtime::cuda {

absl::StatusOr<const CudaDriver*> CudaDriver::Get() {
  static std::once_flag once;
  static CudaDriver* driver = nullptr;
  static absl::Status* failure = nullptr;
  std::call_once(once, [] {
    const char* names[] = {"libcuda.so.1", "/usr/lib/x86_64-linux-gnu/libcuda.so.1",
                           "/usr/local/nvidia/lib64/libcuda.so.1", "/usr/lib64/libcuda.so.1"};
    void* h = nullptr;
    std::string from;
    for (const char* n : names)
      if ((h = dlopen(n, RTLD_NOW | RTLD_LOCAL)) != nullptr) {
        from = n;
        break;
      }
    if (h == nullptr) {
      failure = new absl::Status(absl::FailedPreconditionError(
          "no CUDA driver/GPU found: libcuda.so.1 could not be loaded (no NVIDIA driver on this "
          "machine); use the CPU backend"));
      return;
    }
    auto* d = new CudaDriver();
    d->library = from;
    std::vector<std::string> missing;
#define MEMRA_LOAD_CU(field, sym, ret, args)               \
  d->field = reinterpret_cast<ret(*) args>(dlsym(h, sym)); \
  if (d->field == nullptr) missing.push_back(sym);
    MEMRA_CUDA_DRIVER_FUNCTIONS(MEMRA_LOAD_CU)
#undef MEMRA_LOAD_CU
    if (!missing.empty()) {
      failure = new absl::Status(absl::FailedPreconditionError(absl::StrCat(
          "no CUDA driver/GPU found: ", from, " lacks ", absl::StrJoin(missing, ", "), " (driver too old)")));
      delete d;
      return;
    }
    const CUresult r = d->cuInit(0);
    if (r != 0) {
      failure = new absl::Status(
          absl::FailedPreconditionError(absl::StrCat("no CUDA driver/GPU found: cuInit failed: ", d->ErrorText(r))));
      delete d;
      return;
    }
    int count = 0;
    d->cuDeviceGetCount(&count);
    if (count <= 0) {
      failure =
          new absl::Status(absl::FailedPreconditionError("no CUDA driver/GPU found: the driver reports no device"));
      delete d;
      return;
    }
    d->cuDriverGetVersion(&d->version);
    driver = d;
  });
  if (driver == nullptr) return *failure;
  return driver;
}

std::string CudaDriver::ErrorText(CUresult r) const {
  const char* name = nullptr;
  const char* desc = nullptr;
  if (cuGetErrorName != nullptr) cuGetErrorName(r, &name);
  if (cuGetErrorString != nullptr) cuGetErrorString(r, &desc);
  return absl::StrCat(name ? name : absl::StrCat("CUresult ", r), " (", desc ? desc : "unknown", ")");
}

CUresult LaunchKernel(const CudaDriver& d, CUfunction fn, unsigned grid, unsigned block, unsigned smem_bytes,
                      CUstream stream, void** args, bool programmatic, unsigned cluster) {
  if (!programmatic && cluster <= 1)
    return d.cuLaunchKernel(fn, grid, 1, 1, block, 1, 1, smem_bytes, stream, args, nullptr);
  CuLaunchAttribute attrs[2];
  unsigned n = 0;
  if (programmatic) {
    attrs[n].id = kCuLaunchAttributeProgrammaticStreamSerialization;
    attrs[n++].value.programmatic_stream_serialization_allowed = 1;
  }
  if (cluster > 1) {
    attrs[n].id = kCuLaunchAttributeClusterDimension;
    attrs[n++].value.cluster_dim = {cluster, 1, 1};
  }
  CuLaunchConfig config;
  config.grid_x = grid;
  config.block_x = block;
  config.smem_bytes = smem_bytes;
  config.stream = stream;
  config.attrs = attrs;
  config.num_attrs = n;
  return d.cuLaunchKernelEx(&config, fn, args, nullptr);
}

absl::Status CuCheck(CUresult r, absl::string_view what) {
  if (r == 0) return absl::OkStatus();
  auto d = CudaDriver::Get();
  const std::string text = d.ok() ? (*d)->ErrorText(r) : absl::StrCat("CUresult ", r);
  return absl::InternalError(absl::StrCat(what, ": ", text));
}

}  // namespace memra::runtime::cuda
