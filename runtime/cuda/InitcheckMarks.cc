#include "runtime/cuda/InitcheckMarks.h"

#if MEMRA_HAVE_NVTX_MEM
#include <nvtx3/nvToolsExtMemCudaRt.h>
#endif

namespace memra::runtime::cuda {

#if MEMRA_HAVE_NVTX_MEM
void MarkWrittenForInitcheck(uint64_t device_ptr, size_t bytes, void* stream) {
  static const nvtxDomainHandle_t domain = nvtxDomainCreateA("memra");
  nvtxMemVirtualRangeDesc_t range{};
  range.size = bytes;
  range.ptr = reinterpret_cast<const void*>(static_cast<uintptr_t>(device_ptr));
  nvtxMemMarkInitializedBatch_t batch{};
  batch.extCompatID = NVTX_EXT_COMPATID_MEM;
  batch.structSize = sizeof(batch);
  batch.regionType = NVTX_MEM_TYPE_VIRTUAL_ADDRESS;
  batch.regionDescCount = 1;
  batch.regionDescElementSize = sizeof(range);
  batch.regionDescElements = &range;
  nvtxMemCudaMarkInitialized(domain, static_cast<cudaStream_t>(stream), 0, &batch);
}
#else
void MarkWrittenForInitcheck(uint64_t, size_t, void*) {}
#endif

}  // namespace memra::runtime::cuda
