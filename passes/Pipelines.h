// The default compile pipeline, used by `memra compile` and by `memra run MODEL.gguf` (which
// compiles in memory before running); --passes overrides it on both.
//
//   canonicalize, cse            clean the lowered module
//   fuse-attention-output-gate   attention * sigmoid(gate)        -> attention_gated
//   fuse-qk-norm-rope            rope(rms_norm(q)), rope(rms_norm(k)) -> qk_norm_rope
//   fuse-swiglu                  swiglu(matmul, matmul)           -> matmul_swiglu
//   fuse-gated-rmsnorm           rms_norm * silu                  -> gated_rms_norm
//   fuse-add-rmsnorm             rms_norm(add)                    -> add_rms_norm
//   fuse-matmul-group            matmuls of one input             -> matmul_group
//   dce                          drop what fusion left unused
//   bucket-shapes                @prefill -> @prefill_t16 ... @prefill_t4096 (static shapes)
//   plan-memory                  static arena offsets per function
//   partition-segments           capturable runs -> segment regions
//
// Order matters: fuse-swiglu before fuse-matmul-group (which would group gate/up first); the
// shape-dependent passes after fusion (so the arena holds the fused ops' buffers). Kernel
// selection (codegen/KernelSelect.h) is not an IR pass: the CUDA backend selects kernels per op
// and bucket from this pipeline's output when it builds the plan's kernel table.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace memra::passes {

inline constexpr absl::string_view kDefaultPipeline =
    "canonicalize,cse,fuse-attention-output-gate,fuse-qk-norm-rope,fuse-swiglu,fuse-gated-rmsnorm,"
    "fuse-add-rmsnorm,fuse-matmul-group,dce,bucket-shapes,plan-memory,partition-segments";

// The fusion passes only (no buckets, no memory plan, no segments): what a backend that takes
// symbolic shapes runs.
inline constexpr absl::string_view kFusionPipeline =
    "canonicalize,cse,fuse-attention-output-gate,fuse-qk-norm-rope,fuse-swiglu,fuse-gated-rmsnorm,"
    "fuse-add-rmsnorm,fuse-matmul-group,dce";

// `pipeline` with the bucket ladder set on its bucket-shapes pass (`buckets` in the form of the
// --buckets flag: "16,32,64", "16..4096"; empty: unchanged).
std::string WithBucketLadder(absl::string_view pipeline, absl::string_view buckets);

}  // namespace memra::passes
