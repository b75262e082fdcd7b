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
  bool gemv = false;             // one token: the products run on kernels/cuda/Gemv.cu (per weight
                                 // one `gemv` launch; matmul_swiglu one `gemv_swiglu`)
};

// Decode attention's key ranges per head (split-KV, kernels/cuda/Attention.cu attention_split):
// about two blocks per SM of an H200 (132 SMs) over all heads, at most 64.
int64_t AttentionSplits(int64_t q_heads);

// The storage the one-token GEMV reads a matrix weight stored as `stored` in: 1 f16, 2 bf16
// (also every quantized type, from its bf16 copy), 0 none (f32 weights stay on cuBLASLt, whose f32
// path matches the CPU executor to ~1e-5). 3 = q8 (Q8_0 kept as int8 + f32 scales, repacked at
// upload) exists in Gemv.cu but is not selected until it beats the bf16 copy (KernelSelect.cc).
int GemvStorage(ir::DType stored);

struct OpShapes {
  int64_t bucket = 1;
  std::vector<std::vector<int64_t>> in, out;  // concrete shapes at T = bucket
  std::vector<ir::DType> in_dtypes;           // device dtypes (weights: DeviceWeightDType)
};

absl::StatusOr<OpKernels> SelectKernels(const ir::Op& op, const OpShapes& shapes);

// The per-step scratch the CUDA executor needs for an op (one rule, shared by the select-kernels
// pass, which records `scratch_bytes = cast + aux` for plan-memory, and by the executor):
//   cast  the GEMM's 16-bit copy of the activations (when the launches include a
//         cast_f32_{bf16,f16}): bytes(operand 0) / 2, rounded up to 256;
//   aux   an f32 temporary of a fused op: matmul_swiglu's gate product (bytes(result 0)),
//         qk_norm_rope's normed q or k (max(bytes(q), bytes(k))).
// The scratch starts with the cast copy; the aux buffer sits at scratch + cast.
struct StepScratch {
  int64_t cast = 0, aux = 0;
  int64_t total() const { return cast + aux; }
};
StepScratch ScratchFor(const ir::Op& op, const OpShapes& shapes, const OpKernels& kernels);

// Whether every argument and result of `fn` has a static shape (a bucket function or @decode):
// the functions select-kernels annotates and the plan's kernel table covers.
bool IsStaticFunction(const ir::Function& fn);

// Every module function `fn` needs at `bucket` (deduplicated), for precompilation and CI.
absl::StatusOr<std::vector<ModuleSpec>> ModulesForFunction(const ir::Function& fn, int64_t bucket);
// The device greedy step closing the decode loop (kernels/cuda/Norm.cu `greedy_next`: argmax of
// the logits -> next input token + token ring) for a decode function returning f32[1, V].
absl::StatusOr<Launch> GreedyNextKernel(const ir::Function& decode);

// Concrete shapes of an op's operands and results at T = bucket (every symbol bound to it).
absl::StatusOr<OpShapes> ShapesAt(const ir::Op& op, int64_t bucket);

}  // namespace memra::codegen
