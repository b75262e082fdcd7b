// The MoE layer's small kernels around the expert products (GemvQuant.cu's gemv_q_moe* in decode,
// MoeGemm.cu in prefill): the routing and the weighted sum of the experts' outputs with the
// shared expert's sigmoid gate. Semantics are ir/Ops.def's moe_route / moe_ffn / gated_add.
#include "Common.cuh"
#include "MoeParams.h"

#ifndef MR_E
#define MR_E 256  // experts
#endif
#ifndef MR_K
#define MR_K 8  // experts chosen per token
#endif
#ifndef MC_G
#define MC_G 0  // moe_combine: the shared gate vector's storage (0 f32, 1 f16, 2 bf16)
#endif

// (value, index) order of the top-k: larger value first, then the lower index (ir/Ops.def).
__device__ __forceinline__ bool route_better(float v, int i, float bv, int bi) { return v > bv || (v == bv && i < bi); }

// One warp per token: softmax over the MR_E logits (max, exp, sum, one reciprocal: the CPU's
// order up to the sum's association), MR_K rounds of a warp arg-max that retire the winner, the
// k probabilities summed in choice order, clamped at 2^-14 (llama.cpp's), and divided.
extern "C" __global__ void __launch_bounds__(256) moe_route(const MoeRouteParams p) {
  memra_grid_dependency();
  constexpr int kPer = (MR_E + 31) / 32;
  const int lane = threadIdx.x & 31;
  const int warps = (int)(gridDim.x * (blockDim.x >> 5));
  for (int t = (int)(blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5)); t < p.n_tok; t += warps) {
    const float* l = p.logits + (i64)t * MR_E;
    float v[kPer];
    float mx = MEMRA_NEG_INF;
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      const int e = lane + 32 * i;
      v[i] = e < MR_E ? l[e] : MEMRA_NEG_INF;
      mx = fmaxf(mx, v[i]);
    }
    mx = warp_max(mx);
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      v[i] = lane + 32 * i < MR_E ? expf(v[i] - mx) : 0.0f;
      sum += v[i];
    }
    const float inv = 1.0f / warp_sum(sum);
#pragma unroll
    for (int i = 0; i < kPer; ++i) v[i] = lane + 32 * i < MR_E ? v[i] * inv : -1.0f;  // padding never wins
    float chosen_v = 0.0f, total = 0.0f;
    int chosen_i = 0;
#pragma unroll 1
    for (int j = 0; j < MR_K; ++j) {
      float bv = -2.0f;  // below every probability and the padding
      int bi = 0x7fffffff;
#pragma unroll
      for (int i = 0; i < kPer; ++i)
        if (route_better(v[i], lane + 32 * i, bv, bi)) bv = v[i], bi = lane + 32 * i;
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) {
        const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
        const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
        if (route_better(ov, oi, bv, bi)) bv = ov, bi = oi;
      }
      if (bi >= MR_E) bi = j, bv = __int_as_float(0x7fc00000);  // NaN probabilities: a valid id, a NaN weight
#pragma unroll
      for (int i = 0; i < kPer; ++i)
        if (lane + 32 * i == bi) v[i] = -3.0f;  // retired
      total += bv;
      if (lane == j) chosen_v = bv, chosen_i = bi;
    }
    total = fmaxf(total, 6.103515625e-5f);
    if (lane < MR_K) {
      p.ids[(i64)t * MR_K + lane] = chosen_i;
      float wgt = chosen_v / total;
      if (p.expert_scale != nullptr) wgt *= p.expert_scale[chosen_i];  // after the renormalization, as the CPU
      p.weights[(i64)t * MR_K + lane] = wgt;
    }
  }
}

#ifndef MR_NORM
#define MR_NORM 0  // moe_route_sigmoid: the chosen weights renormalized (ir/Ops.def norm)
#endif

// Step 3.5's router, one warp per token: p = sigmoid(logits) (sigmoid_f32's), the selection score
// p + bias (when p.expert_scale is set), MR_K rounds of a warp arg-max over the scores that
// retire the winner and fetch its unbiased p; MR_NORM: divided by the chosen p's sum (in choice
// order, clamped at 2^-14); then times p.scale (ir/Ops.def moe_route_sigmoid).
extern "C" __global__ void __launch_bounds__(256) moe_route_sigmoid(const MoeRouteParams p) {
  memra_grid_dependency();
  constexpr int kPer = (MR_E + 31) / 32;
  const int lane = threadIdx.x & 31;
  const int warps = (int)(gridDim.x * (blockDim.x >> 5));
  for (int t = (int)(blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5)); t < p.n_tok; t += warps) {
    const float* l = p.logits + (i64)t * MR_E;
    float prob[kPer], score[kPer];
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      const int e = lane + 32 * i;
      prob[i] = e < MR_E ? sigmoidf_(l[e]) : 0.0f;
      score[i] = e < MR_E ? (p.expert_scale != nullptr ? prob[i] + p.expert_scale[e] : prob[i]) : MEMRA_NEG_INF;
    }
    float chosen_v = 0.0f, total = 0.0f;
    int chosen_i = 0;
#pragma unroll 1
    for (int j = 0; j < MR_K; ++j) {
      float bv = MEMRA_NEG_INF;
      int bi = 0x7fffffff;
#pragma unroll
      for (int i = 0; i < kPer; ++i)
        if (lane + 32 * i < MR_E && route_better(score[i], lane + 32 * i, bv, bi)) bv = score[i], bi = lane + 32 * i;
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) {
        const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
        const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
        if (route_better(ov, oi, bv, bi)) bv = ov, bi = oi;
      }
      float mine = 0.0f;
#pragma unroll
      for (int i = 0; i < kPer; ++i)
        if (lane + 32 * i == bi) mine = prob[i], score[i] = MEMRA_NEG_INF, prob[i] = 0.0f;  // retired
      float pv = __shfl_sync(0xffffffffu, mine, bi & 31);
      if (bi >= MR_E) bi = j, pv = __int_as_float(0x7fc00000);  // NaN scores: a valid id, a NaN weight
      total += pv;
      if (lane == j) chosen_v = pv, chosen_i = bi;
    }
    if (lane < MR_K) {
      float wgt = chosen_v;
      if (MR_NORM) wgt = chosen_v / fmaxf(total, 6.103515625e-5f);
      if (p.scale != 1.0f) wgt *= p.scale;
      p.ids[(i64)t * MR_K + lane] = chosen_i;
      p.weights[(i64)t * MR_K + lane] = wgt;
    }
  }
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
