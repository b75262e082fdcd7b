// Tells compute-sanitizer's initcheck that a device range was written by a library whose stores it
// does not see: cuBLASLt's products (bench/RESULTS.md session 16, tests/cuda/CublasLtWrites_test:
// initcheck reports a cuBLASLt output as never written although every element is). Through the
// NVTX memory API of the CUDA toolkit's nvtx3 headers (header-only; the sanitizer injects the tool
// that listens). Without a tool attached a call costs one branch; built without the toolkit's
// headers it does nothing. Deliberately free of runtime/cuda/CudaDriver.h (its own driver types
// would clash with the toolkit's).
#pragma once

#include <cstddef>
#include <cstdint>

namespace memra::runtime::cuda {

// `stream`: the CUstream the range was written on.
void MarkWrittenForInitcheck(uint64_t device_ptr, size_t bytes, void* stream);

}  // namespace memra::runtime::cuda
