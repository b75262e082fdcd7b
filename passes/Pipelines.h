// The compile pipelines. kDefaultPipeline (the CPU's: `memra compile --arch cpu`, the CPU
// backend of `memra run MODEL.gguf`) and kCudaPipeline (`memra compile --arch sm_NN`, the CUDA
// backend; PipelineForArch picks one); --passes overrides them.
//
//   canonicalize, cse            clean the lowered module
//   fuse-attention-output-gate   attention * sigmoid(gate)        -> attention_gated
//   fuse-qk-norm-rope            rope(rms_norm(q)), rope(rms_norm(k)) -> qk_norm_rope
//   fuse-kv-append-norm          kv_append(k, rms_norm(v))        -> kv_append {v_norm_eps}
//   fuse-swiglu                  swiglu(matmul, matmul)           -> matmul_swiglu
//   fuse-moe-ffn                 gated_add(moe_experts, shared expert, gate) -> moe_ffn
//   fuse-gated-rmsnorm           rms_norm * silu                  -> gated_rms_norm
//   fuse-delta-net-inputs        silu(conv1d_causal), l2_norm q/k -> attributes of conv / scan
//   fuse-delta-net-step          one token's conv, gates, scan, gated norm -> delta_net_step
//   fuse-gated-attention-step    one token's q/gate split, q/k norm + rope, KV append, gated
//                                attention -> gated_attention_step
//   fuse-qk-norm-rope-append     one token's qk_norm_rope + kv_append -> qk_norm_rope_append
//   fuse-add-rmsnorm             rms_norm(add)                    -> add_rms_norm
//   fuse-matmul-group            matmuls of one input             -> matmul_group
//   fuse-rows                    runs of row ops (norms, adds, scales) -> fused_rows
//   dce                          drop what fusion left unused
//   bucket-shapes                @prefill -> @prefill_t16 ... @prefill_t4096 (static shapes)
//   fuse-add-rmsnorm-matmul      (opt-in) one-token add_rms_norm -> the prologue of its products
//   fuse-moe-router              (opt-in, before fuse-matmul-group) one token's router matmul +
//                                moe_route(_sigmoid) -> moe_router
//   fuse-matmul-add-rmsnorm      (opt-in, after fuse-rows) one token's product + the add_rms_norm
//                                after it -> matmul_add_rms_norm
//   fuse-matmul-delta-net-step   (opt-in, after fuse-matmul-group) one token's float input
//                                projections + delta_net_step -> matmul_delta_net_step
//   The three opt-in launch fusions (a product's last block runs the op after it) measured slower
//   than the two launches under programmatic dependent launch (bench/RESULTS.md, session 37:
//   0.8B bf16 tg128 -7 %, -13 %; Step 3.5 Q4_K_M -13 % for the norm tail), as was the norm
//   prologue (session 18): a launch the GEMVs' prefetch hides costs less than a serial tail.
//   select-kernels{last-block-merge} (the split-KV attention's merge as its last blocks) likewise.
//   select-kernels               (CUDA only) kernels, launch geometry and scratch_bytes per op
//                                of the static functions (codegen/SelectKernelsPass.h)
//   plan-memory                  static arena offsets per function (incl. the ops' scratch)
//   partition-segments           capturable runs -> segment regions
//
// Order matters: fuse-swiglu before fuse-moe-ffn (which matches the shared expert's
// matmul_swiglu), both before fuse-matmul-group (which would group gate/up first, and the shared
// expert's gate with the router), as is fuse-moe-router when asked for (the router's matmul alone); the
// shape-dependent passes after fusion (so the arena holds the fused ops' buffers); select-kernels
// after bucket-shapes (it needs static shapes) and before plan-memory (which places the
// scratch_bytes it records). The plan's kernel table (runtime/plan/KernelTable.h) compiles the
// kernel modules select-kernels names.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace memra::passes {

