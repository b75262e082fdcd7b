// The MoE layer's small kernels around the expert products (GemvQuant.cu's gemv_q_moe* in decode,
// MoeGemm.cu in prefill): the routing and the weighted sum of the experts' outputs with the
// shared expert's sigmoid gate. Semantics are ir/Ops.def's moe_route / moe_ffn / gated_add.
#include "Common.cuh"
#include "MoeParams.h"
#include "MoeRoute.cuh"

#ifndef MC_G
#define MC_G 0  // moe_combine: the shared gate vector's storage (0 f32, 1 f16, 2 bf16)
#endif

// One warp per token (MoeRoute.cuh).
extern "C" __global__ void __launch_bounds__(256) moe_route(const MoeRouteParams p) {
  memra_grid_dependency();
  const int lane = threadIdx.x & 31;
  const int warps = (int)(gridDim.x * (blockDim.x >> 5));
  for (int t = (int)(blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5)); t < p.n_tok; t += warps)
    route_softmax_warp<false>(p.logits + (i64)t * MR_E, p.ids + (i64)t * MR_K, p.weights + (i64)t * MR_K,
                              p.expert_scale, lane);
}

// Step 3.5's router, one warp per token (MoeRoute.cuh; p.expert_scale: the selection bias).
extern "C" __global__ void __launch_bounds__(256) moe_route_sigmoid(const MoeRouteParams p) {
  memra_grid_dependency();
  const int lane = threadIdx.x & 31;
  const int warps = (int)(gridDim.x * (blockDim.x >> 5));
  for (int t = (int)(blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5)); t < p.n_tok; t += warps)
    route_sigmoid_warp<false>(p.logits + (i64)t * MR_E, p.ids + (i64)t * MR_K, p.weights + (i64)t * MR_K,
                              p.expert_scale, p.scale, lane);
}

// Blocks of 256 threads, block b: token b / chunks, columns 1024 (b % chunks) + [0, 1024). With a shared
// expert each block first reduces x[t] . g (K = n values; every block of the token does it: n
// multiply-adds, cheaper than a launch); an ungated one (g null) adds its output with weight 1.
extern "C" __global__ void __launch_bounds__(256) moe_combine(const MoeCombineParams p) {
  memra_grid_dependency();
  const int chunks = (p.n + 1023) / 1024;
  const int t = (int)blockIdx.x / chunks, chunk = (int)blockIdx.x % chunks;
  if (t >= p.n_tok) return;
  float gate = 1.0f;  // an ungated shared expert (moe_ffn_ungated: no g) adds ys as it is
  if (p.ys != nullptr && p.g != nullptr) {
    float s = 0.0f;
    const float* xt = p.x + (i64)t * p.n;
    for (int c = threadIdx.x; c < p.n; c += blockDim.x) s += xt[c] * load_as_f32<MC_G>(p.g, c);
    gate = sigmoidf_(block_sum(s));
  }
  // An id outside [0, n_routed) (ids not from moe_route): its slot's rows were skipped, so the
  // token's row is NaN, which the logits check reports, never a silently wrong sum. A choice of
  // another rank's expert (expert parallelism) adds nothing: its rows were not written.
  const int routed = p.n_routed > 0 ? p.n_routed : p.n_experts;
  bool bad = false;
  unsigned mine = 0;  // bit i: choice i is one of this rank's experts (k <= 32)
  for (int i = 0; i < p.k; ++i) {
    const int e = p.ids[(i64)t * p.k + i];
    bad |= e < 0 || e >= routed;
    const int local = e - p.first_expert;
    if (local >= 0 && local < p.n_experts) mine |= 1u << i;
  }
  for (int c = chunk * 1024 + (int)threadIdx.x; c < min(p.n, (chunk + 1) * 1024); c += blockDim.x) {
    const float* o = p.o + (i64)t * p.k * p.n + c;
    const float* w = p.weights + (i64)t * p.k;
    // The CPU's order: w_0 o_0, then + w_i o_i (another rank's choice: + 0, i.e. skipped).
    float acc = (mine & 1u) ? o[0] * w[0] : 0.0f;
    for (int i = 1; i < p.k; ++i)
      if (mine & (1u << i)) acc = acc + o[(i64)i * p.n] * w[i];
    if (p.ys != nullptr) acc = acc + p.ys[(i64)t * p.n + c] * gate;
    p.y[(i64)t * p.n + c] = bad ? __int_as_float(0x7fc00000) : acc;
  }
}

extern "C" __global__ void gated_add_f32(const GatedAddParams p) {
  memra_grid_dependency();
  MEMRA_GRID_STRIDE(i, p.rows * p.n) {
    const i64 r = i / p.n;
    p.y[i] = p.a[i] + p.b[i] * sigmoidf_(p.g[r]);
  }
}
