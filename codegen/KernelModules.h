// The codegen side of kernel selection: token buckets, and the kernel modules a static function
// needs (for NVRTC precompilation and the plan's kernel table). The selection itself is the GPU op
// units' (kernels/cuda/GpuOp.h, GpuOpRegistry.h).
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/Function.h"
#include "kernels/cuda/KernelSpec.h"
#include "kernels/cuda/Target.h"
#include "kernels/cuda/WeightLayout.h"

namespace memra::codegen {

// Prefill token buckets: 16, 32, ..., 4096 (T rounded up; beyond 4096, multiples of 4096).
const std::vector<int64_t>& BucketLadder();
// The bucket of a call with T tokens: 1 for T == 1 (decode), else the ladder rung >= T.
int64_t TokenBucket(int64_t T);

// Every module `fn` needs at `bucket` (deduplicated): the recorded selections when the function
// carries them, else selected for `target` with matrices held as `weights`; @decode adds the
// greedy pick of the device loop.
absl::StatusOr<std::vector<kernels::cuda::ModuleSpec>> ModulesForFunction(const ir::Function& fn, int64_t bucket,
                                                                          const kernels::cuda::Target& target,
                                                                          kernels::cuda::WeightMode weights);

}  // namespace memra::codegen