inline constexpr absl::string_view kDefaultPipeline =
    "canonicalize,cse,fuse-attention-output-gate,fuse-qk-norm-rope,fuse-kv-append-norm,fuse-swiglu,fuse-moe-ffn,"
    "fuse-gated-rmsnorm,fuse-delta-net-inputs,fuse-delta-net-step,fuse-gated-attention-step,fuse-qk-norm-rope-append,"
    "fuse-add-rmsnorm,fuse-matmul-group,fuse-rows,"
    "dce,bucket-shapes,plan-memory,partition-segments";

// The CUDA backend's pipeline: kDefaultPipeline with fuse-delta-net-inputs once more after
// bucket-shapes (the prefill buckets of 64 tokens or more, whose chunked scans take their q/k
// norms) and select-kernels (arch sm_90) before plan-memory. fuse-add-rmsnorm-matmul (the decode
// GEMVs' norm prologue) is not in it: measured slower on the H200 (bench/RESULTS.md, session 18),
// the separate norm launch being hidden by the GEMVs' prefetch under programmatic dependent launch.
inline constexpr absl::string_view kCudaPipeline =
    "canonicalize,cse,fuse-attention-output-gate,fuse-qk-norm-rope,fuse-kv-append-norm,fuse-swiglu,fuse-moe-ffn,"
    "fuse-gated-rmsnorm,fuse-delta-net-inputs,fuse-delta-net-step,fuse-gated-attention-step,fuse-qk-norm-rope-append,"
    "fuse-add-rmsnorm,fuse-matmul-group,fuse-rows,"
    "dce,bucket-shapes,fuse-delta-net-inputs,select-kernels,plan-memory,partition-segments";

// The pipeline for a target arch (as `--arch` takes it): "cpu" -> kDefaultPipeline; "sm_NN" ->
// kCudaPipeline with select-kernels{arch=sm_NN} (the option written only when not sm_90) and
// `weights` (select-kernels' weights option, "blocks" or "bf16": `--weights`; written only when
// not the default blocks) and `decode_class` (select-kernels' decode-class, kernels/cuda/
// DecodeClass.h: written only when not the default bucket).
std::string PipelineForArch(absl::string_view arch, absl::string_view weights = "blocks",
                            absl::string_view decode_class = "bucket");
// The CUDA pipeline for a device: select-kernels{arch=sm_NN sm-count=N [weights=bf16]
// [decode-class=exact]} (memra run / bench / serve pass the device's target, so the recorded
// selection matches the GPU it runs on).
std::string PipelineForTarget(absl::string_view arch, int sm_count, absl::string_view weights = "blocks",
                              absl::string_view decode_class = "bucket");

// `pipeline` for a module lowered with slots on a backend that needs static shapes: its
// bucket-shapes specializes @step (not @prefill) per row bucket of `ladder` ("1:2:4:...", a step
// is padded to the next one), without the generic function and without the n_ctx cap (a step's
// rows come from several sequences), then fuse-delta-net-inputs again (the small buckets' per-slot
// scans take their q/k l2 norms).
std::string StepPipeline(absl::string_view pipeline, absl::string_view ladder);

// The fusion passes only (no buckets, no memory plan, no segments): what a backend that takes
// symbolic shapes runs.
inline constexpr absl::string_view kFusionPipeline =
    "canonicalize,cse,fuse-attention-output-gate,fuse-qk-norm-rope,fuse-kv-append-norm,fuse-swiglu,fuse-moe-ffn,"
    "fuse-gated-rmsnorm,fuse-delta-net-inputs,fuse-delta-net-step,fuse-gated-attention-step,fuse-qk-norm-rope-append,"
    "fuse-add-rmsnorm,fuse-matmul-group,fuse-rows,"
    "dce";

// `pipeline` with the bucket ladder set on its bucket-shapes pass (`buckets` in the form of the
// --buckets flag: "16,32,64", "16..4096"; empty: unchanged).
std::string WithBucketLadder(absl::string_view pipeline, absl::string_view buckets);

// `pipeline` with shard-tensor-parallel{tp=N} in front (the partition runs on the lowered module,
// before the fusions; docs/design/tensor-parallel.md): the module every one of N ranks runs. tp 1,
// or a pipeline that already partitions: unchanged.
std::string WithTensorParallel(absl::string_view pipeline, int64_t tp);

}  // namespace memra::passes
