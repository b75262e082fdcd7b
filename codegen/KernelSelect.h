// Kernel selection: IR op + concrete (bucket-sized) shapes -> the kernel instances and launch
// geometry the CUDA executor issues for it. Shared by the executor and by the NVRTC
// compile-everything check (which needs no GPU).
//
// Conventions: activations are f32 on the device; matrix weights live on the device as f32, f16
// or bf16 (DeviceWeightDType: quantized weights are dequantized to bf16 at upload, see
// docs/ARCHITECTURE.md "CUDA executor"); GEMMs run on cuBLASLt (an activation cast to the
// weight's 16-bit type first). Grids cover the bucket; kernels take the valid token count as a
// run-time argument and mask the padded rows.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "codegen/KernelCompiler.h"
#include "ir/DType.h"
#include "ir/Module.h"

namespace memra::codegen {

// Prefill token buckets: 16, 32, ..., 4096 (T rounded up; beyond 4096, multiples of 4096).
const std::vector<int64_t>& BucketLadder();
// The bucket of a call with T tokens: 1 for T == 1 (decode), else the ladder rung >= T.
int64_t TokenBucket(int64_t T);

// The device storage type of a weight stored as `stored`: f32/f16/bf16 as is, quantized -> bf16.
ir::DType DeviceWeightDType(ir::DType stored);
// 0 f32, 1 f16, 2 bf16 (the kernels' storage codes).
int StorageCode(ir::DType device_dtype);

struct Launch {
  KernelSpec kernel;
  uint32_t grid = 1;
  uint32_t block = 1;
  uint32_t smem = 0;
};

struct OpKernels {
  std::vector<Launch> launches;  // issued in this order (their arguments: CudaExecutor.cc)
  bool gemm = false;             // the op's products run on cuBLASLt
};

struct OpShapes {
  int64_t bucket = 1;
  std::vector<std::vector<int64_t>> in, out;  // concrete shapes at T = bucket
  std::vector<ir::DType> in_dtypes;           // device dtypes (weights: DeviceWeightDType)
};

absl::StatusOr<OpKernels> SelectKernels(const ir::Op& op, const OpShapes& shapes);

// Every module function `fn` needs at `bucket` (deduplicated), for precompilation and CI.
absl::StatusOr<std::vector<ModuleSpec>> ModulesForFunction(const ir::Function& fn, int64_t bucket);
// Concrete shapes of an op's operands and results at T = bucket (every symbol bound to it).
absl::StatusOr<OpShapes> ShapesAt(const ir::Op& op, int64_t bucket);

}  // namespace memra::codegen
